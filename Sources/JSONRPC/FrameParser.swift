/// LSP's base protocol framing, read side: a pure state machine with no I/O, fed any slicing of the
/// byte stream (a byte at a time, whole messages, several messages per read) and producing the same
/// events.
///
/// Each message is a header block (`Name: value` lines ended by CRLF, or a bare LF, then an empty
/// line) and a body of exactly `Content-Length` bytes. Header names match case-insensitively;
/// `Content-Type` and unknown headers are accepted and ignored. A header fault (a missing, negative,
/// non-numeric or duplicated length, a line that is not a header, a line too long) produces one
/// `.error` and the parser resynchronises at the next `Content-Length` it finds in the stream. A
/// length above the cap produces one `.error` and its body is skipped unread, so the stream stays in
/// step without buffering it.
public struct FrameParser: Sendable {
    /// What the parser found in the stream.
    public enum Event: Sendable, Equatable {
        /// A complete message body.
        case message([UInt8])
        /// A framing fault; the parser has already resynchronised past it.
        case error(FramingError)
    }

    /// The largest body accepted, in bytes.
    public let maxMessageSize: Int
    /// The longest header line accepted, in bytes.
    public let maxHeaderLineLength: Int

    private enum State: Sendable {
        /// Reading header lines; the length seen so far, whether any line was read.
        case header(length: Int?, sawLine: Bool)
        /// Reading a body of this many bytes.
        case body(Int)
        /// Discarding this many bytes of an oversized body.
        case skipping(Int)
        /// Discarding bytes until the next `Content-Length`.
        case resynchronising
    }

    private var state: State = .header(length: nil, sawLine: false)
    private var buffer: [UInt8] = []
    private var start = 0
    /// How far the buffer has been searched for the current header line's end.
    private var lineSearchedUpTo = 0

    /// A parser that refuses bodies above `maxMessageSize` bytes (64 MiB by default).
    public init(maxMessageSize: Int = 64 << 20, maxHeaderLineLength: Int = 8192) {
        self.maxMessageSize = maxMessageSize
        self.maxHeaderLineLength = maxHeaderLineLength
    }

    /// The bytes received but not yet consumed by an event.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Whether the stream is between messages (nothing partial is buffered).
    public var isAtMessageBoundary: Bool {
        if case .header(nil, false) = state { return bufferedByteCount == 0 }
        return false
    }

    /// Adds bytes from the stream and answers the events they complete, in order.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> [Event] {
        append(bytes)
        var events: [Event] = []
        while let event = next() { events.append(event) }
        return events
    }

    /// Adds bytes from the stream; call `next()` until it answers `nil` to take the events.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            lineSearchedUpTo = max(0, lineSearchedUpTo - start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next event the buffered bytes complete, or `nil` when more bytes are needed.
    public mutating func next() -> Event? {
        while true {
            switch state {
            case .body(let length):
                guard buffer.count - start >= length else { return nil }
                let body = Array(buffer[start..<start + length])
                start += length
                state = .header(length: nil, sawLine: false)
                return .message(body)

            case .skipping(let remaining):
                let available = min(remaining, buffer.count - start)
                start += available
                if available < remaining {
                    state = .skipping(remaining - available)
                    return nil
                }
                state = .header(length: nil, sawLine: false)

            case .resynchronising:
                switch findContentLength() {
                case .found(let index):
                    start = index
                    state = .header(length: nil, sawLine: false)
                case .undecided(let index):
                    start = index
                    return nil
                case .none:
                    // Keep a tail that could be the beginning of "Content-Length" split across reads.
                    start = max(start, buffer.count - (Self.contentLengthName.count - 1))
                    return nil
                }

            case .header(let length, let sawLine):
                // Bytes already searched for the line end are not searched again on the next read,
                // so a long line arriving in small reads costs linear time.
                let searchFrom = max(start, lineSearchedUpTo)
                guard let newline = buffer[searchFrom...].firstIndex(of: UInt8(ascii: "\n")) else {
                    lineSearchedUpTo = buffer.count
                    // A line of the maximum length may be waiting for its LF after its CR.
                    let pending = buffer.count - start - (buffer.last == UInt8(ascii: "\r") ? 1 : 0)
                    if pending > maxHeaderLineLength {
                        // Step past the line's first byte, or resynchronisation would find the
                        // same "Content-Length" here again and loop.
                        start += 1
                        return fail(.headerLineTooLong(limit: maxHeaderLineLength))
                    }
                    return nil
                }
                var lineEnd = newline
                if lineEnd > start, buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                if lineEnd - start > maxHeaderLineLength {
                    start += 1
                    return fail(.headerLineTooLong(limit: maxHeaderLineLength))
                }
                let line = buffer[start..<lineEnd]
                let lineStart = start
                start = newline + 1

                if line.isEmpty {
                    // Blank lines between messages are tolerated; a blank line ends a header block.
                    guard sawLine else { continue }
                    guard let length else { return fail(.missingContentLength) }
                    if length > maxMessageSize {
                        // A body a little over the cap is skipped exactly, keeping the stream in
                        // step; a length no client could mean (beyond 16 times the cap and 1 GiB)
                        // would swallow all further input, so the parser resynchronises instead.
                        if length > max(maxMessageSize.multipliedReportingOverflow(by: 16).partialValue, 1 << 30) {
                            return fail(.invalidContentLength(String(length), "it is implausibly large"))
                        }
                        state = .skipping(length)
                        return .error(.messageTooLarge(length: length, limit: maxMessageSize))
                    }
                    state = .body(length)
                    continue
                }
                if line.first == UInt8(ascii: "{") || line.first == UInt8(ascii: "[") {
                    // Resynchronise from inside this line: a header may follow the JSON directly.
                    start = lineStart + 1
                    return fail(.unframedJSON)
                }
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")),
                    colon > line.startIndex, line[line.startIndex..<colon].allSatisfy(Self.isTokenByte)
                else {
                    start = lineStart + 1
                    return fail(.malformedHeaderLine(Self.preview(line)))
                }
                let name = line[line.startIndex..<colon]
                let value = Self.trimmed(line[(colon + 1)...])
                if Self.equalsIgnoringCase(name, Self.contentLengthName) {
                    let parsed: Int
                    switch Self.parseLength(value) {
                    case .success(let number): parsed = number
                    case .failure(let error): return fail(error)
                    }
                    if let length, length != parsed { return fail(.conflictingContentLength) }
                    state = .header(length: parsed, sawLine: true)
                } else {
                    state = .header(length: length, sawLine: true)
                }
            }
        }
    }

    private mutating func fail(_ error: FramingError) -> Event {
        state = .resynchronising
        return .error(error)
    }

    private static let contentLengthName = Array("content-length".utf8)

    /// Where resynchronisation can restart.
    private enum Resynchronisation {
        /// A header starts here.
        case found(Int)
        /// A candidate starts here, but the bytes after it have not all arrived.
        case undecided(Int)
        /// No candidate in the buffer.
        case none
    }

    /// The next "Content-Length" (any case) at or after `start` that is followed by a whole, valid
    /// length line (`: digits` then a line end). Text such as `"Content-Length: 5"` inside a string of
    /// the body being discarded is never followed by a raw line end (JSON escapes those), so it is
    /// passed over; a header glued to the end of a body or to garbage is found.
    private func findContentLength() -> Resynchronisation {
        let name = Self.contentLengthName
        var index = start
        let last = buffer.count - name.count
        while index <= last {
            if buffer[index] | 0x20 == name[0] {
                var matched = true
                for offset in 1..<name.count where buffer[index + offset] | 0x20 != name[offset] {
                    // "-" | 0x20 is still "-", so the OR fold is safe for this name.
                    matched = false
                    break
                }
                if matched {
                    switch validLengthLine(after: index + name.count) {
                    case true?: return .found(index)
                    case nil: return .undecided(index)
                    case false?: break
                    }
                }
            }
            index += 1
        }
        return .none
    }

    /// Whether `: digits` and a line end follow (spaces allowed around the colon); nil when the
    /// buffer ends before that is known.
    private func validLengthLine(after position: Int) -> Bool? {
        var index = position
        var digits = 0
        var sawColon = false
        while index < buffer.count, index - position < 64 {
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"):
                if digits > 0 { return trailingBlanksThenNewline(from: index) }
            case UInt8(ascii: ":"):
                if sawColon { return false }
                sawColon = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if !sawColon { return false }
                digits += 1
            case UInt8(ascii: "\r"), UInt8(ascii: "\n"):
                return sawColon && digits > 0
            default:
                return false
            }
            index += 1
        }
        return index - position >= 64 ? false : nil
    }

    /// Whether only blanks, then a line end, follow; nil when undecided. At most 64 blanks are
    /// looked at, so that a candidate followed by an endless run of blanks is given up (fuzzer
    /// finding F3) rather than buffered and rescanned on every read.
    private func trailingBlanksThenNewline(from position: Int) -> Bool? {
        var index = position
        while index < buffer.count {
            if index - position >= 64 { return false }
            switch buffer[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"): index += 1
            case UInt8(ascii: "\r"), UInt8(ascii: "\n"): return true
            default: return false
            }
        }
        return nil
    }

    private static func parseLength(_ value: ArraySlice<UInt8>) -> Result<Int, FramingError> {
        let text = String(decoding: value, as: UTF8.self)
        guard !value.isEmpty else { return .failure(.invalidContentLength(text, "it is empty")) }
        if value.first == UInt8(ascii: "-") {
            return .failure(.invalidContentLength(text, "it is negative"))
        }
        guard value.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return .failure(.invalidContentLength(preview(value), "it is not a decimal number"))
        }
        // Anything over 18 digits is far above any cap and would overflow Int.
        guard value.count <= 18, let number = Int(text) else {
            return .failure(.invalidContentLength(preview(value), "it is too large"))
        }
        return .success(number)
    }

    /// Whether a byte may appear in a header name (RFC 9110's token characters).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        return slice
    }

    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowercase: [UInt8]) -> Bool {
        guard bytes.count == lowercase.count else { return false }
        return zip(bytes, lowercase).allSatisfy { pair in
            let byte = pair.0
            let folded = (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) ? byte | 0x20 : byte
            return folded == pair.1
        }
    }

    private static func preview(_ bytes: ArraySlice<UInt8>) -> String {
        let shown = String(decoding: bytes.prefix(60), as: UTF8.self)
        return bytes.count > 60 ? shown + "..." : shown
    }
}

/// A fault in the framing of the byte stream, answered with -32700 and an id of null.
public enum FramingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A header block ended without a `Content-Length`.
    case missingContentLength
    /// A `Content-Length` that is not a non-negative decimal number of sane size.
    case invalidContentLength(String, String)
    /// Two `Content-Length` headers that disagree.
    case conflictingContentLength
    /// A body longer than the configured cap; it was skipped.
    case messageTooLarge(length: Int, limit: Int)
    /// A header line with no colon.
    case malformedHeaderLine(String)
    /// JSON where a header was expected: the peer sent a message without framing.
    case unframedJSON
    /// A header line longer than the cap.
    case headerLineTooLong(limit: Int)

    public var description: String {
        switch self {
        case .missingContentLength:
            return "header block has no Content-Length"
        case .invalidContentLength(let value, let why):
            return "Content-Length \"\(value)\" is invalid: \(why)"
        case .conflictingContentLength:
            return "two Content-Length headers disagree"
        case .messageTooLarge(let length, let limit):
            return "Content-Length \(length) exceeds the limit of \(limit) bytes; the message was skipped"
        case .malformedHeaderLine(let line):
            return "malformed header line \"\(line)\" (expected \"Name: value\")"
        case .unframedJSON:
            return "JSON without a Content-Length header; every message needs \"Content-Length: N\\r\\n\\r\\n\" before it"
        case .headerLineTooLong(let limit):
            return "header line longer than \(limit) bytes"
        }
    }
}

/// LSP's base protocol framing, write side.
public enum Framing {
    /// The header and body of one message. The header is exactly `Content-Length: N\r\n\r\n`:
    /// Emacs' jsonrpc.el and pygls match that spelling literally.
    public static func frame(_ body: [UInt8]) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(body.count + 32)
        append(body, to: &message)
        return message
    }

    /// Appends the header and body of one message to `output`.
    public static func append(_ body: [UInt8], to output: inout [UInt8]) {
        output.append(contentsOf: "Content-Length: ".utf8)
        // The length's decimal digits, without a String.
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            var value = body.count
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                count += 1
            } while value > 0
            output.append(contentsOf: buffer[(20 - count)...])
        }
        output.append(contentsOf: "\r\n\r\n".utf8)
        output.append(contentsOf: body)
    }
}
