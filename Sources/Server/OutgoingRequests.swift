import JSON
import JSONRPC
import Synchronization

/// The requests the server sends to its client (`workspace/applyEdit`, `window/showMessageRequest`),
/// in an id space of their own (`ds-1`, `ds-2`, ...: strings, never the integers clients use), and
/// those not answered yet. A sender waits for its answer in a task of its own, never on the
/// dispatcher (which reads the answer): nothing blocks the loop, and a client that never answers
/// only leaves its entry here until the input ends.
struct OutgoingRequests {
    private var next = 0
    private var waiting: [String: PendingAnswer] = [:]

    /// A new id and its entry.
    mutating func start() -> (id: String, answer: PendingAnswer) {
        next += 1
        let id = "ds-\(next)"
        let answer = PendingAnswer()
        waiting[id] = answer
        return (id, answer)
    }

    /// Hands a response to the request that waits for it; false when no request of ours has that
    /// id (never sent, or answered already).
    mutating func finish(_ response: Response) -> Bool {
        guard case .string(let id) = response.id, let answer = waiting.removeValue(forKey: id) else { return false }
        answer.resolve(response.result)
        return true
    }

    /// Ends every wait without an answer (the input ended, or shutdown).
    mutating func abandonAll() {
        for answer in waiting.values { answer.resolve(nil) }
        waiting = [:]
    }

    /// How many requests wait for an answer (test-visible).
    var count: Int { waiting.count }
}

/// One request's answer: resolved once, whether the sender waits for it before or after.
final class PendingAnswer: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<JSONValue, ResponseError>?, Never>?)
        case resolved(Result<JSONValue, ResponseError>?)
    }

    private let state = Mutex<State>(.waiting(nil))

    /// The result, or nil when the request was abandoned unanswered.
    func value() async -> Result<JSONValue, ResponseError>? {
        await withCheckedContinuation { continuation in
            let resolved: Result<JSONValue, ResponseError>?? = state.withLock { state in
                switch state {
                case .resolved(let result): return .some(result)
                case .waiting:
                    state = .waiting(continuation)
                    return .none
                }
            }
            if let resolved { continuation.resume(returning: resolved) }
        }
    }

    func resolve(_ result: Result<JSONValue, ResponseError>?) {
        let continuation: CheckedContinuation<Result<JSONValue, ResponseError>?, Never>?? = state.withLock { state in
            guard case .waiting(let continuation) = state else { return .none }
            state = .resolved(result)
            return .some(continuation)
        }
        if case .some(.some(let continuation)) = continuation { continuation.resume(returning: result) }
    }
}
