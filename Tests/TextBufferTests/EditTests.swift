import Testing
@testable import TextBuffer

/// Applying edits: LSP didChange semantics, all or nothing, and what each edit reports.
@Suite struct EditTests {
    @Test func editsApplyInOrderEachToTheResultOfTheOneBefore() throws {
        var buffer = TextBuffer("hello\nworld\n")
        let applied = try buffer.apply(edits: [
            TextEdit(range: TextRange(0, 0, 0, 5), text: "goodbye"),
            TextEdit(range: TextRange(0, 7, 1, 0), text: " "),  // joins the lines
            TextEdit(range: TextRange(0, 13, 0, 13), text: "!"),
        ], encoding: .utf16)
        #expect(buffer.text == "goodbye world!\n")
        #expect(applied == [
            AppliedEdit(utf8Range: 0..<5, removedText: "hello", insertedText: "goodbye"),
            AppliedEdit(utf8Range: 7..<8, removedText: "\n", insertedText: " "),
            AppliedEdit(utf8Range: 13..<13, removedText: "", insertedText: "!"),
        ])
    }

    @Test func editWithoutRangeReplacesEverything() throws {
        var buffer = TextBuffer("old\ntext")
        let applied = try buffer.apply(edits: [TextEdit(range: nil, text: "new")], encoding: .utf8)
        #expect(buffer.text == "new")
        #expect(applied == [AppliedEdit(utf8Range: 0..<8, removedText: "old\ntext", insertedText: "new")])
    }

    @Test func anInvalidEditChangesNothing() {
        var buffer = TextBuffer("a😀b\nline two\n")
        let before = buffer
        #expect(throws: TextBufferError.invalidEdit(
            index: 2, field: .end, reason: .characterInsideSurrogatePair(line: 0, character: 4))
        ) {
            try buffer.apply(edits: [
                TextEdit(range: TextRange(1, 0, 1, 4), text: "LINE"),
                TextEdit(range: TextRange(0, 0, 0, 0), text: "xy"),
                TextEdit(range: TextRange(0, 2, 0, 4), text: "z"),  // "xya😀b": 4 falls between the halves of 😀
            ], encoding: .utf16)
        }
        #expect(buffer == before)
        #expect(buffer.text == "a😀b\nline two\n")
    }

    @Test func reversedRangeIsRefused() {
        var buffer = TextBuffer("abc\ndef")
        #expect(throws: TextBufferError.invalidEdit(
            index: 0, field: .range,
            reason: .rangeEndBeforeStart(start: TextPosition(line: 1, character: 0),
                                         end: TextPosition(line: 0, character: 2)))
        ) {
            try buffer.apply(edits: [TextEdit(range: TextRange(1, 0, 0, 2), text: "")], encoding: .utf16)
        }
        #expect(buffer.text == "abc\ndef")
    }

    @Test func negativeStartIsNamed() {
        var buffer = TextBuffer("abc")
        #expect(throws: TextBufferError.invalidEdit(
            index: 0, field: .start, reason: .negativePosition(line: 0, character: -1))
        ) {
            try buffer.apply(edits: [TextEdit(range: TextRange(0, -1, 0, 2), text: "")], encoding: .utf16)
        }
    }

    @Test func copiesAreIndependentSnapshots() {
        var buffer = TextBuffer(String(repeating: "0123456789\n", count: 2_000))
        let snapshot = buffer
        #expect(buffer.isIdentical(to: snapshot))
        buffer.replace(utf8Range: 5..<6, with: "X")
        buffer.replace(utf8Range: 20_000..<20_005, with: "")
        #expect(!buffer.isIdentical(to: snapshot))
        #expect(snapshot.text == String(repeating: "0123456789\n", count: 2_000))
        #expect(buffer.text.hasPrefix("01234X6789\n"))
        #expect(buffer.utf8Count == snapshot.utf8Count - 5)
        buffer.checkInvariants()
        snapshot.checkInvariants()
    }

    @Test func chunksJoinToTheText() {
        let text = String(repeating: "héllo wörld 😀\r\n", count: 500)
        let buffer = TextBuffer(text)
        #expect(Array(buffer.utf8Chunks).count > 5)
        #expect(buffer.utf8Chunks.reduce(into: []) { $0 += $1 } == Array(text.utf8))
        #expect(buffer.utf8Bytes() == Array(text.utf8))
        #expect(buffer.text(in: 3..<8) == "llo w")
        buffer.checkInvariants()
    }

    @Test func appliedEditInvertsExactly() throws {
        var buffer = TextBuffer("one\r\ntwo")
        let applied = try buffer.apply(edits: [TextEdit(range: TextRange(0, 3, 1, 1), text: "\n")], encoding: .utf32)
        #expect(buffer.text == "one\nwo")
        for edit in applied.reversed() { buffer.apply(edit.inverse) }
        #expect(buffer.text == "one\r\ntwo")
    }

    @Test func clientEditsNeverSplitCRLF() throws {
        // Inserting "\n" after a lone "\r" makes a CRLF; undoing it must delete the "\n" without a
        // position between "\r" and "\n", so the client edit replaces "\r\n" with "\r".
        var buffer = TextBuffer("a\rb")
        let applied = try buffer.apply(edits: [TextEdit(range: TextRange(1, 0, 1, 0), text: "\n")], encoding: .utf16)
        #expect(buffer.lineCount == 2)
        let undo = buffer.textEdit(for: applied[0].inverse, encoding: .utf16)
        #expect(undo == TextEdit(range: TextRange(0, 1, 1, 0), text: "\r"))
        // Inserting "\r" before "\n" likewise.
        var other = TextBuffer("a\nb")
        let second = try other.apply(edits: [TextEdit(range: TextRange(0, 1, 0, 1), text: "\r")], encoding: .utf16)
        #expect(other.text == "a\r\nb")
        #expect(other.textEdit(for: second[0].inverse, encoding: .utf16) == TextEdit(range: TextRange(0, 1, 1, 0), text: "\n"))
        // Inserting between "\r" and "\n".
        var third = TextBuffer("a\r\nb")
        let insideCRLF = AppliedEdit(utf8Range: 2..<2, removedText: "", insertedText: "x")
        #expect(third.textEdit(for: insideCRLF, encoding: .utf16) == TextEdit(range: TextRange(0, 1, 1, 0), text: "\rx\n"))
        third.apply(insideCRLF)
        #expect(third.text == "a\rx\nb")
    }
}
