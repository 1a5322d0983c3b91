import UTF8Validation
#if canImport(Glibc)
    import Glibc
#endif

/// Decodes a file's bytes, fed in pieces, into well-formed UTF-8 pieces; refuses the first byte that
/// does not decode, with its offset in the file.
struct TextDecoder {
    /// Why decoding stopped.
    struct Failure: Error, Equatable {
        /// The offset in the file of the first byte that does not decode.
        var offset: Int
        var reason: String
    }

    let encoding: TextEncoding
    /// Bytes of an incomplete sequence carried to the next piece.
    private var carry: [UInt8] = []
    /// The file offset of the first byte of the next piece (or of the carry).
    private var offset: Int
    /// A UTF-16 high surrogate waiting for its low half.
    private var pendingHighSurrogate: UInt16? = nil

    init(encoding: TextEncoding, startOffset: Int) {
        self.encoding = encoding
        offset = startOffset
    }

    /// Decodes the next piece; `emit` receives well-formed UTF-8.
    mutating func decode(_ piece: UnsafeBufferPointer<UInt8>, emit: (UnsafeBufferPointer<UInt8>) -> Void) throws(Failure) {
        switch encoding {
        case .utf8: try decodeUTF8(piece, emit: emit)
        case .utf16LittleEndian, .utf16BigEndian: try decodeUTF16(piece, emit: emit)
        case .latin1: decodeLatin1(piece, emit: emit)
        }
    }

    /// Finishes the stream: an incomplete sequence at the end is an error.
    mutating func finish() throws(Failure) {
        if !carry.isEmpty {
            throw Failure(offset: offset, reason: encoding == .utf8 ? "truncated UTF-8 sequence at the end of the file" : "odd number of bytes in a UTF-16 file")
        }
        if pendingHighSurrogate != nil {
            throw Failure(offset: offset - 2, reason: "unpaired UTF-16 high surrogate at the end of the file")
        }
    }

    /// Finishes a part of a UTF-8 file that `next` (the bytes that follow the part in the file,
    /// at least three unless the file ends sooner) continues: a sequence cut off at the part's end
    /// is refused with the offset and reason that decoding the file in one go would give there.
    mutating func finish(followedBy next: UnsafeBufferPointer<UInt8>) throws(Failure) {
        if encoding == .utf8 && !carry.isEmpty && !next.isEmpty {
            let joined = carry + Array(next.prefix(3))
            // The carry is a valid, incomplete start, and the split put a sequence's start (not a
            // continuation) after it: this throws, as the one-go decoder would at the carry.
            _ = try joined.withUnsafeBufferPointer { (buffer) throws(Failure) -> Int in
                try Self.validUTF8Prefix(buffer, baseOffset: offset, allowIncompleteTail: false)
            }
        }
        try finish()
    }

    // MARK: UTF-8

    private mutating func decodeUTF8(_ piece: UnsafeBufferPointer<UInt8>, emit: (UnsafeBufferPointer<UInt8>) -> Void) throws(Failure) {
        var input = piece
        if !carry.isEmpty {
            // The carry is the valid start of one sequence cut off by the end of the last piece.
            let length = UTF8Validation.sequenceLength(lead: carry[0])
            let taken = min(length - carry.count, piece.count)
            let joined = carry + Array(piece.prefix(taken))
            let complete = joined.count == length
            let valid = try joined.withUnsafeBufferPointer { (buffer) throws(Failure) -> Int in
                try Self.validUTF8Prefix(buffer, baseOffset: offset, allowIncompleteTail: !complete)
            }
            guard complete, valid == length else {
                carry = joined
                return
            }
            joined.withUnsafeBufferPointer { emit($0) }
            offset += length
            carry = []
            input = UnsafeBufferPointer(rebasing: piece[taken...])
        }
        let valid = try Self.validUTF8Prefix(input, baseOffset: offset, allowIncompleteTail: true)
        if valid > 0 { emit(UnsafeBufferPointer(rebasing: input[0..<valid])) }
        offset += valid
        carry = Array(input[valid...])
    }

    /// The length of the well-formed prefix; with `allowIncompleteTail`, a sequence cut off by the
    /// end of the buffer is left out rather than refused. The checking is `UTF8Validation`'s, a
    /// block at a time up to the last few bytes or the first error, then byte by byte, which finds
    /// the exact offset and kind of an error and handles a cut-off tail.
    static func validUTF8Prefix(
        _ bytes: UnsafeBufferPointer<UInt8>, baseOffset: Int, allowIncompleteTail: Bool, extensions: Bool = true
    ) throws(Failure) -> Int {
        try validUTF8Prefix(
            bytes, from: UTF8Validation.wellFormedPrefix(bytes, extensions: extensions), baseOffset: baseOffset,
            allowIncompleteTail: allowIncompleteTail)
    }

    /// Validates `bytes[start...]` byte by byte (`start` must be a scalar boundary); see above.
    static func validUTF8Prefix(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, baseOffset: Int, allowIncompleteTail: Bool) throws(Failure) -> Int {
        let checked = UTF8Validation.validPrefix(bytes, from: start, allowIncompleteTail: allowIncompleteTail)
        switch checked.problem {
        case nil:
            return checked.end
        case .invalidLead(let lead):
            throw Failure(offset: baseOffset + checked.end, reason: "byte 0x\(String(lead, radix: 16, uppercase: true)) is not valid UTF-8")
        case .malformed:
            throw Failure(offset: baseOffset + checked.end, reason: "malformed UTF-8 sequence")
        case .truncated:
            throw Failure(offset: baseOffset + checked.end, reason: "truncated UTF-8 sequence")
        }
    }

    // MARK: UTF-16

    private mutating func decodeUTF16(_ piece: UnsafeBufferPointer<UInt8>, emit: (UnsafeBufferPointer<UInt8>) -> Void) throws(Failure) {
        var output: [UInt8] = []
        output.reserveCapacity(piece.count + piece.count / 2)
        var bytes = carry
        bytes.append(contentsOf: piece)
        let littleEndian = encoding == .utf16LittleEndian
        var index = 0
        while index + 2 <= bytes.count {
            let unit = littleEndian
                ? UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
                : UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
            let unitOffset = offset + index
            index += 2
            if let high = pendingHighSurrogate {
                guard (0xDC00...0xDFFF).contains(unit) else {
                    throw Failure(offset: unitOffset - 2, reason: "unpaired UTF-16 high surrogate")
                }
                pendingHighSurrogate = nil
                let scalar = 0x10000 + (UInt32(high - 0xD800) << 10) + UInt32(unit - 0xDC00)
                Self.appendUTF8(scalar, to: &output)
            } else if (0xD800...0xDBFF).contains(unit) {
                pendingHighSurrogate = unit
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw Failure(offset: unitOffset, reason: "unpaired UTF-16 low surrogate")
            } else {
                Self.appendUTF8(UInt32(unit), to: &output)
            }
        }
        offset += index
        carry = Array(bytes[index...])
        output.withUnsafeBufferPointer { if !$0.isEmpty { emit($0) } }
    }

    // MARK: Latin-1

    private mutating func decodeLatin1(_ piece: UnsafeBufferPointer<UInt8>, emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        var output: [UInt8] = []
        output.reserveCapacity(piece.count + piece.count / 4)
        for byte in piece { Self.appendUTF8(UInt32(byte), to: &output) }
        offset += piece.count
        output.withUnsafeBufferPointer { if !$0.isEmpty { emit($0) } }
    }

    static func appendUTF8(_ scalar: UInt32, to output: inout [UInt8]) {
        switch scalar {
        case 0..<0x80:
            output.append(UInt8(scalar))
        case 0x80..<0x800:
            output.append(UInt8(0xC0 | scalar >> 6))
            output.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            output.append(UInt8(0xE0 | scalar >> 12))
            output.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            output.append(UInt8(0x80 | scalar & 0x3F))
        default:
            output.append(UInt8(0xF0 | scalar >> 18))
            output.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            output.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            output.append(UInt8(0x80 | scalar & 0x3F))
        }
    }
}

/// The kinds of line break in a UTF-8 stream fed in pieces, as ``LineEndingCounter`` finds them,
/// for the loaders: only whether each kind occurs, not how often, which saves a pass over most
/// pieces. A piece without a `\r` (the usual case, found with `memchr`) is not counted: `lf` grows
/// by the `\n` at its start, if any, plus one if it holds another (so that subtracting the first
/// `\n` of a part, the second half of a CRLF cut by the split, leaves `lf` above zero exactly when
/// another `\n` remains). A piece holding a `\r` is counted exactly, as `LineEndingCounter` does.
struct LineEndingKinds: Sendable {
    private(set) var lf = 0
    private(set) var crlf = 0
    private(set) var cr = 0
    private var pendingCR = false

    /// Looks at the next piece of the stream.
    mutating func count(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, let last = bytes.last else { return }
        let first = bytes[0]
        if memchr(base, 0x0D, bytes.count) == nil {
            // No `\r`: every break here is a lone `\n`, except a first one that ends a CRLF.
            let joined = pendingCR && first == 0x0A
            if pendingCR && !joined { cr += 1 }
            if joined { crlf += 1 }
            let leading = first == 0x0A ? 1 : 0
            let more = bytes.count > 1 && memchr(base + 1, 0x0A, bytes.count - 1) != nil ? 1 : 0
            lf += leading + more - (joined ? 1 : 0)
            pendingCR = false
            return
        }
        let (feeds, returns, pairs) = LineEndingCounter.tally(bytes)
        let joined = pendingCR && first == 0x0A
        if pendingCR && !joined { cr += 1 }
        crlf += pairs + (joined ? 1 : 0)
        lf += feeds - pairs - (joined ? 1 : 0)
        pendingCR = last == 0x0D
        cr += returns - pairs - (pendingCR ? 1 : 0)
    }

    /// The style, once the whole stream has been looked at.
    var style: LineEndingStyle {
        let finalCR = cr + (pendingCR ? 1 : 0)
        let kinds = [lf > 0, crlf > 0, finalCR > 0].filter { $0 }.count
        if kinds > 1 { return .mixed }
        if lf > 0 { return .lf }
        if crlf > 0 { return .crlf }
        if finalCR > 0 { return .cr }
        return .none
    }
}
