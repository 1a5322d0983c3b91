import Testing
@testable import TextBuffer

/// The line model: which bytes end a line, how many lines there are, where each starts and ends.
@Suite struct LineModelTests {
    /// Line starts and content ends of `text`, as UTF-8 offsets.
    func lines(_ text: String) -> [Range<Int>] {
        let buffer = TextBuffer(text)
        return (0..<buffer.lineCount).map {
            buffer.lineStartOffset(ofLine: $0) ..< buffer.lineContentEnd(ofLine: $0)
        }
    }

    @Test func emptyDocumentHasOneEmptyLine() {
        let buffer = TextBuffer("")
        #expect(buffer.lineCount == 1)
        #expect(buffer.isEmpty)
        #expect(lines("") == [0..<0])
        #expect(buffer.position(ofUTF8Offset: 0, encoding: .utf16) == TextPosition(line: 0, character: 0))
    }

    @Test func lineFeedEndsALine() {
        #expect(lines("ab\ncd\n") == [0..<2, 3..<5, 6..<6])
    }

    @Test func carriageReturnAloneEndsALine() {
        #expect(lines("ab\rcd\r") == [0..<2, 3..<5, 6..<6])
    }

    @Test func crlfEndsALineOnce() {
        #expect(lines("ab\r\ncd\r\n") == [0..<2, 4..<6, 8..<8])
        #expect(TextBuffer("\r\n\r\n").lineCount == 3)
    }

    @Test func mixedLineEndings() {
        // LF, CR, CRLF, LF CR (two breaks), CR CR LF (two breaks).
        let text = "a\nb\rc\r\nd\n\re\r\r\nf"
        #expect(lines(text) == [0..<1, 2..<3, 4..<5, 7..<8, 9..<9, 10..<11, 12..<12, 14..<15])
        #expect(TextBuffer(text).lineBreakCount == 7)
    }

    @Test func lastLineWithoutLineBreak() throws {
        let buffer = TextBuffer("one\ntwo")
        #expect(buffer.lineCount == 2)
        #expect(try buffer.utf8Offset(of: TextPosition(line: 1, character: 3), encoding: .utf16) == 7)
        #expect(buffer.position(ofUTF8Offset: 7, encoding: .utf16) == TextPosition(line: 1, character: 3))
    }

    @Test func characterPastLineEndMeansLineEnd() throws {
        let buffer = TextBuffer("ab\r\ncd\ref\n")
        for encoding in PositionEncoding.allCases {
            #expect(try buffer.utf8Offset(of: TextPosition(line: 0, character: 99), encoding: encoding) == 2)
            #expect(try buffer.utf8Offset(of: TextPosition(line: 1, character: 3), encoding: encoding) == 6)
            #expect(try buffer.utf8Offset(of: TextPosition(line: 2, character: 2), encoding: encoding) == 9)
            #expect(try buffer.utf8Offset(of: TextPosition(line: 3, character: 5), encoding: encoding) == 10)
        }
    }

    @Test func linePastLastLineMeansDocumentEnd() throws {
        let buffer = TextBuffer("ab\ncd")
        #expect(try buffer.utf8Offset(of: TextPosition(line: 2, character: 0), encoding: .utf16) == 5)
        #expect(try buffer.utf8Offset(of: TextPosition(line: 200, character: 7), encoding: .utf8) == 5)
        #expect(try TextBuffer("").utf8Offset(of: TextPosition(line: 1, character: 1), encoding: .utf32) == 0)
    }

    @Test func offsetInsideCRLFGivesLineEnd() {
        let buffer = TextBuffer("ab\r\ncd")
        #expect(buffer.position(ofUTF8Offset: 3, encoding: .utf16) == TextPosition(line: 0, character: 2))
        #expect(buffer.isInsideCRLF(3))
        #expect(!buffer.isInsideCRLF(2))
        #expect(!buffer.isInsideCRLF(4))
    }

    @Test func positionsRoundTripAtEveryOffset() throws {
        let text = "a\r\nb\u{301}\rc😀\n\n€\r"
        let buffer = TextBuffer(text)
        let reference = ReferenceText(text)
        for encoding in PositionEncoding.allCases {
            for index in 0...reference.scalars.count {
                if index > 0 && index < reference.scalars.count && reference.scalars[index - 1] == "\r"
                    && reference.scalars[index] == "\n" { continue }
                let offset = reference.utf8Offset(ofScalarIndex: index)
                let position = reference.position(ofScalarIndex: index, encoding)
                #expect(buffer.position(ofUTF8Offset: offset, encoding: encoding) == position)
                #expect(try buffer.utf8Offset(of: position, encoding: encoding) == offset)
            }
        }
    }
}
