import FileStore
import TextBuffer

// The document's earlier versions (``VersionStore``): keeping them off the actor, listing, reading
// and restoring them.
extension DocumentStore {
    /// Keeps `text` as a version of the document at `path`, off the actor at a low priority (see
    /// ``VersionWriteQueue``: a newer version of the same file replaces one not yet written).
    func keepVersion(of path: String, kind: VersionStore.Kind, text: TextBuffer) {
        // Too large to keep: not even started (the store would stop at its limit anyway).
        guard let versions, text.utf8Count <= min(versions.maxVersionSize, versions.byteLimit) else { return }
        versionWrites?.keep(text, of: path, kind: kind)
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
}
