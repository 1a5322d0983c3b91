import Testing
@testable import TextBuffer

/// Marks: a save takes one when it snapshots the text and makes that state the clean point when
/// it ends, whatever was done in between.
@Suite("UndoHistory: marks for saves that run while editing goes on")
struct UndoMarkTests {
    typealias Document = UndoHistoryTests.Document

    func at(_ character: Int) -> TextPosition { TextPosition(line: 0, character: character) }

    @Test("nothing changed since the mark: the current text is clean")
    func unchanged() throws {
        var document = Document("abc")
        try document.type("1", at: at(3))
        let mark = document.history.mark
        document.history.markClean(at: mark)
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test("edits after the mark stay unsaved; undoing them reaches the saved state, clean again")
    func editsAfterTheMark() throws {
        var document = Document("abc")
        try document.type("1", at: at(3))
        let mark = document.history.mark
        try document.type("2", at: at(4))
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(document.buffer.text == "abc1")
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test("undone past the mark: the saved state is a redo away")
    func undoneBeforeTheSaveEnded() throws {
        var document = Document("abc")
        try document.type("1", at: at(3))
        try document.type("2", at: at(4))
        let mark = document.history.mark
        document.undo()
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        document.redo()
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test("typing merged into the marked step: the saved text is no state of the history, so it stays unsaved")
    func mergedIntoTheMarkedStep() throws {
        var document = Document("abc")
        try document.type("1", at: at(3))
        let mark = document.history.mark
        try document.type("2", at: at(4), merge: true)
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(document.buffer.text == "abc")
        #expect(document.history.hasUnsavedChanges)
    }

    @Test("a mark taken at the start of the history, with a step dropped for memory meanwhile, is unreachable")
    func bottomMark() throws {
        var document = Document("abc", byteLimit: 400)
        let mark = document.history.mark
        try document.type("1", at: at(3))
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(!document.history.hasUnsavedChanges)
        try document.type(String(repeating: "x", count: 150), at: at(3))
        try document.type(String(repeating: "y", count: 150), at: at(3))
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        #expect(document.history.undoCount == 1)
        document.undo()
        #expect(document.history.hasUnsavedChanges)
    }

    @Test("redo steps dropped by a new edit after the mark: the saved state is gone")
    func markedStepDropped() throws {
        var document = Document("abc")
        try document.type("1", at: at(3))
        try document.type("2", at: at(4))
        let mark = document.history.mark
        document.undo()
        try document.type("3", at: at(4))
        document.history.markClean(at: mark)
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(document.history.hasUnsavedChanges)
    }
}
