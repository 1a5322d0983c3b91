import SystemCalls
#if canImport(Glibc)
    import Glibc
#endif

/// Runs blocking file work on a thread of its own and awaits its result, so that reading a large
/// file never occupies one of Swift's cooperative threads (there is one per processor: two loads on
/// a two-core machine would otherwise stall every other request until one finished).
///
/// `niceness` (0 to 19) lowers the thread's priority.
///
/// The threads are kept a while for the next piece of work (``BlockingThreadPool``): creating a
/// thread per save cost more than writing a 100 KB file.
public func runOnOwnThread<T: Sendable>(niceness: Int32 = 0, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        BlockingThreadPool.pool(niceness: niceness).run { continuation.resume(returning: body()) }
    }
}

/// Threads for blocking work, created on demand and kept for a few seconds after their last job,
/// so that a burst of saves reuses them. A busy pool starts a thread for a new job, up to
/// `maximumThreads`; past that the job waits for the first thread free (in order of arrival).
/// One pool per nice value: a thread's nice value can be raised but (without privilege) never
/// lowered again, so a thread stays at the value it started with.
///
/// Why a bound: on a machine kept busy, a new thread takes a while to be scheduled, and jobs came
/// in faster than the pool's threads took them; each job then started a thread of its own. Under
/// the load soak (Tests/soak/README.md, finding 7) the server ran 150 threads (96 at idle
/// priority, whose jobs wait until a processor is free anyway, 79 at normal priority), each with
/// glibc's cache of freed blocks, and its RSS rose through the whole run. The bound for the idle
/// pool is the number of processors (more cannot run at idle priority); for the others four per
/// processor, at least eight: enough for loads, saves and releases to overlap, where one waiting
/// for a free thread costs less than another thread's cache.
final class BlockingThreadPool: @unchecked Sendable {
    private static let normal = BlockingThreadPool(niceness: 0)
    private static let lowered = BlockingThreadPool(niceness: 10)
    /// Threads at idle priority (`SCHED_IDLE`, see ``runOnIdleThread(_:)``).
    static let idlePriority = BlockingThreadPool(niceness: 0, idle: true)

    /// The processors online (at least one).
    static let processors = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    /// The most threads a pool runs at once (see the type's comment).
    static func defaultMaximum(idle: Bool) -> Int { idle ? processors : max(8, 4 * processors) }

    /// The pool whose threads run at `niceness` (0 or 10; another value gets a pool of its own).
    static func pool(niceness: Int32) -> BlockingThreadPool {
        switch niceness {
        case 0: return normal
        case 10: return lowered
        default: return BlockingThreadPool(niceness: niceness)
        }
    }

    let niceness: Int32
    let isIdlePriority: Bool
    /// How long an idle thread waits for work before it ends.
    static let idleSeconds = 5

    /// Guards `jobs` and `idle` (a pthread mutex and condition: the Synchronization module's Mutex
    /// has no condition to wait on).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var jobs: [() -> Void] = []
    private var idle = 0
    /// Threads started and not yet ended (serving or waiting for a job).
    private var threads = 0
    /// The most threads at once.
    private var most = 0
    let maximumThreads: Int

    /// What starts a thread: `SystemCalls.startThread`, or in a test one that fails.
    typealias ThreadStarter = (_ name: String, _ niceness: Int32, _ idle: Bool, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) -> Void

    private let starter: ThreadStarter

    init(niceness: Int32, idle: Bool = false, maximumThreads: Int? = nil,
         starter: @escaping ThreadStarter = { name, niceness, idle, body throws(SystemCallError) in
             try startThread(name: name, niceness: niceness, idle: idle, body)
         }) {
        self.niceness = niceness
        isIdlePriority = idle
        self.maximumThreads = max(1, maximumThreads ?? Self.defaultMaximum(idle: idle))
        self.starter = starter
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    /// Runs `job` on one of the pool's threads: an idle one, a new one while there are fewer than
    /// `maximumThreads`, else the first to finish what it runs.
    func run(_ job: @escaping () -> Void) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        let start = idle < jobs.count && threads < maximumThreads
        if start {
            threads += 1
            most = max(most, threads)
        } else {
            pthread_cond_signal(condition)
        }
        pthread_mutex_unlock(mutex)
        if start { startPoolThread() }
    }

    /// Threads started and not yet ended (test-visible).
    var threadCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threads
    }

    /// The most threads the pool has had at once (test-visible).
    var mostThreads: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return most
    }

    /// Starts a thread for the pool, named for what it is (a new thread takes its creator's name
    /// otherwise: often the cooperative pool's), so that `top -H` and `perf sched` tell the pools
    /// apart, at the pool's nice value or idle priority. Without a thread to be had (a resource
    /// limit), one job is done here rather than failed, and the caller goes on at once: it does not
    /// stay to serve the pool (the caller may be the server's loop).
    private func startPoolThread() {
        let name = isIdlePriority ? "ds-idle" : niceness == 0 ? "ds-pool" : "ds-pool-nice\(niceness)"
        do throws(SystemCallError) {
            try starter(name, niceness, isIdlePriority) { self.serve() }
        } catch {
            pthread_mutex_lock(mutex)
            threads -= 1
            pthread_mutex_unlock(mutex)
            serve(oneJobOnly: true)
        }
    }

    /// A pooled thread's life: take jobs until none comes for `idleSeconds`. With `oneJobOnly` (a
    /// caller without a thread of its own to give the job), the first job waiting, then return.
    private func serve(oneJobOnly: Bool = false) {
        pthread_mutex_lock(mutex)
        if oneJobOnly {
            let job = jobs.isEmpty ? nil : jobs.removeFirst()
            pthread_mutex_unlock(mutex)
            job?()
            return
        }
        while true {
            if jobs.isEmpty {
                idle += 1
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += Self.idleSeconds
                var timedOut = false
                while jobs.isEmpty && !timedOut {
                    timedOut = pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT
                }
                idle -= 1
                if jobs.isEmpty { break }
            }
            let job = jobs.removeFirst()
            pthread_mutex_unlock(mutex)
            job()
            pthread_mutex_lock(mutex)
        }
        threads -= 1
        pthread_mutex_unlock(mutex)
    }
}

/// Runs background work (hashing a file just opened) on a thread of its own at idle priority
/// (`SCHED_IDLE`): it runs only on a processor nothing else wants, so it never slows requests,
/// loads or saves.
public func runOnIdleThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        BlockingThreadPool.idlePriority.run { continuation.resume(returning: body()) }
    }
}

/// Drops `value` on a pooled thread instead of on the calling thread, and does not wait: for a
/// last reference whose release is slow and not the caller's to pay (the server's loop after a
/// save: the text synced before it, a rope of the edited pieces). Whatever `value` frees is freed
/// there, provided the caller kept no other reference.
///
/// At normal priority, not lowered: each `free` of a block another thread allocated takes the lock
/// of that thread's malloc arena, and a thread at nice 10 or idle priority preempted while holding
/// it (on a busy machine, for 70 to 90 ms) made the loop's next allocation wait as long.
public func releaseInBackground<T: Sendable>(_ value: consuming T) {
    let box = HandOver(value)
    BlockingThreadPool.pool(niceness: 0).run { _ = box.take() }
}

/// A value handed from one thread to the work of another, which takes it out (once): its last
/// reference then goes with that work, not with the closure or task that carried the box (a
/// closure is released wherever it is let go of last; a task's, on the thread it ends on: for the
/// store's tasks, the server's loop).
public final class HandOver<T: ~Copyable>: @unchecked Sendable {
    /// Set on the handing thread, taken on the other after the work was handed over (through the
    /// pool's lock or a task's start, which order the two).
    private var value: T?

    public init(_ value: consuming T) { self.value = consume value }

    /// The value; the box is empty afterwards.
    public func take() -> T {
        guard let value = value.take() else { preconditionFailure("HandOver: the value was taken already") }
        return value
    }
}

/// Runs `job` on a pooled thread at `niceness`, without waiting and without a task: for work that
/// must go on whatever the cooperative pool is doing (a thread blocked in it delays every task
/// started there, as the tests' synchronous end-to-end suites do in one process).
public func runDetached(niceness: Int32 = 0, _ job: @escaping @Sendable () -> Void) {
    BlockingThreadPool.pool(niceness: niceness).run(job)
}

/// Closes `descriptor` on a pooled thread at nice 10, without waiting: for the last descriptor of
/// a file that has lost its name, whose close frees the file (see ``FileLocator``): kernel work,
/// which takes no lock of the process's allocator.
func closeInBackground(_ descriptor: consuming Descriptor) {
    let box = HandOver(descriptor)
    BlockingThreadPool.pool(niceness: 10).run { _ = box.take() }  // dropped there: closed there
}

/// The result of a joinable thread's work.
private final class ResultBox<Result>: @unchecked Sendable {
    /// Written by the thread before it ends, read after it was joined: never at the same time.
    var value: Result?
}

/// Runs `other` on a new thread while the calling thread runs `body`, and answers both results
/// once both have finished (the thread is joined before this returns). Without a thread to be had
/// (a resource limit), `other` runs after `body`, on the calling thread.
func runConcurrently<A, B: Sendable>(_ body: () -> A, alongside other: @escaping @Sendable () -> B) -> (A, B) {
    let box = ResultBox<B>()
    let thread: JoinableThread
    do {
        thread = try startJoinableThread(name: "ds-load-part") { box.value = other() }
    } catch {
        let first = body()
        return (first, other())
    }
    let first = body()
    thread.join()
    return (first, box.value!)
}
