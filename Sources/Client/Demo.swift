import JSON
import JSONRPC

/// The scripted session `docsession demo` runs against a fresh server, printing the traffic: the
/// README's first command. Each later part of the protocol grows this script.
public struct Demo {
    /// One step: what to send, and a caption for the transcript.
    enum Step {
        case request(String, String, JSONValue?)
        case notification(String, String, JSONValue?)
        case raw(String, [UInt8])
    }

    let steps: [Step] = [
        .request("Start the session; the client prefers utf-32 positions.", "initialize", [
            "clientInfo": ["name": "docsession demo"],
            "capabilities": ["general": ["positionEncodings": ["utf-32", "utf-16"]]],
        ]),
        .notification("The client is ready.", "initialized", nil),
        .request("A method the server does not have: a precise error, and the session goes on.", "document/frobnicate", ["document": "d1"]),
        .raw("A message whose JSON is broken: a parse error naming the byte.", Framing.frame(Array(#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"trace":"off",}}"#.utf8))),
        .request("Initialize again: the lifecycle refuses it.", "initialize", [:]),
        .request("Shut down: nothing more is accepted but exit.", "shutdown", nil),
        .notification("Exit: the server stops with status 0 after shutdown.", "exit", nil),
    ]

    /// Where the transcript goes.
    let output: (String) -> Void

    public init(output: @escaping (String) -> Void) {
        self.output = output
    }

    /// Runs the script against the server at `executable` and answers its exit status.
    public func run(executable: String, arguments: [String]) throws -> Int32 {
        let server = try ServerProcess(executable: executable, arguments: arguments)
        output("docsession demo: a scripted session with \(executable) \(arguments.joined(separator: " "))")
        output("(--> client to server, <-- server to client; each message is framed as Content-Length: N\\r\\n\\r\\n JSON)")
        for step in steps {
            output("")
            switch step {
            case .request(let caption, let method, let params):
                output("# \(caption)")
                let id = server.makeID()
                var message: JSONObject = ["jsonrpc": "2.0", "id": .integer(id), "method": .string(method)]
                if let params { message["params"] = params }
                output("--> \(JSONValue.object(message).jsonText)")
                try server.send(.object(message))
                let response = try server.waitForResponse(id: .integer(id))
                printQueuedNotifications(server)
                output("<-- \(response.jsonText)")
            case .notification(let caption, let method, let params):
                output("# \(caption)")
                var message: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
                if let params { message["params"] = params }
                output("--> \(JSONValue.object(message).jsonText)")
                try server.send(.object(message))
            case .raw(let caption, let bytes):
                output("# \(caption)")
                output("--> \(String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\\r\\n"))")
                try server.sendRaw(bytes)
                let response = try server.waitForResponse(id: .null)
                output("<-- \(response.jsonText)")
            }
        }
        server.closeInput()
        for message in try server.drain() { output("<-- \(message.jsonText)") }
        let status = try server.waitForExit()
        output("")
        output("server exited with status \(status)")
        return status
    }

    private func printQueuedNotifications(_ server: ServerProcess) {
        for message in server.takeNotifications() {
            output("<-- \(message.jsonText)")
        }
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
