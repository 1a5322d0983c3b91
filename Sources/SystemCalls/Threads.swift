import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// What a new thread is to be and do, handed over through `pthread_create`'s argument.
private final class ThreadStart {
    let name: String
    let niceness: Int32
    let idle: Bool
    let body: @Sendable () -> Void

    init(name: String, niceness: Int32, idle: Bool, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.niceness = niceness
        self.idle = idle
        self.body = body
    }

    /// Runs on the new thread: names it, sets its priority, runs the body.
    func run() {
        // Named for what it is (a new thread takes its creator's name otherwise), so that `top -H`
        // and `perf sched` tell the threads apart. Linux keeps the first 15 bytes.
        cfs_set_thread_name(name)
        // A thread's nice value can be raised but (without privilege) never lowered again; Linux
        // schedules threads separately, so this one alone changes. Best effort, as before.
        if niceness != 0 { _ = cfs_set_thread_nice(niceness) }
        if idle {
            var parameters = sched_param()
            // SCHED_IDLE is 5 (linux/sched.h); Glibc's module declares it only under _GNU_SOURCE.
            _ = pthread_setschedparam(pthread_self(), 5, &parameters)
        }
        body()
    }
}

/// Creates the thread; the error names `pthread_create` (which answers the errno rather than
/// setting it).
private func createThread(_ start: ThreadStart) throws(SystemCallError) -> pthread_t {
    let argument = Unmanaged.passRetained(start).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, nil, { raw in
        Unmanaged<ThreadStart>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, argument)
    guard result == 0 else {
        Unmanaged<ThreadStart>.fromOpaque(argument).release()
        throw SystemCallError(errno: Errno(rawValue: result), call: "pthread_create")
    }
    return thread
}

/// Runs `body` on a new detached thread named `name` (its first 15 bytes), at nice value `niceness`
/// (0 to 19, set only when not 0) and, with `idle`, at `SCHED_IDLE` (it runs only when a processor
/// has nothing else to do). Throws when no thread can be had (`EAGAIN`: a resource limit); the
/// name, nice value and policy are set by the new thread itself, best effort.
public func startThread(
    name: String, niceness: Int32 = 0, idle: Bool = false, _ body: @escaping @Sendable () -> Void
) throws(SystemCallError) {
    let thread = try createThread(ThreadStart(name: name, niceness: niceness, idle: idle, body: body))
    pthread_detach(thread)
}

/// Starts `body` as ``startThread(name:niceness:idle:_:)`` does, but joinable: the answer must be
/// joined or detached, once.
public func startJoinableThread(
    name: String, niceness: Int32 = 0, idle: Bool = false, _ body: @escaping @Sendable () -> Void
) throws(SystemCallError) -> JoinableThread {
    JoinableThread(thread: try createThread(ThreadStart(name: name, niceness: niceness, idle: idle, body: body)))
}

/// A thread started by ``startJoinableThread(name:niceness:idle:_:)``, to be joined or detached once.
///
/// It is copyable because the watchers keep it in their locked state (an optional they take out
/// when they stop); joining or detaching it twice is a bug, as with `pthread_t`.
public struct JoinableThread: @unchecked Sendable {
    // @unchecked: pthread_t is an integer on Linux; Glibc's module does not mark it Sendable.
    let thread: pthread_t

    /// Whether the caller is this thread.
    public var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }

    /// Waits for the thread to end (from another thread only).
    public func join() {
        precondition(!isCurrent, "a thread cannot join itself")
        pthread_join(thread, nil)
    }

    /// Lets the thread end on its own.
    public func detach() { pthread_detach(thread) }
}
