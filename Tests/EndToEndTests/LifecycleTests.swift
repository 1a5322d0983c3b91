import JSON
import Testing

/// One client offer of position encodings and the encoding the server must choose.
struct EncodingOffer: Sendable, CustomTestStringConvertible {
    let label: String
    let params: JSONValue?
    let chosen: String
    var testDescription: String { label }
}

@Suite("Lifecycle: initialize, shutdown, exit")
struct LifecycleTests {
    static let offers: [EncodingOffer] = [
        EncodingOffer(
            label: "general: utf-8, utf-16, utf-32 -> utf-8",
            params: ["capabilities": ["general": ["positionEncodings": ["utf-8", "utf-16", "utf-32"]]]], chosen: "utf-8"),
        EncodingOffer(
            label: "general: utf-32, utf-8, utf-16 -> utf-32",
            params: ["capabilities": ["general": ["positionEncodings": ["utf-32", "utf-8", "utf-16"]]]], chosen: "utf-32"),
        EncodingOffer(
            label: "general: utf-16, utf-32 -> utf-16",
            params: ["capabilities": ["general": ["positionEncodings": ["utf-16", "utf-32"]]]], chosen: "utf-16"),
        EncodingOffer(
            label: "general: utf-32 alone -> utf-32",
            params: ["capabilities": ["general": ["positionEncodings": ["utf-32"]]]], chosen: "utf-32"),
        EncodingOffer(
            label: "short form: utf-8 -> utf-8",
            params: ["capabilities": ["positionEncodings": ["utf-8"]]], chosen: "utf-8"),
        EncodingOffer(
            label: "short form: utf-32, utf-16 -> utf-32",
            params: ["capabilities": ["positionEncodings": ["utf-32", "utf-16"]]], chosen: "utf-32"),
        EncodingOffer(
            label: "unknown names skipped: ucs-2, UTF-8, latin1, utf-32 -> utf-32",
            params: ["capabilities": ["general": ["positionEncodings": ["ucs-2", "UTF-8", "latin1", "utf-32"]]]],
            chosen: "utf-32"),
        EncodingOffer(
            label: "only unknown names -> utf-16",
            params: ["capabilities": ["general": ["positionEncodings": ["ucs-2", "wtf-8"]]]], chosen: "utf-16"),
        EncodingOffer(
            label: "empty list -> utf-16",
            params: ["capabilities": ["general": ["positionEncodings": []]]], chosen: "utf-16"),
        EncodingOffer(
            label: "general wins over the short form",
            params: ["capabilities": ["general": ["positionEncodings": ["utf-8"]], "positionEncodings": ["utf-32"]]],
            chosen: "utf-8"),
        EncodingOffer(
            label: "general without a list falls back to the short form",
            params: ["capabilities": ["general": [:], "positionEncodings": ["utf-32"]]], chosen: "utf-32"),
        EncodingOffer(
            label: "an empty general list counts as absent: the short form is read",
            params: ["capabilities": ["general": ["positionEncodings": []], "positionEncodings": ["utf-32"]]],
            chosen: "utf-32"),
        EncodingOffer(
            label: "a null general list counts as absent: the short form is read",
            params: ["capabilities": ["general": ["positionEncodings": .null], "positionEncodings": ["utf-8"]]],
            chosen: "utf-8"),
        EncodingOffer(
            label: "a non-empty general list of unknown names still wins over the short form",
            params: ["capabilities": ["general": ["positionEncodings": ["ucs-2"]], "positionEncodings": ["utf-8"]]],
            chosen: "utf-16"),
        EncodingOffer(label: "no capabilities -> utf-16", params: ["capabilities": [:]], chosen: "utf-16"),
        EncodingOffer(label: "empty params -> utf-16", params: [:], chosen: "utf-16"),
        EncodingOffer(label: "no params -> utf-16", params: nil, chosen: "utf-16"),
        EncodingOffer(label: "null params -> utf-16", params: .null, chosen: "utf-16"),
    ]

    @Test("initialize chooses the first position encoding the client lists that the server knows", arguments: offers)
    func initializeNegotiatesThePositionEncoding(offer: EncodingOffer) throws {
        let session = try Session()
        let result = try session.initialize(offer.params)
        #expect(result["capabilities"]?["positionEncoding"] == .string(offer.chosen))
        #expect(result["serverInfo"]?["name"] == "docsession")
        #expect(result["serverInfo"]?["version"]?.stringValue?.isEmpty == false)
        try session.shutdownAndExit()
    }

    @Test("initialize accepts the fields LSP clients send alongside the encodings")
    func initializeAcceptsATypicalLSPClient() throws {
        let session = try Session()
        let result = try session.initialize([
            "processId": 4242,
            "clientInfo": ["name": "Emacs", "version": "29.1"],
            "rootUri": "file:///tmp",
            "trace": "off",
            "capabilities": ["general": ["positionEncodings": ["utf-8", "utf-16"]], "textDocument": [:]],
            "someFutureField": ["anything": [1, 2, 3]],
        ])
        #expect(result["capabilities"]?["positionEncoding"] == "utf-8")
        try session.shutdownAndExit()
    }

    @Test("every request before initialize, unknown methods included, is answered -32002")
    func requestsBeforeInitializeAreRefused() throws {
        let session = try Session()
        for (id, method) in [(JSONValue.integer(1), "shutdown"), ("two", "document/open"), (3, "no/such/method"), (4, "$/cancelRequest"), (5, "initialized")] {
            try session.sendRequest(id: id, method, method == "document/open" ? ["uri": "file:///tmp/x"] : nil)
            let error = expectError(try session.next(), code: -32002, id: id)
            #expect(error?["message"]?.stringValue?.contains(method) == true)
        }
        try session.initialize()
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("notifications before initialize are dropped without an answer")
    func notificationsBeforeInitializeAreDropped() throws {
        let session = try Session()
        // Were $/setTrace applied, initialize's answer would be preceded by $/logTrace notifications.
        try session.notify("$/setTrace", ["value": "verbose"])
        try session.notify("initialized")
        try session.notify("no/such/notification", ["x": 1])
        try session.expectNothingElse(code: -32002)
        let id = JSONValue.integer(10)
        try session.sendRequest(id: id, "initialize")
        expectResult(try session.next(), id: id)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a second initialize is refused with -32600 and the session goes on")
    func secondInitializeIsRefused() throws {
        let session = try Session()
        try session.initialize(["capabilities": ["positionEncodings": ["utf-32"]]])
        try session.notify("initialized")
        let id = JSONValue.integer(99)
        try session.sendRequest(id: id, "initialize", ["capabilities": ["positionEncodings": ["utf-8"]]])
        expectError(try session.next(), code: -32600, id: id)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("shutdown answers null; with params {} or [] too, with other params -32602")
    func shutdownAnswersNull() throws {
        for params: JSONValue? in [nil, .null, [:], []] {
            let session = try Session()
            try session.initialize()
            let response = try session.request("shutdown", params)
            #expect(response["result"] == .null, "shutdown with params \(params?.jsonText ?? "absent"): \(response.jsonText)")
            #expect(response["error"] == nil)
            try session.notify("exit")
            try session.finish(status: 0)
        }
        let session = try Session()
        try session.initialize()
        let error = expectError(try session.request("shutdown", ["save": true]), code: -32602, id: 2)
        #expect(error?["data"]?["field"] == "params.save")
        try session.shutdownAndExit()
    }

    @Test("after shutdown every request is answered -32600 and notifications other than exit are dropped")
    func requestsAfterShutdownAreRefused() throws {
        let session = try Session()
        try session.initialize()
        #expect(try session.request("shutdown")["result"] == .null)
        for method in ["initialize", "shutdown", "no/such/method"] {
            let id = JSONValue.string("after-\(method)")
            try session.sendRequest(id: id, method)
            expectError(try session.next(), code: -32600, id: id)
        }
        try session.notify("$/setTrace", ["value": "verbose"])
        try session.notify("initialized")
        try session.expectNothingElse(code: -32600)
        try session.notify("exit")
        try session.finish(status: 0)
    }

    @Test("exit after shutdown: status 0")
    func exitAfterShutdownExitsZero() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("initialized")
        #expect(try session.request("shutdown")["result"] == .null)
        try session.notify("exit")
        // The exit happens without the input ending: the server stops by itself.
        #expect(try session.server.waitForExit(timeout: e2eTimeout) == 0)
        try session.finish(status: 0)
    }

    @Test("exit without shutdown: status 1")
    func exitWithoutShutdownExitsOne() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("exit")
        #expect(try session.server.waitForExit(timeout: e2eTimeout) == 1)
        try session.finish(status: 1)
    }

    @Test("exit before initialize: status 1")
    func exitBeforeInitializeExitsOne() throws {
        let session = try Session()
        try session.notify("exit")
        #expect(try session.server.waitForExit(timeout: e2eTimeout) == 1)
        try session.finish(status: 1)
    }

    @Test("end of input without shutdown: status 1 and a warning on stderr")
    func endOfInputWithoutShutdownExitsOne() throws {
        let session = try Session()
        try session.initialize()
        try session.finish(status: 1)
        #expect(session.stderr(containing: "without shutdown").contains("without shutdown"))
    }

    @Test("end of input before anything was sent: status 1")
    func endOfInputAtOnceExitsOne() throws {
        let session = try Session()
        try session.finish(status: 1)
    }

    @Test("end of input after shutdown but without exit: status 0")
    func endOfInputAfterShutdownExitsZero() throws {
        let session = try Session()
        try session.initialize()
        #expect(try session.request("shutdown")["result"] == .null)
        try session.finish(status: 0)
        #expect(!session.finalStderr().contains("without shutdown"))
    }

    static let partialMessages: [String] = [
        "Content-Len",
        "Content-Length: 40",
        "Content-Length: 40\r\n",
        "Content-Length: 40\r\n\r\n",
        "Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,",
    ]

    @Test("end of input in the middle of a message: the fragment is dropped unanswered, status 1 without shutdown",
        arguments: partialMessages)
    func endOfInputMidMessageWithoutShutdown(fragment: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(fragment)
        try session.finish(status: 1)
        #expect(session.stderr(containing: "middle of a message").contains("middle of a message"))
    }

    @Test("end of input in the middle of a message after shutdown: status 0", arguments: partialMessages)
    func endOfInputMidMessageAfterShutdown(fragment: String) throws {
        let session = try Session()
        try session.initialize()
        #expect(try session.request("shutdown")["result"] == .null)
        try session.sendRaw(fragment)
        try session.finish(status: 0)
        #expect(session.stderr(containing: "middle of a message").contains("middle of a message"))
    }

    static let badInitializeParams: [(String, String)] = [
        (#"{"capabilities":{"general":{"positionEncodings":["utf-8",5]}}}"#, "params.capabilities.general.positionEncodings[1]"),
        (#"{"capabilities":{"general":{"positionEncodings":"utf-8"}}}"#, "params.capabilities.general.positionEncodings"),
        (#"{"capabilities":{"positionEncodings":[null]}}"#, "params.capabilities.positionEncodings[0]"),
        (#"{"capabilities":{"general":[]}}"#, "params.capabilities.general"),
        (#"{"capabilities":true}"#, "params.capabilities"),
        (#"{"processId":"42"}"#, "params.processId"),
        (#"{"processId":1.5}"#, "params.processId"),
        (#"{"clientInfo":{}}"#, "params.clientInfo.name"),
        (#"{"clientInfo":{"name":"x","version":2}}"#, "params.clientInfo.version"),
        (#"{"clientInfo":"Emacs"}"#, "params.clientInfo"),
        (#"{"trace":"loud"}"#, "params.trace"),
        (#"{"trace":true}"#, "params.trace"),
        (#"[{"capabilities":{}}]"#, "params"),
    ]

    @Test("bad initialize params: -32602 naming the field, and the server stays uninitialized",
        arguments: badInitializeParams)
    func badInitializeParamsNameTheField(params: String, field: String) throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":"# + params + "}")
        let error = expectError(try session.next(), code: -32602, id: 1)
        #expect(error?["data"]?["field"] == .string(field))
        #expect(error?["message"]?.stringValue?.hasPrefix(field + ":") == true, "\(error?.jsonText ?? "")")
        // Still uninitialized: other requests get -32002, and a valid initialize succeeds.
        try session.expectNothingElse(code: -32002)
        let result = try session.initialize(["capabilities": ["positionEncodings": ["utf-32"]]])
        #expect(result["capabilities"]?["positionEncoding"] == "utf-32")
        try session.shutdownAndExit()
    }

    @Test("a bad field in initialize applies none of the good ones before it (no trace level set)")
    func badInitializeAppliesNothing() throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"trace":"verbose","capabilities":{"positionEncodings":[1]}}}"#)
        expectError(try session.next(), code: -32602, id: 1)
        // Had "verbose" been kept, $/logTrace notifications would come before these answers.
        let result = try session.initialize()
        #expect(result["capabilities"]?["positionEncoding"] == "utf-16")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a notification method sent with an id is answered -32600 and not acted on")
    func notificationMethodsWithAnId() throws {
        let session = try Session()
        try session.initialize()
        for (id, method) in [(JSONValue.integer(20), "initialized"), (21, "exit"), (22, "$/setTrace")] {
            try session.sendRequest(id: id, method, method == "$/setTrace" ? ["value": "verbose"] : nil)
            expectError(try session.next(), code: -32600, id: id)
        }
        // Still running (exit did not happen) and not tracing ($/setTrace did not happen).
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a request method sent without an id is not acted on")
    func requestMethodsWithoutAnId() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("shutdown")
        try session.notify("initialize", ["capabilities": ["positionEncodings": ["utf-8"]]])
        // Not shut down: an unknown method still gets -32601, not -32600.
        try session.expectNothingElse()
        try session.shutdownAndExit()
        let stderr = session.stderr(containing: "initialize")
        #expect(stderr.contains("shutdown") && stderr.contains("initialize"), "a warning for each: \(stderr)")
    }

    @Test("shutdown and exit in one batch: the batch's answer, then exit status 0")
    func shutdownAndExitInOneBatch() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[" + requestText(id: 2, method: "shutdown") + "," + notificationText(method: "exit") + "]")
        let response = try session.next()
        #expect(response.arrayValue?.count == 1, "\(response.jsonText)")
        #expect(expectResult(response[0] ?? .null, id: 2) == .null)
        try session.finish(status: 0)
    }

    @Test(
        "nothing after exit is processed, not even the rest of the batch that holds it",
        arguments: [false, true])
    func nothingAfterExitInABatch(shutDownFirst: Bool) throws {
        let session = try Session()
        try session.initialize()
        var elements: [String] = []
        if shutDownFirst { elements.append(requestText(id: "first", method: "shutdown")) }
        elements.append(notificationText(method: "exit"))
        elements.append(requestText(id: "after-exit", method: "probe"))
        try session.sendBody("[" + elements.joined(separator: ",") + "]")
        session.server.closeInput()
        var written = try session.server.drain(timeout: e2eTimeout)
        if shutDownFirst {
            // The shutdown before exit is answered, in an array of its own.
            let batch = written.first?.arrayValue ?? []
            #expect(batch.first?["id"] == "first" && batch.first?["result"] == .null, "\(written.map(\.jsonText))")
            written = batch.count > 1 ? [.array(Array(batch.dropFirst()))] : Array(written.dropFirst())
        }
        #expect(written.isEmpty, "answered after exit: \(written.map(\.jsonText))")
        #expect(try session.server.waitForExit(timeout: e2eTimeout) == (shutDownFirst ? 0 : 1))
        #expect(session.server.outputFramingErrors.isEmpty)
    }

    @Test("exit with thousands of messages still queued behind it: the server stops at once with exit's status",
        arguments: [true, false])
    func exitWithMessagesQueuedBehindIt(afterShutdown: Bool) throws {
        let session = try Session()
        try session.initialize()
        var bytes: [UInt8] = []
        if afterShutdown { bytes += framed(requestText(id: "shutdown", method: "shutdown")) }
        bytes += framed(notificationText(method: "exit"))
        // More than the connection's queue holds, so the reader is blocked when exit is handled.
        for index in 0..<6000 { bytes += framed(requestText(id: .integer(Int64(index)), method: "probe")) }
        // The server may exit before it has read everything: a broken pipe here is expected.
        try? session.sendRaw(bytes)
        if afterShutdown { #expect(try session.next()["id"] == "shutdown") }
        try session.finish(status: afterShutdown ? 0 : 1)
    }
}
