import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A failed system call: its errno, the call's name and the path it was about (when there is one).
///
/// Its description reads `open("/x/y"): No such file or directory (ENOENT)`, or without a path
/// `pthread_create: Resource temporarily unavailable (EAGAIN)`.
public struct SystemCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error number, as swift-system names it.
    public let errno: Errno
    /// The call that failed, such as `open` or `fsync`.
    public let call: String
    /// The path the call was about; nil for a call on a descriptor alone or on no file.
    public let path: String?

    public init(errno: Errno, call: String, path: String? = nil) {
        self.errno = errno
        self.call = call
        self.path = path
    }

    /// The error for the calling thread's current `errno` (read at once, before any other call).
    public static func current(_ call: String, path: String? = nil) -> SystemCallError {
        SystemCallError(errno: Errno(rawValue: Glibc.errno), call: call, path: path)
    }

    /// The errno's symbolic name (`ENOENT`), or `E` and its number when glibc has none.
    public var errnoName: String {
        cfs_errno_name(errno.rawValue).map { String(cString: $0) } ?? "E\(errno.rawValue)"
    }

    public var description: String {
        let subject = path.map { "\(call)(\"\($0)\")" } ?? call
        return "\(subject): \(errno.description) (\(errnoName))"
    }
}

/// Calls `body` until it answers something other than -1 with `EINTR`; -1 with another errno
/// becomes a ``SystemCallError`` for `call` and `path`. For the calls swift-system does not wrap.
@inlinable
public func retryingInterrupts<Result: FixedWidthInteger>(
    _ call: String, path: String? = nil, _ body: () -> Result
) throws(SystemCallError) -> Result {
    while true {
        let result = body()
        if result != -1 { return result }
        let number = Glibc.errno
        if number != EINTR { throw SystemCallError(errno: Errno(rawValue: number), call: call, path: path) }
    }
}
