import Client
import Foundation
import JSON
import JSONRPC
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// Shared machinery of the end-to-end tests: finding the built server, driving it through
// `ServerProcess`, a raw-pipe runner for byte-exact checks, and assertions about responses.

/// How long any single wait on the server may take. Generous: the machine may be busy building.
let e2eTimeout: Double = 30

/// A failure to set up an end-to-end test (the binary is missing, a pipe broke).
struct E2EError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The docsession binary under test.
enum ServerBinary {
    /// Writing to a server that has exited must surface as EPIPE, not kill the test runner.
    private static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    /// `DOCSESSION_BIN` when set, else `docsession` next to the test runner (which lives in
    /// `.build/<triple>/debug/`, where `swift build` puts the executable too).
    static func path() throws -> String {
        _ = ignoreSIGPIPE
        let candidate: String
        if let configured = ProcessInfo.processInfo.environment["DOCSESSION_BIN"], !configured.isEmpty {
            candidate = configured
        } else {
            let runner = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
            candidate = URL(fileURLWithPath: runner).deletingLastPathComponent().appendingPathComponent("docsession").path
        }
        guard FileManager.default.isExecutableFile(atPath: candidate) else {
            throw E2EError(
                "the docsession binary was not found at \(candidate): run `swift build` first (the tests look next to "
                    + "the test runner), or set DOCSESSION_BIN to the server's path")
        }
        return candidate
    }
}

// MARK: - Message construction

/// `body` framed with the header the LSP base protocol asks for.
func framed(_ body: String) -> [UInt8] { Framing.frame(Array(body.utf8)) }

/// `body` framed with the header the LSP base protocol asks for.
func framed(_ body: [UInt8]) -> [UInt8] { Framing.frame(body) }

/// A request as compact JSON text.
func requestText(id: JSONValue, method: String, params: JSONValue? = nil) -> String {
    var object: JSONObject = ["jsonrpc": "2.0", "id": id, "method": .string(method)]
    if let params { object["params"] = params }
    return JSONValue.object(object).jsonText
}

/// A notification as compact JSON text.
func notificationText(method: String, params: JSONValue? = nil) -> String {
    var object: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
    if let params { object["params"] = params }
    return JSONValue.object(object).jsonText
}

// MARK: - Assertions

/// Checks that `message` is an error response with this code under this id; answers its `error`.
@discardableResult
func expectError(
    _ message: JSONValue, code: Int64, id: JSONValue, _ context: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) -> JSONValue? {
    let about = context.isEmpty ? "" : "[\(context)] "
    #expect(message["jsonrpc"] == "2.0", "\(about)not a JSON-RPC 2.0 message: \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["id"] == id, "\(about)wrong id in \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["result"] == nil, "\(about)an error response must not have a result: \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["method"] == nil, "\(about)expected a response, got \(message.jsonText)", sourceLocation: sourceLocation)
    let error = message["error"]
    #expect(error?["code"] == .integer(code), "\(about)expected error \(code), got \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(error?["message"]?.stringValue?.isEmpty == false, "\(about)an error needs a message: \(message.jsonText)", sourceLocation: sourceLocation)
    return error
}

/// Checks that `message` is a successful response under this id; answers its result.
@discardableResult
func expectResult(_ message: JSONValue, id: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) -> JSONValue? {
    #expect(message["jsonrpc"] == "2.0", "not a JSON-RPC 2.0 message: \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["id"] == id, "wrong id in \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["error"] == nil, "expected a result, got \(message.jsonText)", sourceLocation: sourceLocation)
    #expect(message["result"] != nil, "a successful response needs a result: \(message.jsonText)", sourceLocation: sourceLocation)
    return message["result"]
}

// MARK: - A session over ServerProcess

/// One server started for one test, driven like an editor would, with helpers that make every
/// test check the same things at the end: the exit status, no leftover messages, clean framing.
final class Session {
    let server: ServerProcess
    private var probeCount = 0
    /// The `document/stateChanged` notifications received so far, in order. They are taken out of
    /// the stream `next()` reads: most tests are about other things, and the state tests read them
    /// here (``takeStateChanges()``).
    private(set) var stateChanges: [JSONValue] = []

    static func isStateChange(_ message: JSONValue) -> Bool { message["method"] == "document/stateChanged" }

    /// `document/didChangeVersions`, which the server sends when a version's background write ends,
    /// at no fixed place among its other messages (protocol/README.md §8.21): kept apart here, like
    /// the state changes, so that the order of the rest is deterministic.
    private(set) var versionChanges: [JSONValue] = []
    static func isVersionChange(_ message: JSONValue) -> Bool { message["method"] == "document/didChangeVersions" }

    /// The state changes received since the last call, waiting up to `timeout` for at least `count`.
    func takeStateChanges(atLeast count: Int = 0, timeout: Double = 5) throws -> [JSONValue] {
        stateChanges += server.takeQueued(where: Self.isStateChange)
        while stateChanges.count < count {
            stateChanges.append(try server.waitFor(timeout: timeout, what: "a document/stateChanged", Self.isStateChange))
        }
        defer { stateChanges = [] }
        return stateChanges
    }

    /// Starts `docsession` with `arguments` (none: the default, serving on stdio).
    init(_ arguments: [String] = [], environment: [String: String]? = nil) throws {
        server = try ServerProcess(
            executable: try ServerBinary.path(), arguments: arguments, environment: environment ?? Self.environment)
    }

    /// The tests' environment, with the server's state (earlier versions of documents) kept in a
    /// directory of this test run rather than the user's ~/.local/state.
    static let environment: [String: String] = {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = NSTemporaryDirectory() + "/docsession-e2e-state-\(getpid())"
        return environment
    }()

    deinit { server.terminate() }

    // Sending.

    func send(_ message: JSONValue) throws { try server.send(message) }

    /// Sends `body` (JSON text, possibly malformed) with a correct header.
    func sendBody(_ body: String) throws { try server.sendRaw(framed(body)) }

    /// Sends `body` (bytes, possibly malformed) with a correct header.
    func sendBody(_ body: [UInt8]) throws { try server.sendRaw(framed(body)) }

    /// Sends bytes exactly as given.
    func sendRaw(_ bytes: [UInt8]) throws { try server.sendRaw(bytes) }

    /// Sends text exactly as given (no header added).
    func sendRaw(_ text: String) throws { try server.sendRaw(Array(text.utf8)) }

    func notify(_ method: String, _ params: JSONValue? = nil) throws { try server.notify(method, params) }

    /// Sends a request with an explicit id.
    func sendRequest(id: JSONValue, _ method: String, _ params: JSONValue? = nil) throws {
        try sendBody(requestText(id: id, method: method, params: params))
    }

    // Receiving.

    /// Sends a request with a fresh id and waits for its response (other messages stay queued).
    func request(_ method: String, _ params: JSONValue? = nil) throws -> JSONValue {
        try server.request(method, params, timeout: e2eTimeout)
    }

    /// The next message the server wrote, whatever it is.
    func next() throws -> JSONValue {
        while true {
            let message = try server.nextMessage(timeout: e2eTimeout)
            if Self.isVersionChange(message) {
                versionChanges.append(message)
                continue
            }
            guard Self.isStateChange(message) else { return message }
            stateChanges.append(message)
        }
    }

    // Lifecycle.

    /// `initialize`, which must succeed; answers its result.
    @discardableResult
    func initialize(_ params: JSONValue? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        let id = JSONValue.integer(server.makeID())
        try sendRequest(id: id, "initialize", params)
        let response = try next()
        return try #require(expectResult(response, id: id, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
    }

    /// Proves the server owes nothing: a request to a method that does not exist, whose answer must
    /// be the very next message. `code` is what that request gets in the current lifecycle state
    /// (-32601 while running, -32002 before initialize, -32600 after shutdown).
    func expectNothingElse(code: Int64 = -32601, sourceLocation: SourceLocation = #_sourceLocation) throws {
        probeCount += 1
        let id = JSONValue.string("quiet-\(probeCount)")
        try sendRequest(id: id, "e2e/probe")
        let response = try next()
        expectError(response, code: code, id: id, sourceLocation: sourceLocation)
    }

    /// `shutdown` (answered null), then `exit`; then everything `finish` checks, status 0.
    func shutdownAndExit(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let id = JSONValue.string("shutdown")
        try sendRequest(id: id, "shutdown")
        let response = try next()
        #expect(expectResult(response, id: id, sourceLocation: sourceLocation) == .null, sourceLocation: sourceLocation)
        try notify("exit")
        try finish(status: 0, sourceLocation: sourceLocation)
    }

    /// Closes the input, waits for the exit and checks: the status, nothing more written, and every
    /// byte the server wrote correctly framed.
    func finish(status: Int32, sourceLocation: SourceLocation = #_sourceLocation) throws {
        server.closeInput()
        let leftovers = try server.drain(timeout: e2eTimeout).filter { !Self.isStateChange($0) && !Self.isVersionChange($0) }
        #expect(leftovers.isEmpty, "unexpected messages: \(leftovers.map(\.jsonText))", sourceLocation: sourceLocation)
        let actual = try server.waitForExit(timeout: e2eTimeout)
        #expect(actual == status, "exit status; stderr: \(server.stderrText)", sourceLocation: sourceLocation)
        #expect(server.outputFramingErrors.isEmpty, "bad output framing: \(server.outputFramingErrors)", sourceLocation: sourceLocation)
    }

    /// What the server wrote to stderr, waiting (up to a deadline) until it contains `text`.
    func stderr(containing text: String, timeout: Double = 5) -> String {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while true {
            let current = server.stderrText
            if current.contains(text) || Date() > deadline { return current }
            usleep(10_000)
        }
    }

    /// What the server wrote to stderr after the process ended (with a moment for the reader).
    func finalStderr() -> String {
        usleep(200_000)
        return server.stderrText
    }
}

// MARK: - Raw pipes

/// A server run over plain pipes, for what `ServerProcess` hides: the exact bytes written to
/// stdout, and a stdout whose reader goes away.
struct RawRun {
    let status: Int32
    let stdout: [UInt8]
    let stderr: String

    /// Runs `docsession arguments`, writes `input` and closes stdin, collects everything the server
    /// writes until it exits. With `closeStdoutEarly` the test's end of stdout is closed before
    /// anything is written, so the server's writes fail with EPIPE.
    static func run(_ arguments: [String], input: [UInt8] = [], closeStdoutEarly: Bool = false) throws -> RawRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ServerBinary.path())
        process.arguments = arguments
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        if closeStdoutEarly { try stdoutPipe.fileHandleForReading.close() }

        let collected = Collected()
        let group = DispatchGroup()
        if !closeStdoutEarly {
            group.enter()
            Thread.detachNewThread {
                let data = stdoutPipe.fileHandleForReading.readDataToEndOfFile()
                collected.set(stdout: [UInt8](data))
                group.leave()
            }
        }
        group.enter()
        Thread.detachNewThread {
            let data = stderrPipe.fileHandleForReading.readDataToEndOfFile()
            collected.set(stderr: [UInt8](data))
            group.leave()
        }
        let writer = stdinPipe.fileHandleForWriting
        _ = FileDescriptorIO.writeAll(writer.fileDescriptor, input)
        try? writer.close()

        let deadline = Date(timeIntervalSinceNow: e2eTimeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                throw E2EError("docsession \(arguments.joined(separator: " ")) did not exit within \(e2eTimeout) s")
            }
            usleep(2_000)
        }
        guard group.wait(timeout: .now() + e2eTimeout) == .success else {
            throw E2EError("the server's output did not end after it exited")
        }
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return RawRun(status: status, stdout: collected.stdout, stderr: String(decoding: collected.stderr, as: UTF8.self))
    }

    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }

    /// The bodies of the messages on stdout, requiring each header to be exactly
    /// `Content-Length: N\r\n\r\n` (that spelling, one space, no other header, no leading zero) and
    /// nothing else between or after the messages.
    func strictBodies() throws -> [[UInt8]] {
        var bodies: [[UInt8]] = []
        var index = 0
        let prefix = Array("Content-Length: ".utf8)
        while index < stdout.count {
            guard stdout.count - index >= prefix.count, Array(stdout[index..<index + prefix.count]) == prefix else {
                throw E2EError("expected \"Content-Length: \" at byte \(index), found \(Self.preview(stdout[index...]))")
            }
            index += prefix.count
            let digitsStart = index
            while index < stdout.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(stdout[index]) { index += 1 }
            let digits = String(decoding: stdout[digitsStart..<index], as: UTF8.self)
            guard let length = Int(digits), !(digits.count > 1 && digits.hasPrefix("0")) else {
                throw E2EError("bad length \"\(digits)\" at byte \(digitsStart)")
            }
            let terminator = Array("\r\n\r\n".utf8)
            guard stdout.count - index >= 4, Array(stdout[index..<index + 4]) == terminator else {
                throw E2EError("expected \\r\\n\\r\\n after the length at byte \(index), found \(Self.preview(stdout[index...]))")
            }
            index += 4
            guard stdout.count - index >= length else {
                throw E2EError("body of \(length) bytes at byte \(index) is cut short (\(stdout.count - index) left)")
            }
            bodies.append(Array(stdout[index..<index + length]))
            index += length
        }
        return bodies
    }

    /// The messages on stdout, strictly framed and strictly parsed.
    func strictMessages() throws -> [JSONValue] {
        try strictBodies().map { try JSONParser().parse($0) }
    }

    private static func preview(_ bytes: ArraySlice<UInt8>) -> String {
        "\"" + String(decoding: bytes.prefix(40), as: UTF8.self) + "\""
    }

    private final class Collected: @unchecked Sendable {
        // Each member is written by one thread before `group.leave()` and read after `group.wait()`.
        private let lock = NSLock()
        private var out: [UInt8] = []
        private var err: [UInt8] = []
        func set(stdout: [UInt8]) { lock.withLock { out = stdout } }
        func set(stderr: [UInt8]) { lock.withLock { err = stderr } }
        var stdout: [UInt8] { lock.withLock { out } }
        var stderr: [UInt8] { lock.withLock { err } }
    }
}

extension Array where Element == UInt8 {
    /// Whether `text`'s UTF-8 bytes occur in this array.
    func contains(bytes text: String) -> Bool {
        let needle = Array(text.utf8)
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<start + needle.count]) == needle { return true }
        }
        return false
    }
}
