import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Deleting a document's file.
public enum FileRemoval {
    /// Unlinks the regular file at `entry` and flushes its directory (best effort: the file is gone
    /// either way). Errors are reported for `path` (the path the client named, where `entry` is
    /// the one resolved beneath a sandbox root). Refuses anything but a regular file (`EINVAL`),
    /// without following a symbolic link. Blocks.
    public static func unlinkRegularFile(_ entry: String, reportedAs path: String) throws(FileSystemError) {
        let status: stat
        do {
            status = try fileStatus(entry, followingSymlinks: false)
        } catch {
            throw FileSystemError(error, path: path)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw FileSystemError(errno: EINVAL, syscall: "lstat", path: path, reason: "not a regular file; only regular files are deleted")
        }
        do {
            try removeFile(entry)
        } catch {
            throw FileSystemError(error, path: path)
        }
        try? flushDirectory(at: directory(of: entry))
    }

    /// The directory holding `path`: `/` for a file at the root, `.` for a bare name.
    static func directory(of path: String) -> String {
        path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
    }
}
