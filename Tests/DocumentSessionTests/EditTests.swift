import DocumentSession
import FileStore
import Testing
import TextBuffer

/// A store with one document opened from a temporary file holding `text`.
///
/// The store does not watch the file: many callers drop the directory (`_`), which removes it at
/// once, and these tests are about editing, not about a file deleted under the document (the
/// presenter's tests cover that).
func storeWithDocument(_ text: String, name: String = "doc.txt") async throws -> (DocumentStore, String, TemporaryDirectory) {
    let directory = try TemporaryDirectory()
    let path = try directory.write(name, text)
    let store = DocumentStore(watchFiles: false)
    let document = try await store.open(path: path, encoding: nil)
    return (store, document.handle, directory)
}

func insert(_ text: String, at line: Int, _ character: Int) -> TextEdit {
    TextEdit(range: TextRange(line, character, line, character), text: text)
}

func replace(_ range: TextRange, with text: String) -> TextEdit { TextEdit(range: range, text: text) }

/// "a😀b\r\ne\u{301}z\rlast" in lines: 0 "a😀b" (CRLF), 1 "e\u{301}z" (CR), 2 "last".
let sample = "a😀b\r\ne\u{301}z\rlast"

@Suite("DocumentStore: reading")
struct ReadTests {
    @Test("read answers the whole text and the version")
    func whole() async throws {
        let (store, handle, _) = try await storeWithDocument(sample)
        let (text, version) = try await store.read(handle, range: nil, encoding: .utf16)
        #expect(bytes(text) == bytes(sample))
        #expect(version == 1)
    }

    @Test("read of a range counts characters in the encoding asked", arguments: [
        (PositionEncoding.utf8, TextRange(0, 1, 0, 5), "😀"), (.utf16, TextRange(0, 1, 0, 3), "😀"), (.utf32, TextRange(0, 1, 0, 2), "😀"),
        (.utf8, TextRange(1, 0, 1, 3), "e\u{301}"), (.utf16, TextRange(1, 0, 1, 2), "e\u{301}"), (.utf32, TextRange(1, 1, 1, 2), "\u{301}"),
        (.utf16, TextRange(0, 3, 1, 0), "b\r\n"), (.utf32, TextRange(1, 3, 2, 0), "\r"),
        // LSP clamping: a character past the line's end is its end; a line past the last is the end.
        (.utf16, TextRange(0, 3, 0, 99), "b"), (.utf8, TextRange(2, 2, 9, 0), "st"), (.utf32, TextRange(7, 7, 9, 9), ""),
    ])
    func range(encoding: PositionEncoding, range: TextRange, expected: String) async throws {
        let (store, handle, _) = try await storeWithDocument(sample)
        let (text, _) = try await store.read(handle, range: range, encoding: encoding)
        #expect(bytes(text) == bytes(expected))
    }

    @Test("positions inside a character, negative ones and reversed ranges are refused", arguments: [
        (PositionEncoding.utf16, TextRange(0, 2, 0, 3), TextBufferError.characterInsideSurrogatePair(line: 0, character: 2)),
        (.utf8, TextRange(0, 0, 0, 3), .characterInsideUTF8Sequence(line: 0, character: 3)),
        (.utf8, TextRange(1, 2, 1, 3), .characterInsideUTF8Sequence(line: 1, character: 2)),
        (.utf16, TextRange(0, -1, 0, 0), .negativePosition(line: 0, character: -1)),
        (.utf16, TextRange(0, 2, 0, 1), .rangeEndBeforeStart(start: TextPosition(line: 0, character: 2), end: TextPosition(line: 0, character: 1))),
    ])
    func invalidRanges(encoding: PositionEncoding, range: TextRange, expected: TextBufferError) async throws {
        let (store, handle, _) = try await storeWithDocument(sample)
        let error = await thrownError { try await store.read(handle, range: range, encoding: encoding) }
        #expect(error == .invalidText(expected))
    }
}

@Suite("DocumentStore: editing")
struct EditTests {
    @Test("the version goes up by one per request that changes the text, however many edits it holds")
    func versions() async throws {
        let (store, handle, _) = try await storeWithDocument("abc\n")
        var version = try await store.edit(handle, version: 1, edits: [insert("x", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        #expect(version == 2)
        version = try await store.edit(
            handle, version: 2, edits: [insert("1", at: 0, 0), insert("2", at: 0, 0), replace(TextRange(0, 2, 0, 3), with: "")],
            encoding: .utf16, label: nil, merge: false)
        #expect(version == 3)
        #expect(try await store.read(handle, range: nil, encoding: .utf16).text == "21abc\n")
        #expect(try await store.document(handle).version == 3)
    }

    @Test("requests that change nothing raise the version by one and record no undo step", arguments: [
        [TextEdit](),
        [insert("", at: 0, 1)],
        [replace(TextRange(0, 0, 0, 2), with: "ab")],
        [replace(TextRange(0, 1, 0, 99), with: "bc"), insert("", at: 5, 0)],
    ])
    func noOps(edits: [TextEdit]) async throws {
        let (store, handle, _) = try await storeWithDocument("abc\n")
        let version = try await store.edit(handle, version: 1, edits: edits, encoding: .utf16, label: nil, merge: false)
        let document = try await store.document(handle)
        #expect(document.buffer.text == "abc\n")
        #expect(version == 2)
        #expect(document.version == 2)
        #expect(!document.history.canUndo)
        #expect(!document.hasUnsavedChanges)
        // The next request is made against the version answered, as a pipelining client predicts.
        #expect(try await store.edit(handle, version: 2, edits: edits, encoding: .utf16, label: nil, merge: false) == 3)
        #expect(try await store.edit(handle, version: 3, edits: [insert("x", at: 0, 0)], encoding: .utf16, label: nil, merge: false) == 4)
        let after = try await store.document(handle)
        #expect(after.buffer.text == "xabc\n")
        #expect(after.history.undoCount == 1)
        #expect(after.hasUnsavedChanges)
    }

    @Test("a stale version (older or newer) is refused with the current version, and nothing changes", arguments: [Int64(1), 3, 0, 99])
    func staleVersion(given: Int64) async throws {
        let (store, handle, _) = try await storeWithDocument("abc\n")
        _ = try await store.edit(handle, version: 1, edits: [insert("x", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        let error = await thrownError {
            try await store.edit(handle, version: given, edits: [insert("y", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
        }
        #expect(error == .staleVersion(current: 2, given: given))
        let document = try await store.document(handle)
        #expect(document.buffer.text == "xabc\n")
        #expect(document.version == 2)
        #expect(document.history.undoCount == 1)
    }

    @Test("a request is all or nothing: one bad edit and none applies, with the edit, its field and the reason named")
    func allOrNothing() async throws {
        let (store, handle, _) = try await storeWithDocument("a😀b\n")
        let error = await thrownError {
            try await store.edit(
                handle, version: 1,
                edits: [insert("ok", at: 0, 0), replace(TextRange(0, 4, 0, 5), with: "!")],
                encoding: .utf16, label: nil, merge: false)
        }
        #expect(error == .invalidText(.invalidEdit(index: 1, field: .start, reason: .characterInsideSurrogatePair(line: 0, character: 4))))
        let document = try await store.document(handle)
        #expect(document.buffer.text == "a😀b\n")
        #expect(document.version == 1)
        #expect(!document.history.canUndo)
        #expect(!document.hasUnsavedChanges)

        let reversed = await thrownError {
            try await store.edit(
                handle, version: 1, edits: [insert("x", at: 0, 0), replace(TextRange(0, 5, 0, 1), with: "")], encoding: .utf32,
                label: nil, merge: false)
        }
        #expect(reversed == .invalidText(.invalidEdit(
            index: 1, field: .range, reason: .rangeEndBeforeStart(start: TextPosition(line: 0, character: 5), end: TextPosition(line: 0, character: 1)))))
        let inside = await thrownError {
            try await store.edit(
                handle, version: 1, edits: [insert("x", at: 0, 0), replace(TextRange(0, 0, 0, 3), with: "")], encoding: .utf8,
                label: nil, merge: false)
        }
        #expect(inside == .invalidText(.invalidEdit(index: 1, field: .end, reason: .characterInsideUTF8Sequence(line: 0, character: 3))))
        #expect(try await store.document(handle).buffer.text == "a😀b\n")
        #expect(try await store.document(handle).version == 1)
    }

    @Test("edits apply in order, each to the result of the one before; an edit without a range replaces everything")
    func sequentialAndWhole() async throws {
        let (store, handle, _) = try await storeWithDocument("one\ntwo\n")
        _ = try await store.edit(
            handle, version: 1, edits: [replace(TextRange(0, 0, 1, 0), with: ""), insert("zero\n", at: 0, 0), insert("!", at: 1, 3)],
            encoding: .utf16, label: nil, merge: false)
        #expect(try await store.read(handle, range: nil, encoding: .utf16).text == "zero\ntwo!\n")
        let version = try await store.edit(
            handle, version: 2, edits: [TextEdit(range: nil, text: "all new"), insert(" text", at: 0, 7)], encoding: .utf16,
            label: nil, merge: false)
        #expect(version == 3)
        #expect(try await store.read(handle, range: nil, encoding: .utf16).text == "all new text")
    }

    @Test("edits in every encoding land on the same characters, astral and combining included", arguments: PositionEncoding.allCases)
    func encodings(encoding: PositionEncoding) async throws {
        let (store, handle, _) = try await storeWithDocument(sample)
        // After "😀" on line 0 and after "e\u{301}" on line 1.
        let afterEmoji = [PositionEncoding.utf8: 5, .utf16: 3, .utf32: 2][encoding]!
        let afterAccent = [PositionEncoding.utf8: 3, .utf16: 2, .utf32: 2][encoding]!
        _ = try await store.edit(
            handle, version: 1, edits: [insert("[", at: 0, afterEmoji), insert("]", at: 1, afterAccent)], encoding: encoding,
            label: nil, merge: false)
        #expect(bytes(try await store.read(handle, range: nil, encoding: encoding).text) == bytes("a😀[b\r\ne\u{301}]z\rlast"))
    }

    @Test("every method refuses an unknown handle and changes nothing")
    func unknownHandle() async throws {
        let (store, _, _) = try await storeWithDocument("abc")
        let expected = DocumentError.unknownDocument("d9")
        #expect(await thrownError { try await store.document("d9") } == expected)
        #expect(await thrownError { try await store.read("d9", range: nil, encoding: .utf16) } == expected)
        #expect(await thrownError {
            try await store.edit("d9", version: 1, edits: [], encoding: .utf16, label: nil, merge: false)
        } == expected)
        #expect(await thrownError { try await store.undo("d9", version: nil, encoding: .utf16) } == expected)
        #expect(await thrownError { try await store.redo("d9", version: nil, encoding: .utf16) } == expected)
        #expect(await thrownError { try await store.close("d9", save: .never) } == expected)
        #expect(await thrownError { try await store.close("", save: .ifChanged) } == .unknownDocument(""))
        #expect(await store.count == 1)
    }
}
