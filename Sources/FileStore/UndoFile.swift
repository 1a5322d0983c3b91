import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// The kept undo histories (`initializationOptions.persistUndo`): one file per document path under
// `<state dir>/undo/` (0700), replaced whole and durably (a temp file, fsync, rename, the
// directory flushed) each time it is written. What the files hold is DocumentSession's
// (PersistedUndo.swift); this file knows only the directory, the names and the bytes.

/// The directory of kept undo histories (`<state dir>/undo`, mode 0700) and the file of each path.
///
/// A path's file is `<key>.undo`, the key being the journal's (``JournalDirectory/key(forPath:)``:
/// the XXH64 of the path in 16 hex digits). Two paths whose hashes collide share a file; the file
/// names its path, and the reader checks it.
public struct UndoDirectory: Sendable {
    public let path: String
    /// Files larger than this are not read (a history is bounded far below it).
    public static let maxFileSize = 1 << 30
    /// The prefix of the temp files a write makes beside the file it replaces.
    public static let tempPrefix = ".undo-tmp-"

    /// Opens (creating it and its parents, mode 0700) the undo directory under `stateDirectory`,
    /// and checks that a file can be made in it. Blocks: call it on a pooled thread.
    public static func open(stateDirectory: String) throws(FileSystemError) -> UndoDirectory {
        let path = (stateDirectory.hasSuffix("/") ? stateDirectory : stateDirectory + "/") + "undo"
        try makePrivateDirectory(path, purpose: "the undo directory")
        return UndoDirectory(path: path)
    }

    /// The file name of `documentPath`'s history.
    public static func name(forPath documentPath: String) -> String {
        JournalDirectory.key(forPath: documentPath) + ".undo"
    }

    /// The full path of `documentPath`'s history file.
    public func file(forPath documentPath: String) -> String { path + "/" + Self.name(forPath: documentPath) }

    /// The bytes of `documentPath`'s history file; nil when there is none, or it is not a regular
    /// file, or larger than ``maxFileSize``, or cannot be read.
    public func read(forPath documentPath: String) -> [UInt8]? {
        let file = file(forPath: documentPath)
        guard let descriptor = try? Descriptor.open(file, .readOnly, options: [.noFollow]) else { return nil }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) <= Self.maxFileSize
        else { return nil }
        return try? readToEnd(from: descriptor.unowned, path: file)
    }

    /// Replaces `documentPath`'s history file by `bytes`, durably: a crash leaves the old file or
    /// the new one, never a part. Blocks.
    public func write(_ bytes: [UInt8], forPath documentPath: String) throws(FileSystemError) {
        do throws(SystemCallError) {
            let replacement = try DurableReplacement(in: path, tempPrefix: Self.tempPrefix, permissions: [.ownerReadWrite])
            try replacement.write(bytes)
            _ = try replacement.commit(as: Self.name(forPath: documentPath), replace: true)
        } catch {
            throw FileSystemError(error, reason: "writing the undo history of \(documentPath)")
        }
    }

    /// Deletes `documentPath`'s history file, if there is one. Blocks.
    public func remove(forPath documentPath: String) {
        try? removeFile(file(forPath: documentPath))
    }
}

/// Makes the directory `path` and its missing parents (mode 0700), sets `path` itself to 0700, and
/// checks with a probe file, made and removed at once, that a file can be made in it (access(2)
/// would not see a read-only mount's EROFS for every case, nor a full disk's quota). `purpose` names
/// the directory in errors.
func makePrivateDirectory(_ path: String, purpose: String) throws(FileSystemError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        prefix += "/" + component
        if mkdir(prefix, 0o700) != 0, errno != EEXIST {
            throw FileSystemError(errno: errno, syscall: "mkdir", path: prefix, reason: "creating \(purpose) \(path)")
        }
    }
    _ = chmod(path, 0o700)
    let probe = path + "/.probe-\(UInt64.random(in: 0...UInt64.max))"
    do throws(SystemCallError) {
        let descriptor = try Descriptor.open(probe, .writeOnly, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
        try? removeFile(probe)
        try descriptor.close()
    } catch {
        throw FileSystemError(error, path: path, reason: "\(purpose) cannot be written")
    }
}
