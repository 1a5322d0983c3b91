import Testing
@testable import TextBuffer

/// Characters counted in utf-8, utf-16 and utf-32, and positions that split a character refused.
@Suite struct PositionEncodingTests {
    // "a😀é€b": a (1 byte), 😀 (4 bytes, 2 UTF-16 units), é (2 bytes), € (3 bytes), b.
    let buffer = TextBuffer("a😀é€b\nx")

    @Test func countsInEachEncoding() {
        #expect(buffer.utf8Count == 13)
        #expect(buffer.utf16Count == 8)
        #expect(buffer.scalarCount == 7)
        #expect(buffer.count(in: .utf16) == 8)
        #expect(PositionEncoding(rawValue: "utf-16") == .utf16)
        #expect(PositionEncoding.allCases.map(\.rawValue) == ["utf-8", "utf-16", "utf-32"])
    }

    @Test func charactersCountInTheNegotiatedEncoding() throws {
        func offset(_ character: Int, _ encoding: PositionEncoding) throws -> Int {
            try buffer.utf8Offset(of: TextPosition(line: 0, character: character), encoding: encoding)
        }
        #expect(try [0, 1, 2, 3, 4].map { try offset($0, .utf32) } == [0, 1, 5, 7, 10])
        #expect(try [0, 1, 3, 4, 5].map { try offset($0, .utf16) } == [0, 1, 5, 7, 10])
        #expect(try [0, 1, 5, 7, 10, 11].map { try offset($0, .utf8) } == [0, 1, 5, 7, 10, 11])
        #expect(buffer.position(ofUTF8Offset: 10, encoding: .utf16) == TextPosition(line: 0, character: 5))
        #expect(buffer.position(ofUTF8Offset: 10, encoding: .utf8) == TextPosition(line: 0, character: 10))
        #expect(buffer.position(ofUTF8Offset: 10, encoding: .utf32) == TextPosition(line: 0, character: 4))
    }

    @Test func characterInsideSurrogatePairIsRefused() {
        #expect(throws: TextBufferError.characterInsideSurrogatePair(line: 0, character: 2)) {
            try buffer.utf8Offset(of: TextPosition(line: 0, character: 2), encoding: .utf16)
        }
    }

    @Test func characterInsideUTF8SequenceIsRefused() {
        for character in [2, 3, 4, 6, 8, 9] {
            #expect(throws: TextBufferError.characterInsideUTF8Sequence(line: 0, character: character)) {
                try buffer.utf8Offset(of: TextPosition(line: 0, character: character), encoding: .utf8)
            }
        }
    }

    @Test func negativePositionsAreRefused() {
        #expect(throws: TextBufferError.negativePosition(line: -1, character: 0)) {
            try buffer.utf8Offset(of: TextPosition(line: -1, character: 0), encoding: .utf16)
        }
        #expect(throws: TextBufferError.negativePosition(line: 0, character: -3)) {
            try buffer.utf8Offset(of: TextPosition(line: 0, character: -3), encoding: .utf8)
        }
    }

    @Test func documentWideOffsetsConvert() throws {
        #expect(try buffer.utf8Offset(ofUnitOffset: 3, encoding: .utf32) == 7)
        #expect(try buffer.utf8Offset(ofUnitOffset: 3, encoding: .utf16) == 5)
        #expect(buffer.unitOffset(ofUTF8Offset: 7, encoding: .utf16) == 4)
        #expect(buffer.unitOffset(ofUTF8Offset: 13, encoding: .utf32) == 7)
        #expect(throws: TextBufferError.offsetInsideCharacter(offset: 2, encoding: .utf16)) {
            try buffer.utf8Offset(ofUnitOffset: 2, encoding: .utf16)
        }
        #expect(throws: TextBufferError.offsetInsideCharacter(offset: 3, encoding: .utf8)) {
            try buffer.utf8Offset(ofUnitOffset: 3, encoding: .utf8)
        }
        #expect(throws: TextBufferError.offsetOutOfBounds(offset: 8, count: 7)) {
            try buffer.utf8Offset(ofUnitOffset: 8, encoding: .utf32)
        }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(TextBuffer(utf8: [0x61, 0xC3, 0xA9]) != nil)
        #expect(TextBuffer(utf8: [0xC0, 0x80]) == nil)  // overlong
        #expect(TextBuffer(utf8: [0xED, 0xA0, 0x80]) == nil)  // encoded surrogate
        #expect(TextBuffer(utf8: [0xF4, 0x90, 0x80, 0x80]) == nil)  // above U+10FFFF
        #expect(TextBuffer(utf8: [0x61, 0xE2, 0x82]) == nil)  // truncated
        #expect(TextBuffer(utf8: Array("plain ascii text, long enough for the fast path".utf8))?.text
                == "plain ascii text, long enough for the fast path")
        // A collection without contiguous storage.
        #expect(TextBuffer(utf8: repeatElement(UInt8(0x61), count: 3))?.text == "aaa")
        #expect(TextBuffer(utf8: repeatElement(UInt8(0xFF), count: 3)) == nil)
    }
}

/// Lines longer than a chunk: conversions that cannot stay inside one chunk.
@Suite struct LongLineTests {
    static let line = String(repeating: "abcé😀 ", count: 700)  // 4,900 scalars, 9,100 bytes
    static let text = line + "\r\n" + line + "\r" + line

    @Test func positionsOnLongLinesMatchTheReference() throws {
        let buffer = TextBuffer(Self.text)
        let reference = ReferenceText(Self.text)
        #expect(buffer.chunkBoundaries.count > 10)
        for encoding in PositionEncoding.allCases {
            for index in stride(from: 0, through: reference.scalars.count, by: 97) {
                if index > 0 && reference.scalars[index - 1] == "\r" && index < reference.scalars.count
                    && reference.scalars[index] == "\n" { continue }
                let offset = reference.utf8Offset(ofScalarIndex: index)
                let position = reference.position(ofScalarIndex: index, encoding)
                #expect(buffer.position(ofUTF8Offset: offset, encoding: encoding) == position)
                #expect(try buffer.utf8Offset(of: position, encoding: encoding) == offset)
            }
        }
    }

    @Test func clampingAndRefusalOnLongLines() throws {
        let buffer = TextBuffer(Self.text)
        let lineBytes = Self.line.utf8.count
        #expect(try buffer.utf8Offset(of: TextPosition(line: 0, character: 100_000), encoding: .utf16) == lineBytes)
        #expect(try buffer.utf8Offset(of: TextPosition(line: 1, character: 100_000), encoding: .utf32) == 2 * lineBytes + 2)
        // "abcé😀 " is 7 UTF-16 units; the pair of 😀 is units 4 and 5 of each group.
        let inside = 700 * 7 - 7 + 5
        #expect(throws: TextBufferError.characterInsideSurrogatePair(line: 2, character: inside)) {
            try buffer.utf8Offset(of: TextPosition(line: 2, character: inside), encoding: .utf16)
        }
        // "abcé😀 " is 11 bytes: é is bytes 3-4, 😀 bytes 5-8.
        let insideUTF8 = 600 * 11 + 6
        #expect(throws: TextBufferError.characterInsideUTF8Sequence(line: 1, character: insideUTF8)) {
            try buffer.utf8Offset(of: TextPosition(line: 1, character: insideUTF8), encoding: .utf8)
        }
    }

    @Test func editsOnALongLine() throws {
        var buffer = TextBuffer(Self.text)
        var reference = ReferenceText(Self.text)
        for (step, character) in [4_000, 10, 4_899, 2_500, 0].enumerated() {
            let edit = TextEdit(range: TextRange(1, character, 1, character + 2), text: "[\(step)]")
            try buffer.apply(edits: [edit], encoding: .utf32)
            try reference.apply(edit, .utf32)
            #expect(Array(buffer.text.unicodeScalars) == reference.scalars)
        }
        buffer.checkInvariants()
    }
}
