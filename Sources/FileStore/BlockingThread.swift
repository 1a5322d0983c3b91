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
