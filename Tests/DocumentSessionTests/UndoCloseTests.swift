import Foundation
import DocumentSession
import FileStore
import Testing
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

@Suite("DocumentStore: undo and redo")
struct UndoTests {
    @Test("undo and redo each move the version up by one; with nothing to undo or redo the version stays")
    func versions() async throws {
        let (store, handle, _) = try await storeWithDocument("abc")
        let nothing = try await store.undo(handle, version: nil, encoding: .utf16)
        #expect(nothing.version == 1)
        #expect(nothing.edits.isEmpty)
        #expect(try await store.redo(handle, version: 1, encoding: .utf16).version == 1)

        _ = try await store.edit(handle, version: 1, edits: [insert("x", at: 0, 3)], encoding: .utf16, label: nil, merge: false)
        let undone = try await store.undo(handle, version: 2, encoding: .utf16)
        #expect(undone.version == 3)
        #expect(undone.edits == [replace(TextRange(0, 3, 0, 4), with: "")])
        #expect(try await store.read(handle, range: nil, encoding: .utf16).text == "abc")
        let redone = try await store.redo(handle, version: nil, encoding: .utf16)
        #expect(redone.version == 4)
        #expect(redone.edits == [insert("x", at: 0, 3)])
        let noRedo = try await store.redo(handle, version: nil, encoding: .utf16)
        #expect(noRedo.version == 4)
        #expect(noRedo.edits.isEmpty)
        #expect(try await store.document(handle).version == 4)
    }

    @Test("undo and redo with a stale version are refused and change nothing")
    func staleVersions() async throws {
        let (store, handle, _) = try await storeWithDocument("abc")
        _ = try await store.edit(handle, version: 1, edits: [insert("x", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        #expect(await thrownError { try await store.undo(handle, version: 1, encoding: .utf16) } == .staleVersion(current: 2, given: 1))
        _ = try await store.undo(handle, version: 2, encoding: .utf16)
        #expect(await thrownError { try await store.redo(handle, version: 2, encoding: .utf16) } == .staleVersion(current: 3, given: 2))
        // Even with nothing to do, a stale version is refused.
        let (other, otherHandle, _) = try await storeWithDocument("abc")
        #expect(await thrownError { try await other.undo(otherHandle, version: 5, encoding: .utf16) } == .staleVersion(current: 1, given: 5))
        let document = try await store.document(handle)
        #expect(document.buffer.text == "abc")
        #expect(document.version == 3)
        #expect(document.history.canRedo)
    }

    @Test("the clean point: undoing back to the opened text makes the document clean again, redoing dirty")
    func cleanPoint() async throws {
        let (store, handle, _) = try await storeWithDocument("abc")
        _ = try await store.edit(handle, version: 1, edits: [insert("1", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        _ = try await store.edit(handle, version: 2, edits: [insert("2", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        #expect(try await store.document(handle).hasUnsavedChanges)
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        #expect(try await store.document(handle).hasUnsavedChanges)
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        var document = try await store.document(handle)
        #expect(!document.hasUnsavedChanges)
        #expect(document.buffer.text == "abc")
        #expect(document.version == 5)
        #expect(!document.history.canUndo && document.history.canRedo)
        _ = try await store.redo(handle, version: nil, encoding: .utf16)
        #expect(try await store.document(handle).hasUnsavedChanges)
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        #expect(!(try await store.document(handle).hasUnsavedChanges))

        // A new edit drops the redo steps; undoing it is clean again.
        _ = try await store.edit(handle, version: 7, edits: [insert("z", at: 0, 3)], encoding: .utf16, label: nil, merge: false)
        document = try await store.document(handle)
        #expect(!document.history.canRedo)
        #expect(document.hasUnsavedChanges)
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        #expect(!(try await store.document(handle).hasUnsavedChanges))
    }

    @Test("merge folds a request into the previous undo step; the label names the step")
    func mergeAndLabels() async throws {
        let (store, handle, _) = try await storeWithDocument("")
        _ = try await store.edit(handle, version: 1, edits: [insert("a", at: 0, 0)], encoding: .utf16, label: "Typing", merge: false)
        _ = try await store.edit(handle, version: 2, edits: [insert("b", at: 0, 1)], encoding: .utf16, label: nil, merge: true)
        _ = try await store.edit(handle, version: 3, edits: [insert("c", at: 0, 2)], encoding: .utf16, label: "Other", merge: true)
        var document = try await store.document(handle)
        #expect(document.history.undoCount == 1)
        #expect(document.history.undoLabel == "Typing")
        let undone = try await store.undo(handle, version: 4, encoding: .utf16)
        #expect(undone.version == 5)
        #expect(undone.edits.count == 3)
        document = try await store.document(handle)
        #expect(document.buffer.text == "")
        #expect(document.history.redoLabel == "Typing")
        #expect(document.history.undoLabel == nil)
    }

    @Test("the edits undo and redo answer, applied to a client's copy, give the server's text", arguments: PositionEncoding.allCases)
    func clientCopyFollows(encoding: PositionEncoding) async throws {
        // Lines: 0 "a😀b" CRLF, 1 "e\u{301}z" CR, 2 "last" LF, 3 "🇫🇷 flag" CR, 4 "q" LF, 5 "end".
        let start = "a😀b\r\ne\u{301}z\rlast\n\u{1F1EB}\u{1F1F7} flag\rq\nend"
        let (store, handle, _) = try await storeWithDocument(start)
        var client: TextBuffer
        var version: Int64 = 1
        let steps: [[TextEdit]] = [
            // A CR before a LF: they become one CRLF, so the undo removes a CR that ends inside a CRLF.
            [TextEdit(range: TextRange(2, 4, 2, 4), text: "\r")],
            // Removing "q" joins a CR and a LF, so the undo inserts between the two.
            [TextEdit(range: TextRange(4, 0, 4, 1), text: "")],
            [TextEdit(range: TextRange(0, 0, 1, 0), text: "")],
            [TextEdit(range: nil, text: "whole 😀\r\nnew\r")],
            [TextEdit(range: TextRange(1, 0, 1, 0), text: "\n"), TextEdit(range: TextRange(0, 6, 9, 9), text: "🙂e\u{301}")],
        ]
        var texts = [bytes(start)]
        for edits in steps {
            version = try await store.edit(handle, version: version, edits: edits, encoding: encoding, label: nil, merge: false)
            texts.append(bytes(try await store.read(handle, range: nil, encoding: encoding).text))
        }
        client = TextBuffer(String(decoding: texts.last!, as: UTF8.self))
        for index in stride(from: steps.count, to: 0, by: -1) {
            let undone = try await store.undo(handle, version: version, encoding: encoding)
            version = undone.version
            try client.apply(edits: undone.edits, encoding: encoding)
            #expect(client.utf8Bytes() == texts[index - 1], "undo to step \(index - 1): \(undone.edits)")
            #expect(bytes(try await store.read(handle, range: nil, encoding: encoding).text) == texts[index - 1])
        }
        #expect(!(try await store.document(handle).hasUnsavedChanges))
        for index in 1...steps.count {
            let redone = try await store.redo(handle, version: version, encoding: encoding)
            version = redone.version
            try client.apply(edits: redone.edits, encoding: encoding)
            #expect(client.utf8Bytes() == texts[index], "redo to step \(index): \(redone.edits)")
        }
        #expect(version == Int64(1 + 3 * steps.count))
    }
}

@Suite("DocumentStore: closing")
struct CloseTests {
    @Test("close ifChanged with unsaved edits saves them, then closes")
    func ifChangedSaves() async throws {
        let (store, handle, directory) = try await storeWithDocument("disk")
        _ = try await store.edit(handle, version: 1, edits: [insert("!", at: 0, 4)], encoding: .utf16, label: nil, merge: false)
        #expect(try await store.close(handle, save: .ifChanged) == true)
        #expect(await store.count == 0)
        #expect(try contents(directory.file("doc.txt")) == bytes("disk!"))
    }

    @Test("close ifChanged whose save fails keeps the document open with its edits and savingError")
    func ifChangedFailureKeepsDocument() async throws {
        let (store, handle, directory) = try await storeWithDocument("disk")
        _ = try await store.edit(handle, version: 1, edits: [insert("!", at: 0, 4)], encoding: .utf16, label: nil, merge: false)
        // The file turns into a directory: the save cannot replace it.
        try FileManager.default.removeItem(atPath: directory.file("doc.txt"))
        try FileManager.default.createDirectory(atPath: directory.file("doc.txt"), withIntermediateDirectories: false)
        let error = await thrownError { try await store.close(handle, save: .ifChanged) }
        #expect(error == .save(.notRegularFile(path: directory.file("doc.txt"), kind: "directory")))
        let document = try await store.document(handle)
        #expect(document.buffer.text == "disk!")
        #expect(document.hasUnsavedChanges)
        #expect(document.state == .savingError)
        #expect(await store.count == 1)
        // Edits are accepted again.
        _ = try await store.edit(handle, version: 2, edits: [insert("?", at: 0, 5)], encoding: .utf16, label: nil, merge: false)
    }

    @Test("close ifChanged of a clean document (never edited, or undone back) closes it unsaved")
    func ifChangedClean() async throws {
        let (store, handle, _) = try await storeWithDocument("disk")
        #expect(try await store.close(handle, save: .ifChanged) == false)
        #expect(await store.count == 0)

        let (other, otherHandle, _) = try await storeWithDocument("disk")
        _ = try await other.edit(otherHandle, version: 1, edits: [insert("!", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        _ = try await other.undo(otherHandle, version: nil, encoding: .utf16)
        #expect(try await other.close(otherHandle, save: .ifChanged) == false)
        #expect(await other.count == 0)
    }

    @Test("close never drops unsaved edits, leaves the file as it was, and the handle is then unknown")
    func never() async throws {
        let (store, handle, directory) = try await storeWithDocument("disk")
        _ = try await store.edit(handle, version: 1, edits: [TextEdit(range: nil, text: "gone")], encoding: .utf16, label: nil, merge: false)
        #expect(try await store.close(handle, save: .never) == false)
        #expect(await store.count == 0)
        #expect(try contents(directory.file("doc.txt")) == bytes("disk"))
        #expect(await thrownError { try await store.read(handle, range: nil, encoding: .utf16) } == .unknownDocument(handle))
        #expect(await thrownError { try await store.close(handle, save: .never) } == .unknownDocument(handle))
        #expect(await thrownError {
            try await store.edit(handle, version: 2, edits: [], encoding: .utf16, label: nil, merge: false)
        } == .unknownDocument(handle))
    }

    @Test("closing the document opened through a symlink frees both paths")
    func closeLinked() async throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("real.txt", "r")
        let alias = directory.file("alias.txt")
        #expect(symlink(path, alias) == 0)
        let store = DocumentStore()
        let document = try await store.open(path: alias, encoding: nil)
        #expect(try await store.open(path: path, encoding: nil).handle == document.handle)
        #expect(try await store.close(document.handle, save: .ifChanged) == false)
        let again = try await store.open(path: path, encoding: nil)
        #expect(again.handle != document.handle)
        #expect(try await store.open(path: alias, encoding: nil).handle == again.handle)
        #expect(await store.count == 1)
    }
}
