import SystemCalls
import SystemPackage

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
        let file: Descriptor
        do {
            file = try Descriptor.open(path, .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                       permissions: FilePermissions(rawValue: 0o666))
        } catch {
            throw FileSystemError(error)
        }
        var status = stat()
        do {
            try writeAll(bytes, to: file.unowned, path: path)
            try file.sync(path: path)
            let fd = file.rawValue
            _ = try retryingInterrupts("fstat", path: path) { fstat(fd, &status) }
        } catch {
            unlink(path)  // the partial file goes (closed at the end of this scope)
            throw FileSystemError(error, path: path)
        }
        do {
            try file.close()
        } catch {
            unlink(path)
            throw FileSystemError(error, path: path)
        }
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
