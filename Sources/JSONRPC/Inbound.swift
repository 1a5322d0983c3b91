import JSON

/// One unit of work for the dispatcher, in the order it arrived.
public enum Inbound: Sendable, Equatable {
    /// A single message.
    case message(IncomingMessage)
    /// A non-empty batch; answered with an array of the responses, or nothing if there are none.
    case batch([IncomingMessage])
    /// A fault answered with one error response under id null (framing, JSON, an empty batch).
    case failure(ResponseError)
}

/// Turns raw input bytes into `Inbound` work: framing, JSON parsing and JSON-RPC classification.
///
/// It runs on the reader's thread, ahead of the ordered queue, and applies `$/cancelRequest` at once
/// so that a cancellation overtakes the requests still waiting behind a slow one.
public final class InboundDecoder {
    private var framer: FrameParser
    private let parser: JSONParser
    private let pending: PendingRequests
    private let predecoder: ParamsPredecoder?

    /// A decoder; with a `predecoder`, the requests it takes whole skip the `JSONValue` tree.
    public init(maxMessageSize: Int, pending: PendingRequests, predecoder: ParamsPredecoder? = nil) {
        framer = FrameParser(maxMessageSize: maxMessageSize)
        parser = JSONParser()
        // A batch over the limit is refused after the scanner's pass, before json-c builds it.
        parser.maxRootArrayElements = BatchLimits.maxElements
        self.pending = pending
        self.predecoder = predecoder
    }

    /// Whether the stream ended between messages (nothing partial buffered).
    public var isAtMessageBoundary: Bool { framer.isAtMessageBoundary }

    /// The work completed by these bytes, in order.
    public func decode(_ bytes: some Collection<UInt8>) -> [Inbound] {
        var work: [Inbound] = []
        for event in framer.feed(bytes) {
            switch event {
            case .error(let error):
                work.append(.failure(ResponseError(.parseError, "Parse error: \(error)")))
            case .message(let body):
                if let item = decodeBody(body) { work.append(item) }
            }
        }
        return work
    }

    /// Parses and classifies one framed body; `nil` when nothing remains to dispatch.
    public func decodeBody(_ body: [UInt8]) -> Inbound? {
        let value: JSONValue
        do {
            if let predecoder {
                let decoded = try body.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> Decoded in
                    try parser.withParsed(buffer) { (root) throws(JSONParseError) -> Decoded in
                        if let request = Self.predecodedRequest(root, predecoder) { return .request(request) }
                        return .value(try root.jsonValue())
                    }.get()
                }
                switch decoded {
                case .request(let request): return accept(.request(request)).map(Inbound.message)
                case .value(let decodedValue): value = decodedValue
                }
            } else {
                value = try parser.parse(body)
            }
        } catch {
            if case .tooManyElements(let count, _) = error.reason { return .failure(BatchLimits.tooManyElements(count)) }
            return .failure(ResponseError(parseError: error))
        }
        if case .array(let elements) = value {
            if elements.isEmpty {
                return .failure(ResponseError(.invalidRequest, "Invalid request: empty batch"))
            }
            let messages = elements.compactMap(accept)
            return messages.isEmpty ? nil : .batch(messages)
        }
        return accept(IncomingMessage(value)).map(Inbound.message)
    }

    private enum Decoded {
        case request(Request)
        case value(JSONValue)
    }

    /// A request of exactly the usual shape, `{"jsonrpc": "2.0", "id", "method", "params": {..}}`
    /// with an integer or string id, whose params the predecoder takes whole; `nil` for anything
    /// else, which is then classified from its `JSONValue` as always.
    private static func predecodedRequest(_ root: JSONCView, _ predecoder: ParamsPredecoder) -> Request? {
        guard root.objectCount == 4 else { return nil }
        var version: JSONCView?, method: JSONCView?, params: JSONCView?, idValue: JSONCView?
        guard root.forEachMember({ name, value in
            if JSONCView.name(name, is: "jsonrpc") { version = value }
            else if JSONCView.name(name, is: "method") { method = value }
            else if JSONCView.name(name, is: "params") { params = value }
            else if JSONCView.name(name, is: "id") { idValue = value }
            else { return false }
            return true
        }), let version, version.isString("2.0"), let method = method?.string, let params, params.objectCount != nil,
            let idValue
        else { return nil }
        let id: RequestID
        if let integer = idValue.integer {
            id = .integer(integer)
        } else if let string = idValue.string {
            id = .string(string)
        } else {
            return nil
        }
        guard let decoded = predecoder(method, params) else { return nil }
        return Request(id: id, method: method, predecoded: decoded)
    }

    private func accept(_ value: JSONValue) -> IncomingMessage? {
        accept(IncomingMessage(value))
    }

    /// Registers requests and applies cancellations; answers what the dispatcher still has to see.
    private func accept(_ message: IncomingMessage) -> IncomingMessage? {
        switch message {
        case .request(let request):
            pending.enqueue(request.id)
        case .notification(let notification) where notification.method == "$/cancelRequest":
            // Handled here, ahead of the queue; a malformed one is dropped, as notifications
            // cannot be answered.
            if let id = notification.params?["id"].flatMap(RequestID.init(json:)), id != .null {
                pending.cancel(id)
            }
            return nil
        default:
            break
        }
        return message
    }
}
