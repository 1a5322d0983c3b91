import DocumentSession
import FileStore
import JSON
import JSONRPC
import Synchronization

/// The live queries of a server (`workspace/query` with `watch`), by id. Isolated to the server,
/// like the rest of its state: touched in request order, never by a `Reply.later` closure.
struct WorkspaceQueries {
    /// The live queries, by id (`q1`, `q2`, ...).
    var live: [String: LiveQuery] = [:]
    /// The number of the next query's id.
    var nextNumber = 1
    /// Tells the queries when their response has been written (installed on the writer once).
    var responses: ResponseGate?

    /// Stops every query (at `shutdown`): nothing more is sent for any; answers their watches,
    /// for the caller to stop off the loop (``Workspace/stop(_:)-([DirectoryWatch])``).
    mutating func stopAll() -> [DirectoryWatch] {
        let watches = live.values.map { $0.stop() }
        live.removeAll()
        return watches
    }
}

/// Knows which responses the queries wait for, and tells each when its response is written: a
/// writer observer, so it runs under the writer's lock just before the response's bytes go out,
/// and whatever a query sends after that comes after the response.
final class ResponseGate: Sendable {
    private let waiting = Mutex<[(id: RequestID, written: @Sendable () -> Void)]>([])

    /// Calls `written` (once) when the response to `id` is about to be written.
    func wait(for id: RequestID, _ written: @escaping @Sendable () -> Void) {
        waiting.withLock { $0.append((id, written)) }
    }

    /// The writer's observer: told the id of every response (a batch's one by one).
    func observe(_ id: RequestID) {
        let due: (@Sendable () -> Void)? = waiting.withLock { waiting in
            guard let index = waiting.firstIndex(where: { $0.id == id }) else { return nil }
            return waiting.remove(at: index).written
        }
        due?()
    }
}

/// One live query: its directory watch, and the task that turns the watch's batches into
/// `workspace/didChangeFiles`, in order, once the query's response is out.
final class LiveQuery: Sendable {
    /// What the forwarding task receives, in order.
    enum Event: Sendable {
        /// The query's response is being written: notifications may follow it.
        case responseWritten
        /// A batch of the watch.
        case changes([DirectoryChange])
    }

    let id: String
    let watch: DirectoryWatch
    private let events: AsyncStream<Event>.Continuation
    /// Set by ``stop()``; checked under the same lock as each notification is written, so none
    /// goes out after `stop` returns.
    private let stopped = Mutex(false)

    init(id: String, watch: DirectoryWatch, events: AsyncStream<Event>.Continuation) {
        self.id = id
        self.watch = watch
        self.events = events
    }

    /// Stops the forwarding and any notification not yet written: none goes out after this
    /// returns (``send(_:with:)`` looks under the same lock). Answers the watch, for the caller to
    /// stop off the loop (``Workspace/stop(_:)-(DirectoryWatch)``: a join of its thread); a batch
    /// it delivers meanwhile goes into the finished stream and is dropped. Idempotent.
    func stop() -> DirectoryWatch {
        stopped.withLock { $0 = true }
        events.finish()
        return watch
    }

    /// Writes `notification` unless the query was stopped.
    func send(_ notification: Notification, with writer: MessageWriter) {
        stopped.withLock { stopped in
            if !stopped { writer.send(notification) }
        }
    }
}

extension Server {
    /// `workspace/query`: the regular files under a directory that match a glob, sorted by relative
    /// path; with `watch`, a live query whose changes follow as `workspace/didChangeFiles`. The
    /// directory is read off the loop thread, in request order.
    func query(_ params: QueryRequest, _ context: RequestContext) async throws(ResponseError) -> WorkspaceQueryResult {
        let root = try await checkPath(params.root, field: "params.root", mustExist: true)
        let recursive = params.recursive
        let watching = params.watch
        let pattern = params.pattern
        let rootPath = root.path
        let roots = roots
        let store = store
        let writer = writer

        guard watching else {
            let scanned = await Workspace.scan(root: rootPath, pattern: pattern, recursive: recursive)
            switch scanned {
            case .success(let entries):
                let open = OpenFiles(await store.openFiles)
                let listed = entries.filter { Self.isInside($0.path, roots) && !SyncConflictNames.isTemporary($0.name) }
                var sync = await SyncAnnotations(listed: listed, root: rootPath)
                await sync.addKeptConflicts(of: listed, store: store)
                return WorkspaceQueryResult(query: nil, files: listed.map { Self.fileInfo($0, open, sync) })
            case .failure(let error):
                throw Self.fileSystemError(error)
            }
        }

        // The watch's batches go into the stream from the start (the first may come before the
        // watch's init returns); the forwarding task holds them until the response is written.
        let (stream, continuation) = AsyncStream.makeStream(of: LiveQuery.Event.self)
        let started = await Workspace.watch(root: rootPath, pattern: pattern, recursive: recursive) { changes in
            continuation.yield(.changes(changes))
        }
        let watch: DirectoryWatch
        switch started {
        case .success(let started): watch = started
        case .failure(let error):
            continuation.finish()
            throw Self.fileSystemError(error)
        }
        let id = "q\(queries.nextNumber)"
        queries.nextNumber += 1
        let query = LiveQuery(id: id, watch: watch, events: continuation)
        queries.live[id] = query
        let gate: ResponseGate
        if let existing = queries.responses {
            gate = existing
        } else {
            gate = ResponseGate()
            writer.addResponseObserver { [gate] id in gate.observe(id) }
            queries.responses = gate
        }
        gate.wait(for: context.id) { continuation.yield(.responseWritten) }
        Self.startForwarding(stream, of: query, roots: roots, store: store, writer: writer)

        let open = OpenFiles(await store.openFiles)
        let listed = watch.initialEntries.filter { Self.isInside($0.path, roots) && !SyncConflictNames.isTemporary($0.name) }
        var sync = await SyncAnnotations(listed: listed, root: rootPath)
        await sync.addKeptConflicts(of: listed, store: store)
        return WorkspaceQueryResult(query: id, files: listed.map { Self.fileInfo($0, open, sync) })
    }

    /// `workspace/stopQuery`: ends a live query; nothing more is sent for it after the response.
    func stopQuery(_ params: StopQueryRequest) async throws(ResponseError) -> NullResult {
        let id = params.query
        guard let query = queries.live.removeValue(forKey: id) else {
            throw ResponseError(.unknownQuery, "No live query has the id \"\(id)\"", data: ["query": .string(id)])
        }
        await Workspace.stop(query.stop())
        return NullResult()
    }

    /// Stops every live query (`shutdown`), joining their watches' threads off the loop.
    func stopAllQueries() async {
        await Workspace.stop(queries.stopAll())
    }

    // MARK: - Encoding

    /// Which files are open as documents: by path, else by device and inode (a hard link, or the
    /// document opened through a symlink).
    struct OpenFiles {
        struct FileKey: Hashable {
            var device: UInt64
            var inode: UInt64
        }
        var byPath: [String: String] = [:]
        var byFile: [FileKey: String] = [:]

        init(_ files: [(handle: String, path: String, device: UInt64, inode: UInt64)]) {
            for file in files {
                byPath[file.path] = file.handle
                byFile[FileKey(device: file.device, inode: file.inode)] = file.handle
            }
        }

        func handle(_ entry: DirectoryEntry) -> String? {
            byPath[entry.path] ?? byFile[FileKey(device: entry.identity.device, inode: entry.identity.inode)]
        }
    }

    /// What a query says of synced folders (§11.3): the sync tool marking each file's folder (its
    /// marker in the file's directory or an ancestor up to the query's root; each directory listed
    /// once per query, or per batch of a live query) and the unresolved conflict copies beside
    /// each file (counted among the files listed, or, for a live change, among the directory's names).
    struct SyncAnnotations {
        var tools: [String: SyncConflictNames.Tool] = [:]
        var conflicts: [String: Int] = [:]

        init() {}

        /// For the files of a query's answer: copies counted among the names listed.
        init(listed entries: [DirectoryEntry], root: String) async {
            tools = await Workspace.syncTools(forFiles: entries.map(\.path), root: root)
            var names: [String: Set<String>] = [:]
            for entry in entries { names[SyncToolFinder.parent(entry.path), default: []].insert(entry.name) }
            // Each directory's names are read once, off the loop.
            let directories = names
            let counted = await runOnOwnThread { directories.mapValues { StorageLocations.conflictCopyCounts(among: $0) } }
            for entry in entries {
                if let count = counted[SyncToolFinder.parent(entry.path)]?[entry.name], count > 0 { conflicts[entry.path] = count }
            }
        }

        /// For the files of a live query's batch: copies counted among the directory's names.
        init(changed entries: [DirectoryEntry], root: String) async {
            guard !entries.isEmpty else { return }
            tools = await Workspace.syncTools(forFiles: entries.map(\.path), root: root)
            conflicts = await Workspace.conflictCounts(forFiles: entries.map(\.path))
        }

        /// Adds the conflict versions kept for each file and not resolved (a change on disk under
        /// unsaved edits that nobody settled, in this server or an earlier one): NSFileVersion's
        /// unresolved conflict versions are the copies beside the file and these.
        mutating func addKeptConflicts(of entries: [DirectoryEntry], store: DocumentStore) async {
            guard !entries.isEmpty else { return }
            for (path, count) in await store.unresolvedConflictVersionCounts(forPaths: entries.map(\.path)) {
                conflicts[path, default: 0] += count
            }
        }
    }

    /// A query's `FileInfo`: `syncTool` and `conflicts` only when there is a marker, and copies.
    static func fileInfo(_ entry: DirectoryEntry, _ open: OpenFiles, _ sync: SyncAnnotations = SyncAnnotations()) -> JSONValue {
        var info: JSONObject = [
            "uri": .string(FileURI.uri(from: entry.path)),
            "name": .string(entry.name),
            "relativePath": .string(entry.relativePath),
            "displayName": .string(Document.displayName(forPath: entry.path)),
            "size": .integer(entry.size),
            "modificationDate": .string(Timestamp.iso8601(nanoseconds: entry.modificationTime)),
            "fileType": .string(FileType.identifier(forPath: entry.path)),
        ]
        if let handle = open.handle(entry) {
            info["isOpen"] = true
            info["document"] = .string(handle)
        } else {
            info["isOpen"] = false
        }
        if let tool = sync.tools[entry.path] { info["syncTool"] = .string(tool.rawValue) }
        if let count = sync.conflicts[entry.path] { info["conflicts"] = .integer(Int64(count)) }
        return .object(info)
    }

    /// Whether `path` is beneath one of the roots (lexically: the watch never follows symlinks);
    /// always, without roots.
    static func isInside(_ path: String, _ roots: SandboxRoots?) -> Bool {
        guard let roots else { return true }
        return roots.paths.contains { root in
            root == "/" || path == root || path.hasPrefix(root + "/")
        }
    }

    /// Starts ``forwardAll(_:of:roots:store:writer:)`` on a task of its own.
    static func startForwarding(
        _ stream: AsyncStream<LiveQuery.Event>, of query: LiveQuery, roots: SandboxRoots?, store: DocumentStore, writer: MessageWriter
    ) {
        Task { await forwardAll(stream, of: query, roots: roots, store: store, writer: writer) }
    }

    /// The forwarding task of a live query: holds the watch's batches until the query's response
    /// is written, then sends each, in order, until the query stops.
    static func forwardAll(
        _ stream: AsyncStream<LiveQuery.Event>, of query: LiveQuery, roots: SandboxRoots?, store: DocumentStore, writer: MessageWriter
    ) async {
        var released = false
        var held: [[DirectoryChange]] = []
        for await event in stream {
            switch event {
            case .responseWritten:
                released = true
                for changes in held { await forward(changes, of: query, roots: roots, store: store, writer: writer) }
                held = []
            case .changes(let changes):
                if released {
                    await forward(changes, of: query, roots: roots, store: store, writer: writer)
                } else {
                    held.append(changes)
                }
            }
        }
    }

    /// Sends one batch of a query's watch as `workspace/didChangeFiles` (nothing for a batch whose
    /// changes all fall outside the roots).
    static func forward(
        _ changes: [DirectoryChange], of query: LiveQuery, roots: SandboxRoots?, store: DocumentStore, writer: MessageWriter
    ) async {
        let open = OpenFiles(await store.openFiles)
        // The tools' temporary files are never listed, nor their changes reported: a temporary
        // file renamed to its real name (a download finished) is that file's creation.
        let changes = changes.compactMap { change -> DirectoryChange? in
            func temporary(_ path: String) -> Bool { SyncConflictNames.isTemporary(Document.displayName(forPath: path)) }
            switch change {
            case .created(let entry), .changed(let entry): return temporary(entry.path) ? nil : change
            case .deleted(let path, _): return temporary(path) ? nil : change
            case .moved(let from, let entry):
                switch (temporary(from), temporary(entry.path)) {
                case (true, true): return nil
                case (true, false): return .created(entry)
                case (false, true):
                    let root = query.watch.root
                    let relative = from.hasPrefix(root + "/") ? String(from.dropFirst(root.count + 1)) : Document.displayName(forPath: from)
                    return .deleted(path: from, relativePath: relative)
                case (false, false): return change
                }
            }
        }
        let shown = changes.compactMap { change -> DirectoryEntry? in
            switch change {
            case .created(let entry), .changed(let entry), .moved(_, let entry): return entry
            case .deleted: return nil
            }
        }
        var sync = await SyncAnnotations(changed: shown, root: query.watch.root)
        await sync.addKeptConflicts(of: shown, store: store)
        var items: [JSONValue] = []
        for change in changes {
            switch change {
            case .created(let entry):
                guard isInside(entry.path, roots) else { continue }
                items.append(["type": "created", "uri": .string(FileURI.uri(from: entry.path)), "file": fileInfo(entry, open, sync)])
            case .changed(let entry):
                guard isInside(entry.path, roots) else { continue }
                items.append(["type": "changed", "uri": .string(FileURI.uri(from: entry.path)), "file": fileInfo(entry, open, sync)])
            case .deleted(let path, _):
                guard isInside(path, roots) else { continue }
                items.append(["type": "deleted", "uri": .string(FileURI.uri(from: path))])
            case .moved(let from, let entry):
                switch (isInside(from, roots), isInside(entry.path, roots)) {
                case (true, true):
                    items.append([
                        "type": "moved", "uri": .string(FileURI.uri(from: entry.path)),
                        "oldUri": .string(FileURI.uri(from: from)), "file": fileInfo(entry, open, sync),
                    ])
                case (false, true):
                    items.append(["type": "created", "uri": .string(FileURI.uri(from: entry.path)), "file": fileInfo(entry, open, sync)])
                case (true, false):
                    items.append(["type": "deleted", "uri": .string(FileURI.uri(from: from))])
                case (false, false):
                    continue
                }
            }
        }
        guard !items.isEmpty else { return }
        query.send(
            Notification(method: "workspace/didChangeFiles", params: ["query": .string(query.id), "changes": .array(items)]),
            with: writer)
    }
}
