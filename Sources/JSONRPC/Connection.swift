import Dispatch
import JSON
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What the server does with each message; the connection handles everything about JSON-RPC itself
/// (framing, parsing, batches, ids, invalid requests, cancellation).
public protocol MessageHandler: AnyObject {
    /// Answers a request. Called in arrival order, one at a time.
    func handle(_ request: Request, context: RequestContext) async -> Result<JSONValue, ResponseError>
    /// Handles a notification (never answered).
    func handle(_ notification: Notification) async
    /// Handles a response to a request the server sent.
    func handle(_ response: Response) async
    /// Set once `exit` has been handled: the connection stops and the process exits with it.
    var exitStatus: Int32? { get }
    /// The input ended without `exit`; answers the exit status.
    func inputEnded(midMessage: Bool) async -> Int32
}

/// A JSON-RPC connection over a pair of file descriptors: a reader thread decodes input ahead of
/// the ordered queue; one dispatcher answers the work in arrival order; one writer writes.
public final class Connection: Sendable {
    /// The writer every outgoing message goes through.
    public let writer: MessageWriter
    /// The requests received and not yet answered.
    public let pending = PendingRequests()
    private let input: Int32
    private let maxMessageSize: Int
    private let logger: Logger

    /// How many decoded items may wait in the queue before the reader stops reading; the pipe then
    /// fills and the client blocks, rather than the server's memory growing without bound.
    public static let queueLimit = 4096

    public init(input: Int32, writer: MessageWriter, maxMessageSize: Int, logger: Logger) {
        self.input = input
        self.writer = writer
        self.maxMessageSize = maxMessageSize
        self.logger = logger
    }

    /// Serves until `exit` or the end of input; answers the process's exit status.
    public func run(handler: some MessageHandler) async -> Int32 {
        let (stream, continuation) = AsyncStream<Inbound>.makeStream()
        let slots = DispatchSemaphore(value: Self.queueLimit)
        let endedMidMessage = ReaderOutcome()
        startReader(continuation: continuation, slots: slots, outcome: endedMidMessage)

        for await item in stream {
            slots.signal()
            await dispatch(item, to: handler)
            if let status = handler.exitStatus { return status }
        }
        return await handler.inputEnded(midMessage: endedMidMessage.midMessage)
    }

    /// Answers one unit of work and writes what it produces.
    public func dispatch(_ item: Inbound, to handler: some MessageHandler) async {
        switch item {
        case .message(let message):
            if let response = await process(message, handler) { writer.send(response) }
        case .batch(let messages):
            var responses: [JSONValue] = []
            for message in messages {
                if let response = await process(message, handler) { responses.append(response.json) }
            }
            // A batch of notifications only is answered with nothing at all.
            if !responses.isEmpty { writer.send(.array(responses)) }
        case .failure(let error):
            // Logged below warning: the client has the error, and stderr stays quiet by default.
            logger.info("bad input: \(error.message)")
            writer.send(Response.failure(.null, error))
        }
    }

    private func process(_ message: IncomingMessage, _ handler: some MessageHandler) async -> Response? {
        switch message {
        case .request(let request):
            let token = pending.token(for: request.id)
            defer { pending.finish(request.id) }
            if token.isCancelled { return .failure(request.id, .cancelled(request.id)) }
            let context = RequestContext(id: request.id, method: request.method, cancellation: token)
            return Response(id: request.id, result: await handler.handle(request, context: context))
        case .notification(let notification):
            await handler.handle(notification)
            return nil
        case .response(let response):
            await handler.handle(response)
            return nil
        case .invalid(let id, let error):
            logger.info("invalid message: \(error.message)")
            return .failure(id, error)
        }
    }

    private func startReader(
        continuation: AsyncStream<Inbound>.Continuation, slots: DispatchSemaphore, outcome: ReaderOutcome
    ) {
        let input = input
        let maxMessageSize = maxMessageSize
        let pending = pending
        let logger = logger
        startThread {
            let decoder = InboundDecoder(maxMessageSize: maxMessageSize, pending: pending)
            while let chunk = FileDescriptorIO.read(input), !chunk.isEmpty {
                for item in decoder.decode(chunk) {
                    slots.wait()
                    continuation.yield(item)
                }
            }
            if !decoder.isAtMessageBoundary {
                logger.warning("input ended in the middle of a message; the partial message was dropped")
                outcome.markMidMessage()
            }
            continuation.finish()
        }
    }
}

/// Whether the input ended in the middle of a message; written by the reader before it finishes
/// the stream, read by the dispatcher after the stream has ended.
private final class ReaderOutcome: Sendable {
    private let flag = Atomic<Bool>(false)
    var midMessage: Bool { flag.load(ordering: .acquiring) }
    func markMidMessage() { flag.store(true, ordering: .releasing) }
}

import Synchronization

/// Runs `body` on a new detached thread (blocking reads must not occupy a cooperative thread).
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
    precondition(result == 0, "pthread_create failed with \(result)")
    pthread_detach(thread)
}
