import Synchronization

/// Set when the client cancels a request; long handlers poll it between steps.
public final class CancellationToken: Sendable {
    private let flag = Atomic<Bool>(false)
    private let abandonedFlag = Atomic<Bool>(false)

    public init() {}

    /// Whether the request was cancelled.
    public var isCancelled: Bool { flag.load(ordering: .acquiring) }

    /// Marks the request cancelled.
    public func cancel() { flag.store(true, ordering: .releasing) }

    /// Whether the client that asked for the request is gone (its input ended): work that only
    /// answers it (a store query) may stop; work that changes files (a save) goes on.
    public var isAbandoned: Bool { abandonedFlag.load(ordering: .acquiring) }

    /// Marks the request's client gone.
    public func abandon() { abandonedFlag.store(true, ordering: .releasing) }

    /// A token nobody cancels, for work answered at once (nothing can cancel it while it runs).
    public static let never = CancellationToken()
}

/// What a handler knows about the request it is answering.
public struct RequestContext: Sendable {
    public let id: RequestID
    public let method: String
    public let cancellation: CancellationToken

    public init(id: RequestID, method: String, cancellation: CancellationToken = CancellationToken()) {
        self.id = id
        self.method = method
        self.cancellation = cancellation
    }

    /// Throws the -32800 error when the client has cancelled this request.
    public func checkCancellation() throws(ResponseError) {
        if cancellation.isCancelled { throw ResponseError.cancelled(id) }
    }
}

/// The requests received and not yet answered, so that `$/cancelRequest` can reach one whether it
/// is still queued or already running. The reader registers a request as soon as it is parsed and
/// applies cancellations at once, ahead of the ordered queue; the dispatcher removes it when
/// answered. A cancellation for an id that is not pending is ignored (the answer has gone out).
public final class PendingRequests: Sendable {
    private struct Entry {
        var count: Int
        /// Made when a handler first asks for it (most requests are answered without one).
        var token: CancellationToken?
        var cancelled = false
    }

    private let entries = Mutex<[RequestID: Entry]>([:])
    /// Set (under the lock of `entries`) once the client is gone.
    nonisolated(unsafe) private var abandoned = false

    public init() {}

    /// Records a request that has been queued.
    public func enqueue(_ id: RequestID) {
        entries.withLock { entries in
            if var entry = entries[id] {
                entry.count += 1
                entries[id] = entry
            } else {
                entries[id] = Entry(count: 1)
            }
        }
    }

    /// The token of a pending request (a fresh one when the id was never queued).
    public func token(for id: RequestID) -> CancellationToken {
        entries.withLock { entries -> CancellationToken in
            guard var entry = entries[id] else {
                let token = CancellationToken()
                if abandoned { token.abandon() }
                return token
            }
            if let token = entry.token { return token }
            let token = CancellationToken()
            if entry.cancelled { token.cancel() }
            if abandoned { token.abandon() }
            entry.token = token
            entries[id] = entry
            return token
        }
    }

    /// Whether a pending request was cancelled (without making its token).
    public func isCancelled(_ id: RequestID) -> Bool {
        entries.withLock { $0[id]?.cancelled ?? false }
    }

    /// Cancels a pending request; answers whether one was pending.
    @discardableResult
    public func cancel(_ id: RequestID) -> Bool {
        entries.withLock { entries in
            guard var entry = entries[id] else { return false }
            entry.cancelled = true
            entry.token?.cancel()
            entries[id] = entry
            return true
        }
    }

    /// The client is gone (its input ended): every pending request's token, and any made later,
    /// says so (``CancellationToken/isAbandoned``).
    public func abandonAll() {
        entries.withLock { entries in
            abandoned = true
            for (id, var entry) in entries {
                let token = entry.token ?? CancellationToken()
                if entry.cancelled { token.cancel() }
                token.abandon()
                entry.token = token
                entries[id] = entry
            }
        }
    }

    /// Forgets a request once it has been answered.
    public func finish(_ id: RequestID) {
        entries.withLock { entries in
            guard var entry = entries[id] else { return }
            entry.count -= 1
            if entry.count <= 0 {
                entries[id] = nil
            } else {
                // A client reusing a pending id gets a fresh token for the next one.
                entry.token = nil
                entry.cancelled = false
                entries[id] = entry
            }
        }
    }

    /// The number of requests pending.
    public var count: Int { entries.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
