import Testing
@testable import TextBuffer

/// Line breaks and multi-byte characters put exactly where one chunk ends and the next begins.
@Suite struct ChunkBoundaryTests {
    /// A long text of short lines, some non-ASCII, spanning many chunks.
    static let longText: String = (0..<3_000).map { "line \($0) é😀\n" }.joined()

    /// Inserts `insertion` at and around chunk boundaries (one at a time, on fresh copies) and
    /// checks the text, the line count and a line start against the reference.
    func checkInsertionAtBoundaries(_ insertion: String, into text: String = longText) throws {
        let original = TextBuffer(text)
        let boundaries = original.chunkBoundaries.dropLast()
        #expect(boundaries.count > 10)
        for boundary in boundaries.prefix(40) {
            for shift in -1...1 {
                var buffer = original
                let offset = boundary + shift
                guard buffer.isScalarBoundary(offset), !buffer.isInsideCRLF(offset) else { continue }
                buffer.replace(utf8Range: offset..<offset, with: insertion)
                buffer.checkInvariants()
                var bytes = Array(text.utf8)
                bytes.insert(contentsOf: Array(insertion.utf8), at: offset)
                let expected = String(decoding: bytes, as: UTF8.self)
                #expect(buffer.text == expected)
                let reference = ReferenceText(expected)
                #expect(buffer.lineCount == reference.lines.count, "inserting \(insertion.debugDescription) at \(offset)")
                let probe = reference.position(ofScalarIndex: reference.scalars.count / 2, .utf16)
                let line = reference.lines[probe.line]
                #expect(buffer.lineStartOffset(ofLine: probe.line) == reference.utf8Offset(ofScalarIndex: line.start))
            }
        }
    }

    @Test func lineFeedAtBoundaries() throws { try checkInsertionAtBoundaries("\n") }
    @Test func carriageReturnAtBoundaries() throws { try checkInsertionAtBoundaries("\r") }
    @Test func crlfAtBoundaries() throws { try checkInsertionAtBoundaries("\r\n") }
    @Test func astralCharacterAtBoundaries() throws { try checkInsertionAtBoundaries("😀") }
    @Test func combiningMarkAtBoundaries() throws { try checkInsertionAtBoundaries("\u{301}") }

    @Test func carriageReturnThenLineFeedAcrossABoundaryCountsOnce() throws {
        let text = String(repeating: "abcdefgh", count: 1_000)
        var buffer = TextBuffer(text)
        let boundary = buffer.chunkBoundaries[3]
        buffer.replace(utf8Range: boundary..<boundary, with: "\n")
        buffer.replace(utf8Range: boundary..<boundary, with: "\r")
        buffer.checkInvariants()
        #expect(buffer.lineCount == 2)
        // Deleting what lies between a "\r" and a "\n" on two sides of a boundary joins them.
        var other = TextBuffer(text)
        let b = other.chunkBoundaries[5]
        other.replace(utf8Range: b - 1..<b - 1, with: "\r")
        other.replace(utf8Range: b + 2..<b + 2, with: "\n")
        #expect(other.lineCount == 3)
        other.replace(utf8Range: b..<b + 2, with: "")
        other.checkInvariants()
        #expect(other.lineCount == 2)
        #expect(other.position(ofUTF8Offset: b + 1, encoding: .utf16) == TextPosition(line: 1, character: 0))
    }

    @Test func deletionsAcrossManyChunks() throws {
        var buffer = TextBuffer(Self.longText)
        var reference = Array(Self.longText.utf8)
        let cuts = [(100, 20_000), (5, 6), (30_000, 30_001), (0, 1_500)]
        for (lower, upper) in cuts where upper <= reference.count {
            var lo = lower
            while !buffer.isScalarBoundary(lo) { lo += 1 }
            var hi = max(upper, lo)
            while !buffer.isScalarBoundary(hi) { hi += 1 }
            buffer.replace(utf8Range: lo..<hi, with: "")
            reference.removeSubrange(lo..<hi)
            buffer.checkInvariants()
            #expect(buffer.utf8Bytes() == reference)
        }
        buffer.replace(utf8Range: 0..<buffer.utf8Count, with: "")
        #expect(buffer.isEmpty)
        buffer.replace(utf8Range: 0..<0, with: "again")
        #expect(buffer.text == "again")
    }

    @Test func largeInsertionsSplitIntoWellSizedChunks() {
        var buffer = TextBuffer("head\ntail")
        let paste = String(repeating: "ß😀\r\n", count: 10_000)
        buffer.replace(utf8Range: 5..<5, with: paste)
        buffer.checkInvariants()
        #expect(buffer.text == "head\n" + paste + "tail")
        #expect(buffer.lineCount == 10_002)
    }
}
