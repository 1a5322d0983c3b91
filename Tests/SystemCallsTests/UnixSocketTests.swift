import SystemCalls
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether no connection waits on `listener` (its accept answers nil).
private func nothingWaiting(_ listener: borrowing Descriptor) throws -> Bool {
    switch try listener.acceptConnection() {
    case .none: return true
    case .some: return false
    }
}

/// The daemon's socket calls (issue 19): listen, connect, accept, the peer's credentials.
@Suite("Unix sockets")
struct UnixSocketTests {
    @Test("listen, connect, accept: bytes both ways, the socket file 0600 whatever the umask, the peer is this process")
    func roundTrip() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-socket")
        let path = directory.file("s.sock")
        let previous = umask(0o022)
        defer { umask(previous) }
        let listener = try UnixSocket.listen(path: path)
        #expect(umask(0o022) == 0o022)  // restored after the bind
        let status = try fileStatus(path, followingSymlinks: false)
        #expect(status.st_mode & S_IFMT == S_IFSOCK)
        #expect(status.st_mode & 0o777 == 0o600)
        // The listener does not block: nothing waits yet.
        #expect(try nothingWaiting(listener))
        #expect(fcntl(listener.rawValue, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(listener.rawValue, F_GETFD) & FD_CLOEXEC != 0)

        let client = try UnixSocket.connect(path: path)
        #expect(fcntl(client.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        guard let server = try listener.acceptConnection() else {
            Issue.record("no connection to accept after connect")
            return
        }
        // Accepted connections block and are closed on exec.
        #expect(fcntl(server.rawValue, F_GETFL) & O_NONBLOCK == 0)
        #expect(fcntl(server.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(try nothingWaiting(listener))

        let peer = try server.peerCredentials()
        #expect(peer == PeerCredentials(process: getpid(), user: geteuid(), group: getegid()))
        #expect(try client.peerCredentials().process == getpid())

        try writeAll(Array("ping".utf8), to: client.unowned)
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = try buffer.withUnsafeMutableBytes { bytes in
            Result { () throws(SystemCallError) in try readSome(into: bytes, from: server.unowned) }
        }.get()
        #expect(Array(buffer[..<count]) == Array("ping".utf8))

        // The end of the client's sending side: the server reads the end; it can still answer.
        try client.shutdownWriting()
        #expect(try readToEnd(from: server.unowned).isEmpty)
        try writeAll(Array("pong".utf8), to: server.unowned)
        try server.close()
        #expect(try readToEnd(from: client.unowned) == Array("pong".utf8))
    }

    @Test("connecting where nothing is, or to a socket nobody listens on: ENOENT, ECONNREFUSED")
    func noListener() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-socket")
        let path = directory.file("s.sock")
        let missing = #expect(throws: SystemCallError.self) { _ = try UnixSocket.connect(path: path) }
        #expect(missing?.errno == .noSuchFileOrDirectory)
        #expect(missing?.call == "connect")
        #expect(missing?.path == path)
        do {
            let listener = try UnixSocket.listen(path: path)
            try listener.close()
        }
        // The file stays after its listener is gone (a killed daemon's).
        #expect(try fileStatus(path, followingSymlinks: false).st_mode & S_IFMT == S_IFSOCK)
        // Refused once nobody listens: a child another test of this process is spawning at the
        // moment may hold a copy of the listener between its fork and its exec (which closes it,
        // SOCK_CLOEXEC). Seen under load: the connect went through.
        var refused: SystemCallError? = nil
        _ = waitUntilSync {
            do throws(SystemCallError) {
                _ = try UnixSocket.connect(path: path)
                return false
            } catch {
                refused = error
                return true
            }
        }
        #expect(refused?.errno == .connectionRefused)
        // Binding over it fails until it is removed.
        let inUse = #expect(throws: SystemCallError.self) { _ = try UnixSocket.listen(path: path) }
        #expect(inUse?.errno == .addressInUse)
        try removeFile(path)
        _ = try UnixSocket.listen(path: path)
    }

    @Test("a path longer than sun_path holds is refused, naming it")
    func longPath() throws {
        let path = "/tmp/" + String(repeating: "x", count: 120)
        let error = #expect(throws: SystemCallError.self) { _ = try UnixSocket.listen(path: path) }
        #expect(error?.errno == .fileNameTooLong)
        #expect(error?.path == path)
    }

    @Test("a child process: its exit status, a signal, one still running, a detached one in a session of its own")
    func childProcesses() throws {
        let exited = try spawnProcess("sh", arguments: ["-c", "exit 3"], searchingPath: true)
        #expect(try waitForProcess(exited) == .exited(3))
        let killed = try spawnProcess("sh", arguments: ["-c", "kill -TERM $$"], searchingPath: true)
        #expect(try waitForProcess(killed) == .signaled(SIGTERM))
        #expect(ProcessEnd.signaled(SIGTERM).shellStatus == 128 + SIGTERM)

        let directory = try TemporaryDirectory(prefix: "docsession-spawn")
        let output = try Descriptor.open(directory.file("out"), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
        let detached = try spawnProcess(
            "/bin/sh", arguments: ["-c", "cut -d ' ' -f 6 /proc/$$/stat; readlink /proc/$$/fd/0; read line; echo \"read:$line\""],
            detached: true, output: output.unowned)
        #expect(try waitForProcess(detached, blocking: true) == .exited(0))
        let lines = String(decoding: try directory.contents("out"), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 3)
        if lines.count == 3 {
            #expect(lines[0] == Substring(String(detached)))  // its own session
            #expect(lines[1] == "/dev/null")
            #expect(lines[2] == "read:")
        }

        let running = try spawnProcess("sleep", arguments: ["30"], searchingPath: true)
        #expect(try waitForProcess(running, blocking: false) == nil)
        kill(running, SIGKILL)
        #expect(try waitForProcess(running) == .signaled(SIGKILL))

        let missing = #expect(throws: SystemCallError.self) {
            _ = try spawnProcess("docsession-no-such-command", arguments: [], searchingPath: true)
        }
        #expect(missing?.errno == .noSuchFileOrDirectory)
    }
}
