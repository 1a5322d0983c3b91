import _RopeModule

extension TextBuffer {
    /// The UTF-8 offset of a document-wide offset counted in `encoding`'s code units (as editing
    /// traces and some protocols count), in O(log n).
    ///
    /// - Throws: ``TextBufferError/offsetOutOfBounds(offset:count:)`` outside `0...count(in:)`,
    ///   ``TextBufferError/offsetInsideCharacter(offset:encoding:)`` inside a surrogate pair or a
    ///   UTF-8 sequence.
    public func utf8Offset(
        ofUnitOffset offset: Int, encoding: PositionEncoding
    ) throws(TextBufferError) -> Int {
        let total = summary.units(encoding)
        guard offset >= 0 && offset <= total else {
            throw .offsetOutOfBounds(offset: offset, count: total)
        }
        if encoding == .utf8 {
            guard isScalarBoundary(offset) else {
                throw .offsetInsideCharacter(offset: offset, encoding: encoding)
            }
            return offset
        }
        // Pure ASCII: every unit is one byte.
        if total == summary.utf8 { return offset }
        if offset == total { return summary.utf8 }

        // Find the chunk: the cursor's if it holds the offset, else by a descent.
        var index: Rope<Chunk>.Index
        var remaining: Int
        var chunkStart: Int?
        if let cursor = validCursor, cursor.isComplete,
           case let local = offset - cursor.start.units(encoding),
           local >= 0 && local < cursor.chunk.units(encoding) {
            (index, remaining, chunkStart) = (cursor.index, local, cursor.start.utf8)
        } else {
            (index, remaining) = switch encoding {
            case .utf8: rope.find(at: offset, in: UTF8Metric(), preferEnd: false)
            case .utf16: rope.find(at: offset, in: UTF16Metric(), preferEnd: false)
            case .utf32: rope.find(at: offset, in: ScalarMetric(), preferEnd: false)
            }
        }
        let chunk = rope[index]
        let local: Int
        if chunk.summary.utf8 == chunk.summary.scalars {
            local = remaining  // an ASCII chunk
        } else {
            let advance = chunk.bytes.withUnsafeBufferPointer {
                UTF8Scanning.advance(remaining, encoding, from: 0, in: $0, stopAtLineEnd: false)
            }
            guard case .reached(let offset) = advance else {
                throw .offsetInsideCharacter(offset: offset, encoding: encoding)
            }
            local = offset
        }
        return (chunkStart ?? rope.offset(of: index, in: UTF8Metric())) + local
    }

    /// The document-wide offset, in `encoding`'s code units, of the UTF-8 offset `offset`, in
    /// O(log n).
    ///
    /// - Precondition: `offset` is within the document and on a scalar boundary.
    public func unitOffset(ofUTF8Offset offset: Int, encoding: PositionEncoding) -> Int {
        precondition(offset >= 0 && offset <= utf8Count, "offset out of bounds")
        if encoding == .utf8 || summary.units(encoding) == summary.utf8 { return offset }
        if offset == utf8Count { return summary.units(encoding) }
        let location = locate(utf8: offset, preferEnd: false)
        let before: Int
        if location.isComplete {
            before = location.start.units(encoding)
        } else if encoding == .utf16 {
            before = rope.offset(of: location.index, in: UTF16Metric())
        } else {
            before = rope.offset(of: location.index, in: ScalarMetric())
        }
        let chunk = rope[location.index]
        if chunk.summary.utf8 == chunk.summary.scalars { return before + location.local }
        return before + chunk.bytes.withUnsafeBufferPointer {
            UTF8Scanning.units(encoding, $0, 0..<location.local)
        }
    }
}
