import FileStore
import Foundation
import Testing
import TextBuffer

@testable import DocumentSession

/// A store that keeps undo histories under `state` (`persistUndo`).
private func undoKeepingStore(_ state: TemporaryDirectory) async throws -> DocumentStore {
    let store = DocumentStore(watchFiles: false)
    await store.setPersistUndo(try UndoDirectory.open(stateDirectory: state.path))
    return store
}

private func undoFile(_ state: TemporaryDirectory, of path: String) throws -> String {
    try UndoDirectory.open(stateDirectory: state.path).file(forPath: path)
}

@Suite("Undo histories kept across closes and restarts (persistUndo)")
struct PersistedUndoTests {
    @Test("edit, save, close, reopen: undo goes back through the earlier session's steps; unsaved steps are not kept")
    func historySurvivesCloseAndRestart() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\n")
        do {
            let store = try await undoKeepingStore(state)
            let handle = try await store.open(path: path, encoding: nil).handle
            var version = try await store.edit(handle, version: 1, edits: [insert("two\n", at: 1, 0)], encoding: .utf16, label: "Second", merge: false)
            version = try await store.edit(handle, version: version, edits: [insert("three\n", at: 2, 0)], encoding: .utf16, label: "Third", merge: false)
            _ = try await store.save(handle)
            // After the save, an edit that is never saved: closing drops it, from the kept history too.
            version = try await store.edit(handle, version: version, edits: [insert("draft ", at: 0, 0)], encoding: .utf16, label: "Draft", merge: false)
            _ = try await store.close(handle, save: .never)
            // Reopened at once by the same store: the open waits for the close's write.
            let again = try await store.open(path: path, encoding: nil)
            #expect(again.buffer.text == "one\ntwo\nthree\n")
            #expect(again.history.canUndo && !again.history.canRedo && !again.hasUnsavedChanges)
            #expect(again.history.undoLabel == "Third" && again.history.undoCount == 2)
            _ = try await store.close(again.handle, save: .never)
            #expect(await store.keepUndoHistories(within: .seconds(30)))
        }
        #expect(FileManager.default.fileExists(atPath: try undoFile(state, of: path)))

        // A new store (a restarted server) on the same state directory.
        let store = try await undoKeepingStore(state)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.buffer.text == "one\ntwo\nthree\n" && !opened.hasUnsavedChanges && opened.version == 1)
        #expect(opened.history.canUndo && opened.history.undoLabel == "Third")
        #expect(opened.identity.contentHash != nil, "the hash computed to match the history is the file's")
        var (version, edits) = try await store.undo(opened.handle, version: 1, encoding: .utf16)
        #expect(version == 2 && edits == [replace(TextRange(2, 0, 3, 0), with: "")])
        var document = try await store.document(opened.handle)
        #expect(document.buffer.text == "one\ntwo\n" && document.hasUnsavedChanges && document.history.undoLabel == "Second")
        (version, _) = try await store.undo(opened.handle, version: version, encoding: .utf16)
        document = try await store.document(opened.handle)
        #expect(document.buffer.text == "one\n" && !document.history.canUndo && document.history.redoCount == 2)
        // Redo back to the file's text: clean again.
        (version, _) = try await store.redo(opened.handle, version: version, encoding: .utf16)
        (version, _) = try await store.redo(opened.handle, version: version, encoding: .utf16)
        document = try await store.document(opened.handle)
        #expect(document.buffer.text == "one\ntwo\nthree\n" && !document.hasUnsavedChanges && version == 5)
    }

    @Test("the histories of documents still open are kept at the end, up to their last save")
    func openDocumentsAreKeptAtTheEnd() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("a.txt", "a\n")
        do {
            let store = try await undoKeepingStore(state)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("b\n", at: 1, 0)], encoding: .utf16, label: "B", merge: false)
            _ = try await store.save(handle)
            _ = try await store.edit(handle, version: 2, edits: [insert("c\n", at: 2, 0)], encoding: .utf16, label: "C", merge: false)
            #expect(await store.keepUndoHistories(within: .seconds(30)))
        }
        let store = try await undoKeepingStore(state)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.buffer.text == "a\nb\n" && opened.history.undoLabel == "B" && opened.history.undoCount == 1)
        #expect(!opened.history.canRedo)
    }

    @Test("a file changed by another program while open is reloaded as a step: the history survives it, and is kept for the new bytes")
    func changeWhileOpenKeepsTheHistory() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\n")
        do {
            let store = DocumentStore(watchFiles: true)
            await store.setPersistUndo(try UndoDirectory.open(stateDirectory: state.path))
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("two\n", at: 1, 0)], encoding: .utf16, label: "Second", merge: false)
            _ = try await store.save(handle)
            // Another program appends a line while the document is open (written beside, renamed
            // over it, as editors save).
            _ = try files.write("notes.txt.incoming", "one\ntwo\nthree\n")
            #expect(rename(files.file("notes.txt.incoming"), path) == 0)
            let reloadedInTime = try await waitUntil { try await store.document(handle).buffer.text == "one\ntwo\nthree\n" }
            let reloaded = try await store.document(handle)
            // What the store saw, should the reload not come (seen once under load, not reproduced).
            let checking = await store.checkIsRunning(handle)
            let watching = await store.fileWatchingError == nil
            #expect(reloadedInTime, """
                no reload within \(defaultDeadline): the document's file identity \(reloaded.identity), the file's now \
                \(String(describing: FileIdentity.current(path: path))), a check running: \(checking), \
                watching: \(watching), text \(reloaded.buffer.text.debugDescription)
                """)
            guard reloadedInTime else { return }
            #expect(reloaded.history.undoLabel == "Reload" && !reloaded.hasUnsavedChanges)
            _ = try await store.close(handle, save: .never)
            #expect(await store.keepUndoHistories(within: .seconds(30)))
        }
        let store = try await undoKeepingStore(state)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.buffer.text == "one\ntwo\nthree\n" && opened.history.undoLabel == "Reload" && opened.history.undoCount == 2)
        var version = try await store.undo(opened.handle, version: 1, encoding: .utf16).version
        version = try await store.undo(opened.handle, version: version, encoding: .utf16).version
        #expect(try await store.document(opened.handle).buffer.text == "one\n")
    }

    @Test("a file changed by another program while closed: the history is dropped, and its file deleted")
    func changedFileDropsTheHistory() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\n")
        do {
            let store = try await undoKeepingStore(state)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("two\n", at: 1, 0)], encoding: .utf16, label: "Second", merge: false)
            _ = try await store.close(handle, save: .ifChanged)
            #expect(await store.keepUndoHistories(within: .seconds(30)))
        }
        #expect(FileManager.default.fileExists(atPath: try undoFile(state, of: path)))
        // Another program writes the file: the same size, other bytes.
        _ = try files.write("notes.txt", "ONE\nTWO\n")
        let store = try await undoKeepingStore(state)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.buffer.text == "ONE\nTWO\n")
        #expect(!opened.history.canUndo && !opened.history.canRedo)
        #expect(!FileManager.default.fileExists(atPath: try undoFile(state, of: path)))
    }

    @Test("a corrupt undo file is ignored and deleted; the open works")
    func corruptFileIsIgnored() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\n")
        do {
            let store = try await undoKeepingStore(state)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("two\n", at: 1, 0)], encoding: .utf16, label: "Second", merge: false)
            _ = try await store.close(handle, save: .ifChanged)
            #expect(await store.keepUndoHistories(within: .seconds(30)))
        }
        let file = try undoFile(state, of: path)
        let good = try contents(file)
        #expect(PersistedUndo.decode(good) != nil)
        // One byte flipped in the middle (the checksum fails), cut short, and garbage.
        var flipped = good
        flipped[good.count / 2] ^= 0x40
        for bad in [flipped, Array(good.prefix(good.count - 3)), Array("not an undo file".utf8)] {
            #expect(PersistedUndo.decode(bad) == nil)
            try Data(bad).write(to: URL(fileURLWithPath: file))
            let store = try await undoKeepingStore(state)
            let opened = try await store.open(path: path, encoding: nil)
            #expect(opened.buffer.text == "one\ntwo\n" && !opened.history.canUndo && !opened.hasUnsavedChanges)
            #expect(!FileManager.default.fileExists(atPath: file))
            _ = try await store.close(opened.handle, save: .never)
        }
        // A whole file whose steps do not fit the text (its hash made to match): dropped too.
        var kept = try #require(PersistedUndo.decode(good))
        kept.snapshot.steps[0].edits[0].insertedText = "TWO\n"
        try Data(PersistedUndo.encode(kept)).write(to: URL(fileURLWithPath: file))
        let store = try await undoKeepingStore(state)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(!opened.history.canUndo)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test("the encoding round-trips: labels (none, empty, Unicode), merged steps, redo steps, the clean point")
    func encodingRoundTrips() throws {
        let steps = [
            UndoHistory.Snapshot.Step(edits: [AppliedEdit(utf8Range: 0..<0, removedText: "", insertedText: "é\r\n")], label: nil),
            UndoHistory.Snapshot.Step(edits: [
                AppliedEdit(utf8Range: 0..<2, removedText: "é", insertedText: "e"),
                AppliedEdit(utf8Range: 1..<1, removedText: "", insertedText: "🙂"),
            ], label: ""),
            UndoHistory.Snapshot.Step(edits: [AppliedEdit(utf8Range: 0..<1, removedText: "e", insertedText: "")], label: "Löschen"),
        ]
        let contents = PersistedUndo.Contents(
            path: "/tmp/ä b.txt", size: 12, hash: 0xDEAD_BEEF_0123_4567,
            snapshot: UndoHistory.Snapshot(steps: steps, position: 2, cleanPosition: 2))
        let bytes = PersistedUndo.encode(contents)
        #expect(bytes.starts(with: Array("DSUNDO1\n".utf8)))
        #expect(PersistedUndo.decode(bytes) == contents)
        // Every strict prefix is refused.
        for length in 0..<bytes.count { #expect(PersistedUndo.decode(Array(bytes.prefix(length))) == nil) }
        // The steps fit the text at the position, back and forth.
        #expect(PersistedUndo.fits(contents.snapshot, text: TextBuffer("e🙂\r\n")))
        #expect(!PersistedUndo.fits(contents.snapshot, text: TextBuffer("x🙂\r\n")))
    }
}
