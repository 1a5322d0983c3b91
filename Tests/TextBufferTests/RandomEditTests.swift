import Testing
@testable import TextBuffer

/// Random edit, undo and redo sequences checked against `ReferenceText`, in all three encodings,
/// with astral characters, combining marks and every kind of line break, on short texts and on
/// texts of many chunks. Each run is seeded: a failure names its seed, and rerunning reproduces it.
@Suite struct RandomEditTests {
    /// The pieces random text is made of.
    static let alphabet: [String] = [
        "a", "b", "z", " ", "\t", "é", "€", "😀", "👍🏽", "e\u{301}", "\u{301}", "𝄞",
        "\n", "\r", "\r\n", "\n\r", "hello", "wörld", "日本語",
    ]

    static func randomText(length: Int, using random: inout SeededGenerator) -> String {
        var text = ""
        while text.unicodeScalars.count < length {
            text += alphabet.randomElement(using: &random)!
        }
        return text
    }

    /// A position around the text: usually valid, sometimes past a line's end or the last line,
    /// sometimes (in utf-8 and utf-16) inside a character.
    static func randomPosition(in reference: ReferenceText, lines: [(start: Int, end: Int)],
                               _ encoding: PositionEncoding, using random: inout SeededGenerator) -> TextPosition {
        let line = Int.random(in: 0...(lines.count + (Bool.random(using: &random) ? 0 : 1)), using: &random)
        guard line < lines.count else { return TextPosition(line: line, character: Int.random(in: 0...3, using: &random)) }
        let content = reference.scalars[lines[line].start..<lines[line].end]
        let length = content.reduce(0) { $0 + ReferenceText.width($1, encoding) }
        let character = Int.random(in: 0...(length + 2), using: &random)
        return TextPosition(line: line, character: character)
    }

    /// Runs `steps` random requests from a random text of `length` scalars and checks every state.
    func run(seed: UInt64, length: Int, steps: Int, maxInsert: Int) throws {
        var random = SeededGenerator(seed: seed)
        let start = Self.randomText(length: length, using: &random)
        var buffer = TextBuffer(start)
        var reference = ReferenceText(start)
        var history = UndoHistory()
        var states = [reference]  // the text after each undo step, for undo and redo
        var current = 0
        var client = reference  // an editor's copy, kept in sync only by the edits we answer

        for step in 0..<steps {
            let encoding = PositionEncoding.allCases.randomElement(using: &random)!
            let context = Comment(rawValue: "seed \(seed), step \(step), \(encoding.rawValue)")
            let roll = Int.random(in: 0..<10, using: &random)
            if roll == 0 && history.canUndo {
                let undone = history.undo(&buffer, encoding: encoding)
                let edits = try #require(undone, context)
                for edit in edits { try client.apply(edit, encoding) }
                current -= 1
            } else if roll == 1 && history.canRedo {
                let redone = history.redo(&buffer, encoding: encoding)
                let edits = try #require(redone, context)
                for edit in edits { try client.apply(edit, encoding) }
                current += 1
            } else {
                // A request of one to three edits, each against the result of the one before.
                var edits: [TextEdit] = []
                var expected = reference
                var expectedError: TextBufferError?
                for number in 0..<Int.random(in: 1...3, using: &random) {
                    let lines = expected.lines
                    var a = Self.randomPosition(in: expected, lines: lines, encoding, using: &random)
                    var b = Self.randomPosition(in: expected, lines: lines, encoding, using: &random)
                    if b < a { swap(&a, &b) }
                    if Int.random(in: 0..<4, using: &random) == 0 { b = a }
                    let text = Self.randomText(length: Int.random(in: 0...maxInsert, using: &random), using: &random)
                    let edit = Int.random(in: 0..<40, using: &random) == 0
                        ? TextEdit(range: nil, text: text)
                        : TextEdit(range: TextRange(start: a, end: b), text: text)
                    edits.append(edit)
                    if let range = edit.range {
                        switch (expected.scalarIndex(of: range.start, encoding), expected.scalarIndex(of: range.end, encoding)) {
                        case (.failure(let error), _):
                            expectedError = .invalidEdit(index: number, field: .start, reason: error)
                        case (_, .failure(let error)):
                            expectedError = .invalidEdit(index: number, field: .end, reason: error)
                        case (.success(let lower), .success(let upper)):
                            expected.scalars.replaceSubrange(lower..<upper, with: Array(text.unicodeScalars))
                        }
                    } else {
                        expected = ReferenceText(text)
                    }
                    if expectedError != nil { break }
                }
                do {
                    let applied = try buffer.apply(edits: edits, encoding: encoding)
                    #expect(expectedError == nil, context)
                    let merge = Int.random(in: 0..<4, using: &random) == 0
                    let (steps, changes) = (history.undoCount, history.changeCount)
                    history.record(applied, label: "step \(step)", merge: merge)
                    for edit in edits { try client.apply(edit, encoding) }
                    if history.changeCount == changes {
                        // Nothing changed, nothing recorded.
                        #expect(expected == states[current], context)
                    } else if history.undoCount == steps + 1 {
                        states.removeSubrange((current + 1)...)
                        states.append(expected)
                        current += 1
                    } else {
                        // Merged: the previous step now ends at the new text.
                        #expect(history.undoCount == steps, context)
                        states.removeSubrange((current + 1)...)
                        states[current] = expected
                    }
                } catch let error as TextBufferError {
                    #expect(error == expectedError, context)
                    try #require(expectedError != nil, context)
                }
            }
            reference = states[current]
            #expect(Array(buffer.text.unicodeScalars) == reference.scalars, context)
            #expect(client == reference, context)
            #expect(buffer.lineCount == reference.lines.count, context)
            for encoding in PositionEncoding.allCases {
                #expect(buffer.count(in: encoding) == reference.count(encoding), context)
            }
            if step % 16 == 0 {
                buffer.checkInvariants()
                try checkPositions(buffer, reference, using: &random, context)
            }
        }
        buffer.checkInvariants()
        // Undo everything, then redo everything.
        while history.undo(&buffer, encoding: .utf16) != nil {}
        #expect(Array(buffer.text.unicodeScalars) == states[0].scalars, "seed \(seed): undo all")
        while history.redo(&buffer, encoding: .utf16) != nil {}
        #expect(Array(buffer.text.unicodeScalars) == states.last!.scalars, "seed \(seed): redo all")
    }

    /// Compares conversions at random scalar offsets (not inside a CRLF) with the reference.
    func checkPositions(_ buffer: TextBuffer, _ reference: ReferenceText,
                        using random: inout SeededGenerator, _ context: Comment) throws {
        for _ in 0..<8 {
            let index = Int.random(in: 0...reference.scalars.count, using: &random)
            if index > 0 && index < reference.scalars.count && reference.scalars[index - 1] == "\r"
                && reference.scalars[index] == "\n" { continue }
            let offset = reference.utf8Offset(ofScalarIndex: index)
            for encoding in PositionEncoding.allCases {
                let position = reference.position(ofScalarIndex: index, encoding)
                #expect(buffer.position(ofUTF8Offset: offset, encoding: encoding) == position, context)
                #expect(try buffer.utf8Offset(of: position, encoding: encoding) == offset, context)
                let units = reference.scalars[..<index].reduce(0) { $0 + ReferenceText.width($1, encoding) }
                #expect(buffer.unitOffset(ofUTF8Offset: offset, encoding: encoding) == units, context)
                #expect(try buffer.utf8Offset(ofUnitOffset: units, encoding: encoding) == offset, context)
            }
        }
    }

    @Test(arguments: 1...24 as ClosedRange<UInt64>)
    func shortTexts(seed: UInt64) throws {
        try run(seed: seed, length: 30, steps: 400, maxInsert: 6)
    }

    @Test(arguments: 101...106 as ClosedRange<UInt64>)
    func textsOfManyChunks(seed: UInt64) throws {
        try run(seed: seed, length: 12_000, steps: 200, maxInsert: 1_500)
    }

    @Test(arguments: 201...204 as ClosedRange<UInt64>)
    func longTextsWithSmallEdits(seed: UInt64) throws {
        try run(seed: seed, length: 6_000, steps: 500, maxInsert: 4)
    }
}
