import JSON
import JSONRPC
import Synchronization

/// LSP work-done progress (`$/progress` begin, report, end) under a token the client chose; silent
/// without one. Reports go out at most once per whole percent, from whatever task does the work.
final class ProgressReporter: Sendable {
    private let token: JSONValue?
    private let title: String
    private let writer: MessageWriter
    /// What `done` and `total` count, in the reports' messages ("bytes", "documents").
    private let unit: String
    /// Whether `$/cancelRequest` stops the work (LSP's `cancellable`, in `begin`).
    private let cancellable: Bool
    /// The last percentage sent; nil before `begin`.
    private let sent = Mutex<Int?>(nil)

    init(token: JSONValue?, title: String, writer: MessageWriter, unit: String = "bytes", cancellable: Bool = true) {
        self.token = token
        self.title = title
        self.writer = writer
        self.unit = unit
        self.cancellable = cancellable
    }

    /// Reports `done` of `total` units.
    func report(done: Int, total: Int) {
        guard let token else { return }
        let percentage = total > 0 ? min(100, done * 100 / total) : 100
        let value: JSONValue? = sent.withLock { last in
            if last == nil {
                last = percentage
                return ["kind": "begin", "title": .string(title), "cancellable": .bool(cancellable), "percentage": .integer(Int64(percentage))]
            }
            guard let previous = last, percentage > previous else { return nil }
            last = percentage
            return ["kind": "report", "percentage": .integer(Int64(percentage)), "message": .string("\(done) of \(total) \(unit)")]
        }
        if let value { writer.send(Notification(method: "$/progress", params: ["token": token, "value": value])) }
    }

    /// Ends the progress, if it began.
    func end() {
        guard let token, sent.withLock({ $0 != nil }) else { return }
        writer.send(Notification(method: "$/progress", params: ["token": token, "value": ["kind": "end"]]))
    }
}
