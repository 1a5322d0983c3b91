import _RopeModule

/// The chunk edited last, remembered with its place in the rope, so that typing (and the
/// conversions between edits, which mostly land in the same chunk) skip the descent from the root.
///
/// A cursor is only ever set from the rope of the same `TextBuffer` value, right after a change
/// made through its index (`Rope.update(at:)` keeps that one index valid), and cleared by every
/// other change. A copy of the buffer copies both, and the index stays valid in either until that
/// copy changes.
struct Cursor: Sendable {
    /// The chunk.
    var index: Rope<Chunk>.Index
    /// The counts of the text before the chunk. Only `utf8` is known until `isComplete`.
    var start: TextSummary
    /// Whether `start` holds every count, not just `utf8`.
    var isComplete: Bool
    /// The counts of the chunk itself.
    var chunk: TextSummary
}

/// Where a UTF-8 offset falls in the rope.
struct ChunkLocation {
    /// The chunk.
    var index: Rope<Chunk>.Index
    /// The offset within the chunk.
    var local: Int
    /// The counts of the text before the chunk, when known (else only `utf8` is right).
    var start: TextSummary
    /// Whether `start` holds every count.
    var isComplete: Bool
    /// Whether this is the cursor's chunk.
    var isCursor: Bool
}

extension TextBuffer {
    /// The cursor, if it still addresses this rope.
    @inline(__always)
    var validCursor: Cursor? {
        guard let cursor, rope.isValid(cursor.index) else { return nil }
        return cursor
    }

    /// Finds the chunk holding the UTF-8 offset `offset`, as `Rope.find` does: with `preferEnd`,
    /// an offset on a boundary belongs to the chunk before it, otherwise to the chunk after it.
    /// - Precondition: the rope is not empty, and `offset` is within it.
    @inline(__always)
    func locate(utf8 offset: Int, preferEnd: Bool) -> ChunkLocation {
        if let cursor = validCursor {
            let local = offset &- cursor.start.utf8
            let count = cursor.chunk.utf8
            if preferEnd ? (local > 0 && local <= count) : (local >= 0 && local < count) {
                return ChunkLocation(index: cursor.index, local: local, start: cursor.start,
                                     isComplete: cursor.isComplete, isCursor: true)
            }
        }
        let (index, local) = rope.find(at: offset, in: UTF8Metric(), preferEnd: preferEnd)
        var start = TextSummary.zero
        start.utf8 = offset &- local
        return ChunkLocation(index: index, local: local, start: start, isComplete: false, isCursor: false)
    }

    /// The counts of the text before the chunk at `index`, whose UTF-8 offset is `utf8`.
    func prefixSummary(_ index: Rope<Chunk>.Index, utf8: Int) -> TextSummary {
        if index == rope.startIndex { return .zero }
        if index == rope.endIndex { return rope.summary }
        return TextSummary(
            utf8: utf8,
            utf16: rope.offset(of: index, in: UTF16Metric()),
            scalars: rope.offset(of: index, in: ScalarMetric()),
            lineBreaks: rope.offset(of: index, in: LineBreakMetric()))
    }

    /// Finds the chunk holding the line break that ends line `line - 1` (so line `line` starts in
    /// it, just past the break), and the number of breaks before that one in the chunk.
    /// - Precondition: `1 <= line < lineCount`.
    @inline(__always)
    func locateLineBreak(endingLine line: Int) -> (index: Rope<Chunk>.Index, remaining: Int, cursor: Cursor?) {
        if let cursor = validCursor, cursor.isComplete {
            let remaining = line &- cursor.start.lineBreaks
            if remaining > 0 && remaining <= cursor.chunk.lineBreaks {
                return (cursor.index, remaining, cursor)
            }
        }
        let (index, remaining) = rope.find(at: line, in: LineBreakMetric(), preferEnd: true)
        return (index, remaining, nil)
    }
}
