import Foundation
import JSON
import JSONRPC

/// JSON-RPC scripting from the shell: `docsession call METHOD [PARAMS]` and `docsession run SCRIPT`.
/// Each starts a server of its own (the same executable), initializes it, does its work, and shuts it
/// down, so a shell script needs no framing code.
public struct Scripting {
    /// Why a script or a call could not run (a usage error: exit status 2).
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The executable and the arguments of `serve` (for example `--state-dir DIR`).
    public var executable: String
    public var serverArguments: [String]
    /// The position encoding asked for at `initialize` (utf-16 when nil, LSP's default).
    public var positionEncoding: String?
    /// How long to wait for each response, in seconds.
    public var timeout: Double
    /// Where the printed lines go (stdout), and the diagnostics (stderr).
    public var output: (String) -> Void
    public var errors: (String) -> Void

    public init(
        executable: String, serverArguments: [String] = [], positionEncoding: String? = nil, timeout: Double = 60,
        output: @escaping (String) -> Void, errors: @escaping (String) -> Void
    ) {
        self.executable = executable
        self.serverArguments = serverArguments
        self.positionEncoding = positionEncoding
        self.timeout = timeout
        self.output = output
        self.errors = errors
    }

    // MARK: - call

    /// Sends one request after `initialize` and prints its result as one line of JSON; the
    /// notifications the server sent before it go to `errors`, one line each, when `notifications`.
    /// Answers the exit status: 0 for a result, 1 for an error response (printed to `errors`).
    public func call(method: String, paramsText: String?, notifications: Bool = false) throws -> Int32 {
        var params: JSONValue? = nil
        if let paramsText {
            do {
                params = try JSONParser().parse(paramsText)
            } catch {
                throw UsageError("PARAMS is not JSON: \(error)")
            }
            guard case .object? = params else {
                if case .array? = params {
                    throw UsageError("PARAMS must be an object: the server's methods take their params by name")
                }
                throw UsageError("PARAMS must be a JSON object, got \(params?.kindDescription ?? "nothing")")
            }
        }
        let server = try start()
        defer { finish(server) }
        let response = try server.request(method, params, timeout: timeout)
        for note in server.takeQueued(where: { $0["method"] != nil }) where notifications {
            errors(note.jsonText)
        }
        if let result = response["result"] {
            output(result.jsonText)
            return 0
        }
        errors("docsession call: \(method) failed: \(response["error"]?.jsonText ?? response.jsonText)")
        return 1
    }

    // MARK: - run

    /// Runs a JSON Lines script: each line a message to send (blank lines and lines starting with
    /// `#` skipped). A line with an `id` is a request sent as it is; a line without one is a request
    /// given the next free integer id, unless it has `"notification": true` (sent as a
    /// notification, without that member). `jsonrpc` may be left out. Each request's response is
    /// awaited before the next line is sent, so the output's order is the server's. Without an
    /// `initialize` line first, one (with the configured position encoding) and `initialized` are
    /// sent before the script; without `shutdown`, `shutdown` and `exit` after it.
    ///
    /// Prints every message in both directions as `--> JSON` and `<-- JSON` lines (the transcript
    /// notation of protocol/README.md), or with `jsonLines` only what the server sent, one JSON
    /// object a line. Answers 0 when every request got a result, 1 when one got an error.
    public func run(script: String, name: String, jsonLines: Bool = false) throws -> Int32 {
        let lines = try Self.parse(script: script, name: name)
        let startsWithInitialize = lines.first.map { $0.message["method"] == "initialize" } ?? false
        let server = try start(initialize: !startsWithInitialize)
        var shutDown = false
        defer { if !shutDown { finish(server) } }
        var status: Int32 = 0
        var nextID: Int64 = 1
        var usedIDs = Set<JSONValue>()
        for line in lines { if let id = line.message["id"] { usedIDs.insert(id) } }

        func show(_ message: JSONValue, sent: Bool) {
            if jsonLines { if !sent { output(message.jsonText) } } else { output((sent ? "--> " : "<-- ") + message.jsonText) }
        }
        func drainNotifications() {
            for note in server.takeQueued(where: { $0["method"] != nil }) { show(note, sent: false) }
        }

        for line in lines {
            var message = line.message.canonicalMessageOrder()
            if line.isNotification {
                try server.send(message)
                show(message, sent: true)
                if message["method"] == "exit" {
                    shutDown = true
                    _ = try? server.waitForExit(timeout: timeout)
                    drainNotifications()
                    break
                }
                continue
            }
            if message["id"] == nil {
                while usedIDs.contains(.integer(nextID)) { nextID += 1 }
                message = message.setting("id", to: .integer(nextID)).canonicalMessageOrder()
                usedIDs.insert(.integer(nextID))
            }
            let id = message["id"]!
            try server.send(message)
            show(message, sent: true)
            let response: JSONValue
            do {
                response = try server.waitForResponse(id: id, timeout: timeout)
            } catch {
                throw UsageError("\(name):\(line.number): no response to id \(id.jsonText): \(error)")
            }
            drainNotifications()
            show(response, sent: false)
            if response["error"] != nil { status = 1 }
        }
        return status
    }

    /// One message of a script, with its line number.
    struct Line {
        var number: Int
        var message: JSONValue
        var isNotification: Bool
    }

    /// Reads a script; a line that is not a JSON object with a string `method` is refused with its
    /// number and the reason.
    static func parse(script: String, name: String) throws -> [Line] {
        var lines: [Line] = []
        for (index, raw) in script.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty || text.hasPrefix("#") { continue }
            let value: JSONValue
            do {
                value = try JSONParser().parse(String(text))
            } catch {
                throw UsageError("\(name):\(index + 1): not JSON: \(error)")
            }
            guard case .object(var object) = value else {
                throw UsageError("\(name):\(index + 1): expected a JSON object (a message), got \(value.kindDescription)")
            }
            guard case .string? = object["method"] else {
                throw UsageError("\(name):\(index + 1): a message needs a string \"method\"")
            }
            var isNotification = false
            if let flag = object["notification"] {
                guard case .bool(let yes) = flag else {
                    throw UsageError("\(name):\(index + 1): \"notification\" must be true or false")
                }
                guard !(yes && object["id"] != nil) else {
                    throw UsageError("\(name):\(index + 1): a notification has no \"id\"")
                }
                isNotification = yes
                object["notification"] = nil
            }
            lines.append(Line(number: index + 1, message: .object(object), isNotification: isNotification))
        }
        return lines
    }

    // MARK: - The server

    private func start(initialize: Bool = true) throws -> ServerProcess {
        let server = try ServerProcess(executable: executable, arguments: ["serve"] + serverArguments)
        guard initialize else { return server }
        var params: JSONObject = ["clientInfo": ["name": "docsession scripting"]]
        if let positionEncoding {
            params["capabilities"] = ["general": ["positionEncodings": [.string(positionEncoding)]]]
        }
        let response = try server.request("initialize", .object(params), timeout: timeout)
        guard response["result"] != nil else {
            throw UsageError("initialize failed: \(response["error"]?.jsonText ?? response.jsonText)")
        }
        try server.notify("initialized", nil)
        return server
    }

    /// `shutdown` and `exit`, then waits for the process (killing it if it does not go).
    private func finish(_ server: ServerProcess) {
        _ = try? server.request("shutdown", nil, timeout: timeout)
        try? server.notify("exit", nil)
        if (try? server.waitForExit(timeout: 10)) == nil { server.terminate() }
    }
}

extension JSONValue {
    /// An object with `key` set to `value` (other values unchanged).
    func setting(_ key: String, to value: JSONValue) -> JSONValue {
        guard case .object(var object) = self else { return self }
        object[key] = value
        return .object(object)
    }

    /// A message with `jsonrpc` ("2.0" when missing), `id`, `method` and `params` first, in that
    /// order (as clients write them and the transcripts show them), then any other members.
    func canonicalMessageOrder() -> JSONValue {
        guard case .object(let object) = self else { return self }
        var ordered: JSONObject = ["jsonrpc": object["jsonrpc"] ?? "2.0"]
        for key in ["id", "method", "params"] { if let value = object[key] { ordered[key] = value } }
        for (key, value) in object where ordered[key] == nil { ordered[key] = value }
        return .object(ordered)
    }
}
