import FileStore
import TextBuffer

// The document's earlier versions (``VersionStore``): keeping them off the actor, listing, reading
// and restoring them.
extension DocumentStore {
    /// Keeps `text` as a version of the document at `path`, off the actor at a low priority (see
    /// ``VersionWriteQueue``: a newer version of the same file replaces one not yet written). When
    /// it is written, the documents open here hear what was kept and what was dropped
    /// (``DocumentEvent/Kind/versionsChanged(added:removed:resolved:)``).
    func keepVersion(of path: String, kind: VersionStore.Kind, text: TextBuffer, resolved: Bool = false, origin: String? = nil) {
        // Too large to keep: not even started (the store would stop at its limit anyway).
        guard let versions, text.utf8Count <= min(versions.maxVersionSize, versions.byteLimit) else { return }
        // Reported only to documents open when it was asked for (see reportVersions).
        let mark = openMark
        versionWrites?.keep(text, of: path, kind: kind, resolved: resolved, origin: origin) { [weak self] addition in
            guard let addition, let self else { return }
            // Started on the store's own (serial) executor: the reports come in the order of the writes.
            Task(executorPreference: self.executor) { await self.versionWritten(addition, queuedAt: mark) }
        }
    }

    /// The versions kept for `oldPath` follow the document to `newPath` (a move, a save as), after
    /// the writes queued before; those the per-document cap drops there are reported.
    func moveVersions(from oldPath: String, to newPath: String) {
        let mark = openMark
        versionWrites?.run { [weak self] versions in
            guard let removed = try? versions.moveDocument(from: oldPath, to: newPath), !removed.isEmpty, let self else { return }
            Task(executorPreference: self.executor) { await self.reportVersions(of: newPath, removed: removed.map(\.id), queuedAt: mark) }
        }
    }

    /// The versions queued so far are written whatever is queued after: none gives way to a newer
    /// one of its file and kind (``VersionWriteQueue``). After a way out of a conflict that marks
    /// nothing resolved (an editor's own save over it), so that the next conflict's version does
    /// not take the place of one not written yet.
    func keepQueuedVersions() {
        versionWrites?.run { _ in }
    }

    /// Thins the file's versions by age (``VersionStore/thin(documentPath:)``) in the background,
    /// after the writes queued before: at an open, so that a file opened again long after its last
    /// save does not keep its last hour of versions until its next save. The documents open here
    /// before it was asked hear what went; the one being opened does not (its client lists the
    /// versions when it asks: see ``reportVersions(of:added:removed:resolved:queuedAt:)``).
    func thinVersions(of path: String, openedAs handle: String) {
        // The mark of the open itself: the document opened is "opened after" it, and not told.
        let mark = Int(handle.dropFirst()) ?? openMark
        versionWrites?.thin(path) { [weak self] removed in
            guard !removed.isEmpty, let self else { return }
            Task(executorPreference: self.executor) { await self.reportVersions(of: path, removed: removed.map(\.id), queuedAt: mark) }
        }
    }

    /// Keeps `text` as a version of the document at `path` already resolved: a sync tool's
    /// conflict copy (`origin`, its file name) that a resolution settled.
    public func keepResolvedVersion(of path: String, kind: VersionStore.Kind = .syncConflict, text: TextBuffer, origin: String) {
        keepVersion(of: path, kind: kind, text: text, resolved: true, origin: origin)
    }

    /// Every unresolved conflict version of the document becomes resolved, including one still
    /// queued to be written (this runs after the writes queued before it). Its clients hear which.
    public func markConflictVersionsResolved(_ handle: String) {
        guard let path = documents[handle]?.path, let versionWrites else { return }
        let mark = openMark
        versionWrites.run { [weak self] versions in
            let ids = versions.versions(of: path).filter { $0.kind == .conflict && !$0.resolved }.map(\.id).filter {
                versions.markResolved($0)
            }
            guard !ids.isEmpty, let self else { return }
            Task(executorPreference: self.executor) { await self.reportVersions(of: path, resolved: ids, queuedAt: mark) }
        }
    }

    /// A write of the version queue is done: the documents open here whose versions it changed
    /// hear it (the store is shared by processes: this reports what this process did).
    private func versionWritten(_ addition: VersionStore.Addition, queuedAt mark: Int) {
        var removedByPath: [String: [String]] = [:]
        for version in addition.removed { removedByPath[version.documentPath, default: []].append(version.id) }
        let path = addition.version.documentPath
        reportVersions(
            of: path, added: addition.added ? [addition.version] : [], removed: removedByPath.removeValue(forKey: path) ?? [],
            resolved: addition.markedResolved ? [addition.version.id] : [], queuedAt: mark)
        for (other, ids) in removedByPath { reportVersions(of: other, removed: ids, queuedAt: mark) }
    }

    /// Tells the clients of the document open at `path` (none: nothing) that its versions changed.
    ///
    /// `queuedAt`: the ``openMark`` when the write was queued. A document opened after it (the file
    /// closed and opened again while a save's version waited to be written at nice 10) is not told:
    /// its client lists the versions as they are when it asks, and the notification could otherwise
    /// come before the answer to the open that named its handle.
    func reportVersions(
        of path: String, added: [VersionStore.Version] = [], removed: [String] = [], resolved: [String] = [], queuedAt mark: Int? = nil
    ) {
        guard !(added.isEmpty && removed.isEmpty && resolved.isEmpty), let handle = handleByPath[path],
              mark.map({ !opened(handle, after: $0) }) ?? true, let document = documents[handle] else { return }
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .versionsChanged,
            error: nil, autosave: false, kind: .versionsChanged(added: added, removed: removed, resolved: resolved)))
    }

    /// Waits (up to `limit`) for the versions still queued to be written (``VersionWriteQueue``);
    /// answers how many writes were left when the time was up (0: all written).
    public func finishVersionWrites(within limit: Duration = .seconds(10)) async -> Int {
        guard let versionWrites else { return 0 }
        if await versionWrites.finish(within: limit) { return 0 }
        return versionWrites.pending + (versionWrites.running ? 1 : 0)
    }

    /// Whether earlier versions are kept.
    public var keepsVersions: Bool { versions != nil }

    private func versionStore() throws(DocumentError) -> VersionStore {
        guard let versions else { throw .versionsUnavailable(reason: versionsUnavailableReason ?? "no state directory") }
        return versions
    }

    /// The document's conflict versions and saved versions, newest first.
    public func versions(_ handle: String) throws(DocumentError) -> [VersionStore.Version] {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        return try versionStore().versions(of: document.path)
    }

    /// The text of one of the document's versions.
    public func readVersion(_ handle: String, id: String) async throws(DocumentError) -> TextBuffer {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        if id.hasPrefix(Self.syncCopyPrefix) { return try await readSyncCopy(handle, id: id) }
        let store = try versionStore()
        guard let version = store.version(id), version.documentPath == document.path else { throw .unknownVersion(id) }
        let read = await runOnOwnThread { () -> Result<[UInt8], FileSystemError> in
            do throws(FileSystemError) { return .success(try store.read(id)) } catch { return .failure(error) }
        }
        switch read {
        case .success(let bytes):
            guard let text = TextBuffer(utf8: bytes) else { throw .unknownVersion(id) }
            return text
        case .failure(let error):
            if error.code == "ENOENT" { throw .unknownVersion(id) }
            throw .fileSystem(error)
        }
    }

    /// Restores one of the document's versions as one undoable edit; answers the new version and
    /// the edits.
    public func restoreVersion(
        _ handle: String, id: String, version: Int64?, encoding: PositionEncoding
    ) async throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        let text = try await readVersion(handle, id: id)
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        if document.state.contains(.editingDisabled) { throw editingDisabledError(handle) }
        if let version, version != document.version { throw .staleVersion(current: document.version, given: version) }
        let current = document.buffer
        let steps = await runOnOwnThread { TextDiff.edits(from: current, to: text) }
        // An edit that came in meanwhile makes the request stale, as it would have been in order.
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        guard now.buffer.isIdentical(to: current) else { throw .staleVersion(current: now.version, given: version ?? document.version) }
        var sent: [TextEdit] = []
        change(handle, reason: .restored, journal: JournalChange(history: .record, label: "Restore Version", edits: steps)) { document in
            sent = Self.applyStep(steps, to: &document, label: "Restore Version", encoding: encoding)
        }
        if !steps.isEmpty { scheduleAutosave(handle) }
        return (documents[handle]!.version, sent)
    }

    /// How many kept conflict versions of each file are not resolved (files with none are left
    /// out); nothing when no versions are kept. Off the actor: one lookup of the file's slot each.
    public func unresolvedConflictVersionCounts(forPaths paths: [String]) async -> [String: Int] {
        guard let versions else { return [:] }
        return await runOnOwnThread {
            var counts: [String: Int] = [:]
            for (path, kept) in versions.versions(ofPaths: paths) {
                let count = kept.filter { $0.kind != .saved && !$0.resolved }.count
                if count > 0 { counts[path] = count }
            }
            return counts
        }
    }

    /// Deletes one of the document's versions; its clients hear it.
    public func deleteVersion(_ handle: String, id: String) async throws(DocumentError) {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        if id.hasPrefix(Self.syncCopyPrefix) { return try await deleteSyncCopy(handle, id: id) }
        let store = try versionStore()
        let path = document.path
        let removed = await runOnOwnThread { () -> Bool in
            guard let version = store.version(id), version.documentPath == path else { return false }
            return store.remove(id)
        }
        guard removed else { throw .unknownVersion(id) }
        reportVersions(of: path, removed: [id])
    }

    /// The edits that turn the text of the version `from` into that of the version `to` (nil: the
    /// document's current text), in order, each against the text the ones before it made, with
    /// positions in `encoding`. Every text is read through ``readVersion(_:id:)``.
    public func diffVersions(_ handle: String, from: String, to: String?, encoding: PositionEncoding) async throws(DocumentError) -> [TextEdit] {
        let old = try await readVersion(handle, id: from)
        let new: TextBuffer
        if let to {
            new = try await readVersion(handle, id: to)
        } else {
            guard let document = documents[handle] else { throw .unknownDocument(handle) }
            new = document.buffer
        }
        return await runOnOwnThread {
            var text = old
            var edits: [TextEdit] = []
            for step in TextDiff.edits(from: old, to: new) {
                edits.append(text.textEdit(for: step, encoding: encoding))
                text.apply(step)
            }
            return edits
        }
    }
}
