import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The document methods over stdio, as an editor uses them: open, read, edit, undo, redo, state,
/// create and close, in each position encoding, on text with astral characters, combining marks
/// and all three kinds of line break.
@Suite("Documents over stdio")
struct DocumentTests {
    /// Lines: 0 "first 😀 line" (CRLF), 1 "e\u{301}cole" (CR), 2 "third ä" (LF), 3 "𝄞 last".
    static let text = "first 😀 line\r\ne\u{301}cole\rthird ä\n𝄞 last"

    @Test("open, read, edit, state, undo, redo and close, in each position encoding", arguments: positionEncodings)
    func everyMethod(encoding: String) throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("notes é #1.md", Self.text)
        let session = try Session.documents(encoding: encoding)

        let info = try session.open(path)
        #expect(info["document"] == "d1")
        #expect(info["uri"] == .string(fileURI(path)))
        #expect(info["uri"]?.stringValue?.contains("notes%20%C3%A9%20%231.md") == true)
        #expect(info["version"] == 1)
        #expect(utf8(info["text"]?.stringValue) == utf8(Self.text))
        #expect(info["state"] == [])
        #expect(info["fileType"] == "markdown")
        #expect(info["displayName"] == "notes é #1.md")
        #expect(info["encoding"] == "utf-8")
        #expect(info["byteOrderMark"] == false)
        #expect(info["lineEnding"] == "mixed")
        #expect(info["hasUnsavedChanges"] == false)
        let date = info["modificationDate"]?.stringValue ?? ""
        #expect(date.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/) != nil, "modificationDate \(date)")

        var client = ClientText(Self.text, encoding: encoding)
        // Reading: the whole text, then ranges counted in the negotiated encoding.
        let (whole, version) = try session.read("d1")
        #expect(utf8(whole) == utf8(Self.text))
        #expect(version == 1)
        let emoji = (client.position(line: 0, index: 6), client.position(line: 0, index: 7))
        #expect(utf8(try session.read("d1", emoji).0) == utf8("😀"))
        let accent = (client.position(line: 1, index: 1), client.position(line: 1, index: 2))
        #expect(utf8(try session.read("d1", accent).0) == utf8("\u{301}"))
        let clef = (client.position(line: 3, index: 0), client.position(line: 3, index: 1))
        #expect(utf8(try session.read("d1", clef).0) == utf8("𝄞"))
        #expect(utf8(try session.read("d1", (Position(0, 0), Position(2, 0))).0) == utf8("first 😀 line\r\ne\u{301}cole\r"))

        // Editing: several edits in one request, each against the result of the one before.
        var edits: [Edit] = []
        for (line, index, text) in [(0, 7, "🎉"), (1, 2, "\u{1F1EB}\u{1F1F7}"), (3, 1, "é"), (2, 7, "\r\n")] {
            let at = client.position(line: line, index: index)
            let edit = Edit(at, at, text)
            try client.apply(edit)
            edits.append(edit)
        }
        let replaced = Edit(client.position(line: 1, index: 0), client.position(line: 1, index: 2), "É")
        try client.apply(replaced)
        edits.append(replaced)
        let edited = client.text
        #expect(try session.edit("d1", version: 1, edits, undo: ["label": "Typing"]) == 2)
        let (afterEdit, versionAfterEdit) = try session.read("d1")
        #expect(utf8(afterEdit) == utf8(edited))
        #expect(versionAfterEdit == 2)

        var state = try session.state("d1")
        #expect(state["document"] == "d1")
        #expect(state["uri"] == .string(fileURI(path)))
        #expect(state["version"] == 2)
        #expect(state["state"] == [])
        #expect(state["hasUnsavedChanges"] == true)
        #expect(state["canUndo"] == true)
        #expect(state["canRedo"] == false)
        #expect(state["undoLabel"] == "Typing")
        #expect(state["redoLabel"] == nil)
        #expect(state["etag"]?.stringValue?.isEmpty == false)

        // Undo: the answered edits turn the client's copy back into the opened text.
        let (undoVersion, undoEdits) = try session.step("document/undo", "d1", version: 2)
        #expect(undoVersion == 3)
        try client.apply(undoEdits)
        #expect(utf8(client.text) == utf8(Self.text), "undo edits \(undoEdits)")
        #expect(utf8(try session.read("d1").0) == utf8(Self.text))
        state = try session.state("d1")
        #expect(state["hasUnsavedChanges"] == false)
        #expect(state["canUndo"] == false)
        #expect(state["canRedo"] == true)
        #expect(state["redoLabel"] == "Typing")
        #expect(state["undoLabel"] == nil)

        let (redoVersion, redoEdits) = try session.step("document/redo", "d1")
        #expect(redoVersion == 4)
        try client.apply(redoEdits)
        #expect(utf8(client.text) == utf8(edited), "redo edits \(redoEdits)")
        #expect(utf8(try session.read("d1").0) == utf8(edited))

        #expect(try session.call("document/close", ["document": "d1", "save": "never"]) == ["saved": false])
        try session.callFailing("document/read", ["document": "d1"], code: -32011)
        // The file on disk was never touched.
        #expect(try directory.contents("notes é #1.md") == Array(Self.text.utf8))
        try session.shutdownAndExit()
    }

    @Test("LSP clamping: a character past a line's end is its end (before CR LF), a line past the last is the end", arguments: positionEncodings)
    func clamping(encoding: String) throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("clamp.txt", Self.text)
        let session = try Session.documents(encoding: encoding)
        try session.open(path)
        let positions = ClientText(Self.text, encoding: encoding)
        let line = positions.position(line: 0, index: 8)  // "line" on line 0
        #expect(utf8(try session.read("d1", (line, Position(0, 9999))).0) == utf8("line"))
        #expect(utf8(try session.read("d1", (Position(1, 0), Position(1, Int(Int32.max)))).0) == utf8("e\u{301}cole"))
        let last = positions.position(line: 3, index: 2)  // "last" on line 3
        #expect(utf8(try session.read("d1", (last, Position(99, 0))).0) == utf8("last"))
        #expect(try session.read("d1", (Position(50, 3), Position(Int(Int32.max), Int(Int32.max)))).0 == "")
        // A range whose ends clamp to the same place is empty, when its start comes first.
        #expect(try session.read("d1", (Position(0, 5000), Position(0, 9999))).0 == "")
        #expect(try session.read("d1", (Position(3, 1000), Position(1000, 0))).0 == "")
        var client = ClientText(Self.text, encoding: encoding)
        let edits = [Edit(Position(0, 500), Position(0, 600), "<"), Edit(Position(1, 99), Position(1, 99), ">"), Edit(Position(40, 0), Position(41, 7), "$")]
        try client.apply(edits)
        #expect(try session.edit("d1", version: 1, edits) == 2)
        let expected = "first 😀 line<\r\ne\u{301}cole>\rthird ä\n𝄞 last$"
        #expect(utf8(client.text) == utf8(expected))
        #expect(utf8(try session.read("d1").0) == utf8(expected))
        // Clamped edits undo exactly too.
        let (_, undoEdits) = try session.step("document/undo", "d1")
        try client.apply(undoEdits)
        #expect(utf8(client.text) == utf8(Self.text))
        try session.shutdownAndExit()
    }

    @Test("a position inside a surrogate pair (utf-16) or a UTF-8 sequence (utf-8) is -32602 naming the field; nothing changes", arguments: ["utf-8", "utf-16"])
    func insideACharacter(encoding: String) throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("inside.txt", Self.text)
        let session = try Session.documents(encoding: encoding)
        try session.open(path)
        // Inside 😀 on line 0 (it starts at character 6), and inside 𝄞 on line 3.
        let insideEmoji = Position(0, 7)
        let insideClef = Position(3, encoding == "utf-8" ? 2 : 1)
        let ok = Edit(Position(1, 0), Position(1, 0), "ok")  // leaves lines 0, 2 and 3 where they were

        var error = try session.callInvalid(
            "document/edit", ["document": "d1", "version": 1, "edits": [ok.json, Edit(insideEmoji, Position(0, 12), "x").json]],
            field: "params.edits[1].range.start")
        let reason = encoding == "utf-8" ? "inside a UTF-8 sequence" : "inside a surrogate pair"
        #expect(error["message"]?.stringValue?.contains(reason) == true, "\(error.jsonText)")
        error = try session.callInvalid(
            "document/edit", ["document": "d1", "version": 1, "edits": [Edit(Position(3, 0), insideClef, "x").json]],
            field: "params.edits[0].range.end")
        #expect(error["message"]?.stringValue?.contains(reason) == true, "\(error.jsonText)")
        if encoding == "utf-8" {
            // Between the two bytes of "ä" (line 2, "third " is 6 bytes).
            try session.callInvalid(
                "document/edit", ["document": "d1", "version": 1, "edits": [Edit(Position(2, 7), Position(2, 7), "x").json]],
                field: "params.edits[0].range.start")
        }

        // document/read names its range (which end is said in the message).
        for range in [(insideEmoji, Position(0, 12)), (Position(3, 0), insideClef)] {
            let readError = try session.callFailing(
                "document/read", ["document": "d1", "range": ["start": range.0.json, "end": range.1.json]], code: -32602)
            let field = readError["data"]?["field"]?.stringValue ?? ""
            #expect(["params.range", "params.range.start", "params.range.end"].contains(field), "\(readError.jsonText)")
            #expect(readError["message"]?.stringValue?.contains(reason) == true, "\(readError.jsonText)")
        }

        // Nothing changed.
        let (text, version) = try session.read("d1")
        #expect(utf8(text) == utf8(Self.text))
        #expect(version == 1)
        #expect(try session.state("d1")["canUndo"] == false)
        try session.shutdownAndExit()
    }

    @Test("CR-only and CRLF files: lines break at each, the style is reported, edits and undo keep the breaks", arguments: [
        ("cr.txt", "one\rtwo 😀\r\rfour", "cr"), ("crlf.txt", "one\r\ntwo 😀\r\n\r\nfour\r\n", "crlf"),
    ])
    func lineBreaks(name: String, text: String, style: String) throws {
        for encoding in positionEncodings {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write(name, text)
            let session = try Session.documents(encoding: encoding)
            let info = try session.open(path)
            #expect(info["lineEnding"] == .string(style))
            var client = ClientText(text, encoding: encoding)
            #expect(client.lineCount == 4 || client.lineCount == 5)
            // One edit at the start of every line, one at the end of line 1 (clamped), one joining lines 2 and 3.
            var edits: [Edit] = []
            for line in 0..<client.lineCount {
                edits.append(Edit(Position(line, 0), Position(line, 0), "[\(line)]"))
            }
            edits.append(Edit(Position(1, 1000), Position(1, 1000), "<end>"))
            edits.append(Edit(Position(2, 1000), Position(3, 0), " joined "))
            try client.apply(edits)
            #expect(try session.edit("d1", version: 1, edits) == 2)
            let expected = client.text
            #expect(utf8(try session.read("d1").0) == utf8(expected), "\(encoding)")
            // A line break's second half is never split: reading line 1 gives its content only.
            #expect(utf8(try session.read("d1", (Position(1, 0), Position(1, 1000))).0) == utf8(try client.text(Position(1, 0), Position(1, 1000))))
            let (_, undoEdits) = try session.step("document/undo", "d1")
            try client.apply(undoEdits)
            #expect(utf8(client.text) == utf8(text), "\(encoding): \(undoEdits)")
            let (_, redoEdits) = try session.step("document/redo", "d1")
            try client.apply(redoEdits)
            #expect(utf8(client.text) == utf8(expected), "\(encoding): \(redoEdits)")
            try session.shutdownAndExit()
        }
    }

    @Test("versions: +1 per accepted edit, even one that changes nothing; +1 per undo or redo that changes the text")
    func versions() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("v.txt", "abc\n")
        let session = try Session.documents()
        try session.open(path)
        #expect(try session.edit("d1", version: 1, [Edit(Position(0, 3), Position(0, 3), "d")]) == 2)
        // Requests that change nothing still move the version on, one each (a pipelining client
        // predicts them), and make no undo step.
        #expect(try session.edit("d1", version: 2, []) == 3)
        #expect(try session.edit("d1", version: 3, [Edit(Position(0, 0), Position(0, 2), "ab")]) == 4)
        #expect(try session.edit("d1", version: 4, [Edit(Position(0, 1), Position(0, 1), "")]) == 5)
        #expect(try session.edit("d1", version: 5, [Edit(whole: "abcd\n")]) == 6)
        #expect(try session.state("d1")["version"] == 6)
        // Three edits in one request: one step, one version.
        #expect(try session.edit("d1", version: 6, [
            Edit(Position(0, 0), Position(0, 0), "1"), Edit(Position(0, 0), Position(0, 0), "2"), Edit(Position(1, 0), Position(1, 0), "3"),
        ]) == 7)
        #expect(try session.read("d1") == ("21abcd\n3", 7))
        var (version, edits) = try session.step("document/undo", "d1")
        #expect(version == 8)
        #expect(edits.count == 3)
        // The first edit's step comes next: the requests that changed nothing left none.
        (version, edits) = try session.step("document/undo", "d1", version: 8)
        #expect(version == 9)
        #expect(try session.read("d1") == ("abc\n", 9))
        (version, edits) = try session.step("document/undo", "d1")
        #expect(version == 9, "nothing left to undo")
        #expect(edits.isEmpty)
        (version, _) = try session.step("document/redo", "d1", version: 9)
        #expect(version == 10)
        #expect(try session.read("d1") == ("abcd\n", 10))
        try session.shutdownAndExit()
    }

    @Test("a stale version is -32801 with data.version the current one, for edit, undo and redo; nothing changes")
    func staleVersions() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("stale.txt", "abc")
        let session = try Session.documents()
        try session.open(path)
        try session.edit("d1", version: 1, [Edit(Position(0, 0), Position(0, 0), "x")])
        for given: Int64 in [1, 3, 0, Int64.max] {
            let error = try session.callFailing(
                "document/edit", ["document": "d1", "version": .integer(given), "edits": [Edit(Position(0, 0), Position(0, 0), "y").json]],
                code: -32801)
            #expect(error["data"]?["version"] == 2, "\(error.jsonText)")
            #expect(error["message"]?.stringValue?.contains("version 2") == true)
        }
        for method in ["document/undo", "document/redo"] {
            let error = try session.callFailing(method, ["document": "d1", "version": 1], code: -32801)
            #expect(error["data"]?["version"] == 2, "\(error.jsonText)")
        }
        #expect(try session.read("d1") == ("xabc", 2))
        let state = try session.state("d1")
        #expect(state["canUndo"] == true)
        #expect(state["canRedo"] == false)
        try session.shutdownAndExit()
    }

    @Test("a request is all or nothing: one invalid edit and none applies", arguments: positionEncodings)
    func allOrNothing(encoding: String) throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("atomic.txt", Self.text)
        let session = try Session.documents(encoding: encoding)
        try session.open(path)
        let good = Edit(Position(0, 0), Position(1, 0), "")
        let bad = Edit(Position(2, 5), Position(1, 0), "x")  // end before start
        try session.callInvalid(
            "document/edit", ["document": "d1", "version": 1, "edits": [good.json, good.json, bad.json]], field: "params.edits[2].range")
        // A malformed edit anywhere in the list refuses the request before any is applied.
        try session.callInvalid(
            "document/edit", ["document": "d1", "version": 1, "edits": [good.json, ["range": good.json["range"]!]]], field: "params.edits[1].text")
        #expect(utf8(try session.read("d1").0) == utf8(Self.text))
        #expect(try session.read("d1").1 == 1)
        let state = try session.state("d1")
        #expect(state["canUndo"] == false)
        #expect(state["hasUnsavedChanges"] == false)
        try session.shutdownAndExit()
    }

    @Test("undo and redo edits, applied by the client to its own copy, reproduce the server's text (random sessions)", arguments: positionEncodings)
    func undoRedoReplay(encoding: String) throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let start = "a😀b\r\ne\u{301}z\rlast\n\u{1F1EB}\u{1F1F7} flag\r\n𝄞\n"
        let path = try directory.write("random.txt", start)
        let session = try Session.documents(encoding: encoding)
        try session.open(path)
        var random = SeededGenerator(seed: 0xD0C5 &+ UInt64(encoding.utf8.last!))
        let pieces = ["x", "😀", "e\u{301}", "\r", "\n", "\r\n", "ab", "", "𝄞\r", "\u{301}", "é"]
        var client = ClientText(start, encoding: encoding)
        var version: Int64 = 1
        for request in 0..<60 {
            var edits: [Edit] = []
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let edit = Self.randomEdit(in: client, pieces: pieces, &random)
                try client.apply(edit)
                edits.append(edit)
            }
            let merge = random.next() % 5 == 0
            version = try session.edit("d1", version: version, edits, undo: merge ? ["merge": true] : nil)
            guard utf8(try session.read("d1").0) == utf8(client.text) else {
                Issue.record("after request \(request) \(edits): the server's text differs from the client's")
                return
            }
        }
        let final = client.text
        // Undo everything: each answer turns the client's copy into the previous step's text.
        var undone = 0
        while true {
            let (newVersion, edits) = try session.step("document/undo", "d1", version: version)
            if edits.isEmpty {
                #expect(newVersion == version)
                break
            }
            #expect(newVersion == version + 1)
            version = newVersion
            try client.apply(edits)
            undone += 1
            let server = try session.read("d1").0
            #expect(utf8(client.text) == utf8(server), "undo \(undone): \(edits)")
            guard utf8(client.text) == utf8(server) else { break }
        }
        #expect(utf8(client.text) == utf8(start))
        #expect(try session.state("d1")["hasUnsavedChanges"] == false)
        // And redo everything.
        while true {
            let (newVersion, edits) = try session.step("document/redo", "d1", version: version)
            if edits.isEmpty { break }
            version = newVersion
            try client.apply(edits)
            let server = try session.read("d1").0
            #expect(utf8(client.text) == utf8(server), "redo: \(edits)")
            guard utf8(client.text) == utf8(server) else { break }
        }
        #expect(utf8(client.text) == utf8(final))
        try session.shutdownAndExit()
    }

    /// A random valid edit of `client`: positions on character boundaries, sometimes clamped.
    static func randomEdit(in client: ClientText, pieces: [String], _ random: inout SeededGenerator) -> Edit {
        func position() -> Position {
            let line = Int(random.next() % UInt64(client.lineCount))
            let index = Int(random.next() % UInt64(client.contentCount(line) + 1))
            var position = client.position(line: line, index: index)
            switch random.next() % 12 {
            case 0 where index == client.contentCount(line): position.character += 1 + Int(random.next() % 50)  // past the line's end
            case 1: position = Position(client.lineCount + Int(random.next() % 3), Int(random.next() % 5))  // past the last line
            default: break
            }
            return position
        }
        if random.next() % 40 == 0 { return Edit(whole: pieces[Int(random.next() % UInt64(pieces.count))] + "whole\n") }
        var a = position()
        var b = random.next() % 3 == 0 ? a : position()
        // Ordered as positions (the server refuses a range whose end comes before its start, even
        // when clamping would make both ends the same place).
        if (b.line, b.character) < (a.line, a.character) { swap(&a, &b) }
        return Edit(a, b, pieces[Int(random.next() % UInt64(pieces.count))])
    }

    @Test("text goes both ways byte for byte: NUL, U+FEFF inside the text, unnormalised combining marks, U+10FFFF")
    func exactText() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let onDisk = "nul\u{0}here \u{FEFF}bom-like e\u{301} \u{E9} \u{10FFFF}\n"
        let path = try directory.write("exact.txt", onDisk)
        let session = try Session.documents(encoding: "utf-32")
        let info = try session.open(path)
        #expect(utf8(info["text"]?.stringValue) == utf8(onDisk))
        let inserted = "\u{0}a\u{301}\u{FEFF}o\u{308}\u{10FFFF}"
        try session.edit("d1", version: 1, [Edit(Position(0, 3), Position(0, 4), inserted)])
        let expected = "nul" + inserted + "here \u{FEFF}bom-like e\u{301} \u{E9} \u{10FFFF}\n"
        #expect(utf8(try session.read("d1").0) == utf8(expected))
        // In utf-32 every scalar counts one, combining marks included.
        #expect(utf8(try session.read("d1", (Position(0, 4), Position(0, 6))).0) == utf8("a\u{301}"))
        let (_, edits) = try session.step("document/undo", "d1")
        var client = ClientText(expected, encoding: "utf-32")
        try client.apply(edits)
        #expect(utf8(client.text) == utf8(onDisk))
        try session.shutdownAndExit()
    }

    @Test("create: the file is made with the text, opened at version 1; never over an existing file (-32013)")
    func create() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents(encoding: "utf-32")
        let path = directory.file("new file.swift")
        let text = "let x = \"😀\"\r\n"
        let info = try session.call("document/create", ["uri": .string(fileURI(path)), "text": .string(text)])
        #expect(info["document"] == "d1")
        #expect(info["uri"] == .string(fileURI(path)))
        #expect(info["version"] == 1)
        #expect(utf8(info["text"]?.stringValue) == utf8(text))
        #expect(info["encoding"] == "utf-8")
        #expect(info["byteOrderMark"] == false)
        #expect(info["lineEnding"] == "crlf")
        #expect(info["fileType"] == "swift")
        #expect(info["hasUnsavedChanges"] == false)
        #expect(try directory.contents("new file.swift") == Array(text.utf8))
        // Opening it answers the same document.
        #expect(try session.open(path)["document"] == "d1")

        // Without text: an empty file.
        let empty = try session.call("document/create", ["uri": .string(fileURI(directory.file("empty.txt")))])
        #expect(empty["text"] == "")
        #expect(empty["lineEnding"] == "none")
        #expect(try directory.contents("empty.txt") == [])

        // Over an existing file: refused, the file untouched.
        try directory.write("existing.txt", "keep me")
        let error = try session.callFailing(
            "document/create", ["uri": .string(fileURI(directory.file("existing.txt"))), "text": "overwrite"], code: -32013)
        #expect(error["data"]?["uri"] == .string(fileURI(directory.file("existing.txt"))))
        #expect(try directory.contents("existing.txt") == Array("keep me".utf8))
        // Over a file it created itself a moment ago, too.
        try session.callFailing("document/create", ["uri": .string(fileURI(path)), "text": "again"], code: -32013)
        #expect(try directory.contents("new file.swift") == Array(text.utf8))

        // In a directory that does not exist: the file-system error.
        let missing = directory.file("no/such/dir.txt")
        let fsError = try session.callFailing("document/create", ["uri": .string(fileURI(missing))], code: -32010)
        #expect(fsError["data"]?["code"] == "ENOENT")
        #expect(fsError["data"]?["path"] == .string(missing))
        try session.shutdownAndExit()
    }

    @Test("close: never drops unsaved edits; ifChanged (the default) saves them first; then the handle is unknown")
    func close() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("close.txt", "on disk\n")
        let session = try Session.documents()
        try session.open(path)
        try session.edit("d1", version: 1, [Edit(whole: "edited\n")])
        #expect(try session.call("document/close", ["document": "d1", "save": "never"]) == ["saved": false])
        for method in ["document/read", "document/state", "document/close", "document/undo"] {
            try session.callFailing(method, ["document": "d1"], code: -32011)
        }
        #expect(try directory.contents("close.txt") == Array("on disk\n".utf8))
        // Open again: a new handle, the text from disk; closed with the default, the edit is saved.
        let info = try session.open(path)
        #expect(info["document"] == "d2")
        #expect(info["text"] == "on disk\n")
        #expect(info["version"] == 1)
        try session.edit("d2", version: 1, [Edit(whole: "saved by close\n")])
        #expect(try session.call("document/close", ["document": "d2"]) == ["saved": true])
        #expect(try directory.contents("close.txt") == Array("saved by close\n".utf8))
        // A clean document closes with ifChanged without saving.
        try session.open(path)
        #expect(try session.call("document/close", ["document": "d3", "save": "ifChanged"]) == ["saved": false])
        try session.shutdownAndExit()
    }

    @Test("the same file twice, through a symlink, a hard link or another spelling of its URI: one document")
    func sameFile() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("real.txt", "shared")
        #expect(symlink(path, directory.file("link.txt")) == 0)
        #expect(link(path, directory.file("hard.txt")) == 0)
        let session = try Session.documents()
        #expect(try session.open(path)["document"] == "d1")
        try session.edit("d1", version: 1, [Edit(Position(0, 0), Position(0, 0), ">")])
        for uri in [
            fileURI(path), fileURI(directory.file("link.txt")), fileURI(directory.file("hard.txt")),
            "file://localhost" + fileURI(path).dropFirst("file://".count), fileURI(path).replacingOccurrences(of: "/real.txt", with: "/%72%65al.txt"),
        ] {
            let info = try session.call("document/open", ["uri": .string(uri)])
            #expect(info["document"] == "d1", "\(uri)")
            #expect(info["version"] == 2, "\(uri)")
            #expect(info["text"] == ">shared", "\(uri)")
        }
        // includeText: false leaves the text out.
        let info = try session.call("document/open", ["uri": .string(fileURI(path)), "includeText": false])
        #expect(info["text"] == nil)
        #expect(info["document"] == "d1")
        try session.shutdownAndExit()
    }

    /// An edit is answered at once unless something is traced; traced, it goes the ordinary way
    /// with its params rebuilt from the predecoded ones: the trace must show them as sent.
    @Test("a traced edit: its params in the trace as sent (rebuilt from the fast reading), the same answer; untraced again, edits go on")
    func tracedEdit() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("traced.txt", "abc\n")
        let session = try Session.documents(encoding: "utf-16")
        try session.open(path)
        try session.notify("$/setTrace", ["value": "verbose"])
        let params: JSONValue = [
            "document": "d1", "version": 1, "undo": ["label": "Typing", "merge": false],
            "edits": [["range": ["start": ["line": 0, "character": 1], "end": ["line": 0, "character": 2]], "text": "X"], ["text": "whole\n"]],
        ]
        let response = try session.request("document/edit", params)
        #expect(response["result"] == ["version": 2], "\(response.jsonText)")
        let traces = session.server.takeQueued { $0["method"] == "$/logTrace" }
        let received = try #require(traces.first {
            $0["params"]?["message"]?.stringValue?.hasPrefix("Received request 'document/edit") == true
        }, "\(traces.map(\.jsonText))")
        let traced = try JSONParser().parse(try #require(received["params"]?["verbose"]?.stringValue))
        #expect(traced == params)
        #expect(try session.read("d1").0 == "whole\n")
        #expect(try session.state("d1")["undoLabel"] == "Typing")

        _ = session.server.takeQueued { $0["method"] == "$/logTrace" }
        try session.notify("$/setTrace", ["value": "off"])
        #expect(try session.edit("d1", version: 2, [Edit(Position(0, 0), Position(0, 5), "again")]) == 3)
        #expect(try session.read("d1").0 == "again\n")
        // Only the $/setTrace itself was traced (it arrived while tracing was on).
        let after = session.server.takeQueued { $0["method"] == "$/logTrace" }
        #expect(after.allSatisfy { $0["params"]?["message"] == "Received notification '$/setTrace'." }, "\(after.map(\.jsonText))")
        try session.shutdownAndExit()
    }
}

