import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A change to the set of files a ``DirectoryWatch`` follows.
public enum DirectoryChange: Sendable, Hashable, CustomStringConvertible {
    /// A matching file appeared: created, renamed in from outside the root (or from a name that
    /// did not match), or found in a directory created or moved in.
    case created(DirectoryEntry)
    /// The file at the path now has another size, modification time or inode (a write, or an
    /// atomic replace of the file by another one).
    case changed(DirectoryEntry)
    /// The matching file at the path is gone: deleted, renamed out of the root or to a name that
    /// does not match, or its directory was deleted or moved out.
    case deleted(path: String, relativePath: String)
    /// The file at `from` (an absolute path) was renamed, within the root, to `to` (when `to`
    /// already held a matching file, that one was replaced: no separate event for it).
    case moved(from: String, to: DirectoryEntry)

    /// The relative path the change is about (the destination of a move).
    public var relativePath: String {
        switch self {
        case .created(let entry), .changed(let entry), .moved(_, let entry): return entry.relativePath
        case .deleted(_, let relativePath): return relativePath
        }
    }

    public var description: String {
        switch self {
        case .created(let entry): return "created \(entry.relativePath)"
        case .changed(let entry): return "changed \(entry.relativePath)"
        case .deleted(_, let relativePath): return "deleted \(relativePath)"
        case .moved(let from, let entry): return "moved \(from) -> \(entry.relativePath)"
        }
    }
}

/// The live half of `workspace/query` (NSMetadataQuery's updates): keeps the set of regular files
/// under a root matching a glob exact, and reports every change to it.
///
/// At init it takes a snapshot exactly as ``DirectoryQuery/scan(root:pattern:recursive:)`` does
/// (``initialEntries``) and watches, with inotify, the root and (recursive) every subdirectory in
/// which the pattern can match. From then on changes are relative to that snapshot; the handler may
/// be called before init returns. ``entries`` is the set now.
///
/// - Events only say where to look: a path touched is re-examined (`lstat`) once it has been
///   quiet for the debounce window (and at least every 20 windows, 1 s at the least, for a file
///   written without pause), and compared with what was known. A file created and deleted within
///   one window is never reported; a file written 100 times in a row is one `changed`; an event
///   that leaves size, modification time and inode alone (a `chmod`, a `touch` to the same time)
///   reports nothing. Because the comparison is with the known set, nothing is reported twice.
/// - A directory created or moved in gets its watches first and is then scanned, so files created
///   in it before the watch existed are reported (each once).
/// - Renames within the root (paired by inotify's cookie) are ``DirectoryChange/moved(from:to:)``;
///   a directory moved within the root gives one `moved` for each file in it. From outside the
///   root: `created`; out of it: `deleted`; to a name that does not match: `deleted` (and the
///   reverse, `created`). A deleted directory: each of its files `deleted`.
/// - When the kernel's queue overflows (`IN_Q_OVERFLOW`), the whole tree is scanned again and the
///   difference with the known set reported as `created`, `changed` and `deleted` (no `moved`).
/// - When the root itself is deleted, moved or unmounted, every known file is reported `deleted`
///   and the watch goes quiet (it reports nothing more, even if the path is created again); call
///   ``stop()`` to release it.
/// - Symbolic links are neither reported nor followed, as in the scan.
///
/// Changes come in batches (one handler call per window ending, in path order), on the watch's
/// own thread, one call at a time. The handler must not block for long; it may call ``stop()``.
///
/// Cost: each watch holds one inotify instance (the kernel allows 128 per user by default,
/// `fs.inotify.max_user_instances`), one eventfd, one thread, and one inotify watch per directory
/// watched (`fs.inotify.max_user_watches`), plus the known set in memory.
public final class DirectoryWatch: Sendable {
    /// The default debounce window.
    public static let defaultDebounce: Duration = .milliseconds(50)

    /// The root as given, trailing slashes dropped.
    public let root: String
    public let pattern: GlobPattern
    public let recursive: Bool
    /// The matching files when the watch began, sorted by relative path (the scan's answer): the
    /// changes the handler receives are relative to it.
    public let initialEntries: [DirectoryEntry]

    /// Internal, not private: the tests read the core's wake descriptor.
    let core: DirectoryWatchCore

    /// Scans `root`, watches it and starts the watch's thread. Throws when the root cannot be
    /// opened or watched, or when the kernel's limit on watches is reached.
    public init(
        root: String, pattern: GlobPattern, recursive: Bool,
        debounce: Duration = DirectoryWatch.defaultDebounce,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(FileSystemError) {
        let root = DirectoryQuery.normalizedRoot(root)
        self.root = root
        self.pattern = pattern
        self.recursive = recursive
        let (seconds, attoseconds) = debounce.components
        let nanoseconds = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let core = try DirectoryWatchCore(
            root: root, pattern: pattern, recursive: recursive, debounceNanoseconds: nanoseconds,
            handler: handler)
        self.core = core
        initialEntries = core.initialEntries
    }

    deinit { core.stop() }

    /// Stops the thread (joining it, unless called from the handler), and closes the inotify
    /// descriptor (which removes every watch) and the wake-up descriptor. No change is delivered
    /// after it returns. Idempotent.
    public func stop() { core.stop() }

    /// The matching files now, as reported so far, sorted by relative path.
    public var entries: [DirectoryEntry] { core.entries }

    /// How many directories are watched (test-visible).
    var watchedDirectoryCount: Int { core.watchedDirectoryCount }

    /// Acts as if the kernel's queue had overflowed: the events queued and not yet read are
    /// dropped, then the tree is scanned again and the difference reported (test-visible).
    func simulateOverflow() { core.requestOverflow() }
}

// MARK: - The core

private struct SharedState: WatcherThreadState, ~Copyable {
    var stopped = false
    var thread: JoinableThread?
    /// Set when `stop` was called on the watch's own thread: the thread closes the descriptors.
    var closeOnExit = false
    var descriptors: WatcherDescriptors?
    var overflowRequested = false
    /// The known set, as reported (the thread keeps its own copy and applies each batch here).
    var known: [String: DirectoryEntry] = [:]
    var watchedDirectories = 0
}

final class DirectoryWatchCore: @unchecked Sendable {
    // @unchecked: the constants are immutable after init; `shared` is a Mutex; every other
    // variable is set up in init (before the thread starts) and then touched only on the thread.
    let root: String
    let pattern: GlobPattern
    let recursive: Bool
    /// Set in init, before the thread starts; never changed after.
    private(set) var initialEntries: [DirectoryEntry] = []
    /// The numbers of the descriptors `shared` owns (``WatcherDescriptors``), open until `stop()`:
    /// the inotify instance, and the eventfd that wakes the thread (internal: a test checks it is
    /// closed by stop()).
    private let inotify: Int32
    let wake: Int32
    private let debounce: Int64
    private let maximumDelay: Int64
    private let handler: @Sendable ([DirectoryChange]) -> Void
    private let shared = Mutex(SharedState())

    /// The events a directory watch asks for.
    private static let mask: UInt32 = UInt32(
        IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
            | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    private struct Pending {
        var deadline: Int64
        var first: Int64
    }

    /// The matching files known, by relative path.
    private var known: [String: DirectoryEntry] = [:]
    /// The watched directories: relative path by watch descriptor, and back ("" is the root).
    private var directoryPaths: [Int32: String] = [:]
    private var directoryWatches: [String: Int32] = [:]
    /// Paths to examine again once quiet.
    private var pending: [String: Pending] = [:]
    /// Renames seen within the root and not yet reconciled: source by destination, and back.
    private var moveSources: [String: String] = [:]
    private var moveDestinations: [String: String] = [:]
    /// `IN_MOVED_FROM`s whose `IN_MOVED_TO` has not been seen, by cookie: the path and the time
    /// after which it counts as moved out of the root.
    private var unpairedFiles: [UInt32: (path: String, deadline: Int64)] = [:]
    private var unpairedDirectories: [UInt32: (path: String, deadline: Int64)] = [:]
    /// Set once the root is gone: nothing more is reported.
    private var quiet = false
    /// The first failure to add a watch for a reason other than the directory's own (a limit).
    private var watchLimitError: FileSystemError?

    init(
        root: String, pattern: GlobPattern, recursive: Bool, debounceNanoseconds: Int64,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(FileSystemError) {
        self.root = root
        self.pattern = pattern
        self.recursive = recursive
        debounce = debounceNanoseconds
        maximumDelay = max(20 * debounceNanoseconds, 1_000_000_000)
        self.handler = handler
        // Owned by `shared` from here; dropping them there closes them on every failure below.
        (inotify, wake) = try openWatcherDescriptors(into: shared, path: root)

        // The snapshot: each directory is watched before it is listed, so nothing created during
        // the scan is missed (what the scan already saw reconciles as unchanged).
        let rootDirectory: Descriptor
        do {
            rootDirectory = try Descriptor.open(root, .readOnly, options: .directory)
        } catch {
            shared.withLock { $0.descriptors = nil }
            throw FileSystemError(error, path: root)
        }
        var found: [DirectoryEntry] = []
        var rootWatchError: FileSystemError?
        var walker = DirectoryWalker(root: root, pattern: pattern, recursive: recursive)
        walker.walk(rootDirectory, relativeDirectory: "", enter: { relative in
            if addWatch(relative) != nil { return true }
            if relative.isEmpty {
                rootWatchError = FileSystemError(errno: errno, syscall: "inotify_add_watch", path: root)
            }
            return false
        }) { found.append($0) }
        if let error = rootWatchError ?? watchLimitError {
            shared.withLock { $0.descriptors = nil }
            throw error
        }
        found.sort { $0.relativePath < $1.relativePath }
        initialEntries = found
        for entry in found { known[entry.relativePath] = entry }
        let snapshot = known
        let directories = directoryWatches.count
        shared.withLock { state in
            state.known = snapshot
            state.watchedDirectories = directories
        }

        let thread: JoinableThread
        do {
            thread = try startJoinableThread(name: "ds-query-watch") { [self] in run() }
        } catch {
            shared.withLock { $0.descriptors = nil }
            throw FileSystemError(error, path: root)
        }
        shared.withLock { $0.thread = thread }
    }

    var entries: [DirectoryEntry] {
        shared.withLock { Array($0.known.values) }.sorted { $0.relativePath < $1.relativePath }
    }

    var watchedDirectoryCount: Int { shared.withLock { $0.watchedDirectories } }

    func requestOverflow() {
        shared.withLock { state in
            state.overflowRequested = true
            // Under the lock, where the eventfd is known to be open still.
            if !state.stopped { try? state.descriptors?.wake.notify() }
        }
    }

    func stop() {
        _ = stopWatcherThread(shared)
    }

    // MARK: The watch's thread

    private static func now() -> Int64 { WatcherWait.now() }

    private var isStopped: Bool { shared.withLock { $0.stopped } }

    private func run() {
        let waiting = WatcherWait(inotify: inotify, wake: wake)
        while !isStopped {
            let ready = waiting.wait(until: nextDeadline())
            if ready.failed { break }
            if ready.woken {
                if isStopped { break }
                let overflow = shared.withLock { state in
                    defer { state.overflowRequested = false }
                    return state.overflowRequested
                }
                if overflow && !quiet {
                    // What the kernel would have dropped.
                    waiting.discardQueued()
                    deliver(rescanEverything())
                }
            }
            if ready.events {
                var immediate: [DirectoryChange] = []
                waiting.drain { descriptor, mask, cookie, name, time in
                    if !quiet { handle(descriptor: descriptor, mask: mask, cookie: cookie, name: name, at: time, into: &immediate) }
                }
                deliver(immediate)
            }
            if !quiet { deliver(flushDue(at: Self.now())) }
        }
        let descriptors = takeDescriptorsOnExit(shared)
        _ = consume descriptors  // closed here when stop() ran on this thread
    }

    /// The earliest time something waits for: a window's end, a path's longest delay, a rename's
    /// partner.
    private func nextDeadline() -> Int64? {
        if quiet { return nil }
        var earliest: Int64?
        for entry in pending.values {
            let due = min(entry.deadline, entry.first + maximumDelay)
            if earliest == nil || due < earliest! { earliest = due }
        }
        for entry in unpairedFiles.values where earliest == nil || entry.deadline < earliest! {
            earliest = entry.deadline
        }
        for entry in unpairedDirectories.values where earliest == nil || entry.deadline < earliest! {
            earliest = entry.deadline
        }
        return earliest
    }

    /// Hands a batch to the handler and records it as reported.
    private func deliver(_ changes: [DirectoryChange]) {
        guard !changes.isEmpty else { return }
        let directories = directoryWatches.count
        let delivering = shared.withLock { state -> Bool in
            state.watchedDirectories = directories
            for change in changes {
                switch change {
                case .created(let entry), .changed(let entry):
                    state.known[entry.relativePath] = entry
                case .deleted(_, let relativePath):
                    state.known[relativePath] = nil
                case .moved(let from, let entry):
                    state.known[relativePath(of: from)] = nil
                    state.known[entry.relativePath] = entry
                }
            }
            return !state.stopped
        }
        if delivering { handler(changes) }
    }

    /// The relative path of an absolute path under the root.
    private func relativePath(of path: String) -> String {
        let prefix = root == "/" ? "/" : root + "/"
        return String(path.dropFirst(prefix.count))
    }

    private func handle(
        descriptor: Int32, mask: UInt32, cookie: UInt32, name: String, at time: Int64,
        into changes: inout [DirectoryChange]
    ) {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            changes.append(contentsOf: rescanEverything())
            return
        }
        let rootDescriptor = directoryWatches[""]
        if descriptor == rootDescriptor && mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED) != 0 {
            changes.append(contentsOf: rootGone())
            return
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            // The kernel dropped a watch (its directory is gone, or we removed it).
            if let path = directoryPaths.removeValue(forKey: descriptor), directoryWatches[path] == descriptor {
                directoryWatches[path] = nil
            }
            return
        }
        // A subdirectory's own deletion or move is handled through its parent's events.
        guard !name.isEmpty, let directory = directoryPaths[descriptor] else { return }
        let path = DirectoryQuery.join(directory, name)

        if mask & UInt32(IN_ISDIR) != 0 {
            guard recursive else { return }
            if mask & UInt32(IN_CREATE) != 0 {
                scanSubtree(path, at: time)
            } else if mask & UInt32(IN_DELETE) != 0 {
                dropSubtree(path)
                markKnown(below: path, at: time)
            } else if mask & UInt32(IN_MOVED_FROM) != 0 {
                unpairedDirectories[cookie] = (path, time + debounce)
            } else if mask & UInt32(IN_MOVED_TO) != 0 {
                if let source = unpairedDirectories.removeValue(forKey: cookie) {
                    moveSubtree(from: source.path, to: path, at: time)
                } else {
                    scanSubtree(path, at: time)  // moved in from outside the root
                }
            }
            return
        }

        if mask & UInt32(IN_MOVED_FROM) != 0 {
            unpairedFiles[cookie] = (path, time + debounce)
            if known[path] != nil { markDirty(path, at: time) }
        } else if mask & UInt32(IN_MOVED_TO) != 0 {
            let relevant = known[path] != nil || pattern.matches(path)
            if let source = unpairedFiles.removeValue(forKey: cookie), known[source.path] != nil {
                if relevant { recordMove(from: source.path, to: path) }
                markDirty(source.path, at: time)
            }
            if relevant { markDirty(path, at: time) }
        } else if known[path] != nil || pattern.matches(path) {
            markDirty(path, at: time)
        }
    }

    private func markDirty(_ path: String, at time: Int64) {
        if let entry = pending[path] {
            pending[path] = Pending(deadline: time + debounce, first: entry.first)
        } else {
            pending[path] = Pending(deadline: time + debounce, first: time)
        }
    }

    private func markKnown(below directory: String, at time: Int64) {
        let prefix = directory + "/"
        for path in known.keys where path.hasPrefix(prefix) { markDirty(path, at: time) }
    }

    private func recordMove(from source: String, to destination: String) {
        if let earlier = moveDestinations.removeValue(forKey: source) { moveSources[earlier] = nil }
        moveSources[destination] = source
        moveDestinations[source] = destination
    }

    /// Watches the directory at `path` (replacing what was known of the descriptor and the path);
    /// nil when it cannot be watched.
    @discardableResult
    private func addWatch(_ path: String) -> Int32? {
        let absolute = DirectoryQuery.absolutePath(root: root, path)
        // The root may be a symlink to a directory; below it, links are not followed.
        let flags = path.isEmpty ? Self.mask : Self.mask | UInt32(IN_DONT_FOLLOW)
        let descriptor = inotify_add_watch(inotify, absolute, flags)
        guard descriptor >= 0 else {
            let number = errno
            if number == ENOSPC || number == ENOMEM, watchLimitError == nil {
                watchLimitError = FileSystemError(
                    errno: number, syscall: "inotify_add_watch", path: absolute,
                    reason: "the limit on inotify watches (fs.inotify.max_user_watches) is reached")
            }
            errno = number
            return nil
        }
        if let previous = directoryPaths[descriptor], previous != path, directoryWatches[previous] == descriptor {
            directoryWatches[previous] = nil
        }
        if let stale = directoryWatches[path], stale != descriptor {
            directoryPaths[stale] = nil
            _ = inotify_rm_watch(inotify, stale)
        }
        directoryPaths[descriptor] = path
        directoryWatches[path] = descriptor
        return descriptor
    }

    /// Watches and scans the directory at `path` and everything below it, marking each matching
    /// file found for examination.
    private func scanSubtree(_ path: String, at time: Int64) {
        guard recursive, pattern.mayMatchInside(path) else { return }
        let absolute = DirectoryQuery.absolutePath(root: root, path)
        guard let directory = try? Descriptor.open(absolute, .readOnly, options: [.directory, .noFollow]) else { return }
        var walker = DirectoryWalker(root: root, pattern: pattern, recursive: recursive)
        walker.walk(directory, relativeDirectory: path, enter: { addWatch($0) != nil }) { entry in
            markDirty(entry.relativePath, at: time)
        }
    }

    /// Stops watching the directory at `path` and everything below it.
    private func dropSubtree(_ path: String) {
        let prefix = path + "/"
        for (directory, descriptor) in directoryWatches where directory == path || directory.hasPrefix(prefix) {
            directoryWatches[directory] = nil
            directoryPaths[descriptor] = nil
            _ = inotify_rm_watch(inotify, descriptor)
        }
    }

    /// A directory renamed within the root: its watches follow it, its known files are expected
    /// at their new paths, and it is scanned again at its new place (which the pattern may
    /// reach differently).
    private func moveSubtree(from source: String, to destination: String, at time: Int64) {
        let prefix = source + "/"
        for (directory, descriptor) in directoryWatches where directory == source || directory.hasPrefix(prefix) {
            let moved = destination + directory.dropFirst(source.count)
            directoryWatches[directory] = nil
            if directoryPaths[descriptor] == directory { directoryPaths[descriptor] = moved }
            directoryWatches[moved] = descriptor
        }
        for path in known.keys where path.hasPrefix(prefix) {
            let moved = destination + path.dropFirst(source.count)
            recordMove(from: path, to: moved)
            markDirty(path, at: time)
            markDirty(moved, at: time)
        }
        if pattern.mayMatchInside(destination) {
            scanSubtree(destination, at: time)
        } else {
            dropSubtree(destination)
        }
    }

    /// The matching regular file at `path` now, if there is one in a watched directory.
    private func currentEntry(_ path: String) -> DirectoryEntry? {
        guard pattern.matches(path) else { return nil }
        let parent: String
        if let slash = path.lastIndex(of: "/") {
            guard recursive else { return nil }
            parent = String(path[..<slash])
        } else {
            parent = ""
        }
        guard directoryWatches[parent] != nil else { return nil }
        let absolute = DirectoryQuery.absolutePath(root: root, path)
        var status = stat()
        guard lstat(absolute, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
        return DirectoryEntry(path: absolute, relativePath: path, identity: FileIdentity(status))
    }

    /// Examines the paths whose window has ended (with the other ends of their renames) and
    /// answers what changed in the known set.
    private func flushDue(at time: Int64) -> [DirectoryChange] {
        for (cookie, entry) in unpairedDirectories where entry.deadline <= time {
            // Moved out of the root: its files are gone from where they were.
            unpairedDirectories[cookie] = nil
            dropSubtree(entry.path)
            markKnown(below: entry.path, at: time - debounce)
        }
        for (cookie, entry) in unpairedFiles where entry.deadline <= time { unpairedFiles[cookie] = nil }
        var due = Set(pending.compactMap { path, entry in
            min(entry.deadline, entry.first + maximumDelay) <= time ? path : nil
        })
        guard !due.isEmpty else { return [] }
        var queue = Array(due)
        while let path = queue.popLast() {
            for partner in [moveSources[path], moveDestinations[path]] {
                if let partner, due.insert(partner).inserted { queue.append(partner) }
            }
        }
        for path in due { pending[path] = nil }
        return reconcile(due)
    }

    /// Compares the paths with the known set, updates it, and answers the differences.
    private func reconcile(_ paths: Set<String>) -> [DirectoryChange] {
        var removed: [String: DirectoryEntry] = [:]
        var arrived: [String: DirectoryEntry] = [:]
        var replaced: [String: DirectoryEntry] = [:]  // same path, another inode
        var changes: [DirectoryChange] = []
        for path in paths {
            let before = known[path]
            let now = currentEntry(path)
            known[path] = now
            switch (before, now) {
            case (nil, nil):
                break
            case (nil, let now?):
                arrived[path] = now
            case (let before?, nil):
                removed[path] = before
            case (let before?, let now?):
                if before.identity.inode != now.identity.inode || before.identity.device != now.identity.device {
                    replaced[path] = now
                } else if !before.sameContentState(as: now) {
                    changes.append(.changed(now))
                }
            }
        }
        // Renames: follow each new file back through the renames seen to a file that left.
        for (path, entry) in arrived.merging(replaced, uniquingKeysWith: { first, _ in first }) {
            var source = moveSources[path]
            var steps = 0
            while let candidate = source, steps < 32 {
                if let left = removed[candidate], left.identity.inode == entry.identity.inode,
                    left.identity.device == entry.identity.device
                {
                    removed[candidate] = nil
                    arrived[path] = nil
                    replaced[path] = nil
                    changes.append(.moved(from: left.path, to: entry))
                    break
                }
                source = moveSources[candidate]
                steps += 1
            }
        }
        for path in paths {
            if let source = moveSources.removeValue(forKey: path), moveDestinations[source] == path {
                moveDestinations[source] = nil
            }
        }
        for entry in arrived.values { changes.append(.created(entry)) }
        for entry in replaced.values { changes.append(.changed(entry)) }
        for entry in removed.values { changes.append(.deleted(path: entry.path, relativePath: entry.relativePath)) }
        return changes.sorted { $0.relativePath < $1.relativePath }
    }

    /// After an overflow: every directory watched and scanned again, the difference reported.
    private func rescanEverything() -> [DirectoryChange] {
        pending.removeAll()
        moveSources.removeAll()
        moveDestinations.removeAll()
        unpairedFiles.removeAll()
        unpairedDirectories.removeAll()
        let previousWatches = directoryWatches
        directoryWatches.removeAll()
        directoryPaths.removeAll()
        guard let rootDirectory = try? Descriptor.open(root, .readOnly, options: .directory) else {
            directoryWatches = previousWatches
            return rootGone()
        }
        var found: [String: DirectoryEntry] = [:]
        var walker = DirectoryWalker(root: root, pattern: pattern, recursive: recursive)
        walker.walk(rootDirectory, relativeDirectory: "", enter: { addWatch($0) != nil }) { entry in
            found[entry.relativePath] = entry
        }
        for (_, descriptor) in previousWatches where directoryPaths[descriptor] == nil {
            _ = inotify_rm_watch(inotify, descriptor)
        }
        guard directoryWatches[""] != nil else { return rootGone() }
        var changes: [DirectoryChange] = []
        for (path, before) in known where found[path] == nil {
            changes.append(.deleted(path: before.path, relativePath: path))
        }
        for (path, now) in found {
            if let before = known[path] {
                if before.identity.inode != now.identity.inode || before.identity.device != now.identity.device
                    || !before.sameContentState(as: now)
                {
                    changes.append(.changed(now))
                }
            } else {
                changes.append(.created(now))
            }
        }
        known = found
        return changes.sorted { $0.relativePath < $1.relativePath }
    }

    /// The root is gone: every known file is reported deleted and the watch goes quiet.
    private func rootGone() -> [DirectoryChange] {
        let changes = known.values.sorted { $0.relativePath < $1.relativePath }.map {
            DirectoryChange.deleted(path: $0.path, relativePath: $0.relativePath)
        }
        quiet = true
        known.removeAll()
        pending.removeAll()
        moveSources.removeAll()
        moveDestinations.removeAll()
        unpairedFiles.removeAll()
        unpairedDirectories.removeAll()
        for descriptor in directoryWatches.values { _ = inotify_rm_watch(inotify, descriptor) }
        directoryWatches.removeAll()
        directoryPaths.removeAll()
        return changes
    }
}
