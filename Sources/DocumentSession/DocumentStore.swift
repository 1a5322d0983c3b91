import Execution
import FileStore
import Synchronization
import SystemCalls
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// The open documents of the process (the Session of the architecture): one actor, so that each
/// document's edits apply in the order they arrive. Long work (loading a file) runs off the actor on
/// its own task; only the quick installation of the result runs on it.
public actor DocumentStore {
    var documents = DocumentTable()
    var handleByPath: [String: String] = [:]
    /// Loads in progress by path, so that a second open of the same file waits for the first.
    private var loads: [String: (task: Task<Result<String, DocumentError>, Never>, waiters: LoadWaiters)] = [:]
    private var nextHandle = 1
    /// Where events go (the server turns them into notifications).
    let events: @Sendable (DocumentEvent) -> Void
    /// Documents a save, revert, close, delete or move is working on, with the line of those that
    /// wait for them (one at a time, in the order they asked: see ``reserve(_:)``).
    var busy: [String: [LockTurn]] = [:]
    /// When to save by itself.
    var autosave: AutosavePolicy = .off
    /// Per document with changes an autosave waits on: when it is due (the last change plus the
    /// delay), and the one sleeping task that will look then (see `scheduleAutosave`).
    var autosaveDue: [String: ContinuousClock.Instant] = [:]
    var autosaveTimers: [String: (task: Task<Void, Never>, wakesAt: ContinuousClock.Instant)] = [:]
    /// How many reverts and closes asked for have disabled editing and not finished yet.
    var editingDisabledCount: [String: Int] = [:]
    /// Whether a file just read is hashed in the background (test-visible: off, it plays a machine
    /// so busy that the idle-priority hash never comes in; every decision must hold all the same).
    var hashesInBackground = true
    /// The file presenter: watching the documents' files (DocumentStore+Presenting.swift).
    var presenter = PresenterState()
    let watchFiles: Bool
    /// Where conflict versions and saved versions are kept, if anywhere; and if not, why.
    let versions: VersionStore?
    let versionsUnavailableReason: String?
    /// The writes of versions, in order, bounded (see ``VersionWriteQueue``).
    let versionWrites: VersionWriteQueue?
    /// The thread the store runs on: the server's loop, which also reads, dispatches and writes,
    /// so that a request never switches threads. Blocking work never runs on it.
    public nonisolated let executor: LoopExecutor
    /// The sandbox roots every save must stay beneath (checked on the directory it opens), if any.
    var roots: SandboxRoots?
    /// The journal of unsaved changes (DocumentStore+Journal.swift): its directory and writer (nil
    /// when there is none, for `journalUnavailableReason`), the documents that have a journal, the
    /// dead servers' journals offered, how many live servers hold journals of each document's file,
    /// and the documents whose journal failed (told once).
    let journalDirectory: JournalDirectory?
    let journal: JournalWriter?
    public let journalUnavailableReason: String?
    var journals: [String: ActiveJournal] = [:]
    /// The bytes handed to the journal's writer since the last ``takeJournalBytes()`` (a change's
    /// record, or a journal's start with its base): a change whose record is large is answered
    /// only once it is on disk (``largeChange``).
    var journalBytesNoted = 0
    var recoveries: [String: RecoveryOffer] = [:]
    var heldElsewhere: [String: Int] = [:]
    var journalFailures: Set<String> = []
    /// The documents whose file an open put back from the backup of an interrupted in-place save.
    var restoredSaves: [String: SafeSave.RestoredSave] = [:]
    /// When a document whose journal failed may try a new one.
    var journalRetry: [String: ContinuousClock.Instant] = [:]
    /// The change an edit, undo or redo hands to `modify` for the journal.
    var pendingJournalChange: JournalChange? = nil
    /// Told of every change of a document's version, after it (``setTextObserver(_:)``); nil (the
    /// one-client server) costs one check per change.
    var textObserver: TextObserver? = nil
    /// The locks per file across processes every save takes (``setFileLocks(_:)``).
    var fileLocks: FileLocks? = nil
    /// What an edit, undo or redo did to the text, for `textObserver` (set only when there is one).
    var pendingTextSteps: [AppliedEdit]? = nil
    /// The writes of kept undo histories (`persistUndo`, PersistedUndo.swift); nil: not kept.
    var undoWrites: UndoWriteQueue? = nil
    /// The documents whose text an editor owns (LSP's text synchronisation, DocumentStore+Mirroring.swift):
    /// the store never changes their text by itself; what it would change is proposed instead.
    var mirrored: Set<String> = []
    /// The leases of other parties coordinating the documents' files (DocumentStore+Coordination.swift).
    var coordination = CoordinationState()

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Whether the caller runs on the store's thread (the server's loop), where it may call the
    /// store synchronously through `assumeIsolated` instead of hopping to it.
    public nonisolated var isOnItsThread: Bool { executor.isCurrent }

    /// ``edit(_:version:edits:encoding:label:merge:)`` run at once by a caller on the store's
    /// thread (``isOnItsThread``): the hot path of a typing client, without the actor hop's
    /// enqueue and dequeue. Traps when called from another thread.
    public nonisolated func editOnItsThread(
        _ handle: String, version: Int64, edits: [TextEdit], encoding: PositionEncoding, label: String?, merge: Bool
    ) -> Result<Int64, DocumentError> {
        assumeIsolated { store in
            Result { () throws(DocumentError) -> Int64 in
                try store.edit(handle, version: version, edits: edits, encoding: encoding, label: label, merge: merge)
            }
        }
    }

    /// A store whose documents report their state changes to `events`.
    ///
    /// - Parameters:
    ///   - watchFiles: whether to watch the documents' files for changes by other programs.
    ///   - versions: where to keep conflict versions and saved versions (none: not kept, for
    ///     `versionsUnavailableReason`).
    ///   - executor: the thread the store runs on (the process's loop unless given another).
    public init(
        events: @escaping @Sendable (DocumentEvent) -> Void = { _ in }, watchFiles: Bool = true,
        versions: VersionStore? = nil, versionsUnavailableReason: String? = nil, executor: LoopExecutor = .shared,
        journal: JournalDirectory? = nil, journalUnavailableReason: String? = nil, journalFlushDelay: Duration = .milliseconds(200)
    ) {
        self.executor = executor
        self.events = events
        self.watchFiles = watchFiles
        self.versions = versions
        self.versionWrites = versions.map(VersionWriteQueue.init(store:))
        self.versionsUnavailableReason = versionsUnavailableReason
        var writer: JournalWriter? = nil
        var reason = journalUnavailableReason
        if let journal {
            do throws(SystemCallError) {
                writer = try JournalWriter(directory: journal, flushDelay: journalFlushDelay)
            } catch {
                reason = "the journal's thread could not start: \(error)"
            }
        }
        self.journal = writer
        self.journalDirectory = writer == nil ? nil : journal
        self.journalUnavailableReason = writer == nil ? (reason ?? "no state directory") : nil
        writer?.setErrorHandler { [weak self] handle, error in
            Task { await self?.journalFailed(handle, error) }
        }
    }

    deinit {
        presenter.continuation?.finish()
        presenter.watcher?.stop()
    }

    /// Sets the sandbox roots that saves (requested, autosaves, a close's) and re-reads (the
    /// watcher's checks, reverts) must stay beneath.
    public func setRoots(_ roots: SandboxRoots?) { self.roots = roots }

    /// With roots: a check of a file already opened for reading, that it lies beneath them.
    var readGuard: (@Sendable (Int32) -> Bool)? {
        guard let roots else { return nil }
        return { descriptor in roots.holds(descriptor: descriptor) }
    }

    /// The number of open documents.
    public var count: Int { documents.count }

    /// Whether the index of open documents by file says what a scan of them says (tests).
    var fileIndexIsConsistent: Bool { documents.indexIsConsistent() }

    /// The open documents whose files are on disk: the handle, the path, and the file's device and
    /// inode (another path may name the same file). For telling which files found on disk are open
    /// (`workspace/query`).
    public var openFiles: [(handle: String, path: String, device: UInt64, inode: UInt64)] {
        documents.values.filter { !$0.deletedOnDisk }.map { ($0.handle, $0.path, $0.identity.device, $0.identity.inode) }
    }

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
    ///
    /// With `pinned` (the device and inode a sandbox check resolved the path to), a file read that
    /// turns out to be another one (a component renamed or swapped in since the check) is refused
    /// with `.pathChanged` and not opened.
    public func open(
        path: String, encoding: TextEncoding?, pinned: FileIdentity? = nil,
        progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false }
    ) async throws(DocumentError) -> Document {
        if let pinned {
            // The check and the read must name one file; a document already open by this path was
            // opened by an earlier request and is the file the path names now only if it matches.
            if let handle = handleByPath[path], let document = documents[handle],
                document.identity.device != pinned.device || document.identity.inode != pinned.inode
            {
                throw .pathChanged(path: path)
            }
            let document = try await open(path: path, encoding: encoding, progress: progress, isCancelled: isCancelled)
            guard document.identity.device == pinned.device, document.identity.inode == pinned.inode else {
                throw .pathChanged(path: path)
            }
            return document
        }
        // A close of the path just before may still be writing its history.
        if handleByPath[path] == nil { await waitForKeptUndo(ofPath: path) }
        if let handle = handleByPath[path], let document = documents[handle] { return document }
        let task: Task<Result<String, DocumentError>, Never>
        if let running = loads[path] {
            // One load serves every opener of the path; it stops only when all have cancelled.
            running.waiters.add(isCancelled)
            task = running.task
        } else {
            let waiters = LoadWaiters(isCancelled)
            let isCancelled: @Sendable () -> Bool = { waiters.allCancelled }
            let journalDirectory = journalDirectory
            let writer = journal
            let undoDirectory = undoWrites?.directory
            let load = Task.detached { await runOnOwnThread { () -> Result<(TextBuffer, LoadedText, LoadFindings), DocumentError> in
                // Temp files a killed save left beside the file (beside a symlink's target, where
                // saves write) go first; then the old content of an in-place save killed while
                // writing the file is put back from its backup.
                SafeSave.sweepStaleTempFiles(nextTo: (try? SafeSave.resolveSymlinks(path)) ?? path)
                let restored = SafeSave.restoreInterruptedSave(of: path)
                return Self.loadText(path: path, encoding: encoding, progress: progress, isCancelled: isCancelled).map { buffer, loaded in
                    // Dead servers' journals of the file, compared with what it holds now; the undo
                    // history kept for the file's bytes.
                    var scan = journalDirectory.map { Self.scanJournals($0, path: path, disk: buffer, isOwn: { writer?.owns($0) ?? false }) }
                        ?? JournalScan(offer: nil, heldElsewhere: 0)
                    scan.restoredSave = restored
                    let undo = undoDirectory.map {
                        PersistedUndo.restore(
                            from: $0, path: path, disk: buffer, encoding: loaded.encoding, byteOrderMark: loaded.hasByteOrderMark,
                            size: loaded.identity.size)
                    }
                    let copies = SyncConflictNames.copies(besides: (try? SafeSave.resolveSymlinks(path)) ?? path)
                    return (buffer, loaded, LoadFindings(journals: scan, undo: undo ?? .none, syncCopies: copies))
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
        case .failure(.load(.cancelled)):
            // The load this opener joined was stopped by the others' cancellations (it checked
            // before this opener was counted): this one did not cancel, so it opens anew.
            return try await open(path: path, encoding: encoding, progress: progress, isCancelled: isCancelled)
        case .failure(let error):
            throw error
        }
    }

    private func finishLoad(path: String, _ result: Result<(TextBuffer, LoadedText, LoadFindings), DocumentError>) -> Result<String, DocumentError> {
        loads[path] = nil
        switch result {
        case .failure(let error):
            return .failure(error)
        case .success(let (buffer, loaded, findings)):
            if let existing = documents.handles(device: loaded.identity.device, inode: loaded.identity.inode).min() {
                // The same file under another path (a symlink, a hard link): one session for it.
                return .success(existing)
            }
            var history = UndoHistory(), identity = loaded.identity
            if case .restored(let kept, let hash) = findings.undo {
                // The history kept for these bytes: undo goes back through earlier sessions' steps.
                history = kept
                identity.contentHash = hash
            }
            var document = Document(
                handle: makeHandle(), path: path, buffer: buffer, history: history,
                encoding: loaded.encoding, hasByteOrderMark: loaded.hasByteOrderMark,
                lineEnding: loaded.lineEnding, identity: identity, syncedText: buffer)
            if !findings.syncCopies.isEmpty {
                // Copies a sync tool left beside the file: the document opens in conflict.
                document.syncCopies = findings.syncCopies
                document.state.insert(.syncConflict)
            }
            install(document)
            let scan = findings.journals
            recoveries[document.handle] = scan.offer
            if scan.heldElsewhere > 0 { heldElsewhere[document.handle] = scan.heldElsewhere }
            restoredSaves[document.handle] = scan.restoredSave
            if identity.contentHash == nil {
                hashInBackground(document.handle, buffer: buffer, encoding: loaded.encoding, byteOrderMark: loaded.hasByteOrderMark, identity: loaded.identity)
            }
            return .success(document.handle)
        }
    }

    /// Reads a file into a new buffer. A large UTF-8 file is read as two halves on two threads, one
    /// buffer each, joined in O(log n); other files come back as one part. Blocks: run it on a
    /// thread of its own.
    static func loadText(
        path: String, encoding: TextEncoding?, progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false }, fileGuard: (@Sendable (Int32) -> Bool)? = nil
    ) -> Result<(TextBuffer, LoadedText), DocumentError> {
        do throws(LoadError) {
            let (parts, loaded) = try TextFileLoader.loadInParts(
                path: path, encoding: encoding, progress: progress, isCancelled: isCancelled, fileGuard: fileGuard,
                startingWith: TextBuffer()
            ) { buffer, piece in
                // The loader hands over well-formed UTF-8 only: straight into chunks.
                buffer.append(utf8: piece)
            }
            return .success((TextBuffer(concatenating: parts), loaded))
        } catch {
            return .failure(.load(error))
        }
    }

    /// Hashes the text just read, off the actor at idle priority, for the content part of the
    /// file's identity. Nothing waits for it: a save that needs the hash before it has come in
    /// computes it then, on the save's thread (`SafeSave.Request.expectedHash`). It hashes the text in memory encoded as the file was (the same bytes, byte
    /// for byte), not the file, which may have changed since and which a straggling thread would
    /// keep open; recorded if the document still holds that file's identity.
    func hashInBackground(_ handle: String, buffer: TextBuffer, encoding: TextEncoding, byteOrderMark: Bool, identity: FileIdentity) {
        guard hashesInBackground else { return }
        // Strongly: a weak capture allocates the store a side table, which LeakSanitizer reported
        // as leaked once the store was gone (the fuzzer, after an open); a store nobody uses any
        // more now stays until its hashes are recorded (only tests and the fuzzer drop stores).
        // The text goes to the hashing thread, which hands it on to be let go of: by the time the
        // hash is recorded the document may hold newer text, and a task's captures are freed where
        // it ends, on the loop (a save's snapshot replaced by the next save's: thousands of
        // pieces). Not freed on the idle thread itself: see releaseInBackground.
        let text = HandOver(buffer)
        Task.detached {
            let hash = await runOnIdleThread { () -> UInt64? in
                let taken = text.take()
                let hash = taken.contentHash(encoding: encoding, byteOrderMark: byteOrderMark)
                releaseInBackground(consume taken)
                return hash
            }
            if let hash { await self.recordHash(handle, hash: hash, identity: identity, of: identity) }
        }
    }

    /// Test-visible: no background hash from now on (``hashesInBackground``).
    func stopBackgroundHashing() { hashesInBackground = false }

    private func recordHash(_ handle: String, hash: UInt64, identity found: FileIdentity, of loaded: FileIdentity) {
        guard found.sameState(as: loaded), documents[handle]?.identity.sameState(as: loaded) == true,
              documents[handle]?.identity.contentHash == nil else { return }
        documents[handle]!.identity.contentHash = hash
    }

    /// Creates a new file at `path` holding `text` (UTF-8, no byte order mark) and opens it. A file
    /// already at the path is never overwritten: `.alreadyExists`.
    ///
    /// `createAt` is where the file is made when that differs from the path the document records:
    /// with sandbox roots, `/proc/self/fd/D/name`, the name in the directory the check pinned.
    ///
    /// The file is written and flushed on a thread of its own, not on the store's (the server's
    /// loop): an `fsync` can take long.
    public func create(path: String, text: String, createAt: String? = nil) async throws(DocumentError) -> Document {
        let bytes = Array(text.utf8)
        let made = await runOnOwnThread { () -> Result<FileIdentity, FileSystemError> in
            do throws(FileSystemError) {
                var identity = try FileCreation.createNew(path: createAt ?? path, bytes: bytes)
                identity.contentHash = ContentHasher.hash(bytes)
                return .success(identity)
            } catch {
                return .failure(error)
            }
        }
        switch made {
        case .success(let identity):
            return installCreated(path: path, text: text, bytes: bytes, identity: identity)
        case .failure(let error):
            if error.code == "EEXIST" { throw .alreadyExists(path: path) }
            throw .fileSystem(createAt == nil ? error : FileSystemError(errno: error.errno, syscall: error.syscall, path: path))
        }
    }

    /// Creates a new file in `directory` named by `rule` ("Note 1.txt", "Note 2.txt", ...; a
    /// UUID; a timestamp), or, with `nameFromFirstLine`, after the first line of `text` (made unique
    /// as "Title 2.txt"; the rule when the text has no line to name it by), never replacing a file
    /// that appears meanwhile, and opens it. `createIn` is the directory to act on when it differs
    /// from `directory` (with sandbox roots, its pinned `/proc/self/fd/D`).
    public func create(
        inDirectory directory: String, rule: NamingRule, nameFromFirstLine: Bool, text: String, createIn: String? = nil
    ) async throws(DocumentError) -> Document {
        let bytes = Array(text.utf8)
        let actOn = createIn ?? directory
        let made = await runOnOwnThread { () -> Result<(path: String, identity: FileIdentity), FileSystemError> in
            do throws(FileSystemError) {
                var created: (path: String, identity: FileIdentity)
                if nameFromFirstLine, let name = DocumentNaming.fileName(firstLineOf: text, fileExtension: rule.fileExtension) {
                    created = try DocumentNaming.createExclusiveUnique(in: actOn, preferredName: name, bytes: bytes)
                } else {
                    created = try DocumentNaming.createNew(in: actOn, rule: rule, bytes: bytes)
                }
                created.identity.contentHash = ContentHasher.hash(bytes)
                return .success(created)
            } catch {
                return .failure(error)
            }
        }
        let created: (path: String, identity: FileIdentity)
        switch made {
        case .success(let value): created = value
        case .failure(let error):
            throw .fileSystem(createIn == nil ? error : FileSystemError(errno: error.errno, syscall: error.syscall, path: directory))
        }
        let name = created.path.split(separator: "/").last.map(String.init) ?? created.path
        let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
        return installCreated(path: path, text: text, bytes: bytes, identity: created.identity)
    }

    private func installCreated(path: String, text: String, bytes: [UInt8], identity: FileIdentity) -> Document {
        var lines = LineEndingCounter()
        bytes.withUnsafeBufferPointer { lines.count($0) }
        let buffer = TextBuffer(text)
        let document = Document(
            handle: makeHandle(), path: path, buffer: buffer, history: UndoHistory(),
            encoding: .utf8, hasByteOrderMark: false, lineEnding: lines.style, identity: identity,
            syncedText: buffer)
        install(document)
        return document
    }

    /// Opens a document for a file that does not exist yet: an editor's new buffer (the LSP mode's
    /// `didOpen` of a path not written). It is empty and `unwritten` (and `deletedOnDisk`): its
    /// directory is watched, so that the file the editor writes, or another program makes, is
    /// compared with it as a deleted file's coming back is; the next save writes the file; its
    /// changes are journaled as any document's, and a dead server's journal of the path is offered
    /// as at any open (its base is the empty text). A file at the path by the time it looks is
    /// opened as ``open(path:encoding:pinned:progress:isCancelled:)`` opens it. A directory that
    /// does not exist yet (the user makes it before the editor writes: `mkdir -p`, Neovim 0.8's `:write ++p`) is no
    /// obstacle: the buffer is journaled all the same, and its file watched once written (a save,
    /// or the editor's `didSave`). A path whose directory is something else than a directory is
    /// refused: `.fileSystem`, ENOTDIR, naming it. Without `openingAFileThere`, a file found at the
    /// path (anything: a link planted since a sandbox check found the name empty) is refused with
    /// `.pathChanged` instead of opened.
    public func openUnwritten(path: String, openingAFileThere: Bool = true) async throws(DocumentError) -> Document {
        if let handle = handleByPath[path], let document = documents[handle] { return document }
        let journalDirectory = journalDirectory
        let writer = journal
        let looked = await runOnOwnThread { () -> Result<JournalScan?, FileSystemError> in
            // Something at the path: a file (through links) to open; without `openingAFileThere`,
            // anything at all, a dangling link included.
            let present = openingAFileThere
                ? FileIdentity.current(path: path) != nil : (try? FileKind.of(path, followingLinks: false)) != nil
            if present { return .success(nil) }
            guard let (directory, _) = FileWatcher.split(path) else {
                return .failure(FileSystemError(errno: EINVAL, syscall: "open", path: path, reason: "the path names no file in a directory"))
            }
            do throws(FileSystemError) {
                guard try FileKind.of(directory, followingLinks: true) == .directory else {
                    return .failure(FileSystemError(errno: ENOTDIR, syscall: "stat", path: directory))
                }
            } catch where error.code == "ENOENT" {
                // Not made yet: nothing to watch until the file is written.
            } catch {
                return .failure(error)
            }
            return .success(
                journalDirectory.map { Self.scanJournals($0, path: path, disk: TextBuffer(), isOwn: { writer?.owns($0) ?? false }) }
                    ?? JournalScan(offer: nil, heldElsewhere: 0))
        }
        let scan: JournalScan
        switch looked {
        case .success(nil):
            guard openingAFileThere else { throw .pathChanged(path: path) }
            return try await open(path: path, encoding: nil)
        case .success(let found?): scan = found
        case .failure(let error): throw .fileSystem(error)
        }
        // Opened meanwhile (by another request of the path).
        if let handle = handleByPath[path], let document = documents[handle] { return document }
        var document = Document(
            handle: makeHandle(), path: path, buffer: TextBuffer(), history: UndoHistory(),
            encoding: .utf8, hasByteOrderMark: false, lineEnding: .none,
            identity: FileIdentity(device: 0, inode: 0, size: 0, modificationTime: 0, changeTime: 0), syncedText: TextBuffer())
        document.deletedOnDisk = true
        document.unwritten = true
        install(document)
        recoveries[document.handle] = scan.offer
        if scan.heldElsewhere > 0 { heldElsewhere[document.handle] = scan.heldElsewhere }
        return document
    }

    /// A mark of this moment among the store's opens: a document opened after it has a handle made
    /// after it (``opened(_:after:)``).
    var openMark: Int { nextHandle }

    /// Whether the document `handle` was opened after `mark` (``openMark``): handles count the
    /// store's opens (`d1`, `d2`, ...), so the number tells.
    func opened(_ handle: String, after mark: Int) -> Bool {
        guard let number = Int(handle.dropFirst()) else { return false }
        return number >= mark
    }

    private func makeHandle() -> String {
        defer { nextHandle += 1 }
        return "d\(nextHandle)"
    }

    func install(_ document: Document) {
        documents[document.handle] = document
        handleByPath[document.path] = document.handle
        startPresenting(document.handle)
        thinVersions(of: document.path, openedAs: document.handle)
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
        try modify(handle, reason: .edited) { (document, textChanged) throws(DocumentError) -> Int64 in
            try self.checkEditable(document, version: version)
            let applied: [AppliedEdit]
            do throws(TextBufferError) {
                applied = try document.buffer.apply(edits: edits, encoding: encoding)
            } catch {
                throw .invalidText(error)
            }
            // Every accepted edit raises the version by one, even one that changes nothing (an
            // empty list, a text replaced by the same text): a pipelining client counts one version
            // per request it sends, as LSP's clients do, without comparing texts. Only a step that
            // changes the text enters the undo history (and so `hasUnsavedChanges`, and autosave).
            document.version += 1
            if textObserver != nil { pendingTextSteps = applied }
            if applied.contains(where: { !$0.isNoOp }) {
                document.history.record(applied, label: label, merge: merge)
                textChanged = true
                if journal != nil {
                    let changes = applied.contains(where: \.isNoOp) ? applied.filter { !$0.isNoOp } : applied
                    pendingJournalChange = JournalChange(history: merge ? .merge : .record, label: label, edits: changes)
                }
            } else if journal != nil {
                pendingJournalChange = JournalChange(history: .none, label: nil, edits: [])
            }
            return document.version
        }
    }

    /// Undoes the last step; answers the new version and the edits that turn the previous text into
    /// the new one (none when there was nothing to undo).
    public func undo(_ handle: String, version: Int64?, encoding: PositionEncoding) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try step(handle, version: version, reason: .undone, journal: .undo) { document in document.history.undo(&document.buffer, encoding: encoding) }
    }

    /// Redoes the last undone step (see `undo`).
    public func redo(_ handle: String, version: Int64?, encoding: PositionEncoding) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try step(handle, version: version, reason: .redone, journal: .redo) { document in document.history.redo(&document.buffer, encoding: encoding) }
    }

    private func step(
        _ handle: String, version: Int64?, reason: DocumentEvent.Reason, journal op: JournalHistoryOp,
        _ body: (inout Document) -> [TextEdit]?
    ) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        try modify(handle, reason: reason) { (document, textChanged) throws(DocumentError) -> (version: Int64, edits: [TextEdit]) in
            try self.checkEditable(document, version: version ?? document.version)
            // What the step does to the text, in UTF-8 offsets, for the journal.
            let changes = journal == nil && textObserver == nil ? [] : op == .undo ? document.history.editsForUndo() : document.history.editsForRedo()
            guard let edits = body(&document) else { return (document.version, []) }
            document.version += 1
            textChanged = true
            if textObserver != nil { pendingTextSteps = changes }
            if journal != nil { pendingJournalChange = JournalChange(history: op, label: nil, edits: changes) }
            return (document.version, edits)
        }
    }

    private func checkEditable(_ document: Document, version: Int64) throws(DocumentError) {
        if document.state.contains(.editingDisabled) { throw editingDisabledError(document.handle) }
        guard document.version == version else { throw .staleVersion(current: document.version, given: version) }
    }

    /// Runs `body` on the stored document in place (no copy of its history or text); reports a
    /// change of its state or of `hasUnsavedChanges` for `reason`, and schedules an autosave when
    /// `body` says (its second argument) that the text changed.
    private func modify<T>(_ handle: String, reason: DocumentEvent.Reason, _ body: (inout Document, inout Bool) throws(DocumentError) -> T) throws(DocumentError) -> T {
        // Only the few values compared are read out: a copy of the document held across the
        // mutation would make it copy its text and history.
        // Mutated in place, and read only inside that access: `documents[handle]!` would move the
        // document out into an optional and back, and each read through the getter copies it (an
        // allocation and several copies per edit).
        var state = DocumentState()
        var wasUnsaved = false
        var changed = false
        var reported = false
        var version: Int64 = 0
        var versionChanged = false
        let result = try documents.mutate(handle) { (document) throws(DocumentError) -> T in
            state = document.state
            wasUnsaved = document.hasUnsavedChanges
            version = document.version
            let result = try body(&document, &changed)
            reported = document.state != state || document.hasUnsavedChanges != wasUnsaved
            versionChanged = document.version != version
            return result
        }
        // The text first, then the state: another holder in a daemon applies the change before it
        // hears of the state it led to.
        if versionChanged, textObserver != nil { observeText(handle) }
        if reported { reportChange(handle, from: state, wasUnsaved: wasUnsaved, reason: reason) }
        if changed { scheduleAutosave(handle) }
        if journal != nil {
            let change = pendingJournalChange
            pendingJournalChange = nil
            journalNote(handle, change, wasUnsaved: wasUnsaved)
        }
        return result
    }
}

/// What a load found besides the text: dead servers' journals of the file (nil: no journal
/// directory), the undo history kept for it.
struct LoadFindings: Sendable {
    var journals: JournalScan
    var undo: PersistedUndo.Found
    /// Sync tools' conflict copies beside the file when it was read.
    var syncCopies: [SyncCopyFile] = []
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
