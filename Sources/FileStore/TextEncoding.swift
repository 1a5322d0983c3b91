/// The character encodings a document file can be read and written in.
public enum TextEncoding: String, Sendable, CaseIterable {
    case utf8 = "utf-8"
    case utf16LittleEndian = "utf-16le"
    case utf16BigEndian = "utf-16be"
    /// ISO 8859-1: every byte is the code point of the same number, so any file decodes.
    case latin1 = "iso-8859-1"

    /// The byte order mark that starts a file in this encoding, if it has one.
    public var byteOrderMark: [UInt8] {
        switch self {
        case .utf8: return [0xEF, 0xBB, 0xBF]
        case .utf16LittleEndian: return [0xFF, 0xFE]
        case .utf16BigEndian: return [0xFE, 0xFF]
        case .latin1: return []
        }
    }

    /// The encoding a file's leading bytes announce with a byte order mark, if any.
    public static func sniff(_ prefix: some Collection<UInt8>) -> TextEncoding? {
        let bytes = Array(prefix.prefix(3))
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return .utf8 }
        if bytes.starts(with: [0xFF, 0xFE]) { return .utf16LittleEndian }
        if bytes.starts(with: [0xFE, 0xFF]) { return .utf16BigEndian }
        return nil
    }
}

/// How the lines of a text end.
public enum LineEndingStyle: String, Sendable {
    case lf, crlf, cr
    /// More than one kind of line break.
    case mixed
    /// No line break at all.
    case none
}

/// Counts the line breaks of a UTF-8 stream fed in pieces (a `\r\n` split across pieces counts once).
public struct LineEndingCounter: Sendable {
    public private(set) var lf = 0
    public private(set) var crlf = 0
    public private(set) var cr = 0
    private var pendingCR = false

    public init() {}

    /// Counts the breaks in the next piece of the stream.
    public mutating func count(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let last = bytes.last else { return }
        let (feeds, returns, pairs) = Self.tally(bytes)
        // A `\r` that ended the last piece pairs with a `\n` that starts this one.
        let joined = pendingCR && bytes[0] == 0x0A
        if pendingCR && !joined { cr += 1 }
        crlf += pairs + (joined ? 1 : 0)
        lf += feeds - pairs - (joined ? 1 : 0)
        pendingCR = last == 0x0D
        // A `\r` that ends the piece waits for the next one.
        cr += returns - pairs - (pendingCR ? 1 : 0)
    }

    /// The number of `\n` bytes, of `\r` bytes and of `\r\n` pairs in `bytes`, sixteen bytes at a
    /// time (counted per lane, the lanes added up before any can wrap). A first pass counts the
    /// `\n` bytes and notices any `\r`; only then does a second count the `\r` bytes and pairs.
    static func tally(_ bytes: UnsafeBufferPointer<UInt8>) -> (feeds: Int, returns: Int, pairs: Int) {
        typealias Lanes = SIMD16<UInt8>
        let count = bytes.count
        guard let base = bytes.baseAddress else { return (0, 0, 0) }
        let feed = Lanes(repeating: 0x0A), carriage = Lanes(repeating: 0x0D)
        @inline(__always) func load(_ offset: Int) -> Lanes { UnsafeRawPointer(base + offset).loadUnaligned(as: Lanes.self) }
        @inline(__always) func lanes(_ mask: SIMDMask<SIMD16<Int8>>) -> Lanes { unsafeBitCast(mask, to: Lanes.self) }
        // The lanes added as two words (the generic widening and `wrappedSum()` compile to calls).
        @inline(__always) func sum(_ lanes: Lanes) -> Int {
            let words = unsafeBitCast(lanes, to: SIMD2<UInt64>.self)
            let evenBytes: UInt64 = 0x00FF_00FF_00FF_00FF
            let pairs = (words[0] & evenBytes) &+ ((words[0] &>> 8) & evenBytes)
                &+ (words[1] & evenBytes) &+ ((words[1] &>> 8) & evenBytes)
            return Int(truncatingIfNeeded: (pairs &* 0x0001_0001_0001_0001) &>> 48)
        }
        @inline(__always) func isZero(_ lanes: Lanes) -> Bool {
            let words = unsafeBitCast(lanes, to: SIMD2<UInt64>.self)
            return words[0] | words[1] == 0
        }

        var feeds = 0
        var anyReturn = Lanes()
        var index = 0
        while index &+ 16 <= count {
            var feedLanes = Lanes()
            let end = min(count &- 15, index &+ 255 &* 16)
            while index < end {
                let block = load(index)
                feedLanes &-= lanes(block .== feed)
                anyReturn |= lanes(block .== carriage)
                index &+= 16
            }
            feeds &+= sum(feedLanes)
        }
        var hasReturn = !isZero(anyReturn)
        for offset in index..<count {
            if base[offset] == 0x0A { feeds &+= 1 }
            if base[offset] == 0x0D { hasReturn = true }
        }
        guard hasReturn else { return (feeds, 0, 0) }

        var returns = 0, pairs = 0
        index = 0
        // Blocks whose next byte exists, so that a pair's `\n` can be looked at.
        while index &+ 17 <= count {
            var returnLanes = Lanes(), pairLanes = Lanes()
            let end = min(count &- 16, index &+ 255 &* 16)
            while index < end {
                let isReturn = lanes(load(index) .== carriage)
                returnLanes &-= isReturn
                pairLanes &-= isReturn & lanes(load(index &+ 1) .== feed)
                index &+= 16
            }
            returns &+= sum(returnLanes)
            pairs &+= sum(pairLanes)
        }
        for offset in index..<count where base[offset] == 0x0D {
            returns &+= 1
            if offset &+ 1 < count && base[offset &+ 1] == 0x0A { pairs &+= 1 }
        }
        return (feeds, returns, pairs)
    }

    /// The style, once the whole stream has been counted.
    public var style: LineEndingStyle {
        let finalCR = cr + (pendingCR ? 1 : 0)
        let kinds = [lf > 0, crlf > 0, finalCR > 0].filter { $0 }.count
        if kinds > 1 { return .mixed }
        if lf > 0 { return .lf }
        if crlf > 0 { return .crlf }
        if finalCR > 0 { return .cr }
        return .none
    }
}
