import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `document/create` in a directory with a naming rule, over stdio (protocol §11.2): sequence,
/// uuid and timestamp names, names from the first line, collisions, concurrent creators, and
/// every refusal naming its field.
@Suite("Naming rules over stdio")
struct NamingTests {
    static func create(_ session: Session, in directory: String, _ naming: JSONValue, text: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        var params: JSONObject = ["directory": .string(fileURI(directory)), "naming": naming]
        if let text { params["text"] = .string(text) }
        return try session.call("document/create", .object(params), sourceLocation: sourceLocation)
    }

    /// Checks the created document is `name` in `directory`, holding `text` on disk and in the answer.
    static func expectCreated(_ info: JSONValue, _ directory: TemporaryDirectory, _ name: String, text: String,
        sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(info["uri"] == .string(fileURI(directory.file(name))), "\(info.jsonText)", sourceLocation: sourceLocation)
        #expect(info["displayName"] == .string(name), "\(info.jsonText)", sourceLocation: sourceLocation)
        #expect(info["text"] == .string(text), sourceLocation: sourceLocation)
        #expect(info["version"] == 1, sourceLocation: sourceLocation)
        #expect(info["hasUnsavedChanges"] == false, sourceLocation: sourceLocation)
        #expect(try directory.contents(name) == Array(text.utf8), sourceLocation: sourceLocation)
    }

    static func names(_ directory: TemporaryDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    /// The local time `seconds` since the epoch as the timestamp style writes it.
    static func stamp(_ seconds: Int) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        localtime_r(&clock, &parts)
        return String(
            format: "%04d-%02d-%02d %02d.%02d.%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
            Int(parts.tm_min), Int(parts.tm_sec))
    }

    @Test("sequence: the first free number, over gaps and existing files; the display name follows the file name")
    func sequence() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try directory.write("Note 1.txt", "taken\n")
        try directory.write("Note 3.txt", "taken too\n")
        try directory.write("Note 5", "no extension: another name\n")
        let session = try Session.documents()
        let rule: JSONValue = ["prefix": "Note", "style": "sequence", "extension": "txt"]
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: "two"), directory, "Note 2.txt", text: "two")
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: "four"), directory, "Note 4.txt", text: "four")
        try Self.expectCreated(try Self.create(session, in: directory.path, rule), directory, "Note 5.txt", text: "")
        // The defaults: style sequence, no extension.
        try Self.expectCreated(try Self.create(session, in: directory.path, ["prefix": "Note"], text: "x"), directory, "Note 1", text: "x")
        try Self.expectCreated(try Self.create(session, in: directory.path, ["prefix": "Note"], text: "y"), directory, "Note 2", text: "y")
        // The files already there are untouched.
        #expect(try directory.contents("Note 1.txt") == Array("taken\n".utf8))
        #expect(try directory.contents("Note 3.txt") == Array("taken too\n".utf8))
        // Each is an open document with its own handle.
        let state = try session.state("d3")
        #expect(state["uri"] == .string(fileURI(directory.file("Note 5.txt"))))
        try session.shutdownAndExit()
    }

    @Test("a collision: a file already at \"Note 1.txt\" gives \"Note 2.txt\"; a directory or a symlink at the name counts as taken")
    func collisions() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try directory.write("Note 1.txt", "mine\n")
        try FileManager.default.createDirectory(atPath: directory.file("Note 2.txt"), withIntermediateDirectories: false)
        #expect(symlink("nowhere", directory.file("Note 3.txt")) == 0)
        let session = try Session.documents()
        try Self.expectCreated(
            try Self.create(session, in: directory.path, ["prefix": "Note", "extension": "txt"], text: "new"), directory, "Note 4.txt", text: "new")
        #expect(try directory.contents("Note 1.txt") == Array("mine\n".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory.file("nowhere")))
        try session.shutdownAndExit()
    }

    @Test("uuid: \"Note <UUID>.txt\", an upper-case version 4 UUID; without a prefix, the UUID alone")
    func uuid() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let pattern = try Regex("^Note [0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}\\.txt$")
        var seen: Set<String> = []
        for _ in 0..<5 {
            let info = try Self.create(session, in: directory.path, ["prefix": "Note", "style": "uuid", "extension": "txt"], text: "u")
            let name = try #require(info["displayName"]?.stringValue)
            #expect(name.wholeMatch(of: pattern) != nil, "\(name)")
            try Self.expectCreated(info, directory, name, text: "u")
            seen.insert(name)
        }
        #expect(seen.count == 5)
        let bare = try Self.create(session, in: directory.path, ["style": "uuid"])
        let name = try #require(bare["displayName"]?.stringValue)
        #expect(name.wholeMatch(of: try Regex("^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$")) != nil, "\(name)")
        try session.shutdownAndExit()
    }

    @Test("timestamp: \"Note 2026-11-22 08.01.02.txt\" in local time; \" 2\" when that name is taken")
    func timestamp() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let before = Int(time(nil))
        let info = try Self.create(session, in: directory.path, ["prefix": "Note", "style": "timestamp", "extension": "txt"], text: "t")
        let after = Int(time(nil))
        let name = try #require(info["displayName"]?.stringValue)
        let expected = (before...after).map { "Note \(Self.stamp($0)).txt" }
        #expect(expected.contains(name), "\(name) is not one of \(expected)")
        try Self.expectCreated(info, directory, name, text: "t")
        // The names of the next seconds taken: the creation counts on from 2.
        let start = Int(time(nil))
        // (Not over the document just created, whose name may be one of them.)
        for second in start...(start + 20) where "Note \(Self.stamp(second)).txt" != name {
            try directory.write("Note \(Self.stamp(second)).txt", "taken")
        }
        let second = try Self.create(session, in: directory.path, ["prefix": "Note", "style": "timestamp", "extension": "txt"], text: "again")
        let secondName = try #require(second["displayName"]?.stringValue)
        let counted = (start...(start + 20)).map { "Note \(Self.stamp($0)) 2.txt" }
        #expect(counted.contains(secondName), "\(secondName)")
        try Self.expectCreated(second, directory, secondName, text: "again")
        // Without a prefix: the time alone.
        let bare = try Self.create(session, in: directory.path, ["style": "timestamp"])
        let bareName = try #require(bare["displayName"]?.stringValue)
        #expect(bareName.wholeMatch(of: try Regex("^\\d{4}-\\d{2}-\\d{2} \\d{2}\\.\\d{2}\\.\\d{2}( \\d+)?$")) != nil, "\(bareName)")
        try session.shutdownAndExit()
    }

    @Test("nameFrom firstLine: the text's first non-blank line names the file, made unique; a blank text falls back to the rule")
    func firstLine() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let rule: JSONValue = ["prefix": "Note", "extension": "txt", "nameFrom": "firstLine"]
        let text = "\n   \n  Shopping list  \nmilk\neggs\n"
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: text), directory, "Shopping list.txt", text: text)
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: "Shopping list\n"), directory, "Shopping list 2.txt", text: "Shopping list\n")
        // A slash cannot be in a name; leading dots would hide the file.
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: "to do / done\n"), directory, "to do - done.txt", text: "to do / done\n")
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: "..hidden?\n"), directory, "hidden?.txt", text: "..hidden?\n")
        // Blank or absent text: the rule's name.
        try Self.expectCreated(try Self.create(session, in: directory.path, rule, text: " \n\t\n"), directory, "Note 1.txt", text: " \n\t\n")
        try Self.expectCreated(try Self.create(session, in: directory.path, rule), directory, "Note 2.txt", text: "")
        // nameFrom "rule" is the default.
        try Self.expectCreated(
            try Self.create(session, in: directory.path, ["prefix": "Note", "extension": "txt", "nameFrom": "rule"], text: "Title\n"), directory,
            "Note 3.txt", text: "Title\n")
        try session.shutdownAndExit()
    }

    @Test("20 creates from 4 clients (4 servers) at once in one directory: 20 distinct files, each intact")
    func concurrentCreates() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        /// What the four client threads collect (each session is used by its own thread only).
        final class Shared: @unchecked Sendable {
            let lock = NSLock()
            let sessions: [Session]
            var created: [(String, String)] = []
            var failures: [String] = []
            init(_ sessions: [Session]) { self.sessions = sessions }
        }
        let shared = Shared(try (0..<4).map { _ in try Session.documents() })
        let path = directory.path
        DispatchQueue.concurrentPerform(iterations: 4) { client in
            let session = shared.sessions[client]
            for index in 0..<5 {
                let text = "client \(client) document \(index)\n" + String(repeating: "\(client)", count: 1000 * (index + 1))
                do {
                    let response = try session.request(
                        "document/create",
                        ["directory": .string(fileURI(path)), "naming": ["prefix": "Note", "extension": "txt"], "text": .string(text)])
                    if let name = response["result"]?["displayName"]?.stringValue {
                        shared.lock.withLock { shared.created.append((name, text)) }
                    } else {
                        shared.lock.withLock { shared.failures.append(response.jsonText) }
                    }
                } catch {
                    shared.lock.withLock { shared.failures.append("\(error)") }
                }
            }
        }
        let created = shared.created
        let failures = shared.failures
        let sessions = shared.sessions
        #expect(failures.isEmpty, "\(failures)")
        #expect(created.count == 20)
        #expect(Set(created.map(\.0)).count == 20, "\(created.map(\.0).sorted())")
        #expect(Set(created.map(\.0)) == Set((1...20).map { "Note \($0).txt" }))
        for (name, text) in created { #expect(try directory.contents(name) == Array(text.utf8), "\(name)") }
        #expect(Self.names(directory).count == 20)
        for session in sessions { try session.shutdownAndExit() }
    }

    @Test("every invalid param is -32602 naming its field, and creates nothing")
    func validation() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let session = try Session.documents()
        let here = JSONValue.string(fileURI(directory.path))
        let cases: [(JSONValue, String)] = [
            ([:], "params.uri"),
            (["text": "only text"], "params.uri"),
            (["uri": .string(fileURI(directory.file("a.txt"))), "directory": here, "naming": ["prefix": "Note"]], "params"),
            (["uri": .string(fileURI(directory.file("a.txt"))), "naming": ["prefix": "Note"]], "params.naming"),
            (["directory": here], "params.naming"),
            (["directory": here, "naming": "Note"], "params.naming"),
            (["directory": here, "naming": .null], "params.naming"),
            (["directory": 5, "naming": ["prefix": "Note"]], "params.directory"),
            (["directory": "relative/dir", "naming": ["prefix": "Note"]], "params.directory"),
            (["directory": here, "naming": ["prefix": "Note"], "text": 5], "params.text"),
            (["directory": here, "naming": [:]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": ""]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": 5]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": "a/b"]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": ".."]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": "a\u{0}b"]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": .string(String(repeating: "é", count: 101))]], "params.naming.prefix"),
            (["directory": here, "naming": ["prefix": "Note", "style": "random"]], "params.naming.style"),
            (["directory": here, "naming": ["prefix": "Note", "style": 1]], "params.naming.style"),
            (["directory": here, "naming": ["prefix": "Note", "extension": ""]], "params.naming.extension"),
            (["directory": here, "naming": ["prefix": "Note", "extension": ".txt"]], "params.naming.extension"),
            (["directory": here, "naming": ["prefix": "Note", "extension": "a/b"]], "params.naming.extension"),
            (["directory": here, "naming": ["prefix": "Note", "extension": "abcdefghijklmnopq"]], "params.naming.extension"),
            (["directory": here, "naming": ["prefix": "Note", "extension": 7]], "params.naming.extension"),
            (["directory": here, "naming": ["prefix": "Note", "nameFrom": "title"]], "params.naming.nameFrom"),
            (["directory": here, "naming": ["prefix": "Note", "nameFrom": true]], "params.naming.nameFrom"),
            // Checked before the directory is looked at.
            (["directory": .string(fileURI(directory.file("missing"))), "naming": ["prefix": "a/b"]], "params.naming.prefix"),
        ]
        for (params, field) in cases { try session.callInvalid("document/create", params, field: field) }
        #expect(Self.names(directory).isEmpty, "\(Self.names(directory))")
        // The limits themselves are allowed: a 200-byte prefix, a 16-byte extension.
        let long = try Self.create(
            session, in: directory.path, ["prefix": .string(String(repeating: "é", count: 100)), "extension": "abcdefghijklmnop"])
        #expect(long["displayName"] == .string(String(repeating: "é", count: 100) + " 1.abcdefghijklmnop"))
        try session.shutdownAndExit()
    }

    @Test("a missing directory is -32010, a file as the directory -32010, a directory outside --root -32022")
    func directoryErrors() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: directory.file("outside"), withIntermediateDirectories: false)
        try directory.write("root/file.txt", "x")
        for arguments in [[], ["--root", directory.file("root")]] {
            let session = try Session(arguments)
            try session.initialize()
            let naming: JSONValue = ["prefix": "Note", "extension": "txt"]
            let missing = try session.callFailing(
                "document/create", ["directory": .string(fileURI(directory.file("root/missing"))), "naming": naming], code: -32010)
            #expect(missing["data"]?["code"] == "ENOENT", "\(missing.jsonText)")
            let notDirectory = try session.callFailing(
                "document/create", ["directory": .string(fileURI(directory.file("root/file.txt"))), "naming": naming], code: -32010)
            #expect(notDirectory["data"]?["code"] == "ENOTDIR", "\(notDirectory.jsonText)")
            if arguments.isEmpty {
                try session.call("document/create", ["directory": .string(fileURI(directory.file("outside"))), "naming": naming])
                #expect(FileManager.default.fileExists(atPath: directory.file("outside/Note 1.txt")))
            } else {
                let error = try session.callFailing(
                    "document/create", ["directory": .string(fileURI(directory.file("outside"))), "naming": naming], code: -32022)
                #expect(error["data"]?["field"] == "params.directory")
                #expect(error["data"]?["roots"] == [.string(fileURI(directory.file("root")))])
                #expect(FileManager.default.fileExists(atPath: directory.file("outside/Note 2.txt")) == false)
                // Inside the root, the rule names as usual.
                let info = try session.call("document/create", ["directory": .string(fileURI(directory.file("root"))), "naming": naming])
                #expect(info["uri"] == .string(fileURI(directory.file("root/Note 1.txt"))))
            }
            try session.shutdownAndExit()
        }
    }
}
