import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// The daemon's socket (issue 19): a Unix stream socket listened on under umask 077, connections
// accepted blocking with O_CLOEXEC, the peer's credentials (SO_PEERCRED), connecting to it; and the
// two child processes the daemon's commands start: the daemon itself, detached in a session of its
// own by `docsession connect`, and the command `docsession coordinate` runs. Each throws a
// SystemCallError naming the call and the socket's path, retrying EINTR.

/// Who is at the other end of a connected Unix socket, as the kernel recorded it at `connect`
/// (`SO_PEERCRED`).
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public let process: Int32
    public let user: UInt32
    public let group: UInt32

    public init(process: Int32, user: UInt32, group: UInt32) {
        self.process = process
        self.user = user
        self.group = group
    }

    public var description: String { "pid \(process), uid \(user), gid \(group)" }
}

/// Unix stream sockets named by a path.
public enum UnixSocket {
    /// The longest path a socket may have: `sun_path` holds 108 bytes with the terminating NUL.
    public static let maximumPathLength = 107

    /// A new socket bound to `path` and listening (`socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
    /// SOCK_NONBLOCK)`, `bind`, `listen`): the listener does not block, so a loop can accept until
    /// `EAGAIN`. The socket file is created mode 0600 whatever the process's umask is: Linux makes it
    /// from the socket's own mode (set to 0600 by `fchmod` first, where a plain socket has 0777)
    /// less the umask, and the bind runs under umask 077 (the process's, restored at once), so no
    /// other user can connect through the file between the bind and anything after. Nothing may be
    /// at `path` (`EADDRINUSE`):
    /// the caller removes a stale socket first, holding whatever says it may.
    public static func listen(path: String, backlog: Int32 = 128) throws(SystemCallError) -> Descriptor {
        var address = try self.address(path)
        let socket = Descriptor(owningRawValue: try makeSocket(nonBlocking: true, path: path))
        _ = try retryingInterrupts("fchmod", path: path) { fchmod(socket.rawValue, 0o600) }
        let previous = umask(0o077)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                Glibc.bind(socket.rawValue, address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let bindErrno = Glibc.errno
        umask(previous)
        if bound != 0 { throw SystemCallError(errno: Errno(rawValue: bindErrno), call: "bind", path: path) }
        _ = try retryingInterrupts("listen", path: path) { Glibc.listen(socket.rawValue, backlog) }
        return socket
    }

    /// A blocking socket (`O_CLOEXEC`) connected to the listener at `path`. `ENOENT` (nothing
    /// there) and `ECONNREFUSED` (a socket file that nobody listens on: a dead daemon's) mean that
    /// no daemon is there. An interrupted `connect` is not repeated (the connection goes on in the
    /// background): it waits for the outcome with `poll` and reads it with `SO_ERROR`.
    public static func connect(path: String) throws(SystemCallError) -> Descriptor {
        var address = try self.address(path)
        let socket = Descriptor(owningRawValue: try makeSocket(nonBlocking: false, path: path))
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                Glibc.connect(socket.rawValue, address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 { return socket }
        let number = Glibc.errno
        guard number == EINTR || number == EINPROGRESS else {
            throw SystemCallError(errno: Errno(rawValue: number), call: "connect", path: path)
        }
        _ = try pollDescriptor(socket.unowned, events: Int16(POLLOUT), timeoutMilliseconds: -1)
        var pending: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingInterrupts("getsockopt", path: path) {
            getsockopt(socket.rawValue, SOL_SOCKET, SO_ERROR, &pending, &length)
        }
        if pending != 0 { throw SystemCallError(errno: Errno(rawValue: pending), call: "connect", path: path) }
        return socket
    }

    private static func makeSocket(nonBlocking: Bool, path: String) throws(SystemCallError) -> Int32 {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        return try retryingInterrupts("socket", path: path) { Glibc.socket(AF_UNIX, type, 0) }
    }

    private static func address(_ path: String) throws(SystemCallError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw SystemCallError(errno: bytes.isEmpty || bytes.contains(0) ? .invalidArgument : .fileNameTooLong, call: "bind", path: path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}

extension Descriptor {
    /// Accepts one waiting connection on this listening socket: blocking and `O_CLOEXEC`
    /// (`accept4(SOCK_CLOEXEC)`), or nil when none waits (`EAGAIN` on a non-blocking listener).
    /// A connection that was reset before it could be accepted (`ECONNABORTED`) is skipped, as
    /// `EINTR` is retried.
    public func acceptConnection(path: String? = nil) throws(SystemCallError) -> Descriptor? {
        while true {
            let accepted = cfs_accept_cloexec(rawValue)
            if accepted >= 0 { return Descriptor(owningRawValue: accepted) }
            let number = Glibc.errno
            switch number {
            case EINTR, ECONNABORTED: continue
            case EAGAIN, EWOULDBLOCK: return nil
            default: throw SystemCallError(errno: Errno(rawValue: number), call: "accept4", path: path)
            }
        }
    }

    /// The credentials of the process at the other end of this connected Unix socket
    /// (`getsockopt(SO_PEERCRED)`), as they were when it connected.
    public func peerCredentials() throws(SystemCallError) -> PeerCredentials {
        var process: Int32 = 0
        var user: UInt32 = 0
        var group: UInt32 = 0
        _ = try retryingInterrupts("getsockopt") { cfs_peer_credentials(rawValue, &process, &user, &group) }
        return PeerCredentials(process: process, user: user, group: group)
    }

    /// Ends this socket's sending side (`shutdown(SHUT_WR)`): the peer reads the end of input, and
    /// can still answer.
    public func shutdownWriting() throws(SystemCallError) {
        _ = try retryingInterrupts("shutdown") { Glibc.shutdown(rawValue, Int32(SHUT_WR)) }
    }
}

// MARK: - Child processes

/// How a child process ended.
public enum ProcessEnd: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)

    /// The status as a shell reports it: the exit code, or 128 + the signal.
    public var shellStatus: Int32 {
        switch self {
        case .exited(let code): return code
        case .signaled(let signal): return 128 + signal
        }
    }
}

/// Starts `executable` (a path, or looked up in `PATH` with `searchingPath`) with `arguments`
/// (`argv[1...]`; `argv[0]` is `executable`) and this process's environment, every signal at its
/// default disposition and none blocked (`posix_spawn`). `detached`: in a session of its own
/// (`setsid`), stdin on /dev/null and stdout and stderr on `output` (/dev/null when nil), so that
/// it holds none of this process's standard descriptors (a pipe's reader waiting for their end
/// does not wait for it). Otherwise it inherits the standard descriptors. Answers its process id.
public func spawnProcess(
    _ executable: String, arguments: [String], searchingPath: Bool = false, detached: Bool = false, output: FileDescriptor? = nil
) throws(SystemCallError) -> Int32 {
    let argv = ([executable] + arguments).map { strdup($0) }
    defer { argv.forEach { free($0) } }
    var pointers: [UnsafeMutablePointer<CChar>?] = argv + [nil]
    var pid: Int32 = 0
    let result = pointers.withUnsafeMutableBufferPointer { buffer in
        cfs_spawn(executable, buffer.baseAddress, searchingPath ? 1 : 0, detached ? 1 : 0, output?.rawValue ?? -1, &pid)
    }
    if result != 0 { throw SystemCallError.current(searchingPath ? "posix_spawnp" : "posix_spawn", path: executable) }
    return pid
}

/// Waits for the child `pid` to end (`waitpid`), retrying `EINTR`; without `blocking`, answers nil
/// at once when it is still running (`WNOHANG`). A stopped child is waited for again.
public func waitForProcess(_ pid: Int32, blocking: Bool = true) throws(SystemCallError) -> ProcessEnd? {
    while true {
        var status: Int32 = 0
        let result = try retryingInterrupts("waitpid") { waitpid(pid, &status, blocking ? 0 : WNOHANG) }
        if result == 0 { return nil }
        let signal = status & 0x7f
        if signal == 0 { return .exited((status >> 8) & 0xff) }
        if signal != 0x7f { return .signaled(signal) }
        // Stopped (only reported with WUNTRACED, which is not asked for): wait again.
        if !blocking { return nil }
    }
}
