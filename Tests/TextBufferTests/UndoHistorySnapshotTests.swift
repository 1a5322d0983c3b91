import Testing
@testable import TextBuffer

/// `UndoHistory.snapshot` and `UndoHistory(snapshot:)`: a history exported and imported again
/// undoes, redoes, merges and keeps its clean point as before.
@Suite struct UndoHistorySnapshotTests {
    typealias Document = UndoHistoryTests.Document

    /// Three labelled steps (the second of two merged edits), one undone, saved in the middle.
    func sample() throws -> Document {
        var document = Document("one\n")
        try document.edit([TextEdit(range: TextRange(0, 0, 0, 3), text: "ONE")], label: "Shout")
        document.history.markClean()
        try document.type("a", at: TextPosition(line: 1, character: 0), merge: false)
        try document.type("b", at: TextPosition(line: 1, character: 1), merge: true)
        try document.edit([TextEdit(range: TextRange(0, 0, 0, 0), text: "é ")], label: "Accent")
        document.undo()
        return document
    }

    @Test func roundTripKeepsStepsPositionAndCleanPoint() throws {
        let document = try sample()
        let snapshot = document.history.snapshot
        #expect(snapshot.steps.count == 3)
        #expect(snapshot.steps.map(\.label) == ["Shout", "Typing", "Accent"])
        #expect(snapshot.steps[1].edits.count == 2)
        #expect(snapshot.position == 2 && snapshot.cleanPosition == 1)
        let imported = try #require(UndoHistory(snapshot: snapshot))
        #expect(imported.snapshot == snapshot)
        #expect(imported.undoCount == 2 && imported.redoCount == 1)
        #expect(imported.undoLabel == "Typing" && imported.redoLabel == "Accent")
        #expect(imported.hasUnsavedChanges == document.history.hasUnsavedChanges)
        #expect(imported.byteCount == document.history.byteCount)
    }

    @Test func undoAndRedoAfterImportDoWhatTheyDidBefore() throws {
        let original = try sample()
        var before = original
        var after = Document("")
        after.buffer = original.buffer
        after.history = try #require(UndoHistory(snapshot: original.history.snapshot))
        // Every undo and redo answers the same edits, leaves the same text and the same clean state.
        for action in ["undo", "undo", "undo", "redo", "redo", "redo", "redo", "undo"] {
            let (a, b) = action == "undo" ? (before.undo(), after.undo()) : (before.redo(), after.redo())
            #expect(a == b, "\(action)")
            #expect(before.buffer.text == after.buffer.text)
            #expect(before.history.hasUnsavedChanges == after.history.hasUnsavedChanges)
            #expect(before.history.undoLabel == after.history.undoLabel && before.history.redoLabel == after.history.redoLabel)
        }
        #expect(after.buffer.text == "ONE\nab")
        // A merge after the import folds into the imported step, as it would have before.
        try before.type("c", at: TextPosition(line: 1, character: 2), merge: true)
        try after.type("c", at: TextPosition(line: 1, character: 2), merge: true)
        #expect(before.history.snapshot == after.history.snapshot)
        after.undo()
        #expect(after.buffer.text == "ONE\n" && !after.history.hasUnsavedChanges)
    }

    @Test func anEmptyHistoryRoundTrips() throws {
        let history = UndoHistory()
        let snapshot = history.snapshot
        #expect(snapshot == UndoHistory.Snapshot(steps: [], position: 0, cleanPosition: 0))
        let imported = try #require(UndoHistory(snapshot: snapshot))
        #expect(!imported.canUndo && !imported.canRedo && !imported.hasUnsavedChanges)
    }

    @Test func droppedOldestStepsAreNotExported() throws {
        var document = Document("", byteLimit: 3 * (UndoHistory.costPerEdit + 1))
        for index in 0..<5 { try document.type("x", at: TextPosition(line: 0, character: index)) }
        let snapshot = document.history.snapshot
        #expect(snapshot.steps.count == 3 && snapshot.position == 3 && snapshot.cleanPosition == nil)
        var imported = try #require(UndoHistory(snapshot: snapshot))
        var buffer = document.buffer
        while imported.canUndo { _ = imported.undo(&buffer, encoding: .utf16) }
        #expect(buffer.text == "xx" && imported.hasUnsavedChanges)
    }

    @Test func importKeepsTheByteLimit() throws {
        let document = try sample()
        let snapshot = document.history.snapshot
        // Room for the newest step only: the two older go, the clean point with them.
        let newest = snapshot.steps[2].edits.reduce(0) { $0 + $1.removedText.utf8.count + $1.insertedText.utf8.count + UndoHistory.costPerEdit }
        let imported = try #require(UndoHistory(snapshot: snapshot, byteLimit: newest))
        #expect(imported.undoCount == 0 && imported.redoCount == 1 && imported.hasUnsavedChanges)
        #expect(imported.byteCount <= newest)
    }

    @Test func positionsOutsideTheStepsAreRefused() {
        let step = UndoHistory.Snapshot.Step(edits: [AppliedEdit(utf8Range: 0..<0, removedText: "", insertedText: "a")], label: nil)
        #expect(UndoHistory(snapshot: .init(steps: [step], position: 2, cleanPosition: 0)) == nil)
        #expect(UndoHistory(snapshot: .init(steps: [step], position: 1, cleanPosition: -1)) == nil)
        #expect(UndoHistory(snapshot: .init(steps: [step], position: 1, cleanPosition: nil)) != nil)
    }

    @Test func stepsThatChangeNothingAreLeftOut() throws {
        let real = UndoHistory.Snapshot.Step(edits: [AppliedEdit(utf8Range: 0..<0, removedText: "", insertedText: "a")], label: "A")
        let noOp = UndoHistory.Snapshot.Step(edits: [AppliedEdit(utf8Range: 0..<1, removedText: "a", insertedText: "a")], label: "Nothing")
        let imported = try #require(UndoHistory(snapshot: .init(steps: [real, noOp, real], position: 3, cleanPosition: 2)))
        #expect(imported.snapshot == UndoHistory.Snapshot(steps: [real, real], position: 2, cleanPosition: 1))
    }

    @Test func atCleanPointMovesThePositionAndDropsUnsavedSteps() throws {
        var document = try sample()  // clean 1, position 2
        let moved = try #require(document.history.snapshot.atCleanPoint())
        #expect(moved.position == 1 && moved.cleanPosition == 1 && moved.steps.count == 1)
        #expect(moved.steps[0].label == "Shout")
        // Undone past the clean point: the steps the file holds are kept, redo too.
        document.undo()
        document.undo()
        let back = try #require(document.history.snapshot.atCleanPoint())
        #expect(back.position == 1 && back.steps.count == 3)
        // From the file's text (the clean state), the imported history undoes to the first text.
        var history = try #require(UndoHistory(snapshot: back))
        var buffer = TextBuffer("ONE\n")
        _ = history.undo(&buffer, encoding: .utf16)
        #expect(buffer.text == "one\n" && history.hasUnsavedChanges)
        // No clean point: nothing to keep.
        document.history.forgetCleanPoint()
        #expect(document.history.snapshot.atCleanPoint() == nil)
    }
}
