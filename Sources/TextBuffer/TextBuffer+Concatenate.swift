import _RopeModule

extension TextBuffer {
    /// Appends `other`'s text at the end of this one's, in O(log n): the two ropes are linked up
    /// (swift-collections' `Rope.join`) and only the two chunks that meet at the seam are cut
    /// again, so that no chunk there is undersized and a `\r` ending this text and a `\n` starting
    /// `other` end up in one chunk (one line break, as in the text read in one go). For building
    /// a document from parts of a file read on several threads.
    public mutating func append(_ other: TextBuffer) {
        guard !other.isEmpty else { return }
        cursor = nil
        guard !isEmpty else {
            rope = other.rope
            return
        }
        var right = other.rope
        let last = rope.remove(at: rope.index(before: rope.endIndex))
        let first = right.remove(at: right.startIndex)
        var seam = last.bytes
        seam.append(contentsOf: first.bytes)
        // The seam's bytes (at most twice `maxBytes`) in one, two or three chunks of equal size
        // give or take the few bytes a cut moves to stay off a UTF-8 sequence or a CRLF: each
        // between `minBytes` and `maxBytes`.
        let count = seam.count
        let parts = count <= Chunk.maxBytes ? 1 : (count + Chunk.fillBytes - 1) / Chunk.fillBytes
        seam.withUnsafeBufferPointer { bytes in
            var start = 0
            for part in 1...parts {
                let end = part == parts ? count : UTF8Scanning.cutPoint(near: part * count / parts, in: bytes, start..<count)
                rope.append(Chunk(Array(bytes[start..<end])))
                start = end
            }
        }
        rope.append(right)
    }

    /// A document holding the texts of `buffers` one after the other.
    public init(concatenating buffers: some Sequence<TextBuffer>) {
        self.init()
        for buffer in buffers { append(buffer) }
    }
}
