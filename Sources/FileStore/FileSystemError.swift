import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// A failed file-system call, with everything a user needs to act on it: which call failed, on which
/// path, the errno by name and number, a sentence, whether trying again can help, and what to try.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The errno's symbolic name, such as `ENOSPC`.
    public var code: String
    /// The errno's number.
    public var errno: Int32
    /// The system call that failed, such as `openat` or `fsync`.
    public var syscall: String
    /// The path the call was about.
    public var path: String
    /// A sentence describing the failure.
    public var message: String
    /// Whether the same operation may succeed later without a change of plan (a full disk, say).
    public var recoverable: Bool
    /// What the user can do: `retry`, `saveAs`, `checkPermissions`, `freeSpace`, ...
    public var suggestions: [String]
    /// For a file refused for its size (EFBIG, ``FileSizeLimit``): its size and the limit, in bytes.
    public var size: Int64? = nil
    public var limit: Int64? = nil

    /// Whether this is the refusal of a file over ``FileSizeLimit``.
    public var isTooLarge: Bool { errno == EFBIG && size != nil && limit != nil }

    /// The error for `errno` from `syscall` on `path`.
    public init(errno number: Int32, syscall: String, path: String, reason extra: String? = nil) {
        self.errno = number
        self.syscall = syscall
        self.path = path
        code = Self.names[number] ?? "E\(number)"
        let reason = String(cString: strerror(number))
        message = "\(syscall) failed for \(path): \(reason) (\(code))" + (extra.map { ": \($0)" } ?? "")
        (recoverable, suggestions) = Self.advice(number)
    }

    /// The error for a failed call of the system-call layer, reported for `path` (the layer's own
    /// path, or none, when nil).
    public init(_ error: SystemCallError, path: String? = nil, reason extra: String? = nil) {
        self.init(errno: error.errno.rawValue, syscall: error.call, path: path ?? error.path ?? "", reason: extra)
    }

    public var description: String { message }

    private static func advice(_ number: Int32) -> (Bool, [String]) {
        switch number {
        case ENOSPC, EDQUOT: return (true, ["freeSpace", "retry", "saveAs"])
        case EIO: return (true, ["retry", "saveAs"])
        case EINTR, EAGAIN, EBUSY, ETXTBSY: return (true, ["retry"])
        case EACCES, EPERM: return (false, ["checkPermissions", "saveAs"])
        case EROFS: return (false, ["saveAs"])
        case ENOENT, ENOTDIR: return (false, ["checkPath"])
        case EISDIR: return (false, ["checkPath"])
        case EFBIG: return (false, ["saveAs"])
        case ELOOP: return (false, ["checkPath"])
        case ENAMETOOLONG: return (false, ["checkPath"])
        case EMFILE, ENFILE, ENOMEM: return (true, ["retry"])
        default: return (false, [])
        }
    }

    private static let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO", EBADF: "EBADF",
        EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY",
        EEXIST: "EEXIST", EXDEV: "EXDEV", ENODEV: "ENODEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR",
        EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", ETXTBSY: "ETXTBSY", EFBIG: "EFBIG",
        ENOSPC: "ENOSPC", ESPIPE: "ESPIPE", EROFS: "EROFS", EMLINK: "EMLINK", EPIPE: "EPIPE",
        ENAMETOOLONG: "ENAMETOOLONG", ENOTEMPTY: "ENOTEMPTY", ELOOP: "ELOOP", EDQUOT: "EDQUOT",
        ENOTSUP: "ENOTSUP", ESTALE: "ESTALE", ECANCELED: "ECANCELED",
    ]
}
