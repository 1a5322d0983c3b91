import JSON

/// What bounds a batch (README §4.6): how many elements it may have, and how many bytes the array
/// answering it may take (the connection's largest message, `maxMessageSize`: the server sends
/// no batch answer larger than what it would accept).
public enum BatchLimits {
    /// The most elements a batch may have. A longer one is refused whole, with one -32600 under
    /// id null, after a scan of its text and before anything of it is built or handled.
    public static let maxElements = 10_000

    /// The error answering a batch of more than ``maxElements`` elements.
    static func tooManyElements(_ count: Int) -> ResponseError {
        ResponseError(
            .invalidRequest,
            "Invalid request: a batch of \(count) elements; at most \(maxElements) are accepted, and none of this one was handled",
            data: ["limit": "batchElements", "maximum": .integer(Int64(maxElements)), "elements": .integer(Int64(count))])
    }

    /// The error replacing a response of `size` bytes that does not fit in a batch's answer of at
    /// most `limit` bytes.
    static func answerTooLarge(size: Int, limit: Int) -> ResponseError {
        ResponseError(
            .invalidRequest,
            "Invalid request: its response (\(size) bytes) would take the batch's answer past \(limit) bytes; the request was handled and its result dropped (send it alone)",
            data: ["limit": "batchAnswerBytes", "maximum": .integer(Int64(limit)), "size": .integer(Int64(size))])
    }
}

/// The array answering a batch, built as its responses come: each is serialised at once and
/// appended to the array's text, so that the batch holds its answer's bytes and no tree of them
/// (a batch of a million elements held a `JSONValue` and a json-c tree of every response, 2.7 GB
/// at its peak), and its bytes are bounded: a response that would take the array past `limit`
/// bytes is replaced by a -32600 error under its id (its request was handled, its result is
/// dropped); the responses after it that fit are kept.
public struct BatchAnswer: Sendable {
    /// The array's text so far: `[` and the responses separated by commas (closed by ``text``).
    private var open: [UInt8] = [UInt8(ascii: "[")]
    /// Where each response ends in `open` (for the recorder, which records them one by one).
    public private(set) var ends: [Int] = []
    /// The responses' ids, in order (for the writer's observers).
    public private(set) var ids: [RequestID] = []
    /// The most bytes the array may take, but for the errors replacing responses that did not fit.
    let limit: Int

    public init(limit: Int) {
        self.limit = limit
    }

    /// Whether no response was added (a batch of notifications is answered with nothing).
    public var isEmpty: Bool { ids.isEmpty }

    /// A response serialised ahead of its turn in the array.
    public struct Text: Sendable {
        let id: RequestID
        let body: [UInt8]

        public init(_ response: Response) {
            id = response.id
            body = response.json.serialized()
        }
    }

    /// What waits for its turn once a batch has a deferred response: a response's text, or the
    /// work that answers one (and what runs once the array is written).
    enum Waiting: Sendable {
        case text(Text)
        case work(Task<Response, Never>, answered: (@Sendable () async -> Void)?)
    }

    /// Adds `response`, or the error naming the limit when it does not fit.
    public mutating func append(_ response: Response) {
        append(Text(response))
    }

    /// Adds a serialised response, or the error naming the limit when it does not fit.
    public mutating func append(_ text: Text) {
        var body = text.body
        if open.count + body.count + 1 > limit {
            body = Response.failure(text.id, BatchLimits.answerTooLarge(size: body.count, limit: limit)).json.serialized()
        }
        if !ids.isEmpty { open.append(UInt8(ascii: ",")) }
        open.append(contentsOf: body)
        ends.append(open.count)
        ids.append(text.id)
    }

    /// Closes the array: its whole text.
    public mutating func close() -> [UInt8] {
        open.append(UInt8(ascii: "]"))
        return open
    }

    /// The text of each response, in order, in the array's text `text`.
    public func responseTexts(in text: [UInt8]) -> [ArraySlice<UInt8>] {
        var start = 1
        return ends.map { end in
            defer { start = end + 1 }
            return text[start..<end]
        }
    }
}
