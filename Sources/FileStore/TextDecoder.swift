import CTextScan
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
            let length = Self.sequenceLength(lead: carry[0])
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

    private static func sequenceLength(lead: UInt8) -> Int {
        switch lead {
        case 0..<0x80: return 1
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        default: return 4
        }
    }

    /// The length of the well-formed prefix; with `allowIncompleteTail`, a sequence cut off by the
    /// end of the buffer is left out rather than refused.
    static func validUTF8Prefix(
        _ bytes: UnsafeBufferPointer<UInt8>, baseOffset: Int, allowIncompleteTail: Bool, extensions: Bool = true
    ) throws(Failure) -> Int {
        // A block at a time up to the last few bytes or the first error, then byte by byte,
        // which finds the exact offset and reason of an error and handles a cut-off tail.
        try validUTF8Prefix(
            bytes, from: wellFormedPrefix(bytes, extensions: extensions), baseOffset: baseOffset,
            allowIncompleteTail: allowIncompleteTail)
    }

    /// Validates `bytes[start...]` byte by byte (`start` must be a scalar boundary); see above.
    static func validUTF8Prefix(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, baseOffset: Int, allowIncompleteTail: Bool) throws(Failure) -> Int {
        var index = start
        let count = bytes.count
        guard let base = bytes.baseAddress else { return 0 }
        while index < count {
            // ASCII fast path, eight bytes at a time.
            while index + 8 <= count {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                if word & 0x8080_8080_8080_8080 != 0 { break }
                index += 8
            }
            guard index < count else { break }
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var second: ClosedRange<UInt8> = 0x80...0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; second = 0xA0...0xBF
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; second = 0x80...0x9F
            case 0xF0: length = 4; second = 0x90...0xBF
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; second = 0x80...0x8F
            default:
                throw Failure(offset: baseOffset + index, reason: "byte 0x\(String(lead, radix: 16, uppercase: true)) is not valid UTF-8")
            }
            let available = count - index
            for position in 1..<min(length, available) {
                let byte = bytes[index + position]
                let range = position == 1 ? second : 0x80...0xBF
                if !range.contains(byte) {
                    throw Failure(offset: baseOffset + index, reason: "malformed UTF-8 sequence")
                }
            }
            if available < length {
                if allowIncompleteTail { return index }
                throw Failure(offset: baseOffset + index, reason: "truncated UTF-8 sequence")
            }
            index += length
        }
        return index
    }

    /// A scalar boundary `end` such that `bytes[..<end]` is well-formed UTF-8, found sixteen bytes
    /// at a time; it stops short of the last bytes and before the block holding the first error,
    /// which the byte-by-byte validator then looks at.
    ///
    /// Each block is checked against the bytes one, two and three places before it (loaded
    /// unaligned from memory, so blocks need no carried state): a byte must be a continuation
    /// (10xxxxxx) exactly when the byte before it leads a sequence (>= 0xC0), or the byte two
    /// before leads a three- or four-byte one (>= 0xE0), or the byte three before a four-byte one
    /// (>= 0xF0). Besides that, C0, C1 and F5 to FF never occur, and the second byte after E0, ED,
    /// F0 and F4 is range-checked (no overlong forms, surrogates or values above U+10FFFF).
    /// The tests work on the high bit of each lane, which a saturating subtraction or an
    /// addition puts there in one SSE2 instruction (SSE2 has no unsigned byte comparison).
    ///
    /// With `extensions` (the default) and a processor with AVX2, the C function
    /// `cts_utf8_well_formed_prefix` does the same 64 bytes at a time with table lookups (about
    /// four times fewer instructions per byte; it stops up to 66 bytes short of the end).
    static func wellFormedPrefix(_ bytes: UnsafeBufferPointer<UInt8>, extensions: Bool = true) -> Int {
        if extensions, bytes.count >= 64, cts_utf8_simd_available() != 0, let base = bytes.baseAddress {
            return cts_utf8_well_formed_prefix(base, bytes.count)
        }
        typealias Lanes = SIMD16<UInt8>
        let count = bytes.count
        guard count >= 32, let base = bytes.baseAddress else { return 0 }
        @inline(__always)
        func load(_ offset: Int) -> Lanes { UnsafeRawPointer(base + offset).loadUnaligned(as: Lanes.self) }
        @inline(__always)
        func word(_ offset: Int) -> UInt64 { UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self) }

        // The first block, with three bytes of nothing before it.
        var padded = SIMD32<UInt8>()
        withUnsafeMutableBytes(of: &padded) { $0.baseAddress!.advanced(by: 3).copyMemory(from: base, byteCount: 16) }
        let (b, p1, p2, p3) = withUnsafeBytes(of: padded) { raw in
            (raw.loadUnaligned(fromByteOffset: 3, as: Lanes.self), raw.loadUnaligned(fromByteOffset: 2, as: Lanes.self),
             raw.loadUnaligned(fromByteOffset: 1, as: Lanes.self), raw.loadUnaligned(fromByteOffset: 0, as: Lanes.self))
        }
        var end = 0
        let high: UInt64 = 0x8080_8080_8080_8080
        if isBad(badLanesOf(b, p1, p2, p3)) { return 0 }
        end = 16
        // Four blocks at a time, one test for all four (a branch per block mispredicts often in
        // text that mixes ASCII and other blocks); a group of ASCII bytes, with the three bytes
        // before it ASCII too (no sequence waiting for continuations), needs no other check.
        while end &+ 64 <= count {
            let ascii = word(end &- 8) | word(end) | word(end &+ 8) | word(end &+ 16) | word(end &+ 24)
                | word(end &+ 32) | word(end &+ 40) | word(end &+ 48) | word(end &+ 56)
            if ascii & high != 0 {
                var bad = badLanesOf(load(end), load(end &- 1), load(end &- 2), load(end &- 3))
                bad |= badLanesOf(load(end &+ 16), load(end &+ 15), load(end &+ 14), load(end &+ 13))
                bad |= badLanesOf(load(end &+ 32), load(end &+ 31), load(end &+ 30), load(end &+ 29))
                bad |= badLanesOf(load(end &+ 48), load(end &+ 47), load(end &+ 46), load(end &+ 45))
                if isBad(bad) { break }
            }
            end &+= 64
        }
        // The last whole blocks one at a time (and the group holding the first error, if any).
        while end &+ 16 <= count && !isBad(badLanesOf(load(end), load(end &- 1), load(end &- 2), load(end &- 3))) { end &+= 16 }
        // Back up to the start of a sequence that the blocks cut off (or that holds the error).
        var start = end
        for lead in max(end &- 3, 0) ..< end where base[lead] >= 0xC0 && lead &+ sequenceLength(lead: base[lead]) > end {
            start = lead
            break
        }
        return start
    }

    /// Whether any lane of `badLanesOf` has its high bit set.
    @inline(__always)
    private static func isBad(_ bad: SIMD16<UInt8>) -> Bool {
        let words = unsafeBitCast(bad, to: SIMD2<UInt64>.self)
        return (words[0] | words[1]) & 0x8080_8080_8080_8080 != 0
    }

    /// The lanes of the sixteen bytes `b` that are not well-formed given the bytes one, two and
    /// three places before each (`p1`, `p2`, `p3`), in their high bits; see `wellFormedPrefix`.
    @_transparent
    static func badLanesOf(_ b: SIMD16<UInt8>, _ p1: SIMD16<UInt8>, _ p2: SIMD16<UInt8>, _ p3: SIMD16<UInt8>) -> SIMD16<UInt8> {
        typealias Lanes = SIMD16<UInt8>
        // Constants as vectors: the operations that take a scalar compile to a loop over lanes.
        // `a - b`, or 0 where `b` is larger (psubusb).
        @inline(__always)
        func saturatingSubtract(_ a: Lanes, _ b: UInt8) -> Lanes {
            let b = Lanes(repeating: b)
            return a.replacing(with: b, where: a .< b) &- b
        }
        @inline(__always)
        func equal(_ a: Lanes, _ b: UInt8) -> Lanes { unsafeBitCast(a .== Lanes(repeating: b), to: Lanes.self) }
        // High bits: p1 >= C0, p2 >= E0, p3 >= F0.
        let required = saturatingSubtract(p1, 0x40) | saturatingSubtract(p2, 0x60) | saturatingSubtract(p3, 0x70)
        // Each byte shifted left by one, two and three (paddb: no byte-wise shift in SSE2).
        let shift1 = b &+ b
        let shift2 = shift1 &+ shift1
        let shift3 = shift2 &+ shift2
        // High bit: b is 10xxxxxx.
        let isContinuation = b & ~shift1
        var bad = required ^ isContinuation
        bad |= saturatingSubtract(b, 0x75) | equal(b & Lanes(repeating: 0xFE), 0xC0)  // F5...FF; C0, C1
        // Bit 5 of b, and bit 5 or 4, in the high bit: after E0 comes A0...BF, after ED 80...9F,
        // after F0 90...BF, after F4 80...8F (b being a continuation, or already found wrong).
        let bits54 = shift2 | shift3
        bad |= (equal(p1, 0xE0) & ~shift2) | (equal(p1, 0xED) & shift2)
        bad |= (equal(p1, 0xF0) & ~bits54) | (equal(p1, 0xF4) & bits54)
        return bad
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
