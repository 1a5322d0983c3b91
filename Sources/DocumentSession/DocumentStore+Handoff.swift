import FileStore
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

// The store's part of a handoff to another server (`session/snapshot`, `session/restore`; the
// snapshot's files: FileStore/SessionSnapshot.swift): a copy of each unsaved document's journal for
// the snapshot, and, in the server that restores it, the copy moved into the journal directory,
// where the open of its file finds it as a dead server's journal and offers it.

extension DocumentStore {
    /// The open documents' handles, in the order they were opened.
    public var handles: [String] {
        documents.values.map(\.handle).sorted { (Int($0.dropFirst()) ?? 0, $0) < (Int($1.dropFirst()) ?? 0, $1) }
    }

    /// The document's unsaved work as a journal's bytes, for a snapshot: nil when the document is
    /// in sync with its file (nothing to carry). Its journal as written so far (every change before
    /// this call included: the writer reads it back in order, at once), which keeps the undo
    /// history; when it has none (the server journals nothing, or its journal could not be written),
    /// a journal made here of the synced text and the current one, without the history.
    public func journalCopy(_ handle: String) async throws(DocumentError) -> [UInt8]? {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard document.hasUnsavedChanges || document.deletedOnDisk || document.state.contains(.inConflict) else { return nil }
        if let writer = journal, journals[handle] != nil {
            if let bytes = await writer.copy(of: handle) { return bytes }
        }
        // Read again: the flush let other work run.
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        let header = JournalHeader(
            path: now.path, created: Self.now(), encoding: now.encoding, byteOrderMark: now.hasByteOrderMark,
            lineEnding: now.lineEnding, identity: now.identity, deletedOnDisk: now.deletedOnDisk, version: now.version)
        let base = now.syncedText, text = now.buffer, version = now.version, unsaved = now.hasUnsavedChanges
        return await runOnOwnThread { JournalCodec.whole(header: header, base: base, text: text, version: version, unsaved: unsaved) }
    }

    /// Whether a snapshot's journal can be placed here (this store journals).
    public var canPlaceJournals: Bool { journalDirectory != nil && journal != nil }

    /// Moves the journal copy `name` of the snapshot `token` into the journal directory as a dead
    /// server's journal of `path` (the newest of that file's), for the next open of `path` to
    /// offer. Answers the name it took there.
    public func placeSnapshotJournal(
        _ snapshots: SnapshotDirectory, token: String, name: String, forPath path: String
    ) async throws(FileSystemError) -> String {
        try await Self.placeSnapshotJournal(snapshots, token: token, name: name, in: journalDirectory, forPath: path, package: false)
    }

    /// Moves a snapshot's journal copy into `directory` under a new name for `path` (a text
    /// document's, or with `package` a package's), off the loop. Answers the name.
    static func placeSnapshotJournal(
        _ snapshots: SnapshotDirectory, token: String, name: String, in directory: JournalDirectory?, forPath path: String, package: Bool
    ) async throws(FileSystemError) -> String {
        guard let directory else {
            throw FileSystemError(errno: ENOTSUP, syscall: "rename", path: path, reason: "this server journals nothing")
        }
        let newName = JournalDirectory.newName(forPath: path, package: package)
        try await runOnOwnThread { () -> Result<Void, FileSystemError> in
            do throws(FileSystemError) {
                try snapshots.moveJournal(token: token, name: name, into: directory, as: newName)
                return .success(())
            } catch {
                return .failure(error)
            }
        }.get()
        return newName
    }

    /// The name of the dead server's journal offered for the document, if any.
    public func recoveryOfferName(_ handle: String) -> String? { recoveries[handle]?.claimed.name }
}
