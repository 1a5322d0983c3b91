import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A registration with a ``FileWatcher``: what ``FileWatcher/watch(path:)`` answers and
/// ``FileWatcher/unwatch(_:)`` takes back.
public struct WatchToken: Sendable, Hashable {
    let id: UInt64
}

/// Something that happened to a watched file, as a value.
public struct FileEvent: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The file's content (or its metadata) may have changed: reported once the name has been
        /// quiet for the debounce window, so a truncate-then-write or a storm of writes is one event.
        /// With `closesAfterReading`, also a file closed after being read (see the initializer).
        case modified
        /// Another file now holds the name: something was renamed onto it (an atomic replace by
        /// another program, `sed -i`, or our own safe save), or it was created (again) at the name,
        /// including a delete or move away followed within the window by a new file at the name.
        case replaced
        /// The name was unlinked.
        case deleted
        /// The file was renamed to a place no watched directory sees (its `IN_MOVED_FROM` found no
        /// `IN_MOVED_TO` within the window): where it went is unknown.
        case movedAway(cookie: UInt32)
        /// The file was renamed to `newPath` (in its own directory or another watched one).
        case movedTo(newPath: String)
        /// Events were lost (the kernel's queue overflowed) or the directory itself was moved,
        /// deleted or unmounted: compare the file's identity again.
        case rescan
        /// Another name in the file's directory, one the registration's `siblings` filter took,
        /// was created, written, renamed in or out, or deleted (debounced as the file's own
        /// events are): look at the directory.
        case sibling(name: String)
    }

    /// The path the file was registered with.
    public var path: String
    /// The registration this event is for.
    public var token: WatchToken
    public var kind: Kind

    public init(path: String, token: WatchToken, kind: Kind) {
        self.path = path
        self.token = token
        self.kind = kind
    }

    public var description: String { "\(kind) \(path)" }
}

/// Watches files through inotify on their *parent directories* (so renames onto a name, atomic
/// replaces and deletions are seen, which a watch on the file's inode misses), with one inotify
/// descriptor read on one dedicated thread, off the request path.
///
/// - Several files in one directory share one directory watch (reference-counted); a directory is
///   known by its inode (inotify answers the same watch descriptor for two spellings of it).
/// - Events for a name are collected until the name has been quiet for the debounce window
///   (50 ms by default), then reported as values to the handler, on the watcher's thread, in the
///   order their windows ended. The handler must not block for long; it may call `watch`,
///   `unwatch` and `stop`.
/// - A rename pairs `IN_MOVED_FROM` and `IN_MOVED_TO` by cookie (within the window, also across
///   read batches and across watched directories): ``FileEvent/Kind/movedTo(newPath:)`` for the
///   file moved, ``FileEvent/Kind/replaced`` for a watched name it lands on.
/// - On an overflow of the kernel's queue every watched file gets ``FileEvent/Kind/rescan``.
///
/// An event says where to look, not what changed: the caller compares the file's identity now
/// (``FileIdentity/current(path:)``) with the one it recorded at its last read or save, with
/// ``classify(recorded:now:)``. That is also how the caller's own saves are told apart: a save
/// through ``SafeSave`` produces a `.replaced` whose identity is the one the save answered, so it
/// classifies `.unchanged` provided the caller handles the event after recording the save's
/// identity (an event arriving while a save of that file is in flight should wait for the save to
/// end).
///
/// Registered paths are taken as given: a caller wanting a symlink's target watched registers the
/// resolved path. The watcher does not follow a moved file by itself: after `.movedTo` the caller
/// watches the new path and unwatches the old one (a file moved twice within one window is
/// reported at its first destination; the identity check at the new path tells it moved again).
public final class FileWatcher: Sendable {
    /// How a file's identity now compares with the identity recorded for it.
    public enum Change: Sendable, Hashable {
        /// The same file in the same state (inode, size, both times; hashes too when both known).
        case unchanged
        /// The same file and size, but a time moved (a touch, a chmod, or a same-size write with
        /// the modification time restored): hash it to tell. With both content hashes known and
        /// equal, a rewrite of the same bytes.
        case touched
        /// The same file with other content: the size differs, or both hashes are known and differ.
        case contentChanged
        /// Another file (device or inode) holds the name.
        case replacedByAnotherFile
        /// No file holds the name.
        case gone
    }

    /// The default debounce window.
    public static let defaultDebounce: Duration = .milliseconds(50)

    /// The events a directory watch asks for.
    static let mask: UInt32 = UInt32(
        IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
            | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    private let core: WatcherCore

    /// Starts a watcher: opens its inotify descriptor and wake-up descriptor and starts its thread.
    /// `handler` receives every event, on the watcher's thread.
    ///
    /// With `closesAfterReading`, a watched file closed after being opened without writing
    /// (`IN_CLOSE_NOWRITE`) is reported as `.modified` too: the one trace a change of its flags
    /// leaves (`chattr +i`, `-i`: the `FS_IOC_SETFLAGS` ioctl changes the status-change time
    /// without any `IN_ATTRIB`, through a descriptor it must open). Such a close starts a window
    /// but never extends one, so a program reading the file over and over delays no report.
    public init(
        debounce: Duration = FileWatcher.defaultDebounce, closesAfterReading: Bool = false,
        handler: @escaping @Sendable (FileEvent) -> Void
    ) throws(FileSystemError) {
        let (seconds, attoseconds) = debounce.components
        let nanoseconds = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        core = try WatcherCore(
            debounceNanoseconds: nanoseconds,
            mask: closesAfterReading ? Self.mask | UInt32(IN_CLOSE_NOWRITE) : Self.mask, handler: handler)
    }

    deinit { core.stop() }

    /// Watches the file at `path` (it need not exist yet; its directory must). Each call answers a
    /// registration of its own, even for a path already watched.
    ///
    /// With `siblings`, other names in the directory that it answers true for are reported too
    /// (``FileEvent/Kind/sibling(name:)``): a sync tool's conflict copy appearing beside the file.
    /// It is called on the watcher's thread, under its lock: it must be quick and call nothing back.
    public func watch(path: String, siblings: (@Sendable (String) -> Bool)? = nil) throws(FileSystemError) -> WatchToken {
        try core.watch(path: path, siblings: siblings)
    }

    /// Ends a registration; its directory's watch is removed with the last file watched in it.
    /// Events not yet delivered for it are dropped. Unknown tokens are ignored.
    public func unwatch(_ token: WatchToken) {
        core.unwatch(token)
    }

    /// Stops the thread (joining it, unless called from the handler), removes every watch and
    /// closes both descriptors. No event is delivered after it returns. Idempotent.
    public func stop() {
        core.stop()
    }

    /// How many directory watches are held (test-visible: files in one directory share one).
    public var watchedDirectoryCount: Int { core.watchedDirectoryCount }

    /// Classifies the state of a file now (`nil`: nothing at the path) against the one recorded.
    public static func classify(recorded: FileIdentity, now: FileIdentity?) -> Change {
        guard let now else { return .gone }
        if now.device != recorded.device || now.inode != recorded.inode { return .replacedByAnotherFile }
        if now.size != recorded.size { return .contentChanged }
        if let before = recorded.contentHash, let after = now.contentHash {
            if before != after { return .contentChanged }
            return now.modificationTime == recorded.modificationTime && now.changeTime == recorded.changeTime
                ? .unchanged : .touched
        }
        if now.modificationTime == recorded.modificationTime && now.changeTime == recorded.changeTime {
            return .unchanged
        }
        return .touched
    }

    /// Splits a path into its directory and its last component (trailing slashes dropped).
    public static func split(_ path: String) -> (directory: String, name: String)? {
        var bytes = Array(path.utf8)
        while bytes.count > 1 && bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
            return bytes.isEmpty ? nil : (".", String(decoding: bytes, as: UTF8.self))
        }
        let name = String(decoding: bytes[(slash + 1)...], as: UTF8.self)
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        let directory = slash == 0 ? "/" : String(decoding: bytes[..<slash], as: UTF8.self)
        return (directory, name)
    }

    public static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

// MARK: - The shared state

/// A watcher's two descriptors (FileWatcher's, DirectoryWatch's), owned together: its inotify
/// instance (`IN_NONBLOCK | IN_CLOEXEC`) and the eventfd that wakes its thread. They are kept in the
/// watcher's shared state and closed where they are dropped: by `stop()` after it joined the
/// thread, or by the thread on its way out when its own handler stopped it
/// (``stopWatcherThread(_:)``, ``takeDescriptorsOnExit(_:)``).
struct WatcherDescriptors: ~Copyable, Sendable {
    let inotify: Descriptor
    let wake: EventDescriptor

    /// Opens both; a failure names `inotify_init1` or `eventfd`, and `path` (what is watched).
    static func open(path: String) throws(FileSystemError) -> WatcherDescriptors {
        let inotify: Descriptor
        do {
            inotify = Descriptor(owningRawValue: try retryingInterrupts("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) })
        } catch {
            throw FileSystemError(error, path: path)
        }
        let wake: EventDescriptor
        do {
            wake = try EventDescriptor()
        } catch {
            throw FileSystemError(error, path: path)  // `inotify` is dropped: closed
        }
        return WatcherDescriptors(inotify: inotify, wake: wake)
    }
}

/// Opens a watcher's descriptors into its shared state (`shared`, before the thread starts) and
/// answers their numbers, for the calls made until `stop()` closes them.
func openWatcherDescriptors<State: WatcherThreadState & ~Copyable>(
    into shared: borrowing Mutex<State>, path: String
) throws(FileSystemError) -> (inotify: Int32, wake: Int32) {
    try shared.withLock { (state) throws(FileSystemError) -> (inotify: Int32, wake: Int32) in
        let descriptors = try WatcherDescriptors.open(path: path)
        let numbers = (descriptors.inotify.rawValue, descriptors.wake.descriptor.rawValue)
        state.descriptors = consume descriptors
        return numbers
    }
}

/// What a watcher's thread shares with its `stop()` (``stopWatcherThread(_:)``), under the
/// watcher's lock.
protocol WatcherThreadState: ~Copyable {
    /// `stop()` has begun.
    var stopped: Bool { get set }
    /// The thread, until `stop()` takes it.
    var thread: JoinableThread? { get set }
    /// `stop()` ran on the thread itself (from the handler): the thread closes the descriptors
    /// when it returns.
    var closeOnExit: Bool { get set }
    /// The watcher's descriptors, set before its thread starts, until whoever closes them takes them.
    var descriptors: WatcherDescriptors? { get set }
}

/// Stops a watcher's thread (FileWatcher's, DirectoryWatch's): once only; from another thread it
/// wakes the thread through the eventfd, joins it and closes the inotify descriptor (which removes
/// its watches) and the eventfd, and answers true; from the thread itself (its handler called
/// `stop()`) it detaches it, leaving the descriptors for the thread to close on its way out
/// (``takeDescriptorsOnExit(_:)``), and answers false.
func stopWatcherThread<State: WatcherThreadState & ~Copyable>(_ shared: borrowing Mutex<State>) -> Bool {
    let action: WatcherStopAction = shared.withLock { state in
        guard !state.stopped else { return .none }
        state.stopped = true
        guard let thread = state.thread else { return .none }
        state.thread = nil
        if thread.isCurrent {
            state.closeOnExit = true
            return .detach(thread)
        }
        // Woken under the lock, where the eventfd is known to be open still.
        try? state.descriptors?.wake.notify()
        return .join(thread)
    }
    switch action {
    case .none:
        return false
    case .detach(let thread):
        thread.detach()
        return false
    case .join(let thread):
        thread.join()
        let descriptors = shared.withLock { $0.descriptors.take() }
        _ = consume descriptors  // closed here, after the join
        return true
    }
}

/// On a watcher's thread, as it returns: the descriptors, for the thread to drop (close), when
/// `stop()` ran on the thread itself; otherwise nil (the `stop()` that joins the thread closes them).
func takeDescriptorsOnExit<State: WatcherThreadState & ~Copyable>(_ shared: borrowing Mutex<State>) -> WatcherDescriptors? {
    shared.withLock { state in
        guard state.closeOnExit else { return nil }
        return state.descriptors.take()
    }
}

private enum WatcherStopAction { case none, join(JoinableThread), detach(JoinableThread) }

/// What a watcher's thread waits on and reads: its inotify descriptor (with the one read buffer) and
/// its wake-up eventfd, with a deadline (the end of the earliest debounce window). Shared by
/// FileWatcher and DirectoryWatch; used by the watcher's thread alone.
final class WatcherWait {
    /// What woke the thread.
    struct Ready {
        /// `poll` failed (other than EINTR): the thread should end.
        var failed = false
        /// The eventfd was written (`stop()`, or a request such as a rescan); it has been read.
        var woken = false
        /// Events are queued on the inotify descriptor.
        var events = false
    }

    private var descriptors: [pollfd]
    private let inotify: FileDescriptor
    private static let capacity = 64 * 1024
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: WatcherWait.capacity, alignment: 8)

    init(inotify: Int32, wake: Int32) {
        self.inotify = FileDescriptor(rawValue: inotify)
        descriptors = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
    }

    deinit { buffer.deallocate() }

    /// Reads every event queued on the inotify descriptor, calling `each` with its watch
    /// descriptor, mask, cookie, name ("" for the directory itself) and the time it was read.
    func drain(_ each: (_ descriptor: Int32, _ mask: UInt32, _ cookie: UInt32, _ name: String, _ time: Int64) -> Void) {
        let headerSize = MemoryLayout<inotify_event>.size
        let all = UnsafeMutableRawBufferPointer(start: buffer, count: Self.capacity)
        while true {
            guard let count = try? readSome(into: all, from: inotify) else { return }  // EAGAIN: drained
            if count == 0 { return }
            let time = Self.now()
            var offset = 0
            while offset + headerSize <= count {
                let header = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let length = Int(header.len)
                var name = ""
                if length > 0 {
                    name = String(cString: (buffer + offset + headerSize).assumingMemoryBound(to: CChar.self))
                }
                each(header.wd, header.mask, header.cookie, name, time)
                offset += headerSize + length
            }
        }
    }

    /// Reads and drops every event queued (after an overflow, which a rescan replaces).
    func discardQueued() {
        let all = UnsafeMutableRawBufferPointer(start: buffer, count: Self.capacity)
        while let count = try? readSome(into: all, from: inotify), count > 0 {}
    }

    /// The monotonic clock in nanoseconds, as the watchers' deadlines count.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Waits until an event, a wake-up or `deadline` (nil: no deadline).
    func wait(until deadline: Int64?) -> Ready {
        var timeout: Int32 = -1
        if let deadline {
            let remaining = deadline - Self.now()
            timeout = remaining <= 0 ? 0 : Int32(clamping: (remaining + 999_999) / 1_000_000)
        }
        descriptors[0].revents = 0
        descriptors[1].revents = 0
        let count = poll(&descriptors, 2, timeout)
        var ready = Ready()
        if count < 0 {
            ready.failed = errno != EINTR
            return ready
        }
        if descriptors[1].revents != 0 {
            // Reads the eventfd's count back to 0 (EAGAIN, when there was none, is no failure).
            var value: UInt64 = 0
            _ = try? withUnsafeMutableBytes(of: &value) { try readSome(into: $0, from: FileDescriptor(rawValue: descriptors[1].fd)) }
            ready.woken = true
        }
        ready.events = count > 0 && descriptors[0].revents != 0
        return ready
    }
}

private struct Registry: WatcherThreadState, ~Copyable {
    struct Directory {
        var path: String
        /// Token ids by file name.
        var names: [String: [UInt64]]
        var references: Int
    }

    struct Registration {
        var path: String
        var name: String
        /// nil once the kernel dropped the directory's watch (the directory is gone).
        var descriptor: Int32?
        /// Which other names of the directory the registration is told about.
        var siblings: (@Sendable (String) -> Bool)?
    }

    var nextID: UInt64 = 1
    var directories: [Int32: Directory] = [:]
    var registrations: [UInt64: Registration] = [:]
    var stopped = false
    var thread: JoinableThread?
    /// Set when `stop` was called on the watcher's own thread: the thread closes the descriptors.
    var closeOnExit = false
    var descriptors: WatcherDescriptors?

    /// The registrations of the file `name` in the directory watched by `descriptor`.
    func watchers(_ descriptor: Int32, _ name: String) -> [(UInt64, String)] {
        guard let ids = directories[descriptor]?.names[name] else { return [] }
        return ids.compactMap { id in registrations[id].map { (id, $0.path) } }
    }

    /// The registrations in the directory watched by `descriptor` that want to hear of `name`, a
    /// name none of them watches.
    func siblingWatchers(_ descriptor: Int32, _ name: String) -> [(UInt64, String)] {
        guard let directory = directories[descriptor] else { return [] }
        return directory.names.values.flatMap { $0 }.sorted().compactMap { id in
            guard let registration = registrations[id], let wants = registration.siblings, wants(name) else { return nil }
            return (id, registration.path)
        }
    }
}

final class WatcherCore: @unchecked Sendable {
    // @unchecked: the descriptors' numbers are immutable after init; `registry` is a Mutex; the
    // reader's state (`pending`, `unpaired`) is touched only on the watcher's thread.
    /// The numbers of the descriptors `registry` owns (``WatcherDescriptors``), open until `stop()`.
    private let inotify: Int32
    private let wake: Int32
    private let debounce: Int64
    /// The events each directory watch asks for (``FileWatcher/mask``, maybe with `IN_CLOSE_NOWRITE`).
    private let mask: UInt32
    private let handler: @Sendable (FileEvent) -> Void
    private let registry = Mutex(Registry())

    init(debounceNanoseconds: Int64, mask: UInt32, handler: @escaping @Sendable (FileEvent) -> Void) throws(FileSystemError) {
        debounce = debounceNanoseconds
        self.mask = mask
        self.handler = handler
        (inotify, wake) = try openWatcherDescriptors(into: registry, path: "")
        let thread: JoinableThread
        do {
            thread = try startJoinableThread(name: "ds-file-watcher") { [self] in run() }
        } catch {
            registry.withLock { $0.descriptors = nil }  // closed
            throw FileSystemError(error, path: "")
        }
        registry.withLock { $0.thread = thread }
    }

    var watchedDirectoryCount: Int { registry.withLock { $0.directories.count } }

    func watch(path: String, siblings: (@Sendable (String) -> Bool)? = nil) throws(FileSystemError) -> WatchToken {
        guard let (directory, name) = FileWatcher.split(path) else {
            throw FileSystemError(errno: EINVAL, syscall: "inotify_add_watch", path: path,
                                  reason: "the path names no file in a directory")
        }
        let outcome: Result<WatchToken, FileSystemError> = registry.withLock { state in
            guard !state.stopped else {
                return .failure(FileSystemError(errno: EBADF, syscall: "inotify_add_watch", path: directory,
                                                reason: "the watcher was stopped"))
            }
            let descriptor = inotify_add_watch(inotify, directory, mask)
            guard descriptor >= 0 else {
                return .failure(FileSystemError(errno: errno, syscall: "inotify_add_watch", path: directory))
            }
            let id = state.nextID
            state.nextID += 1
            if state.directories[descriptor] == nil {
                state.directories[descriptor] = Registry.Directory(path: directory, names: [:], references: 0)
            }
            state.directories[descriptor]!.references += 1
            state.directories[descriptor]!.names[name, default: []].append(id)
            state.registrations[id] = Registry.Registration(path: path, name: name, descriptor: descriptor, siblings: siblings)
            return .success(WatchToken(id: id))
        }
        return try outcome.get()
    }

    func unwatch(_ token: WatchToken) {
        registry.withLock { state in
            guard let registration = state.registrations.removeValue(forKey: token.id),
                let descriptor = registration.descriptor, var directory = state.directories[descriptor]
            else { return }
            directory.names[registration.name]?.removeAll { $0 == token.id }
            if directory.names[registration.name]?.isEmpty == true { directory.names[registration.name] = nil }
            directory.references -= 1
            if directory.references <= 0 {
                state.directories[descriptor] = nil
                if !state.stopped { _ = inotify_rm_watch(inotify, descriptor) }
            } else {
                state.directories[descriptor] = directory
            }
        }
    }

    func stop() {
        if stopWatcherThread(registry) {
            registry.withLock { state in
                state.directories.removeAll()
                for id in Array(state.registrations.keys) { state.registrations[id]!.descriptor = nil }
            }
        }
    }

    // MARK: The watcher's thread

    private struct Key: Hashable {
        var descriptor: Int32
        var name: String
    }

    private enum Departure {
        case deleted
        case unpairedMove(cookie: UInt32)
        case moved(to: String)
    }

    /// What happened to one watched name since it was last reported.
    private struct Pending {
        var contentChanged = false
        var arrived = false
        var departure: Departure?
        var deadline: Int64 = 0
        var sequence: UInt64 = 0
    }

    private var pending: [Key: Pending] = [:]
    /// Other names of watched directories that some registration wants to hear of: when their
    /// window ends, and its place in the order of reports.
    private var pendingSiblings: [Key: (deadline: Int64, sequence: UInt64)] = [:]
    /// The watched names renamed away whose `IN_MOVED_TO` has not been seen, by cookie.
    private var unpaired: [UInt32: Key] = [:]
    private var sequence: UInt64 = 0

    private static func now() -> Int64 { WatcherWait.now() }

    private var isStopped: Bool { registry.withLock { $0.stopped } }

    private func run() {
        let waiting = WatcherWait(inotify: inotify, wake: wake)
        while !isStopped {
            let deadlines = [pending.values.map(\.deadline).min(), pendingSiblings.values.map(\.deadline).min()].compactMap { $0 }
            let ready = waiting.wait(until: deadlines.min())
            if ready.failed || ready.woken { break }  // stop() woke us
            if ready.events {
                var events: [FileEvent] = []
                waiting.drain { descriptor, mask, cookie, name, time in
                    handle(descriptor: descriptor, mask: mask, cookie: cookie, name: name, at: time, into: &events)
                }
                deliver(events)
            }
            var due: [FileEvent] = []
            flushDue(at: Self.now(), into: &due)
            deliver(due)
        }
        let descriptors = takeDescriptorsOnExit(registry)
        _ = consume descriptors  // closed here when stop() ran on this thread
    }

    private func deliver(_ events: [FileEvent]) {
        for event in events {
            if isStopped { return }
            handler(event)
        }
    }

    private func touch(_ key: Key, at time: Int64, _ change: (inout Pending) -> Void) {
        var entry = pending[key] ?? Pending()
        change(&entry)
        entry.deadline = time + debounce
        sequence += 1
        entry.sequence = sequence
        pending[key] = entry
    }

    private func handle(
        descriptor: Int32, mask: UInt32, cookie: UInt32, name: String, at time: Int64,
        into events: inout [FileEvent]
    ) {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            pending.removeAll()
            pendingSiblings.removeAll()
            unpaired.removeAll()
            let all = registry.withLock { state in state.registrations.map { ($0.key, $0.value.path) } }
            for (id, path) in all.sorted(by: { $0.0 < $1.0 }) {
                events.append(FileEvent(path: path, token: WatchToken(id: id), kind: .rescan))
            }
            return
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            // The kernel dropped the watch (the directory is gone); after our own rm it is unknown.
            registry.withLock { state in
                guard let directory = state.directories.removeValue(forKey: descriptor) else { return }
                for ids in directory.names.values {
                    for id in ids { state.registrations[id]?.descriptor = nil }
                }
            }
            pending = pending.filter { $0.key.descriptor != descriptor }
            pendingSiblings = pendingSiblings.filter { $0.key.descriptor != descriptor }
            unpaired = unpaired.filter { $0.value.descriptor != descriptor }
            return
        }
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0 {
            let affected = registry.withLock { state -> [(UInt64, String)] in
                guard let directory = state.directories[descriptor] else { return [] }
                return directory.names.values.flatMap { $0 }.compactMap { id in
                    state.registrations[id].map { (id, $0.path) }
                }
            }
            for (id, path) in affected.sorted(by: { $0.0 < $1.0 }) {
                events.append(FileEvent(path: path, token: WatchToken(id: id), kind: .rescan))
            }
            return
        }
        guard !name.isEmpty else { return }
        let key = Key(descriptor: descriptor, name: name)
        let (watched, directoryPath) = registry.withLock { state in
            (!(state.directories[descriptor]?.names[name]?.isEmpty ?? true), state.directories[descriptor]?.path)
        }

        if mask & UInt32(IN_MOVED_TO) != 0 {
            if let source = unpaired.removeValue(forKey: cookie), let directoryPath {
                touch(source, at: time) { entry in
                    entry.departure = .moved(to: FileWatcher.join(directoryPath, name))
                    entry.arrived = false
                }
            }
            if watched { arrive(key, at: time) } else { sibling(key, mask: mask, at: time) }
            return
        }
        guard watched else {
            sibling(key, mask: mask, at: time)
            return
        }
        if mask & UInt32(IN_MOVED_FROM) != 0 {
            unpaired[cookie] = key
            touch(key, at: time) { entry in
                if case .unpairedMove(let earlier) = entry.departure { self.unpaired[earlier] = nil }
                entry.departure = .unpairedMove(cookie: cookie)
                entry.arrived = false
            }
        } else if mask & UInt32(IN_DELETE) != 0 {
            touch(key, at: time) { entry in
                if case .unpairedMove(let earlier) = entry.departure { self.unpaired[earlier] = nil }
                entry.departure = .deleted
                entry.arrived = false
            }
        } else if mask & UInt32(IN_CREATE) != 0 {
            arrive(key, at: time)
        } else if mask & UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB) != 0 {
            touch(key, at: time) { $0.contentChanged = true }
        } else if mask & UInt32(IN_CLOSE_NOWRITE) != 0, pending[key] == nil {
            // Read and closed (asked for with `closesAfterReading`): a window of its own, never
            // one extended, so a reader in a loop delays no report.
            touch(key, at: time) { $0.contentChanged = true }
        }
    }

    /// A name nobody watches: a window of its own when a registration of its directory wants to
    /// hear of it and the event may have made, filled, moved or removed a file there.
    private func sibling(_ key: Key, mask: UInt32, at time: Int64) {
        let relevant = UInt32(IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)
        guard mask & relevant != 0 else { return }
        let wanted = registry.withLock { !$0.siblingWatchers(key.descriptor, key.name).isEmpty }
        guard wanted else { return }
        sequence += 1
        pendingSiblings[key] = (time + debounce, sequence)
    }

    /// Another file now holds the name: it supersedes a departure seen in the same window.
    private func arrive(_ key: Key, at time: Int64) {
        touch(key, at: time) { entry in
            if case .unpairedMove(let earlier) = entry.departure { self.unpaired[earlier] = nil }
            entry.departure = nil
            entry.arrived = true
        }
    }

    /// Reports every name whose window has ended.
    private func flushDue(at time: Int64, into events: inout [FileEvent]) {
        let siblings = pendingSiblings.filter { $0.value.deadline <= time }.sorted { $0.value.sequence < $1.value.sequence }
        if !siblings.isEmpty {
            for (key, _) in siblings { pendingSiblings[key] = nil }
            let targets = registry.withLock { state in siblings.map { state.siblingWatchers($0.key.descriptor, $0.key.name) } }
            for ((key, _), watchers) in zip(siblings, targets) {
                for (id, path) in watchers {
                    events.append(FileEvent(path: path, token: WatchToken(id: id), kind: .sibling(name: key.name)))
                }
            }
        }
        let due = pending.filter { $0.value.deadline <= time }.sorted { $0.value.sequence < $1.value.sequence }
        guard !due.isEmpty else { return }
        for (key, _) in due { pending[key] = nil }
        let watchers = registry.withLock { state in due.map { state.watchers($0.key.descriptor, $0.key.name) } }
        for ((key, entry), targets) in zip(due, watchers) {
            var kinds: [FileEvent.Kind] = []
            switch entry.departure {
            case .deleted:
                kinds = [.deleted]
            case .unpairedMove(let cookie):
                unpaired[cookie] = nil
                if entry.contentChanged { kinds.append(.modified) }
                kinds.append(.movedAway(cookie: cookie))
            case .moved(let destination):
                if entry.contentChanged { kinds.append(.modified) }
                kinds.append(.movedTo(newPath: destination))
            case nil:
                if entry.arrived {
                    kinds = [.replaced]
                } else if entry.contentChanged {
                    kinds = [.modified]
                }
            }
            _ = key
            for (id, path) in targets {
                for kind in kinds { events.append(FileEvent(path: path, token: WatchToken(id: id), kind: kind)) }
            }
        }
    }
}
