import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// An eventfd (`EFD_NONBLOCK | EFD_CLOEXEC`, its count starting at 0), owned: how one thread wakes
/// another that waits in `poll` for it to become readable (`POLLIN`). ``notify()`` adds one to the
/// count, ``reset()`` reads it back to 0. The descriptor is closed when the value goes.
///
/// Both calls are inlinable and allocate nothing: the loop's wake-up (`LoopExecutor`) is on the
/// path of every request answered from another thread.
public struct EventDescriptor: ~Copyable, Sendable {
    /// The owned eventfd; poll its ``Descriptor/unowned`` handle. Do not close it.
    public let descriptor: Descriptor

    /// Creates the eventfd (`eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`); throws what it answers
    /// (`EMFILE`, `ENFILE`, `ENOMEM`), naming `eventfd`.
    public init() throws(SystemCallError) {
        descriptor = Descriptor(owningRawValue: try retryingInterrupts("eventfd") { cfs_eventfd_nonblocking() })
    }

    /// Adds one to the count (an 8-byte `write`), retrying `EINTR`, which makes the descriptor
    /// readable until ``reset()``. Throws `EAGAIN` only if the count would pass 2^64 - 2.
    @inlinable
    public func notify() throws(SystemCallError) {
        let raw = descriptor.unowned.rawValue
        var one: UInt64 = 1
        _ = try retryingInterrupts("write") { Glibc.write(raw, &one, 8) }
    }

    /// Reads the count and sets it back to 0 (an 8-byte `read`), retrying `EINTR`: the count, 0
    /// when nothing was signalled since the last reset (`EAGAIN`, not thrown).
    @inlinable
    public func reset() throws(SystemCallError) -> UInt64 {
        let raw = descriptor.unowned.rawValue
        var value: UInt64 = 0
        do {
            _ = try retryingInterrupts("read") { Glibc.read(raw, &value, 8) }
        } catch where error.errno == .resourceTemporarilyUnavailable {
            return 0
        }
        return value
    }
}
