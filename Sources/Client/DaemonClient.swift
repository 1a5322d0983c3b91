import Foundation
import JSON
import JSONRPC
import SystemCalls
import SystemPackage

/// Reaching the per-user daemon (`docsession daemon`) on its socket, starting it when none runs (as
/// `emacsclient -a ''` does): `docsession connect`'s first step.
public enum DaemonConnection {
    /// The exit status of a daemon that found another one running (EX_TEMPFAIL): whoever started
    /// it lost a race and connects to the winner.
    public static let alreadyRunningStatus: Int32 = 75

    /// Why no connection could be had.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Whether a failed `connect` means that no daemon listens there: nothing at the path
    /// (`ENOENT`), or a socket file nobody listens on, a dead daemon's (`ECONNREFUSED`).
    public static func meansNoDaemon(_ error: SystemCallError) -> Bool {
        error.errno == .noSuchFileOrDirectory || error.errno == .connectionRefused
    }

    /// A connection to the daemon at `socketPath`, or nil when none listens there.
    public static func connect(socketPath: String) throws(Failure) -> Descriptor? {
        do {
            return try UnixSocket.connect(path: socketPath)
        } catch where meansNoDaemon(error) {
            return nil
        } catch {
            throw Failure("cannot connect to the daemon: \(error)")
        }
    }

    /// A connection to the daemon at `socketPath`, starting one when none listens there:
    /// `executable` with `arguments` (`daemon --runtime-dir ...`), detached (a session of its own,
    /// stdin on /dev/null, stdout and stderr on `output` or /dev/null), then `connect` again every
    /// 20 ms until it listens. A started daemon that exits with status 75 found another one holding
    /// the lock (one starting at the same moment, or one ending): the retries go on, and while
    /// nobody listens a daemon is started again, at most every half second. Any other early exit,
    /// or no daemon listening within `timeout` seconds, is a failure.
    public static func connectStarting(
        socketPath: String, executable: String, arguments: [String], output: FileDescriptor? = nil, timeout: Double
    ) throws(Failure) -> Descriptor {
        if let connection = try connect(socketPath: socketPath) { return connection }
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        var child: Int32? = nil
        var started: [Int32] = []
        var lastStart = ContinuousClock.now
        while true {
            if child == nil && (started.isEmpty || ContinuousClock.now - lastStart >= .milliseconds(500)) {
                do {
                    let pid = try spawnProcess(executable, arguments: arguments, detached: true, output: output)
                    child = pid
                    started.append(pid)
                    lastStart = .now
                } catch {
                    throw Failure("cannot start the daemon: \(error)")
                }
            }
            if let connection = try connect(socketPath: socketPath) { return connection }
            if let pid = child, let end = try? waitForProcess(pid, blocking: false) {
                child = nil
                if end != .exited(alreadyRunningStatus) {
                    let how: String
                    switch end {
                    case .exited(let code): how = "exited with status \(code)"
                    case .signaled(let signal): how = "was killed by signal \(signal)"
                    }
                    throw Failure(
                        "the daemon it started (pid \(pid)) \(how) before listening on \(socketPath); "
                            + "run `\(executable) \(arguments.joined(separator: " "))` to see why")
                }
            }
            if ContinuousClock.now >= deadline {
                let pids = started.map(String.init).joined(separator: ", ")
                throw Failure("no daemon was listening on \(socketPath) \(timeout) s after starting one (pid \(pids))")
            }
            usleep(20_000)
        }
    }
}

/// A JSON-RPC client of the daemon over its socket, for `docsession coordinate`: requests answered
/// in any order, notifications ignored, requests from the daemon answered with -32601. A thread of
/// its own (`ds-daemon-in`) reads the socket all along, so the daemon never waits to write to it
/// while this process waits for something else (a command run under a lease).
public final class DaemonClient: @unchecked Sendable {
    // @unchecked Sendable: `responses`, `ended` and `nextID` are touched only under `condition`;
    // writes go through `writeLock`.

    /// A response: its result, or its error's code, message and data.
    public enum Answer: Sendable {
        case result(JSONValue)
        case error(code: Int64, message: String, data: JSONValue?)
    }

    private let connection: SharedSocket
    private let condition = NSCondition()
    private let writeLock = NSLock()
    private var responses: [JSONValue: JSONValue] = [:]
    private var ended = false
    private var nextID: Int64 = 1

    public init(socket: consuming Descriptor) throws(DaemonConnection.Failure) {
        connection = SharedSocket(socket)
        do {
            try startThread(name: "ds-daemon-in") { [self] in readAll() }
        } catch {
            throw DaemonConnection.Failure("cannot start a thread: \(error)")
        }
    }

    /// Sends a request and waits for its answer; throws when the daemon closes the connection first.
    public func request(_ method: String, _ params: JSONValue? = nil) throws(DaemonConnection.Failure) -> Answer {
        condition.lock()
        let id = JSONValue.integer(nextID)
        nextID += 1
        condition.unlock()
        var message: JSONObject = ["jsonrpc": "2.0", "id": id, "method": .string(method)]
        if let params { message["params"] = params }
        try send(.object(message))
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let response = responses.removeValue(forKey: id) {
                if let error = response["error"] {
                    return .error(
                        code: error["code"]?.integerValue ?? 0, message: error["message"]?.stringValue ?? "",
                        data: error["data"])
                }
                return .result(response["result"] ?? .null)
            }
            if ended { throw DaemonConnection.Failure("the daemon closed the connection before answering \(method)") }
            condition.wait()
        }
    }

    /// Sends a notification.
    public func notify(_ method: String, _ params: JSONValue? = nil) throws(DaemonConnection.Failure) {
        var message: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { message["params"] = params }
        try send(.object(message))
    }

    /// Ends this side's sending and waits (at most `timeout` seconds) for the daemon to close.
    public func finish(timeout: Double = 5) {
        try? connection.socket.shutdownWriting()
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        while !ended, condition.wait(until: deadline) {}
        condition.unlock()
    }

    private func send(_ message: JSONValue) throws(DaemonConnection.Failure) {
        let bytes = Framing.frame(message.serialized())
        writeLock.lock()
        defer { writeLock.unlock() }
        do {
            try writeAll(bytes, to: connection.socket.unowned)
        } catch {
            throw DaemonConnection.Failure("cannot write to the daemon: \(error)")
        }
    }

    private func readAll() {
        var framer = FrameParser(maxMessageSize: 1 << 30)
        let parser = JSONParser()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                (try? readSome(into: bytes, from: connection.socket.unowned)) ?? 0
            }
            if count == 0 { break }
            for event in framer.feed(buffer[..<count]) {
                guard case .message(let body) = event, let message = try? parser.parse(body) else { continue }
                if let id = message["id"], message["method"] == nil {
                    condition.lock()
                    responses[id] = message
                    condition.broadcast()
                    condition.unlock()
                } else if let id = message["id"], message["method"] != nil {
                    // A request from the daemon: this client offers nothing.
                    let answer: JSONValue = [
                        "jsonrpc": "2.0", "id": id,
                        "error": ["code": -32601, "message": "docsession coordinate answers no requests"],
                    ]
                    try? send(answer)
                }
                // Notifications are ignored.
            }
        }
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }
}

/// The `file://` URI of an absolute path, every byte outside RFC 3986's unreserved set and `/`
/// percent-encoded (the server's own rule, `Server/FileURI.swift`, which the executable's other
/// modules do not see).
public enum FileURIText {
    public static func uri(from path: String) -> String {
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        var result = "file://"
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                result.unicodeScalars.append("%")
                result.unicodeScalars.append(hex[Int(byte >> 4)])
                result.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return result
    }
}
