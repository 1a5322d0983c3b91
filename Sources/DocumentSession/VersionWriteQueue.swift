import FileStore
import Synchronization
import TextBuffer

/// The version store's writes (saved and conflict versions, moves), one at a time in the order they
/// were asked for, on a pooled thread at nice 10, off the store's actor (and off the cooperative
/// pool: one thread drains the queue while it has work).
///
/// Bounded: a version of a file whose write has not started yet gives way to a newer version of
/// the same file and kind, so when saves come faster than their versions can be written (a loaded
/// machine, autosave every second on many documents) the backlog holds at most one version per file
/// and kind (and one thinning per file), not one per save. (Before, every save chained a task of
/// its own at idle priority: under the load soak the chain grew by 1 to 17 KB a save without end,
/// and the versions it held were dropped at exit.) A move is never replaced, and nothing queued before a move gives way to work
/// queued after it, so a version is always recorded under the path its file had when it was saved.
///
/// The text a write keeps is let go of at normal priority afterwards (``releaseInBackground(_:)``),
/// not on the nice-10 thread: freeing blocks the loop allocated takes the loop's malloc arena lock,
/// which a preempted low-priority thread would hold up.
final class VersionWriteQueue: Sendable {
    private struct Item: Sendable {
        /// What a newer write replaces it by (nil: never replaced; a barrier for what comes after).
        var key: String?
        var work: @Sendable (VersionStore) -> Void
    }

    private struct State {
        var items: [Item] = []
        var running = false
        var replaced = 0
    }

    private let store: VersionStore
    private let state = Mutex(State())

    init(store: VersionStore) {
        self.store = store
    }

    /// Keeps `text` as a version of `path`, unless a newer one of the same path and kind (and
    /// origin) comes before this one has started; then `written` gets what the store did (nil: not
    /// stored), on the writing thread.
    func keep(
        _ text: TextBuffer, of path: String, kind: VersionStore.Kind, resolved: Bool = false, origin: String? = nil,
        written: @escaping @Sendable (VersionStore.Addition?) -> Void = { _ in }
    ) {
        let box = HandOver(text)
        enqueue(key: "\(kind):\(path)" + (origin.map { ":" + $0 } ?? "")) { versions in
            let text = box.take()
            let addition = try? versions.add(documentPath: path, kind: kind, chunks: text.utf8Chunks, resolved: resolved, origin: origin)
            releaseInBackground(text)
            written(addition ?? nil)
        }
    }

    /// Runs `work` after everything queued before it; it is never replaced.
    func run(_ work: @escaping @Sendable (VersionStore) -> Void) {
        enqueue(key: nil, work)
    }

    /// Thins `path`'s versions by age (``VersionStore/thin(documentPath:)``) after what was queued
    /// before; `thinned` gets what went, on the writing thread. A thinning of the same path that
    /// has not started yet gives way to this one (the same work, later), and a thinning is no
    /// barrier: versions queued before it still give way to newer ones queued after it. (Run as a
    /// barrier, each open's thinning cut the queue in two, and under the load soak, an open of a
    /// document every 30 ms, the backlog grew by one version a save again: 45,018 versions waiting
    /// after ten minutes, the RSS up 44 MiB a minute.)
    func thin(_ path: String, thinned: @escaping @Sendable ([VersionStore.Version]) -> Void) {
        enqueue(key: "thin:\(path)") { versions in thinned(versions.thin(documentPath: path)) }
    }

    /// Waits until every write queued so far is done, or `limit` has passed (by the clock); answers
    /// whether the queue is empty. For `shutdown`: the versions of the last saves are written
    /// before the process exits rather than dropped.
    func finish(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while true {
            if state.withLock({ $0.items.isEmpty && !$0.running }) { return true }
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Writes waiting to start (test-visible).
    var pending: Int { state.withLock { $0.items.count } }

    /// Whether a write is running or about to (test-visible).
    var running: Bool { state.withLock { $0.running } }

    /// Versions that gave way to a newer one of their file before their write started (test-visible).
    var replaced: Int { state.withLock { $0.replaced } }

    private func enqueue(key: String?, _ work: @escaping @Sendable (VersionStore) -> Void) {
        let (start, old) = state.withLock { state -> (Bool, Item?) in
            if let key {
                for index in state.items.indices.reversed() {
                    guard let other = state.items[index].key else { break }
                    if other == key {
                        let old = state.items[index]
                        state.items[index].work = work
                        state.replaced += 1
                        return (false, old)
                    }
                }
            }
            state.items.append(Item(key: key, work: work))
            if state.running { return (false, nil) }
            state.running = true
            return (true, nil)
        }
        // The replaced write's closure holds a text: let go of off the caller's thread.
        if let old { releaseInBackground(old) }
        if start { runDetached(niceness: 10) { self.drain() } }
    }

    private func drain() {
        while let item = next() { item.work(store) }
    }

    private func next() -> Item? {
        state.withLock { state in
            guard !state.items.isEmpty else {
                state.running = false
                return nil
            }
            return state.items.removeFirst()
        }
    }
}
