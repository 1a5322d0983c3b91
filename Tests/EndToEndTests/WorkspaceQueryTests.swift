import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `workspace/query`, `workspace/didChangeFiles` and `workspace/stopQuery` over stdio, with real
/// file-system changes made by the test (another program, as far as the server knows): listings,
/// errors, the sandbox roots, and live queries through a burst of a thousand files, nested
/// directories, moves, deletions, rewrites, two queries at once, and silence after `stopQuery` and
/// `shutdown`.
@Suite("Workspace queries over stdio")
struct WorkspaceQueryTests {
    // MARK: - Helpers

    /// Makes the directories of `path` (relative to `directory`) and writes `text` there, in
    /// place (FileManager writes a temporary file and renames it, which a query reports as such).
    @discardableResult
    func make(_ directory: TemporaryDirectory, _ relative: String, _ text: String = "") throws -> String {
        let path = directory.file(relative)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try writeInPlace(path, text)
        return path
    }

    /// Writes `text` to `path` with open (creating or truncating), write, close.
    func writeInPlace(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw E2EError("open \(path): \(errno)") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else { throw E2EError("write \(path)") }
    }

    func relativePaths(_ result: JSONValue) -> [String] {
        (result["files"]?.arrayValue ?? []).compactMap { $0["relativePath"]?.stringValue }
    }

    func isDidChangeFiles(_ message: JSONValue, _ query: String) -> Bool {
        message["method"] == "workspace/didChangeFiles" && message["params"]?["query"] == .string(query)
    }

    /// The changes of `query`'s notifications, in order, until `done` holds for all received so far.
    func changes(
        _ session: Session, _ query: String, timeout: Double = 10, until done: ([JSONValue]) -> Bool
    ) throws -> [JSONValue] {
        var changes: [JSONValue] = []
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !done(changes) {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw E2EError("timed out; \(query) sent so far: \(changes.map(\.jsonText))") }
            let message: JSONValue
            do {
                message = try session.server.waitFor(timeout: remaining, what: "workspace/didChangeFiles of \(query)") {
                    isDidChangeFiles($0, query)
                }
            } catch {
                throw E2EError("\(error); \(query) sent so far: \(changes.map(\.jsonText)); queued: \(session.server.queuedMessages.map(\.jsonText))")
            }
            let batch = message["params"]?["changes"]?.arrayValue ?? []
            #expect(!batch.isEmpty, "an empty batch: \(message.jsonText)")
            changes += batch
        }
        return changes
    }

    /// The changes of `query` until one of each of `expected` (type, URI) has come.
    func changes(_ session: Session, _ query: String, expecting expected: [(String, String)]) throws -> [JSONValue] {
        try changes(session, query) { received in
            expected.allSatisfy { type, uri in
                received.contains { $0["type"] == .string(type) && $0["uri"] == .string(uri) }
            }
        }
    }

    /// Lets the watch's debounce window pass twice, then proves `query` sent nothing more.
    func expectNoMoreChanges(_ session: Session, _ query: String, sourceLocation: SourceLocation = #_sourceLocation) {
        usleep(400_000)
        let late = session.server.takeQueued { isDidChangeFiles($0, query) }
        #expect(late.isEmpty, "unexpected changes of \(query): \(late.map(\.jsonText))", sourceLocation: sourceLocation)
    }

    /// Starts a live query of `root`; answers its id and its files' relative paths.
    func watch(_ session: Session, _ root: String, _ extra: JSONObject = [:]) throws -> (String, [String]) {
        var params: JSONObject = ["root": .string(fileURI(root)), "watch": true]
        for (key, value) in extra { params[key] = value }
        let result = try session.call("workspace/query", .object(params))
        let id = try #require(result["query"]?.stringValue)
        return (id, relativePaths(result))
    }

    // MARK: - Listings

    @Test("a listing: recursive by default, sorted by relative path, with each file's info; not recursive; a glob")
    func listing() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try make(directory, "b.txt", "bee\n")
        try make(directory, "a.md", "# A\n")
        try make(directory, "sub/c.swift", "let c = 1\n")
        try make(directory, "sub/deep/d.txt", "d")
        try FileManager.default.createDirectory(atPath: directory.file("empty"), withIntermediateDirectories: true)
        symlink(directory.file("b.txt"), directory.file("link.txt"))
        let session = try Session.documents()

        let all = try session.call("workspace/query", ["root": .string(fileURI(directory.path))])
        #expect(all["query"] == .null)
        #expect(relativePaths(all) == ["a.md", "b.txt", "sub/c.swift", "sub/deep/d.txt"])
        let first = try #require(all["files"]?[0])
        #expect(first["uri"] == .string(fileURI(directory.file("a.md"))))
        #expect(first["name"] == "a.md")
        #expect(first["displayName"] == "a.md")
        #expect(first["fileType"] == "markdown")
        #expect(first["size"] == 4)
        #expect(first["isOpen"] == false)
        #expect(first["document"] == nil)
        let date = try #require(first["modificationDate"]?.stringValue)
        #expect(date.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(date)")
        #expect(all["files"]?[2]?["fileType"] == "swift")
        #expect(all["files"]?[3]?["name"] == "d.txt")

        let flat = try session.call("workspace/query", ["root": .string(fileURI(directory.path)), "recursive": false])
        #expect(relativePaths(flat) == ["a.md", "b.txt"])
        let texts = try session.call("workspace/query", ["root": .string(fileURI(directory.path)), "glob": "**/*.txt"])
        #expect(relativePaths(texts) == ["b.txt", "sub/deep/d.txt"])
        let sub = try session.call("workspace/query", ["root": .string(fileURI(directory.path)), "glob": "sub/*"])
        #expect(relativePaths(sub) == ["sub/c.swift"])
        let braces = try session.call("workspace/query", ["root": .string(fileURI(directory.path)), "glob": "{a.md,sub/**}"])
        #expect(relativePaths(braces) == ["a.md", "sub/c.swift", "sub/deep/d.txt"])
        let none = try session.call("workspace/query", ["root": .string(fileURI(directory.file("empty")))])
        #expect(none["files"] == .array([]))
        try session.shutdownAndExit()
    }

    @Test("isOpen and document name the open document's handle, in listings and in changes")
    func openFiles() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let notes = try make(directory, "notes.txt", "hello\n")
        try make(directory, "other.txt", "other\n")
        let session = try Session.documents()
        try session.open(notes)
        let result = try session.call("workspace/query", ["root": .string(fileURI(directory.path))])
        #expect(result["files"]?[0]?["isOpen"] == true)
        #expect(result["files"]?[0]?["document"] == "d1")
        #expect(result["files"]?[1]?["isOpen"] == false)

        let (query, _) = try watch(session, directory.path)
        let opened = try session.open(directory.file("other.txt"))
        #expect(opened["document"] == "d2")
        try FileManager.default.removeItem(atPath: directory.file("other.txt"))
        _ = try changes(session, query, expecting: [("deleted", fileURI(directory.file("other.txt")))])
        // A file written by another program while open: the change says which document it is.
        try writeInPlace(notes, "hello, world\n")
        let changed = try changes(session, query, expecting: [("changed", fileURI(notes))])
        #expect(changed.last?["file"]?["isOpen"] == true)
        #expect(changed.last?["file"]?["document"] == "d1")
        _ = try session.server.waitFor(timeout: e2eTimeout, what: "document/didChange") { $0["method"] == "document/didChange" }
        try make(directory, "new.txt", "new\n")
        let created = try changes(session, query, expecting: [("created", fileURI(directory.file("new.txt")))])
        #expect(created.last?["file"]?["isOpen"] == false)
        _ = try session.takeStateChanges()
        try session.shutdownAndExit()
    }

    // MARK: - Errors

    @Test("errors: a bad glob names params.glob and the position, a missing root, a root that is a file, an unknown query")
    func errors() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let file = try make(directory, "file.txt", "x")
        let session = try Session.documents()
        let badGlob = try session.callInvalid(
            "workspace/query", ["root": .string(fileURI(directory.path)), "glob": "src/[ab"], field: "params.glob")
        #expect(badGlob["message"]?.stringValue?.contains("at 4") == true, "\(badGlob.jsonText)")
        #expect(badGlob["message"]?.stringValue?.contains("never closed") == true, "\(badGlob.jsonText)")
        try session.callInvalid("workspace/query", ["root": .string(fileURI(directory.path)), "glob": "/abs"], field: "params.glob")
        try session.callInvalid("workspace/query", ["root": .string(fileURI(directory.path)), "watch": "yes"], field: "params.watch")
        try session.callInvalid("workspace/query", ["root": "http://example.com/"], field: "params.root")
        try session.callInvalid("workspace/query", [:], field: "params.root")

        let missing = try session.callFailing("workspace/query", ["root": .string(fileURI(directory.file("nothing")))], code: -32010)
        #expect(missing["data"]?["code"] == "ENOENT")
        let notDirectory = try session.callFailing("workspace/query", ["root": .string(fileURI(file)), "watch": true], code: -32010)
        #expect(notDirectory["data"]?["code"] == "ENOTDIR")

        let unknown = try session.callFailing("workspace/stopQuery", ["query": "q7"], code: -32024)
        #expect(unknown["data"]?["query"] == "q7")
        try session.callInvalid("workspace/stopQuery", [:], field: "params.query")
        // A failed query takes no id: the first live one is q1; stopped, it is unknown.
        let (query, _) = try watch(session, directory.path)
        #expect(query == "q1")
        #expect(try session.call("workspace/stopQuery", ["query": "q1"]) == .null)
        try session.callFailing("workspace/stopQuery", ["query": "q1"], code: -32024)
        #expect(try watch(session, directory.path).0 == "q2")
        try session.shutdownAndExit()
    }

    @Test("with --root: a root outside it by '..' or through a symlink is refused (-32022); inside, a listing")
    func outsideRoots() throws {
        let outer = try TemporaryDirectory(prefix: "docsession-e2e")
        let inner = outer.path + "/inner"
        try FileManager.default.createDirectory(atPath: inner, withIntermediateDirectories: true)
        try make(outer, "secret.txt", "secret")
        try make(outer, "inner/mine.txt", "mine")
        try FileManager.default.createDirectory(atPath: outer.path + "/elsewhere", withIntermediateDirectories: true)
        try make(outer, "elsewhere/other.txt", "other")
        symlink(outer.path + "/elsewhere", inner + "/escape")
        let session = try Session(["--root", inner])
        _ = try session.initialize()
        let dotDot = try session.callFailing("workspace/query", ["root": .string(fileURI(inner + "/.."))], code: -32022)
        #expect(dotDot["data"]?["field"] == "params.root")
        let link = try session.callFailing("workspace/query", ["root": .string(fileURI(inner + "/escape")), "watch": true], code: -32022)
        #expect(link["data"]?["field"] == "params.root")
        // The root itself: the symlink inside is neither listed nor followed.
        let listing = try session.call("workspace/query", ["root": .string(fileURI(inner))])
        #expect(relativePaths(listing) == ["mine.txt"])
        try session.shutdownAndExit()
    }

    // MARK: - Live queries

    @Test("a thousand files created at once: exactly a thousand created changes, each once, after the response")
    func burst() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let (query, initial) = try watch(session, directory.path)
        #expect(initial.isEmpty)
        for index in 0..<1000 {
            let fd = open(directory.file("file-\(index).txt"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
            #expect(fd >= 0)
            close(fd)
        }
        let received = try changes(session, query, timeout: 30) { $0.count >= 1000 }
        expectNoMoreChanges(session, query)
        #expect(received.count == 1000)
        #expect(received.allSatisfy { $0["type"] == "created" && $0["file"]?["size"] == 0 })
        #expect(Set(received.compactMap { $0["uri"]?.stringValue }).count == 1000)
        try session.shutdownAndExit()
    }

    @Test("files created while the query starts: the listing and the changes after it hold each file exactly once, the response first")
    func snapshotThenChanges() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let writer = Thread {
            for index in 0..<400 {
                let fd = open(directory.file("racing-\(index).txt"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
                close(fd)
                if index % 20 == 0 { usleep(1_000) }
            }
        }
        writer.start()
        let id = JSONValue.string("the-query")
        try session.sendRequest(id: id, "workspace/query", ["root": .string(fileURI(directory.path)), "watch": true])
        // The first message about the query is its response.
        let first = try session.server.waitFor(timeout: e2eTimeout, what: "the response") {
            $0["id"] == id || $0["method"] == "workspace/didChangeFiles"
        }
        let result = try #require(expectResult(first, id: id))
        let query = try #require(result["query"]?.stringValue)
        var seen = relativePaths(result)
        let listed = seen.count
        let received = try changes(session, query, timeout: 30) { $0.count + listed >= 400 }
        expectNoMoreChanges(session, query)
        #expect(received.allSatisfy { $0["type"] == "created" })
        seen += received.compactMap { $0["file"]?["relativePath"]?.stringValue }
        #expect(seen.count == 400)
        #expect(Set(seen).count == 400)
        try session.shutdownAndExit()
    }

    @Test("nested directories made after the query began, a rewrite, moves within the root, deletions")
    func nestedMovesDeletesChanges() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try make(directory, "keep.txt", "one\n")
        let session = try Session.documents()
        let (query, initial) = try watch(session, directory.path)
        #expect(initial == ["keep.txt"])

        // mkdir -p a/b/c && touch a/b/c/x.txt
        try FileManager.default.createDirectory(atPath: directory.file("a/b/c"), withIntermediateDirectories: true)
        let x = directory.file("a/b/c/x.txt")
        try writeInPlace(x, "")
        var received = try changes(session, query, expecting: [("created", fileURI(x))])
        #expect(received.count == 1)
        #expect(received[0]["file"]?["relativePath"] == "a/b/c/x.txt")

        // A rewrite.
        try writeInPlace(directory.file("keep.txt"), "one, two\n")
        received = try changes(session, query, expecting: [("changed", fileURI(directory.file("keep.txt")))])
        #expect(received.count == 1)
        #expect(received[0]["file"]?["size"] == 9)
        #expect(received[0]["oldUri"] == nil)

        // A move within the root, into another directory.
        try FileManager.default.moveItem(atPath: x, toPath: directory.file("a/y.md"))
        received = try changes(session, query, expecting: [("moved", fileURI(directory.file("a/y.md")))])
        #expect(received.count == 1)
        #expect(received[0]["oldUri"] == .string(fileURI(x)))
        #expect(received[0]["file"]?["fileType"] == "markdown")
        #expect(received[0]["file"]?["relativePath"] == "a/y.md")

        // A directory moved within the root: each file in it moves.
        try make(directory, "a/b/z.txt", "z")
        _ = try changes(session, query, expecting: [("created", fileURI(directory.file("a/b/z.txt")))])
        try FileManager.default.moveItem(atPath: directory.file("a/b"), toPath: directory.file("moved-b"))
        received = try changes(session, query, expecting: [("moved", fileURI(directory.file("moved-b/z.txt")))])
        #expect(received.count == 1)
        #expect(received[0]["oldUri"] == .string(fileURI(directory.file("a/b/z.txt"))))

        // Deletions: a file, then a directory with its files.
        try FileManager.default.removeItem(atPath: directory.file("keep.txt"))
        received = try changes(session, query, expecting: [("deleted", fileURI(directory.file("keep.txt")))])
        #expect(received.count == 1)
        #expect(received[0]["file"] == nil)
        try FileManager.default.removeItem(atPath: directory.file("a"))
        received = try changes(session, query, expecting: [("deleted", fileURI(directory.file("a/y.md")))])
        #expect(received.count == 1)
        expectNoMoreChanges(session, query)
        try session.shutdownAndExit()
    }

    @Test("after stopQuery nothing more is sent for the query; after shutdown nothing for any")
    func stopAndShutdown() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let (first, _) = try watch(session, directory.path)
        let (second, _) = try watch(session, directory.path)
        try make(directory, "before.txt")
        _ = try changes(session, first, expecting: [("created", fileURI(directory.file("before.txt")))])
        _ = try changes(session, second, expecting: [("created", fileURI(directory.file("before.txt")))])
        #expect(try session.call("workspace/stopQuery", ["query": .string(first)]) == .null)
        try make(directory, "after.txt")
        _ = try changes(session, second, expecting: [("created", fileURI(directory.file("after.txt")))])
        expectNoMoreChanges(session, first)
        try session.expectNothingElse()

        // shutdown ends the live queries: changes after its response are not reported.
        let id = JSONValue.string("shutdown")
        try session.sendRequest(id: id, "shutdown")
        #expect(expectResult(try session.next(), id: id) == .null)
        try make(directory, "after-shutdown.txt")
        usleep(400_000)
        try session.notify("exit")
        try session.finish(status: 0)
    }

    @Test("two queries at once on overlapping roots: each gets its own changes, relative to its own root")
    func overlapping() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try FileManager.default.createDirectory(atPath: directory.file("sub"), withIntermediateDirectories: true)
        let session = try Session.documents()
        let (outer, _) = try watch(session, directory.path)
        let (inner, _) = try watch(session, directory.file("sub"), ["glob": "*.txt"])
        #expect(outer != inner)

        let shared = try make(directory, "sub/shared.txt", "s")
        let outerChanges = try changes(session, outer, expecting: [("created", fileURI(shared))])
        let innerChanges = try changes(session, inner, expecting: [("created", fileURI(shared))])
        #expect(outerChanges.count == 1 && innerChanges.count == 1)
        #expect(outerChanges[0]["file"]?["relativePath"] == "sub/shared.txt")
        #expect(innerChanges[0]["file"]?["relativePath"] == "shared.txt")

        // Outside the inner root, or not matching its glob: the outer query's only.
        let top = try make(directory, "top.txt", "t")
        let markdown = try make(directory, "sub/notes.md", "m")
        _ = try changes(session, outer, expecting: [("created", fileURI(top)), ("created", fileURI(markdown))])
        expectNoMoreChanges(session, inner)
        expectNoMoreChanges(session, outer)
        try session.shutdownAndExit()
    }

    @Test("the root deleted: every file deleted, then the query is quiet until stopped")
    func rootDeleted() throws {
        let outer = try TemporaryDirectory(prefix: "docsession-e2e")
        try make(outer, "root/one.txt")
        try make(outer, "root/two/three.txt")
        let session = try Session.documents()
        let (query, initial) = try watch(session, outer.file("root"))
        #expect(initial == ["one.txt", "two/three.txt"])
        try FileManager.default.removeItem(atPath: outer.file("root"))
        let received = try changes(session, query) { $0.count >= 2 }
        #expect(Set(received.compactMap { $0["uri"]?.stringValue })
            == [fileURI(outer.file("root/one.txt")), fileURI(outer.file("root/two/three.txt"))])
        #expect(received.allSatisfy { $0["type"] == "deleted" })
        try make(outer, "root/again.txt")
        expectNoMoreChanges(session, query)
        #expect(try session.call("workspace/stopQuery", ["query": .string(query)]) == .null)
        try session.shutdownAndExit()
    }
}
