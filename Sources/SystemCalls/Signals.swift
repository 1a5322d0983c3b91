import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body` with the signal's number, on a thread of its own (`ds-signals`), when the process
/// receives one of `signals`: the handler itself only writes a byte to a pipe (all a handler may
/// safely do), and the thread reads it. `body` decides what happens next (it usually ends the
/// process); a second signal while it runs waits for it. Throws when the pipe, a handler or the
/// thread cannot be had.
public func onSignals(_ signals: [Int32], _ body: @escaping @Sendable (Int32) -> Void) throws(SystemCallError) {
    var ends: [Int32] = [0, 0]
    _ = try retryingInterrupts("pipe2") { cfs_pipe_cloexec(&ends) }
    let reader = Descriptor(owningRawValue: ends[0])
    // The write end stays open for the process's life: the handler writes to it.
    for signal in signals {
        _ = try retryingInterrupts("sigaction") { cfs_forward_signal(signal, ends[1]) }
    }
    let raw = reader.take()  // the thread's, for the process's life
    try startThread(name: "ds-signals") {
        var byte: UInt8 = 0
        while true {
            let count = read(raw, &byte, 1)
            if count == 1 { body(Int32(byte)) } else if count < 0 && errno == EINTR { continue } else { return }
        }
    }
}

/// Runs `body` on a thread of its own (`ds-watch-pid`) when the process `pid` ends (a pidfd polled
/// for readability). Throws when the process does not exist (`ESRCH`), the kernel has no pidfd
/// (`ENOSYS`, before Linux 5.3), or no thread can be had.
public func onProcessExit(_ pid: Int32, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
    let descriptor = Descriptor(owningRawValue: try retryingInterrupts("pidfd_open") { cfs_pidfd_open(pid) })
    let raw = descriptor.take()  // the thread's; closed when the process it watches is gone
    try startThread(name: "ds-watch-pid") {
        let watched = Descriptor(owningRawValue: raw)
        while true {
            guard let events = try? pollDescriptor(watched.unowned, events: Int16(POLLIN), timeoutMilliseconds: -1) else { return }
            if events & Int16(POLLIN) != 0 { break }
        }
        body()
    }
}

/// Whether `pid` is this process's parent, or its parent's, and so on up (read from
/// `/proc/<pid>/stat`, at most 32 levels).
public func isAncestor(_ pid: Int32) -> Bool {
    var current = getppid()
    for _ in 0..<32 {
        if current == pid { return true }
        if current <= 1 { return false }
        guard let descriptor = try? Descriptor.open("/proc/\(current)/stat", .readOnly),
              let bytes = try? readToEnd(from: descriptor.unowned)
        else { return false }
        // "pid (comm) state ppid ...": the command may hold spaces and parentheses; the last ')'
        // ends it.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return false }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let parent = Int32(String(decoding: fields[1], as: UTF8.self)) else { return false }
        current = parent
    }
    return false
}
