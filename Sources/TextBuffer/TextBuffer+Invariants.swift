import _RopeModule

extension TextBuffer {
    /// The UTF-8 offsets at which chunks end (the last is the document's length): for tests that
    /// put line breaks and multi-byte characters exactly on chunk boundaries.
    var chunkBoundaries: [Int] {
        var offsets: [Int] = []
        var offset = 0
        for chunk in rope {
            offset += chunk.summary.utf8
            offsets.append(offset)
        }
        return offsets
    }

    /// Checks the rope's invariants, stopping the program if one does not hold: each chunk's
    /// summary matches its bytes, which are valid UTF-8; no chunk is empty or undersized unless it
    /// is the only one; no CRLF is split between chunks; the rope's summary is the sum.
    func checkInvariants() {
        rope._invariantCheck()
        var total = TextSummary.zero
        var previousLast: UInt8?
        let chunkCount = rope.count
        for chunk in rope {
            chunk.invariantCheck()
            precondition(!chunk.isEmpty, "empty chunk")
            precondition(chunkCount == 1 || !chunk.isUndersized, "undersized chunk")
            precondition(
                !(previousLast == UTF8Scanning.carriageReturn && chunk.first == UTF8Scanning.lineFeed),
                "CRLF split between chunks")
            previousLast = chunk.last
            total.add(chunk.summary)
        }
        precondition(total == rope.summary, "rope summary is not the sum of its chunks")
    }
}
