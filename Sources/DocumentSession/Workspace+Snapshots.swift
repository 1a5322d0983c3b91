import FileStore

// The session snapshots' files, for the server (`session/snapshot`, `session/restore`,
// `session/discardSnapshot`): each on a pooled thread (FileStore/SessionSnapshot.swift).

extension Workspace {
    /// Opens (creating it, mode 0700) `<directory>/sessions`. Called once, at start, before the
    /// server serves: on the caller's thread.
    public static func openSnapshots(inStateDirectory directory: String) throws(FileSystemError) -> SnapshotDirectory {
        try SnapshotDirectory.open(stateDirectory: directory)
    }

    /// Writes the snapshot `token` (whole or not at all).
    public static func writeSnapshot(
        _ snapshots: SnapshotDirectory, token: String, manifest: [UInt8], journals: [(name: String, bytes: [UInt8])]
    ) async throws(FileSystemError) {
        try await runOnOwnThread { () -> Result<Void, FileSystemError> in
            do throws(FileSystemError) {
                try snapshots.write(token: token, manifest: manifest, journals: journals)
                return .success(())
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// The manifest of the snapshot `token`, nil when there is none.
    public static func readSnapshot(_ snapshots: SnapshotDirectory, token: String) async throws(FileSystemError) -> [UInt8]? {
        try await runOnOwnThread { () -> Result<[UInt8]?, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try snapshots.readManifest(token: token))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Removes the snapshot `token` and what is left in it; false when there was none.
    @discardableResult
    public static func removeSnapshot(_ snapshots: SnapshotDirectory, token: String) async -> Bool {
        await runOnOwnThread { snapshots.remove(token: token) }
    }
}
