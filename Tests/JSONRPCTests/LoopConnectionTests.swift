import Execution
import JSON
import Logging
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// What the test handlers share: each request is answered with its params, "slow" blocks the
/// loop's thread until the test releases it (`blockUntilReleased`), `exit` ends the session.
private class TestHandler: MessageHandler, @unchecked Sendable {
    let loop: LoopExecutor
    let started = Atomic<Int>(0)
    let release = Atomic<Bool>(false)
    var exitStatus: Int32?

    init(loop: LoopExecutor) { self.loop = loop }

    /// Called with each request `handle` answers.
    func record(_ request: Request) {}

    func handle(_ request: Request, context: RequestContext) async -> Reply {
        record(request)
        if request.method == "slow" { blockUntilReleased(started: started, release: release) }
        return .now(.success(request.params ?? .null))
    }

    func answerImmediately(_ request: Request, context: RequestContext) -> Result<JSONValue, ResponseError>? { nil }
    var paramsPredecoder: ParamsPredecoder? { nil }

    func handle(_ notification: Notification) async {
        if notification.method == "exit" { exitStatus = 0 }
    }

    func handle(_ response: Response) async {}
    func inputEnded(midMessage: Bool) async -> Int32 { 1 }
}

/// Records, per request, whether it ran on the loop.
private final class LoopHandler: TestHandler, @unchecked Sendable {
    var onLoop: [Bool] = []
    override func record(_ request: Request) { onLoop.append(loop.isCurrent) }
}

/// What "slow" does: says it started, then blocks the loop's thread (as a long synchronous handler
/// would) until the test releases it, at most 60 s; so that what the test sends meanwhile arrives
/// while it blocks, however late the test's own task gets to run on a busy machine.
private func blockUntilReleased(started: borrowing Atomic<Int>, release: borrowing Atomic<Bool>) {
    started.add(1, ordering: .releasing)
    let deadline = ContinuousClock.now + .seconds(60)
    while !release.load(ordering: .acquiring), ContinuousClock.now < deadline { usleep(100) }
}

/// Waits, without suspending (a sleeping task would need the busy pool to wake), until `started`.
private func waitUntilStarted(_ started: borrowing Atomic<Int>) {
    let deadline = ContinuousClock.now + .seconds(60)
    while started.load(ordering: .acquiring) == 0, ContinuousClock.now < deadline { usleep(100) }
}

/// Framed messages written to a pipe that a connection reads; the connection's writes captured.
private final class PipeHarness: @unchecked Sendable {
    let loop = LoopExecutor(name: "test-conn")
    let input: Int32
    let feed: Int32
    final class Writes: Sendable {
        let chunks = Mutex<[[UInt8]]>([])
    }
    let writes = Writes()
    let connection: Connection

    init() {
        var ends: [Int32] = [0, 0]
        precondition(pipe(&ends) == 0)
        input = ends[0]
        feed = ends[1]
        let writes = writes
        let writer = MessageWriter(sink: { bytes in
            writes.chunks.withLock { $0.append(bytes) }
            return true
        })
        connection = Connection(
            input: input, writer: writer, maxMessageSize: 1 << 20, logger: Logger(label: "test"), recorder: nil, executor: loop)
    }

    deinit {
        close(input)
        close(feed)
    }

    func send(_ messages: [String]) {
        var bytes: [UInt8] = []
        for message in messages { bytes += Framing.frame(Array(message.utf8)) }
        precondition(FileDescriptorIO.writeAll(feed, bytes))
    }

    /// Every message written, in order, and how many writes carried them.
    var output: (messages: [JSONValue], writes: Int) {
        let chunks = writes.chunks.withLock { $0 }
        var parser = FrameParser()
        var messages: [JSONValue] = []
        for chunk in chunks {
            for case .message(let body) in parser.feed(chunk) { messages.append(try! JSONParser().parse(body)) }
        }
        return (messages, chunks.count)
    }
}

private func request(_ id: Int, _ method: String = "echo") -> String {
    #"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)","params":{"n":\#(id)}}"#
}

private let exitMessage = #"{"jsonrpc":"2.0","method":"exit"}"#

@Suite("Connection on one thread: reading, dispatching and writing on the loop")
struct LoopConnectionTests {
    @Test("every request is handled on the loop's thread; answers queued together go out in fewer writes, in order")
    func oneThreadAndCoalescing() async {
        let harness = PipeHarness()
        let handler = LoopHandler(loop: harness.loop)
        // All written before the connection starts: the first read finds them queued together.
        harness.send((1...200).map { request($0) } + [exitMessage])
        let status = await harness.connection.run(handler: handler)
        #expect(status == 0)
        #expect(handler.onLoop.count == 200)
        #expect(handler.onLoop.allSatisfy { $0 })
        let (messages, writes) = harness.output
        #expect(messages.map { $0["id"] } == (1...200).map { .integer(Int64($0)) })
        #expect(messages.map { $0["result"]?["n"] } == (1...200).map { .integer(Int64($0)) })
        #expect(writes < 20, "200 answers in \(writes) writes")
    }

    @Test("a cancellation sent while a slow request blocks the loop overtakes the queued request it cancels")
    func lookaheadCancellation() async throws {
        let harness = PipeHarness()
        let handler = LoopHandler(loop: harness.loop)
        harness.send([request(1, "slow"), request(2), request(3)])
        let connection = harness.connection
        // Started on the loop itself: a task on the cooperative pool could wait long for a thread.
        let running = Task(executorPreference: harness.loop) { await connection.run(handler: handler) }
        // Once the slow request runs, 2 and 3 are queued behind it; cancel 3, then let it finish.
        waitUntilStarted(handler.started)
        harness.send([#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#, request(4), exitMessage])
        handler.release.store(true, ordering: .releasing)
        #expect(await running.value == 0)
        let messages = harness.output.messages
        #expect(messages.map { $0["id"] } == [1, 2, 3, 4].map { .integer($0) })
        #expect(messages[1]["result"]?["n"] == 2)
        #expect(messages[2]["error"]?["code"] == .integer(-32800), "3 was cancelled: \(messages[2])")
        #expect(messages[3]["result"]?["n"] == 4)
    }
}

/// The params of "now" as its predecoder reads them: `{"n": integer}` and nothing else.
private struct NowParams: PredecodedParams {
    let n: Int64
    var json: JSONValue { ["n": .integer(n)] }
}

/// A handler that answers "now" at once (synchronously) and everything else through `handle`,
/// recording the order in which it saw requests and how each arrived.
private final class ImmediateHandler: TestHandler, @unchecked Sendable {
    /// (id, "now" or "async", whether the params came predecoded, whether on the loop)
    var seen: [(Int64, String, Bool, Bool)] = []

    override var paramsPredecoder: ParamsPredecoder? {
        { method, params in
            guard method == "now", params.objectCount == 1, let n = params.member("n")?.integer else { return nil }
            return NowParams(n: n)
        }
    }

    override func answerImmediately(_ request: Request, context: RequestContext) -> Result<JSONValue, ResponseError>? {
        guard request.method == "now", case .integer(let id) = request.id else { return nil }
        seen.append((id, "now", request.predecoded is NowParams, loop.isCurrent))
        return .success(request.params ?? .null)
    }

    override func record(_ request: Request) {
        if case .integer(let id) = request.id { seen.append((id, "async", request.predecoded != nil, loop.isCurrent)) }
    }
}

@Suite("Connection: requests answered at once, params read straight from the parsed text")
struct ImmediateAnswerTests {
    @Test("answered at once and through the handler, interleaved: every answer in arrival order, predecoded params equal to the sent ones")
    func interleavedOrder() async {
        let harness = PipeHarness()
        let handler = ImmediateHandler(loop: harness.loop)
        let methods = (1...300).map { $0 % 3 == 0 ? "echo" : "now" }
        harness.send(methods.enumerated().map { request($0.offset + 1, $0.element) } + [exitMessage])
        #expect(await harness.connection.run(handler: handler) == 0)
        let (messages, writes) = harness.output
        #expect(messages.map { $0["id"] } == (1...300).map { .integer(Int64($0)) })
        #expect(messages.map { $0["result"]?["n"] } == (1...300).map { .integer(Int64($0)) })
        #expect(handler.seen.map(\.0) == (1...300).map { Int64($0) }, "handled in arrival order")
        #expect(handler.seen.map(\.1) == methods.map { $0 == "now" ? "now" : "async" })
        #expect(handler.seen.allSatisfy { $0.3 }, "all on the loop")
        #expect(handler.seen.filter { $0.1 == "now" }.allSatisfy { $0.2 }, "every \"now\" came predecoded")
        #expect(handler.seen.filter { $0.1 == "async" }.allSatisfy { !$0.2 }, "nothing else did")
        #expect(writes < 30, "300 answers in \(writes) writes")
    }

    @Test("a synchronous client (one request, then its answer): each answered at once without the handler's async path")
    func synchronousClient() async throws {
        let harness = PipeHarness()
        let handler = ImmediateHandler(loop: harness.loop)
        let connection = harness.connection
        // Started on the loop itself: a task on the cooperative pool could wait long for a thread.
        let running = Task(executorPreference: harness.loop) { await connection.run(handler: handler) }
        for id in 1...50 {
            harness.send([request(id, "now")])
            // Generous: the connection's task starts on the cooperative pool, which the other
            // suites running alongside can keep busy for seconds.
            let deadline = ContinuousClock.now + .seconds(60)
            // Polled without suspending: a sleeping task would need the pool again to wake.
            while harness.output.messages.count < id, ContinuousClock.now < deadline { usleep(200) }
            #expect(harness.output.messages.count == id)
        }
        harness.send([exitMessage])
        #expect(await running.value == 0)
        #expect(handler.seen.map(\.0) == (1...50).map { Int64($0) })
        #expect(handler.seen.allSatisfy { $0.1 == "now" && $0.2 && $0.3 })
        #expect(harness.output.messages.map { $0["result"]?["n"] } == (1...50).map { .integer(Int64($0)) })
    }

    @Test("a request the predecoder does not take whole (a member it does not know, a string for an integer) arrives with its params as sent")
    func predecoderDeclines() async {
        let harness = PipeHarness()
        let handler = ImmediateHandler(loop: harness.loop)
        harness.send([
            #"{"jsonrpc":"2.0","id":1,"method":"now","params":{"n":1,"extra":[1.5,"x"]}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"now","params":{"n":"2"}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"now","params":{"n":3},"extra":true}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"now","params":{"n":4,"n":5}}"#,
            exitMessage,
        ])
        #expect(await harness.connection.run(handler: handler) == 0)
        let messages = harness.output.messages
        #expect(messages[0]["result"] == ["n": 1, "extra": [1.5, "x"]])
        #expect(messages[1]["result"] == ["n": "2"])
        #expect(messages[2]["result"] == ["n": 3])
        #expect(handler.seen.map(\.2) == [false, false, false], "none predecoded")
        // Two members with one name are refused however the message would have been read.
        #expect(messages[3]["error"]?["code"] == .integer(-32700), "\(messages[3])")
        #expect(messages[3]["id"] == .null)
    }

    @Test("a request answered at once that was cancelled while queued gets -32800 and is not run")
    func cancelledWhileQueued() async throws {
        let harness = PipeHarness()
        let handler = ImmediateHandler(loop: harness.loop)
        harness.send([request(1, "slow"), request(2, "now"), request(3, "now")])
        let connection = harness.connection
        // Started on the loop itself: a task on the cooperative pool could wait long for a thread.
        let running = Task(executorPreference: harness.loop) { await connection.run(handler: handler) }
        waitUntilStarted(handler.started)
        harness.send([#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#, request(4, "now"), exitMessage])
        handler.release.store(true, ordering: .releasing)
        #expect(await running.value == 0)
        let messages = harness.output.messages
        #expect(messages.map { $0["id"] } == [1, 2, 3, 4].map { .integer($0) })
        #expect(messages[2]["error"]?["code"] == .integer(-32800))
        #expect(handler.seen.map(\.0) == [1, 2, 4], "3 never ran")
    }
}
