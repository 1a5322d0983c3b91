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

/// Renames `source` to `destination` (`rename`, replacing a file there), retrying `EINTR`; the
/// error names `source`.
public func renameFile(_ source: String, to destination: String) throws(SystemCallError) {
    _ = try retryingInterrupts("rename", path: source) { rename(source, destination) }
}

/// Creates a new directory, mode 0700, named `prefix` and six random characters (`mkdtemp` of
/// `prefix` + `XXXXXX`), and answers its path. The error names the template.
public func makeTemporaryDirectory(prefix: String) throws(SystemCallError) -> String {
    let template = prefix + "XXXXXX"
    var bytes = Array(template.utf8CString)
    let made = bytes.withUnsafeMutableBufferPointer { buffer -> Result<String, SystemCallError> in
        guard let path = mkdtemp(buffer.baseAddress!) else { return .failure(.current("mkdtemp", path: template)) }
        return .success(String(cString: path))
    }
    return try made.get()
}

/// The target of the symbolic link `path` (`readlink`). Linux keeps a target of at most
/// `PATH_MAX` - 1 bytes, so one buffer of `PATH_MAX` holds any.
public func readLink(_ path: String) throws(SystemCallError) -> String {
    let capacity = Int(PATH_MAX)
    var buffer = [UInt8](repeating: 0, count: capacity)
    let length = try buffer.withUnsafeMutableBytes { bytes in
        Result { () throws(SystemCallError) in
            try retryingInterrupts("readlink", path: path) {
                readlink(path, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), capacity)
            }
        }
    }.get()
    return String(decoding: buffer[..<length], as: UTF8.self)
}

/// The current working directory (`getcwd`).
public func currentDirectory() throws(SystemCallError) -> String {
    guard let path = getcwd(nil, 0) else { throw SystemCallError.current("getcwd") }
    defer { free(path) }
    return String(cString: path)
}
