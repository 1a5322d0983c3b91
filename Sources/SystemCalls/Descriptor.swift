import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// An open file descriptor that this value owns: it is closed exactly once, by construction.
///
/// The value cannot be copied, so there is one owner. Letting it go closes the descriptor
/// (`deinit`, ignoring the result); ``close()`` closes it and reports the error; ``take()`` hands
/// the raw number out and gives up ownership. After either, the compiler allows no further use.
///
/// `close` is never retried after `EINTR`: on Linux the descriptor is released whatever `close`
/// answers, and a retry could close a number another thread has just been given.
///
/// It is `Sendable`: a descriptor number means the same in every thread, and a class that keeps one
/// for its life (the recorder's file, the log file) may be shared.
public struct Descriptor: ~Copyable, Sendable {
    /// The descriptor as swift-system's (unowned) handle, for the calls made through it. Do not close
    /// it through this handle.
    public let unowned: FileDescriptor

    /// Takes ownership of `descriptor`.
    public init(owning descriptor: FileDescriptor) { unowned = descriptor }

    /// Takes ownership of the raw descriptor `rawValue` (one returned by a call this layer does not
    /// wrap yet).
    public init(owningRawValue rawValue: Int32) { unowned = FileDescriptor(rawValue: rawValue) }

    deinit { _ = try? unowned.close() }

    /// The raw number, for a call made while this value is borrowed.
    public var rawValue: Int32 { unowned.rawValue }

    /// Closes the descriptor and reports the error (the descriptor is released either way).
    public consuming func close() throws(SystemCallError) {
        let descriptor = unowned
        discard self
        do {
            try descriptor.close()
        } catch let error as Errno {
            throw SystemCallError(errno: error, call: "close")
        } catch {
            throw SystemCallError(errno: .ioError, call: "close")
        }
    }

    /// Hands the raw descriptor out; the caller owns it from here and must close it. For the few
    /// places whose descriptor is owned elsewhere after this: `fdopendir` (the `DIR` stream closes
    /// it, so take the number only once the stream exists), the protocol's output kept for the
    /// process's life, a child process's file actions.
    public consuming func take() -> Int32 {
        let descriptor = unowned
        discard self
        return descriptor.rawValue
    }

    /// Opens `path` (relative to `base`, the working directory when nil), retrying `EINTR`.
    /// `O_CLOEXEC` is always added.
    public static func open(
        _ path: String,
        _ mode: FileDescriptor.AccessMode,
        options: FileDescriptor.OpenOptions = [],
        permissions: FilePermissions? = nil,
        relativeTo base: FileDescriptor? = nil
    ) throws(SystemCallError) -> Descriptor {
        let flags = mode.rawValue | options.union(.closeOnExec).rawValue
        let mode = permissions?.rawValue ?? 0
        let raw = try retryingInterrupts(base == nil ? "open" : "openat", path: path) {
            openat(base?.rawValue ?? AT_FDCWD, path, flags, mode)
        }
        return Descriptor(owningRawValue: raw)
    }

    /// Flushes the file's data and metadata (`fsync`), retrying `EINTR`. A failure is not worth
    /// retrying otherwise: Linux may have dropped the dirty pages already. `path` names the file in
    /// the error.
    public func sync(path: String? = nil) throws(SystemCallError) {
        _ = try retryingInterrupts("fsync", path: path) { fsync(unowned.rawValue) }
    }
}

/// Flushes the entries of the directory at `path` (opened `O_RDONLY | O_DIRECTORY`, relative to
/// `base` when given), so that a creation, rename or unlink in it survives a power loss.
///
/// Throws what `open` or `fsync` answers, naming `path`: not a directory (`ENOTDIR`), missing
/// (`ENOENT`), or a file system that cannot flush directories (`EINVAL`, `EROFS`). Whether a failure
/// matters is the caller's: the change was made either way, only its durability is in question
/// (the save reports it as `durable: false`, the other callers ignore it).
public func flushDirectory(at path: String, relativeTo base: FileDescriptor? = nil) throws(SystemCallError) {
    let directory = try Descriptor.open(path, .readOnly, options: .directory, relativeTo: base)
    try flushDirectory(directory, path: path)
}

/// Flushes the entries of the open directory `descriptor` (see ``flushDirectory(at:relativeTo:)``);
/// `path` names it in the error.
public func flushDirectory(_ descriptor: borrowing Descriptor, path: String? = nil) throws(SystemCallError) {
    try descriptor.sync(path: path)
}
