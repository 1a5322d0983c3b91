import _RopeModule

/// Measures the rope in UTF-8 bytes; indices in a chunk are byte offsets.
struct UTF8Metric: RopeMetric {
    typealias Element = Chunk

    @inline(__always)
    func size(of summary: TextSummary) -> Int { summary.utf8 }

    @inline(__always)
    func index(at offset: Int, in element: Chunk) -> Int { offset }
}

/// Measures the rope in UTF-16 code units.
struct UTF16Metric: RopeMetric {
    typealias Element = Chunk

    @inline(__always)
    func size(of summary: TextSummary) -> Int { summary.utf16 }

    func index(at offset: Int, in element: Chunk) -> Int {
        element.byteOffset(ofUnits: offset, .utf16)
    }
}

/// Measures the rope in Unicode scalars.
struct ScalarMetric: RopeMetric {
    typealias Element = Chunk

    @inline(__always)
    func size(of summary: TextSummary) -> Int { summary.scalars }

    func index(at offset: Int, in element: Chunk) -> Int {
        element.byteOffset(ofUnits: offset, .utf32)
    }
}

/// Measures the rope in line breaks: offset `n` in a chunk is the byte just past its `n`th break.
struct LineBreakMetric: RopeMetric {
    typealias Element = Chunk

    @inline(__always)
    func size(of summary: TextSummary) -> Int { summary.lineBreaks }

    func index(at offset: Int, in element: Chunk) -> Int {
        guard offset > 0 else { return 0 }
        return element.bytes.withUnsafeBufferPointer {
            UTF8Scanning.offsetAfterLineBreak(offset, in: $0)
        }
    }
}
