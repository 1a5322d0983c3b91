import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// The process's own setup at start: signal dispositions, the standard descriptors, re-executing
// itself. Each throws a SystemCallError naming the call.

/// Sets `signal`'s disposition to ignore (`sigaction` with `SIG_IGN`), so that what it reports
/// surfaces as an errno instead (`SIGPIPE`: `EPIPE`; `SIGXFSZ`: `EFBIG`). Throws `EINVAL` for a
/// signal that cannot be ignored.
public func ignoreSignal(_ signal: Int32) throws(SystemCallError) {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = SIG_IGN
    sigemptyset(&action.sa_mask)
    action.sa_flags = 0
    _ = try retryingInterrupts("sigaction") { sigaction(signal, &action, nil) }
}

/// Makes `target` refer to what `source` refers to (`dup2`), retrying `EINTR`; `target`, already
/// open, is closed first by the kernel. No new descriptor is made: `target` keeps its owner (the
/// standard descriptors are the process's). `O_CLOEXEC` is not set on `target`.
public func duplicate(_ source: FileDescriptor, onto target: FileDescriptor) throws(SystemCallError) {
    _ = try retryingInterrupts("dup2") { dup2(source.rawValue, target.rawValue) }
}

extension Descriptor {
    /// A new descriptor for what `descriptor` refers to, numbered `minimum` or above, with
    /// `O_CLOEXEC` (`fcntl(F_DUPFD_CLOEXEC)`), retrying `EINTR`.
    public static func duplicate(_ descriptor: FileDescriptor, atLeast minimum: Int32 = 0) throws(SystemCallError) -> Descriptor {
        Descriptor(owningRawValue: try retryingInterrupts("fcntl") { fcntl(descriptor.rawValue, F_DUPFD_CLOEXEC, minimum) })
    }
}

/// Re-executes the running program (`execv("/proc/self/exe")`: the same arguments, descriptors and
/// process id) with glibc's per-thread allocator cache holding `count` blocks per size
/// (`GLIBC_TUNABLES=glibc.malloc.tcache_count=N`, ahead of what the variable held), unless the
/// variable already sets that tunable or the program runs set-user-ID. Returns only when it did not
/// re-execute: without an error when the setting was there already; throwing, with the
/// environment as it was, when `setenv` or `execv` failed (no `/proc`, say).
public func reexecutingWithMallocThreadCache(_ count: Int32) throws(SystemCallError) {
    guard cfs_reexec_with_tcache_count(CommandLine.unsafeArgv, count) == 0 else {
        throw SystemCallError.current("execv", path: "/proc/self/exe")
    }
}

/// Whether a process `pid` exists (`kill(pid, 0)`: false only for `ESRCH`; a process of another
/// user, `EPERM`, exists).
public func processExists(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return Glibc.kill(pid, 0) == 0 || errno != ESRCH
}

