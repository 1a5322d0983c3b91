import Execution
import JSON
import Logging
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// A handler that records, per request, whether it ran on the loop; "slow" blocks the loop's
/// thread for 20 ms (as a long synchronous handler would) after saying it started.
private final class LoopHandler: MessageHandler {
    let loop: LoopExecutor
    let started = Atomic<Int>(0)
    var onLoop: [Bool] = []
    var exitStatus: Int32?

    init(loop: LoopExecutor) { self.loop = loop }

    func handle(_ request: Request, context: RequestContext) async -> Reply {
        onLoop.append(loop.isCurrent)
        if request.method == "slow" {
            started.add(1, ordering: .releasing)
            usleep(20_000)
        }
        return .now(.success(request.params ?? .null))
    }

    func handle(_ notification: Notification) async {
        if notification.method == "exit" { exitStatus = 0 }
    }

    func handle(_ response: Response) async {}
    func inputEnded(midMessage: Bool) async -> Int32 { 1 }
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
        let running = Task { await connection.run(handler: handler) }
        // Once the slow request runs, 2 and 3 are queued behind it; cancel 3.
        let deadline = ContinuousClock.now + .seconds(5)
        while handler.started.load(ordering: .acquiring) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        harness.send([#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#, request(4), exitMessage])
        #expect(await running.value == 0)
        let messages = harness.output.messages
        #expect(messages.map { $0["id"] } == [1, 2, 3, 4].map { .integer($0) })
        #expect(messages[1]["result"]?["n"] == 2)
        #expect(messages[2]["error"]?["code"] == .integer(-32800), "3 was cancelled: \(messages[2])")
        #expect(messages[3]["result"]?["n"] == 4)
    }
}
