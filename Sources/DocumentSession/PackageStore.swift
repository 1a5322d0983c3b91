import Execution
import FileStore
import ManagedStore
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// The open package and managed documents (issue 18; protocol/README.md §13): directories that are
/// one document. An actor on the same thread as the ``DocumentStore`` (the server's loop), beside
/// it rather than inside it: a text document's path (rope, journal, mirroring, the typing client's
/// fast way) has nothing to share with a tree of entries, and each keeps its invariants whole.
///
/// Entries written by a client are kept in memory until the save; the others stay on disk and are
/// read when asked and carried over by the save (``PackageSave``: a staged sibling tree swapped in
/// with one `renameat2(RENAME_EXCHANGE)`). Every change is one undoable step and raises the version
/// by one; the package's tree is watched, and a change by another program is one change of the
/// document: reloaded when there are no unsaved changes, a conflict when there are.
public actor PackageStore {
    var documents: [String: PackageDocument] = [:]
    var handleByPath: [String: String] = [:]
    private var nextHandle = 1
    /// The save in progress per document: the next save, and the managed store's work, wait for it.
    var saving: [String: Task<Void, Never>] = [:]
    /// The watch of each package's tree.
    var watches: [String: DirectoryWatch] = [:]
    /// The removals of old trees that saves left beside their packages (after their answers).
    var leftoverRemovals: [Task<Void, Never>] = []
    /// The last save asked for of each document (``enqueueSave(_:force:to:reserved:)``): the next
    /// one starts after it.
    var saveLine: [String: Task<Void, Never>] = [:]
    /// The last store call (`store/execute`, `store/query`) or save's taking of its snapshot asked
    /// for of each document (``inLine(_:_:)``): the document's requests that read or change it
    /// come after it (``waitForLine(_:)``), while the other documents are served.
    var storeLine: [String: Task<Void, Never>] = [:]
    /// The paths saves as are writing, from their requests (in order) to their ends: a second save
    /// as to one of them is refused, an open of one waits for the save.
    var saveAsTargets: [String: SaveAsReservation] = [:]
    /// Checks of the tree asked for while one ran or a save was in progress.
    var checkAgain: Set<String> = []
    var checking: Set<String> = []
    let events: @Sendable (DocumentEvent) -> Void
    let watchFiles: Bool
    /// Where managed stores keep their private working copies (issue 18.2).
    /// Made at the first managed document (a server that opens none makes nothing on disk), under
    /// the state directory (nil: `$TMPDIR`).
    var workingDirectory: ManagedWorkingDirectory? = nil
    let stateDirectory: String?
    /// The managed stores of the open managed documents (PackageStore+Managed.swift).
    var databases: [String: DatabaseHandle] = [:]
    /// Test hook: behave as if the file system refused `RENAME_EXCHANGE` (the two-rename fallback).
    public var exchangeUnsupported = false
    nonisolated let executor: LoopExecutor
    /// The text documents' journal writer and directory, shared (PackageStore+Journal.swift): nil
    /// when unsaved changes are not journaled.
    let journal: JournalWriter?
    let journalDirectory: JournalDirectory?
    /// The journals this store writes, by handle.
    var journals: [String: PackageActiveJournal] = [:]
    /// The bytes handed to each package's journal since the last ``takeJournalBytes(_:)``: a change
    /// whose records are large is answered once they are on disk (`DocumentStore.largeChange`).
    var journalBytesNoted: [String: Int] = [:]
    /// Dead servers' journals offered for open packages.
    var recoveries: [String: PackageRecoveryOffer] = [:]
    /// How many live servers hold journals of each open package.
    var heldElsewhere: [String: Int] = [:]
    /// After a journal could not be written, when the next one may be tried.
    var journalRetry: [String: ContinuousClock.Instant] = [:]

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The largest entry `document/writeEntry` keeps and `document/readEntry` answers.
    public static let maximumEntrySize = 64 << 20

    /// Whether `handle` is one this store issues (`p1`, `p2`, ...); text documents' are `d1`, ...
    public nonisolated static func isPackageHandle(_ handle: String) -> Bool {
        handle.hasPrefix("p") && handle.dropFirst().allSatisfy(\.isNumber) && handle.count > 1
    }

    /// - Parameter journalOf: the text documents' store, whose journal writer (if it has one)
    ///   writes packages' journals too, in the same directory.
    public init(
        events: @escaping @Sendable (DocumentEvent) -> Void, watchFiles: Bool = true, stateDirectory: String?,
        executor: LoopExecutor = .shared, journalOf store: DocumentStore? = nil
    ) {
        self.events = events
        self.watchFiles = watchFiles
        self.stateDirectory = stateDirectory
        self.executor = executor
        journal = store?.journal
        journalDirectory = store?.journalDirectory
        journal?.setPackageErrorHandler { [weak self] handle, error in
            Task { await self?.journalFailed(handle, error) }
        }
    }

    /// The known package extensions: a directory with one of them opens as a package without `kind`.
    public static let packageExtensions: Set<String> = ["textbundle", "rtfd", "package", "docpackage"]

    /// The kind a directory opens as without `kind`: `managed` when it holds a managed store,
    /// `package` for a known package extension, nil otherwise (a directory is not a document).
    public nonisolated static func impliedKind(ofDirectory path: String) -> PackageKind? {
        if (try? fileStatus(path + "/" + DatabaseLayout.storePath)) != nil { return .managed }
        let name = Document.displayName(forPath: path)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        return packageExtensions.contains(name[name.index(after: dot)...].lowercased()) ? .package : nil
    }

    /// Whether `path` names a directory (following symbolic links, as opening it does).
    public nonisolated static func isDirectory(_ path: String) -> Bool {
        guard let status = try? fileStatus(path) else { return false }
        return (status.st_mode & S_IFMT) == S_IFDIR
    }

    func makeHandle() -> String {
        defer { nextHandle += 1 }
        return "p\(nextHandle)"
    }

    /// Names the working copies of managed stores (a handle is given only to an open that succeeds).
    var nextWorkingCopy = 1

    /// The kind of an open package document, nil when no package has this handle.
    public func kind(of handle: String) -> PackageKind? { documents[handle]?.kind }

    func document(_ handle: String) throws(DocumentError) -> PackageDocument {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        return document
    }

    public func info(_ handle: String) throws(DocumentError) -> PackageDocument {
        try document(handle)
    }

    public func handle(forPath path: String) -> String? { handleByPath[path] }

    public var openHandles: [String] { Array(documents.keys) }

    // MARK: - Opening

    /// What the disk holds of a package: its entries and tree signature, after finishing or
    /// rolling back an interrupted save.
    struct DiskTree: Sendable {
        var entries: [String: EntryContent]
        var emptyDirectories: Set<String>
        var signature: PackageSignature
        var recovered: PackageRecovery?
    }

    /// Reads the package at `path` off the actor (`recover`: first finish or roll back a save a
    /// crash interrupted, as the next open must).
    static func readTree(_ path: String, kind: PackageKind, recover: Bool) async throws(DocumentError) -> DiskTree {
        let result = await runOnOwnThread { () -> Result<DiskTree, FileSystemError> in
            do throws(FileSystemError) {
                let recovered = recover ? try PackageSave.recoverInterruptedSave(packageAt: path) : nil
                var tree = try listTree(path, kind: kind)
                tree.recovered = recovered
                return .success(tree)
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let tree): return tree
        case .failure(let error): throw .fileSystem(error)
        }
    }

    /// The package's tree as it is on disk now (blocking: off the actor).
    static func listTree(_ path: String, kind: PackageKind) throws(FileSystemError) -> DiskTree {
        let signature = try PackageSave.signature(of: path)
        let listed = try PackageSave.entries(of: path)
        var modified: [String: Int64] = [:]
        for item in signature.items { modified[item.path] = item.modificationNanoseconds }
        var entries: [String: EntryContent] = [:]
        var directories: Set<String> = []
        var nonEmpty: Set<String> = []
        for entry in listed {
            if kind == .managed && DatabaseLayout.isStoreFile(entry.path) { continue }
            switch entry.kind {
            case .directory:
                directories.insert(entry.path)
            case .other:
                // A FIFO, socket or device inside a package: not an entry (never read or written).
                continue
            case .file, .symlink:
                entries[entry.path] = .onDisk(kind: entry.kind == .file ? .file : .symlink, size: entry.size, modified: modified[entry.path] ?? 0)
                var parent = entry.path
                while let slash = parent.lastIndex(of: "/") {
                    parent = String(parent[..<slash])
                    nonEmpty.insert(parent)
                }
            }
        }
        if kind == .managed { directories.subtract(DatabaseLayout.storeDirectories) }
        return DiskTree(entries: entries, emptyDirectories: directories.subtracting(nonEmpty), signature: signature, recovered: nil)
    }

    /// Opens the package (or managed document) at `path`: an open document of that path answers
    /// itself. The directory must exist (``create(path:kind:storeOptions:)`` makes one).
    public func open(path: String, kind: PackageKind, storeOptions: StoreOptions = StoreOptions()) async throws(DocumentError) -> (PackageDocument, PackageRecovery?) {
        // A save as writing this path: the open answers the document it moves there.
        await waitForSaveAs(to: path)
        if let handle = handleByPath[path], let document = documents[handle] {
            guard document.kind == kind else {
                throw .wrongKind(handle: handle, kind: document.kind.rawValue, operation: "open as \(kind.rawValue)")
            }
            return (document, nil)
        }
        // The old trees this server's saves left beside their packages are removed first: a save
        // answered, its package closed and opened again at once (under disk load, the removal is
        // slow) must not be taken for a save a crash interrupted, nor cleaned up twice.
        for removal in leftoverRemovals { await removal.value }
        let tree = try await Self.readTree(path, kind: kind, recover: true)
        if let handle = handleByPath[path], let document = documents[handle] { return (document, nil) }
        // The store first: a failing migration must not use up a handle.
        let database = kind == .managed ? try await openDatabase(packagePath: path, options: storeOptions) : nil
        if let handle = handleByPath[path], let document = documents[handle] {
            database?.close()
            return (document, nil)
        }
        let handle = makeHandle()
        var document = PackageDocument(
            handle: handle, path: path, kind: kind, entries: tree.entries, emptyDirectories: tree.emptyDirectories,
            signature: tree.signature)
        if let database {
            databases[handle] = database
            document.storeSummary = database.summary
            if database.summary.migratedTo != database.summary.migratedFrom {
                // The working copy was migrated; the published store was not: an unsaved change (a
                // close saves it), outside the history (a migration is not undone).
                document.cleanPosition = nil
            }
        }
        documents[handle] = document
        handleByPath[path] = handle
        startWatching(handle)
        if let directory = journalDirectory {
            // A dead server's journal of the package: offered (nothing of it applied yet).
            let writer = journal
            let fresh = document
            let storeVersion = document.storeSummary.map { Int64($0.userVersion) } ?? -1
            // A managed document's journal is tried on a scratch store, as a recovery replays it.
            let trialPath = kind == .managed ? workingDirectory.map { $0.path + "/recovery-\(handle).sqlite" } : nil
            let trialOptions = StoreOptions(migrations: storeOptions.migrations)
            let trialStore = trialPath.map { trialPath in
                { @Sendable () -> DatabaseHandle? in
                    let published = path + "/" + DatabaseLayout.storePath
                    let existing = (try? fileStatus(published)) != nil ? published : nil
                    guard let store = try? ManagedStore(publishedPath: existing, workingPath: trialPath, options: trialOptions) else {
                        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(trialPath + suffix) }
                        return nil
                    }
                    return DatabaseHandle(store: store, workingPath: trialPath, readOnly: false)
                }
            }
            let scan = await runOnOwnThread {
                Self.scanJournals(
                    directory, path: path, document: fresh, tree: tree, storeVersion: storeVersion, trialStore: trialStore,
                    isOwn: { writer?.owns($0) ?? false })
            }
            if documents[handle] != nil {
                recoveries[handle] = scan.offer
                heldElsewhere[handle] = scan.held
            }
        }
        return (documents[handle] ?? document, tree.recovered)
    }

    /// Creates a package (empty) or a managed document (an empty store with the migrations
    /// applied) at `path`, which must not exist, and opens it. Written by a first save, so it
    /// appears whole or not at all.
    public func create(path: String, kind: PackageKind, storeOptions: StoreOptions = StoreOptions()) async throws(DocumentError) -> PackageDocument {
        if handleByPath[path] != nil || (try? fileStatus(path, followingSymlinks: false)) != nil {
            throw .alreadyExists(path: path)
        }
        var writes: [PackageEntryWrite] = []
        var database: DatabaseHandle? = nil
        if kind == .managed {
            let opened = try await openDatabase(packagePath: nil, options: storeOptions)
            database = opened
            writes.append(PackageEntryWrite(path: DatabaseLayout.storePath, source: .produce({ (destination) throws(FileSystemError) in
                try opened.publish(to: destination)
            })))
        }
        let exchangeUnsupported = exchangeUnsupported
        let firstWrites = writes
        let result = await runOnOwnThread { () -> Result<PackageSignature, FileSystemError> in
            do throws(FileSystemError) {
                _ = try PackageSave.save(packageAt: path, entries: firstWrites, exchangeUnsupported: exchangeUnsupported)
                return .success(try PackageSave.signature(of: path))
            } catch {
                return .failure(error)
            }
        }
        let signature: PackageSignature
        switch result {
        case .success(let value): signature = value
        case .failure(let error):
            database?.close()
            if error.errno == 17 /* EEXIST */ { throw .alreadyExists(path: path) }
            throw .fileSystem(error)
        }
        let handle = makeHandle()
        var document = PackageDocument(handle: handle, path: path, kind: kind, entries: [:], emptyDirectories: [], signature: signature)
        if let database {
            databases[handle] = database
            document.storeSummary = database.summary
        }
        documents[handle] = document
        handleByPath[path] = handle
        startWatching(handle)
        return document
    }

    // MARK: - Entries

    /// Checks `path` as an entry path of `document` for writing.
    func checkWritable(_ path: String, in document: PackageDocument) throws(DocumentError) {
        if let problem = EntryReading.pathProblem(path) { throw .entry(.invalidPath(path: path, reason: problem)) }
        if document.kind == .managed && DatabaseLayout.isStoreFile(path) {
            throw .entry(.reserved(path: path, reason: "the managed store is changed through store/execute"))
        }
        if document.isDirectory(path) { throw .entry(.isDirectory(path: path)) }
        if let file = document.fileAncestor(of: path) { throw .entry(.underFile(path: path, file: file)) }
    }

    func checkVersion(_ document: PackageDocument, _ version: Int64?) throws(DocumentError) {
        if let version, version != document.version { throw .staleVersion(current: document.version, given: version) }
    }

    func checkEditable(_ document: PackageDocument) throws(DocumentError) {
        if document.state.contains(.editingDisabled) {
            throw .editingDisabled(handle: document.handle, reason: "a revert or close is in progress")
        }
    }

    /// `document/readEntry`: the bytes of an entry, the unsaved ones when it was written.
    public func readEntry(_ handle: String, path: String) async throws(DocumentError) -> EntryRead {
        let document = try document(handle)
        if let problem = EntryReading.pathProblem(path) { throw .entry(.invalidPath(path: path, reason: problem)) }
        if document.kind == .managed && DatabaseLayout.isStoreFile(path) {
            throw .entry(.reserved(path: path, reason: "the managed store is read through store/query"))
        }
        guard let content = document.entries[path] else {
            if document.isDirectory(path) { throw .entry(.isDirectory(path: path)) }
            throw .entry(.noSuchEntry(path: path))
        }
        switch content {
        case .bytes(let bytes):
            return EntryRead(path: path, bytes: bytes, unsaved: true)
        case .onDisk(.symlink, _, _):
            throw .entry(.symbolicLink(path: path))
        case .onDisk:
            let packagePath = document.path
            let result = await runOnOwnThread { () -> Result<[UInt8], FileSystemError> in
                do throws(FileSystemError) {
                    return .success(try EntryReading.read(packagePath: packagePath, relativePath: path, limit: Self.maximumEntrySize))
                } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(let bytes): return EntryRead(path: path, bytes: bytes, unsaved: false)
            case .failure(let error): throw .fileSystem(error)
            }
        }
    }

    /// `document/writeEntry`: the entry at `path` holds `bytes` (created with its directories when
    /// absent). One undoable step; the new version.
    public func writeEntry(_ handle: String, path: String, bytes: [UInt8], version: Int64?, label: String?) throws(DocumentError) -> Int64 {
        let document = try document(handle)
        try checkVersion(document, version)
        try checkEditable(document)
        try checkWritable(path, in: document)
        let version = apply(handle, PackageStep(change: .entry(path: path, before: document.entries[path], after: .bytes(bytes)), label: label), reason: .edited)
        journalNote(handle, .write(path: path, bytes: bytes, label: label), wasUnsaved: document.hasUnsavedChanges)
        return version
    }

    /// `document/deleteEntry`: removes a file or symbolic link, or an empty directory; a
    /// directory with entries is refused (delete its entries first). One undoable step.
    public func deleteEntry(_ handle: String, path: String, version: Int64?, label: String?) throws(DocumentError) -> Int64 {
        var document = try document(handle)
        try checkVersion(document, version)
        try checkEditable(document)
        if let problem = EntryReading.pathProblem(path) { throw .entry(.invalidPath(path: path, reason: problem)) }
        if document.kind == .managed && DatabaseLayout.isStoreFile(path) {
            throw .entry(.reserved(path: path, reason: "the managed store cannot be deleted as an entry"))
        }
        if document.emptyDirectories.contains(path) {
            // An empty directory: not an undoable step of its own (nothing of the user's is lost).
            let wasUnsaved = document.hasUnsavedChanges
            document.emptyDirectories.remove(path)
            documents[handle] = document
            let version = apply(handle, nil, reason: .edited)
            journalNote(handle, .removeDirectory(path: path), wasUnsaved: wasUnsaved)
            return version
        }
        guard let before = document.entries[path] else {
            if document.isDirectory(path) { throw .entry(.isDirectory(path: path)) }
            throw .entry(.noSuchEntry(path: path))
        }
        let version = apply(handle, PackageStep(change: .entry(path: path, before: before, after: nil), label: label), reason: .edited)
        journalNote(handle, .delete(path: path, label: label), wasUnsaved: document.hasUnsavedChanges)
        return version
    }

    /// Applies a new step (nil: a change outside the history), raises the version, reports a
    /// change of `hasUnsavedChanges`.
    func apply(_ handle: String, _ step: PackageStep?, reason: DocumentEvent.Reason) -> Int64 {
        guard var document = documents[handle] else { return 0 }
        let wasDirty = document.hasUnsavedChanges
        // Outside the history (nil): no position matches the disk any more.
        document.take(step)
        documents[handle] = document
        if wasDirty != document.hasUnsavedChanges { emit(document, previous: document.state, reason: reason) }
        return document.version
    }

    /// What an undo or redo did.
    public struct StepResult: Sendable {
        public var version: Int64
        public var entries: [EntryChange]
        /// Whether the managed store changed.
        public var store: Bool
    }

    /// `document/undo` of a package: the last step taken back (an entry's earlier content, or the
    /// store's transaction inverted).
    public func undo(_ handle: String, version: Int64?) async throws(DocumentError) -> StepResult {
        try await step(handle, version: version, forward: false)
    }

    /// `document/redo` of a package.
    public func redo(_ handle: String, version: Int64?) async throws(DocumentError) -> StepResult {
        try await step(handle, version: version, forward: true)
    }

    private func step(_ handle: String, version: Int64?, forward: Bool) async throws(DocumentError) -> StepResult {
        try await waitForSave(handle)
        var document = try document(handle)
        try checkVersion(document, version)
        try checkEditable(document)
        guard forward ? document.canRedo : document.canUndo else {
            return StepResult(version: document.version, entries: [], store: false)
        }
        let index = forward ? document.position : document.position - 1
        let wasDirty = document.hasUnsavedChanges
        var changes: [EntryChange] = []
        var store = false
        var storeCount: Int64 = -1
        switch document.steps[index].change {
        case .entry:
            if let change = document.stepEntry(forward: forward) { changes.append(change) }
        case .store:
            guard let database = databases[handle] else { throw .wrongKind(handle: handle, kind: document.kind.rawValue, operation: "undo a store step") }
            storeCount = try database.step(forward: forward)
            store = true
            document.position += forward ? 1 : -1
            document.version += 1
        }
        documents[handle] = document
        if wasDirty != document.hasUnsavedChanges {
            emit(document, previous: document.state, reason: forward ? .redone : .undone)
        }
        journalNote(handle, forward ? .redo : .undo, wasUnsaved: wasDirty, storeCount: storeCount)
        return StepResult(version: document.version, entries: changes, store: store)
    }

    // MARK: - Events

    func emit(
        _ document: PackageDocument, previous: DocumentState, reason: DocumentEvent.Reason, error: DocumentError? = nil,
        kind: DocumentEvent.Kind = .stateChanged
    ) {
        events(DocumentEvent(
            handle: document.handle, path: document.path, version: document.version, state: document.state,
            previousState: previous, hasUnsavedChanges: document.hasUnsavedChanges, reason: reason, error: error,
            autosave: false, kind: kind))
    }
}

/// A save as's hold on its destination (``PackageStore/reserveSaveAs(_:to:isHeldElsewhere:)``):
/// one document's, for as many of its saves as to the path as are asked for and not ended. Used on
/// the store's actor only.
final class SaveAsReservation {
    let handle: String
    var count = 1
    /// Ends when the hold is let go.
    let done: Task<Void, Never>
    let end: AsyncStream<Void>.Continuation

    init(handle: String) {
        self.handle = handle
        let (stream, end) = AsyncStream.makeStream(of: Void.self)
        self.end = end
        done = Task { for await _ in stream {} }
    }
}
