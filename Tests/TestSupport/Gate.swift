#if canImport(Glibc)
    import Glibc
#endif

/// Work that holds its thread until the test opens the gate, without polling: waiters block on a
/// condition. A test can wait until a number of jobs have reached the gate (so that they are no
/// longer queued). Every wait has a deadline (``defaultDeadline``), so that a test that goes wrong
/// fails on its assertions instead of hanging.
public final class Gate: @unchecked Sendable {
    /// Guards `opened` and `arrived`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var opened = false
    private var arrived = 0

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Lets every job at the gate, and every later one, through.
    public func open() {
        pthread_mutex_lock(mutex)
        opened = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Blocks until the gate opens (or the deadline passes).
    public func wait(deadline: Duration = defaultDeadline) {
        pthread_mutex_lock(mutex)
        arrived += 1
        pthread_cond_broadcast(condition)
        let end = Self.realtime(after: deadline)
        withUnsafePointer(to: end) { end in
            while !opened && pthread_cond_timedwait(condition, mutex, end) != ETIMEDOUT {}
        }
        pthread_mutex_unlock(mutex)
    }

    /// Waits until `count` jobs have reached the gate; answers whether they did within `deadline`.
    public func waitUntilArrived(_ count: Int = 1, deadline: Duration = defaultDeadline) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let end = Self.realtime(after: deadline)
        withUnsafePointer(to: end) { end in
            while arrived < count && pthread_cond_timedwait(condition, mutex, end) != ETIMEDOUT {}
        }
        return arrived >= count
    }

    /// The realtime clock's time `duration` from now (what `pthread_cond_timedwait` takes).
    private static func realtime(after duration: Duration) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let (seconds, attoseconds) = duration.components
        var nanoseconds = now.tv_nsec + Int(attoseconds / 1_000_000_000)
        var wholeSeconds = now.tv_sec + Int(seconds)
        if nanoseconds >= 1_000_000_000 { nanoseconds -= 1_000_000_000; wholeSeconds += 1 }
        return timespec(tv_sec: wholeSeconds, tv_nsec: nanoseconds)
    }
}
