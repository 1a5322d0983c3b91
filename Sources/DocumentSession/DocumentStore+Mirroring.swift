import FileStore
import TextBuffer

// Documents whose text an editor owns (LSP's text synchronisation, issue 21): the store mirrors the
// editor's buffer, journals its changes and watches its file, but never changes the text by itself.
// What the store would do to the text (a reload, a conflict's resolution, a recovery, a restored
// version) is worked out here as the edits that would do it; the server proposes them to the
// editor (`workspace/applyEdit`), and the editor's own changes bring the document there.

extension DocumentStore {
    /// Marks the document as mirroring an editor's buffer: from now on a change of its file is not
    /// taken into it but proposed (``DocumentEvent/Kind/reloadProposed(edits:)``).
    public func setMirrored(_ handle: String) {
        guard documents[handle] != nil else { return }
        mirrored.insert(handle)
    }

    /// Whether an editor owns the document's text.
    public func isMirrored(_ handle: String) -> Bool { mirrored.contains(handle) }

    /// A clean mirrored document's file changed: the file's side is kept until the document's text
    /// reaches it (``takeReloadIfReached(_:)``), and the edits go to the editor.
    func proposeReload(_ handle: String, _ disk: DiskVersion, steps: [AppliedEdit]) {
        guard let document = documents[handle] else { return }
        var disk = disk
        disk.external = true
        presenter.pendingReloads[handle] = disk
        let edits = Self.clientEdits(steps, against: document.buffer, encoding: presenter.positionEncoding)
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .reloaded,
            error: nil, autosave: false, kind: .reloadProposed(edits: edits)))
    }

    /// `steps` (ascending, each against the result of the one before, none touching another: as
    /// ``TextDiff`` makes them) as LSP's `TextEdit[]`: every range against `buffer`, the text
    /// before them all (LSP applies a list of edits as one change of the text they were made on).
    static func clientEdits(_ steps: [AppliedEdit], against buffer: TextBuffer, encoding: PositionEncoding) -> [TextEdit] {
        var edits: [TextEdit] = []
        edits.reserveCapacity(steps.count)
        var shift = 0
        for step in steps {
            let original = AppliedEdit(
                utf8Range: step.utf8Range.lowerBound - shift ..< step.utf8Range.upperBound - shift,
                removedText: step.removedText, insertedText: step.insertedText)
            edits.append(buffer.textEdit(for: original, encoding: encoding))
            shift += step.insertedText.utf8.count - step.removedText.utf8.count
        }
        return edits
    }

    /// Applies an editor's changes (`textDocument/didChange`), all or nothing. When a reload
    /// proposed to the editor waits (``takeReloadIfReached(_:)``), or the caller watches for a
    /// text it proposed (`watching`), the text after each change is compared with it: an editor
    /// sends its changes in batches (Neovim holds them back for a while), so the text may pass
    /// through the one awaited within a batch and go on. The batch is then applied in two steps,
    /// the reload taken as synced between them (the changes after it stay unsaved). Answers whether
    /// the text was `watching` after one of the changes.
    public func applyEditorChanges(
        _ handle: String, _ changes: [TextEdit], encoding: PositionEncoding, watching: TextBuffer?
    ) throws(DocumentError) -> Bool {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        let pending = presenter.pendingReloads[handle]?.text
        guard pending != nil || watching != nil else {
            _ = try edit(handle, version: document.version, edits: changes, encoding: encoding, label: nil, merge: false)
            settleIfSynced(handle)
            return false
        }
        // Every change is checked on a copy before any applies: a bad one changes nothing.
        var copy = document.buffer
        var reloadAt: Int? = nil
        var reached = false
        for (index, change) in changes.enumerated() {
            do throws(TextBufferError) {
                _ = try copy.apply(edits: [change], encoding: encoding)
            } catch {
                throw .invalidText(error)
            }
            if let pending, reloadAt == nil, copy.utf8Count == pending.utf8Count, copy == pending { reloadAt = index + 1 }
            if let watching, !reached, copy.utf8Count == watching.utf8Count, copy == watching { reached = true }
        }
        guard let split = reloadAt else {
            _ = try edit(handle, version: document.version, edits: changes, encoding: encoding, label: nil, merge: false)
            settleIfSynced(handle)
            return reached
        }
        _ = try edit(handle, version: document.version, edits: Array(changes[..<split]), encoding: encoding, label: nil, merge: false)
        takeReloadIfReached(handle)
        if split < changes.count, let now = documents[handle] {
            _ = try edit(handle, version: now.version, edits: Array(changes[split...]), encoding: encoding, label: nil, merge: false)
        }
        return reached
    }

    /// The editor's text is the file's again (its own undo back to the file, a reload of its own,
    /// a line typed and deleted; its text at `didOpen`): the document is clean, as the editor is.
    /// Compared only when the lengths are equal (or differ by Vim's empty line, below).
    public func settleIfSynced(_ handle: String) {
        guard let document = documents[handle], document.hasUnsavedChanges, !document.deletedOnDisk || document.unwritten,
              !document.state.contains(.inConflict), presenter.conflicts[handle] == nil,
              Self.editorText(document.buffer, shows: document.syncedText) else { return }
        change(handle, reason: .edited) { $0.history.markClean() }
    }

    /// Whether an editor's buffer holding `buffer` shows the file holding `file`: the same text,
    /// or Vim's empty buffer. Neovim's client sends a buffer's lines joined, with a line break
    /// after the last when 'eol' is set (as it is for an empty file and a new buffer): "\n"
    /// for the one empty line of a buffer whose write makes an empty file.
    static func editorText(_ buffer: TextBuffer, shows file: TextBuffer) -> Bool {
        if buffer.utf8Count == file.utf8Count { return buffer == file }
        return file.utf8Count == 0 && buffer.utf8Count == 1 && buffer.text == "\n"
    }

    /// The file's text a reload proposed to the editor waits for, if one does.
    public func pendingReloadText(_ handle: String) -> TextBuffer? { presenter.pendingReloads[handle]?.text }

    /// Whether a reload proposed to the editor is waiting for the document's text to reach it.
    public func hasPendingReload(_ handle: String) -> Bool { presenter.pendingReloads[handle] != nil }

    /// After an editor's change: when the document's text is now the text of the file proposed as
    /// a reload, the document takes that file as synced and is clean (`reloaded`). Answers whether
    /// it did.
    @discardableResult
    public func takeReloadIfReached(_ handle: String) -> Bool {
        guard let pending = presenter.pendingReloads[handle], let text = pending.text, let file = pending.loaded,
              let document = documents[handle], document.buffer == text else { return false }
        presenter.pendingReloads[handle] = nil
        change(handle, reason: .reloaded) { document in
            self.sync(&document, text: text, file: file)
            document.history.markClean()
        }
        refreshLocator(handle)
        hashInBackground(handle, buffer: text, encoding: file.encoding, byteOrderMark: file.hasByteOrderMark, identity: file.identity)
        return true
    }

    /// Proposes the file's text as it is now (a revert): read off the actor, kept as a pending
    /// reload (taken when the document's text reaches it); answers the edits that turn the
    /// document's text into it (none when it is the same text: then the document is clean now).
    public func proposeRevert(_ handle: String, encoding: PositionEncoding) async throws(DocumentError) -> [TextEdit] {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        let path = document.path, fileEncoding = document.encoding, current = document.buffer
        let readGuard = readGuard
        let read = await runOnOwnThread { () -> Result<(TextBuffer, LoadedText, [AppliedEdit]), DocumentError> in
            Self.loadText(path: path, encoding: fileEncoding, fileGuard: readGuard).map { buffer, file in
                (buffer, file, TextDiff.edits(from: current, to: buffer))
            }
        }
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        let (text, file, steps): (TextBuffer, LoadedText, [AppliedEdit])
        switch read {
        case .success(let found): (text, file, steps) = found
        case .failure(let error): throw error
        }
        guard now.buffer.isIdentical(to: current) else { throw .staleVersion(current: now.version, given: document.version) }
        presenter.pendingReloads[handle] = DiskVersion(text: text, identity: file.identity, loaded: file, error: nil)
        takeReloadIfReached(handle)
        return Self.clientEdits(steps, against: current, encoding: encoding)
    }

    /// The editor wrote the document's file itself (`textDocument/didSave`): the file is read off
    /// the actor (after any check of the presenter running on the document), and the document
    /// takes its identity and text as synced, so that the editor's save is never taken for a
    /// change by another program; it is clean when the file holds its text, or later, when the
    /// editor's changes bring it there (it may send them after didSave). Any conflict is over (the
    /// editor chose to write its text), and the text is kept as a saved version.
    ///
    /// `takingItsText`: the document no longer holds the editor's text (a change was refused), and
    /// the file the editor just wrote is its text: the document takes it (one undoable step) and is
    /// clean.
    public func editorSaved(_ handle: String, takingItsText: Bool = false, overOpenedFile opened: FileIdentity? = nil) async throws(DocumentError) {
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        await acquire(handle)
        defer { release(handle) }
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        let path = document.path, encoding = document.encoding, current = document.buffer
        let readGuard = readGuard
        let read = await runOnOwnThread { () -> Result<(TextBuffer, LoadedText, Bool), DocumentError> in
            Self.loadText(path: path, encoding: encoding, fileGuard: readGuard).map { buffer, file in (buffer, file, buffer == current) }
        }
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        let (text, file, equal): (TextBuffer, LoadedText, Bool)
        switch read {
        case .success(let found): (text, file, equal) = found
        case .failure(let error): throw error
        }
        // The editor wrote over another program's text: a conflict's (kept when it began), or a
        // reload proposed and not taken yet (the editor saved before it, or refused it while the
        // user typed): that text is kept as a conflict version now, if the editor's write is not
        // it. Either way the versions queued so far are kept whatever comes after (a later
        // conflict's version must not take the place of one not written yet).
        let wasInConflict = now.state.contains(.inConflict)
        let overwrittenReload = presenter.pendingReloads[handle].flatMap { $0.external ? $0.text : nil }.flatMap { $0 == text ? nil : $0 }
        if let overwrittenReload { keepVersion(of: path, kind: .conflict, text: overwrittenReload) }
        // The file read at didOpen, whose text differed from the editor's, written over before the
        // difference was settled (``editorOpenedWithOtherText(_:readAs:)``): kept unless the
        // editor wrote that very text (its own write racing didOpen).
        let overwrittenOpen = opened.flatMap { FileWatcher.classify(recorded: $0, now: now.identity) == .unchanged ? now.syncedText : nil }
            .flatMap { $0 == text ? nil : $0 }
        if let overwrittenOpen { keepVersion(of: path, kind: .conflict, text: overwrittenOpen) }
        let clean = takingItsText || (now.buffer.isIdentical(to: current) ? equal : now.buffer == text)
            || Self.editorText(now.buffer, shows: text)
        let steps = takingItsText && !(now.buffer.isIdentical(to: current) && equal) ? TextDiff.edits(from: now.buffer, to: text) : []
        let positions = presenter.positionEncoding
        change(handle, reason: .saved, always: true) { document in
            _ = Self.applyStep(steps, to: &document, label: "Editor's text", encoding: positions)
            self.sync(&document, text: text, file: file)
            if clean { document.history.markClean() } else { document.history.forgetCleanPoint() }
        }
        presenter.conflicts[handle] = nil
        watchIfUnwatched(handle)
        // Not the buffer's text yet: an editor may send didSave before the changes it wrote (Neovim
        // holds changes back for a while), so the document is clean when they bring it there.
        presenter.pendingReloads[handle] = clean ? nil : DiskVersion(text: text, identity: file.identity, loaded: file, error: nil)
        refreshLocator(handle)
        noteAttributes(handle)
        keepVersion(of: path, kind: .saved, text: text)
        if wasInConflict || overwrittenReload != nil || overwrittenOpen != nil { keepQueuedVersions() }
        hashInBackground(handle, buffer: text, encoding: file.encoding, byteOrderMark: file.hasByteOrderMark, identity: file.identity)
    }

    /// The editor's buffer differed from the file at `didOpen` while the session could not tell an
    /// edit of the user's from a file that changed after the editor read it (the editor read the
    /// old text, the session the new): a conflict to ask about, never unsaved edits to write over
    /// the file. The file's text, as the session read it, is its side (kept as a conflict version).
    /// Answers whether the document is in conflict now.
    /// `readAs`: the file's identity at didOpen; nothing happens once the document synced with
    /// another file (the editor's own write, ``editorSaved(_:takingItsText:overOpenedFile:)``).
    @discardableResult
    public func editorOpenedWithOtherText(_ handle: String, readAs identity: FileIdentity) -> Bool {
        guard let document = documents[handle], document.hasUnsavedChanges, !document.deletedOnDisk,
              !document.state.contains(.inConflict), presenter.conflicts[handle] == nil,
              FileWatcher.classify(recorded: identity, now: document.identity) == .unchanged else { return false }
        let loaded = LoadedText(
            path: document.path, encoding: document.encoding, hasByteOrderMark: document.hasByteOrderMark,
            lineEnding: document.lineEnding, identity: document.identity)
        recordConflict(
            handle, DiskVersion(text: document.syncedText, identity: document.identity, loaded: loaded, error: nil),
            error: .save(.changedOnDisk(path: document.path, expected: document.identity, found: document.identity)))
        return true
    }

    /// The editor did not take the reload proposed (`workspace/applyEdit` answered `applied:
    /// false`, as VS Code does when the user typed meanwhile), or the user typed before it could be
    /// proposed: the buffer and the file differ, and neither may simply win. The document is in
    /// conflict with the file's text proposed (kept as a conflict version), at once. Answers
    /// whether it is (nothing when no reload waits, or the document holds its text already).
    @discardableResult
    public func reloadNotTaken(_ handle: String) -> Bool {
        guard let pending = presenter.pendingReloads[handle], pending.external, let text = pending.text, let document = documents[handle],
              document.buffer != text else { return false }
        recordConflict(handle, pending, error: .save(.changedOnDisk(path: document.path, expected: document.identity, found: pending.identity)))
        return true
    }

    /// The text a dead server's journal offered for the document would bring back, if one is.
    public func recoveryText(_ handle: String) -> TextBuffer? { recoveries[handle]?.journal.text }

    /// The edits (in `encoding`) that turn the document's text into `target`, worked out off the
    /// actor; `staleVersion` when the document changed meanwhile.
    public func edits(_ handle: String, toward target: TextBuffer, encoding: PositionEncoding) async throws(DocumentError) -> [TextEdit] {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        let current = document.buffer
        let edits = await runOnOwnThread { Self.clientEdits(TextDiff.edits(from: current, to: target), against: current, encoding: encoding) }
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        guard now.buffer.isIdentical(to: current) else { throw .staleVersion(current: now.version, given: document.version) }
        return edits
    }

    /// For a mirrored document in conflict: the text a resolution would give it (`theirs`: the
    /// file's; `merge`: the three-way merge of the synced text, the document's and the file's),
    /// without changing it. A merge whose sides changed the same lines throws `.mergeConflicts`.
    public func resolutionText(_ handle: String, _ resolution: ConflictResolution) async throws(DocumentError) -> TextBuffer {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard document.state.contains(.inConflict) else { throw .notInConflict(handle: handle) }
        var theirs = presenter.conflicts[handle]?.text
        if theirs == nil {
            let path = document.path, encoding = document.encoding
            switch await runOnOwnThread({ Self.loadText(path: path, encoding: encoding) }) {
            case .success(let (text, _)): theirs = text
            case .failure(.load(let error)): throw .theirsUnreadable(error)
            case .failure(let error): throw error
            }
        }
        guard let theirs else { throw .theirsUnreadable(.cancelled) }
        switch resolution {
        case .mine: return document.buffer
        case .theirs: return theirs
        case .merge(let text?): return TextBuffer(text)
        case .merge(nil):
            let mine = document.buffer, base = document.syncedText
            let merged = await runOnOwnThread {
                ThreeWayMerge.merge(base: base.utf8Bytes(), mine: mine.utf8Bytes(), theirs: theirs.utf8Bytes())
            }
            switch merged {
            case .merged(let bytes): return TextBuffer(utf8: bytes) ?? TextBuffer(String(decoding: bytes, as: UTF8.self))
            case .conflicts(let regions): throw .mergeConflicts(regions)
            }
        }
    }
}
