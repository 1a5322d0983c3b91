import JSON
import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Records every message of a session, both ways, as JSON Lines in the shape of vscode-jsonrpc's
/// JSON trace (what the LSP Inspector reads), for `docsession serve --record FILE`:
///
///     {"isLSPMessage":true,"type":"send-request","message":{...},"timestamp":1767322245678}
///
/// `type` is the direction from the client's point of view: what the client sent is `send-request`,
/// `send-notification` or `send-response`; what the server wrote is `receive-response`,
/// `receive-notification` or `receive-request`. `timestamp` is milliseconds since the epoch.
/// The messages of a batch, and the responses of the array answering it, are recorded one record
/// each. Input that is not a JSON-RPC message is recorded with `"type": "send-invalid"`: a body that
/// is not JSON as its raw text (a JSON string; invalid UTF-8 replaced by U+FFFD), valid JSON that
/// is not a JSON-RPC message (an empty batch, `"jsonrpc": "1.0"`, ...) as its JSON text; a framing
/// fault, which has no body, with `"message": null` and the fault in `"fault"`.
///
/// Each record is one `write(2)` to a file opened with `O_APPEND`, made before the message is
/// handed on (a received one before it is dispatched, a sent one before it is written to stdout),
/// so a killed server leaves whole lines, and the file's order is the order of the conversation.
public final class Recorder: Sendable {
    /// A record's `type`.
    public enum Direction: String, Sendable, CaseIterable {
        case sendRequest = "send-request"
        case sendNotification = "send-notification"
        case sendResponse = "send-response"
        case sendInvalid = "send-invalid"
        case receiveRequest = "receive-request"
        case receiveNotification = "receive-notification"
        case receiveResponse = "receive-response"
    }

    /// The file could not be opened.
    public struct OpenError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The file, closed when the recorder goes.
    private let file: Descriptor
    private let lock = Mutex<Void>(())

    /// Opens (creating it if needed, 0644) `path` for appending records.
    public init(path: String) throws(OpenError) {
        do {
            file = try Descriptor.open(path, .writeOnly, options: [.create, .append], permissions: FilePermissions(rawValue: 0o644))
        } catch {
            let code = error.errno.rawValue
            throw OpenError(description: "cannot open \(path) for recording: \(String(cString: strerror(code))) (errno \(code))")
        }
    }

    // MARK: - Received (the client's send-*)

    /// Watches the raw input with a framer of its own, fed the same bytes as the connection's, so
    /// that what is recorded is each body as it came (and framing faults, which have none).
    public func inputTap(maxMessageSize: Int) -> InputTap {
        InputTap(recorder: self, maxMessageSize: maxMessageSize)
    }

    /// Records the input of one reader: owned by that reader's thread.
    public struct InputTap {
        private let recorder: Recorder
        private var framer: FrameParser
        private let parser: JSONParser

        init(recorder: Recorder, maxMessageSize: Int) {
            self.recorder = recorder
            framer = FrameParser(maxMessageSize: maxMessageSize)
            // A batch over the limit, which the connection refuses unread, is recorded as its text.
            parser = JSONParser()
            parser.maxRootArrayElements = BatchLimits.maxElements
        }

        /// Records the messages these bytes complete.
        public mutating func observe(_ bytes: some Collection<UInt8>) {
            for event in framer.feed(bytes) {
                switch event {
                case .message(let body): recorder.recordReceived(body: body, parser: parser)
                case .error(let fault): recorder.recordFramingFault(fault)
                }
            }
        }
    }

    func recordReceived(body: [UInt8], parser: JSONParser) {
        guard let value = try? parser.parse(body) else {
            write(.sendInvalid, JSONValue.string(String(decoding: body, as: UTF8.self)).serialized())
            return
        }
        if case .array(let elements) = value, !elements.isEmpty {
            for element in elements { recordReceived(element) }
        } else {
            recordReceived(value)
        }
    }

    private func recordReceived(_ value: JSONValue) {
        let direction: Direction
        switch IncomingMessage(value) {
        case .request: direction = .sendRequest
        case .notification: direction = .sendNotification
        case .response: direction = .sendResponse
        case .invalid:
            write(.sendInvalid, JSONValue.string(value.jsonText).serialized())
            return
        }
        write(direction, value.serialized())
    }

    func recordFramingFault(_ fault: FramingError) {
        write(.sendInvalid, Array("null".utf8), extra: ["fault": .string(fault.description)])
    }

    // MARK: - Sent (the client's receive-*)

    /// Records a message the server is about to write; `body` is its serialised form.
    public func recordSent(_ message: JSONValue, body: [UInt8]) {
        if case .array(let elements) = message {
            for element in elements { write(Self.sentDirection(element), element.serialized()) }
        } else {
            write(Self.sentDirection(message), body)
        }
    }

    /// Records one response of a batch's array, given as its text.
    public func recordSentResponse(_ body: [UInt8]) {
        write(.receiveResponse, body)
    }

    private static func sentDirection(_ message: JSONValue) -> Direction {
        guard message["method"] != nil else { return .receiveResponse }
        return message["id"] == nil ? .receiveNotification : .receiveRequest
    }

    // MARK: - Writing

    /// Milliseconds since the epoch.
    private static var now: Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// Writes one record, whole, with one write(2) (looping only over a short write).
    private func write(_ direction: Direction, _ message: [UInt8], extra: JSONObject = [:]) {
        var line: [UInt8] = []
        line.reserveCapacity(message.count + 96)
        line += #"{"isLSPMessage":true,"type":""#.utf8
        line += direction.rawValue.utf8
        line += #"","message":"#.utf8
        line += message
        for (key, value) in extra {
            line += ",".utf8
            line += JSONValue.string(key).serialized()
            line += ":".utf8
            line += value.serialized()
        }
        line += #","timestamp":"#.utf8
        line += String(Self.now).utf8
        line += "}\n".utf8
        lock.withLock { _ in _ = FileDescriptorIO.writeAll(file.rawValue, line) }
    }
}
