import FileStore
import TextBuffer

/// Sync tools' conflict copies (protocol/README.md §8.24): a copy that Syncthing, Nextcloud,
/// Seafile, Unison, Dropbox or OneDrive writes beside an open document is an unresolved conflict
/// version of it (NSFileVersion's `unresolvedConflictVersionsOfItem`), listed by
/// `document/versions` with the id `sync:<the copy's name>`; the document is `inConflict` while
/// there are any (the state's `syncConflict`, kept apart from a conflict with the file itself:
/// the file is still the document's to save, and autosave goes on). A resolution settles copies:
/// their text is kept as resolved versions and the files are removed, so that the tool spreads
/// the removal to its other devices.
extension DocumentStore {
    /// The prefix of a conflict copy's version id.
    public static let syncCopyPrefix = "sync:"

    /// The unresolved conflict copies beside the document's file, newest first.
    public func syncCopies(_ handle: String) throws(DocumentError) -> [SyncCopyFile] {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        return document.syncCopies
    }

    /// The version id of a copy.
    public static func versionID(of copy: SyncCopyFile) -> String { syncCopyPrefix + copy.copy.name }

    /// Looks for conflict copies beside the document's file again, off the actor (the watcher saw
    /// a name that may be one come or go; the file moved). One scan at a time per document; a
    /// request during one runs another after it.
    func scanSyncCopies(_ handle: String) {
        guard documents[handle] != nil else { return }
        if presenter.scanningCopies.contains(handle) {
            presenter.rescanCopies.insert(handle)
            return
        }
        presenter.scanningCopies.insert(handle)
        Task {
            repeat {
                self.presenter.rescanCopies.remove(handle)
                guard let path = self.documents[handle]?.path else { break }
                let found = await runOnOwnThread { SyncConflictNames.copies(besides: (try? SafeSave.resolveSymlinks(path)) ?? path) }
                if self.documents[handle]?.path == path { self.noteSyncCopies(handle, found) }
            } while self.presenter.rescanCopies.contains(handle)
            self.presenter.scanningCopies.remove(handle)
        }
    }

    /// Records the copies found: a new one puts the document in conflict (`syncConflict`); when the
    /// last one goes (the tool or someone removed it before a resolution), the document leaves it.
    /// The clients hear of the versions gained and lost too (`document/didChangeVersions`:
    /// presentedItemDidGainVersion, presentedItemDidLoseVersion).
    func noteSyncCopies(_ handle: String, _ found: [SyncCopyFile]) {
        guard let document = documents[handle] else { return }
        let before = Set(document.syncCopies.map(\.copy.name)), after = Set(found.map(\.copy.name))
        guard found != document.syncCopies else { return }
        let arrived = !after.subtracting(before).isEmpty
        change(handle, reason: .syncConflict, always: arrived) { document in
            document.syncCopies = found
            if found.isEmpty { document.state.remove(.syncConflict) } else { document.state.insert(.syncConflict) }
        }
        reportVersions(
            of: document.path, added: found.filter { !before.contains($0.copy.name) }.map { Self.version(of: $0, documentPath: document.path) },
            removed: document.syncCopies.filter { !after.contains($0.copy.name) }.map(Self.versionID(of:)))
    }

    /// A copy as a version (its id `sync:NAME`, unresolved, its name as the origin).
    public static func version(of copy: SyncCopyFile, documentPath: String) -> VersionStore.Version {
        VersionStore.Version(
            id: versionID(of: copy), kind: .syncConflict, documentPath: documentPath, date: copy.date, size: Int(copy.size),
            resolved: false, origin: copy.copy.name)
    }

    /// `document/deleteVersion` of a copy: the copy's file is removed (nothing is kept: the user
    /// discards it), and the document leaves the conflict with its last copy.
    func deleteSyncCopy(_ handle: String, id: String) async throws(DocumentError) {
        guard let copy = syncCopy(handle, id: id) else { throw .unknownVersion(id) }
        let removed = await runOnOwnThread { SyncConflictNames.removeIfUnchanged(copy) }
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard removed else {
            // Rewritten since it was found: what the user saw is not what is there.
            scanSyncCopies(handle)
            throw .unknownVersion(id)
        }
        change(handle, reason: .syncConflict) { document in
            document.syncCopies.removeAll { Self.versionID(of: $0) == id }
            if document.syncCopies.isEmpty { document.state.remove(.syncConflict) }
        }
        reportVersions(of: document.path, removed: [id])
    }

    /// The copy a version id names, among the document's unresolved ones.
    func syncCopy(_ handle: String, id: String) -> SyncCopyFile? {
        documents[handle]?.syncCopies.first { Self.versionID(of: $0) == id }
    }

    /// The text of a conflict copy, read in the document's encoding.
    func readSyncCopy(_ copy: SyncCopyFile, encoding: TextEncoding) async throws(DocumentError) -> (TextBuffer, LoadedText) {
        let path = copy.path
        switch await runOnOwnThread({ Self.loadText(path: path, encoding: encoding) }) {
        case .success(let read): return read
        case .failure(.load(let error)): throw .theirsUnreadable(error)
        case .failure(let error): throw error
        }
    }

    /// The text of the unresolved conflict copy with this version id.
    func readSyncCopy(_ handle: String, id: String) async throws(DocumentError) -> TextBuffer {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard let copy = syncCopy(handle, id: id) else { throw .unknownVersion(id) }
        do throws(DocumentError) {
            return try await readSyncCopy(copy, encoding: document.encoding).0
        } catch .theirsUnreadable(let error) {
            if case .fileSystem(let failure) = error, failure.code == "ENOENT" { throw .unknownVersion(id) }
            throw .load(error)
        }
    }

    // MARK: - Resolving

    /// Resolves against conflict copies: `id` names one (`sync:<name>`); without it, `mine` settles
    /// every copy and `theirs` or `merge` need the document to have exactly one.
    ///
    /// - `mine`: the document's text stays.
    /// - `theirs`: the copy's text replaces the document's (one undoable step, an unsaved change).
    /// - `merge`: three-way, with as base the kept version (saved, or the text last synced with
    ///   the file) the copy most likely descends from: the one nearest to it, line by line (the
    ///   newest of equals; an exact copy of one of ours is its own base, and the merge keeps
    ///   ours). With no version to take, the regions where the two differ come back as
    ///   `.mergeConflicts` with empty bases (a two-way comparison), and nothing changes. With a
    ///   `text`, the client's own merge.
    ///
    /// Then each copy settled is kept as a resolved version and removed from disk (only if it is
    /// still the file that was read).
    func resolveSyncConflict(
        _ handle: String, _ resolution: ConflictResolution, id: String?, version: Int64?, encoding: PositionEncoding
    ) async throws(DocumentError) -> (version: Int64, edits: [TextEdit]) {
        _ = try checkSyncResolvable(handle, resolution, id: id, version: version)
        await acquire(handle)
        defer { release(handle) }
        let targets = try checkSyncResolvable(handle, resolution, id: id, version: version)
        let document = documents[handle]!
        let mine = document.buffer

        // Every copy settled is read first: its text is what is kept of it.
        var texts: [(SyncCopyFile, TextBuffer)] = []
        for copy in targets {
            let (text, _) = try await readSyncCopy(copy, encoding: document.encoding)
            texts.append((copy, text))
        }
        guard documents[handle] != nil else { throw .unknownDocument(handle) }

        var target: TextBuffer?
        switch resolution {
        case .mine:
            target = nil
        case .theirs:
            target = texts[0].1
        case .merge(let text?):
            target = TextBuffer(text)
        case .merge(nil):
            target = try await mergeWithCopy(handle, mine: mine, theirs: texts[0].1)
        }
        let steps: [AppliedEdit]
        if let target {
            steps = await runOnOwnThread { TextDiff.edits(from: mine, to: target) }
        } else {
            steps = []
        }
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        guard now.buffer.isIdentical(to: mine) else { throw .staleVersion(current: now.version, given: version ?? document.version) }

        // The copies go: kept as resolved versions, then removed (the tool spreads the removal).
        let settled = texts
        let removed = await runOnOwnThread { () -> [String] in
            settled.compactMap { copy, _ in SyncConflictNames.removeIfUnchanged(copy) ? copy.copy.name : nil }
        }
        for (copy, text) in settled where removed.contains(copy.copy.name) {
            keepResolvedVersion(of: now.path, text: text, origin: copy.copy.name)
        }
        // The copies' own ids are resolved (they are gone from beside the file; their texts come
        // back as kept versions of their own when written).
        reportVersions(of: now.path, resolved: settled.map(\.0).filter { removed.contains($0.copy.name) }.map(Self.versionID(of:)))
        let names = Set(settled.map(\.0.copy.name))
        var sent: [TextEdit] = []
        let journal = steps.isEmpty ? nil : JournalChange(history: .record, label: "Resolve Conflict", edits: steps)
        change(handle, reason: .conflictResolved, always: true, journal: journal) { document in
            sent = Self.applyStep(steps, to: &document, label: "Resolve Conflict", encoding: encoding)
            document.syncCopies.removeAll { names.contains($0.copy.name) }
            if document.syncCopies.isEmpty { document.state.remove(.syncConflict) }
        }
        if !steps.isEmpty { scheduleAutosave(handle) }
        // A copy that could not be removed (it changed since it was read) is found again.
        if removed.count != settled.count { scanSyncCopies(handle) }
        return (documents[handle]!.version, sent)
    }

    /// `mine` merged with a copy's text `theirs`, three ways against the kept version the copy
    /// descends from (see ``resolveSyncConflict(_:_:id:version:encoding:)``); `.mergeConflicts`
    /// when the sides overlap, or (empty bases) when no version is common to both.
    func mergeWithCopy(_ handle: String, mine: TextBuffer, theirs: TextBuffer) async throws(DocumentError) -> TextBuffer {
        let candidates = await mergeBaseCandidates(handle)
        let work = await runOnOwnThread { () -> Result<TextBuffer, DocumentError> in
            guard let base = Self.nearest(to: theirs, among: candidates) else {
                return .failure(.mergeConflicts(ThreeWayMerge.twoWayRegions(mine: mine.utf8Bytes(), theirs: theirs.utf8Bytes())))
            }
            switch ThreeWayMerge.merge(base: base.utf8Bytes(), mine: mine.utf8Bytes(), theirs: theirs.utf8Bytes()) {
            case .merged(let bytes): return .success(TextBuffer(utf8: bytes) ?? TextBuffer(String(decoding: bytes, as: UTF8.self)))
            case .conflicts(let regions): return .failure(.mergeConflicts(regions))
            }
        }
        switch work {
        case .success(let merged): return merged
        case .failure(let error): throw error
        }
    }

    /// The text a resolution against the copy `id` would give the document, without making it
    /// (the LSP mode proposes it to the editor, which owns the text, then settles the copy).
    public func syncResolutionText(_ handle: String, id: String, _ resolution: ConflictResolution) async throws(DocumentError) -> TextBuffer {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard let copy = syncCopy(handle, id: id) else { throw .unknownVersion(id) }
        let (theirs, _) = try await readSyncCopy(copy, encoding: document.encoding)
        switch resolution {
        case .mine: return document.buffer
        case .theirs: return theirs
        case .merge(let text?): return TextBuffer(text)
        case .merge(nil): return try await mergeWithCopy(handle, mine: document.buffer, theirs: theirs)
        }
    }

    /// The copies a resolution settles, after the checks: open, not coordinated, `version` current,
    /// copies to resolve, the one named among them.
    private func checkSyncResolvable(
        _ handle: String, _ resolution: ConflictResolution, id: String?, version: Int64?
    ) throws(DocumentError) -> [SyncCopyFile] {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        try refuseIfCoordinated(handle)
        if let version, version != document.version { throw .staleVersion(current: document.version, given: version) }
        if let id {
            guard let copy = syncCopy(handle, id: id) else { throw .unknownVersion(id) }
            return [copy]
        }
        guard !document.syncCopies.isEmpty else { throw .notInConflict(handle: handle) }
        if resolution == .mine || document.syncCopies.count == 1 { return document.syncCopies }
        throw .conflictCopyNotNamed(handle: handle, ids: document.syncCopies.map(Self.versionID(of:)))
    }

    /// The texts a copy may descend from: the document's kept saved versions (newest first, at most
    /// 20) and the text last synced with its file.
    private func mergeBaseCandidates(_ handle: String) async -> [TextBuffer] {
        guard let document = documents[handle] else { return [] }
        var candidates: [TextBuffer] = []
        if let versions {
            let path = document.path
            let read = await runOnOwnThread { () -> [TextBuffer] in
                versions.versions(of: path).filter { $0.kind == .saved }.prefix(20).compactMap { version in
                    (try? versions.read(version.id)).flatMap { TextBuffer(utf8: $0) }
                }
            }
            candidates.append(contentsOf: read)
        }
        candidates.append(document.syncedText)
        return candidates
    }

    /// The candidate nearest to `theirs` (fewest bytes in changed lines; the first of equals, so
    /// the newest), or nil when there is none, or when even the nearest shares no line with it
    /// (the copy is not an edit of any of them). Blocks: off the actor.
    static func nearest(to theirs: TextBuffer, among candidates: [TextBuffer]) -> TextBuffer? {
        let theirsBytes = theirs.utf8Bytes()
        var best: (TextBuffer, Int)?
        for candidate in candidates {
            let bytes = candidate.utf8Bytes()
            if bytes == theirsBytes { return candidate }
            let distance = ThreeWayMerge.twoWayRegions(mine: bytes, theirs: theirsBytes)
                .reduce(0) { $0 + $1.mine.utf8.count + $1.theirs.utf8.count }
            // Everything differs: no line in common.
            if distance >= bytes.count + theirsBytes.count { continue }
            if best == nil || distance < best!.1 { best = (candidate, distance) }
        }
        return best?.0
    }
}
