#if canImport(Glibc)
    import Glibc
#endif
import FileStore
import TextBuffer

/// What a save did.
public struct SaveResult: Sendable, Equatable {
    /// The version that was written (edits made while the save ran are later versions, unsaved).
    public var version: Int64
    /// The file written (after a save-as, the new one; for a symlink, the link's path).
    public var path: String
    /// The file's new identity.
    public var identity: FileIdentity
    public var size: Int
    /// Whether the directory entry was flushed too.
    public var durable: Bool
    public var method: SafeSave.Method
}

extension DocumentStore {
    /// Documents at least this large set `progressAvailable` while a save or revert runs.
    static let progressThreshold = 1 << 20

    // MARK: - Saving

    /// Saves a document: to its file, or with `to` to a new file that the session then moves to
    /// (never replacing an existing file unless `force`). Runs on a snapshot of the text off the
    /// actor: edits keep applying meanwhile and stay unsaved after it. One save, revert or close
    /// runs at a time per document; a second waits. This entry point takes the text when its turn
    /// comes (autosave); a client's save takes it when asked (``beginSave(_:to:force:)``).
    ///
    /// A file changed on disk since it was read or saved is not overwritten unless `force`: the
    /// document gains `inConflict`. Any other failure gives `savingError` (cleared by the next
    /// successful save); the text is kept either way.
    public func save(
        _ handle: String, to newPath: String? = nil, force: Bool = false, autosave: Bool = false,
        progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false }
    ) async throws(DocumentError) -> SaveResult {
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        try refuseIfCoordinated(handle)
        await acquire(handle)
        defer { release(handle) }
        return try await runSave(
            handle, text: try takeText(handle), to: newPath, force: force, autosave: autosave,
            progress: progress, isCancelled: isCancelled)
    }

    /// Starts a save in request order: the text is taken now (an O(1) snapshot), so the save writes
    /// exactly the version current when it was asked for, even if it has to wait for a save,
    /// revert or close still running on the document; ``finishSave(_:progress:isCancelled:)``
    /// waits for its turn and writes it.
    public func beginSave(_ handle: String, to newPath: String? = nil, force: Bool = false) throws(DocumentError) -> SaveTicket {
        let text = try takeText(handle)
        try refuseIfCoordinated(handle)
        return SaveTicket(handle: handle, newPath: newPath, force: force, text: text, turn: reserve(handle))
    }

    /// Runs a save begun by ``beginSave(_:to:force:)``, off the actor. `keepingTurn`: the document's
    /// turn stays taken when it returns, until the caller lets go of it with
    /// ``releaseTurn(of:)`` (a request's, once its answer is written).
    public func finishSave(
        _ ticket: SaveTicket, progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false }, keepingTurn: Bool = false
    ) async throws(DocumentError) -> SaveResult {
        await waitForTurn(ticket.turn)
        defer { if !keepingTurn { release(ticket.handle) } }
        return try await runSave(
            ticket.handle, text: ticket.text, to: ticket.newPath, force: ticket.force, autosave: false,
            progress: progress, isCancelled: isCancelled)
    }

    /// What a save writes, taken from the document.
    func takeText(_ handle: String) throws(DocumentError) -> SaveText {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        return SaveText(
            snapshot: document.buffer, mark: document.history.mark, version: document.version,
            encoding: document.encoding, byteOrderMark: document.hasByteOrderMark, reloadCount: document.reloadCount)
    }

    /// Writes `text` through the safe-save protocol on a thread of its own, for a caller that holds
    /// the document's lock, then records the outcome: the clean point and the identity, or the
    /// failure in the state. `releasesEditing`: the save is a close's, which disabled editing; the
    /// outcome's state change gives it back (on success the close then removes the document).
    func runSave(
        _ handle: String, text: SaveText, to requestedPath: String?, force: Bool, autosave: Bool,
        releasesEditing: Bool = false,
        progress: @escaping @Sendable (Int, Int) -> Void, isCancelled: @escaping @Sendable () -> Bool
    ) async throws(DocumentError) -> SaveResult {
        // What it needs of the document, not a copy of it: held across the save, a copy would
        // share the undo history's storage, and the first edit made meanwhile would copy all of it
        // on the loop (10 ms for 130,000 steps).
        guard let document = documents[handle].map(SaveStart.init) else { throw .unknownDocument(handle) }
        let newPath = requestedPath == document.path ? nil : requestedPath
        if let newPath { try checkNotOpenElsewhere(newPath, handle: handle) }
        if newPath == nil && !force && text.reloadCount != document.reloadCount {
            // The document took the file's text after this save's text was taken: writing it
            // would overwrite what the file gained.
            let error = SaveError.changedOnDisk(path: document.path, expected: document.identity, found: document.identity)
            change(handle, reason: .saveFailed, error: .save(error), autosave: autosave, always: true) { _ in }
            throw .save(error)
        }
        if newPath == nil && !force, let conflict = presenter.conflicts[handle], documents[handle]!.state.contains(.inConflict),
           FileWatcher.classify(recorded: document.identity, now: conflict.identity) == .unchanged {
            // In conflict with the very file the document read (an editor's buffer that differed
            // from it at didOpen, a recovered journal whose file changed before the open): the
            // check of the file's identity cannot refuse this save, so it is refused here.
            let error = SaveError.changedOnDisk(path: document.path, expected: document.identity, found: conflict.identity)
            change(handle, reason: .externalChange, error: .save(error), autosave: autosave, always: true) { _ in }
            throw .save(error)
        }
        var directoryGuard: (@Sendable (Int32) -> Bool)? = nil
        if let roots { directoryGuard = { descriptor in roots.holds(descriptor: descriptor) } }
        // The file's content hash when the check for an external change needs it before the
        // background hash of the file's last read has come in: computed then, on the save's
        // thread, from the text last synced with the file (the same bytes, encoded as it was).
        var expectedHash: (@Sendable () -> UInt64?)? = nil
        if newPath == nil, document.identity.contentHash == nil {
            let (synced, syncedEncoding, syncedMark) = (document.syncedText, document.encoding, document.hasByteOrderMark)
            expectedHash = { synced.contentHash(encoding: syncedEncoding, byteOrderMark: syncedMark) }
        }
        let request = SafeSave.Request(
            path: newPath ?? document.path, expected: newPath == nil ? document.identity : nil,
            force: force, createOnly: newPath != nil && !force, directoryGuard: directoryGuard,
            expectedHash: expectedHash, locks: fileLocks)
        let snapshot = text.snapshot
        let (encoding, byteOrderMark) = (text.encoding, text.byteOrderMark)
        let total = Self.encodedSize(snapshot, encoding: encoding, byteOrderMark: byteOrderMark)
        let large = snapshot.utf8Count >= Self.progressThreshold
        if large { change(handle, reason: .saving, autosave: autosave) { $0.state.insert(.progressAvailable) } }
        // The request goes to the save's thread in a box it empties: a request that hashes the
        // synced text holds that text, and the closure, released on the loop, must not.
        var handedRequest = HandOver(request)
        // A save whose bytes the file holds already writes nothing: the text is the one synced
        // with the file, in its encoding, and the file is the one synced, unchanged since. (The
        // text is compared on the save's thread: O(n) when the lengths match.)
        let synced = newPath == nil ? document.syncedText : nil
        let unchangedFile = newPath == nil && encoding == document.encoding && byteOrderMark == document.hasByteOrderMark
            ? document.identity : nil
        // The file's own text when this save finds that another program changed it: refused
        // (-32017), or overwritten by a forced save. It is kept as a conflict version before any
        // way out of the conflict can overwrite it (§8.21): a conflict the save found first was
        // otherwise kept by nobody (without the watcher, always), and `resolveConflict mine` or
        // a forced save then destroyed the other program's text.
        let displacedRead = newPath == nil
            ? DisplacedRead(path: document.path, identity: document.identity, encoding: document.encoding, fileGuard: readGuard)
            : nil
        var outcome: Result<SafeSave.Outcome, SaveError>
        var displaced: TextBuffer? = nil
        waiting: while true {
            // A large save runs at a lower priority (nice 10): on two cores the client, the thread
            // answering edits and the save compete, and typing should win; a small one is over
            // before it matters, and waiting for a processor would only slow it.
            let step = await runOnOwnThread(niceness: large ? 10 : 0) { [handedRequest] () -> SaveStep in
                var request = handedRequest.take()
                if let synced, let unchangedFile {
                    let target = (try? SafeSave.resolveSymlinks(request.path)) ?? request.path
                    if let now = FileIdentity.current(path: target), FileWatcher.classify(recorded: unchangedFile, now: now) == .unchanged,
                       snapshot == synced {
                        var identity = now
                        identity.contentHash = unchangedFile.contentHash
                        return .finished(.success(SafeSave.Outcome(path: target, identity: identity, size: Int(now.size), durable: true, method: .unchanged)))
                    }
                }
                do throws(SaveError) {
                    // The file's lock across processes, without waiting: while another process
                    // holds it, the save waits off this thread (the pool's threads are bounded:
                    // saves waiting for other programs would hold every one of them, and opens and
                    // other saves would wait too).
                    if let pending = try SafeSave.takeLock(&request) { return .waitForLock(pending, HandOver(request)) }
                    if newPath != nil {
                        // A save as first sweeps the temp files killed saves left in its
                        // destination's directory, as an open does beside its file (by the same
                        // rules, and only where the save may write).
                        SafeSave.sweepStaleTempFiles(
                            nextTo: (try? SafeSave.resolveSymlinks(request.path)) ?? request.path, directoryGuard: request.directoryGuard)
                    }
                    // A forced save over a file another program changed: its text first.
                    let overwritten = force ? displacedRead?.textIfChanged(synced: synced) : nil
                    return .finished(.success(try SafeSave.save(request, progress: { progress($0, total) }, isCancelled: isCancelled) { (sink) throws(SaveError) in
                        try snapshot.write(to: sink, encoding: encoding, byteOrderMark: byteOrderMark)
                    }), displaced: overwritten)
                } catch {
                    if case .changedOnDisk = error { return .finished(.failure(error), displaced: displacedRead?.textIfChanged(synced: synced)) }
                    return .finished(.failure(error))
                }
            }
            switch step {
            case .finished(let result, let found):
                outcome = result
                displaced = found
                break waiting
            case .waitForLock(let pending, let returned):
                do throws(FileSystemError) {
                    guard let held = try await pending.wait(isCancelled: isCancelled) else {
                        outcome = .failure(.cancelled)
                        break waiting
                    }
                    var request = returned.take()
                    request.heldLock = held
                    handedRequest = HandOver(request)
                } catch {
                    outcome = .failure(.fileSystem(error))
                    break waiting
                }
            }
        }

        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        switch outcome {
        case .success(let saved):
            defer {
                hashInBackground(handle, buffer: snapshot, encoding: encoding, byteOrderMark: byteOrderMark, identity: saved.identity)
            }
            let released = releasesEditing ? releaseEditing(handle) : []
            let oldPath = document.path
            // The other program's text this forced save replaced, before the save's own version
            // (and before the forced save marks the conflict versions resolved, this one too).
            if let displaced { keepVersion(of: oldPath, kind: .conflict, text: displaced) }
            // A save as is news even when no flag changes (nothing was unsaved): the document's
            // file is another one, and the other holders of a shared document learn it here.
            change(handle, reason: .saved, autosave: autosave, always: newPath != nil) { document in
                document.identity = saved.identity
                document.history.markClean(at: text.mark)
                document.state.subtract(released.union([.progressAvailable, .savingError, .inConflict, .tooLarge]))
                document.syncedText = snapshot
                document.deletedOnDisk = false
                if let newPath {
                    self.handleByPath[document.path] = nil
                    document.path = newPath
                    self.handleByPath[newPath] = handle
                }
            }
            savedByDocument(handle, oldPath: oldPath, text: snapshot)
            if force { markConflictVersionsResolved(handle) }  // the file now holds this text, whatever conflicted
            // The history up to what the file now holds outlives a crash from here on.
            if let saved = documents[handle] { keepUndo(saved) }
            let result = SaveResult(
                version: text.version, path: request.path, identity: saved.identity, size: saved.size,
                durable: saved.durable, method: saved.method)
            // What was read of the document before the save (and the request, when it hashes the
            // synced text) holds the last reference to the text synced before this save: the
            // pieces edits replaced since are freed with it, thousands for a large document, so
            // not here on the loop.
            releaseInBackground((consume document, consume request))
            return result
        case .failure(let error):
            let reason: DocumentEvent.Reason
            var added: DocumentState = []
            switch error {
            case .cancelled: reason = .saveCancelled
            // A document without unsaved edits has nothing to be in conflict with: the watcher's
            // check (asked for below) takes the file's text into it instead.
            case .changedOnDisk: reason = .externalChange; added = documents[handle]!.hasUnsavedChanges ? .inConflict : []
            // Refused before anything was written (save as onto an existing file): not a failure
            // of saving the document, so no savingError.
            case .alreadyExists: reason = .saveFailed
            default: reason = .saveFailed; added = .savingError
            }
            let released = releasesEditing ? releaseEditing(handle) : []
            change(handle, reason: reason, error: reason == .saveCancelled ? nil : .save(error), autosave: autosave, always: reason != .saveCancelled) { document in
                document.state.subtract(released.union(.progressAvailable))
                document.state.formUnion(added)
            }
            // The conflict this save found: the file's text is kept now, before any way out.
            if added.contains(.inConflict), let displaced, let path = documents[handle]?.path {
                keepVersion(of: path, kind: .conflict, text: displaced)
            }
            if case .changedOnDisk = error, added.isEmpty, watchFiles { checkSoon(handle) }
            // Refused for want of permission (a chmod, an ACL, `chattr +i`, a read-only remount
            // the watcher cannot see): the file's attributes are looked at again now, so that
            // `readOnly` is reported (attributesChanged) after the failure that revealed it.
            if case .fileSystem(let detail) = error, [EACCES, EPERM, EROFS].contains(detail.errno) { noteAttributes(handle) }
            throw .save(error)
        }
    }

    /// The bytes a save of `text` writes (for progress).
    static func encodedSize(_ text: TextBuffer, encoding: TextEncoding, byteOrderMark: Bool) -> Int {
        let bom = byteOrderMark ? encoding.byteOrderMark.count : 0
        switch encoding {
        case .utf8: return bom + text.utf8Count
        case .utf16LittleEndian, .utf16BigEndian: return bom + 2 * text.utf16Count
        case .latin1: return bom + text.scalarCount
        }
    }

    /// Save as may not write a file another open document holds, by path or (through a symlink or
    /// a hard link) by device and inode.
    func checkNotOpenElsewhere(_ path: String, handle: String) throws(DocumentError) {
        if let other = handleByPath[path], other != handle { throw .openElsewhere(path: path, handle: other) }
        guard let found = FileIdentity.current(path: path) else { return }
        if let other = documents.handles(device: found.device, inode: found.inode).subtracting([handle]).min() {
            throw .openElsewhere(path: path, handle: other)
        }
    }

    // MARK: - Editing disabled

    /// Refuses edits until as many ``releaseEditing(_:)`` calls (a revert or close asked for, which
    /// may wait for a save still running: edits sent after it must not slip in meanwhile).
    func disableEditing(_ handle: String, reason: DocumentEvent.Reason, also more: DocumentState = []) {
        editingDisabledCount[handle, default: 0] += 1
        change(handle, reason: reason) { $0.state.formUnion(more.union(.editingDisabled)) }
    }

    /// One disabler is done; answers the flags to clear (editingDisabled once none is left).
    func releaseEditing(_ handle: String) -> DocumentState {
        let left = (editingDisabledCount[handle] ?? 1) - 1
        editingDisabledCount[handle] = left > 0 ? left : nil
        return left > 0 ? [] : .editingDisabled
    }

    // MARK: - Reverting

    /// Reloads the text from the file, dropping unsaved edits, as one undo step (so the revert can
    /// be undone); edits are refused while it runs. Clears `savingError` and `inConflict`.
    public func revert(_ handle: String) async throws(DocumentError) -> Document {
        try await finishRevert(beginRevert(handle))
    }

    /// Starts a revert in request order: edits are refused from now on, even while the revert
    /// waits for a save still running.
    public func beginRevert(_ handle: String) throws(DocumentError) -> ExclusiveTicket {
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        try refuseIfCoordinated(handle)
        let turn = reserve(handle)
        // Starting now: the progress flag comes with the first state change.
        disableEditing(handle, reason: .reverting, also: turn == nil ? revertProgress(handle) : [])
        return ExclusiveTicket(handle: handle, turn: turn, closedNow: false)
    }

    private func revertProgress(_ handle: String) -> DocumentState {
        (documents[handle]?.buffer.utf8Count ?? 0) >= Self.progressThreshold ? .progressAvailable : []
    }

    /// Runs a revert begun by ``beginRevert(_:)``; `keepingTurn` as for
    /// ``finishSave(_:progress:isCancelled:keepingTurn:)``.
    public func finishRevert(_ ticket: ExclusiveTicket, keepingTurn: Bool = false) async throws(DocumentError) -> Document {
        let handle = ticket.handle
        await waitForTurn(ticket.turn)
        defer { if !keepingTurn { release(handle) } }
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        let path = document.path
        let encoding = document.encoding
        if !ticket.acquired {
            let progress = revertProgress(handle)
            change(handle, reason: .reverting) { $0.state.formUnion(progress) }
        }

        // Edits are refused meanwhile, so the text stays this one: the difference between it and
        // the file's is worked out on the loading thread too, not on the actor (it is O(n)).
        let current = document.buffer
        let readGuard = readGuard
        let loaded = await runOnOwnThread { () -> Result<(TextBuffer, LoadedText, AppliedEdit?), DocumentError> in
            Self.loadText(path: path, encoding: encoding, fileGuard: readGuard).map { buffer, file in
                (buffer, file, Self.difference(from: current, to: buffer))
            }
        }
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        let released = releaseEditing(handle).union(.progressAvailable)
        switch loaded {
        case .failure(let error):
            change(handle, reason: .revertFailed, error: error, always: true) { document in
                document.state.subtract(released)
                document.state.insert(.savingError)
            }
            throw error
        case .success(let (buffer, file, difference)):
            change(handle, reason: .reverted) { document in
                let edit = document.buffer.isIdentical(to: current) ? difference : Self.difference(from: document.buffer, to: buffer)
                if let edit {
                    document.buffer.apply(edit)
                    document.history.record([edit], label: "Revert")
                    document.version += 1
                }
                document.history.markClean()
                document.encoding = file.encoding
                document.hasByteOrderMark = file.hasByteOrderMark
                document.lineEnding = file.lineEnding
                document.identity = file.identity
                document.syncedText = buffer
                document.deletedOnDisk = false
                document.state.subtract(released.union([.savingError, .inConflict, .tooLarge]))
            }
            presenter.conflicts[handle] = nil
            refreshLocator(handle)
            noteAttributes(handle)
            hashInBackground(handle, buffer: buffer, encoding: file.encoding, byteOrderMark: file.hasByteOrderMark, identity: file.identity)
            return documents[handle]!
        }
    }

    /// One replacement turning `old` into `new`: the bytes between their common prefix and suffix
    /// (cut at character boundaries); nil when they are equal.
    static func difference(from old: TextBuffer, to new: TextBuffer) -> AppliedEdit? {
        if old == new { return nil }
        let a = old.utf8Bytes(), b = new.utf8Bytes()
        var prefix = 0
        let limit = min(a.count, b.count)
        while prefix < limit && a[prefix] == b[prefix] { prefix += 1 }
        while prefix > 0 && prefix < a.count && a[prefix] & 0xC0 == 0x80 { prefix -= 1 }
        var suffix = 0
        while suffix < limit - prefix && a[a.count - 1 - suffix] == b[b.count - 1 - suffix] { suffix += 1 }
        while suffix > 0 && a[a.count - suffix] & 0xC0 == 0x80 { suffix -= 1 }
        let removed = prefix..<(a.count - suffix)
        return AppliedEdit(
            utf8Range: removed, removedText: String(decoding: a[removed], as: UTF8.self),
            insertedText: String(decoding: b[prefix..<(b.count - suffix)], as: UTF8.self))
    }

    // MARK: - Closing

    /// What `close` does with unsaved edits.
    public enum SavePolicy: String, Sendable {
        /// Save first if there are unsaved changes (UIDocument's close); if that save fails the
        /// document stays open with its edits.
        case ifChanged
        /// Drop them.
        case never
    }

    /// Closes a document; answers whether it was saved first.
    public func close(_ handle: String, save policy: SavePolicy) async throws(DocumentError) -> Bool {
        let ticket = try beginClose(handle, save: policy)
        if ticket.closedNow { return false }
        return try await finishClose(ticket, save: policy)
    }

    /// Starts a close in request order. With nothing to save, and nothing running on the document
    /// but the file presenter's check of its file, it closes at once (`closedNow`): a request sent
    /// after the close finds no document, whenever the machine chose to run the check (which looks
    /// the document up again after each of its waits, and drops its work for a closed one).
    /// Otherwise edits are refused from now on (the close may have to wait for a save, revert,
    /// move or delete still running or queued before it, and then save); ``finishClose(_:save:)``
    /// does the rest.
    public func beginClose(_ handle: String, save policy: SavePolicy) throws(DocumentError) -> ExclusiveTicket {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        // A close that would save while a lease holds the file: refused (one without saving ends
        // the lease quietly for the document).
        if policy == .ifChanged && document.hasUnsavedChanges { try refuseIfCoordinated(handle) }
        let onlyACheckRuns = busy[handle] == nil
            || (presenter.checkTurns[handle]?.holdsLock == true && busy[handle]?.isEmpty == true)
        if onlyACheckRuns && (policy == .never || !document.hasUnsavedChanges) {
            remove(handle)
            return ExclusiveTicket(handle: handle, turn: nil, closedNow: true)
        }
        let turn = reserve(handle)
        disableEditing(handle, reason: .closing)
        return ExclusiveTicket(handle: handle, turn: turn, closedNow: false)
    }

    /// Runs a close begun by ``beginClose(_:save:)``: saves first with `ifChanged` if there are
    /// unsaved changes; if that save fails the document stays open (editable again) and the error
    /// is thrown. `keepingTurn` as for ``finishSave(_:progress:isCancelled:keepingTurn:)`` (a
    /// ticket `closedNow` holds no turn).
    public func finishClose(_ ticket: ExclusiveTicket, save policy: SavePolicy, keepingTurn: Bool = false) async throws(DocumentError) -> Bool {
        let handle = ticket.handle
        if ticket.closedNow { return false }
        await waitForTurn(ticket.turn)
        defer { if !keepingTurn { release(handle) } }
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        var saved = false
        if policy == .ifChanged && document.hasUnsavedChanges {
            _ = try await runSave(
                handle, text: try takeText(handle), to: nil, force: false, autosave: false, releasesEditing: true,
                progress: { _, _ in }, isCancelled: { false })
            saved = true
        }
        remove(handle)
        return saved
    }

    /// Forgets a document and reports it closed. Its undo history is kept for its file
    /// (`persistUndo`) unless `keepingUndo` is false (the file was deleted).
    func remove(_ handle: String, keepingUndo: Bool = true, releasingJournal: Bool = false) {
        guard let closing = documents.removeValue(forKey: handle) else { return }
        if keepingUndo { keepUndo(closing) }
        journalClosed(handle, releasing: releasingJournal)
        stopPresenting(handle)
        autosaveDue[handle] = nil
        autosaveTimers.removeValue(forKey: handle)?.task.cancel()
        editingDisabledCount[handle] = nil
        if handleByPath[closing.path] == handle { handleByPath[closing.path] = nil }
        events(DocumentEvent(
            handle: handle, path: closing.path, version: closing.version, state: .closed, previousState: closing.state,
            hasUnsavedChanges: false, reason: .closed, error: nil, autosave: false))
    }

    // MARK: - Autosave

    /// Sets when documents save by themselves.
    public func setAutosave(_ policy: AutosavePolicy) {
        autosave = policy
    }

    /// After a change: an autosave once the delay passes with no other change.
    ///
    /// One sleeping task per document, not one per change: a change only moves the document's due
    /// time, and the task, when it wakes, sleeps again until the due time if that has moved (a
    /// client sending thousands of edits a second makes one task, not thousands). A task is
    /// replaced only when the new due time is earlier than its wake-up (the delay was shortened).
    func scheduleAutosave(_ handle: String) {
        guard case .afterDelay(let milliseconds) = autosave else { return }
        let due = ContinuousClock.now + .milliseconds(milliseconds)
        autosaveDue[handle] = due
        if let timer = autosaveTimers[handle], timer.wakesAt <= due { return }
        autosaveTimers[handle]?.task.cancel()
        startAutosaveTimer(handle, wakingAt: due)
    }

    private func startAutosaveTimer(_ handle: String, wakingAt wake: ContinuousClock.Instant) {
        let task = Task { [weak self] in
            try? await Task.sleep(until: wake, clock: .continuous)
            guard !Task.isCancelled else { return }
            await self?.autosaveTimerFired(handle, wake)
        }
        autosaveTimers[handle] = (task, wake)
    }

    private func autosaveTimerFired(_ handle: String, _ wake: ContinuousClock.Instant) async {
        // A task replaced while it was on its way here leaves the work to its replacement.
        guard autosaveTimers[handle]?.wakesAt == wake else { return }
        autosaveTimers[handle] = nil
        guard let due = autosaveDue[handle] else { return }
        // Changed since the task started: sleep on until the delay has passed after the last one.
        if ContinuousClock.now < due {
            startAutosaveTimer(handle, wakingAt: due)
            return
        }
        autosaveDue[handle] = nil
        await autosaveIfQuiet(handle)
    }

    private func autosaveIfQuiet(_ handle: String) async {
        guard autosave != .off, let document = documents[handle],
              document.hasUnsavedChanges, !document.state.contains(.inConflict),
              !document.state.contains(.editingDisabled) else { return }
        // A save or revert running now: look again after it.
        if busy[handle] != nil { scheduleAutosave(handle); return }
        // Failures are reported by the save's own state change (savingError, inConflict).
        _ = try? await save(handle, autosave: true)
    }

    // MARK: - State changes

    /// Changes a document in place and reports the change of its state or `hasUnsavedChanges`
    /// (always, with `always`: a failure is news even when the flags were already set).
    ///
    /// The journal hears of it (`journalChange`: what the body did to the text, when it changed it
    /// as an undoable step; the journal starts again from the text otherwise, if it must).
    func change(
        _ handle: String, reason: DocumentEvent.Reason, error: DocumentError? = nil, autosave: Bool = false,
        always: Bool = false, journal journalChange: JournalChange? = nil, _ body: (inout Document) -> Void
    ) {
        guard let (state, wasUnsaved, version) = documents[handle].map({ ($0.state, $0.hasUnsavedChanges, $0.version) }) else { return }
        body(&documents[handle]!)
        if textObserver != nil, documents[handle]?.version != version { observeText(handle) }
        reportChange(handle, from: state, wasUnsaved: wasUnsaved, reason: reason, error: error, autosave: autosave, always: always)
        journalNote(handle, journalChange, wasUnsaved: wasUnsaved)
    }

    /// Sends a state-change event if the state or `hasUnsavedChanges` differ from before.
    func reportChange(
        _ handle: String, from previous: DocumentState, wasUnsaved: Bool, reason: DocumentEvent.Reason,
        error: DocumentError? = nil, autosave: Bool = false, always: Bool = false
    ) {
        guard let document = documents[handle] else { return }
        guard always || document.state != previous || document.hasUnsavedChanges != wasUnsaved else { return }
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state, previousState: previous,
            hasUnsavedChanges: document.hasUnsavedChanges, reason: reason, error: error, autosave: autosave))
    }

    // MARK: - One at a time

    /// Waits until no save, revert or close runs on the document, and marks it busy.
    func acquire(_ handle: String) async {
        await waitForTurn(reserve(handle))
    }

    /// Takes the document's lock now if it is free (nil), else a place in line behind those already
    /// waiting. The line keeps the order of these calls, made in request order on the actor,
    /// whenever the waits themselves begin: a save begun after another writes after it even if its
    /// task reaches ``waitForTurn(_:)`` first (the load soak found a file going back to an older
    /// version after a newer one's save was answered: the later save's task had queued first).
    func reserve(_ handle: String) -> LockTurn? {
        guard busy[handle] != nil else {
            busy[handle] = []
            return nil
        }
        let turn = LockTurn()
        busy[handle]!.append(turn)
        return turn
    }

    /// Waits until `turn` (from ``reserve(_:)``; nil: the lock was taken at once) has the lock.
    func waitForTurn(_ turn: LockTurn?) async {
        guard let turn, !turn.granted else { return }
        // Looked at again inside: the closure may run as a job of its own on the store's executor,
        // after others (swiftlang/swift#85668), and the turn may have come meanwhile.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if turn.granted {
                continuation.resume()
            } else {
                turn.continuation = continuation
            }
        }
    }

    /// How many in the document's line have begun to wait (test-visible).
    func turnsWaiting(_ handle: String) -> Int {
        busy[handle]?.count(where: { $0.continuation != nil }) ?? 0
    }

    /// Lets go of a turn that a `finish…(keepingTurn: true)` kept: the server calls it once the
    /// request's answer is written, so that the next save, revert, close, delete or move of the
    /// document, waiting for this turn, is answered after it (protocol §4.7: their responses come
    /// in the order they were asked for). Letting go when the work returned, the next one could
    /// run whole and be answered while this answer still waited to be written (the load soak).
    public func releaseTurn(of handle: String) {
        release(handle)
    }

    /// Hands the document to the next in line, or marks it free.
    func release(_ handle: String) {
        guard var waiters = busy[handle], !waiters.isEmpty else {
            busy[handle] = nil
            return
        }
        let next = waiters.removeFirst()
        busy[handle] = waiters
        next.granted = true
        if let continuation = next.continuation {
            next.continuation = nil
            continuation.resume()
        }
    }
}

/// A place in the line for a document's lock (``DocumentStore/reserve(_:)``). Read and written
/// only on the store's actor: tickets carry it across the request's tasks back to the actor.
final class LockTurn: @unchecked Sendable {
    /// The lock was handed to this turn.
    var granted = false
    /// Who waits for it, once the wait has begun.
    var continuation: CheckedContinuation<Void, Never>?
}

/// A save begun in request order (see ``DocumentStore/beginSave(_:to:force:)``): the text it writes,
/// and whether it holds the document's lock already.
public struct SaveTicket: Sendable {
    public let handle: String
    let newPath: String?
    let force: Bool
    let text: SaveText
    /// Its place in line for the document's lock; nil: it took the lock when it began.
    let turn: LockTurn?
    var acquired: Bool { turn == nil }
}

/// What ``DocumentStore/runSave(_:text:to:force:autosave:releasesEditing:progress:isCancelled:)``
/// reads of the document when it starts: its fields, without its undo history.
struct SaveStart: Sendable {
    let path: String
    let identity: FileIdentity
    let reloadCount: Int
    let syncedText: TextBuffer
    let encoding: TextEncoding
    let hasByteOrderMark: Bool

    init(_ document: Document) {
        path = document.path
        identity = document.identity
        reloadCount = document.reloadCount
        syncedText = document.syncedText
        encoding = document.encoding
        hasByteOrderMark = document.hasByteOrderMark
    }
}

/// What a save writes: a snapshot of the text and of the history's state, as taken.
struct SaveText: Sendable {
    let snapshot: TextBuffer
    let mark: UndoHistory.Mark
    let version: Int64
    let encoding: TextEncoding
    let byteOrderMark: Bool
    /// The document's ``Document/reloadCount`` when the text was taken.
    let reloadCount: Int
}

/// A revert or close begun in request order: whether it holds the document's lock already, and
/// (a close) whether it is done already.
public struct ExclusiveTicket: Sendable {
    public let handle: String
    /// Its place in line for the document's lock; nil: it took the lock when it began.
    let turn: LockTurn?
    var acquired: Bool { turn == nil }
    public let closedNow: Bool
}

/// What one run of a save's thread came to: the save's outcome, or the file's lock found held by
/// another process, to be waited for off the thread before the save runs again with it.
enum SaveStep: Sendable {
    /// `displaced`: the text of the file another program changed, that the save found (refused,
    /// or overwritten by force).
    case finished(Result<SafeSave.Outcome, SaveError>, displaced: TextBuffer? = nil)
    case waitForLock(FileLocks.Pending, HandOver<SafeSave.Request>)
}

/// Reads, on a save's thread, the text of the document's file when another program changed it
/// since the document last read or saved it (nil: unchanged, the same text, or not readable as text).
struct DisplacedRead: Sendable {
    let path: String
    let identity: FileIdentity
    let encoding: TextEncoding
    let fileGuard: (@Sendable (Int32) -> Bool)?

    /// `synced`: the text last synced with the file (the caller's: a save holds it already).
    func textIfChanged(synced: TextBuffer?) -> TextBuffer? {
        guard let now = FileIdentity.current(path: path), FileWatcher.classify(recorded: identity, now: now) != .unchanged,
              case .success(let (text, _)) = DocumentStore.loadText(path: path, encoding: encoding, fileGuard: fileGuard),
              text != synced else { return nil }
        return text
    }
}
