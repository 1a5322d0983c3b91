import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Testing

@testable import DocumentSession
import FileStore
import TextBuffer

// Documents whose text an editor owns (the LSP mode, DocumentStore+Mirroring.swift), at the store's
// level: real files in a temporary directory, watched; the editor's changes sent as it sends them.

/// Rewrites the file in place in one write (no empty file in between for the watcher to see).
private func rewrite(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY)
    guard fd >= 0 else { throw TestFailure("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, 0) }
    guard written == bytes.count, ftruncate(fd, off_t(bytes.count)) == 0 else { throw TestFailure("rewrite \(path)") }
}

/// A mirrored document of a new file holding `text`.
private func mirrored(_ text: String) async throws -> (DocumentStore, String, String, TemporaryDirectory, EventLog) {
    let (store, handle, directory, log) = try await storeWithEvents(Array(text.utf8), watch: true)
    await store.setMirrored(handle)
    return (store, handle, directory.file("doc.txt"), directory, log)
}

private func proposed(_ event: DocumentEvent) -> [TextEdit]? {
    if case .reloadProposed(let edits) = event.kind { return edits }
    return nil
}

/// LSP's TextEdit[] applied to `text`: every range against the text before them all.
private func applyAll(_ edits: [TextEdit], to text: String) throws -> String {
    var buffer = TextBuffer(text)
    for edit in edits.reversed() { _ = try buffer.apply(edits: [edit], encoding: .utf16) }
    return buffer.text
}

@Suite("DocumentStore: documents an editor owns (the LSP mode)")
struct MirroringTests {
    @Test("a clean mirrored document's file change is proposed, not taken; the editor's change that reaches it makes it synced and clean")
    func reloadProposed() async throws {
        let (store, handle, path, directory, log) = try await mirrored("one\ntwo\nthree\n")
        defer { withExtendedLifetime(directory) {} }
        try rewrite(path, "one\nTWO\nthree\nfour\n")
        let event = try await log.wait { proposed($0) != nil }
        let edits = try #require(proposed(event))
        #expect(try await store.document(handle).buffer.text == "one\ntwo\nthree\n")
        #expect(await store.hasPendingReload(handle))
        // The edits are LSP's: all against the text before them.
        #expect(try applyAll(edits, to: "one\ntwo\nthree\n") == "one\nTWO\nthree\nfour\n")
        // The editor applies them and sends its change.
        _ = try await store.applyEditorChanges(handle, [TextEdit(range: nil, text: "one\nTWO\nthree\nfour\n")], encoding: .utf16, watching: nil)
        let document = try await store.document(handle)
        #expect(!document.hasUnsavedChanges)
        #expect(!(await store.hasPendingReload(handle)))
        #expect(document.syncedText.text == "one\nTWO\nthree\nfour\n")
        #expect(document.identity.inode == FileIdentity.current(path: path)?.inode)
        #expect(document.identity.size == FileIdentity.current(path: path)?.size)
    }

    @Test("a batch that passes through the proposed reload is split there: synced at that change, the rest unsaved")
    func batchSplit() async throws {
        let (store, handle, path, directory, log) = try await mirrored("a\n")
        defer { withExtendedLifetime(directory) {} }
        try rewrite(path, "a\nb\n")
        _ = try await log.wait { proposed($0) != nil }
        let end = TextPosition(line: 2, character: 0)
        let watched = TextBuffer("a\nb\nc\n")
        let reached = try await store.applyEditorChanges(
            handle, [TextEdit(range: nil, text: "a\nb\n"), TextEdit(range: TextRange(start: end, end: end), text: "c\n")],
            encoding: .utf16, watching: watched)
        #expect(reached)
        let document = try await store.document(handle)
        #expect(document.buffer.text == "a\nb\nc\n")
        #expect(document.syncedText.text == "a\nb\n")
        #expect(document.hasUnsavedChanges)
        #expect(!(await store.hasPendingReload(handle)))
    }

    @Test("a batch with a bad change changes nothing, also while a reload waits")
    func allOrNothing() async throws {
        let (store, handle, path, directory, log) = try await mirrored("x\n")
        defer { withExtendedLifetime(directory) {} }
        try rewrite(path, "x\ny\n")
        _ = try await log.wait { proposed($0) != nil }
        let before = try await store.document(handle)
        let outside = TextPosition(line: 0, character: 0)
        await #expect(throws: DocumentError.self) {
            _ = try await store.applyEditorChanges(
                handle,
                [TextEdit(range: nil, text: "x\ny\n"), TextEdit(range: TextRange(start: TextPosition(line: 0, character: 1), end: outside), text: "z")],
                encoding: .utf16, watching: nil)
        }
        let after = try await store.document(handle)
        #expect(after.buffer.text == "x\n" && after.version == before.version)
        #expect(await store.hasPendingReload(handle))
    }

    @Test("didSave: clean when the file holds the text; when it does not yet, clean once the editor's late change brings it there")
    func editorSaved() async throws {
        let (store, handle, path, directory, _) = try await mirrored("first\n")
        defer { withExtendedLifetime(directory) {} }
        _ = try await store.applyEditorChanges(handle, [TextEdit(range: nil, text: "first\nsecond\n")], encoding: .utf16, watching: nil)
        try rewrite(path, "first\nsecond\n")
        try await store.editorSaved(handle)
        #expect(!(try await store.document(handle).hasUnsavedChanges))

        // The editor typed and wrote, and its change comes after didSave.
        try rewrite(path, "first\nsecond\nthird\n")
        try await store.editorSaved(handle)
        #expect(try await store.document(handle).hasUnsavedChanges)
        #expect(await store.hasPendingReload(handle))
        _ = try await store.applyEditorChanges(handle, [TextEdit(range: nil, text: "first\nsecond\nthird\n")], encoding: .utf16, watching: nil)
        #expect(!(try await store.document(handle).hasUnsavedChanges))

        // A session that lost the editor's text takes the file's, which is the editor's.
        try rewrite(path, "the editor's own text\n")
        try await store.editorSaved(handle, takingItsText: true)
        let document = try await store.document(handle)
        #expect(document.buffer.text == "the editor's own text\n" && !document.hasUnsavedChanges)
    }
}

@Suite("DocumentStore: a mirrored document is clean when the editor's text is the file's again")
struct MirroringCleanTests {
    @Test("typing and deleting it again, or the editor's own undo, leaves no unsaved changes and no journal")
    func backToTheFile() async throws {
        let (store, handle, path, directory, _) = try await mirrored("abc\n")
        defer { withExtendedLifetime(directory) {} }
        let at = TextPosition(line: 0, character: 1)
        _ = try await store.applyEditorChanges(handle, [TextEdit(range: TextRange(start: at, end: at), text: "X")], encoding: .utf16, watching: nil)
        #expect(try await store.document(handle).hasUnsavedChanges)
        let after = TextPosition(line: 0, character: 2)
        _ = try await store.applyEditorChanges(handle, [TextEdit(range: TextRange(start: at, end: after), text: "")], encoding: .utf16, watching: nil)
        #expect(!(try await store.document(handle).hasUnsavedChanges))
        // Another program's change is then a reload, not a conflict.
        try rewrite(path, "abcd\n")
        #expect(try await waitUntil(interval: .milliseconds(10)) { await store.hasPendingReload(handle) })
    }
}
