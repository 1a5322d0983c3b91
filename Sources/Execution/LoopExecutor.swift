import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// One thread that runs jobs in the order they are enqueued and, whenever it has none, waits in
/// `poll(2)` on the descriptors registered with it: the server's whole request path (reading the
/// input, decoding, the method table, the document store, writing the answer) runs here, so a
/// request costs no thread switch. It is both a `SerialExecutor` (the document store is an actor
/// isolated to it) and a `TaskExecutor` (the connection's dispatcher task prefers it, so the
/// nonisolated code of the method table runs here too).
///
/// Work that blocks (reading and saving files, hashing, diffs) must not run here: it runs on
/// threads of its own and comes back by resuming a continuation, which enqueues a job from that
/// thread and wakes the loop through an eventfd. Jobs enqueued from the loop's own thread never
/// write to the eventfd.
public final class LoopExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    /// The process's loop, started on first use: the server's connection and document store both
    /// run on it unless given another.
    public static let shared = LoopExecutor(name: "docsession-loop")

    /// Something the loop polls for while idle: called on the loop's thread when `descriptor` is
    /// readable (or hung up); answers whether to keep polling it.
    public typealias ReadableHandler = () -> Bool

    private struct State {
        var jobs: [UnownedJob] = []
        /// The loop is in (or about to enter) `poll` and must be woken through the eventfd.
        var sleeping = false
        /// Descriptors to poll while idle, added and removed from any thread.
        var sources: [Int32: Source] = [:]
    }

    private final class Source: @unchecked Sendable {
        let handler: ReadableHandler
        /// Polled only while this answers true (checked on the loop's thread before each poll).
        let isActive: () -> Bool
        init(handler: @escaping ReadableHandler, isActive: @escaping () -> Bool) {
            self.handler = handler
            self.isActive = isActive
        }
    }

    private let state = Mutex<State>(State())
    /// When the loop last looked at its descriptors (``monotonicNanoseconds``).
    private let lastPolled = Atomic<UInt64>(0)
    /// How long the loop may run jobs without looking at its descriptors: past it, it polls them
    /// without waiting between two batches of jobs, and ``othersWaiting`` asks long work to yield.
    public static let pollInterval: Duration = .microseconds(500)
    /// Written by another thread to wake the loop from `poll`; owned for the loop's life.
    private let wakeEvent: EventDescriptor
    private let thread = Atomic<UInt>(0)

    /// A loop on a new thread named `name` (its first 15 bytes, as Linux keeps them).
    public init(name: String) {
        do {
            wakeEvent = try EventDescriptor()
        } catch {
            preconditionFailure("the loop's eventfd could not be made: \(error)")
        }
        do {
            try startThread(name: name) { [self] in
                thread.store(UInt(pthread_self()), ordering: .releasing)
                run()
            }
        } catch {
            preconditionFailure("the loop's thread could not be started: \(error)")
        }
    }

    /// Whether the caller is running on the loop's thread.
    public var isCurrent: Bool { thread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Whether work running on the loop should let others go first (called on the loop's thread):
    /// other jobs are queued, or the descriptors have not been looked at for ``pollInterval``
    /// (another connection's input may be waiting). Long work, a connection answering one queued
    /// request after another, yields then (`Task.yield()`), so that every connection whose input
    /// is ready gets a turn before any gets a second.
    public var othersWaiting: Bool {
        if pollIsDue { return true }
        return state.withLock { !$0.jobs.isEmpty }
    }

    private static let pollIntervalNanoseconds = UInt64(pollInterval.components.attoseconds / 1_000_000_000)

    /// Whether ``pollInterval`` has passed since the descriptors were last looked at.
    private var pollIsDue: Bool {
        Self.monotonicNanoseconds() &- lastPolled.load(ordering: .relaxed) >= Self.pollIntervalNanoseconds
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    // MARK: - Executors

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let onLoop = isCurrent
        let wake = state.withLock { state -> Bool in
            state.jobs.append(unowned)
            return Self.mustWake(&state, onLoop: onLoop)
        }
        if wake { signalWake() }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(isCurrent, "expected to run on the loop's thread")
    }

    // MARK: - Descriptors

    /// Polls `descriptor` whenever the loop is idle and `isActive` answers true, calling `handler`
    /// on the loop's thread when it is readable, until the handler answers false or
    /// ``removeReadable(_:)`` is called.
    public func addReadable(
        _ descriptor: Int32, isActive: @escaping () -> Bool = { true }, handler: @escaping ReadableHandler
    ) {
        let onLoop = isCurrent
        let wake = state.withLock { state -> Bool in
            state.sources[descriptor] = Source(handler: handler, isActive: isActive)
            return Self.mustWake(&state, onLoop: onLoop)
        }
        if wake { signalWake() }
    }

    /// Stops polling `descriptor`.
    public func removeReadable(_ descriptor: Int32) {
        state.withLock { state in state.sources[descriptor] = nil }
    }

    /// Wakes the loop so that it looks at its sources' `isActive` again (after one of them
    /// becomes active from another thread; from the loop's own thread this costs nothing).
    public func wake() {
        guard !isCurrent else { return }
        if state.withLock({ Self.mustWake(&$0, onLoop: false) }) { signalWake() }
    }

    // MARK: - The loop

    /// Under the lock: whether the eventfd must be written, because the loop sleeps (or is about
    /// to) and the caller is another thread; the loop counts as awake from then on, so that one
    /// write serves every caller until it sleeps again.
    private static func mustWake(_ state: inout State, onLoop: Bool) -> Bool {
        guard state.sleeping, !onLoop else { return false }
        state.sleeping = false
        return true
    }

    private func signalWake() {
        // Cannot fail but for an overflow of the count, which the loop's reads rule out.
        _ = try? wakeEvent.notify()
    }

    private func run() {
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        batch.reserveCapacity(64)
        var polled: [pollfd] = []
        var polledSources: [Source] = []
        while true {
            let sources: [Int32: Source]? = state.withLock { state in
                if state.jobs.isEmpty {
                    state.sleeping = true
                    return state.sources
                }
                swap(&state.jobs, &batch)
                return nil
            }
            if let sources {
                // Idle: wait for a descriptor or a wake-up.
                pollSources(sources, waiting: true, &polled, &polledSources)
                continue
            }
            for job in batch {
                job.runSynchronously(isolatedTo: serial, taskExecutor: task)
            }
            batch.removeAll(keepingCapacity: true)
            // Busy: the descriptors are looked at between batches all the same, without waiting,
            // once in a while, so that a connection whose input arrives while another keeps the
            // loop busy is read (and its edits answered) in turn.
            if pollIsDue {
                pollSources(state.withLock { $0.sources }, waiting: false, &polled, &polledSources)
            }
        }
    }

    /// Polls the active sources (and, when `waiting`, the wake-up eventfd, until something is
    /// ready), then calls the handlers of those that are readable.
    private func pollSources(
        _ sources: [Int32: Source], waiting: Bool, _ polled: inout [pollfd], _ polledSources: inout [Source]
    ) {
        let wakeDescriptor = wakeEvent.descriptor.rawValue
        polled.removeAll(keepingCapacity: true)
        polledSources.removeAll(keepingCapacity: true)
        polled.append(pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0))
        for (descriptor, source) in sources where source.isActive() {
            polled.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0))
            polledSources.append(source)
        }
        lastPolled.store(Self.monotonicNanoseconds(), ordering: .relaxed)
        if waiting {
            // A job enqueued from this thread by `isActive` would not wake the poll.
            let pending = state.withLock { state -> Bool in
                if state.jobs.isEmpty { return false }
                state.sleeping = false
                return true
            }
            if pending { return }
        } else if polledSources.isEmpty {
            return
        }
        // An error other than EINTR (which is retried) counts as a wake-up without events.
        let count = (try? pollDescriptors(&polled, timeoutMilliseconds: waiting ? -1 : 0)) ?? -1
        if waiting {
            state.withLock { $0.sleeping = false }
            lastPolled.store(Self.monotonicNanoseconds(), ordering: .relaxed)
        }
        guard count > 0 else { return }
        if polled[0].revents != 0 { _ = try? wakeEvent.reset() }
        for index in 1..<polled.count where polled[index].revents != 0 {
            let descriptor = polled[index].fd
            // Still registered with the same handler (an earlier handler may have removed it).
            let current = state.withLock { $0.sources[descriptor] }
            guard let source = current, source === polledSources[index - 1] else { continue }
            if !source.handler() {
                state.withLock { state in
                    if state.sources[descriptor] === source { state.sources[descriptor] = nil }
                }
            }
        }
    }
}
