#if canImport(Glibc)
    import Glibc
#endif

/// What kind of file a path names, for the requests that act on regular files only (delete, move,
/// copies): the server asks here rather than calling `lstat` or `stat` itself.
public enum FileKind: Sendable, Equatable {
    case regular
    case directory
    case symbolicLink
    /// A device, a FIFO, a socket.
    case special

    /// The kind of the file at `path`: of a symbolic link itself, or with `followingLinks` of what
    /// it leads to. A failure is reported for `reportedAs` (the path the request named, when
    /// `path` is another name of it, as `/proc/self/fd/N/name` under sandbox roots).
    public static func of(_ path: String, followingLinks: Bool, reportedAs: String? = nil) throws(FileSystemError) -> FileKind {
        var status = stat()
        let result = followingLinks ? stat(path, &status) : lstat(path, &status)
        guard result == 0 else {
            throw FileSystemError(errno: errno, syscall: followingLinks ? "stat" : "lstat", path: reportedAs ?? path)
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .special
        }
    }
}
