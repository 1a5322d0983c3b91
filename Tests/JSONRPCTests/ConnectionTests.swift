import JSON
import Logging
import Synchronization
import Testing

@testable import JSONRPC

/// A handler that echoes params, fails on "fail", and records what it saw.
private final class EchoHandler: MessageHandler {
    var notifications: [String] = []
    var answered: [RequestID] = []
    var exitStatus: Int32?
    /// The connection's output, and for each `answered` action run (method "held"), the ids of
    /// the responses written by then.
    var output: Captured?
    let writtenWhenAnswered = WrittenWhenAnswered()

    func handle(_ request: Request, context: RequestContext) async -> Reply {
        answered.append(request.id)
        if request.method == "fail" { return .now(.failure(ResponseError(.internalError, "failed"))) }
        if request.method == "later" {
            // Deferred work, answered after the messages behind it.
            let params = request.params ?? .null
            return .later {
                try? await Task.sleep(for: .milliseconds(50))
                return .success(params)
            }
        }
        if request.method == "held", let output {
            // Deferred work holding something until its answer is out (a document's turn).
            let written = writtenWhenAnswered
            return .later(
                { .success(.null) },
                answered: {
                    let ids = output.messages.withLock { messages in
                        messages.flatMap { $0.arrayValue ?? [$0] }.compactMap { $0["id"] }
                    }
                    written.ids.withLock { $0.append(ids) }
                })
        }
        return .now(.success(request.params ?? .null))
    }

    func handle(_ notification: Notification) async {
        notifications.append(notification.method)
        if notification.method == "exit" { exitStatus = 0 }
    }

    func handle(_ response: Response) async {}

    func inputEnded(midMessage: Bool) async -> Int32 { 1 }
}

/// The ids of the responses written when each `answered` action ran.
private final class WrittenWhenAnswered: Sendable {
    let ids = Mutex<[[JSONValue]]>([])
}

/// A connection whose output is captured as parsed messages.
private final class Captured: Sendable {
    let messages = Mutex<[JSONValue]>([])
}

private final class Harness {
    let output = Captured()
    let connection: Connection
    let decoder: InboundDecoder
    let handler = EchoHandler()

    init() {
        let output = self.output
        let writer = MessageWriter(sink: { bytes in
            var parser = FrameParser()
            for case .message(let body) in parser.feed(bytes) {
                let value = try! JSONParser().parse(body)
                output.messages.withLock { $0.append(value) }
            }
            return true
        })
        handler.output = output
        connection = Connection(input: -1, writer: writer, maxMessageSize: 1 << 20, logger: Logger(label: "test"))
        decoder = InboundDecoder(maxMessageSize: 1 << 20, pending: connection.pending)
    }

    /// Feeds raw framed bytes and dispatches everything they complete; answers the output.
    func run(_ stream: [UInt8]) async -> [JSONValue] {
        var deferred: [Task<Void, Never>] = []
        for item in decoder.decode(stream) {
            if let task = await connection.dispatch(item, to: handler) { deferred.append(task) }
        }
        for task in deferred { await task.value }
        return output.messages.withLock { output in
            defer { output.removeAll() }
            return output
        }
    }

    func run(_ bodies: String...) async -> [JSONValue] {
        await run(bodies.flatMap { Framing.frame(Array($0.utf8)) })
    }
}

@Suite("Connection: dispatch and batches")
struct ConnectionTests {
    @Test("a request is answered once with its id; a notification is not answered")
    func requestAndNotification() async {
        let harness = Harness()
        let output = await harness.run(#"{"jsonrpc":"2.0","method":"note"}"#, #"{"jsonrpc":"2.0","id":"q","method":"m","params":[1]}"#)
        #expect(output == [["jsonrpc": "2.0", "id": "q", "result": [1]]])
        #expect(harness.handler.notifications == ["note"])
    }

    @Test("unparseable JSON is -32700 under id null, with the offset")
    func parseError() async {
        let output = await Harness().run(#"{"jsonrpc":"2.0","id":1,"method":"m",}"#)
        #expect(output.count == 1)
        #expect(output.first?["id"] == .null)
        #expect(output.first?["error"]?["code"] == -32700)
        #expect(output.first?["error"]?["data"]?["offset"] == 37)
    }

    @Test("an empty batch gets one -32600, not an array")
    func emptyBatch() async {
        let output = await Harness().run("[]")
        #expect(output.count == 1)
        #expect(output.first?["error"]?["code"] == -32600)
        #expect(output.first?["id"] == .null)
    }

    @Test("a batch of invalid elements gets one -32600 per element")
    func invalidBatch() async {
        let output = await Harness().run("[1,2,3]")
        let elements = output.first?.arrayValue ?? []
        #expect(output.count == 1)
        #expect(elements.count == 3)
        #expect(elements.allSatisfy { $0["error"]?["code"] == -32600 && $0["id"] == .null })
    }

    @Test("a mixed batch answers its requests and invalid members, in order, in one array")
    func mixedBatch() async {
        let harness = Harness()
        let output = await harness.run(#"""
            [{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},
             {"jsonrpc":"2.0","method":"notify_hello","params":[7]},
             {"jsonrpc":"2.0","method":"fail","id":"2"},
             {"foo":"boo"},
             {"jsonrpc":"2.0","method":"get_data","id":"9"}]
            """#)
        let elements = output.first?.arrayValue ?? []
        #expect(output.count == 1)
        #expect(elements.map { $0["id"] } == ["1", "2", nil as JSONValue?, "9"].map { $0 ?? .null })
        #expect(elements[1]["error"]?["code"] == -32603)
        #expect(elements[2]["error"]?["code"] == -32600)
        #expect(harness.handler.notifications == ["notify_hello"])
    }

    @Test("a batch of notifications only gets no answer at all")
    func notificationBatch() async {
        let harness = Harness()
        let output = await harness.run(#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]"#)
        #expect(output.isEmpty)
        #expect(harness.handler.notifications == ["a", "b"])
    }

    @Test("framing faults are -32700 and the next message is still answered")
    func framingFault() async {
        let harness = Harness()
        let output = await harness.run(Array("Content-Length: -1\r\n\r\n{}".utf8) + Framing.frame(Array(#"{"jsonrpc":"2.0","id":1,"method":"m"}"#.utf8)))
        #expect(output.count == 2)
        #expect(output.first?["error"]?["code"] == -32700)
        #expect(output.last?["id"] == 1)
    }

    @Test("$/cancelRequest arriving with the request overtakes it: -32800, and the handler never runs")
    func cancelOvertakes() async {
        let harness = Harness()
        let output = await harness.run(
            #"{"jsonrpc":"2.0","id":41,"method":"slow"}"#,
            #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":41}}"#,
            #"{"jsonrpc":"2.0","id":42,"method":"m"}"#)
        #expect(output.count == 2)
        #expect(output.first?["id"] == 41)
        #expect(output.first?["error"]?["code"] == -32800)
        #expect(output.last?["id"] == 42)
        #expect(harness.handler.answered == [.integer(42)])
        #expect(harness.connection.pending.count == 0)
    }

    @Test("cancelling an id that is not pending changes nothing")
    func cancelUnknown() async {
        let harness = Harness()
        _ = await harness.run(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}}"#)
        let output = await harness.run(#"{"jsonrpc":"2.0","id":5,"method":"m"}"#)
        #expect(output.first?["result"] == .null)
    }
}

@Suite("Connection: deferred replies")
struct DeferredReplyTests {
    @Test("a deferred reply lets the next request be answered first, and is still answered once")
    func overtaken() async {
        let harness = Harness()
        let output = await harness.run(#"{"jsonrpc":"2.0","id":1,"method":"later","params":["slow"]}"#, #"{"jsonrpc":"2.0","id":2,"method":"m"}"#)
        #expect(output.map { $0["id"] } == [2, 1])
        #expect(output.last?["result"] == ["slow"])
        #expect(harness.connection.pending.count == 0)
    }

    @Test("what a deferred reply holds is let go of once its response is written, alone or in a batch")
    func answeredAfterTheResponse() async {
        let harness = Harness()
        _ = await harness.run(#"{"jsonrpc":"2.0","id":1,"method":"held"}"#)
        #expect(harness.handler.writtenWhenAnswered.ids.withLock { $0 } == [[1]])
        _ = await harness.run(#"[{"jsonrpc":"2.0","id":2,"method":"held"},{"jsonrpc":"2.0","id":3,"method":"held"},{"jsonrpc":"2.0","id":4,"method":"m"}]"#)
        // The batch's one array is written before either of its members' actions runs (the
        // harness clears what the first run wrote).
        let written = harness.handler.writtenWhenAnswered.ids.withLock { $0 }
        #expect(written.count == 3)
        #expect(written.dropFirst().allSatisfy { $0 == [2, 3, 4] })
    }

    @Test("a batch with a deferred member is answered with one array once it finishes")
    func batch() async {
        let harness = Harness()
        let output = await harness.run(#"[{"jsonrpc":"2.0","id":1,"method":"later"},{"jsonrpc":"2.0","id":2,"method":"m"},{"jsonrpc":"2.0","method":"n"}]"#)
        #expect(output.count == 1)
        #expect(output.first?.arrayValue?.map { $0["id"] } == [1, 2])
    }
}

@Suite("Pending requests")
struct PendingRequestsTests {
    @Test("a reused id gets a fresh token once the first is answered")
    func reusedID() {
        let pending = PendingRequests()
        pending.enqueue(.integer(1))
        pending.enqueue(.integer(1))
        #expect(pending.cancel(.integer(1)))
        #expect(pending.token(for: .integer(1)).isCancelled)
        pending.finish(.integer(1))
        #expect(!pending.token(for: .integer(1)).isCancelled)
        pending.finish(.integer(1))
        #expect(pending.count == 0)
        #expect(!pending.cancel(.integer(1)))
    }
}
