import Testing
@testable import TextBuffer

/// Undo steps, merging, labels, the clean point, the change count and the memory bound.
@Suite struct UndoHistoryTests {
    /// A buffer and its history, edited as a session would.
    struct Document {
        var buffer: TextBuffer
        var history: UndoHistory

        init(_ text: String, byteLimit: Int = 1 << 20) {
            buffer = TextBuffer(text)
            history = UndoHistory(byteLimit: byteLimit)
        }

        mutating func edit(_ edits: [TextEdit], label: String? = nil, merge: Bool = false) throws {
            let applied = try buffer.apply(edits: edits, encoding: .utf16)
            history.record(applied, label: label, merge: merge)
        }

        mutating func type(_ text: String, at position: TextPosition, merge: Bool = false) throws {
            try edit([TextEdit(range: TextRange(start: position, end: position), text: text)], label: "Typing", merge: merge)
        }

        @discardableResult
        mutating func undo() -> [TextEdit]? { history.undo(&buffer, encoding: .utf16) }

        @discardableResult
        mutating func redo() -> [TextEdit]? { history.redo(&buffer, encoding: .utf16) }
    }

    @Test func eachRequestIsOneStep() throws {
        var document = Document("abc")
        try document.type("1", at: TextPosition(line: 0, character: 3))
        try document.type("2", at: TextPosition(line: 0, character: 4))
        #expect(document.buffer.text == "abc12")
        #expect(document.history.undoCount == 2)
        document.undo()
        #expect(document.buffer.text == "abc1")
        document.undo()
        #expect(document.buffer.text == "abc")
        #expect(document.undo() == nil)
        document.redo()
        document.redo()
        #expect(document.buffer.text == "abc12")
        #expect(document.redo() == nil)
    }

    @Test func mergeFoldsIntoThePreviousStep() throws {
        var document = Document("")
        try document.type("a", at: TextPosition(line: 0, character: 0))
        document.history.markClean()
        try document.type("b", at: TextPosition(line: 0, character: 1), merge: true)  // not across a save
        try document.type("c", at: TextPosition(line: 0, character: 2), merge: true)
        #expect(document.history.undoCount == 2)
        document.undo()
        #expect(document.buffer.text == "a")
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test func undoAnswersTheEditsAgainstTheTextBeforeEach() throws {
        var document = Document("one\ntwo\n")
        try document.edit([
            TextEdit(range: TextRange(0, 0, 0, 3), text: "1"),
            TextEdit(range: TextRange(1, 0, 1, 3), text: "2\n3"),
        ], label: "Replace")
        #expect(document.buffer.text == "1\n2\n3\n")
        #expect(document.history.undoLabel == "Replace")
        let undone = document.undo()
        let undo = try #require(undone)
        #expect(undo == [
            TextEdit(range: TextRange(1, 0, 2, 1), text: "two"),
            TextEdit(range: TextRange(0, 0, 0, 1), text: "one"),
        ])
        #expect(document.buffer.text == "one\ntwo\n")
        #expect(document.history.redoLabel == "Replace")
        let redone = document.redo()
        let redo = try #require(redone)
        #expect(redo == [
            TextEdit(range: TextRange(0, 0, 0, 3), text: "1"),
            TextEdit(range: TextRange(1, 0, 1, 3), text: "2\n3"),
        ])
    }

    @Test func newEditAfterUndoDropsRedo() throws {
        var document = Document("x")
        try document.type("a", at: TextPosition(line: 0, character: 1))
        try document.type("b", at: TextPosition(line: 0, character: 2))
        document.undo()
        #expect(document.history.canRedo)
        try document.type("c", at: TextPosition(line: 0, character: 2))
        #expect(!document.history.canRedo)
        #expect(document.buffer.text == "xac")
    }

    @Test func cleanPointFollowsUndoAndRedo() throws {
        var document = Document("x")
        #expect(!document.history.hasUnsavedChanges)
        try document.type("a", at: TextPosition(line: 0, character: 1))
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(!document.history.hasUnsavedChanges)
        document.redo()
        #expect(document.history.hasUnsavedChanges)
        document.history.markClean()  // saved "xa"
        document.undo()
        #expect(document.history.hasUnsavedChanges)
        document.redo()
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test func cleanPointDroppedWithRedoIsNeverReachedAgain() throws {
        var document = Document("x")
        try document.type("a", at: TextPosition(line: 0, character: 1))
        document.history.markClean()
        document.undo()
        try document.type("b", at: TextPosition(line: 0, character: 1))  // drops the saved state
        #expect(document.history.hasUnsavedChanges)
        document.undo()
        #expect(document.history.hasUnsavedChanges)
        #expect(document.buffer.text == "x")
    }

    @Test func changeCountCountsEveryChange() throws {
        var document = Document("")
        #expect(document.history.changeCount == 0)
        try document.type("a", at: TextPosition(line: 0, character: 0))
        try document.type("b", at: TextPosition(line: 0, character: 1), merge: true)
        document.undo()
        document.redo()
        #expect(document.history.changeCount == 4)
        try document.edit([TextEdit(range: TextRange(0, 0, 0, 1), text: "a")])  // changes nothing
        #expect(document.history.changeCount == 4)
        #expect(document.history.undoCount == 1)
    }

    @Test func memoryLimitDropsOldestSteps() throws {
        var document = Document("", byteLimit: 10 * (UndoHistory.costPerEdit + 10))
        for step in 0..<25 {
            try document.type(String(repeating: "x", count: 10), at: TextPosition(line: 0, character: step * 10))
        }
        #expect(document.history.byteCount <= document.history.byteLimit)
        #expect(document.history.undoCount == 10)
        while document.undo() != nil {}
        #expect(document.buffer.utf8Count == 150)
        #expect(document.history.hasUnsavedChanges)  // the clean point was in a dropped step
        document.history.byteLimit = 0
        #expect(!document.history.canRedo && !document.history.canUndo)
        #expect(document.history.byteCount == 0)
    }

    @Test func droppingManyStepsStaysCorrectAcrossCompaction() throws {
        var document = Document("", byteLimit: 50 * (UndoHistory.costPerEdit + 1))
        for step in 0..<1_000 {
            try document.type("x", at: TextPosition(line: 0, character: step))
        }
        #expect(document.history.undoCount == 50)
        document.history.markClean()
        for _ in 0..<20 { document.undo() }
        #expect(document.buffer.utf8Count == 980)
        for _ in 0..<20 { document.redo() }
        #expect(!document.history.hasUnsavedChanges)
    }

    @Test func labelsOfUndoAndRedo() throws {
        var document = Document("")
        #expect(document.history.undoLabel == nil)
        try document.edit([TextEdit(range: nil, text: "a")], label: "Paste")
        try document.edit([TextEdit(range: nil, text: "b")])
        #expect(document.history.undoLabel == nil)
        document.undo()
        #expect(document.history.undoLabel == "Paste")
        #expect(document.history.redoLabel == nil)
    }
}
