import JSON
import Testing

/// The examples of the JSON-RPC 2.0 specification (jsonrpc.org/specification, section 7) and the
/// rules of its sections 4 to 6, against a running server. The specification's methods (`subtract`,
/// `sum`, ...) do not exist here, so where it shows a result the server answers -32601; where a
/// method exists but takes named params, positional params get -32602.
@Suite("JSON-RPC 2.0 conformance")
struct ConformanceTests {
    // MARK: - Section 7 examples

    @Test("rpc call with positional params: -32602 naming params, for methods that take named params")
    func positionalParamsAreInvalidParams() throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "initialize", "params": [42, 23], "id": 1}"#)
        let error = expectError(try session.next(), code: -32602, id: 1)
        #expect(error?["data"]?["field"] == "params")
        try session.initialize()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "shutdown", "params": [42, 23], "id": 2}"#)
        let shutdownError = expectError(try session.next(), code: -32602, id: 2)
        // shutdown takes no params: the first one given is named.
        #expect(shutdownError?["data"]?["field"] == "params[0]")
        // The specification's own method does not exist here.
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 3}"#)
        expectError(try session.next(), code: -32601, id: 3)
        try session.shutdownAndExit()
    }

    @Test("a notification gets no response: the next message is the answer to the following request")
    func notificationGetsNothing() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#)
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "foobar"}"#)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a non-existent method: -32601 under the request's id")
    func nonExistentMethod() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#)
        let error = expectError(try session.next(), code: -32601, id: "1")
        #expect(error?["message"]?.stringValue?.contains("foobar") == true)
        try session.shutdownAndExit()
    }

    @Test("invalid JSON: -32700 with id null")
    func invalidJSON() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#)
        expectError(try session.next(), code: -32700, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an invalid request object: -32600 with id null")
    func invalidRequestObject() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#)
        expectError(try session.next(), code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a batch with invalid JSON: one -32700 with id null, not an array")
    func batchWithInvalidJSON() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"""
            [
              {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
              {"jsonrpc": "2.0", "method"
            ]
            """#)
        expectError(try session.next(), code: -32700, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an empty array: one -32600 with id null, not an array")
    func emptyBatch() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[]")
        expectError(try session.next(), code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an invalid batch of one, [1]: an array of one -32600")
    func invalidBatchOfOne() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[1]")
        let response = try session.next()
        let elements = try #require(response.arrayValue, "expected an array, got \(response.jsonText)")
        #expect(elements.count == 1)
        for element in elements { expectError(element, code: -32600, id: .null) }
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an invalid batch, [1,2,3]: an array of three -32600")
    func invalidBatchOfThree() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[1,2,3]")
        let response = try session.next()
        let elements = try #require(response.arrayValue, "expected an array, got \(response.jsonText)")
        #expect(elements.count == 3)
        for element in elements { expectError(element, code: -32600, id: .null) }
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a mixed batch: exactly the responses to its requests and its invalid members")
    func mixedBatch() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"""
            [
              {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
              {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
              {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
              {"foo": "boo"},
              {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
              {"jsonrpc": "2.0", "method": "get_data", "id": "9"},
              {"jsonrpc": "2.0", "method": "initialize", "id": 10},
              {"jsonrpc": "2.0", "method": "shutdown", "params": [1], "id": 11},
              {"jsonrpc": "1.0", "method": "get_data", "id": 12},
              {"jsonrpc": "2.0", "method": "initialized"}
            ]
            """#)
        let response = try session.next()
        let elements = try #require(response.arrayValue, "expected an array, got \(response.jsonText)")
        // The specification lets a batch's responses come in any order: match them by id.
        let expected: [(JSONValue, Int64)] = [
            ("1", -32601), ("2", -32601), (.null, -32600), ("5", -32601), ("9", -32601), (10, -32600), (11, -32602),
            (12, -32600),
        ]
        #expect(elements.count == expected.count, "\(response.jsonText)")
        var remaining = elements
        for (id, code) in expected {
            guard let index = remaining.firstIndex(where: { $0["id"] == id && $0["error"]?["code"] == .integer(code) }) else {
                Issue.record("no \(code) response with id \(id.jsonText) in \(response.jsonText)")
                continue
            }
            expectError(remaining.remove(at: index), code: code, id: id)
        }
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a batch of notifications only: nothing at all")
    func batchOfNotifications() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"""
            [
              {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
              {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
              {"jsonrpc": "2.0", "method": "initialized"}
            ]
            """#)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a batch of valid requests is answered with an array in which each id appears once")
    func batchOfRequests() throws {
        let session = try Session()
        try session.sendBody(#"""
            [
              {"jsonrpc": "2.0", "method": "initialize", "params": {"capabilities": {"positionEncodings": ["utf-8"]}}, "id": 1},
              {"jsonrpc": "2.0", "method": "initialized"},
              {"jsonrpc": "2.0", "method": "probe", "id": 2},
              {"jsonrpc": "2.0", "method": "shutdown", "id": 3}
            ]
            """#)
        let response = try session.next()
        let elements = try #require(response.arrayValue, "expected an array, got \(response.jsonText)")
        #expect(elements.count == 3)
        if elements.count == 3 {
            #expect(expectResult(elements[0], id: 1)?["capabilities"]?["positionEncoding"] == "utf-8")
            expectError(elements[1], code: -32601, id: 2)
            #expect(expectResult(elements[2], id: 3) == .null)
        }
        try session.notify("exit")
        try session.finish(status: 0)
    }

    @Test("a nested array in a batch is an invalid element; a batch of notifications and responses gets nothing")
    func nestedArraysAndResponsesInBatches() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[[]," + requestText(id: 1, method: "probe") + ",[1,2]]")
        let response = try session.next()
        let elements = response.arrayValue ?? []
        #expect(elements.count == 3, "\(response.jsonText)")
        if elements.count == 3 {
            expectError(elements[0], code: -32600, id: .null)
            expectError(elements[1], code: -32601, id: 1)
            expectError(elements[2], code: -32600, id: .null)
        }
        try session.sendBody(#"[{"jsonrpc":"2.0","id":5,"result":true},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"m"}}]"#)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("non-integral ids are echoed in the server's spelling of the same number")
    func doubleIdsAreEchoedInShortestForm() throws {
        let ids = ["0.1", "1e2", "1e-7", "-0.0", "1e16", "2.50"]
        var input = framed(requestText(id: 1, method: "initialize"))
        for id in ids { input += framed(#"{"jsonrpc":"2.0","id":"# + id + #","method":"x"}"#) }
        input += framed(requestText(id: 2, method: "shutdown")) + framed(notificationText(method: "exit"))
        let run = try RawRun.run([], input: input)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let bodies = try run.strictBodies().map { String(decoding: $0, as: UTF8.self) }
        let spelled = ["0.1", "100.0", "1e-07", "-0.0", "1e+16", "2.5"]
        #expect(bodies.count == ids.count + 2)
        for (index, id) in spelled.enumerated() where index + 1 < bodies.count {
            #expect(bodies[index + 1].hasPrefix(#"{"jsonrpc":"2.0","id":"# + id + ","), "\(bodies[index + 1])")
        }
    }

    // MARK: - Ids

    static let ids: [JSONValue] = [
        0, 1, -1, 42, .integer(Int64.max), .integer(Int64.min), "1", "abc", "", " ", "ünïcødé ✓ 日本語 🎉", "a/b",
        "quote \" and backslash \\", "line\nbreak", "nul\u{0}inside", 1.5, -0.25, 1e-05, 1e300, .double(Double.leastNonzeroMagnitude), -0.0,
    ]

    @Test("ids are echoed exactly", arguments: ids)
    func idsAreEchoed(id: JSONValue) throws {
        let session = try Session()
        // Before initialize (-32002), while running (-32601), after shutdown (-32600).
        try session.sendRequest(id: id, "probe")
        expectError(try session.next(), code: -32002, id: id)
        try session.initialize()
        try session.sendRequest(id: id, "probe")
        expectError(try session.next(), code: -32601, id: id)
        try session.sendRequest(id: id, "shutdown")
        #expect(expectResult(try session.next(), id: id) == .null)
        try session.sendRequest(id: id, "probe")
        expectError(try session.next(), code: -32600, id: id)
        try session.notify("exit")
        try session.finish(status: 0)
    }

    @Test("a request with id null is answered under id null")
    func nullIdRequest() throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc":"2.0","id":null,"method":"initialize"}"#)
        expectResult(try session.next(), id: .null)
        try session.sendBody(#"{"jsonrpc":"2.0","id":null,"method":"probe"}"#)
        expectError(try session.next(), code: -32601, id: .null)
        try session.shutdownAndExit()
    }

    // MARK: - Params

    @Test("params null means the same as absent params")
    func nullParamsEqualAbsent() throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}"#)
        #expect(expectResult(try session.next(), id: 1)?["capabilities"]?["positionEncoding"] == "utf-16")
        try session.sendBody(#"{"jsonrpc":"2.0","method":"initialized","params":null}"#)
        try session.sendBody(#"{"jsonrpc":"2.0","id":2,"method":"probe","params":null}"#)
        expectError(try session.next(), code: -32601, id: 2)
        try session.sendBody(#"{"jsonrpc":"2.0","id":3,"method":"shutdown","params":null}"#)
        #expect(expectResult(try session.next(), id: 3) == .null)
        try session.sendBody(#"{"jsonrpc":"2.0","method":"exit","params":null}"#)
        try session.finish(status: 0)
    }

    @Test("params that are neither an object nor an array: -32600 under the request's id", arguments: [
        #""bar""#, "42", "1.5", "true", "false",
    ])
    func paramsOfTheWrongKind(params: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc":"2.0","id":7,"method":"shutdown","params":"# + params + "}")
        expectError(try session.next(), code: -32600, id: 7)
        // Also as a notification: an invalid request, answered under id null.
        try session.sendBody(#"{"jsonrpc":"2.0","method":"initialized","params":"# + params + "}")
        expectError(try session.next(), code: -32600, id: .null)
        try session.shutdownAndExit()
    }

    @Test("unknown notifications are ignored")
    func unknownNotificationsAreIgnored() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("no/such/notification")
        try session.notify("$/no/such/notification", ["a": 1])
        try session.notify("textDocument/didOpen", ["textDocument": ["uri": "file:///x"]])
        try session.notify("", [1, 2])
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    // MARK: - Invalid request objects

    @Test("jsonrpc missing, \"1.0\", 2.0 as a number or anything but \"2.0\": -32600 under the request's id", arguments: [
        #"{"id":5,"method":"probe"}"#,
        #"{"jsonrpc":"1.0","id":5,"method":"probe"}"#,
        #"{"jsonrpc":2.0,"id":5,"method":"probe"}"#,
        #"{"jsonrpc":2,"id":5,"method":"probe"}"#,
        #"{"jsonrpc":"2.00","id":5,"method":"probe"}"#,
        #"{"jsonrpc":null,"id":5,"method":"probe"}"#,
        #"{"jsonrpc":["2.0"],"id":5,"method":"probe"}"#,
    ])
    func wrongJSONRPCVersion(body: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(body)
        expectError(try session.next(), code: -32600, id: 5)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("method that is not a string: -32600", arguments: [
        (#"{"jsonrpc":"2.0","id":6,"method":1}"#, JSONValue.integer(6)),
        (#"{"jsonrpc":"2.0","id":6,"method":null}"#, 6),
        (#"{"jsonrpc":"2.0","id":6,"method":["probe"]}"#, 6),
        (#"{"jsonrpc":"2.0","id":6,"method":{"name":"probe"}}"#, 6),
        (#"{"jsonrpc":"2.0","method":true}"#, .null),
        (#"{"jsonrpc":"2.0","id":6}"#, 6),
        (#"{"jsonrpc":"2.0"}"#, .null),
        ("{}", .null),
    ])
    func methodNotAString(body: String, id: JSONValue) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(body)
        expectError(try session.next(), code: -32600, id: id)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an id that is an object, an array or a boolean: -32600 with id null", arguments: [
        #"{"jsonrpc":"2.0","id":{"a":1},"method":"probe"}"#,
        #"{"jsonrpc":"2.0","id":[1],"method":"probe"}"#,
        #"{"jsonrpc":"2.0","id":[],"method":"probe"}"#,
        #"{"jsonrpc":"2.0","id":true,"method":"probe"}"#,
        #"{"jsonrpc":"2.0","id":false,"method":"shutdown"}"#,
    ])
    func idOfTheWrongKind(body: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(body)
        expectError(try session.next(), code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("messages that are not objects: -32600 with id null", arguments: [
        "1", #""probe""#, "null", "true", "1.5",
    ])
    func notAnObject(body: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(body)
        expectError(try session.next(), code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a response object from the client (result or error) gets no answer")
    func clientResponsesAreNotAnswered() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc":"2.0","id":1,"result":{"applied":true}}"#)
        try session.sendBody(#"{"jsonrpc":"2.0","id":"x","result":null}"#)
        try session.sendBody(#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no such method"}}"#)
        try session.sendBody(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"offset":3}}}"#)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a malformed response object is an invalid request: -32600", arguments: [
        (#"{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"both"}}"#, JSONValue.integer(3)),
        (#"{"jsonrpc":"2.0","id":3,"error":"failed"}"#, 3),
        (#"{"jsonrpc":"2.0","id":3,"error":{"code":"x","message":"m"}}"#, 3),
        (#"{"jsonrpc":"2.0","id":3,"error":{"code":1}}"#, 3),
        (#"{"jsonrpc":"2.0","result":1}"#, .null),
    ])
    func malformedResponses(body: String, id: JSONValue) throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(body)
        expectError(try session.next(), code: -32600, id: id)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }
}
