import FileStore
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// What the file presenter keeps per store: the watcher, who is watched, and the disk's side of
/// each conflict.
struct PresenterState {
    var watcher: FileWatcher?
    /// Why the last try to make a watcher failed (inotify's limits: `fs.inotify.max_user_instances`
    /// is 128 by default, and editors and IDEs use many), and when to try again: documents opened
    /// meanwhile are not watched, and are once a watcher is made.
    var watcherError: FileSystemError?
    var watcherRetry: ContinuousClock.Instant?
    /// How long after a failure a watcher is tried again (at the next open); tests shorten it.
    var watcherRetryDelay: Duration = .seconds(5)
    /// Test-visible: the next this many tries to make a watcher fail (EMFILE, as inotify_init1 would).
    var failingWatcherTries = 0
    var tokens: [String: WatchToken] = [:]
    var handleByToken: [WatchToken: String] = [:]
    /// Finds each document's file after a move (see ``FileLocator``).
    var locators: [String: FileLocator] = [:]
    /// Documents whose file is being checked now, and those to check again after that.
    var checking: Set<String> = []
    var recheck: Set<String> = []
    /// The place in the document's line of the check running on it (from when it asks for the lock
    /// until it lets it go). A close with nothing to save does not wait for a check that holds the
    /// lock (``DocumentStore/beginClose(_:save:)``): the check looks the document up again after
    /// each of its waits and lets a closed one go.
    var checkTurns: [String: CheckTurn] = [:]
    /// Where inotify saw a document's file go, for the next check.
    var movedTo: [String: String] = [:]
    /// The disk's version of each document in conflict.
    var conflicts: [String: DiskVersion] = [:]
    /// Documents whose directory is being looked at for sync tools' conflict copies now, and
    /// those to look at again after that.
    var scanningCopies: Set<String> = []
    var rescanCopies: Set<String> = []
    /// For documents an editor owns (``DocumentStore/mirrored``): the file's text proposed to the
    /// editor as a reload, taken as synced when the document's text reaches it.
    var pendingReloads: [String: DiskVersion] = [:]
    /// The encoding of the positions of `document/didChange` edits.
    var positionEncoding: PositionEncoding = .utf16
    /// The stream feeding the watcher's events to the store, in order.
    var continuation: AsyncStream<FileEvent>.Continuation?
}

/// A check's place in a document's line: nil when it took the lock at once.
struct CheckTurn {
    let turn: LockTurn?
    /// The check holds the lock (it may not have resumed yet: a turn is granted when handed over).
    var holdsLock: Bool { turn?.granted ?? true }
}

/// The file's side of a conflict: its text (nil when it could not be read as text) and identity.
struct DiskVersion: Sendable {
    var text: TextBuffer?
    var identity: FileIdentity
    var loaded: LoadedText?
    var error: LoadError?
    /// Another program's change of the file (a reload proposed to an editor), not a text the
    /// session itself read back (the editor's own write, a revert proposed).
    var external = false
}

/// How `resolveConflict` resolves.
public enum ConflictResolution: Sendable, Equatable {
    /// Keep the document's text; the next save overwrites the file.
    case mine
    /// Take the file's text (an undoable edit); the document is then saved.
    case theirs
    /// A three-way merge of the last synced text, the document's and the file's; with a text, the
    /// client's own merge.
    case merge(text: String?)
}

extension DocumentStore {
    // MARK: - Watching

    /// Sets the encoding of the positions in `document/didChange` edits (the one the client chose).
    public func setPositionEncoding(_ encoding: PositionEncoding) {
        presenter.positionEncoding = encoding
    }

    /// Starts presenting a newly installed document: its file's attributes recorded, its parent
    /// directory watched, its file held by a locator.
    func startPresenting(_ handle: String) {
        guard let document = documents[handle] else { return }
        documents[handle]!.attributes = FileAttributes.current(path: document.path)
        guard watchFiles else { return }
        if presenter.watcher == nil, presenter.watcherRetry.map({ ContinuousClock.now >= $0 }) ?? true {
            makeWatcher()
            // Made after failures: the documents opened meanwhile are watched from now on.
            if presenter.watcher != nil {
                for (other, path) in documents.values.map({ ($0.handle, $0.path) })
                where other != handle && presenter.tokens[other] == nil {
                    watch(other, path: path)
                    // Unwatched until now: changes made meanwhile are looked for.
                    checkIfChangedSinceRead(other)
                }
            }
        }
        watch(handle, path: document.path)
        presenter.locators[handle] = FileLocator(path: document.path)
        checkIfChangedSinceRead(handle)
    }

    /// The file was read before its directory was watched: a change made in between (another
    /// program writing 2 to 4 ms after an open) gave no event, and the document would show the
    /// old text until a save was refused. Once the watch is there, the file is looked at again
    /// (a stat), and checked as after an event when it is not the file read.
    private func checkIfChangedSinceRead(_ handle: String) {
        guard let document = documents[handle], presenter.tokens[handle] != nil else { return }
        let now = FileIdentity.current(path: document.path)
        let changed = document.deletedOnDisk ? now != nil : FileWatcher.classify(recorded: document.identity, now: now) != .unchanged
        if changed { checkSoon(handle) }
    }

    /// Why the store's files are not watched now (nil: they are, or watching is off): the failure
    /// to make a watcher, tried again at the next open.
    public var fileWatchingError: FileSystemError? { presenter.watcher == nil ? presenter.watcherError : nil }

    /// Test-visible: the next `tries` watchers fail to be made, and a failure is retried after `delay`.
    func failWatcherCreation(_ tries: Int, retryAfter delay: Duration) {
        presenter.failingWatcherTries = tries
        presenter.watcherRetryDelay = delay
    }

    /// Stops presenting a document that is being removed.
    func stopPresenting(_ handle: String) {
        if let token = presenter.tokens.removeValue(forKey: handle) {
            presenter.handleByToken[token] = nil
            presenter.watcher?.unwatch(token)
        }
        presenter.locators[handle] = nil
        presenter.conflicts[handle] = nil
        presenter.pendingReloads[handle] = nil
        presenter.movedTo[handle] = nil
        presenter.recheck.remove(handle)
        presenter.rescanCopies.remove(handle)
        mirrored.remove(handle)
    }

    private func makeWatcher() {
        let (stream, continuation) = AsyncStream<FileEvent>.makeStream()
        do throws(FileSystemError) {
            if presenter.failingWatcherTries > 0 {
                presenter.failingWatcherTries -= 1
                throw FileSystemError(errno: EMFILE, syscall: "inotify_init1", path: "")
            }
            // Closes after reading too: a change of the file's flags (`chattr +i`) leaves no
            // other trace, and `readOnly` follows it.
            presenter.watcher = try FileWatcher(closesAfterReading: true) { continuation.yield($0) }
            presenter.watcherError = nil
            presenter.watcherRetry = nil
        } catch {
            continuation.finish()
            presenter.watcherError = error
            presenter.watcherRetry = ContinuousClock.now + presenter.watcherRetryDelay
            return
        }
        presenter.continuation = continuation
        // One consumer, so events reach the store in the order the watcher reported them. It
        // holds the store weakly: a store nobody uses any more goes, and its watcher with it.
        Task { [weak self] in
            for await event in stream {
                guard let self else { return }
                await self.noteFileEvent(event)
            }
        }
    }

    /// Watches the directory of the file a document's path leads to (through symlinks, where
    /// saves write), replacing an earlier registration.
    private func watch(_ handle: String, path: String) {
        guard let watcher = presenter.watcher else { return }
        // The new registration first: when both paths are in one directory its watch then never
        // drops to no registration (which would remove it and add it again, losing events).
        let target = (try? SafeSave.resolveSymlinks(path)) ?? path
        // Told also of names beside it that may be a sync tool's conflict copies of it.
        let name = FileWatcher.split(target)?.name ?? ""
        let token = try? watcher.watch(path: target, siblings: { SyncConflictNames.mayBeCopy($0, of: name) })
        if let old = presenter.tokens.removeValue(forKey: handle) {
            presenter.handleByToken[old] = nil
            watcher.unwatch(old)
        }
        guard let token else { return }
        presenter.tokens[handle] = token
        presenter.handleByToken[token] = handle
    }

    /// A save of the document succeeded: the watch and the locator follow the file written (after
    /// a save-as, at its new path), any conflict is over, and the text is kept as a saved version.
    /// After a save-as the versions kept so far follow the document to its new path (they are the
    /// document's history, as after a move), before the new one is added there.
    func savedByDocument(_ handle: String, oldPath: String, text: TextBuffer) {
        guard let path = documents[handle]?.path else { return }
        if path != oldPath {
            watch(handle, path: path)
            scanSyncCopies(handle)
            moveVersions(from: oldPath, to: path)
        } else {
            watchIfUnwatched(handle)
        }
        presenter.conflicts[handle] = nil
        refreshLocator(handle)
        noteAttributes(handle)
        keepVersion(of: path, kind: .saved, text: text)
    }

    /// Watches the document's file if nothing does yet: a new buffer's, whose directory did not
    /// exist when it was opened (``openUnwritten(path:)``), once its file is written.
    func watchIfUnwatched(_ handle: String) {
        guard watchFiles, presenter.tokens[handle] == nil, let path = documents[handle]?.path else { return }
        watch(handle, path: path)
    }

    /// The document's file was just written, read or replaced by the document itself (a save, a
    /// revert, a reload, a resolution): the locator follows the new file.
    func refreshLocator(_ handle: String) {
        guard watchFiles, let document = documents[handle] else { return }
        if let held = presenter.locators[handle], held.holds(document.identity) { return }
        // Only a locator holding the file the document now knows replaces the old one: the file
        // may have moved on or been replaced since, and the old locator still finds what it held.
        if let fresh = FileLocator(path: document.path), fresh.holds(document.identity) {
            presenter.locators[handle] = fresh
        }
    }

    /// An event from the watcher: the file is checked (after any save, revert or close running on
    /// the document, so that the document's own saves are recognised by their identity).
    func noteFileEvent(_ event: FileEvent) {
        guard let handle = presenter.handleByToken[event.token], documents[handle] != nil else { return }
        switch event.kind {
        case .sibling:
            scanSyncCopies(handle)
            return
        case .movedTo(let newPath):
            presenter.movedTo[handle] = newPath
        case .rescan:
            scanSyncCopies(handle)
        default:
            break
        }
        checkSoon(handle)
    }

    /// Starts a check of the document's file, or asks the running one to look again after it.
    func checkSoon(_ handle: String) {
        // Held back while another party writes the file: the lease's end checks it.
        if isCoordinated(handle) { return }
        if presenter.checking.contains(handle) {
            presenter.recheck.insert(handle)
            return
        }
        presenter.checking.insert(handle)
        Task {
            await self.runChecks(handle)
        }
    }

    /// Whether a check of the document's file is running or queued (test-visible).
    func checkIsRunning(_ handle: String) -> Bool { presenter.checking.contains(handle) }

    private func runChecks(_ handle: String) async {
        repeat {
            presenter.recheck.remove(handle)
            guard documents[handle] != nil else { break }
            let turn = reserve(handle)
            presenter.checkTurns[handle] = CheckTurn(turn: turn)
            await waitForTurn(turn)
            await checkFile(handle)
            noteAttributes(handle)
            presenter.checkTurns[handle] = nil
            release(handle)
        } while presenter.recheck.contains(handle)
        presenter.checking.remove(handle)
    }

    /// Compares the document's file with what the document last saw of it, and acts: follows a
    /// move, notes a deletion, takes a changed file's text into a document without unsaved edits
    /// (one undoable step), or records a conflict. The caller holds the document's lock.
    func checkFile(_ handle: String) async {
        guard var document = documents[handle] else { return }
        // What the document last saw of the file: its side of a conflict, or the synced file.
        var seen: FileIdentity? {
            presenter.conflicts[handle]?.identity ?? presenter.pendingReloads[handle]?.identity
                ?? (document.deletedOnDisk ? nil : document.identity)
        }
        var now = FileIdentity.current(path: document.path)
        let hinted = presenter.movedTo.removeValue(forKey: handle)

        // 1. Moved? Nothing is at the path any more, but the locator finds the file last seen
        // under another name: where inotify's pairing said, or wherever the kernel says it is now
        // (a move into an unwatched directory, a parent directory renamed). A new file at the
        // path means the document stays: an editor's backup save renames the file to `name~` and
        // writes a new one at the name, and the document is the name's.
        //
        // A document opened through a symbolic link whose target moved (the link now dangles)
        // follows the target too, to its real path: the document is the file it read and saves,
        // not the link, and a save must write the moved file rather than make a new one where the
        // link points. The kernel's path comes first there: inotify's is spelled after the
        // link's target, which may hold `..`.
        // A document an editor owns is its buffer's file, by name: it does not follow the file (the
        // editor writes where the buffer's name says), and a move is a deletion for it.
        if now == nil, !mirrored.contains(handle), let locator = presenter.locators[handle],
           seen.map(locator.holds) ?? document.deletedOnDisk {
            var destination: String? = nil
            if isSymlinked(document.path) { destination = locator.currentPath }
            if destination == nil, let hinted, let there = FileIdentity.current(path: hinted), locator.holds(there) {
                destination = hinted
            }
            if destination == nil { destination = locator.currentPath }
            if let destination, destination != document.path, handleByPath[destination] == nil {
                move(handle, to: destination)
                if document.deletedOnDisk {
                    // Taken for deleted while it was moving: it is back, as the file last synced
                    // (its identity is compared below); the edits stay unsaved.
                    change(handle, reason: .reloaded, always: true) { $0.deletedOnDisk = false }
                }
                document = documents[handle]!
                now = FileIdentity.current(path: destination)
            }
        }

        // 2. Gone.
        guard let now else {
            if !document.deletedOnDisk { markDeleted(handle) }
            return
        }
        if let seen, FileWatcher.classify(recorded: seen, now: now) == .unchanged { return }

        // 3. Read it: a touch, a rewrite of the same bytes, a change, another file at the name.
        let path = document.path
        let encoding = document.encoding
        let current = document.buffer
        let base = presenter.conflicts[handle]?.text ?? document.syncedText
        let readGuard = readGuard
        // An editor's buffer shows an empty file as Vim's one empty line ("\n"): its own write
        // of that buffer is its text, not a change (``editorText(_:shows:)``).
        let editorOwned = mirrored.contains(handle)
        let loaded = await runOnOwnThread { () -> Result<DiskText, DocumentError> in
            Self.loadText(path: path, encoding: encoding, fileGuard: readGuard).map { buffer, file in
                // The comparisons and the edits a reload would make, worked out here rather than
                // on the actor (each is O(n)).
                let equalsCurrent = buffer == current || (editorOwned && Self.editorText(current, shows: buffer))
                let equalsBase = equalsCurrent || buffer == base
                return DiskText(
                    text: buffer, file: file, readAgainst: current, equalsCurrent: equalsCurrent, equalsBase: equalsBase,
                    edits: equalsCurrent || equalsBase ? [] : TextDiff.edits(from: current, to: buffer))
            }
        }
        guard documents[handle] != nil else { return }
        switch loaded {
        case .failure(.load(.fileSystem(let error))) where error.code == "ENOENT":
            // Gone while it was being read: moved on, or deleted. The check runs again to tell.
            presenter.recheck.insert(handle)
        case .failure(let error):
            // Not readable as text any more (or not readable at all): a conflict without a text
            // for the disk's side; the document keeps its text.
            guard let found = FileIdentity.current(path: path) else { return }
            // Unless only its permissions changed (`chmod 000` of a file the server does not own):
            // the same file, size and modification time as last seen, which cannot be read to tell
            // more. An attributes change (reported as such), not a change of the text; the file is
            // checked again once it can be read.
            if case .load(.fileSystem(let failure)) = error, failure.code == "EACCES" || failure.code == "EPERM",
               let seen, found.device == seen.device, found.inode == seen.inode, found.size == seen.size,
               found.modificationTime == seen.modificationTime {
                return
            }
            let loadError: LoadError? = if case .load(let inner) = error { inner } else { nil }
            recordConflict(handle, DiskVersion(text: nil, identity: found, loaded: nil, error: loadError), error: error)
        case .success(let disk):
            applyDiskText(handle, disk)
        }
    }

    /// A file's text as read by a check, compared with the document's text when the read began.
    struct DiskText: Sendable {
        var text: TextBuffer
        var file: LoadedText
        /// The document's text the comparisons and edits are against.
        var readAgainst: TextBuffer
        var equalsCurrent: Bool
        /// Whether it is the text the document last saw of the file (synced, or its conflict side).
        var equalsBase: Bool
        var edits: [AppliedEdit]
    }

    /// Acts on the text just read from the document's file.
    private func applyDiskText(_ handle: String, _ disk: DiskText) {
        let document = documents[handle]!
        let buffer = disk.text, file = disk.file
        // Edits made while the file was read (rare: the document had to be clean) are compared
        // again here.
        let unchangedSince = document.buffer.isIdentical(to: disk.readAgainst)
        if unchangedSince ? disk.equalsCurrent
            : buffer == document.buffer || (mirrored.contains(handle) && Self.editorText(document.buffer, shows: buffer)) {
            // The file holds the document's text (another program saved the same text, or the
            // file came back as it was): the document is in sync with it.
            change(handle, reason: .reloaded) { document in
                self.sync(&document, text: buffer, file: file)
                document.history.markClean()
            }
            presenter.conflicts[handle] = nil
            presenter.pendingReloads[handle] = nil
            refreshLocator(handle)
            hashInBackground(handle, buffer: buffer, encoding: file.encoding, byteOrderMark: file.hasByteOrderMark, identity: file.identity)
            return
        }
        if disk.equalsBase {
            // The same text as seen before: a touch, or the same bytes written again. Only the
            // identity is new.
            var identity = file.identity
            if var conflict = presenter.conflicts[handle] {
                identity.contentHash = conflict.identity.contentHash
                conflict.identity = identity
                presenter.conflicts[handle] = conflict
            } else if !document.deletedOnDisk {
                identity.contentHash = document.identity.contentHash
                documents[handle]!.identity = identity
                refreshLocator(handle)
            } else {
                // A deleted file came back with the text last synced (a checkout, an undo in
                // another program): the document's file again; the edits stay unsaved.
                change(handle, reason: .reloaded, always: true) { document in
                    document.identity = identity
                    document.deletedOnDisk = false
                }
                refreshLocator(handle)
            }
            return
        }
        // A buffer of a file never written, left empty, takes the file another program made.
        let clean = !document.hasUnsavedChanges && (!document.deletedOnDisk || document.unwritten) && presenter.conflicts[handle] == nil
            && !document.state.contains(.inConflict)
        guard clean else {
            recordConflict(handle, DiskVersion(text: buffer, identity: file.identity, loaded: file, error: nil),
                           error: .save(.changedOnDisk(path: document.path, expected: document.identity, found: file.identity)))
            return
        }
        // A document without unsaved edits takes the file's text as one undoable step, sent as
        // the minimal edits so that clients keep their cursors and selections.
        let steps = unchangedSince ? disk.edits : TextDiff.edits(from: document.buffer, to: buffer)
        let encoding = presenter.positionEncoding
        if mirrored.contains(handle) {
            // An editor owns the text: the reload is proposed to it, and taken as synced when the
            // editor's changes bring the document to the file's text.
            proposeReload(handle, DiskVersion(text: buffer, identity: file.identity, loaded: file, error: nil), steps: steps)
            return
        }
        var sent: [TextEdit] = []
        change(handle, reason: .reloaded) { document in
            sent = Self.applyStep(steps, to: &document, label: "Reload", encoding: encoding)
            document.history.markClean()
            document.reloadCount += 1
            self.sync(&document, text: buffer, file: file)
        }
        let reloaded = documents[handle]!
        events(DocumentEvent(
            handle: handle, path: reloaded.path, version: reloaded.version, state: reloaded.state,
            previousState: reloaded.state, hasUnsavedChanges: reloaded.hasUnsavedChanges, reason: .reloaded,
            error: nil, autosave: false, kind: .textChanged(edits: sent)))
        refreshLocator(handle)
        hashInBackground(handle, buffer: buffer, encoding: file.encoding, byteOrderMark: file.hasByteOrderMark, identity: file.identity)
    }

    /// Applies `steps` (in order, each against the result of the one before) to the document as one
    /// undo step labelled `label`, the version up by one; answers them as client edits in
    /// `encoding`. Nothing happens for no steps. The reload, a conflict's resolution and a
    /// restored version change the text this way.
    static func applyStep(_ steps: [AppliedEdit], to document: inout Document, label: String, encoding: PositionEncoding) -> [TextEdit] {
        guard !steps.isEmpty else { return [] }
        var sent: [TextEdit] = []
        sent.reserveCapacity(steps.count)
        for step in steps {
            sent.append(document.buffer.textEdit(for: step, encoding: encoding))
            document.buffer.apply(step)
        }
        document.history.record(steps, label: label)
        document.version += 1
        return sent
    }

    /// Makes `file` (whose text is `text`) the document's synced file.
    func sync(_ document: inout Document, text: TextBuffer, file: LoadedText) {
        document.identity = file.identity
        document.encoding = file.encoding
        document.hasByteOrderMark = file.hasByteOrderMark
        document.lineEnding = file.lineEnding
        document.syncedText = text
        document.deletedOnDisk = false
        document.state.remove([.inConflict, .tooLarge])
    }

    /// The file changed while the document has unsaved edits (or could not take it): the disk's
    /// version is kept, as a conflict version too, and the document gains `inConflict`.
    func recordConflict(_ handle: String, _ disk: DiskVersion, error: DocumentError) {
        presenter.conflicts[handle] = disk
        presenter.pendingReloads[handle] = nil
        let tooLarge = if case .load(.fileSystem(let failure)) = error { failure.isTooLarge } else { false }
        change(handle, reason: .externalChange, error: error, always: true) { document in
            document.state.insert(.inConflict)
            if tooLarge { document.state.insert(.tooLarge) } else { document.state.remove(.tooLarge) }
        }
        if let text = disk.text, let path = documents[handle]?.path { keepVersion(of: path, kind: .conflict, text: text) }
    }

    /// The file was deleted: the text is kept and counts as unsaved; the next save writes it.
    private func markDeleted(_ handle: String) {
        change(handle, reason: .deletedOnDisk, error: .deletedOnDisk(path: documents[handle]!.path), always: true) { document in
            document.deletedOnDisk = true
            document.history.forgetCleanPoint()
            document.state.remove([.inConflict, .tooLarge])
        }
        presenter.conflicts[handle] = nil
    }

    /// Follows the document's file to `newPath` (a rename or move by another program).
    func move(_ handle: String, to newPath: String) {
        guard let oldPath = documents[handle]?.path else { return }
        if handleByPath[oldPath] == handle { handleByPath[oldPath] = nil }
        handleByPath[newPath] = handle
        documents[handle]!.path = newPath
        watch(handle, path: newPath)
        scanSyncCopies(handle)
        journalMoved(handle, to: newPath)
        moveVersions(from: oldPath, to: newPath)
        let document = documents[handle]!
        events(DocumentEvent(
            handle: handle, path: newPath, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .reloaded,
            error: nil, autosave: false, kind: .moved(oldPath: oldPath)))
    }

    private func isSymlinked(_ path: String) -> Bool {
        ((try? SafeSave.resolveSymlinks(path)) ?? path) != path
    }

    /// Looks at the attributes of the document's file now and records them; tells the client
    /// (`attributesChanged`, with `readOnly`) when those of the same file changed, or when
    /// `readOnly` did (also with another file at the path, or none: a file that is not there is not
    /// read-only, a save creates it). The document's own saves write a new file with the old one's
    /// permissions, owner and attributes, so they report nothing unless `readOnly` changed (a save
    /// to another file of a read-only document).
    func noteAttributes(_ handle: String) {
        guard let document = documents[handle] else { return }
        let before = document.attributes
        let now = FileAttributes.current(path: document.path)
        guard now != before else { return }
        documents[handle]!.attributes = now
        var changed = (now?.readOnly ?? false) != (before?.readOnly ?? false)
        if let now, let before, now.device == before.device, now.inode == before.inode, !now.sameAttributes(as: before) {
            changed = true
        }
        guard changed else { return }
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .attributesChanged,
            error: nil, autosave: false, readOnly: now?.readOnly ?? false))
    }

    // MARK: - Conflicts

    /// Resolves a conflict: keeps the document's text, takes the file's, or merges the two with the
    /// last synced text as the base. Taking or merging is one undoable step; the answer holds the
    /// edits it made (none for `mine`). A merge whose sides changed the same lines changes nothing
    /// and throws `.mergeConflicts` with the regions.
    ///
    /// The checks, in this order (each before and again after waiting for a save, revert or close
    /// running on the document): the document is open; `version`, when given, is the current one
    /// (`.staleVersion`: a client acting on an old view learns that first, whatever else changed);
    /// the document is in conflict. Only then is the file read or the merge made.
    public func resolveConflict(
        _ handle: String, _ resolution: ConflictResolution, version: Int64?, encoding: PositionEncoding, id: String? = nil
    ) async throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        // A sync tool's copy named, or only copies to resolve: resolved against them.
        if let document = documents[handle], id != nil || (!document.state.contains(.inConflict) && document.state.contains(.syncConflict)) {
            return try await resolveSyncConflict(handle, resolution, id: id, version: version, encoding: encoding)
        }
        try checkResolvable(handle, version: version)
        await acquire(handle)
        defer { release(handle) }
        try checkResolvable(handle, version: version)

        // The disk's side: recorded by the watcher, or (a conflict a save found first) read now.
        var disk = presenter.conflicts[handle]
        let readNow = disk == nil || disk?.text == nil
        if readNow {
            let path = documents[handle]!.path, encoding = documents[handle]!.encoding
            let read = await runOnOwnThread { Self.loadText(path: path, encoding: encoding) }
            guard documents[handle] != nil else { throw .unknownDocument(handle) }
            switch read {
            case .success(let (text, file)): disk = DiskVersion(text: text, identity: file.identity, loaded: file, error: nil)
            case .failure(.load(let error)) where resolution != .mine: throw .theirsUnreadable(error)
            case .failure(let error) where resolution != .mine: throw error
            case .failure: break
            }
        }
        let current = documents[handle]!
        let mine = current.buffer, base = current.syncedText, theirs = disk?.text
        // The merge, the edits and the comparison are O(n): worked out off the actor.
        let work = await runOnOwnThread { () -> Result<(steps: [AppliedEdit], clean: Bool), DocumentError> in
            let target: TextBuffer?
            switch resolution {
            case .mine: target = nil
            case .theirs: target = theirs
            case .merge(let text?): target = TextBuffer(text)
            case .merge(nil):
                guard let theirs else { return .failure(.theirsUnreadable(.cancelled)) }
                switch ThreeWayMerge.merge(base: base.utf8Bytes(), mine: mine.utf8Bytes(), theirs: theirs.utf8Bytes()) {
                case .merged(let bytes): target = TextBuffer(utf8: bytes) ?? TextBuffer(String(decoding: bytes, as: UTF8.self))
                case .conflicts(let regions): return .failure(.mergeConflicts(regions))
                }
            }
            let result = target ?? mine
            return .success((target.map { TextDiff.edits(from: mine, to: $0) } ?? [], theirs.map { $0 == result } ?? false))
        }
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        guard documents[handle]!.buffer.isIdentical(to: mine) else {
            throw .staleVersion(current: documents[handle]!.version, given: current.version)
        }
        let steps: [AppliedEdit], clean: Bool
        switch work {
        case .success(let outcome): (steps, clean) = outcome
        case .failure(let error): throw error
        }

        var sent: [TextEdit] = []
        change(handle, reason: .conflictResolved, always: true) { document in
            sent = Self.applyStep(steps, to: &document, label: "Resolve Conflict", encoding: encoding)
            if !steps.isEmpty { document.reloadCount += 1 }
            if let disk, let text = disk.text, let file = disk.loaded {
                self.sync(&document, text: text, file: file)
            } else if let disk {
                document.identity = disk.identity
                document.deletedOnDisk = false
            }
            document.state.remove([.inConflict, .tooLarge])
            if clean { document.history.markClean() } else { document.history.forgetCleanPoint() }
        }
        presenter.conflicts[handle] = nil
        refreshLocator(handle)
        // The file's text read now (the conflict a save found, or the file changed again since):
        // kept as a conflict version too, before it is marked resolved, so that `mine` and the
        // save after it never leave the other program's text nowhere (§8.21).
        if readNow, let text = disk?.text { keepVersion(of: documents[handle]!.path, kind: .conflict, text: text) }
        markConflictVersionsResolved(handle)
        return (documents[handle]!.version, sent)
    }

    /// The checks of ``resolveConflict(_:_:version:encoding:)`` before it acts: open, then the
    /// version, then in conflict.
    private func checkResolvable(_ handle: String, version: Int64?) throws(DocumentError) {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        try refuseIfCoordinated(handle)
        if let version, version != document.version { throw .staleVersion(current: document.version, given: version) }
        guard document.state.contains(.inConflict) else { throw .notInConflict(handle: handle) }
    }
}
