import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The coordinated file operations over stdio (protocol §11.4–§11.7): `document/delete`,
/// `document/move`, `document/rename`, `workspace/import`, `workspace/export`, each with its
/// refusals, and with `--root` the refusals of paths outside the roots.
@Suite("File operations over stdio")
struct FileOperationTests {
    // MARK: - Helpers

    func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    func text(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The notifications with `method` already queued (written before the last response).
    func queued(_ session: Session, _ method: String) -> [JSONValue] {
        session.server.takeQueued { $0["method"] == .string(method) }.map { $0["params"] ?? .null }
    }

    /// Lets the watcher's debounce window pass, then proves nothing else was sent (no didMove, no
    /// deletedOnDisk of the presenter for our own operation).
    func expectQuiet(_ session: Session, sourceLocation: SourceLocation = #_sourceLocation) throws {
        usleep(400_000)
        try session.expectNothingElse(sourceLocation: sourceLocation)
        #expect(try session.takeStateChanges().isEmpty, sourceLocation: sourceLocation)
    }

    func deviceOf(_ path: String) -> UInt64 {
        var status = stat()
        return stat(path, &status) == 0 ? UInt64(status.st_dev) : 0
    }

    // MARK: - document/delete

    @Test("delete a file that is not open: unlinked, closed null; missing is -32010 ENOENT; a directory is -32016")
    func deleteClosedFile() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("a.txt", "alpha\n")
        try FileManager.default.createDirectory(atPath: directory.file("sub"), withIntermediateDirectories: false)
        let session = try Session.documents()
        let result = try session.call("document/delete", ["uri": .string(fileURI(path))])
        #expect(result == ["deleted": true, "closed": .null])
        #expect(!exists(path))
        let missing = try session.callFailing("document/delete", ["uri": .string(fileURI(path))], code: -32010)
        #expect(missing["data"]?["code"] == "ENOENT")
        let notFile = try session.callFailing("document/delete", ["uri": .string(fileURI(directory.file("sub")))], code: -32016)
        #expect(notFile["data"]?["kind"] == "directory")
        #expect(exists(directory.file("sub")))
        try session.callInvalid("document/delete", [:], field: "params.uri")
        try session.callInvalid("document/delete", ["uri": .string(fileURI(path)), "document": "d1"], field: "params.document")
        try session.callFailing("document/delete", ["document": "d9"], code: -32011)
        try expectQuiet(session)
    }

    @Test("delete an open clean document: closed (stateChanged closed before the response), file gone, no deletedOnDisk")
    func deleteOpenClean() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("a.txt", "alpha\n")
        let session = try Session.documents()
        try session.open(path)
        let result = try session.call("document/delete", ["uri": .string(fileURI(path))])
        #expect(result == ["deleted": true, "closed": "d1"])
        let changes = try session.takeStateChanges(atLeast: 1)
        #expect(changes.count == 1)
        #expect(changes.first?["params"]?["reason"] == "closed")
        #expect(changes.first?["params"]?["state"] == ["closed"])
        #expect(!exists(path))
        try session.callFailing("document/read", ["document": "d1"], code: -32011)
        try expectQuiet(session)
    }

    @Test("delete an open document with unsaved changes: -32023 and nothing changes; with discard it is closed and deleted")
    func deleteDirty() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("a.txt", "alpha\n")
        let session = try Session.documents()
        try session.open(path)
        try session.edit("d1", version: 1, [Edit(whole: "changed\n")])
        _ = try session.takeStateChanges(atLeast: 1)
        for params: JSONValue in [["document": "d1"], ["uri": .string(fileURI(path))], ["document": "d1", "discard": false]] {
            let error = try session.callFailing("document/delete", params, code: -32023)
            #expect(error["data"] == ["document": "d1", "uri": .string(fileURI(path))])
        }
        #expect(text(path) == "alpha\n")
        #expect(try session.read("d1").0 == "changed\n")
        #expect(try session.state("d1")["hasUnsavedChanges"] == true)
        let result = try session.call("document/delete", ["document": "d1", "discard": true])
        #expect(result == ["deleted": true, "closed": "d1"])
        let changes = try session.takeStateChanges(atLeast: 1)
        #expect(changes.map { $0["params"]?["reason"] } == ["closed"])
        #expect(!exists(path))
        try expectQuiet(session)
    }

    @Test("delete with discard while a save runs: the save finishes first, then the document closes and the file goes")
    func deleteDuringSave() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("big.txt", String(repeating: "x", count: 4 << 20))
        let session = try Session.documents()
        try session.open(path, ["includeText": false])
        try session.edit("d1", version: 1, [Edit(Position(0, 0), Position(0, 0), "y")])
        try session.sendRequest(id: "save", "document/save", ["document": "d1"])
        try session.sendRequest(id: "delete", "document/delete", ["document": "d1", "discard": true])
        let saved = try session.server.waitForResponse(id: "save", timeout: e2eTimeout)
        #expect(saved["result"]?["version"] == 2)
        let deleted = try session.server.waitForResponse(id: "delete", timeout: e2eTimeout)
        #expect(deleted["result"] == ["deleted": true, "closed": "d1"])
        #expect(!exists(path))
        let reasons = try session.takeStateChanges(atLeast: 0).compactMap { $0["params"]?["reason"]?.stringValue }
        #expect(reasons.last == "closed")
        try expectQuiet(session)
    }

    // MARK: - document/move and document/rename

    @Test("move an open document within its directory, then across directories: didMove before the response, the session follows, a save writes the new place, the presenter stays quiet")
    func moveFollows() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("a.txt", "alpha\n")
        try FileManager.default.createDirectory(atPath: directory.file("sub"), withIntermediateDirectories: false)
        let session = try Session.documents()
        try session.open(path)
        try session.edit("d1", version: 1, [Edit(Position(0, 0), Position(0, 0), "# ")])
        _ = try session.takeStateChanges(atLeast: 1)

        let renamed = directory.file("a.md")
        let result = try session.call("document/move", ["uri": .string(fileURI(path)), "to": .string(fileURI(renamed))])
        #expect(result == ["uri": .string(fileURI(renamed)), "displayName": "a.md", "fileType": "markdown", "document": "d1"])
        #expect(queued(session, "document/didMove") == [[
            "document": "d1", "oldUri": .string(fileURI(path)), "uri": .string(fileURI(renamed)),
            "displayName": "a.md", "fileType": "markdown",
        ]])
        #expect(!exists(path) && text(renamed) == "alpha\n")
        try expectQuiet(session)
        // The unsaved edit stayed unsaved, in the session.
        #expect(try session.state("d1")["hasUnsavedChanges"] == true)
        #expect(try session.state("d1")["uri"] == .string(fileURI(renamed)))

        let moved = directory.file("sub/b.md")
        try session.call("document/move", ["document": "d1", "to": .string(fileURI(moved))])
        #expect(queued(session, "document/didMove").count == 1)
        try expectQuiet(session)
        let saved = try session.call("document/save", ["document": "d1"])
        #expect(saved["uri"] == .string(fileURI(moved)))
        #expect(text(moved) == "# alpha\n")
        #expect(!exists(renamed))
        _ = try session.takeStateChanges(atLeast: 1)
        // Opening the new path answers the same handle.
        #expect(try session.open(moved)["document"] == "d1")
        try expectQuiet(session)
    }

    @Test("move across file systems (/tmp to /dev/shm): copied, flushed, unlinked; the session follows and saves there; no deletedOnDisk")
    func moveAcrossFileSystems() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let shm = try TemporaryDirectory(prefix: "docsession-e2e", in: "/dev/shm")  // another file system than the temporary directory's
        try #require(deviceOf(directory.path) != deviceOf(shm.path), "the test needs two file systems")
        let path = try directory.write("a.txt", "alpha\n")
        let session = try Session.documents()
        try session.open(path)
        let target = shm.path + "/a.txt"
        let result = try session.call("document/move", ["document": "d1", "to": .string(fileURI(target))])
        #expect(result["document"] == "d1")
        #expect(queued(session, "document/didMove").first?["uri"] == .string(fileURI(target)))
        #expect(!exists(path) && text(target) == "alpha\n")
        try expectQuiet(session)
        #expect(try session.state("d1")["hasUnsavedChanges"] == false)
        try session.edit("d1", version: 1, [Edit(whole: "beta\n")])
        try session.call("document/save", ["document": "d1"])
        #expect(text(target) == "beta\n")
        #expect(!exists(path))
        // A file that is not open moves across too.
        let other = try directory.write("b.txt", "bee\n")
        let closed = try session.call("document/move", ["uri": .string(fileURI(other)), "to": .string(fileURI(shm.path + "/b.txt"))])
        #expect(closed["document"] == .null)
        #expect(!exists(other) && text(shm.path + "/b.txt") == "bee\n")
    }

    @Test("move refusals: an existing destination is -32013 unless replace; another open document's file is -32013 even with replace; a missing directory is -32010")
    func moveRefusals() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let a = try directory.write("a.txt", "alpha\n")
        let b = try directory.write("b.txt", "bee\n")
        let c = try directory.write("c.txt", "sea\n")
        let session = try Session.documents()
        try session.open(a)
        try session.open(c)
        let exists = try session.callFailing("document/move", ["document": "d1", "to": .string(fileURI(b))], code: -32013)
        #expect(exists["data"] == ["uri": .string(fileURI(b))])
        #expect(text(a) == "alpha\n" && text(b) == "bee\n")
        for replace in [false, true] {
            let open = try session.callFailing("document/move", ["document": "d1", "to": .string(fileURI(c)), "replace": .bool(replace)], code: -32013)
            #expect(open["data"] == ["uri": .string(fileURI(c)), "document": "d2"])
        }
        let missing = try session.callFailing("document/move", ["document": "d1", "to": .string(fileURI(directory.file("no/where.txt")))], code: -32010)
        #expect(missing["data"]?["code"] == "ENOENT")
        try session.callInvalid("document/move", ["document": "d1"], field: "params.to")
        try expectQuiet(session)
        // With replace the existing file is overwritten, and the session follows.
        let replaced = try session.call("document/move", ["document": "d1", "to": .string(fileURI(b)), "replace": true])
        #expect(replaced["uri"] == .string(fileURI(b)))
        #expect(text(b) == "alpha\n" && !self.exists(a))
        #expect(queued(session, "document/didMove").count == 1)
        try expectQuiet(session)
    }

    @Test("rename: in the same directory; bad names are -32602 params.name; an existing name is -32013")
    func rename() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let a = try directory.write("a.txt", "alpha\n")
        try directory.write("taken.txt", "t\n")
        let session = try Session.documents()
        try session.open(a)
        for bad in ["", ".", "..", "x/y.txt", "../a.txt", "nul\u{0}.txt"] {
            try session.callInvalid("document/rename", ["document": "d1", "name": .string(bad)], field: "params.name")
        }
        try session.callInvalid("document/rename", ["document": "d1"], field: "params.name")
        try session.callFailing("document/rename", ["document": "d1", "name": "taken.txt"], code: -32013)
        let result = try session.call("document/rename", ["document": "d1", "name": "notes.md"])
        #expect(result == ["uri": .string(fileURI(directory.file("notes.md"))), "displayName": "notes.md", "fileType": "markdown", "document": "d1"])
        #expect(queued(session, "document/didMove").count == 1)
        #expect(text(directory.file("notes.md")) == "alpha\n" && !exists(a))
        // A file that is not open.
        let closed = try session.call("document/rename", ["uri": .string(fileURI(directory.file("taken.txt"))), "name": "free.txt"])
        #expect(closed["document"] == .null && text(directory.file("free.txt")) == "t\n")
        try expectQuiet(session)
    }

    // MARK: - workspace/import

    @Test("import: a copy under a free name (report.txt taken → report 2.txt, then report 3.txt), the source untouched; open answers the document")
    func importCopies() throws {
        let source = try TemporaryDirectory(prefix: "docsession-e2e")
        let target = try TemporaryDirectory(prefix: "docsession-e2e")
        let from = try source.write("report.txt", "quarterly\n")
        try target.write("report.txt", "older\n")
        let session = try Session.documents()
        let first = try session.call("workspace/import", ["from": .string(fileURI(from)), "directory": .string(fileURI(target.path))])
        #expect(first == ["uri": .string(fileURI(target.file("report 2.txt"))), "name": "report 2.txt"])
        #expect(text(target.file("report 2.txt")) == "quarterly\n" && text(target.file("report.txt")) == "older\n")
        let second = try session.call("workspace/import", [
            "from": .string(fileURI(from)), "directory": .string(fileURI(target.path)), "open": true,
        ])
        #expect(second["name"] == "report 3.txt")
        #expect(second["document"]?["document"] == "d1")
        #expect(second["document"]?["text"] == "quarterly\n")
        #expect(second["document"]?["uri"] == .string(fileURI(target.file("report 3.txt"))))
        let named = try session.call("workspace/import", [
            "from": .string(fileURI(from)), "directory": .string(fileURI(target.path)), "name": "Q3.txt",
        ])
        #expect(named["name"] == "Q3.txt")
        #expect(text(from) == "quarterly\n")
        try session.callInvalid("workspace/import", ["from": .string(fileURI(from)), "directory": .string(fileURI(target.path)), "name": "a/b"], field: "params.name")
        try session.callFailing("workspace/import", ["from": .string(fileURI(source.path)), "directory": .string(fileURI(target.path))], code: -32016)
        try session.callFailing("workspace/import", ["from": .string(fileURI(source.file("none"))), "directory": .string(fileURI(target.path))], code: -32010)
        try session.callInvalid("workspace/import", ["from": .string(fileURI(from))], field: "params.directory")
        try expectQuiet(session)
    }

    // MARK: - workspace/export

    @Test("export an unsaved document: the file gets the current text (encoding, BOM, CRLF as a save writes), the document keeps its unsaved changes and its file")
    func exportUnsaved() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("utf16.txt", [0xFF, 0xFE] + Array("one\r\ntwo\r\n".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }))
        let session = try Session.documents()
        try session.open(path)
        try session.edit("d1", version: 1, [Edit(Position(1, 0), Position(1, 3), "deux")])
        _ = try session.takeStateChanges(atLeast: 1)
        let to = directory.file("copy.txt")
        let result = try session.call("workspace/export", ["document": "d1", "to": .string(fileURI(to))])
        let expected: [UInt8] = [0xFF, 0xFE] + Array("one\r\ndeux\r\n".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        #expect(result == ["uri": .string(fileURI(to)), "size": .integer(Int64(expected.count))])
        #expect(try directory.contents("copy.txt") == expected)
        let state = try session.state("d1")
        #expect(state["hasUnsavedChanges"] == true && state["uri"] == .string(fileURI(path)))
        #expect(try directory.contents("utf16.txt").count == 2 + 2 * 10)
        // Exists: refused unless replace.
        let exists = try session.callFailing("workspace/export", ["document": "d1", "to": .string(fileURI(to))], code: -32013)
        #expect(exists["data"] == ["uri": .string(fileURI(to))])
        try session.edit("d1", version: 2, [Edit(Position(0, 0), Position(0, 3), "un")])
        try session.call("workspace/export", ["document": "d1", "to": .string(fileURI(to)), "replace": true])
        #expect(try directory.contents("copy.txt") == [0xFF, 0xFE] + Array("un\r\ndeux\r\n".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }))
        // Not onto the file of an open document, its own included.
        let own = try session.callFailing("workspace/export", ["document": "d1", "to": .string(fileURI(path)), "replace": true], code: -32013)
        #expect(own["data"]?["document"] == "d1")
        try session.callFailing("workspace/export", ["document": "d7", "to": .string(fileURI(to))], code: -32011)
        _ = try session.takeStateChanges()
        try expectQuiet(session)
    }

    @Test("export writes the text as of its request: edits sent right after it are not in the file, and stay unsaved")
    func exportTextAsOfRequest() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("a.txt", String(repeating: "line\n", count: 200_000))
        let session = try Session.documents()
        try session.open(path, ["includeText": false])
        let to = directory.file("copy.txt")
        try session.sendRequest(id: "export", "workspace/export", ["document": "d1", "to": .string(fileURI(to))])
        for version in 1...5 {
            try session.sendRequest(id: .string("edit\(version)"), "document/edit", [
                "document": "d1", "version": .integer(Int64(version)), "edits": [Edit(Position(0, 0), Position(0, 0), "x").json],
            ])
        }
        let exported = try session.server.waitForResponse(id: "export", timeout: e2eTimeout)
        #expect(exported["result"]?["size"] == .integer(1_000_000))
        for version in 1...5 { _ = try session.server.waitForResponse(id: .string("edit\(version)"), timeout: e2eTimeout) }
        #expect(try directory.contents("copy.txt") == Array(String(repeating: "line\n", count: 200_000).utf8))
        #expect(try session.read("d1").1 == 6)
        #expect(try session.state("d1")["hasUnsavedChanges"] == true)
    }

    @Test("export a file: a durable copy; an existing destination is -32013 unless replace; the source must be a regular file")
    func exportFile() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let from = try directory.write("a.txt", "alpha\n")
        let to = try directory.write("b.txt", "bee\n")
        let session = try Session.documents()
        try session.callFailing("workspace/export", ["uri": .string(fileURI(from)), "to": .string(fileURI(to))], code: -32013)
        #expect(text(to) == "bee\n")
        let result = try session.call("workspace/export", ["uri": .string(fileURI(from)), "to": .string(fileURI(to)), "replace": true])
        #expect(result == ["uri": .string(fileURI(to)), "size": 6])
        #expect(text(to) == "alpha\n" && text(from) == "alpha\n")
        let fresh = directory.file("c.txt")
        try session.call("workspace/export", ["uri": .string(fileURI(from)), "to": .string(fileURI(fresh))])
        #expect(text(fresh) == "alpha\n")
        try session.callFailing("workspace/export", ["uri": .string(fileURI(directory.path)), "to": .string(fileURI(directory.file("d.txt")))], code: -32016)
        try session.callInvalid("workspace/export", ["to": .string(fileURI(fresh))], field: "params.uri")
        try session.callInvalid("workspace/export", ["uri": .string(fileURI(from)), "document": "d1", "to": .string(fileURI(fresh))], field: "params.document")
        try expectQuiet(session)
    }

    // MARK: - Sandbox roots

    /// A root with a.txt, sub/, a symlink `escape` to a directory outside and `out.txt` to a file
    /// outside; answers the root, the outside directory and a session started with `--root`.
    func sandbox() throws -> (root: TemporaryDirectory, outside: TemporaryDirectory, session: Session) {
        let root = try TemporaryDirectory(prefix: "docsession-e2e")
        let outside = try TemporaryDirectory(prefix: "docsession-e2e")
        try root.write("a.txt", "alpha\n")
        try FileManager.default.createDirectory(atPath: root.file("sub"), withIntermediateDirectories: false)
        try outside.write("o.txt", "outside\n")
        try FileManager.default.createSymbolicLink(atPath: root.file("escape"), withDestinationPath: outside.path)
        try FileManager.default.createSymbolicLink(atPath: root.file("out.txt"), withDestinationPath: outside.file("o.txt"))
        let session = try Session(["--root", root.path])
        _ = try session.initialize(["capabilities": [:]])
        return (root, outside, session)
    }

    /// A request that must be refused with -32022 naming `field`.
    func expectOutside(_ session: Session, _ method: String, _ params: JSONValue, field: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let error = try session.callFailing(method, params, code: -32022, sourceLocation: sourceLocation)
        #expect(error["data"]?["field"] == .string(field), "\(error.jsonText)", sourceLocation: sourceLocation)
    }

    @Test("--root: delete and move refuse paths outside the roots (outside, '..', a symlink pointing out) and work inside")
    func rootsDeleteMove() throws {
        let (root, outside, session) = try sandbox()
        let inside = fileURI(root.file("a.txt"))
        let outsideFile = fileURI(outside.file("o.txt"))
        let dotdot = fileURI(root.path + "/sub/../../" + (outside.path as NSString).lastPathComponent + "/o.txt")
        let viaLink = fileURI(root.file("escape/o.txt"))
        for uri in [outsideFile, dotdot, viaLink, fileURI(root.file("out.txt"))] {
            try expectOutside(session, "document/delete", ["uri": .string(uri)], field: "params.uri")
            try expectOutside(session, "document/move", ["uri": .string(uri), "to": .string(fileURI(root.file("moved.txt")))], field: "params.uri")
        }
        for uri in [fileURI(outside.file("new.txt")), fileURI(root.path + "/sub/../../" + (outside.path as NSString).lastPathComponent + "/new.txt"), fileURI(root.file("escape/new.txt"))] {
            try expectOutside(session, "document/move", ["uri": .string(inside), "to": .string(uri)], field: "params.to")
        }
        #expect(text(outside.file("o.txt")) == "outside\n" && text(root.file("a.txt")) == "alpha\n")
        // Inside, they work (acting through the pinned directory), and report the real paths.
        try session.open(root.file("a.txt"))
        let moved = try session.call("document/move", ["document": "d1", "to": .string(fileURI(root.file("sub/b.txt")))])
        #expect(moved["uri"] == .string(fileURI(root.file("sub/b.txt"))))
        #expect(queued(session, "document/didMove").count == 1)
        let renamed = try session.call("document/rename", ["document": "d1", "name": "c.txt"])
        #expect(renamed["uri"] == .string(fileURI(root.file("sub/c.txt"))))
        #expect(queued(session, "document/didMove").count == 1)
        #expect(text(root.file("sub/c.txt")) == "alpha\n")
        let deleted = try session.call("document/delete", ["document": "d1"])
        #expect(deleted == ["deleted": true, "closed": "d1"])
        #expect(!exists(root.file("sub/c.txt")))
        _ = try session.takeStateChanges(atLeast: 1)
        try expectQuiet(session)
    }

    @Test("--root: rename cannot name its way out; import and export refuse sources and destinations outside the roots")
    func rootsRenameImportExport() throws {
        let (root, outside, session) = try sandbox()
        let outsideName = (outside.path as NSString).lastPathComponent
        // A rename's name is a plain name: no '/' to climb out with; and a name that is a symlink
        // pointing out is refused as outside.
        try session.callInvalid("document/rename", ["uri": .string(fileURI(root.file("a.txt"))), "name": "../x.txt"], field: "params.name")
        try expectOutside(session, "document/rename", ["uri": .string(fileURI(root.file("a.txt"))), "name": "out.txt"], field: "params.name")
        try expectOutside(session, "document/rename", ["uri": .string(fileURI(outside.file("o.txt"))), "name": "p.txt"], field: "params.uri")

        let badSources = [fileURI(outside.file("o.txt")), fileURI(root.path + "/sub/../../\(outsideName)/o.txt"), fileURI(root.file("out.txt"))]
        let badDirectories = [fileURI(outside.path), fileURI(root.path + "/sub/../.."), fileURI(root.file("escape"))]
        for uri in badSources {
            try expectOutside(session, "workspace/import", ["from": .string(uri), "directory": .string(fileURI(root.path))], field: "params.from")
            try expectOutside(session, "workspace/export", ["uri": .string(uri), "to": .string(fileURI(root.file("x.txt")))], field: "params.uri")
        }
        for uri in badDirectories {
            try expectOutside(session, "workspace/import", ["from": .string(fileURI(root.file("a.txt"))), "directory": .string(uri)], field: "params.directory")
        }
        try session.open(root.file("a.txt"))
        for uri in [fileURI(outside.file("x.txt")), fileURI(root.path + "/sub/../../\(outsideName)/x.txt"), fileURI(root.file("escape/x.txt"))] {
            try expectOutside(session, "workspace/export", ["document": "d1", "to": .string(uri)], field: "params.to")
            try expectOutside(session, "workspace/export", ["uri": .string(fileURI(root.file("a.txt"))), "to": .string(uri)], field: "params.to")
        }
        // A destination that is a symlink pointing out (replace asked for): outside too.
        try expectOutside(session, "workspace/export", ["document": "d1", "to": .string(fileURI(root.file("out.txt"))), "replace": true], field: "params.to")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).sorted() == ["o.txt"])
        #expect(text(outside.file("o.txt")) == "outside\n")
        // Inside, they work.
        let imported = try session.call("workspace/import", ["from": .string(fileURI(root.file("a.txt"))), "directory": .string(fileURI(root.file("sub")))])
        #expect(imported["uri"] == .string(fileURI(root.file("sub/a.txt"))))
        let again = try session.call("workspace/import", ["from": .string(fileURI(root.file("a.txt"))), "directory": .string(fileURI(root.file("sub")))])
        #expect(again["name"] == "a 2.txt")
        let exported = try session.call("workspace/export", ["document": "d1", "to": .string(fileURI(root.file("sub/e.txt")))])
        #expect(exported == ["uri": .string(fileURI(root.file("sub/e.txt"))), "size": 6])
        try session.call("workspace/export", ["uri": .string(fileURI(root.file("a.txt"))), "to": .string(fileURI(root.file("sub/e.txt"))), "replace": true])
        #expect(text(root.file("sub/e.txt")) == "alpha\n")
        try expectQuiet(session)
    }
}
