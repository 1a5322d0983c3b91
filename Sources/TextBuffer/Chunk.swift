import _RopeModule

/// A piece of a ``TextBuffer``'s text: up to about a kilobyte of UTF-8, with its summary kept up
/// to date on every change so that the rope reads it in O(1).
///
/// Invariants: `bytes` is valid UTF-8 (a chunk never starts or ends inside a sequence), `summary`
/// is `TextSummary(of: bytes)`, and a chunk of a rope with more than one chunk is never empty.
/// Between chunks the rope keeps one more: no chunk ends with the `\r` of a CRLF whose `\n` starts
/// the next one (see `TextSummary`).
struct Chunk: RopeElement, Sendable {
    /// The size past which a chunk is split.
    static let maxBytes = 1024
    /// The size below which a chunk is merged with a neighbour (unless it is the only one).
    static let minBytes = 256
    /// The size of the chunks cut from a long text, leaving room to type before a split.
    static let fillBytes = 896

    /// The text, as UTF-8.
    private(set) var bytes: [UInt8]
    /// The counts of `bytes`.
    private(set) var summary: TextSummary

    typealias Index = Int

    /// A chunk holding `bytes`, which must be valid UTF-8.
    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.summary = bytes.withUnsafeBufferPointer { TextSummary(of: $0) }
    }

    private init(bytes: [UInt8], summary: TextSummary) {
        self.bytes = bytes
        self.summary = summary
    }

    var isEmpty: Bool { bytes.isEmpty }

    var isUndersized: Bool { bytes.count < Chunk.minBytes }

    func invariantCheck() {
        bytes.withUnsafeBufferPointer {
            precondition(TextSummary(of: $0) == summary, "chunk summary out of date")
            precondition(UTF8Scanning.isValid($0), "chunk is not valid UTF-8")
        }
    }

    /// The first byte, or `nil` when empty.
    var first: UInt8? { bytes.first }

    /// The last byte, or `nil` when empty.
    var last: UInt8? { bytes.last }

    /// Replaces `bytes[range]` with `new`, updating the summary from the bytes that changed and
    /// their neighbours only (not the whole chunk). Both ends of `range` must be scalar
    /// boundaries, and `new` valid UTF-8.
    mutating func replaceSubrange(_ range: Range<Int>, with new: UnsafeBufferPointer<UInt8>) {
        // A break is counted at its last byte, and whether a `\r` counts depends on the byte after
        // it; so the count can change from the byte before `range` to the last new byte.
        let windowStart = max(range.lowerBound - 1, 0)
        let old = bytes.withUnsafeBufferPointer {
            (UTF8Scanning.unitCounts($0, range), UTF8Scanning.lineBreaks($0, windowStart..<range.upperBound))
        }
        bytes.replaceSubrange(range, with: new)
        let newEnd = range.lowerBound + new.count
        let added = bytes.withUnsafeBufferPointer {
            (UTF8Scanning.unitCounts($0, range.lowerBound..<newEnd), UTF8Scanning.lineBreaks($0, windowStart..<newEnd))
        }
        summary.utf8 &+= new.count &- range.count
        summary.utf16 &+= added.0.utf16 &- old.0.utf16
        summary.scalars &+= added.0.scalars &- old.0.scalars
        summary.lineBreaks &+= added.1 &- old.1
    }

    /// Keeps `bytes[..<index]` and returns the rest as a new chunk. `index` must be a scalar
    /// boundary. Splitting a CRLF leaves two breaks (a lone `\r`, a lone `\n`): the rope's edit
    /// code, which is the only one that splits there, joins them again afterwards.
    mutating func split(at index: Int) -> Chunk {
        let count = bytes.count
        let splitsCRLF = index > 0 && index < count
            && bytes[index - 1] == UTF8Scanning.carriageReturn && bytes[index] == UTF8Scanning.lineFeed
        let tail = Array(bytes[index...])
        var tailSummary: TextSummary
        var headSummary: TextSummary
        // Count the shorter side; the other is the difference.
        if index < count / 2 {
            headSummary = bytes.withUnsafeBufferPointer { TextSummary(of: UnsafeBufferPointer(rebasing: $0[..<index])) }
            tailSummary = summary
            tailSummary.subtract(headSummary)
            if splitsCRLF { tailSummary.lineBreaks += 1 }
        } else {
            tailSummary = tail.withUnsafeBufferPointer { TextSummary(of: $0) }
            headSummary = summary
            headSummary.subtract(tailSummary)
            if splitsCRLF { headSummary.lineBreaks += 1 }
        }
        bytes.removeSubrange(index...)
        summary = headSummary
        return Chunk(bytes: tail, summary: tailSummary)
    }

    /// Merges `right` into `self` when both fit in one chunk (returning `true`, `right` empty), or
    /// else moves bytes so that both are at least `minBytes`, cutting only at a boundary that is
    /// neither inside a UTF-8 sequence nor inside a CRLF.
    mutating func rebalance(nextNeighbor right: inout Chunk) -> Bool {
        let total = bytes.count + right.bytes.count
        if total <= Chunk.maxBytes {
            let joinsCRLF = bytes.last == UTF8Scanning.carriageReturn && right.bytes.first == UTF8Scanning.lineFeed
            bytes.append(contentsOf: right.bytes)
            summary.add(right.summary)
            if joinsCRLF { summary.lineBreaks -= 1 }
            right = Chunk(bytes: [], summary: .zero)
            return true
        }
        let joined = bytes + right.bytes
        let cut = joined.withUnsafeBufferPointer { UTF8Scanning.cutPoint(near: total / 2, in: $0, 0..<total) }
        self = Chunk(Array(joined[..<cut]))
        right = Chunk(Array(joined[cut...]))
        return false
    }

    /// The byte offset `units` code units of `encoding` from the chunk's start (rounded down to a
    /// scalar boundary if it falls inside one character; clamped to the chunk's end).
    func byteOffset(ofUnits units: Int, _ encoding: PositionEncoding) -> Int {
        if encoding == .utf8 { return min(units, bytes.count) }
        return bytes.withUnsafeBufferPointer { buffer in
            var remaining = units
            var index = 0
            while remaining > 0 && index < buffer.count {
                let length = UTF8Scanning.sequenceLength(lead: buffer[index])
                let width = encoding == .utf16 && length == 4 ? 2 : 1
                if width > remaining { break }
                remaining -= width
                index += length
            }
            return index
        }
    }

    /// Cuts `bytes` into chunks of about `fillBytes`, never inside a UTF-8 sequence or a CRLF.
    static func chunks(of bytes: UnsafeBufferPointer<UInt8>) -> [Chunk] {
        chunks(of: bytes, after: [])
    }
}
