import Testing
@testable import TextBuffer

/// `append(utf8:)`, which builds a document from a file read in pieces: the text, the counts and
/// the chunks must be what building it whole gives, wherever the pieces end.
@Suite struct AppendTests {
    /// Appends `pieces` (each well-formed UTF-8) one by one to `start`, checking the rope's
    /// invariants after each, and checks the result against the text built whole.
    @discardableResult
    func appendAndCheck(_ pieces: [[UInt8]], to start: TextBuffer = TextBuffer(),
                        _ comment: Comment? = nil) -> TextBuffer {
        var buffer = start
        var expected = start.utf8Bytes()
        for piece in pieces {
            piece.withUnsafeBufferPointer { buffer.append(utf8: $0) }
            expected += piece
            buffer.checkInvariants()
            checkChunkSizes(buffer, comment)
        }
        #expect(buffer.utf8Bytes() == expected, comment)
        let whole = TextBuffer(String(decoding: expected, as: UTF8.self))
        #expect(buffer.utf16Count == whole.utf16Count, comment)
        #expect(buffer.scalarCount == whole.scalarCount, comment)
        #expect(buffer.lineBreakCount == whole.lineBreakCount, comment)
        #expect(buffer == whole, comment)
        let reference = ReferenceText(String(decoding: expected, as: UTF8.self))
        #expect(buffer.lineCount == reference.lines.count, comment)
        return buffer
    }

    /// Every chunk is at most `maxBytes`, and at least `minBytes` unless it is the only one.
    func checkChunkSizes(_ buffer: TextBuffer, _ comment: Comment?) {
        var previous = 0
        let boundaries = buffer.chunkBoundaries
        for end in boundaries {
            let size = end - previous
            #expect(size <= Chunk.maxBytes, comment)
            #expect(boundaries.count == 1 || size >= Chunk.minBytes, comment)
            previous = end
        }
    }

    /// `text` cut into pieces of about `size` bytes, each moved to a scalar boundary (as the file
    /// loader hands them over: never a sequence cut in two).
    static func pieces(of text: String, size: Int) -> [[UInt8]] {
        let bytes = Array(text.utf8)
        var pieces: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            var end = min(start + size, bytes.count)
            while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
            pieces.append(Array(bytes[start..<end]))
            start = end
        }
        return pieces
    }

    static let mixed: String = (0..<2_000).map { n in
        ["line \(n) é😀\n", "crlf \(n) 日本語\r\n", "cr \(n)\r", "", "\n", String(repeating: "x", count: n % 97) + "\r\n"][n % 6]
    }.joined()

    @Test(arguments: [1, 2, 3, 5, 16, 255, 256, 895, 896, 897, 1023, 1024, 1025, 2048, 4099, 1 << 20])
    func piecesOfEverySizeGiveTheWholeText(size: Int) {
        appendAndCheck(Self.pieces(of: Self.mixed, size: size), Comment(rawValue: "piece size \(size)"))
    }

    @Test func appendingToAnEmptyBufferAndAnEmptyPiece() {
        var buffer = TextBuffer()
        [UInt8]().withUnsafeBufferPointer { buffer.append(utf8: $0) }
        #expect(buffer.isEmpty)
        appendAndCheck([Array("short".utf8)])
        appendAndCheck([Array("a\r".utf8), [], Array("\nb".utf8)])
    }

    @Test func appendingToAnEditedBuffer() {
        var start = TextBuffer(Self.mixed)
        var (lower, upper) = (10, 2_000)
        while !start.isScalarBoundary(lower) || start.isInsideCRLF(lower) { lower += 1 }
        while !start.isScalarBoundary(upper) || start.isInsideCRLF(upper) { upper += 1 }
        start.replace(utf8Range: lower..<upper, with: "edited 😀\r")
        appendAndCheck(Self.pieces(of: "\n" + Self.mixed, size: 700), to: start)
        appendAndCheck([Array("\n tail".utf8)], to: TextBuffer("one chunk\r"))
    }

    /// A `\r` that ends one piece and the `\n` that starts the next are one line break, in one
    /// chunk, whatever the size of the chunk the `\r` ends.
    @Test(arguments: [1, 100, 255, 256, 700, 895, 896, 897, 1000, 1023, 1024, 1500, 2047, 3000])
    func crlfSplitAcrossTwoPieces(firstLength: Int) {
        let first = Array(repeating: UInt8(ascii: "a"), count: firstLength - 1) + [0x0D]
        for secondLength in [1, 2, 100, 1023, 1024, 3000] {
            let second = [0x0A] + Array(repeating: UInt8(ascii: "b"), count: secondLength - 1)
            let comment = Comment(rawValue: "\(firstLength) then \(secondLength) bytes")
            let buffer = appendAndCheck([first, second], comment)
            #expect(buffer.lineBreakCount == 1, comment)
            #expect(buffer.isInsideCRLF(firstLength), comment)
            #expect(buffer.lineStartOffset(ofLine: 1) == firstLength + 1, comment)
            // The same after text that already fills chunks.
            appendAndCheck([Array(Self.mixed.utf8.prefix(5_000)), first, second], comment)
        }
    }

    /// A piece that ends with a multi-byte character and one that starts with one; and pieces
    /// whose cut points fall inside multi-byte characters at every offset.
    @Test func multiByteCharactersAtPieceBoundaries() {
        for character in ["é", "€", "😀", "日"] {
            for shift in 0..<4 {
                let filler = String(repeating: "a", count: 893 + shift)
                let first = Array((filler + character).utf8)
                let second = Array((character + String(repeating: character, count: 400) + "\n").utf8)
                let comment = Comment(rawValue: "\(character) shifted \(shift)")
                let buffer = appendAndCheck([first, second, first, second], comment)
                #expect(buffer.scalarCount == 2 * (filler.count + 1 + 402), comment)
            }
        }
        // Only four-byte characters: every possible cut is inside one but one in four.
        let astral = String(repeating: "😀", count: 3_000)
        for size in [1_021, 1_022, 1_023, 1_024, 4_096] {
            appendAndCheck(Self.pieces(of: astral, size: size), Comment(rawValue: "astral, piece size \(size)"))
        }
    }

    /// A long run of CRLFs: no cut may fall between a `\r` and its `\n`.
    @Test func runsOfCRLF() {
        let text = String(repeating: "\r\n", count: 5_000)
        for size in [1, 2, 3, 895, 896, 897, 1_024, 1_025] {
            let buffer = appendAndCheck(Self.pieces(of: text, size: size), Comment(rawValue: "piece size \(size)"))
            #expect(buffer.lineBreakCount == 5_000)
        }
    }

    /// The one-pass counts a chunk's summary is made from agree with the separate counting
    /// functions, on buffers of every length up to a few blocks and with every kind of break.
    @Test func summaryCountsAgreeWithSeparateCounts() {
        var random = SeededGenerator(seed: 7)
        for length in 0..<300 {
            for _ in 0..<4 {
                let text = RandomEditTests.randomText(length: length, using: &random)
                var bytes = Array(text.utf8.prefix(length))
                while let last = bytes.last, last & 0xC0 == 0x80 || last >= 0xC0 { bytes.removeLast() }
                bytes.withUnsafeBufferPointer { buffer in
                    let counts = UTF8Scanning.summaryCounts(buffer)
                    let units = UTF8Scanning.unitCounts(buffer, 0..<buffer.count)
                    let comment = Comment(rawValue: "\(bytes)")
                    #expect(counts.utf16 == units.utf16, comment)
                    #expect(counts.scalars == units.scalars, comment)
                    #expect(counts.lineBreaks == UTF8Scanning.lineBreaks(buffer, 0..<buffer.count), comment)
                }
            }
        }
    }

    /// Random texts cut at random scalar boundaries, checked against building them whole.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomPieces(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let text = RandomEditTests.randomText(length: 20_000, using: &random)
        let bytes = Array(text.utf8)
        var pieces: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            var end = min(bytes.count, start + Int.random(in: 0...2_500, using: &random))
            while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
            pieces.append(Array(bytes[start..<end]))
            start = end
        }
        appendAndCheck(pieces, Comment(rawValue: "seed \(seed)"))
    }
}
