import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension DocumentTests {
    /// Every way a document request can be refused, over stdio: bad params name their field; the
    /// project's error codes carry their data; nothing changes after any of them.
    @Suite("Document errors over stdio")
    struct Errors {
        /// A bad-params case: the method, the params, the field the error must name.
        struct BadParams: CustomTestStringConvertible, Sendable {
            let method: String
            let params: JSONValue?
            let field: String
            var testDescription: String { "\(method) \(params?.jsonText ?? "(no params)") -> \(field)" }
        }

        static let position: JSONValue = ["line": 0, "character": 0]
        static let range: JSONValue = ["start": position, "end": position]

        static func edit(_ edits: JSONValue, version: JSONValue = 1, undo: JSONValue? = nil) -> JSONValue {
            var params: JSONObject = ["document": "d1", "version": version, "edits": edits]
            if let undo { params["undo"] = undo }
            return .object(params)
        }

        static func read(range: JSONValue) -> JSONValue { ["document": "d1", "range": range] }

        static func read(start: JSONValue = position, end: JSONValue = position) -> JSONValue {
            read(range: ["start": start, "end": end])
        }

        /// Each case is sent with an open document d1 ("abc\n") whose file is `ok.txt` in the directory
        /// `/tmp/<dir>`; `OK` in a uri stands for that directory.
        static let cases: [BadParams] = [
            // document/open
            BadParams(method: "document/open", params: nil, field: "params.uri"),
            BadParams(method: "document/open", params: [:], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": .null], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": 5], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": ["file:///a"]], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "http://example.com/a.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "/tmp/a.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:relative.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file://relative/path.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file://"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:///tmp/a.txt?x=1"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:///tmp/a.txt#top"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:///tmp/a%00b.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:///tmp/a%zz.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "file:///tmp/a%FF.txt"], field: "params.uri"),
            BadParams(method: "document/open", params: ["uri": "OK/ok.txt", "encoding": "latin-9"], field: "params.encoding"),
            BadParams(method: "document/open", params: ["uri": "OK/ok.txt", "encoding": 8], field: "params.encoding"),
            BadParams(method: "document/open", params: ["uri": "OK/ok.txt", "includeText": "yes"], field: "params.includeText"),
            BadParams(method: "document/open", params: ["uri": "OK/ok.txt", "workDoneToken": 1.5], field: "params.workDoneToken"),
            BadParams(method: "document/open", params: ["uri": "OK/ok.txt", "workDoneToken": [:]], field: "params.workDoneToken"),
            BadParams(method: "document/open", params: ["OK/ok.txt"], field: "params"),
            // document/create (none of these may create a file)
            BadParams(method: "document/create", params: [:], field: "params.uri"),
            BadParams(method: "document/create", params: ["uri": true], field: "params.uri"),
            BadParams(method: "document/create", params: ["uri": "relative/new.txt"], field: "params.uri"),
            BadParams(method: "document/create", params: ["uri": "OK/new.txt", "text": 5], field: "params.text"),
            BadParams(method: "document/create", params: ["uri": "OK/new.txt", "text": ["a"]], field: "params.text"),
            BadParams(method: "document/create", params: ["OK/new.txt", "text"], field: "params"),
            // document/read
            BadParams(method: "document/read", params: [:], field: "params.document"),
            BadParams(method: "document/read", params: ["document": 1], field: "params.document"),
            BadParams(method: "document/read", params: read(range: "all"), field: "params.range"),
            BadParams(method: "document/read", params: read(range: [:]), field: "params.range.start"),
            BadParams(method: "document/read", params: read(range: ["start": position]), field: "params.range.end"),
            BadParams(method: "document/read", params: read(start: ["line": -1, "character": 0]), field: "params.range.start.line"),
            BadParams(method: "document/read", params: read(start: ["line": 0, "character": -3]), field: "params.range.start.character"),
            BadParams(method: "document/read", params: read(start: ["line": 1.5, "character": 0]), field: "params.range.start.line"),
            BadParams(method: "document/read", params: read(start: ["line": "0", "character": 0]), field: "params.range.start.line"),
            BadParams(method: "document/read", params: read(start: ["character": 0]), field: "params.range.start.line"),
            BadParams(method: "document/read", params: read(start: [0, 0]), field: "params.range.start"),
            BadParams(method: "document/read", params: read(end: ["line": 0, "character": 2_147_483_648]), field: "params.range.end.character"),
            BadParams(method: "document/read", params: read(end: ["line": 0, "character": 1e3]), field: "params.range.end.character"),
            // document/edit
            BadParams(method: "document/edit", params: [:], field: "params.document"),
            BadParams(method: "document/edit", params: ["document": "d1"], field: "params.version"),
            BadParams(method: "document/edit", params: edit([], version: -1), field: "params.version"),
            BadParams(method: "document/edit", params: edit([], version: "1"), field: "params.version"),
            BadParams(method: "document/edit", params: edit([], version: 1.0), field: "params.version"),
            BadParams(method: "document/edit", params: edit([], version: .null), field: "params.version"),
            BadParams(method: "document/edit", params: ["document": "d1", "version": 1], field: "params.edits"),
            BadParams(method: "document/edit", params: edit(.null), field: "params.edits"),
            BadParams(method: "document/edit", params: edit([:]), field: "params.edits"),
            BadParams(method: "document/edit", params: edit("insert x"), field: "params.edits"),
            BadParams(method: "document/edit", params: edit([1]), field: "params.edits[0]"),
            BadParams(method: "document/edit", params: edit([["text": "a"], []]), field: "params.edits[1]"),
            BadParams(method: "document/edit", params: edit([["range": range]]), field: "params.edits[0].text"),
            BadParams(method: "document/edit", params: edit([["range": range, "text": 5]]), field: "params.edits[0].text"),
            BadParams(method: "document/edit", params: edit([["text": "a"], ["text": .null]]), field: "params.edits[1].text"),
            BadParams(method: "document/edit", params: edit([["range": [], "text": "a"]]), field: "params.edits[0].range"),
            BadParams(method: "document/edit", params: edit([["range": ["start": position], "text": "a"]]), field: "params.edits[0].range.end"),
            BadParams(
                method: "document/edit", params: edit([["range": ["start": ["line": -1, "character": 0], "end": position], "text": "a"]]),
                field: "params.edits[0].range.start.line"),
            BadParams(
                method: "document/edit", params: edit([["range": ["start": position, "end": ["line": 0, "character": 0.5]], "text": "a"]]),
                field: "params.edits[0].range.end.character"),
            BadParams(
                method: "document/edit", params: edit([["text": "ok"], ["range": ["start": position, "end": ["line": true, "character": 0]], "text": "a"]]),
                field: "params.edits[1].range.end.line"),
            BadParams(method: "document/edit", params: edit([], undo: "merge"), field: "params.undo"),
            BadParams(method: "document/edit", params: edit([], undo: ["merge": "yes"]), field: "params.undo.merge"),
            BadParams(method: "document/edit", params: edit([], undo: ["label": 5]), field: "params.undo.label"),
            // document/undo and document/redo
            BadParams(method: "document/undo", params: [:], field: "params.document"),
            BadParams(method: "document/undo", params: ["document": 5], field: "params.document"),
            BadParams(method: "document/undo", params: ["document": "d1", "version": -1], field: "params.version"),
            BadParams(method: "document/undo", params: ["document": "d1", "version": "1"], field: "params.version"),
            BadParams(method: "document/redo", params: nil, field: "params.document"),
            BadParams(method: "document/redo", params: ["document": "d1", "version": 1.5], field: "params.version"),
            // document/state and document/close
            BadParams(method: "document/state", params: [:], field: "params.document"),
            BadParams(method: "document/state", params: ["document": []], field: "params.document"),
            BadParams(method: "document/close", params: [:], field: "params.document"),
            BadParams(method: "document/close", params: ["document": "d1", "save": "always"], field: "params.save"),
            BadParams(method: "document/close", params: ["document": "d1", "save": true], field: "params.save"),
        ]

        /// `OK` at the start of a uri stands for the test's directory.
        static func substitute(_ value: JSONValue?, directory: String) -> JSONValue? {
            switch value {
            case .string(let string)? where string.hasPrefix("OK/"):
                return .string(fileURI(directory + string.dropFirst(2)))
            case .object(let object)?:
                return .object(JSONObject(object.map { ($0.key, substitute($0.value, directory: directory) ?? .null) }))
            case .array(let array)?:
                return .array(array.map { substitute($0, directory: directory) ?? .null })
            default:
                return value
            }
        }

        @Test("every bad param is -32602 naming the field, and changes nothing", arguments: ["document/open", "document/create", "document/read", "document/edit", "document/undo", "document/state"])
        func badParams(method: String) throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write("ok.txt", "abc\n")
            let session = try Session.documents()
            try session.open(path)
            let methods = method == "document/undo" ? ["document/undo", "document/redo"] : method == "document/state" ? ["document/state", "document/close"] : [method]
            for badParams in Self.cases where methods.contains(badParams.method) {
                let params = Self.substitute(badParams.params, directory: directory.path)
                let error = try session.callFailing(badParams.method, params, code: -32602)
                #expect(error["data"]?["field"] == .string(badParams.field), "\(badParams.testDescription): \(error.jsonText)")
                #expect(error["message"]?.stringValue?.hasPrefix(badParams.field + ": ") == true, "\(badParams.testDescription): \(error.jsonText)")
            }
            // Nothing changed: d1 is as opened, no other document, no file created.
            #expect(try session.read("d1") == ("abc\n", 1))
            let state = try session.state("d1")
            #expect(state["canUndo"] == false)
            #expect(state["hasUnsavedChanges"] == false)
            try session.callFailing("document/state", ["document": "d2"], code: -32011)
            #expect(!FileManager.default.fileExists(atPath: directory.file("new.txt")))
            try session.expectNothingElse()
            try session.shutdownAndExit()
        }

        @Test("an unknown handle is -32011 with data.document, for every method that takes one")
        func unknownHandle() throws {
            let session = try Session.documents()
            let calls: [(String, JSONValue)] = [
                ("document/read", ["document": "d1"]),
                ("document/read", ["document": "d7", "range": Self.range]),
                ("document/edit", ["document": "d1", "version": 1, "edits": []]),
                ("document/edit", ["document": "D1", "version": 1, "edits": [["text": "x"]]]),
                ("document/undo", ["document": "d1"]),
                ("document/redo", ["document": "d1", "version": 1]),
                ("document/state", ["document": ""]),
                ("document/close", ["document": "d1", "save": "never"]),
                ("document/close", ["document": "d1 "]),
            ]
            for (method, params) in calls {
                let error = try session.callFailing(method, params, code: -32011)
                #expect(error["data"]?["document"] == params["document"], "\(method): \(error.jsonText)")
                #expect(error["message"]?.stringValue?.contains("\"\(params["document"]?.stringValue ?? "?")\"") == true, "\(error.jsonText)")
            }
            try session.shutdownAndExit()
        }

        @Test("a missing file is -32010 with the detail: code, errno, syscall, path, message, recoverable, suggestions")
        func missingFile() throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let session = try Session.documents()
            let path = directory.file("absent.txt")
            let error = try session.callFailing("document/open", ["uri": .string(fileURI(path))], code: -32010)
            let data = error["data"]
            #expect(data?["code"] == "ENOENT")
            #expect(data?["errno"] == .integer(Int64(ENOENT)))
            #expect(data?["syscall"] == "open")
            #expect(data?["path"] == .string(path))
            #expect(data?["message"]?.stringValue?.contains(path) == true)
            #expect(data?["recoverable"] == false)
            #expect(data?["suggestions"]?.arrayValue?.isEmpty == false)
            #expect(error["message"]?.stringValue?.contains(path) == true)

            // Other failures of open(2) carry their own errno.
            try directory.write("file.txt", "x")
            let throughFile = directory.file("file.txt/child.txt")
            let notDirectory = try session.callFailing("document/open", ["uri": .string(fileURI(throughFile))], code: -32010)
            #expect(notDirectory["data"]?["code"] == "ENOTDIR")
            #expect(notDirectory["data"]?["errno"] == .integer(Int64(ENOTDIR)))
            #expect(notDirectory["data"]?["path"] == .string(throughFile))
            #expect(symlink(directory.file("loop-b"), directory.file("loop-a")) == 0)
            #expect(symlink(directory.file("loop-a"), directory.file("loop-b")) == 0)
            let loop = try session.callFailing("document/open", ["uri": .string(fileURI(directory.file("loop-a")))], code: -32010)
            #expect(loop["data"]?["code"] == "ELOOP")
            #expect(loop["data"]?["errno"] == .integer(Int64(ELOOP)))
            try session.callFailing("document/state", ["document": "d1"], code: -32011)
            try session.shutdownAndExit()
        }

        @Test("a directory is -32016 naming the path and kind; so is a FIFO, which does not hang the server")
        func notARegularFile() throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let session = try Session.documents()
            let error = try session.callFailing("document/open", ["uri": .string(fileURI(directory.path))], code: -32016)
            #expect(error["data"]?["path"] == .string(directory.path))
            #expect(error["data"]?["kind"] == "directory")
            #expect(error["message"]?.stringValue?.contains("directory") == true)
            let fifo = directory.file("pipe")
            #expect(mkfifo(fifo, 0o600) == 0)
            let fifoError = try session.callFailing("document/open", ["uri": .string(fileURI(fifo))], code: -32016)
            #expect(fifoError["data"]?["kind"] == "special file")
            try session.callFailing("document/open", ["uri": "file:///dev/null"], code: -32016)
            try session.expectNothingElse()
            try session.shutdownAndExit()
        }

        @Test("a file that is not UTF-8 is -32014 naming the byte offset; encoding iso-8859-1 then opens it")
        func notText() throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let bytes: [UInt8] = Array("caf".utf8) + [0xE9] + Array(" au lait\n".utf8)
            let path = try directory.write("latin1.txt", bytes)
            let session = try Session.documents()
            let error = try session.callFailing("document/open", ["uri": .string(fileURI(path))], code: -32014)
            #expect(error["data"]?["offset"] == 3)
            #expect(error["data"]?["path"] == .string(path))
            #expect(error["data"]?["encoding"] == "utf-8")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("byte 3"), "\(message)")
            #expect(message.contains("encoding"), "\(message)")

            let info = try session.open(path, ["encoding": "iso-8859-1"])
            #expect(utf8(info["text"]?.stringValue) == utf8("café au lait\n"))
            #expect(info["encoding"] == "iso-8859-1")
            #expect(info["byteOrderMark"] == false)
            #expect(info["document"] == "d1")
            try session.shutdownAndExit()
        }

        @Test("not-text offsets count bytes of the file (a BOM included), for truncated and malformed sequences and UTF-16", arguments: [
            ([0xEF, 0xBB, 0xBF] + Array("abc".utf8) + [0xC0, 0x80] as [UInt8], 6, "utf-8"),
            (Array("ok ".utf8) + [0xF0, 0x9F, 0x98], 3, "utf-8"),  // truncated at the end of the file
            (Array("ab".utf8) + [0xED, 0xA0, 0x80] + Array("cd".utf8), 2, "utf-8"),  // an encoded surrogate
            ([0xFF, 0xFE, 0x61, 0x00, 0x00, 0xDC, 0x62, 0x00], 4, "utf-16le"),  // a lone low surrogate
            ([0xFE, 0xFF, 0x00, 0x61, 0xD8, 0x3D, 0x00, 0x62], 4, "utf-16be"),  // a high surrogate without its low half
            ([0xFF, 0xFE, 0x61, 0x00, 0x62], 4, "utf-16le"),  // an odd number of bytes
        ])
        func notTextOffsets(bytes: [UInt8], offset: Int64, encoding: String) throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write("bad.txt", bytes)
            let session = try Session.documents()
            let error = try session.callFailing("document/open", ["uri": .string(fileURI(path))], code: -32014)
            #expect(error["data"]?["offset"] == .integer(offset), "\(error.jsonText)")
            #expect(error["data"]?["encoding"] == .string(encoding), "\(error.jsonText)")
            // Every byte is a character in ISO 8859-1.
            let info = try session.open(path, ["encoding": "iso-8859-1"])
            #expect(info["text"]?.stringValue?.unicodeScalars.count == bytes.count)
            try session.shutdownAndExit()
        }

        @Test("BOM and UTF-16 files open with encoding, byteOrderMark and lineEnding reported, the text exact; positions count the text", arguments: [
            ("utf-8", true, "crlf"), ("utf-16le", true, "cr"), ("utf-16be", true, "mixed"), ("utf-16le", false, "lf"), ("utf-16be", false, "none"),
        ])
        func encodedFiles(encoding: String, mark: Bool, lineEnding: String) throws {
            let text: String
            switch lineEnding {
            case "crlf": text = "é😀\r\nline\r\n"
            case "cr": text = "a𝄞\rb\u{301}\r"
            case "mixed": text = "a\nb\r\nc😀\r"
            case "lf": text = "zero\u{FEFF}width no-break space\n😀\n"
            default: text = "no break, 😀 astral"
            }
            var bytes: [UInt8]
            switch encoding {
            case "utf-16le": bytes = (mark ? [0xFF, 0xFE] : []) + text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
            case "utf-16be": bytes = (mark ? [0xFE, 0xFF] : []) + text.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
            default: bytes = (mark ? [0xEF, 0xBB, 0xBF] : []) + Array(text.utf8)
            }
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write("encoded.txt", bytes)
            let session = try Session.documents(encoding: "utf-16")
            // Without a mark the encoding must be named; "auto" (the default) detects a mark.
            let info = try session.open(path, mark ? ["encoding": "auto"] : ["encoding": .string(encoding)])
            #expect(info["encoding"] == .string(encoding))
            #expect(info["byteOrderMark"] == .bool(mark))
            #expect(info["lineEnding"] == .string(lineEnding))
            #expect(utf8(info["text"]?.stringValue) == utf8(text))
            #expect(utf8(try session.read("d1").0) == utf8(text))
            // Positions count the decoded text in the negotiated encoding, whatever the file's.
            var client = ClientText(text, encoding: "utf-16")
            let edit = Edit(client.position(line: 0, index: 2), client.position(line: 0, index: 2), "|")
            try client.apply(edit)
            #expect(try session.edit("d1", version: 1, [edit]) == 2)
            #expect(utf8(try session.read("d1").0) == utf8(client.text))
            try session.shutdownAndExit()
        }

        @Test("naming an encoding the file's mark contradicts: the mark is not skipped, and the bytes must decode")
        func contradictingMark() throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write("le.txt", [0xFF, 0xFE, 0x61, 0x00])
            let session = try Session.documents()
            let error = try session.callFailing("document/open", ["uri": .string(fileURI(path)), "encoding": "utf-8"], code: -32014)
            #expect(error["data"]?["offset"] == 0)
            #expect(error["data"]?["encoding"] == "utf-8")
            try session.shutdownAndExit()
        }
    }
}
