import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Snapshots of a session for a handoff to another server (`session/snapshot`, `session/restore`):
// `<state dir>/sessions/<token>/`, mode 0700, holding `manifest.json` (what the server wrote: the
// open documents and their client states) and a copy of each unsaved document's journal
// (`<n>.journal`). A snapshot is written under a hidden name and renamed to its token when whole,
// so that a crash leaves it whole or absent; it stays until it is restored or discarded.

/// The directory of a state directory's session snapshots.
public struct SnapshotDirectory: Sendable {
    public let path: String

    /// The file of a snapshot that the server writes and reads back as it likes.
    public static let manifestName = "manifest.json"
    /// The largest manifest read back (a manifest holds client states, each at most 1 MiB).
    public static let maxManifestSize = 256 << 20

    /// Opens (creating it and its parents, mode 0700) `<stateDirectory>/sessions`, and checks that a
    /// file can be made in it. Blocks.
    public static func open(stateDirectory: String) throws(FileSystemError) -> SnapshotDirectory {
        let path = (stateDirectory.hasSuffix("/") ? stateDirectory : stateDirectory + "/") + "sessions"
        try makePrivateDirectory(path, purpose: "the session snapshots' directory")
        return SnapshotDirectory(path: path)
    }

    /// A new token: 32 random hexadecimal digits.
    public static func newToken() -> String {
        (0..<2).map { _ in
            let hex = String(UInt64.random(in: 0...UInt64.max), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// Whether `token` has a token's form (32 lowercase hexadecimal digits): anything else could
    /// name another file.
    public static func isToken(_ token: String) -> Bool {
        token.utf8.count == 32 && token.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The directory of the snapshot `token`.
    public func path(of token: String) -> String { path + "/" + token }

    /// Writes the snapshot `token`: its manifest and journal copies, each flushed, then the
    /// directory renamed into place and the parent flushed. A failure removes what was written and
    /// throws. Blocks.
    public func write(token: String, manifest: [UInt8], journals: [(name: String, bytes: [UInt8])]) throws(FileSystemError) {
        precondition(Self.isToken(token))
        let partial = path + "/.partial-" + token
        do throws(SystemCallError) {
            guard mkdir(partial, 0o700) == 0 else { throw SystemCallError(errno: Errno(rawValue: errno), call: "mkdir", path: partial) }
            do throws(SystemCallError) {
                for (name, bytes) in journals + [(Self.manifestName, manifest)] {
                    let file = partial + "/" + name
                    let descriptor = try Descriptor.open(
                        file, .writeOnly, options: [.create, .exclusiveCreate, .noFollow], permissions: [.ownerReadWrite])
                    try writeAll(bytes, to: descriptor.unowned, path: file)
                    try descriptor.syncData(path: file)
                    try descriptor.close()
                }
                try flushDirectory(at: partial)
                try renameFile(partial, to: path(of: token))
                try flushDirectory(at: path)
            } catch {
                Self.removeTree(partial)
                throw error
            }
        } catch {
            throw FileSystemError(error, reason: "writing the session snapshot \(token)")
        }
    }

    /// The manifest of the snapshot `token`; nil when there is no such snapshot. Blocks.
    public func readManifest(token: String) throws(FileSystemError) -> [UInt8]? {
        guard Self.isToken(token) else { return nil }
        let file = path(of: token) + "/" + Self.manifestName
        do throws(SystemCallError) {
            let descriptor: Descriptor
            do throws(SystemCallError) {
                descriptor = try Descriptor.open(file, .readOnly, options: [.noFollow])
            } catch where error.errno == .noSuchFileOrDirectory {
                return nil
            }
            var status = stat()
            guard fstat(descriptor.rawValue, &status) == 0 else { throw SystemCallError(errno: Errno(rawValue: errno), call: "fstat", path: file) }
            guard status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) <= Self.maxManifestSize else {
                throw SystemCallError(errno: .invalidArgument, call: "fstat", path: file)
            }
            return try readToEnd(from: descriptor.unowned, path: file)
        } catch {
            throw FileSystemError(error, reason: "reading the session snapshot \(token)")
        }
    }

    /// Moves the journal copy `name` of the snapshot `token` into `journals` under `newName`, its
    /// modification time set to now (the newest journal of its file is the one offered). Blocks.
    public func moveJournal(token: String, name: String, into journals: JournalDirectory, as newName: String) throws(FileSystemError) {
        let source = path(of: token) + "/" + name
        let destination = journals.path(of: newName)
        do throws(SystemCallError) {
            guard Self.isJournalName(name) else { throw SystemCallError(errno: .invalidArgument, call: "rename", path: source) }
            try renameNoReplace(
                source, in: nil, to: destination, in: nil, fromPath: source, toPath: destination, checkThenRename: false)
            guard utimensat(AT_FDCWD, destination, nil, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw SystemCallError(errno: Errno(rawValue: errno), call: "utimensat", path: destination)
            }
            try flushDirectory(at: journals.path)
        } catch {
            throw FileSystemError(error, reason: "moving the session snapshot's journal into the journal directory")
        }
    }

    /// Whether `name` is a journal copy's name as ``write(token:manifest:journals:)`` is given them
    /// (`<digits>.journal`): a manifest naming anything else is not followed.
    public static func isJournalName(_ name: String) -> Bool {
        // `N.journal`, a text document's; `N.pjournal`, a package's.
        let suffix = name.hasSuffix(".pjournal") ? 9 : name.hasSuffix(".journal") ? 8 : 0
        guard suffix > 0 else { return false }
        let stem = name.utf8.dropLast(suffix)
        return !stem.isEmpty && stem.count <= 12 && stem.allSatisfy { (48...57).contains($0) }
    }

    /// Removes the snapshot `token` (its files, then its directory); false when there was none.
    /// Blocks.
    @discardableResult
    public func remove(token: String) -> Bool {
        guard Self.isToken(token) else { return false }
        let directory = path(of: token)
        guard FileIdentity.current(path: directory) != nil else { return false }
        Self.removeTree(directory)
        try? flushDirectory(at: path)
        return true
    }

    /// The tokens of the snapshots kept, oldest first, with their dates (nanoseconds since 1970).
    public func tokens() -> [(token: String, date: Int64)] {
        let names = ((try? DocumentNaming.entryNames(in: path)) ?? []).map { String(decoding: $0, as: UTF8.self) }
        return names.filter(Self.isToken).compactMap { token in
            guard let identity = FileIdentity.current(path: path(of: token)) else { return nil }
            return (token, identity.modificationTime)
        }.sorted { $0.date < $1.date }
    }

    /// Removes a snapshot's directory: its plain files, then itself (a snapshot holds nothing else).
    private static func removeTree(_ directory: String) {
        for name in (try? DocumentNaming.entryNames(in: directory)) ?? [] where name != [46] && name != [46, 46] {
            unlinkat(AT_FDCWD, directory + "/" + String(decoding: name, as: UTF8.self), 0)
        }
        rmdir(directory)
    }
}
