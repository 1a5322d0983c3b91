#if canImport(Glibc)
    import Glibc
#endif

/// Runs blocking file work on a thread of its own and awaits its result, so that reading a large
/// file never occupies one of Swift's cooperative threads (there is one per processor: two loads on
/// a two-core machine would otherwise stall every other request until one finished).
public func runOnOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        startBlockingThread { continuation.resume(returning: body()) }
    }
}

/// Runs background work (hashing a file just opened) on a thread of its own at idle priority
/// (`SCHED_IDLE`): it runs only on a processor nothing else wants, so it never slows requests,
/// loads or saves.
public func runOnIdleThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        startBlockingThread {
            var parameters = sched_param()
            // SCHED_IDLE is 5 (linux/sched.h); Glibc's module declares it only under _GNU_SOURCE.
            _ = pthread_setschedparam(pthread_self(), 5, &parameters)
            continuation.resume(returning: body())
        }
    }
}

/// The work a new thread runs, handed over through pthread_create's argument.
private final class ThreadWork {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

private func startBlockingThread(_ run: @escaping () -> Void) {
    let work = Unmanaged.passRetained(ThreadWork(run)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(&thread, nil, { raw in
        Unmanaged<ThreadWork>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, work)
    if started == 0 {
        pthread_detach(thread)
    } else {
        // No thread to be had (a resource limit): do the work here rather than fail it.
        Unmanaged<ThreadWork>.fromOpaque(work).takeRetainedValue().run()
    }
}

/// The result of a joinable thread's work.
private final class ResultBox<Result>: @unchecked Sendable {
    /// Written by the thread before it ends, read after `pthread_join`: never at the same time.
    var value: Result?
}

/// Runs `other` on a new thread while the calling thread runs `body`, and answers both results
/// once both have finished (the thread is joined before this returns). Without a thread to be had
/// (a resource limit), `other` runs after `body`, on the calling thread.
func runConcurrently<A, B: Sendable>(_ body: () -> A, alongside other: @escaping @Sendable () -> B) -> (A, B) {
    let box = ResultBox<B>()
    let work = Unmanaged.passRetained(ThreadWork { box.value = other() }).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(&thread, nil, { raw in
        Unmanaged<ThreadWork>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, work)
    guard started == 0 else {
        Unmanaged<ThreadWork>.fromOpaque(work).release()
        let first = body()
        return (first, other())
    }
    let first = body()
    pthread_join(thread, nil)
    return (first, box.value!)
}
