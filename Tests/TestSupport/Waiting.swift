#if canImport(Glibc)
    import Glibc
#endif

/// How long a test waits for a condition before it fails: generous, because a busy machine (CI
/// under load, two processors shared with builds) stretches everything; a test that passes waits
/// only as long as its condition takes.
public let defaultDeadline: Duration = .seconds(60)

/// Waits until `condition` holds, looking every `interval`, for at most `deadline` by the clock
/// (not by a count of sleeps, which a busy machine stretches). Answers whether it held.
public func waitUntil(
    deadline: Duration = defaultDeadline, interval: Duration = .milliseconds(2), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + deadline
    while true {
        if try await condition() { return true }
        guard ContinuousClock.now < end else { return false }
        try? await Task.sleep(for: interval)
    }
}

/// The same for synchronous tests (the end-to-end tests drive the server from a blocking client).
public func waitUntilSync(
    deadline: Duration = defaultDeadline, intervalMicroseconds: UInt32 = 2_000, _ condition: () throws -> Bool
) rethrows -> Bool {
    let end = ContinuousClock.now + deadline
    while true {
        if try condition() { return true }
        guard ContinuousClock.now < end else { return false }
        usleep(intervalMicroseconds)
    }
}
