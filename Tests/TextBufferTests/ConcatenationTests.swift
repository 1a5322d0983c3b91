import Testing
@testable import TextBuffer

/// `append(_:)` and `init(concatenating:)`, which join the documents built from the parts of a
/// file read on two threads: the text, the counts and the chunks must be those of the text built
/// whole, wherever the parts meet (a CRLF split between them included).
@Suite struct ConcatenationTests {
    /// `left + right` through `append(_:)`, checked against the text built whole.
    @discardableResult
    func concatenateAndCheck(_ left: [UInt8], _ right: [UInt8], pieceSize: Int = 1 << 20, _ comment: Comment? = nil) -> TextBuffer {
        func build(_ bytes: [UInt8]) -> TextBuffer {
            var buffer = TextBuffer()
            var start = 0
            while start < bytes.count {
                var end = min(start + pieceSize, bytes.count)
                while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
                bytes[start..<end].withUnsafeBufferPointer { buffer.append(utf8: $0) }
                start = end
            }
            return buffer
        }
        let (a, b) = (build(left), build(right))
        var joined = a
        joined.append(b)
        joined.checkInvariants()
        let expected = left + right
        let whole = TextBuffer(String(decoding: expected, as: UTF8.self))
        #expect(joined.utf8Bytes() == expected, comment)
        #expect(joined.utf16Count == whole.utf16Count, comment)
        #expect(joined.scalarCount == whole.scalarCount, comment)
        #expect(joined.lineBreakCount == whole.lineBreakCount, comment)
        #expect(joined == whole, comment)
        // The parts are values: unchanged.
        #expect(a.utf8Bytes() == left && b.utf8Bytes() == right, comment)
        let boundaries = joined.chunkBoundaries
        var previous = 0
        for end in boundaries {
            #expect(end - previous <= Chunk.maxBytes, comment)
            #expect(boundaries.count == 1 || end - previous >= Chunk.minBytes, comment)
            previous = end
        }
        #expect(TextBuffer(concatenating: [a, b]) == whole, comment)
        return joined
    }

    @Test func emptyParts() {
        concatenateAndCheck([], [])
        concatenateAndCheck(Array("abc".utf8), [])
        concatenateAndCheck([], Array("abc".utf8))
        #expect(TextBuffer(concatenating: []).isEmpty)
        #expect(TextBuffer(concatenating: [TextBuffer("a"), TextBuffer(), TextBuffer("b\r"), TextBuffer("\nc")]) == TextBuffer("ab\r\nc"))
    }

    @Test func crlfAcrossTheSeam() {
        for leftSize in [0, 1, 200, 895, 1023, 3000] {
            for rightSize in [0, 1, 300, 1023, 2500] {
                let left = Array(repeating: UInt8(ascii: "a"), count: leftSize) + [0x0D]
                let right = [0x0A] + Array(repeating: UInt8(ascii: "b"), count: rightSize)
                let joined = concatenateAndCheck(left, right, Comment(rawValue: "\(leftSize) + \(rightSize)"))
                #expect(joined.lineBreakCount == 1)
            }
        }
    }

    @Test func multiByteAndLineBreaksAtEverySeam() {
        let text = Array(String(repeating: "line é😀\n日本語\r\ncr\rx", count: 120).utf8)
        for split in stride(from: 0, through: text.count, by: 7) where split == text.count || text[split] & 0xC0 != 0x80 {
            concatenateAndCheck(Array(text[..<split]), Array(text[split...]), pieceSize: 1000, Comment(rawValue: "split \(split)"))
        }
    }

    @Test func randomTextsAndEditsAfterwards() {
        var random = SeededGenerator(seed: 11)
        let atoms = ["a", "word ", "é", "日", "😀", "\n", "\r\n", "\r"]
        for round in 0..<40 {
            let length = Int.random(in: 0..<6000, using: &random)
            var bytes: [UInt8] = []
            while bytes.count < length { bytes += Array(atoms.randomElement(using: &random)!.utf8) }
            var split = Int.random(in: 0...bytes.count, using: &random)
            while split < bytes.count && bytes[split] & 0xC0 == 0x80 { split += 1 }
            var joined = concatenateAndCheck(Array(bytes[..<split]), Array(bytes[split...]),
                                             pieceSize: Int.random(in: 1...3000, using: &random), Comment(rawValue: "round \(round)"))
            // The joined rope edits as any other: insert at the seam.
            joined.replace(utf8Range: split..<split, with: "X\r\n")
            joined.checkInvariants()
            var expected = bytes
            expected.insert(contentsOf: Array("X\r\n".utf8), at: split)
            #expect(joined == TextBuffer(String(decoding: expected, as: UTF8.self)), "round \(round)")
        }
    }
}
