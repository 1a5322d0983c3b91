import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Names in directories: the one directory flush for a descriptor owned elsewhere, and the one
// rename that never replaces a file.

/// Flushes the entries of the open directory `directory`, a descriptor this layer does not own (a
/// caller's, or one a ``Descriptor`` or ``DurableReplacement`` owns); see
/// ``flushDirectory(at:relativeTo:)``. `path` names it in the error.
public func flushDirectory(_ directory: FileDescriptor, path: String? = nil) throws(SystemCallError) {
    _ = try retryingInterrupts("fsync", path: path) { fsync(directory.rawValue) }
}

/// Renames `from` (relative to `fromDirectory`, the working directory when nil) to `to` (relative
/// to `toDirectory`) without ever replacing a file there, retrying `EINTR`:
///
/// 1. `renameat2` with `RENAME_NOREPLACE`;
/// 2. where the file system lacks it (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`), a hard link (which fails
///    on an existing name) and the unlink of the old name; if that unlink fails, the new name is
///    unlinked again and the unlink's error thrown (call `unlinkat`, path `fromPath`);
/// 3. with `checkThenRename`, where the file system has no hard links either (`EPERM`,
///    `EOPNOTSUPP`, `EMLINK` from `linkat`), a check that nothing is at `to`, then a plain
///    `renameat`: the one case where a file created in between is replaced.
///
/// An existing `to` throws `EEXIST` with the call `renameat2` (whichever step found it) and the
/// path `toPath`; any other failure throws its call's errno, naming `toPath`.
public func renameNoReplace(
    _ from: String, in fromDirectory: FileDescriptor?, to: String, in toDirectory: FileDescriptor?,
    fromPath: String, toPath: String, checkThenRename: Bool
) throws(SystemCallError) {
    let fromFD = fromDirectory?.rawValue ?? AT_FDCWD
    let toFD = toDirectory?.rawValue ?? AT_FDCWD
    let exists = SystemCallError(errno: .fileExists, call: "renameat2", path: toPath)
    do {
        _ = try retryingInterrupts("renameat2", path: toPath) { cfs_renameat2(fromFD, from, toFD, to, 1 /* RENAME_NOREPLACE */) }
        return
    } catch {
        if error.errno == .fileExists { throw exists }
        guard error.errno == .invalidArgument || error.errno == .noFunction || error.errno == .notSupported else { throw error }
    }
    do throws(SystemCallError) {
        _ = try retryingInterrupts("linkat", path: toPath) { linkat(fromFD, from, toFD, to, 0) }
        do {
            _ = try retryingInterrupts("unlinkat", path: fromPath) { unlinkat(fromFD, from, 0) }
        } catch {
            unlinkat(toFD, to, 0)
            throw error
        }
        return
    } catch where error.call == "linkat" {
        if error.errno == .fileExists { throw exists }
        guard checkThenRename, error.errno == .notPermitted || error.errno == .notSupported || error.errno == .tooManyLinks else {
            throw error
        }
    }
    var status = stat()
    if fstatat(toFD, to, &status, AT_SYMLINK_NOFOLLOW) == 0 { throw exists }
    _ = try retryingInterrupts("renameat", path: toPath) { renameat(fromFD, from, toFD, to) }
}

/// The names in the directory at `path` (`opendir`/`readdir`), without `.` and `..`, in the order
/// the file system gives them.
public func listDirectory(_ path: String) throws(SystemCallError) -> [String] {
    guard let stream = opendir(path) else { throw SystemCallError(errno: Errno(rawValue: errno), call: "opendir", path: path) }
    defer { closedir(stream) }
    var names: [String] = []
    while let entry = readdir(stream) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
