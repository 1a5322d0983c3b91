import FileStore
import Synchronization
import TextBuffer

/// The open documents of the process (the Session of the architecture): one actor, so that each
/// document's edits apply in the order they arrive. Long work (loading a file) runs off the actor on
/// its own task; only the quick installation of the result runs on it.
public actor DocumentStore {
    private var documents: [String: Document] = [:]
    private var handleByPath: [String: String] = [:]
    /// Loads in progress by path, so that a second open of the same file waits for the first.
    private var loads: [String: (task: Task<Result<String, DocumentError>, Never>, waiters: LoadWaiters)] = [:]
    private var nextHandle = 1

    public init() {}

    /// The number of open documents.
    public var count: Int { documents.count }

    /// A copy of an open document (an O(1) snapshot of its text).
    public func document(_ handle: String) throws(DocumentError) -> Document {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        return document
    }

    // MARK: - Opening and creating

    /// Opens the file at `path`, or answers the document already open for it (by path, or by the
    /// file's device and inode when another path names the same file).
    ///
    /// The file is read off the actor; `progress` receives bytes read and the size, and the load
    /// stops with `.load(.cancelled)` once `isCancelled` answers true.
    public func open(
        path: String, encoding: TextEncoding?,
        progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false }
    ) async throws(DocumentError) -> Document {
        if let handle = handleByPath[path], let document = documents[handle] { return document }
        let task: Task<Result<String, DocumentError>, Never>
        if let running = loads[path] {
            // One load serves every opener of the path; it stops only when all have cancelled.
            running.waiters.add(isCancelled)
            task = running.task
        } else {
            let waiters = LoadWaiters(isCancelled)
            let isCancelled: @Sendable () -> Bool = { waiters.allCancelled }
            let load = Task.detached { await runOnOwnThread { () -> Result<(TextBuffer, LoadedText), DocumentError> in
                var buffer = TextBuffer()
                do throws(LoadError) {
                    let loaded = try TextFileLoader.load(
                        path: path, encoding: encoding, progress: progress, isCancelled: isCancelled
                    ) { piece in
                        // The loader hands over well-formed UTF-8 only: straight into chunks.
                        buffer.append(utf8: piece)
                    }
                    return .success((buffer, loaded))
                } catch {
                    return .failure(.load(error))
                }
            } }
            task = Task { () -> Result<String, DocumentError> in
                let result = await load.value
                return self.finishLoad(path: path, result)
            }
            loads[path] = (task, waiters)
        }
        let result = await task.value
        // An opener that cancelled while others kept the load going still gets its cancellation.
        if isCancelled() { throw .load(.cancelled) }
        switch result {
        case .success(let handle):
            guard let document = documents[handle] else { throw .unknownDocument(handle) }
            return document
        case .failure(let error):
            throw error
        }
    }

    private func finishLoad(path: String, _ result: Result<(TextBuffer, LoadedText), DocumentError>) -> Result<String, DocumentError> {
        loads[path] = nil
        switch result {
        case .failure(let error):
            return .failure(error)
        case .success(let (buffer, loaded)):
            if let existing = documents.values.first(where: {
                $0.identity.device == loaded.identity.device && $0.identity.inode == loaded.identity.inode
            }) {
                // The same file under another path (a symlink, a hard link): one session for it.
                return .success(existing.handle)
            }
            let document = Document(
                handle: makeHandle(), path: path, buffer: buffer, history: UndoHistory(),
                encoding: loaded.encoding, hasByteOrderMark: loaded.hasByteOrderMark,
                lineEnding: loaded.lineEnding, identity: loaded.identity)
            install(document)
            return .success(document.handle)
        }
    }

    /// Creates a new file at `path` holding `text` (UTF-8, no byte order mark) and opens it. A file
    /// already at the path is never overwritten: `.alreadyExists`.
    public func create(path: String, text: String) throws(DocumentError) -> Document {
        let bytes = Array(text.utf8)
        let identity: FileIdentity
        do throws(FileSystemError) {
            identity = try FileCreation.createNew(path: path, bytes: bytes)
        } catch {
            if error.code == "EEXIST" { throw .alreadyExists(path: path) }
            throw .fileSystem(error)
        }
        var lines = LineEndingCounter()
        bytes.withUnsafeBufferPointer { lines.count($0) }
        let document = Document(
            handle: makeHandle(), path: path, buffer: TextBuffer(text), history: UndoHistory(),
            encoding: .utf8, hasByteOrderMark: false, lineEnding: lines.style, identity: identity)
        install(document)
        return document
    }

    private func makeHandle() -> String {
        defer { nextHandle += 1 }
        return "d\(nextHandle)"
    }

    private func install(_ document: Document) {
        documents[document.handle] = document
        handleByPath[document.path] = document.handle
    }

    // MARK: - Reading and editing

    /// The text, whole or of a range, and the version it belongs to.
    public func read(_ handle: String, range: TextRange?, encoding: PositionEncoding) throws(DocumentError) -> (text: String, version: Int64) {
        let document = try document(handle)
        guard let range else { return (document.buffer.text, document.version) }
        do throws(TextBufferError) {
            let utf8Range = try document.buffer.utf8Range(of: range, encoding: encoding)
            return (document.buffer.text(in: utf8Range), document.version)
        } catch {
            throw .invalidText(error)
        }
    }

    /// Applies `edits` in order, all or nothing, as one undo step (or folded into the last one with
    /// `merge`), provided the document is still at `version`; answers the new version.
    public func edit(
        _ handle: String, version: Int64, edits: [TextEdit], encoding: PositionEncoding, label: String?, merge: Bool
    ) throws(DocumentError) -> Int64 {
        try modify(handle) { (document) throws(DocumentError) -> Int64 in
            try Self.checkEditable(document, version: version)
            let applied: [AppliedEdit]
            do throws(TextBufferError) {
                applied = try document.buffer.apply(edits: edits, encoding: encoding)
            } catch {
                throw .invalidText(error)
            }
            if applied.contains(where: { !$0.isNoOp }) {
                document.history.record(applied, label: label, merge: merge)
                document.version += 1
            }
            return document.version
        }
    }

    /// Undoes the last step; answers the new version and the edits that turn the previous text into
    /// the new one (none when there was nothing to undo).
    public func undo(_ handle: String, version: Int64?, encoding: PositionEncoding) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try step(handle, version: version) { document in document.history.undo(&document.buffer, encoding: encoding) }
    }

    /// Redoes the last undone step (see `undo`).
    public func redo(_ handle: String, version: Int64?, encoding: PositionEncoding) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try step(handle, version: version) { document in document.history.redo(&document.buffer, encoding: encoding) }
    }

    private func step(
        _ handle: String, version: Int64?, _ body: (inout Document) -> [TextEdit]?
    ) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try modify(handle) { (document) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) in
            try Self.checkEditable(document, version: version ?? document.version)
            guard let edits = body(&document) else { return (document.version, []) }
            document.version += 1
            return (document.version, edits)
        }
    }

    private static func checkEditable(_ document: Document, version: Int64) throws(DocumentError) {
        if document.state.contains(.editingDisabled) {
            throw .editingDisabled(handle: document.handle, reason: "the document is busy")
        }
        guard document.version == version else { throw .staleVersion(current: document.version, given: version) }
    }

    /// Runs `body` on the stored document in place (no copy of its history or text).
    private func modify<T>(_ handle: String, _ body: (inout Document) throws(DocumentError) -> T) throws(DocumentError) -> T {
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        return try body(&documents[handle]!)
    }

    // MARK: - Closing

    /// What `close` does with unsaved edits.
    public enum SavePolicy: String, Sendable {
        /// Save first if there are unsaved changes (UIDocument's close).
        case ifChanged
        /// Drop them.
        case never
    }

    /// Closes a document; answers whether it was saved. Until safe saving exists, `ifChanged` with
    /// unsaved edits is refused rather than dropping them.
    public func close(_ handle: String, save: SavePolicy) throws(DocumentError) -> Bool {
        let document = try document(handle)
        if save == .ifChanged, document.hasUnsavedChanges { throw .unsavedChanges(handle: handle) }
        documents[handle] = nil
        if handleByPath[document.path] == handle { handleByPath[document.path] = nil }
        return false
    }
}

/// The cancellation checks of everyone waiting for one load.
final class LoadWaiters: Sendable {
    private let checks: Mutex<[@Sendable () -> Bool]>

    init(_ first: @escaping @Sendable () -> Bool) {
        checks = Mutex([first])
    }

    func add(_ check: @escaping @Sendable () -> Bool) {
        checks.withLock { $0.append(check) }
    }

    /// Whether every waiter has cancelled. The checks run outside the lock.
    var allCancelled: Bool { checks.withLock { $0 }.allSatisfy { $0() } }
}
