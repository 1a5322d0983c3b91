import _RopeModule

extension TextBuffer {
    /// The UTF-8 offset of an LSP position, in O(log n).
    ///
    /// LSP's clamping applies: a character past the end of its line means the line's end (before
    /// its line break), and a line past the last line means the end of the document.
    ///
    /// - Throws: ``TextBufferError/negativePosition(line:character:)`` for a negative line or
    ///   character; ``TextBufferError/characterInsideSurrogatePair(line:character:)`` (utf-16) or
    ///   ``TextBufferError/characterInsideUTF8Sequence(line:character:)`` (utf-8) for a character
    ///   that falls inside one character's encoding.
    public func utf8Offset(
        of position: TextPosition, encoding: PositionEncoding
    ) throws(TextBufferError) -> Int {
        try resolve(position, encoding: encoding).offset
    }

    /// The UTF-8 offset of `position`, and whether it is exact: `false` when LSP's clamping moved
    /// it (a character past its line's end, a line past the last).
    func resolve(
        _ position: TextPosition, encoding: PositionEncoding
    ) throws(TextBufferError) -> (offset: Int, isExact: Bool) {
        let line = position.line
        let character = position.character
        guard line >= 0 && character >= 0 else {
            throw .negativePosition(line: line, character: character)
        }
        guard line < lineCount else { return (utf8Count, false) }
        guard !rope.isEmpty else { return (0, character == 0) }

        // Find the chunk and byte where the line starts.
        var index: Rope<Chunk>.Index
        var local: Int
        var chunkStart: Int
        if line == 0 {
            (index, local, chunkStart) = (rope.startIndex, 0, 0)
        } else {
            let found = locateLineBreak(endingLine: line)
            index = found.index
            let chunk = rope[index]
            local = chunk.bytes.withUnsafeBufferPointer {
                UTF8Scanning.offsetAfterLineBreak(found.remaining, of: chunk.summary.lineBreaks, in: $0)
            }
            chunkStart = found.cursor?.start.utf8 ?? rope.offset(of: index, in: UTF8Metric())
            if local == chunk.summary.utf8 {
                // The line starts with the next chunk.
                chunkStart += local
                rope.formIndex(after: &index)
                local = 0
                if index == rope.endIndex { return (chunkStart, character == 0) }
            }
        }

        // The usual case: the character is in the same chunk as the line's start.
        let walk = rope[index].bytes.withUnsafeBufferPointer {
            UTF8Scanning.advance(character, encoding, from: local, in: $0, stopAtLineEnd: true)
        }
        switch walk {
        case .reached(let offset):
            return (chunkStart + offset, true)
        case .lineEnd(let offset):
            return (chunkStart + offset, false)
        case .inside:
            throw TextBuffer.insideError(line: line, character: character, encoding: encoding)
        case .exhausted:
            break
        }

        // A line longer than the rest of its chunk: measure it with the rope's counts instead.
        let lineStart = chunkStart + local
        let lineEnd = lineContentEnd(ofLine: line)
        let lineStartUnits = unitOffset(ofUTF8Offset: lineStart, encoding: encoding)
        let lineEndUnits = unitOffset(ofUTF8Offset: lineEnd, encoding: encoding)
        let length = lineEndUnits - lineStartUnits
        if character >= length { return (lineEnd, character == length) }
        do {
            return (try utf8Offset(ofUnitOffset: lineStartUnits + character, encoding: encoding), true)
        } catch {
            throw TextBuffer.insideError(line: line, character: character, encoding: encoding)
        }
    }

    /// The LSP position of the UTF-8 offset `offset`, in O(log n). An offset between the `\r` and
    /// the `\n` of a CRLF gives the end of its line.
    ///
    /// - Precondition: `offset` is within the document and on a scalar boundary.
    public func position(ofUTF8Offset offset: Int, encoding: PositionEncoding) -> TextPosition {
        precondition(offset >= 0 && offset <= utf8Count, "offset out of bounds")
        guard offset > 0 else { return TextPosition(line: 0, character: 0) }
        let location = locate(utf8: offset, preferEnd: true)
        let chunk = rope[location.index]
        let inChunk: (breaks: Int, local: Int, lineStart: Int?) = chunk.bytes.withUnsafeBufferPointer { bytes in
            var local = location.local
            if local < bytes.count && bytes[local - 1] == UTF8Scanning.carriageReturn
                && bytes[local] == UTF8Scanning.lineFeed {
                local -= 1
            }
            precondition(local >= bytes.count || !UTF8Scanning.isContinuation(bytes[local]),
                         "offset inside a UTF-8 sequence")
            // Count from whichever end of the chunk is nearer.
            let breaks = local <= bytes.count / 2
                ? UTF8Scanning.lineBreaks(bytes, 0..<local)
                : chunk.summary.lineBreaks - UTF8Scanning.lineBreaks(bytes, local..<bytes.count)
            return (breaks, local, UTF8Scanning.lineStart(before: local, in: bytes))
        }
        let breaksBefore = location.isComplete
            ? location.start.lineBreaks : rope.offset(of: location.index, in: LineBreakMetric())
        let line = breaksBefore + inChunk.breaks
        if let lineStart = inChunk.lineStart {
            let isASCII = chunk.summary.utf8 == chunk.summary.scalars
            let character = encoding == .utf8 || isASCII
                ? inChunk.local - lineStart
                : chunk.bytes.withUnsafeBufferPointer { UTF8Scanning.units(encoding, $0, lineStart..<inChunk.local) }
            return TextPosition(line: line, character: character)
        }
        // The line started in an earlier chunk.
        let adjusted = location.start.utf8 + inChunk.local
        let lineStart = lineStartOffset(ofLine: line)
        let character = unitOffset(ofUTF8Offset: adjusted, encoding: encoding)
            - unitOffset(ofUTF8Offset: lineStart, encoding: encoding)
        return TextPosition(line: line, character: character)
    }

    /// The UTF-8 range of an LSP range: ``utf8Offset(of:encoding:)`` of both ends.
    ///
    /// - Throws: what ``utf8Offset(of:encoding:)`` throws, or
    ///   ``TextBufferError/rangeEndBeforeStart(start:end:)``.
    public func utf8Range(of range: TextRange, encoding: PositionEncoding) throws(TextBufferError) -> Range<Int> {
        guard range.start <= range.end else {
            throw .rangeEndBeforeStart(start: range.start, end: range.end)
        }
        let start = try utf8Offset(of: range.start, encoding: encoding)
        let end = range.isEmpty ? start : try utf8Offset(of: range.end, encoding: encoding)
        return start..<end
    }

    /// The LSP range of a UTF-8 range: ``position(ofUTF8Offset:encoding:)`` of both ends.
    public func range(ofUTF8Range range: Range<Int>, encoding: PositionEncoding) -> TextRange {
        let start = position(ofUTF8Offset: range.lowerBound, encoding: encoding)
        let end = range.isEmpty ? start : position(ofUTF8Offset: range.upperBound, encoding: encoding)
        return TextRange(start: start, end: end)
    }

    /// The UTF-8 offset at which line `line` starts (just past the previous line break).
    ///
    /// - Precondition: `0 <= line < lineCount`.
    public func lineStartOffset(ofLine line: Int) -> Int {
        precondition(line >= 0 && line < lineCount, "line out of range")
        guard line > 0 else { return 0 }
        let found = locateLineBreak(endingLine: line)
        let chunkStart = found.cursor?.start.utf8 ?? rope.offset(of: found.index, in: UTF8Metric())
        let chunk = rope[found.index]
        return chunkStart + chunk.bytes.withUnsafeBufferPointer {
            UTF8Scanning.offsetAfterLineBreak(found.remaining, of: chunk.summary.lineBreaks, in: $0)
        }
    }

    /// The UTF-8 offset at which the content of line `line` ends: where its line break starts, or
    /// the end of the document for the last line.
    ///
    /// - Precondition: `0 <= line < lineCount`.
    public func lineContentEnd(ofLine line: Int) -> Int {
        precondition(line >= 0 && line < lineCount, "line out of range")
        guard line + 1 < lineCount else { return utf8Count }
        let found = locateLineBreak(endingLine: line + 1)
        let chunk = rope[found.index]
        let breakStart = chunk.bytes.withUnsafeBufferPointer { bytes in
            let after = UTF8Scanning.offsetAfterLineBreak(found.remaining, of: chunk.summary.lineBreaks, in: bytes)
            let isCRLF = after >= 2 && bytes[after - 1] == UTF8Scanning.lineFeed
                && bytes[after - 2] == UTF8Scanning.carriageReturn
            return after - (isCRLF ? 2 : 1)
        }
        return (found.cursor?.start.utf8 ?? rope.offset(of: found.index, in: UTF8Metric())) + breakStart
    }

    /// The error for a character that falls inside one character's encoding.
    static func insideError(line: Int, character: Int, encoding: PositionEncoding) -> TextBufferError {
        encoding == .utf8
            ? .characterInsideUTF8Sequence(line: line, character: character)
            : .characterInsideSurrogatePair(line: line, character: character)
    }
}
