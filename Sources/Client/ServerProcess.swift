import Foundation
import JSON
import JSONRPC
import SystemCalls
import SystemPackage

/// A docsession server started as a child process and driven over its stdin and stdout, the way an
/// editor drives it. Used by `docsession demo` and by the end-to-end tests.
///
/// The calls block: a reader thread collects framed messages, and `nextMessage` waits for one.
public final class ServerProcess: @unchecked Sendable {
    // @unchecked Sendable: the mutable state (the message queue, the id counter, the stderr
    // buffer) is only touched under `condition`; the Process and pipes are set up once in init.

    /// A failure talking to the server.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    private let process = Process()
    private let stdinPipe = Pipe()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let condition = NSCondition()
    private var received: [JSONValue] = []
    private var outputEnded = false
    private var framingErrors: [FramingError] = []
    private var stderrBytes: [UInt8] = []
    private var stderrEnded = false
    private var nextID: Int64 = 1

    /// Starts `executable` with `arguments`.
    public init(executable: String, arguments: [String] = [], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        do {
            try startReading()
        } catch {
            process.terminate()
            throw error
        }
    }

    /// The process id.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Sends one message, framed.
    public func send(_ message: JSONValue) throws {
        try sendRaw(Framing.frame(message.serialized()))
    }

    /// Sends bytes exactly as given (for malformed input).
    public func sendRaw(_ bytes: [UInt8]) throws {
        do {
            try writeAll(bytes, to: FileDescriptor(rawValue: stdinPipe.fileHandleForWriting.fileDescriptor))
        } catch {
            throw Failure("could not write to the server: \(error)")
        }
    }

    /// Closes the server's stdin (end of input).
    ///
    /// Through the `FileHandle`: the `Pipe` owns its two descriptors and closes them when it goes
    /// (a `Descriptor` here would close this one a second time).
    public func closeInput() {
        try? stdinPipe.fileHandleForWriting.close()
    }

    /// A fresh integer id for a request.
    public func makeID() -> Int64 {
        condition.lock()
        defer { condition.unlock() }
        nextID += 1
        return nextID - 1
    }

    /// Sends a request with a fresh id and waits for its response; notifications that arrive
    /// meanwhile are kept for `nextMessage`.
    public func request(_ method: String, _ params: JSONValue? = nil, timeout: Double = 10) throws -> JSONValue {
        let id = makeID()
        var message: JSONObject = ["jsonrpc": "2.0", "id": .integer(id), "method": .string(method)]
        if let params { message["params"] = params }
        try send(.object(message))
        return try waitForResponse(id: .integer(id), timeout: timeout)
    }

    /// Sends a notification.
    public func notify(_ method: String, _ params: JSONValue? = nil) throws {
        var message: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { message["params"] = params }
        try send(.object(message))
    }

    /// Waits for the response with this id, leaving other messages queued.
    public func waitForResponse(id: JSONValue, timeout: Double = 10) throws -> JSONValue {
        try waitFor(timeout: timeout, what: "the response to id \(id.jsonText)") { message in
            message["id"] == id && message["method"] == nil
        }
    }

    /// Takes the next message in arrival order.
    public func nextMessage(timeout: Double = 10) throws -> JSONValue {
        try waitFor(timeout: timeout, what: "a message") { _ in true }
    }

    /// Takes the first queued (or next arriving) message that matches.
    public func waitFor(timeout: Double, what: String, _ matches: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = received.firstIndex(where: matches) {
                return received.remove(at: index)
            }
            if outputEnded { throw Failure("the server closed its output before \(what); stderr: \(stderrTextLocked)") }
            if !condition.wait(until: deadline) { throw Failure("timed out waiting for \(what)") }
        }
    }

    /// The messages received and not yet taken.
    public var queuedMessages: [JSONValue] {
        condition.lock()
        defer { condition.unlock() }
        return received
    }

    /// Takes every queued message that matches, leaving the others queued.
    public func takeQueued(where matches: (JSONValue) -> Bool) -> [JSONValue] {
        condition.lock()
        defer { condition.unlock() }
        let taken = received.filter(matches)
        received.removeAll(where: matches)
        return taken
    }

    /// Takes every queued notification (messages with a method), leaving responses queued.
    public func takeNotifications() -> [JSONValue] {
        condition.lock()
        defer { condition.unlock() }
        let notifications = received.filter { $0["method"] != nil }
        received.removeAll { $0["method"] != nil }
        return notifications
    }

    /// Waits until the server has closed its output, and answers every message not yet taken.
    public func drain(timeout: Double = 10) throws -> [JSONValue] {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !outputEnded {
            if !condition.wait(until: deadline) { throw Failure("timed out waiting for the server to close its output") }
        }
        defer { received.removeAll() }
        return received
    }

    /// Framing faults in what the server wrote (there should never be any).
    public var outputFramingErrors: [FramingError] {
        condition.lock()
        defer { condition.unlock() }
        return framingErrors
    }

    /// What the server wrote to stderr so far.
    public var stderrText: String {
        condition.lock()
        defer { condition.unlock() }
        return stderrTextLocked
    }

    private var stderrTextLocked: String { String(decoding: stderrBytes, as: UTF8.self) }

    /// Waits for the process to exit and its stderr to close; answers its exit status (a signal
    /// shows as 128 + its number).
    public func waitForExit(timeout: Double = 10) throws -> Int32 {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                throw Failure("the server did not exit within \(timeout) s")
            }
            usleep(2_000)
        }
        // Let the reader take in the last of stderr, so stderrText is complete once this returns.
        condition.lock()
        while !stderrEnded, condition.wait(until: deadline) {}
        condition.unlock()
        if process.terminationReason == .uncaughtSignal { return 128 + process.terminationStatus }
        return process.terminationStatus
    }

    /// Kills the server if it is still running.
    public func terminate() {
        if process.isRunning { process.terminate() }
    }

    private func startReading() throws {
        let output = stdoutPipe.fileHandleForReading.fileDescriptor
        let errors = stderrPipe.fileHandleForReading.fileDescriptor
        try startThread(name: "ds-client-out") { [self] in
            var framer = FrameParser(maxMessageSize: 1 << 30)
            let parser = JSONParser()
            while let chunk = FileDescriptorIO.read(output), !chunk.isEmpty {
                var messages: [JSONValue] = []
                var faults: [FramingError] = []
                for event in framer.feed(chunk) {
                    switch event {
                    case .message(let body):
                        if let value = try? parser.parse(body) {
                            messages.append(value)
                        } else {
                            faults.append(.malformedHeaderLine("unparseable body: " + String(decoding: body.prefix(80), as: UTF8.self)))
                        }
                    case .error(let error):
                        faults.append(error)
                    }
                }
                condition.lock()
                received.append(contentsOf: messages)
                framingErrors.append(contentsOf: faults)
                condition.broadcast()
                condition.unlock()
            }
            condition.lock()
            outputEnded = true
            condition.broadcast()
            condition.unlock()
        }
        try startThread(name: "ds-client-err") { [self] in
            while let chunk = FileDescriptorIO.read(errors), !chunk.isEmpty {
                condition.lock()
                stderrBytes.append(contentsOf: chunk)
                condition.unlock()
            }
            condition.lock()
            stderrEnded = true
            condition.broadcast()
            condition.unlock()
        }
    }

    deinit {
        terminate()
    }
}
