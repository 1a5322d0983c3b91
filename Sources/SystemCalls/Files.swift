#if canImport(Glibc)
    import Glibc
#endif

/// The status of the file at `path` (`stat`, or `lstat` without `followingSymlinks`: the link
/// itself), retrying `EINTR`.
public func fileStatus(_ path: String, followingSymlinks: Bool = true) throws(SystemCallError) -> stat {
    var status = stat()
    if followingSymlinks {
        _ = try retryingInterrupts("stat", path: path) { stat(path, &status) }
    } else {
        _ = try retryingInterrupts("lstat", path: path) { lstat(path, &status) }
    }
    return status
}

/// Removes the name `path` (`unlink`; not a directory), retrying `EINTR`.
public func removeFile(_ path: String) throws(SystemCallError) {
    _ = try retryingInterrupts("unlink", path: path) { unlink(path) }
}
