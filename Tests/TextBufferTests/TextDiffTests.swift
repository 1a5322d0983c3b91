import Testing
@testable import TextBuffer

/// The edits between two texts: exact edits for small cases (at the start, middle and end, with
/// multi-byte characters and CRLFs where a naive byte trim would split them), random texts
/// checked by applying the edits to a buffer, and the two large cases the bounds exist for.
@Suite struct TextDiffTests {
    /// Diffs `old` against `new`, applies the edits in order to a buffer of `old` checking that
    /// each fits the text, starts after the previous one and leaves no boundary inside a scalar
    /// or a CRLF, and checks that the result is `new`.
    @discardableResult
    static func check(
        _ old: [UInt8], _ new: [UInt8], _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [AppliedEdit] {
        let edits = TextDiff.edits(from: old, to: new)
        guard var buffer = TextBuffer(utf8: old) else {
            Issue.record("old is not UTF-8", sourceLocation: sourceLocation)
            return edits
        }
        var previousEnd = 0
        for edit in edits {
            let range = edit.utf8Range
            guard range.lowerBound >= previousEnd, range.upperBound <= buffer.utf8Count else {
                Issue.record("\(edit) out of order or out of bounds after \(previousEnd) \(comment?.rawValue ?? "")",
                             sourceLocation: sourceLocation)
                return edits
            }
            #expect(!edit.isNoOp, "\(edit)", sourceLocation: sourceLocation)
            #expect(buffer.text(in: range).utf8.elementsEqual(edit.removedText.utf8),
                    "\(edit) \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
            for offset in [range.lowerBound, range.upperBound] {
                #expect(buffer.isScalarBoundary(offset) && !buffer.isInsideCRLF(offset),
                        "\(edit) splits the text before it at \(offset) \(comment?.rawValue ?? "")",
                        sourceLocation: sourceLocation)
            }
            buffer.apply(edit)
            let inserted = edit.insertedUTF8Range
            for offset in [inserted.lowerBound, inserted.upperBound] {
                #expect(buffer.isScalarBoundary(offset) && !buffer.isInsideCRLF(offset),
                        "\(edit) splits the text after it at \(offset) \(comment?.rawValue ?? "")",
                        sourceLocation: sourceLocation)
            }
            previousEnd = inserted.upperBound
        }
        #expect(buffer.utf8Bytes() == new, "\(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        return edits
    }

    /// `check` on strings.
    @discardableResult
    static func check(
        _ old: String, _ new: String, sourceLocation: SourceLocation = #_sourceLocation
    ) -> [AppliedEdit] {
        check(Array(old.utf8), Array(new.utf8), sourceLocation: sourceLocation)
    }

    /// An edit, shorter.
    static func edit(_ range: Range<Int>, _ removed: String, _ inserted: String) -> AppliedEdit {
        AppliedEdit(utf8Range: range, removedText: removed, insertedText: inserted)
    }

    // MARK: Small cases

    @Test func equalTextsGiveNoEdits() {
        #expect(Self.check("", "") == [])
        #expect(Self.check("abc\ndef\n", "abc\ndef\n") == [])
        #expect(Self.check("a\r\nb", "a\r\nb") == [])
        let buffer = TextBuffer("same\n")
        #expect(TextDiff.edits(from: buffer, to: buffer) == [])
        #expect(TextDiff.edits(from: buffer, to: TextBuffer("same\n")) == [])
    }

    @Test func emptyOldOrNew() {
        #expect(Self.check("", "abc\n") == [Self.edit(0..<0, "", "abc\n")])
        #expect(Self.check("abc\n", "") == [Self.edit(0..<4, "abc\n", "")])
    }

    @Test func insertions() {
        #expect(Self.check("b\nc\n", "a\nb\nc\n") == [Self.edit(0..<0, "", "a\n")])
        #expect(Self.check("a\nc\n", "a\nb\nc\n") == [Self.edit(2..<2, "", "b\n")])
        #expect(Self.check("a\nb\n", "a\nb\nc\n") == [Self.edit(4..<4, "", "c\n")])
        #expect(Self.check("a\nb", "a\nb\nc") == [Self.edit(3..<3, "", "\nc")])
    }

    @Test func deletions() {
        #expect(Self.check("a\nb\nc\n", "b\nc\n") == [Self.edit(0..<2, "a\n", "")])
        #expect(Self.check("a\nb\nc\n", "a\nc\n") == [Self.edit(2..<4, "b\n", "")])
        #expect(Self.check("a\nb\nc\n", "a\nb\n") == [Self.edit(4..<6, "c\n", "")])
    }

    @Test func replacements() {
        #expect(Self.check("hello world\n", "jello world\n") == [Self.edit(0..<1, "h", "j")])
        #expect(Self.check("hello world\n", "hello there\n") == [Self.edit(6..<11, "world", "there")])
        #expect(Self.check("hello world", "hello world!") == [Self.edit(11..<11, "", "!")])
        // Adjacent changed lines are one hunk, trimmed to the bytes that differ.
        #expect(Self.check("a\nbx\ncx\nd\n", "a\nBx\nCx\nd\n") == [Self.edit(2..<6, "bx\nc", "Bx\nC")])
    }

    @Test func separateHunksGiveSeparateEdits() {
        // Each range is in the text left by the edits before it.
        let old = "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n"
        let new = "alpha\nBeta\ngamma\ndelta\nepsilon!!\nzeta\n"
        #expect(Self.check(old, new) == [
            Self.edit(6..<7, "b", "B"),
            Self.edit(30..<30, "", "!!"),
        ])
        let lines = (0..<50).map { "line \($0)\n" }
        var changed = lines
        changed[3] = "line three\n"
        changed.remove(at: 20)
        changed.insert("new line\n", at: 40)
        let edits = Self.check(lines.joined(), changed.joined())
        #expect(edits.count == 3)
        #expect(edits.map(\.removedText) == ["3", "line 20\n", ""])
        #expect(edits.map(\.insertedText) == ["three", "", "new line\n"])
    }

    @Test func multiByteCharactersAreNotSplit() {
        // é and è share their lead byte: the prefix backs off before it.
        #expect(Self.check("café\n", "cafè\n") == [Self.edit(3..<5, "é", "è")])
        // 😀 and 😃 share three bytes.
        #expect(Self.check("a😀b", "a😃b") == [Self.edit(1..<5, "😀", "😃")])
        // 語 (E8 AA 9E) and 説 (E8 AA AC) share two.
        #expect(Self.check("日本語\n", "日本説\n") == [Self.edit(6..<9, "語", "説")])
        // ä (C3 A4) and Ĥ (C4 A4) share their last byte, € (E2 82 AC) and ガ (E3 82 AC) two: the
        // suffix backs off after them.
        #expect(Self.check("xä", "xĤ") == [Self.edit(1..<3, "ä", "Ĥ")])
        #expect(Self.check("a€b\n", "aガb\n") == [Self.edit(1..<4, "€", "ガ")])
        // The same inside a later hunk.
        #expect(Self.check("one\n日本語\nthree\nfour\na€b\n", "one\n日本説\nthree\nfour\naガb\n") == [
            Self.edit(10..<13, "語", "説"), Self.edit(26..<29, "€", "ガ"),
        ])
    }

    @Test func crlfIsNotSplit() {
        // Naively: delete the \r at 1, leaving an edit boundary between \r and \n.
        #expect(Self.check("a\r\nb\r\n", "a\nb\r\n") == [Self.edit(1..<3, "\r\n", "\n")])
        // Naively: insert \r at 1, splitting the new CRLF.
        #expect(Self.check("a\nb", "a\r\nb") == [Self.edit(1..<2, "\n", "\r\n")])
        // Naively: insert \n at 2, after a lone \r.
        #expect(Self.check("a\rb", "a\r\nb") == [Self.edit(1..<2, "\r", "\r\n")])
        #expect(Self.check("a\r\nb", "a\rb") == [Self.edit(1..<3, "\r\n", "\r")])
        // An extra \r before a CRLF goes in before the pair's \r, not inside it.
        #expect(Self.check("a\r\n", "a\r\r\n") == [Self.edit(1..<1, "", "\r")])
        #expect(Self.check("x\r\ny\r\nz\r\n", "x\r\nY\r\nz\r\n") == [Self.edit(3..<4, "y", "Y")])
        #expect(Self.check("x\r\ny\r\nz\r\nw\r\n", "x\ny\r\nz\r\nw\n") == [
            Self.edit(1..<3, "\r\n", "\n"), Self.edit(9..<11, "\r\n", "\n"),
        ])
    }

    @Test func lineDiffIsMinimal() {
        // Myers' example: ABCABBA to CBABAC takes 5 insertions and deletions.
        let old = Array("A\nB\nC\nA\nB\nB\nA\n".utf8), new = Array("C\nB\nA\nB\nA\nC\n".utf8)
        old.withUnsafeBufferPointer { old in
            new.withUnsafeBufferPointer { new in
                let oldLines = LineTable(old, 0..<old.count), newLines = LineTable(new, 0..<new.count)
                let hunks = TextDiff.lineHunks(old, oldLines, new, newLines)
                #expect(hunks.reduce(0) { $0 + $1.old.count + $1.new.count } == 5)
                #expect(zip(hunks, hunks.dropFirst()).allSatisfy {
                    $0.old.upperBound < $1.old.lowerBound && $0.new.upperBound < $1.new.lowerBound
                })
            }
        }
        Self.check(old, new)
    }

    @Test func lineTableKeepsTerminators() {
        let text = Array("a\r\nb\rc\n\nd".utf8)
        text.withUnsafeBufferPointer { bytes in
            let lines = LineTable(bytes, 0..<bytes.count)
            #expect(lines.starts == [0, 3, 5, 7, 8, 9])
            #expect(lines.count == 5)
            #expect(LineTable(bytes, 0..<0).count == 0)
        }
    }

    // MARK: Random texts

    /// The pieces random lines are made of: multi-byte characters whose encodings share leading
    /// or trailing bytes, and line breaks of every kind.
    static let pieces: [String] = [
        "a", "b", "z", " ", "é", "è", "ä", "Ĥ", "€", "ガ", "😀", "😃", "日本", "語", "説", "word", "\r",
    ]
    static let terminators = ["\n", "\n", "\r\n", "\r\n", "\r"]

    static func randomLine(using random: inout SeededGenerator) -> String {
        var line = ""
        for _ in 0 ..< Int.random(in: 0...5, using: &random) { line += pieces.randomElement(using: &random)! }
        return line + terminators.randomElement(using: &random)!
    }

    /// A random text, a random series of line edits to it, and the check of their diff.
    func runRandom(seed: UInt64, lines: Int, operations: Int) {
        var random = SeededGenerator(seed: seed)
        var old = (0 ..< Int.random(in: 0...lines, using: &random)).map { _ in Self.randomLine(using: &random) }
        if !old.isEmpty && Bool.random(using: &random) {
            // Sometimes no newline at the end.
            old[old.count - 1] = String(old[old.count - 1].dropLast())
        }
        var new = old
        for _ in 0 ..< Int.random(in: 1...operations, using: &random) {
            let index = Int.random(in: 0...new.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where index < new.count:
                new.remove(at: index)
            case 1 where index < new.count:
                // Change a character (or the break) somewhere in the line.
                var scalars = Array(new[index].unicodeScalars)
                if scalars.isEmpty { scalars.append("x") }
                let at = Int.random(in: 0..<scalars.count, using: &random)
                scalars[at] = Self.pieces.randomElement(using: &random)!.unicodeScalars.first!
                new[index] = String(String.UnicodeScalarView(scalars))
            case 2 where index < new.count:
                new[index] = Self.randomLine(using: &random)
            case 3 where index < new.count:
                new.insert(new[index], at: index)
            default:
                new.insert(Self.randomLine(using: &random), at: index)
            }
        }
        Self.check(Array(old.joined().utf8), Array(new.joined().utf8), Comment(rawValue: "seed \(seed)"))
    }

    @Test func randomLineEditsOnSmallTexts() {
        for seed in UInt64(1)...300 { runRandom(seed: seed, lines: 12, operations: 4) }
    }

    @Test func randomLineEditsOnLargerTexts() {
        for seed in UInt64(1001)...1060 { runRandom(seed: seed, lines: 400, operations: 30) }
    }

    // MARK: Large inputs

    @Test func largeInputWithThreeChangedLines() {
        // 20 MB of 34-byte lines, "line 0000000042 of the large text\n".
        let template = Array("line 0000000000 of the large text\n".utf8)
        let lineCount = 20_000_000 / template.count
        var old: [UInt8] = []
        old.reserveCapacity(lineCount * template.count)
        for line in 0 ..< lineCount {
            var digits = template
            var number = line, position = 14
            while number > 0 {
                digits[position] = UInt8(ascii: "0") + UInt8(number % 10)
                number /= 10
                position -= 1
            }
            old.append(contentsOf: digits)
        }
        var new = old
        let changed = [lineCount / 10, lineCount / 2, lineCount * 9 / 10]
        for line in changed { new[line * 34 + 3] = UInt8(ascii: "E") }
        #expect(old.count == lineCount * 34)
        let edits = Self.check(old, new)
        #expect(edits == changed.map { Self.edit($0 * 34 + 3 ..< $0 * 34 + 4, "e", "E") })
    }

    @Test func largeUnrelatedInputsFallBackToOneEdit() {
        // 200,000 lines on each side with no line in common: the search gives up at its bound
        // and replaces the differing middle in one edit.
        var old = "header\n", new = "header\n"
        for line in 0 ..< 200_000 {
            old += "old line \(line)\n"
            new += "new \(line &* 7919 % 200_000) text\n"
        }
        old += "footer\n"
        new += "footer\n"
        let edits = Self.check(old, new)
        #expect(edits.count == 1)
        #expect(edits.first?.utf8Range.lowerBound == 7)
        // The line search did give up (rather than find the same single hunk the long way).
        let oldBytes = Array(old.utf8), newBytes = Array(new.utf8)
        oldBytes.withUnsafeBufferPointer { oldBytes in
            newBytes.withUnsafeBufferPointer { newBytes in
                let oldLines = LineTable(oldBytes, 0..<oldBytes.count)
                let newLines = LineTable(newBytes, 0..<newBytes.count)
                oldLines.starts.withUnsafeBufferPointer { oldStarts in
                    oldLines.hashes.withUnsafeBufferPointer { oldHashes in
                        newLines.starts.withUnsafeBufferPointer { newStarts in
                            newLines.hashes.withUnsafeBufferPointer { newHashes in
                                var differ = LineDiffer(
                                    a: oldBytes, aStarts: oldStarts, aHashes: oldHashes,
                                    b: newBytes, bStarts: newStarts, bHashes: newHashes)
                                let finished = differ.diff(0, oldHashes.count, 0, newHashes.count)
                                #expect(!finished)
                            }
                        }
                    }
                }
            }
        }
    }
}

