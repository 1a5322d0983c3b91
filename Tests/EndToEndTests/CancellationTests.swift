import JSON
import JSONRPC
import Testing

/// `$/cancelRequest`: the reader applies it ahead of the ordered queue, so a request and its
/// cancellation written together (one write, one read) never runs.
@Suite("Cancellation")
struct CancellationTests {
    static func cancel(_ id: JSONValue) -> [UInt8] {
        framed(notificationText(method: "$/cancelRequest", params: ["id": id]))
    }

    @Test("a request and its cancellation in one write: -32800, and the request never ran")
    func requestCancelledInTheSameWrite() throws {
        let session = try Session()
        try session.initialize()
        // Were shutdown run, the probe after it would get -32600 instead of -32601.
        try session.sendRaw(framed(requestText(id: 5, method: "shutdown")) + Self.cancel(5))
        let error = expectError(try session.next(), code: -32800, id: 5)
        #expect(error?["message"]?.stringValue?.isEmpty == false)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a cancelled initialize leaves the server uninitialized")
    func cancelledInitialize() throws {
        let session = try Session()
        try session.sendRaw(framed(requestText(id: "init", method: "initialize")) + Self.cancel("init"))
        expectError(try session.next(), code: -32800, id: "init")
        try session.expectNothingElse(code: -32002)
        try session.initialize()
        try session.shutdownAndExit()
    }

    @Test("cancellation matches the id exactly (string and integer ids) and only that request", arguments: [
        JSONValue.integer(2), .string("2"), .string(""), .integer(0), .integer(Int64.min), .string("ünï/😀"),
    ])
    func onlyTheNamedRequestIsCancelled(id: JSONValue) throws {
        let session = try Session()
        try session.initialize()
        // "2" and 2 are different ids: cancelling one must not cancel the other.
        let other: JSONValue = id == .integer(2) ? .string("2") : (id == .string("2") ? .integer(2) : "other")
        try session.sendRaw(
            framed(requestText(id: "before", method: "probe")) + framed(requestText(id: id, method: "probe"))
                + framed(requestText(id: other, method: "probe")) + Self.cancel(id)
                + framed(requestText(id: "after", method: "probe")))
        expectError(try session.next(), code: -32601, id: "before")
        expectError(try session.next(), code: -32800, id: id)
        expectError(try session.next(), code: -32601, id: other)
        expectError(try session.next(), code: -32601, id: "after")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("ids match by type and value: 5.0 and \"5\" do not cancel 5")
    func cancellationMatchesTypeAndValue() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(
            framed(requestText(id: 5, method: "probe")) + framed(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5.0}}"#)
                + Self.cancel("5"))
        expectError(try session.next(), code: -32601, id: 5)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("when several pending requests share an id, only the one received first is cancelled")
    func sharedIdCancelsTheFirstOnly() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(
            framed(requestText(id: 5, method: "probe/first")) + framed(requestText(id: 5, method: "probe/second")) + Self.cancel(5))
        expectError(try session.next(), code: -32800, id: 5)
        let second = expectError(try session.next(), code: -32601, id: 5)
        #expect(second?["message"]?.stringValue?.contains("probe/second") == true)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a cancellation is applied in every lifecycle state: after shutdown the cancelled request gets -32800, not -32600")
    func cancellationAfterShutdown() throws {
        let session = try Session()
        try session.initialize()
        #expect(try session.request("shutdown")["result"] == .null)
        try session.sendRaw(framed(requestText(id: 8, method: "probe")) + Self.cancel(8))
        expectError(try session.next(), code: -32800, id: 8)
        try session.expectNothingElse(code: -32600)
        try session.notify("exit")
        try session.finish(status: 0)
    }

    @Test("neither $/cancelRequest nor a request cancelled before it started is traced")
    func cancellationIsNotTraced() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("$/setTrace", ["value": "verbose"])
        try session.sendRaw(framed(requestText(id: 5, method: "probe")) + Self.cancel(5) + Self.cancel(404))
        expectError(try session.next(), code: -32800, id: 5)
        try session.notify("$/setTrace", ["value": "off"])
        let trace = try session.next()
        #expect(trace["method"] == "$/logTrace" && trace["params"]?["message"] == "Received notification '$/setTrace'.", "\(trace.jsonText)")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("cancelling an id that is not pending does nothing")
    func cancellingAnUnknownIdDoesNothing() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(Self.cancel(12345))
        try session.sendRaw(Self.cancel("never-sent"))
        try session.expectNothingElse()
        // An id already answered.
        let response = try session.request("probe")
        let answeredID = try #require(response["id"])
        try session.sendRaw(Self.cancel(answeredID))
        try session.expectNothingElse()
        // Reusing the answered id afterwards: a fresh request, not cancelled.
        try session.sendRequest(id: answeredID, "probe")
        expectError(try session.next(), code: -32601, id: answeredID)
        try session.shutdownAndExit()
    }

    @Test("a cancellation that arrives before its request does not affect it")
    func cancelBeforeRequestDoesNothing() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(Self.cancel(7) + framed(requestText(id: 7, method: "probe")))
        expectError(try session.next(), code: -32601, id: 7)
        try session.shutdownAndExit()
    }

    @Test("malformed cancellation params are ignored", arguments: [
        #"{"jsonrpc":"2.0","method":"$/cancelRequest"}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":null}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":null}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":{"id":5}}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":[5]}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":true}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"5"}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"ID":5}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":[5]}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":[{"id":5}]}"#,
    ])
    func malformedCancelParamsAreIgnored(cancel: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(framed(requestText(id: 5, method: "probe")) + framed(cancel))
        expectError(try session.next(), code: -32601, id: 5)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a cancellation whose params are not structured is an invalid request, answered -32600 with id null")
    func unstructuredCancelParams() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(
            framed(requestText(id: 5, method: "probe")) + framed(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":5}"#))
        expectError(try session.next(), code: -32601, id: 5)
        expectError(try session.next(), code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a request and its cancellation in one batch: the batch's answer holds the -32800")
    func cancellationInsideABatch() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody("[" + requestText(id: 8, method: "shutdown") + "," + notificationText(method: "$/cancelRequest", params: ["id": 8])
            + "," + requestText(id: 9, method: "probe") + "]")
        let response = try session.next()
        let elements = try #require(response.arrayValue, "expected an array, got \(response.jsonText)")
        #expect(elements.count == 2)
        if elements.count == 2 {
            expectError(elements[0], code: -32800, id: 8)
            expectError(elements[1], code: -32601, id: 9)
        }
        // A batch holding only a cancellation is a batch of notifications: no answer at all.
        try session.sendBody("[" + notificationText(method: "$/cancelRequest", params: ["id": 99]) + "]")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("$/cancelRequest sent with an id is an invalid request (-32600) and cancels nothing")
    func cancelRequestWithAnId() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(
            framed(requestText(id: 5, method: "shutdown"))
                + framed(requestText(id: 6, method: "$/cancelRequest", params: ["id": 5])))
        #expect(expectResult(try session.next(), id: 5) == .null)
        expectError(try session.next(), code: -32600, id: 6)
        try session.notify("exit")
        try session.finish(status: 0)
    }
}
