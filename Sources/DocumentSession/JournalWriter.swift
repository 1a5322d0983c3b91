import FileStore
import Synchronization
import SystemCalls
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// What the store asks of the journal's writer, in order.
enum JournalJob: Sendable {
    /// Starts the document's journal (or starts it again: its base changed, or it grew past its
    /// bound): the header, the base text, and `text` when it is not the base; then the journal it
    /// had, if any, goes. (Indirect, as the rare cases are: the common one, `change`, stays small.)
    indirect case start(handle: String, name: String, header: JournalHeader, base: TextBuffer, text: TextBuffer, version: Int64, unsaved: Bool)
    /// A change of the text, encoded and appended by the writer's thread: the request path only
    /// hands it over (its edits are the history's, shared).
    case change(handle: String, change: JournalChange, version: Int64, unsaved: Bool)
    /// The document's file moved: the journal takes the name for the new path and records it.
    indirect case rename(handle: String, name: String, record: [UInt8])
    /// Deletes the document's journal (saved, reverted, closed without saving, discarded).
    case drop(handle: String)
    /// Closes the document's journal without deleting it, flushed, and lets it go: it is a dead
    /// server's from then on, offered at the file's next open (a daemon's last holder vanished).
    case release(handle: String)
    /// Makes a dead server's journal this document's, cut at `length`.
    indirect case adopt(handle: String, journal: ClaimedJournal, length: Int)
    /// Starts (or starts again) a package's journal (PackageJournal.swift) with the framed records
    /// `records` makes, on the writer's thread (the request path only hands the entries over: an
    /// entry's bytes are copied into a record there, not on the loop); then the journal it had, if
    /// any, goes.
    indirect case startRecords(handle: String, name: String, records: @Sendable () throws(FileSystemError) -> [UInt8])
    /// Appends the framed records `records` makes (on the writer's thread) to a package's journal.
    indirect case appendRecords(handle: String, records: @Sendable () -> [UInt8])
    /// Deletes every journal of this process (a shutdown without hot exit).
    case dropAll
    /// Closes every journal of this process without deleting it, as the process's death would
    /// (tests play a dead server this way).
    case releaseAll
    /// Reads back the document's journal as written so far (its changes submitted before
    /// included), into `into` (nil there when it has none or it cannot be read): a session
    /// snapshot's copy.
    case copy(handle: String, into: JournalCopy)
}

/// Where the writer puts a journal's bytes read back for a copy (``JournalJob/copy(handle:into:)``).
final class JournalCopy: Sendable {
    let bytes = Mutex<[UInt8]?>(nil)
}

/// Writes the journals on a thread of its own (`ds-journal`), so that no request ever waits for a
/// write or a flush: the store appends jobs (``submit(_:)``: a lock and, for the first job of a
/// batch, one eventfd write) and goes on. The thread takes the jobs in batches, at most
/// ``flushDelay`` after the first of a batch, writes them and flushes each file it wrote
/// (`fdatasync`): the loss window is the delay plus one flush. ``flush()`` and
/// ``flushBlocking(within:)`` make the thread write at once and wait for it (shutdown, the end of
/// input, a signal).
final class JournalWriter: @unchecked Sendable {
    // @unchecked: `files` is touched only by the writer's thread; the rest is under `state`'s lock.
    private struct State {
        var jobs: [JournalJob] = []
        var firstPending: ContinuousClock.Instant? = nil
        var urgent = false
        /// Jobs submitted, and jobs written and flushed (counts that only go up).
        var submitted: UInt64 = 0
        var done: UInt64 = 0
        var waiters: [(ticket: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        var flushDelay: Duration
    }

    private let state: Mutex<State>
    private let wake: EventDescriptor
    let directory: JournalDirectory
    /// Told when a document's journal cannot be written (its journal is gone then: the next change
    /// starts a new one).
    private let onError = Mutex<(@Sendable (_ handle: String, _ error: FileSystemError?) -> Void)?>(nil)
    /// The same for packages' journals (their handles are the package store's).
    private let onPackageError = Mutex<(@Sendable (_ handle: String, _ error: FileSystemError?) -> Void)?>(nil)
    private var files: [String: JournalFile] = [:]
    /// The names of the journals this process writes or has been asked to (from the submission of
    /// a start, rename or adoption until the file is deleted or let go): a look for other servers'
    /// journals passes over them, even while a deletion is still on its way.
    private let owned = Mutex<Set<String>>([])
    /// The documents whose journal failed and has not been written since (the writer's thread only).
    private var failing: Set<String> = []

    /// Starts the writer's thread. Throws when no eventfd or thread can be had.
    init(directory: JournalDirectory, flushDelay: Duration) throws(SystemCallError) {
        self.directory = directory
        state = Mutex(State(flushDelay: flushDelay))
        wake = try EventDescriptor()
        try startThread(name: "ds-journal") { [self] in run() }
    }

    /// Sets who is told of a journal that cannot be written (and, with nil, of one written again
    /// after that).
    func setErrorHandler(_ handler: @escaping @Sendable (_ handle: String, _ error: FileSystemError?) -> Void) {
        onError.withLock { $0 = handler }
    }

    /// Sets who is told of a package's journal that cannot be written (``setErrorHandler(_:)``).
    func setPackageErrorHandler(_ handler: @escaping @Sendable (_ handle: String, _ error: FileSystemError?) -> Void) {
        onPackageError.withLock { $0 = handler }
    }

    /// How long changes may wait before they are written and flushed.
    var flushDelay: Duration {
        get { state.withLock { $0.flushDelay } }
        set { state.withLock { $0.flushDelay = newValue } }
    }

    /// Whether `name` is a journal of this process's (see `owned`).
    func owns(_ name: String) -> Bool { owned.withLock { $0.contains(name) } }

    /// Queues a job; never waits for the disk.
    func submit(_ job: JournalJob) {
        switch job {
        case .start(_, let name, _, _, _, _, _), .rename(_, let name, _): owned.withLock { _ = $0.insert(name) }
        case .adopt(_, let journal, _): owned.withLock { _ = $0.insert(journal.name) }
        case .startRecords(_, let name, _): owned.withLock { _ = $0.insert(name) }
        case .appendRecords, .change, .drop, .release, .dropAll, .releaseAll, .copy: break
        }
        let first = state.withLock { state -> Bool in
            state.jobs.append(job)
            state.submitted += 1
            guard state.firstPending == nil else { return false }
            state.firstPending = .now
            return true
        }
        if first { try? wake.notify() }
    }

    /// Waits until every job submitted so far is written and flushed (at once, not after the delay).
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.done >= state.submitted { return true }
                state.urgent = true
                state.waiters.append((state.submitted, continuation))
                return false
            }
            if ready { continuation.resume() } else { try? wake.notify() }
        }
    }

    /// The document's journal as written so far, every change submitted before included (read
    /// back in order by the writer's thread); nil when it has none or it cannot be read.
    func copy(of handle: String) async -> [UInt8]? {
        let copy = JournalCopy()
        submit(.copy(handle: handle, into: copy))
        await flush()
        return copy.bytes.withLock { $0 }
    }

    /// ``flush()`` for a thread that may block (a signal's, the process's last moments): true when
    /// everything submitted was written within `limit`.
    func flushBlocking(within limit: Duration) -> Bool {
        let ticket = state.withLock { state -> UInt64 in
            state.urgent = true
            return state.submitted
        }
        try? wake.notify()
        let deadline = ContinuousClock.now + limit
        while state.withLock({ $0.done }) < ticket {
            if ContinuousClock.now >= deadline { return false }
            var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
            nanosleep(&pause, nil)
        }
        return true
    }

    // MARK: - The thread

    private func run() {
        while true {
            _ = try? pollDescriptor(wake.descriptor.unowned, events: Int16(POLLIN), timeoutMilliseconds: -1)
            _ = try? wake.reset()
            // A batch: everything that comes in until the first job has waited three quarters of
            // the delay; the last quarter is for the writes, the flushes and a busy machine's wait
            // for a processor, so that a change is on disk within the delay.
            while true {
                let (due, urgent) = state.withLock { ($0.firstPending.map { [delay = $0.flushDelay] in $0 + delay * 3 / 4 }, $0.urgent) }
                guard let due, !urgent else { break }
                let left = due - .now
                if left <= .zero { break }
                let milliseconds = Int32(clamping: max(1, (left.components.seconds * 1000) + left.components.attoseconds / 1_000_000_000_000_000))
                _ = try? pollDescriptor(wake.descriptor.unowned, events: Int16(POLLIN), timeoutMilliseconds: milliseconds)
                _ = try? wake.reset()
            }
            let (jobs, through) = state.withLock { state -> ([JournalJob], UInt64) in
                defer {
                    state.jobs = []
                    state.firstPending = nil
                    state.urgent = false
                }
                return (state.jobs, state.submitted)
            }
            write(jobs)
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = through
                let ready = state.waiters.filter { $0.ticket <= through }.map(\.continuation)
                state.waiters.removeAll { $0.ticket <= through }
                return ready
            }
            for continuation in ready { continuation.resume() }
        }
    }

    /// Does `jobs` in order, then flushes every file written (and the directory, after a creation
    /// or rename).
    private func write(_ jobs: [JournalJob]) {
        var touched: Set<String> = []
        var directoryChanged = false
        var failed: [String: FileSystemError] = [:]
        // The changes of the batch, encoded per document and written with one write(2) each, before
        // any other job on that document and at the end.
        var pending: [String: JournalBytes] = [:]
        func writePending(_ handle: String) {
            guard let buffered = pending.removeValue(forKey: handle), let file = files[handle] else { return }
            do throws(FileSystemError) {
                try file.append(buffered.bytes)
                touched.insert(handle)
            } catch {
                forget(files.removeValue(forKey: handle), delete: true)
                failed[handle] = error
            }
        }
        // A new journal for the document: made, written by `fill`, and put in place of the one
        // it had (deleted); on a failure, neither is kept.
        func create(_ handle: String, _ name: String, fill: (JournalFile) throws(FileSystemError) -> Void) {
            failed[handle] = nil
            do throws(FileSystemError) {
                let file = try JournalFile.create(in: directory, name: name)
                do throws(FileSystemError) { try fill(file) } catch {
                    forget(file, delete: true)
                    throw error
                }
                forget(files.removeValue(forKey: handle), delete: true)
                files[handle] = file
                touched.insert(handle)
                directoryChanged = true
            } catch {
                forget(files.removeValue(forKey: handle), delete: true)
                owned.withLock { _ = $0.remove(name) }
                failed[handle] = error
            }
        }
        for job in jobs {
            switch job {
            case .change(let handle, let change, let version, let unsaved):
                guard files[handle] != nil else { continue }
                JournalCodec.appendChange(change, version: version, unsaved: unsaved, to: &pending[handle, default: JournalBytes()])
                continue
            case .start(let handle, _, _, _, _, _, _), .rename(let handle, _, _), .drop(let handle), .adopt(let handle, _, _),
                 .copy(let handle, _), .release(let handle), .startRecords(let handle, _, _), .appendRecords(let handle, _):
                writePending(handle)
            case .dropAll, .releaseAll:
                for handle in Array(pending.keys) { writePending(handle) }
            }
            switch job {
            case .change:
                break
            case .start(let handle, let name, let header, let base, let text, let version, let unsaved):
                create(handle, name) { (file) throws(FileSystemError) in
                    try file.append(JournalCodec.header(header))
                    try Self.appendText(base, type: .base, prefix: [], to: file)
                    if !text.isIdentical(to: base), text != base {
                        var prefix = JournalBytes()
                        prefix.i64(version)
                        prefix.bool(unsaved)
                        try Self.appendText(text, type: .text, prefix: prefix.bytes, to: file)
                    }
                }
            case .rename(let handle, let name, let record):
                guard let file = files[handle] else { continue }
                do throws(FileSystemError) {
                    let old = file.name
                    try file.rename(to: name)
                    owned.withLock { _ = $0.remove(old) }
                    try file.append(record)
                    touched.insert(handle)
                    directoryChanged = true
                } catch {
                    forget(files.removeValue(forKey: handle), delete: true)
                    failed[handle] = error
                }
            case .drop(let handle):
                forget(files.removeValue(forKey: handle), delete: true)
                touched.remove(handle)
                failed[handle] = nil
            case .release(let handle):
                if let file = files.removeValue(forKey: handle) {
                    try? file.sync()
                    forget(file, delete: false)
                }
                touched.remove(handle)
                failed[handle] = nil
            case .adopt(let handle, let journal, let length):
                do throws(FileSystemError) {
                    let file = try journal.reopenForAppending(length: length)
                    forget(files.removeValue(forKey: handle), delete: true)
                    files[handle] = file
                    touched.insert(handle)
                } catch {
                    failed[handle] = error
                }
            case .startRecords(let handle, let name, let records):
                create(handle, name) { (file) throws(FileSystemError) in try file.append(try records()) }
            case .appendRecords(let handle, let records):
                guard let file = files[handle] else { continue }
                do throws(FileSystemError) {
                    try file.append(records())
                    touched.insert(handle)
                } catch {
                    forget(files.removeValue(forKey: handle), delete: true)
                    failed[handle] = error
                }
            case .dropAll:
                for file in files.values { forget(file, delete: true) }
                files = [:]
                touched = []
            case .copy(let handle, let copy):
                let bytes = try? files[handle]?.contents()
                copy.bytes.withLock { $0 = bytes }
            case .releaseAll:
                for file in files.values {
                    try? file.sync()
                    forget(file, delete: false)
                }
                files = [:]
                touched = []
            }
        }
        for handle in Array(pending.keys) { writePending(handle) }
        for handle in touched {
            guard let file = files[handle] else { continue }
            do throws(FileSystemError) { try file.sync() } catch {
                forget(files.removeValue(forKey: handle), delete: true)
                failed[handle] = error
            }
        }
        if directoryChanged { try? flushDirectory(at: directory.path) }
        let textHandler = onError.withLock { $0 }, packageHandler = onPackageError.withLock { $0 }
        func handler(_ handle: String) -> (@Sendable (String, FileSystemError?) -> Void)? {
            PackageStore.isPackageHandle(handle) ? packageHandler : textHandler
        }
        for (handle, error) in failed {
            failing.insert(handle)
            handler(handle)?(handle, error)
        }
        // Written again after a failure: the store hears that too (nil).
        for handle in failing where files[handle] != nil && failed[handle] == nil && touched.contains(handle) {
            failing.remove(handle)
            handler(handle)?(handle, nil)
        }
    }

    /// A journal file let go: deleted (`delete`) or only closed, and no longer this process's.
    private func forget(_ file: JournalFile?, delete: Bool) {
        guard let file else { return }
        if delete { file.remove() }
        owned.withLock { _ = $0.remove(file.name) }
    }

    /// Appends a record holding `prefix` and then the whole of `text` (UTF-8), chunk by chunk.
    private static func appendText(_ text: TextBuffer, type: JournalRecordType, prefix: [UInt8], to file: JournalFile) throws(FileSystemError) {
        try file.appendRecord(type: type.rawValue, prefix: prefix, length: text.utf8Count) { body in
            for chunk in text.utf8Chunks { chunk.withUnsafeBytes { body($0) } }
        }
    }
}
