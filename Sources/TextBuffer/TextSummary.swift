import _RopeModule

/// The sizes of a stretch of text, added up the rope's nodes so that every count and every
/// conversion is a descent of the tree.
///
/// `lineBreaks` counts every `\n` and every `\r` not followed by `\n` within the same chunk. The
/// rope never lets a chunk end with the `\r` of a CRLF whose `\n` starts the next chunk, so the
/// counts add up across chunks (a requirement of `RopeSummary`, which must be commutative).
struct TextSummary: RopeSummary, Sendable, CustomStringConvertible {
    /// UTF-8 code units (bytes).
    var utf8: Int
    /// UTF-16 code units.
    var utf16: Int
    /// Unicode scalars.
    var scalars: Int
    /// Line breaks (`\n`, `\r\n`, `\r`).
    var lineBreaks: Int

    init(utf8: Int, utf16: Int, scalars: Int, lineBreaks: Int) {
        self.utf8 = utf8
        self.utf16 = utf16
        self.scalars = scalars
        self.lineBreaks = lineBreaks
    }

    /// The summary of `bytes`, taken as a chunk of its own.
    init(of bytes: UnsafeBufferPointer<UInt8>) {
        let counts = UTF8Scanning.summaryCounts(bytes)
        self.init(utf8: bytes.count, utf16: counts.utf16, scalars: counts.scalars, lineBreaks: counts.lineBreaks)
    }

    /// Nodes of up to 15 children, as in swift-collections' own `BigString`.
    static var maxNodeSize: Int { 15 }

    static var zero: TextSummary { TextSummary(utf8: 0, utf16: 0, scalars: 0, lineBreaks: 0) }

    /// Empty text has no bytes, and no bytes means no other unit either.
    var isZero: Bool { utf8 == 0 }

    mutating func add(_ other: TextSummary) {
        utf8 &+= other.utf8
        utf16 &+= other.utf16
        scalars &+= other.scalars
        lineBreaks &+= other.lineBreaks
    }

    mutating func subtract(_ other: TextSummary) {
        utf8 &-= other.utf8
        utf16 &-= other.utf16
        scalars &-= other.scalars
        lineBreaks &-= other.lineBreaks
    }

    /// The length of the text in `encoding`'s code units.
    @inline(__always)
    func units(_ encoding: PositionEncoding) -> Int {
        switch encoding {
        case .utf8: return utf8
        case .utf16: return utf16
        case .utf32: return scalars
        }
    }

    var description: String {
        "(utf8: \(utf8), utf16: \(utf16), scalars: \(scalars), breaks: \(lineBreaks))"
    }
}
