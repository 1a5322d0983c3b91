import CTextScan

/// The one UTF-8 validator: what the file loader (`FileStore`'s `TextDecoder`), the JSON scanner
/// (`JSON`'s `JSONScanner`) and the text buffer (`TextBuffer`'s `UTF8Scanning.isValid`) call.
///
/// Well-formed means RFC 3629 as table 3-7 of the Unicode standard spells it: no overlong forms
/// (C0, C1, E0 80...9F, F0 80...8F), no encoded surrogates (ED A0...BF), nothing above U+10FFFF
/// (F4 90..., F5...FF), no stray continuation bytes, no sequence cut short.
///
/// Three levels, for three kinds of caller:
/// - ``checkSequence(at:in:)``: one sequence (the JSON scanner meets them one at a time inside
///   strings); inlinable, since it is called per non-ASCII character.
/// - ``validPrefix(_:from:allowIncompleteTail:)``: byte by byte (eight ASCII bytes at a time) from a
///   scalar boundary, to the end or the first problem, with its offset and kind (the loader's error
///   names both).
/// - ``wellFormedPrefix(_:extensions:)``: sixteen bytes at a time in Swift, or 64 with AVX2 in C
///   (`CTextScan`), up to a boundary shortly before the end or the first problem; the others finish
///   from there. ``isValid(_:)`` and the loader use both.
public enum UTF8Validation {
    /// What is wrong at a sequence's start.
    public enum Problem: Equatable, Sendable {
        /// The byte cannot start a sequence (a continuation, C0, C1, or F5 to FF).
        case invalidLead(UInt8)
        /// A byte that should continue the sequence does not (or the second byte is out of its
        /// lead's range: an overlong form, a surrogate, above U+10FFFF).
        case malformed
        /// The bytes present are a valid start, but the buffer ends before the sequence does.
        case truncated
    }

    /// The check of the one sequence starting at `index` (which must be in `bytes`).
    public enum SequenceCheck: Equatable, Sendable {
        case valid(length: Int)
        case invalid(Problem)
    }

    /// Checks the sequence that starts at `bytes[index]`: its length when well-formed, else what is
    /// wrong. The bytes present are checked before the length is: a bad continuation within the
    /// buffer is `malformed` even when the sequence is also cut short.
    @inlinable @inline(__always)
    public static func checkSequence(at index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> SequenceCheck {
        let lead = bytes[index]
        if lead < 0x80 { return .valid(length: 1) }
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return .invalid(.invalidLead(lead))
        }
        let available = bytes.count &- index
        if available > 1 {
            let second = bytes[index &+ 1]
            if second < low || second > high { return .invalid(.malformed) }
            var position = 2
            while position < min(length, available) {
                if bytes[index &+ position] & 0xC0 != 0x80 { return .invalid(.malformed) }
                position &+= 1
            }
        }
        return available < length ? .invalid(.truncated) : .valid(length: length)
    }

    /// The length of a sequence led by `lead`, for a byte known to lead one (a continuation byte,
    /// C0, C1 and F5 to FF answer 4; the callers never ask about them).
    @inlinable
    public static func sequenceLength(lead: UInt8) -> Int {
        switch lead {
        case 0..<0x80: return 1
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        default: return 4
        }
    }

    /// Validates `bytes[start...]` byte by byte (eight ASCII bytes at a time); `start` must be a
    /// scalar boundary. Answers where validation stopped and why: at the end with no problem, or at
    /// the start of the first bad sequence with its problem. With `allowIncompleteTail`, a valid
    /// start cut off by the end of the buffer stops there without a problem (the rest comes with the
    /// next piece of a file).
    public static func validPrefix(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int = 0, allowIncompleteTail: Bool
    ) -> (end: Int, problem: Problem?) {
        guard let base = bytes.baseAddress else { return (0, nil) }
        var index = start
        let count = bytes.count
        while index < count {
            while index &+ 8 <= count {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                if word & 0x8080_8080_8080_8080 != 0 { break }
                index &+= 8
            }
            guard index < count else { break }
            if bytes[index] < 0x80 {
                index &+= 1
                continue
            }
            switch checkSequence(at: index, in: bytes) {
            case .valid(let length): index &+= length
            case .invalid(.truncated) where allowIncompleteTail: return (index, nil)
            case .invalid(let problem): return (index, problem)
            }
        }
        return (index, nil)
    }

    /// Whether ``wellFormedPrefix(_:extensions:)`` takes the AVX2 path on this processor (64 bytes at
    /// a time in C) when asked for `extensions`.
    public static var hasAVX2Path: Bool { cts_utf8_simd_available() != 0 }

    /// Whether all of `bytes` is well-formed UTF-8.
    public static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let checked = validPrefix(bytes, from: wellFormedPrefix(bytes), allowIncompleteTail: false)
        return checked.problem == nil && checked.end == bytes.count
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
    public static func wellFormedPrefix(_ bytes: UnsafeBufferPointer<UInt8>, extensions: Bool = true) -> Int {
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
}
