import CFileSystem
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Reading one entry of a package (a directory that is one document) without ever leaving it:
/// the relative path is resolved beneath the package's directory with `openat2`
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`), so a symbolic link inside the
/// package (to `/etc/passwd`, or out of the sandbox roots) is refused rather than followed.
public enum EntryReading {
    /// Why a relative path cannot name an entry of a package, or nil when it can: not empty, not
    /// absolute, no empty, `.` or `..` component, no NUL byte, at most 4,096 bytes.
    public static func pathProblem(_ relativePath: String) -> String? {
        if relativePath.isEmpty { return "empty" }
        if relativePath.utf8.count > 4096 { return "longer than 4096 bytes" }
        if relativePath.utf8.contains(0) { return "contains a NUL byte" }
        if relativePath.hasPrefix("/") { return "absolute: entry paths are relative to the package" }
        for component in relativePath.split(separator: "/", omittingEmptySubsequences: false) {
            if component.isEmpty { return "has an empty component (a doubled or trailing \"/\")" }
            if component == "." || component == ".." { return "has a \"\(component)\" component" }
        }
        return nil
    }

    /// The bytes of the regular file at `relativePath` inside the package at `packagePath`, at most
    /// `limit` of them (a larger file throws `EFBIG`, naming the path).
    ///
    /// Throws `ELOOP` (or `EXDEV`) for a path through a symbolic link, `EISDIR`-like `EINVAL` for
    /// something other than a regular file, and whatever `openat2`, `fstat` and `read` answer.
    /// Kernels without `openat2` (before 5.6) fall back to `openat` with `O_NOFOLLOW`, which refuses
    /// a symbolic link as the last component; the path was checked by ``pathProblem(_:)`` to hold no
    /// `..`, so only a link in an intermediate directory of the package could be followed there.
    public static func read(packagePath: String, relativePath: String, limit: Int) throws(FileSystemError) -> [UInt8] {
        let fullPath = PackageSave.join(packagePath, relativePath)
        if let problem = pathProblem(relativePath) {
            throw FileSystemError(errno: EINVAL, syscall: "openat2", path: fullPath, reason: "the entry path is \(problem)")
        }
        let directory: Descriptor
        do throws(SystemCallError) {
            directory = try Descriptor.open(packagePath, .readOnly, options: [.directory, .noFollow])
        } catch {
            throw FileSystemError(error, path: packagePath)
        }
        let resolve = UInt64(CFS_RESOLVE_BENEATH | CFS_RESOLVE_NO_SYMLINKS | CFS_RESOLVE_NO_MAGICLINKS)
        var raw = cfs_openat2(directory.rawValue, relativePath, O_RDONLY | O_NOFOLLOW, 0, resolve)
        if raw < 0 && (errno == ENOSYS || errno == EPERM) {
            raw = openat(directory.rawValue, relativePath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard raw >= 0 else {
            let number = errno
            throw FileSystemError(
                errno: number, syscall: "openat2", path: fullPath,
                reason: number == ELOOP || number == EXDEV ? "the path goes through a symbolic link, which is never followed inside a package" : nil)
        }
        let file = Descriptor(owningRawValue: raw)
        var status = stat()
        guard fstat(file.rawValue, &status) == 0 else {
            throw FileSystemError(errno: errno, syscall: "fstat", path: fullPath)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw FileSystemError(errno: EINVAL, syscall: "fstat", path: fullPath, reason: "not a regular file")
        }
        // The entry's own limit, or the server's file-size limit when lower (issue 34.8).
        if let refusal = FileSizeLimit.refusal(size: Int(status.st_size), path: fullPath, limit: min(limit, FileSizeLimit.bytes)) {
            throw refusal
        }
        do throws(SystemCallError) {
            let bytes = try readToEnd(from: file.unowned, path: fullPath)
            guard bytes.count <= limit else {
                throw SystemCallError(errno: .fileTooLarge, call: "read", path: fullPath)
            }
            return bytes
        } catch {
            throw FileSystemError(error, path: fullPath)
        }
    }
}
