import UTF8Validation

/// Byte-level helpers over UTF-8 text: counting, line breaks, boundaries and validation.
///
/// Everything here works on buffers of valid UTF-8 (except `isValid`, which checks that), and on
/// offsets that fall on scalar boundaries. The loops look at eight bytes at a time where they can
/// (SWAR: SIMD within a register), since chunks are scanned on every conversion.
enum UTF8Scanning {
    /// The line feed byte, `\n`.
    static let lineFeed: UInt8 = 0x0A
    /// The carriage return byte, `\r`.
    static let carriageReturn: UInt8 = 0x0D

    // MARK: Words

    static let highBits: UInt64 = 0x8080_8080_8080_8080
    static let lowSevenBits: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
    static let lineFeeds: UInt64 = 0x0A0A_0A0A_0A0A_0A0A
    static let carriageReturns: UInt64 = 0x0D0D_0D0D_0D0D_0D0D

    /// The eight bytes at `offset` as a little-endian word.
    @inline(__always)
    static func word(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: UInt64.self))
    }

    /// The high bit of every byte of `word` that is zero, and no other bit.
    @inline(__always)
    static func zeroBytes(_ word: UInt64) -> UInt64 {
        ~(((word & lowSevenBits) &+ lowSevenBits) | word | lowSevenBits)
    }

    /// The high bit of every `\n` byte of `word`.
    @inline(__always)
    static func lineFeedBytes(_ word: UInt64) -> UInt64 { zeroBytes(word ^ lineFeeds) }

    /// Whether `word` holds a `\r`.
    @inline(__always)
    static func hasCarriageReturn(_ word: UInt64) -> Bool { zeroBytes(word ^ carriageReturns) != 0 }

    /// The high bit of every continuation byte (10xxxxxx) of `word`.
    @inline(__always)
    static func continuationBytes(_ word: UInt64) -> UInt64 { word & ~(word << 1) & highBits }

    /// The high bit of every byte of `word` that leads a four-byte sequence (11110xxx).
    @inline(__always)
    static func fourByteLeads(_ word: UInt64) -> UInt64 { word & (word << 1) & (word << 2) & (word << 3) & highBits }

    // MARK: Bytes

    /// Whether `byte` continues a multi-byte sequence (10xxxxxx).
    @inline(__always)
    static func isContinuation(_ byte: UInt8) -> Bool { byte & 0xC0 == 0x80 }

    /// The length of the sequence that `lead` starts.
    @inline(__always)
    static func sequenceLength(lead: UInt8) -> Int {
        lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4
    }

    /// Whether `byte` is `\n` or `\r`.
    @inline(__always)
    static func isLineBreakByte(_ byte: UInt8) -> Bool {
        byte == lineFeed || byte == carriageReturn
    }

    /// The width of the character that `lead` starts, in code units of `encoding`.
    @inline(__always)
    static func width(lead: UInt8, _ encoding: PositionEncoding) -> Int {
        switch encoding {
        case .utf8: return sequenceLength(lead: lead)
        case .utf16: return lead >= 0xF0 ? 2 : 1
        case .utf32: return 1
        }
    }

    // MARK: Counting

    /// Sixteen bytes at `offset`.
    @inline(__always)
    static func vector(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int) -> SIMD16<UInt8> {
        UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: SIMD16<UInt8>.self)
    }

    /// A lane-wise comparison as bytes: 0xFF where `left` equals `right`, 0 elsewhere. (Both
    /// operands are vectors: the overloads that take a scalar compile to a loop over the lanes.)
    @inline(__always)
    static func equalLanes(_ left: SIMD16<UInt8>, _ right: SIMD16<UInt8>) -> SIMD16<UInt8> {
        unsafeBitCast(left .== right, to: SIMD16<UInt8>.self)
    }

    /// The sum of the lanes of `lanes`, added as two words (the generic widening and
    /// `wrappedSum()` compile to calls that cost more than a chunk's worth of counting).
    @inline(__always)
    static func laneSum(_ lanes: SIMD16<UInt8>) -> Int {
        let words = unsafeBitCast(lanes, to: SIMD2<UInt64>.self)
        let evenBytes: UInt64 = 0x00FF_00FF_00FF_00FF
        // Pairs of bytes into 16-bit sums (at most 510 each, 1020 over both words), then the four
        // 16-bit sums of the two words into the top 16 bits with a multiplication.
        let pairs = (words[0] & evenBytes) &+ ((words[0] &>> 8) & evenBytes)
            &+ (words[1] & evenBytes) &+ ((words[1] &>> 8) & evenBytes)
        return Int(truncatingIfNeeded: (pairs &* 0x0001_0001_0001_0001) &>> 48)
    }

    /// Whether every lane of `lanes` is zero.
    @inline(__always)
    static func isZero(_ lanes: SIMD16<UInt8>) -> Bool {
        let words = unsafeBitCast(lanes, to: SIMD2<UInt64>.self)
        return words[0] | words[1] == 0
    }

    /// The number of UTF-16 code units and of Unicode scalars in `bytes[range]`.
    static func unitCounts(
        _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) -> (utf16: Int, scalars: Int) {
        var continuations = 0
        var astral = 0
        var index = range.lowerBound
        // Sixteen bytes at a time, counting per lane (subtracting the 0xFF of a match), added up
        // at least every 255 rounds, before a lane can wrap.
        let topTwoBits = SIMD16<UInt8>(repeating: 0xC0)
        let continuation = SIMD16<UInt8>(repeating: 0x80)
        let fourByteLead = SIMD16<UInt8>(repeating: 0xF0)
        while index &+ 16 <= range.upperBound {
            var continuationLanes = SIMD16<UInt8>()
            var astralLanes = SIMD16<UInt8>()
            var rounds = 0
            while index &+ 16 <= range.upperBound && rounds < 255 {
                let bytes = vector(bytes, index)
                continuationLanes &-= equalLanes(bytes & topTwoBits, continuation)
                astralLanes &-= equalLanes(bytes & fourByteLead, fourByteLead)
                index &+= 16
                rounds &+= 1
            }
            continuations &+= laneSum(continuationLanes)
            astral &+= laneSum(astralLanes)
        }
        while index < range.upperBound {
            let byte = bytes[index]
            continuations &+= isContinuation(byte) ? 1 : 0
            astral &+= byte >= 0xF0 ? 1 : 0
            index &+= 1
        }
        let scalars = range.count &- continuations
        return (scalars &+ astral, scalars)
    }

    /// The UTF-16 code units, Unicode scalars and line breaks of all of `bytes` (taken as a chunk
    /// of its own): what `unitCounts` and `lineBreaks` answer, in one pass over the bytes.
    static func summaryCounts(_ bytes: UnsafeBufferPointer<UInt8>) -> (utf16: Int, scalars: Int, lineBreaks: Int) {
        let count = bytes.count
        var continuations = 0
        var astral = 0
        var feeds = 0
        var returns = SIMD16<UInt8>()
        var index = 0
        // As Int8, a continuation byte (0x80...0xBF) is exactly one below -64: one comparison.
        let belowLeads = SIMD16<Int8>(repeating: -64)
        let fourByteLead = SIMD16<UInt8>(repeating: 0xF0)
        let feed = SIMD16<UInt8>(repeating: lineFeed)
        let carriage = SIMD16<UInt8>(repeating: carriageReturn)
        while index &+ 16 <= count {
            var continuationLanes = SIMD16<UInt8>()
            var astralLanes = SIMD16<UInt8>()
            var feedLanes = SIMD16<UInt8>()
            let end = min(count &- 15, index &+ 255 &* 16)
            while index < end {
                let bytes = vector(bytes, index)
                continuationLanes &-= unsafeBitCast(unsafeBitCast(bytes, to: SIMD16<Int8>.self) .< belowLeads, to: SIMD16<UInt8>.self)
                astralLanes &-= equalLanes(bytes & fourByteLead, fourByteLead)
                feedLanes &-= equalLanes(bytes, feed)
                returns |= equalLanes(bytes, carriage)
                index &+= 16
            }
            continuations &+= laneSum(continuationLanes)
            astral &+= laneSum(astralLanes)
            feeds &+= laneSum(feedLanes)
        }
        var hasReturn = !isZero(returns)
        while index < count {
            let byte = bytes[index]
            continuations &+= isContinuation(byte) ? 1 : 0
            astral &+= byte >= 0xF0 ? 1 : 0
            feeds &+= byte == lineFeed ? 1 : 0
            hasReturn = hasReturn || byte == carriageReturn
            index &+= 1
        }
        let scalars = count &- continuations
        return (scalars &+ astral, scalars, hasReturn ? feeds &+ loneCarriageReturns(bytes) : feeds)
    }

    /// The number of `\r` bytes in `bytes` not followed by a `\n` (a `\r` at the end counts),
    /// sixteen bytes at a time.
    static func loneCarriageReturns(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        let count = bytes.count
        var returns = 0
        var pairs = 0
        var index = 0
        let feed = SIMD16<UInt8>(repeating: lineFeed)
        let carriage = SIMD16<UInt8>(repeating: carriageReturn)
        // Blocks whose next byte exists, so that the `\n` of a pair can be looked at.
        while index &+ 17 <= count {
            var returnLanes = SIMD16<UInt8>()
            var pairLanes = SIMD16<UInt8>()
            let end = min(count &- 16, index &+ 255 &* 16)
            while index < end {
                let isReturn = equalLanes(vector(bytes, index), carriage)
                returnLanes &-= isReturn
                pairLanes &-= isReturn & equalLanes(vector(bytes, index &+ 1), feed)
                index &+= 16
            }
            returns &+= laneSum(returnLanes)
            pairs &+= laneSum(pairLanes)
        }
        while index < count {
            if bytes[index] == carriageReturn {
                returns &+= 1
                if index &+ 1 < count && bytes[index &+ 1] == lineFeed { pairs &+= 1 }
            }
            index &+= 1
        }
        return returns &- pairs
    }

    /// The number of `\n` bytes in `bytes[range]`, and whether it holds a `\r`.
    static func lineFeedCount(
        _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) -> (lineFeeds: Int, hasCarriageReturn: Bool) {
        var feeds = 0
        var index = range.lowerBound
        let feed = SIMD16<UInt8>(repeating: lineFeed)
        let carriage = SIMD16<UInt8>(repeating: carriageReturn)
        var returns = SIMD16<UInt8>()
        while index &+ 16 <= range.upperBound {
            var lanes = SIMD16<UInt8>()
            var rounds = 0
            while index &+ 16 <= range.upperBound && rounds < 255 {
                let bytes = vector(bytes, index)
                lanes &-= equalLanes(bytes, feed)
                returns |= equalLanes(bytes, carriage)
                index &+= 16
                rounds &+= 1
            }
            feeds &+= laneSum(lanes)
        }
        var hasReturn = range.count >= 16 && !isZero(returns)
        while index < range.upperBound {
            let byte = bytes[index]
            feeds &+= byte == lineFeed ? 1 : 0
            hasReturn = hasReturn || byte == carriageReturn
            index &+= 1
        }
        return (feeds, hasReturn)
    }

    /// Whether the `\r` at `index` counts as a line break: it does unless a `\n` follows it in
    /// `bytes` (the buffer's end is taken as not a `\n`).
    @inline(__always)
    static func carriageReturnBreaks(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> Bool {
        index &+ 1 >= bytes.count || bytes[index &+ 1] != lineFeed
    }

    /// The number of line breaks that end at a byte in `bytes[range]`: every `\n`, and every `\r`
    /// not followed by `\n` in `bytes`.
    static func lineBreaks(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int {
        let (feeds, hasReturn) = lineFeedCount(bytes, range)
        guard hasReturn else { return feeds }
        var count = 0
        for index in range {
            let byte = bytes[index]
            if byte == lineFeed || (byte == carriageReturn && carriageReturnBreaks(bytes, index)) {
                count &+= 1
            }
        }
        return count
    }

    /// The number of code units of `encoding` in `bytes[range]`.
    @inline(__always)
    static func units(
        _ encoding: PositionEncoding, _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>
    ) -> Int {
        switch encoding {
        case .utf8: return range.count
        case .utf16: return unitCounts(bytes, range).utf16
        case .utf32: return unitCounts(bytes, range).scalars
        }
    }

    // MARK: Lines

    /// The offset just past the `n`th line break (1-based) of a chunk holding `total` breaks,
    /// searching from whichever end of the chunk is nearer.
    static func offsetAfterLineBreak(_ n: Int, of total: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        n * 2 <= total + 1
            ? offsetAfterLineBreak(n, in: bytes)
            : offsetAfterLineBreak(fromEnd: total - n + 1, in: bytes)
    }

    /// The offset just past the `n`th line break (1-based) in `bytes`, which must hold at least `n`.
    static func offsetAfterLineBreak(_ n: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        precondition(n > 0)
        var seen = 0
        var index = 0
        let count = bytes.count
        // Skip blocks of 64 bytes that cannot hold the break we want.
        while index &+ 64 <= count {
            let block = lineFeedCount(bytes, index ..< index &+ 64)
            if block.hasCarriageReturn || seen &+ block.lineFeeds >= n { break }
            seen &+= block.lineFeeds
            index &+= 64
        }
        while index &+ 8 <= count {
            let word = word(bytes, index)
            if hasCarriageReturn(word) { break }
            let feeds = lineFeedBytes(word).nonzeroBitCount
            if seen &+ feeds >= n { break }
            seen &+= feeds
            index &+= 8
        }
        while index < count {
            let byte = bytes[index]
            index &+= 1
            if byte == lineFeed {
                seen &+= 1
            } else if byte == carriageReturn {
                if index < count && bytes[index] == lineFeed { index &+= 1 }
                seen &+= 1
            } else {
                continue
            }
            if seen == n { return index }
        }
        preconditionFailure("line break \(n) not in chunk")
    }

    /// The offset just past the `n`th line break (1-based) counted from the end of `bytes`, which
    /// must hold at least `n`. A CRLF counts once, as everywhere.
    static func offsetAfterLineBreak(fromEnd n: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        precondition(n > 0)
        var seen = 0
        var index = bytes.count  // bytes[index...] have been looked at
        while index >= 64 {
            let block = lineFeedCount(bytes, index &- 64 ..< index)
            if block.hasCarriageReturn || seen &+ block.lineFeeds >= n { break }
            seen &+= block.lineFeeds
            index &-= 64
        }
        while index >= 8 {
            let word = word(bytes, index &- 8)
            if hasCarriageReturn(word) { break }
            let feeds = lineFeedBytes(word).nonzeroBitCount
            if seen &+ feeds >= n { break }
            seen &+= feeds
            index &-= 8
        }
        while index > 0 {
            index &-= 1
            let byte = bytes[index]
            guard byte == lineFeed || byte == carriageReturn else { continue }
            // A "\r" followed by "\n" was counted with its "\n".
            if byte == carriageReturn && index &+ 1 < bytes.count && bytes[index &+ 1] == lineFeed { continue }
            seen &+= 1
            if seen == n { return index &+ 1 }
        }
        preconditionFailure("line break \(n) from the end not in chunk")
    }

    /// The offset of the first `\n` or `\r` at or after `start` in `bytes`, or `bytes.count`.
    static func lineContentEnd(from start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var index = start
        while index &+ 8 <= bytes.count {
            let word = word(bytes, index)
            if lineFeedBytes(word) != 0 || hasCarriageReturn(word) { break }
            index &+= 8
        }
        while index < bytes.count && !isLineBreakByte(bytes[index]) { index &+= 1 }
        return index
    }

    /// The offset just past the last `\n` or `\r` before `end`, or `nil` if `bytes[..<end]` holds
    /// none.
    static func lineStart(before end: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = end
        while index >= 8 {
            let word = word(bytes, index &- 8)
            if lineFeedBytes(word) != 0 || hasCarriageReturn(word) { break }
            index &-= 8
        }
        while index > 0 {
            if isLineBreakByte(bytes[index &- 1]) { return index }
            index &-= 1
        }
        return nil
    }

    // MARK: Walking

    /// The outcome of walking a number of code units through text.
    enum Advance: Equatable {
        /// The units ended at this offset, a scalar boundary.
        case reached(offset: Int)
        /// A line walk came to the line's end (at this offset) with units still to go.
        case lineEnd(offset: Int)
        /// The units ended inside one character's encoding.
        case inside
        /// The text ended first, with this many units still to go.
        case exhausted(offset: Int, remaining: Int)
    }

    /// Walks `units` code units of `encoding` forward from `start`. With `stopAtLineEnd`, a `\n`
    /// or `\r` ends the walk early (LSP's clamping to the line's end).
    @inline(__always)
    static func advance(
        _ units: Int, _ encoding: PositionEncoding, from start: Int,
        in bytes: UnsafeBufferPointer<UInt8>, stopAtLineEnd: Bool
    ) -> Advance {
        var remaining = units
        var index = start
        let count = bytes.count
        while remaining > 0 {
            // Eight ASCII bytes without a line break are eight units in every encoding.
            if remaining >= 8 && index &+ 8 <= count {
                let word = word(bytes, index)
                if word & highBits == 0
                    && (!stopAtLineEnd || (lineFeedBytes(word) == 0 && !hasCarriageReturn(word))) {
                    remaining &-= 8
                    index &+= 8
                    continue
                }
            }
            if index >= count { return .exhausted(offset: index, remaining: remaining) }
            let byte = bytes[index]
            if stopAtLineEnd && isLineBreakByte(byte) { return .lineEnd(offset: index) }
            let width = width(lead: byte, encoding)
            if width > remaining { return .inside }
            remaining &-= width
            index &+= sequenceLength(lead: byte)
        }
        return .reached(offset: index)
    }

    // MARK: Cutting and validating

    /// An offset close to `target` in `bytes[range]` at which the text can be cut: not inside a
    /// UTF-8 sequence, nor between the `\r` and `\n` of a CRLF. Prefers moving backward; never
    /// returns `range.lowerBound` unless nothing else fits.
    static func cutPoint(near target: Int, in bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int {
        func fits(_ offset: Int) -> Bool {
            if offset <= 0 || offset >= bytes.count { return true }
            if isContinuation(bytes[offset]) { return false }
            return !(bytes[offset &- 1] == carriageReturn && bytes[offset] == lineFeed)
        }
        var offset = min(max(target, range.lowerBound + 1), range.upperBound)
        while offset > range.lowerBound + 1 && !fits(offset) { offset &-= 1 }
        if fits(offset) { return offset }
        offset = min(max(target, range.lowerBound + 1), range.upperBound)
        while offset < range.upperBound && !fits(offset) { offset &+= 1 }
        return offset
    }

    /// Whether `bytes` is well-formed UTF-8: no overlong forms, no encoded surrogates, nothing
    /// above U+10FFFF, no truncated sequence (`UTF8Validation`'s check).
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        UTF8Validation.isValid(bytes)
    }
}
