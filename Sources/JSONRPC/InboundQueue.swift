import Execution
import Logging
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The decoded input waiting for the dispatcher, filled by the loop's thread whenever it is idle.
///
/// Everything here runs on the one thread of the connection's ``LoopExecutor`` (the dispatcher
/// task prefers that executor, and the loop calls ``readAvailable()`` between jobs), so it needs
/// no lock. Reading ahead of the dispatcher is what lets a `$/cancelRequest` overtake the request
/// it cancels: the decoder applies cancellations the moment it sees them. The loop reads whenever
/// it has no job; while the dispatcher goes from one queued message to the next without the
/// thread becoming idle, it looks at the input itself once more than ``lookaheadInterval`` has
/// passed since the last read.
final class InboundQueue: @unchecked Sendable {
    /// How long the dispatcher may work through queued messages before it looks for newer input
    /// (a cancellation) without waiting.
    static let lookaheadInterval: Duration = .microseconds(200)

    private let input: Int32
    private let decoder: InboundDecoder
    private let logger: Logger
    private var tap: Recorder.InputTap?
    private let executor: LoopExecutor
    /// Held while queued messages are answered back to back, flushed when the queue runs dry.
    private let writer: MessageWriter?
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    /// Decoded items from `head` on; the consumed prefix is dropped in bulk.
    private var items: [Inbound] = []
    private var head = 0
    private var waiter: CheckedContinuation<Inbound?, Never>?
    private var ended = false
    private var stopped = false
    private var lastRead = ContinuousClock.now
    /// Answers an item at once when it can (see ``Connection``), answering whether it did; used
    /// for input that arrives while the dispatcher waits with nothing queued.
    var answerAtOnce: ((Inbound) -> Bool)?
    /// Whether the input ended in the middle of a message.
    private(set) var endedMidMessage = false

    init(
        input: Int32, maxMessageSize: Int, pending: PendingRequests, logger: Logger, tap: Recorder.InputTap?,
        executor: LoopExecutor, writer: MessageWriter? = nil, predecoder: ParamsPredecoder? = nil
    ) {
        self.writer = writer
        self.input = input
        self.decoder = InboundDecoder(maxMessageSize: maxMessageSize, pending: pending, predecoder: predecoder)
        self.logger = logger
        self.tap = tap
        self.executor = executor
    }

    private var queued: Int { items.count - head }

    /// Whether the loop should read more: not past the end, not stopped, and fewer than
    /// ``Connection/queueLimit`` items waiting (beyond that the pipe fills and the client blocks,
    /// rather than the server's memory growing without bound).
    private var wantsInput: Bool { !ended && !stopped && queued < Connection.queueLimit }

    /// Starts reading the input on the loop.
    func start() {
        executor.addReadable(input, isActive: { [unowned self] in wantsInput }) { [unowned self] in readAvailable() }
    }

    /// Stops reading (after `exit`, or at the end of input).
    func stop() {
        answerAtOnce = nil
        writer?.flush()
        stopped = true
        executor.removeReadable(input)
    }

    /// Reads what the input has (it is readable) and decodes it; answers whether to keep reading.
    func readAvailable() -> Bool {
        guard wantsInput else { return !ended && !stopped }
        lastRead = .now
        guard let count = FileDescriptorIO.read(input, into: &buffer), count > 0 else {
            finishInput()
            return false
        }
        let chunk = buffer[..<count]
        tap?.observe(chunk)
        let decoded = decoder.decode(chunk)
        guard !decoded.isEmpty else { return true }
        if let waiter {
            // The dispatcher waits with nothing queued: what can be answered at once is answered
            // here, in order, without waking it (a synchronous client's edit costs no job).
            var rest = decoded[...]
            if let answerAtOnce {
                // One item (a synchronous client): its answer is written as it is sent.
                let several = decoded.count > 1
                if several { writer?.hold() }
                while let first = rest.first, answerAtOnce(first) { rest = rest.dropFirst() }
                if several { writer?.flush() }
                guard let first = rest.first else { return true }
                rest = rest.dropFirst()
                self.waiter = nil
                items.append(contentsOf: rest)
                waiter.resume(returning: first)
                return true
            }
            self.waiter = nil
            items.append(contentsOf: decoded.dropFirst())
            waiter.resume(returning: decoded[0])
        } else {
            items.append(contentsOf: decoded)
        }
        return true
    }

    private func finishInput() {
        ended = true
        if !decoder.isAtMessageBoundary {
            logger.warning("input ended in the middle of a message; the partial message was dropped")
            endedMidMessage = true
        }
        if let waiter {
            self.waiter = nil
            waiter.resume(returning: nil)
        }
    }

    /// The next item in arrival order; nil once the input has ended and everything was taken.
    ///
    /// While items are queued the writer is held (see ``nextQueued()``), so the answers to a
    /// pipelining client's requests go out together; it is flushed before the queue waits for input.
    func next() async -> Inbound? {
        if let item = nextQueued() { return item }
        writer?.flush()
        if ended { return nil }
        return await withCheckedContinuation { continuation in
            // Looked at again: the closure may run as a job of its own, after others that queued
            // input or ended it meanwhile (swiftlang/swift#85668); waiting then would leave a
            // request unanswered until more input came.
            if let item = nextQueued() {
                continuation.resume(returning: item)
            } else if ended {
                continuation.resume(returning: nil)
            } else {
                waiter = continuation
            }
        }
    }

    /// The next item already queued, taken as ``next()`` takes it; nil when none is queued (the
    /// caller then awaits ``next()``, which flushes the writer and waits for input).
    ///
    /// The writer is held from here on, so that the answers to everything queued go out in one
    /// write; the dispatcher calls ``willAwait()`` before work that may take a while.
    func nextQueued() -> Inbound? {
        guard queued > 0 else { return nil }
        if !ended, !stopped, lastRead.duration(to: .now) > Self.lookaheadInterval, inputIsReadable() {
            _ = readAvailable()
        }
        writer?.hold()
        return pop()
    }

    /// Called before the dispatcher awaits a handler: when nothing else is queued, the answers
    /// held so far are written now rather than after that work (which may be long).
    func willAwait() {
        if queued == 0 { writer?.flush() }
    }

    /// Called before the dispatcher yields the loop to other work between two queued items: the
    /// answers held so far are written now, not after the others' turns.
    func willYield() {
        writer?.flush()
    }

    private func pop() -> Inbound {
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }

    /// Whether the input has something to read (or has ended) now, without waiting.
    private func inputIsReadable() -> Bool {
        let events = try? pollDescriptor(FileDescriptor(rawValue: input), events: Int16(POLLIN), timeoutMilliseconds: 0)
        return (events ?? 0) != 0
    }
}
