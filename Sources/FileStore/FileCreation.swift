import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Creating a new file without ever replacing one that exists.
public enum FileCreation {
    /// Creates `path` exclusively (`O_CREAT | O_EXCL`: a file that appears at the same moment is
    /// never overwritten), writes `bytes`, flushes them (`fsync`) and the directory entry, and
    /// answers the new file's identity. The mode is 0666 less the umask, as any new file. On a
    /// failure after creation the partial file is removed.
    public static func createNew(path: String, bytes: [UInt8]) throws(FileSystemError) -> FileIdentity {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o666)
        guard fd >= 0 else { throw FileSystemError(errno: errno, syscall: "open", path: path) }
        var closed = false
        func fail(_ syscall: String, _ number: Int32) -> FileSystemError {
            if !closed { close(fd) }
            unlink(path)
            return FileSystemError(errno: number, syscall: syscall, path: path)
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw fail("write", errno)
            }
            offset += written
        }
        guard fsync(fd) == 0 else { throw fail("fsync", errno) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw fail("fstat", errno) }
        closed = true
        guard close(fd) == 0 else { throw fail("close", errno) }
        // Make the new directory entry durable too; a failure here leaves a whole file in place.
        let directory = parentDirectory(of: path)
        try? flushDirectory(at: directory)
        return FileIdentity(status)
    }

    /// The directory part of an absolute path (`/` for a file at the root).
    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }
}
