import Execution
import JSON
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// How a handler answers a request.
public enum Reply: Sendable {
    /// The answer, ready now.
    case now(Result<JSONValue, ResponseError>)
    /// Long work (loading a large file, say) that runs off the ordered queue: the dispatcher goes on
    /// with the next message, and the response is written when the work finishes. The work must not
    /// touch state owned by the dispatcher; it talks to actors.
    ///
    /// `answered` runs once the response has been written (for a batch, once the batch's array
    /// has): work that holds something in its request's order, a document's turn say, lets go of
    /// it there, so that whatever waits for it is answered after this request.
    case later(@Sendable () async -> Result<JSONValue, ResponseError>, answered: (@Sendable () async -> Void)? = nil)
}

/// What the server does with each message; the connection handles everything about JSON-RPC itself
/// (framing, parsing, batches, ids, invalid requests, cancellation).
public protocol MessageHandler: AnyObject {
    /// Answers a request. Called in arrival order, one at a time.
    func handle(_ request: Request, context: RequestContext) async -> Reply
    /// Handles a notification (never answered).
    func handle(_ notification: Notification) async
    /// Handles a response to a request the server sent.
    func handle(_ response: Response) async
    /// Set once `exit` has been handled: the connection stops and the process exits with it.
    var exitStatus: Int32? { get }
    /// The input ended without `exit`; answers the exit status.
    func inputEnded(midMessage: Bool) async -> Int32
    /// Answers a request at once, synchronously, on the connection's thread, when the handler can
    /// (the hot path of a typing client: an edit); `nil` sends it down ``handle(_:context:)``.
    /// Called in arrival order like `handle`, and never for a request that was cancelled.
    func answerImmediately(_ request: Request, context: RequestContext) -> Result<JSONValue, ResponseError>?
    /// Reads the params of the handler's most frequent requests straight from the parsed text (see
    /// ``ParamsPredecoder``); `nil`: every request's params arrive as a `JSONValue`.
    var paramsPredecoder: ParamsPredecoder? { get }
}

extension MessageHandler {
    /// No request is answered synchronously unless the handler says so.
    public func answerImmediately(_ request: Request, context: RequestContext) -> Result<JSONValue, ResponseError>? { nil }
    /// No params are predecoded unless the handler says how.
    public var paramsPredecoder: ParamsPredecoder? { nil }
}

/// A JSON-RPC connection over a pair of file descriptors, served on one thread (a ``LoopExecutor``):
/// input is decoded ahead of the ordered queue whenever the thread is idle; one dispatcher answers
/// the work in arrival order; one writer writes.
public final class Connection: Sendable {
    /// The writer every outgoing message goes through.
    public let writer: MessageWriter
    /// The requests received and not yet answered.
    public let pending = PendingRequests()
    private let input: Int32
    private let maxMessageSize: Int
    private let logger: Logger
    /// Where the input is recorded (`--record`), or `nil`.
    private let recorder: Recorder?
    /// The thread everything runs on: reading, decoding, dispatching, writing.
    private let executor: LoopExecutor

    /// How many decoded items may wait in the queue before the reader stops reading; the pipe then
    /// fills and the client blocks, rather than the server's memory growing without bound.
    public static let queueLimit = 4096

    public convenience init(input: Int32, writer: MessageWriter, maxMessageSize: Int, logger: Logger) {
        self.init(input: input, writer: writer, maxMessageSize: maxMessageSize, logger: logger, recorder: nil)
    }

    /// A connection reading `input`; with a `recorder`, every message read is recorded before it
    /// is dispatched (the writer's own recorder records what is written).
    public init(
        input: Int32, writer: MessageWriter, maxMessageSize: Int, logger: Logger, recorder: Recorder?,
        executor: LoopExecutor = .shared
    ) {
        self.executor = executor
        self.input = input
        self.writer = writer
        self.maxMessageSize = maxMessageSize
        self.logger = logger
        self.recorder = recorder
    }

    /// Serves until `exit` or the end of input; answers the process's exit status.
    ///
    /// Everything runs on `executor`'s one thread: it reads the input whenever it has nothing else
    /// to do, decodes it (applying cancellations at once), and the dispatcher task, which prefers
    /// that executor, answers each message in arrival order. A request thus costs no thread switch.
    public func run(handler: some MessageHandler) async -> Int32 {
        let executor = executor
        let queue = InboundQueue(
            input: input, maxMessageSize: maxMessageSize, pending: pending, logger: logger,
            tap: recorder?.inputTap(maxMessageSize: maxMessageSize), executor: executor, writer: writer,
            predecoder: handler.paramsPredecoder)
        queue.answerAtOnce = { [unowned self] item in answerImmediately(item, handler) }
        return await withTaskExecutorPreference(executor) {
            queue.start()
            defer { queue.stop() }
            let inFlight = InFlightWork()
            while let first = await queue.next() {
                // Work through what is queued without suspending: a request the handler answers
                // at once costs no job on the loop and no task switch.
                var item: Inbound? = first
                while let current = item {
                    if !answerImmediately(current, handler) {
                        queue.willAwait()
                        if let task = await dispatch(current, to: handler) { inFlight.track(task) }
                    }
                    if let status = handler.exitStatus { return status }
                    // In turn: when another connection (or other work) waits for the loop, this
                    // one lets it go before its next request (its answers so far written first).
                    if executor.othersWaiting {
                        queue.willYield()
                        await Task.yield()
                    }
                    item = queue.nextQueued()
                }
            }
            // The client closed its end: answer what is still running before deciding how to exit.
            // Work that only answers it (a store query) may stop now; saves go on.
            pending.abandonAll()
            await inFlight.waitForAll()
            return await handler.inputEnded(midMessage: queue.endedMidMessage)
        }
    }

    /// Answers one unit of work and writes what it produces. Work a handler deferred is answered by
    /// a task of its own; the returned task (if any) finishes when every answer has been written.
    @discardableResult
    public func dispatch(_ item: Inbound, to handler: some MessageHandler) async -> Task<Void, Never>? {
        switch item {
        case .message(let message):
            switch await process(message, handler) {
            case .none:
                return nil
            case .ready(let response):
                writer.send(response)
                return nil
            case .deferred(let work, let answered):
                let writer = writer
                return Task {
                    writer.send(await work.value)
                    await answered?()
                }
            }
        case .batch(let messages):
            // Each response is serialised into the array's text as soon as it is ready and its
            // turn has come: the batch holds its answer's bytes, never a tree of them. From the
            // first deferred response on, the later ready ones wait as text.
            var answer = BatchAnswer(limit: maxMessageSize)
            var waiting: [BatchAnswer.Waiting] = []
            for message in messages {
                // A batch is served in turn too: other connections go between its elements.
                if executor.othersWaiting { await Task.yield() }
                switch await process(message, handler) {
                case .none: break
                case .ready(let response):
                    if waiting.isEmpty { answer.append(response) } else { waiting.append(.text(BatchAnswer.Text(response))) }
                case .deferred(let work, let answered):
                    waiting.append(.work(work, answered: answered))
                }
                // Nothing after exit is processed, inside a batch as outside one.
                if handler.exitStatus != nil { break }
            }
            let writer = writer
            if waiting.isEmpty {
                // A batch of notifications only is answered with nothing at all.
                writer.send(answer)
                return nil
            }
            // The batch's one array waits for its slowest member.
            return Task { [answer, waiting] in
                var answer = answer
                var afterwards: [@Sendable () async -> Void] = []
                for item in waiting {
                    switch item {
                    case .text(let text): answer.append(text)
                    case .work(let work, let answered):
                        answer.append(await work.value)
                        if let answered { afterwards.append(answered) }
                    }
                }
                writer.send(answer)
                for answered in afterwards { await answered() }
            }
        case .failure(let error):
            // Logged below warning: the client has the error, and stderr stays quiet by default.
            logger.info("bad input: \(error.message)")
            writer.send(Response.failure(.null, error))
            return nil
        }
    }

    /// Answers `item` synchronously when it is a single request the handler answers at once
    /// (``MessageHandler/answerImmediately(_:context:)``); answers whether it did.
    private func answerImmediately(_ item: Inbound, _ handler: some MessageHandler) -> Bool {
        guard case .message(.request(let request)) = item else { return false }
        let id = request.id
        // A cancelled request takes the ordinary path, which answers it with -32800. Nothing can
        // cancel this one while it runs (the input is read on this thread), so its context gets a
        // token nobody cancels rather than one made for it.
        guard !pending.isCancelled(id) else { return false }
        let context = RequestContext(id: id, method: request.method, cancellation: .never)
        guard let result = handler.answerImmediately(request, context: context) else { return false }
        pending.finish(id)
        writer.send(Response(id: id, result: result))
        return true
    }

    /// What processing one message produced.
    private enum Outcome: Sendable {
        case none
        case ready(Response)
        /// The work, and what runs once its response is written (``Reply/later(_:answered:)``).
        case deferred(Task<Response, Never>, answered: (@Sendable () async -> Void)?)
    }

    private func process(_ message: IncomingMessage, _ handler: some MessageHandler) async -> Outcome {
        switch message {
        case .request(let request):
            let id = request.id
            let token = pending.token(for: id)
            if token.isCancelled {
                pending.finish(id)
                return .ready(.failure(id, .cancelled(id)))
            }
            let context = RequestContext(id: id, method: request.method, cancellation: token)
            switch await handler.handle(request, context: context) {
            case .now(let result):
                pending.finish(id)
                return .ready(Response(id: id, result: result))
            case .later(let work, let answered):
                let pending = pending
                return .deferred(
                    Task {
                        let result = await work()
                        pending.finish(id)
                        return Response(id: id, result: result)
                    }, answered: answered)
            }
        case .notification(let notification):
            await handler.handle(notification)
            return .none
        case .response(let response):
            await handler.handle(response)
            return .none
        case .invalid(let id, let error):
            logger.info("invalid message: \(error.message)")
            return .ready(.failure(id, error))
        }
    }
}

/// The deferred replies still being worked on, so that the end of input can wait for them.
private final class InFlightWork: Sendable {
    private let state = Mutex<(next: Int, tasks: [Int: Task<Void, Never>])>((0, [:]))

    func track(_ task: Task<Void, Never>) {
        let number = state.withLock { state in
            state.next += 1
            state.tasks[state.next] = task
            return state.next
        }
        Task { [self] in
            await task.value
            state.withLock { _ = $0.tasks.removeValue(forKey: number) }
        }
    }

    func waitForAll() async {
        while let task = state.withLock({ $0.tasks.popFirst()?.value }) {
            await task.value
        }
    }
}
