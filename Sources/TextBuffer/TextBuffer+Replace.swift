import _RopeModule

extension TextBuffer {
    /// Replaces the text in the UTF-8 range `range` with `text`, in O(log n) plus the length of
    /// `text`.
    ///
    /// - Precondition: `range` lies within the document and both its bounds fall on scalar
    ///   boundaries (offsets from ``utf8Offset(of:encoding:)`` always do).
    public mutating func replace(utf8Range range: Range<Int>, with text: String) {
        var text = text
        text.withUTF8 { replace(range, withBytes: $0) }
    }

    /// Replaces `range` with `new`, which must be valid UTF-8.
    mutating func replace(_ range: Range<Int>, withBytes new: UnsafeBufferPointer<UInt8>) {
        let count = utf8Count
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "range out of bounds")
        if range.isEmpty && new.isEmpty { return }
        if count == 0 {
            cursor = nil
            rope = TextBuffer.makeRope(new)
            return
        }
        // Typing goes at the end of the chunk before a boundary; deleting starts in the chunk after.
        var location = locate(utf8: range.lowerBound, preferEnd: range.isEmpty)
        let local = location.local
        let end = local + range.count
        let (chunkCount, onBoundaries) = rope[location.index].bytes.withUnsafeBufferPointer { bytes in
            (bytes.count, (local >= bytes.count || !UTF8Scanning.isContinuation(bytes[local]))
                && (end >= bytes.count || !UTF8Scanning.isContinuation(bytes[end])))
        }
        let newCount = chunkCount - range.count + new.count
        // The fast path: the change stays inside one chunk, which stays well-sized.
        if end <= chunkCount, newCount <= Chunk.maxBytes, newCount > 0,
           newCount >= Chunk.minBytes || chunkCount == count {
            precondition(onBoundaries, "offset inside a UTF-8 sequence")
            let (first, last, summary) = rope.update(at: &location.index) { chunk in
                chunk.replaceSubrange(local..<end, with: new)
                return (chunk.first, chunk.last, chunk.summary)
            }
            let chunkStart = location.start.utf8
            if (local == 0 && first == UTF8Scanning.lineFeed && location.index != rope.startIndex)
                || (end == chunkCount && last == UTF8Scanning.carriageReturn) {
                cursor = nil
                joinCRLF(at: chunkStart)
                joinCRLF(at: chunkStart + newCount)
                return
            }
            // The chunk's start did not move. Its other counts are worth finding once the same
            // chunk is edited twice in a row (typing), not for edits that jump around.
            var start = location.start
            var isComplete = location.isComplete
            if location.isCursor && !isComplete {
                start = prefixSummary(location.index, utf8: chunkStart)
                isComplete = true
            }
            cursor = Cursor(index: location.index, start: start, isComplete: isComplete, chunk: summary)
            return
        }
        cursor = nil
        precondition(isScalarBoundary(range.lowerBound) && isScalarBoundary(range.upperBound),
                     "offset inside a UTF-8 sequence")
        rope.replaceSubrange(range, in: UTF8Metric(), with: Chunk.chunks(of: new))
        joinCRLF(at: range.lowerBound)
        if !new.isEmpty { joinCRLF(at: range.lowerBound + new.count) }
    }

    /// Whether the UTF-8 offset `offset` falls on a scalar boundary (offsets outside the text do:
    /// check the bounds first).
    public func isScalarBoundary(_ offset: Int) -> Bool {
        guard offset > 0 && offset < utf8Count else { return true }
        let location = locate(utf8: offset, preferEnd: false)
        return rope[location.index].bytes.withUnsafeBufferPointer {
            !UTF8Scanning.isContinuation($0[location.local])
        }
    }

    /// If a chunk boundary at `offset` splits a CRLF (one chunk ends with `\r`, the next starts with
    /// `\n`), puts the pair back into one chunk, so that it counts as one line break.
    private mutating func joinCRLF(at offset: Int) {
        guard offset > 0 && offset < utf8Count else { return }
        let (index, local) = rope.find(at: offset, in: UTF8Metric(), preferEnd: false)
        guard local == 0, index != rope.startIndex, rope[index].first == UTF8Scanning.lineFeed,
              rope[rope.index(before: index)].last == UTF8Scanning.carriageReturn else { return }
        // The builder behind replaceSubrange only cuts chunks where Chunk.rebalance says, which is
        // never inside a CRLF, so the new two-byte chunk stays whole (and merges with a neighbour).
        cursor = nil
        let pair = Chunk([UTF8Scanning.carriageReturn, UTF8Scanning.lineFeed])
        rope.replaceSubrange(offset - 1 ..< offset + 1, in: UTF8Metric(), with: CollectionOfOne(pair))
    }
}
