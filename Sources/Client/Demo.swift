import Foundation
import JSON
import JSONRPC
import SystemCalls
import SystemPackage

/// The scripted session `docsession demo` runs against a fresh server, printing the traffic: the
/// README's first command. Each later part of the protocol grows this script.
public struct Demo {
    /// One step: what to send, and a caption for the transcript.
    enum Step {
        case request(String, String, JSONValue?)
        case notification(String, String, JSONValue?)
        case raw(String, [UInt8])
    }

    /// The sample document the demo opens: a copy is written to a fresh temporary directory, so
    /// every run starts from the same text. It has a non-ASCII line and an emoji, whose positions
    /// count one each in utf-32.
    static let sampleText = """
        # Shopping list

        - bread
        - café au lait ☕
        - apples 🍎

        """

    /// The script, for a sample document at `uri`.
    static func steps(uri: String) -> [Step] {
        [
            .request("Start the session; the client prefers utf-32 positions (Emacs counts characters).", "initialize", [
                "clientInfo": ["name": "docsession demo"],
                "capabilities": ["general": ["positionEncodings": ["utf-32", "utf-16"]]],
            ]),
            .notification("The client is ready.", "initialized", nil),
            .request("Open the sample document: the server answers a handle, version 1, the text and what it found.", "document/open", [
                "uri": .string(uri),
            ]),
            .request("Add an item after the apples (line 4, character 10 in utf-32: the emoji counts one).", "document/edit", [
                "document": "d1", "version": 1,
                "edits": [["range": ["start": ["line": 4, "character": 10], "end": ["line": 4, "character": 10]], "text": "\n- pears 🍐"]],
                "undo": ["label": "Add pears"],
            ]),
            .request("An edit made against version 1, which is gone: refused, nothing changes.", "document/edit", [
                "document": "d1", "version": 1,
                "edits": [["range": ["start": ["line": 2, "character": 2], "end": ["line": 2, "character": 7]], "text": "rye bread"]],
            ]),
            .request("Read the text as it is now.", "document/read", ["document": "d1"]),
            .request("Undo: the answer carries the edits that turn the client's text back.", "document/undo", ["document": "d1"]),
            .request("The state: back at the text on disk, so no unsaved changes; redo is possible.", "document/state", ["document": "d1"]),
            .request("Redo: the pears are back, unsaved again (a stateChanged notification says so first).", "document/redo", ["document": "d1"]),
            .request("Save: a temp file beside the document, fsync, rename, directory fsync; the document is clean.", "document/save", ["document": "d1"]),
            .request("Save as /sys/shopping.md, where no file may be created: the error says which call failed, where, why, and what to do; the edits are kept.", "document/save", [
                "document": "d1", "to": "file:///sys/shopping.md",
            ]),
            .request("A method the server does not have: a precise error, and the session goes on.", "document/frobnicate", ["document": "d1"]),
            .raw("A message whose JSON is broken: a parse error naming the byte.", Framing.frame(Array(#"{"jsonrpc":"2.0","id":42,"method":"document/read","params":{"document":"d1",}}"#.utf8))),
            .request("One more item.", "document/edit", [
                "document": "d1", "version": 4,
                "edits": [["range": ["start": ["line": 5, "character": 9], "end": ["line": 5, "character": 9]], "text": "\n- milk"]],
            ]),
            .request("Close: unsaved changes are saved first (save: \"ifChanged\", the default).", "document/close", ["document": "d1"]),
            .request("Shut down: nothing more is accepted but exit.", "shutdown", nil),
            .notification("Exit: the server stops with status 0 after shutdown.", "exit", nil),
        ]
    }

    /// The script for a managed document (README §13) created at `uri`: a SQLite store in a
    /// package, a migration, writes, a query, undo and redo, a refused statement, additional
    /// content, the save that publishes both, and the close.
    static func managedSteps(uri: String) -> [Step] {
        [
            .request("Start the session.", "initialize", ["clientInfo": ["name": "docsession demo"]]),
            .notification("The client is ready.", "initialized", nil),
            .request("Create a managed document: a package with a SQLite store, its schema from the client's migration (PRAGMA user_version counts them).", "document/create", [
                "uri": .string(uri), "kind": "managed",
                "storeOptions": ["migrations": ["CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, done INTEGER NOT NULL DEFAULT 0)"]],
            ]),
            .request("Add two items in one transaction: one undoable step, one version.", "store/execute", [
                "document": "p1", "version": 1, "sql": "INSERT INTO items(name) VALUES (?), (?)", "params": ["bread", "café au lait ☕"],
                "label": "Add items",
            ]),
            .request("Tick one off, by name.", "store/execute", [
                "document": "p1", "version": 2, "sql": "UPDATE items SET done = 1 WHERE name = :name", "params": ["name": "bread"],
            ]),
            .request("Read the rows: typed values.", "store/query", ["document": "p1", "sql": "SELECT id, name, done FROM items ORDER BY id"]),
            .request("Undo: the update's changeset inverted.", "document/undo", ["document": "p1"]),
            .request("A duplicate name: SQLite's constraint, its extended code, the statement; nothing changes.", "store/execute", [
                "document": "p1", "sql": "INSERT INTO items(name) VALUES ('bread')",
            ]),
            .request("A statement that would reach another file: refused before it runs.", "store/execute", [
                "document": "p1", "sql": "ATTACH DATABASE '/tmp/elsewhere.db' AS elsewhere",
            ]),
            .request("Additional content beside the store, written as an entry of the package.", "document/writeEntry", [
                "document": "p1", "path": "StoreContent/AdditionalContent/notes.md", "text": "Buy before Friday.\n",
            ]),
            .request("Save: the store published (backup API, no -wal or -shm) with the additional content, in one staged tree swapped in.", "document/save", ["document": "p1"]),
            .request("The document's state: clean, and what the package holds.", "document/state", ["document": "p1"]),
            .request("Close.", "document/close", ["document": "p1"]),
            .request("Shut down.", "shutdown", nil),
            .notification("Exit.", "exit", nil),
        ]
    }

    /// Which script to run.
    public enum Script: Sendable {
        /// A text document (the default).
        case text
        /// A managed document.
        case managed
    }

    /// Where the transcript goes.
    let output: (String) -> Void
    let script: Script

    public init(output: @escaping (String) -> Void, script: Script = .text) {
        self.output = output
        self.script = script
    }

    /// Runs the script against the server at `executable` and answers its exit status.
    public func run(executable: String, arguments: [String]) throws -> Int32 {
        let directory = try SampleDirectory()
        defer { directory.remove() }
        let samplePath = script == .text
            ? try directory.write(name: "shopping.md", text: Self.sampleText) : directory.path + "/shopping.docpackage"
        let server = try ServerProcess(executable: executable, arguments: arguments)
        output("docsession demo: a scripted session with \(executable) \(arguments.joined(separator: " "))")
        output("(--> client to server, <-- server to client; each message is framed as Content-Length: N\\r\\n\\r\\n JSON)")
        output(script == .text ? "(the sample document is a fresh copy at \(samplePath))" : "(the managed document is created at \(samplePath))")
        let steps = script == .text ? Self.steps(uri: "file://" + samplePath) : Self.managedSteps(uri: "file://" + samplePath)
        for step in steps {
            output("")
            switch step {
            case .request(let caption, let method, let params):
                output("# \(caption)")
                let id = server.makeID()
                var message: JSONObject = ["jsonrpc": "2.0", "id": .integer(id), "method": .string(method)]
                if let params { message["params"] = params }
                output("--> \(JSONValue.object(message).jsonText)")
                try server.send(.object(message))
                let response = try server.waitForResponse(id: .integer(id))
                printQueuedNotifications(server)
                output("<-- \(response.jsonText)")
            case .notification(let caption, let method, let params):
                output("# \(caption)")
                var message: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
                if let params { message["params"] = params }
                output("--> \(JSONValue.object(message).jsonText)")
                try server.send(.object(message))
            case .raw(let caption, let bytes):
                output("# \(caption)")
                output("--> \(String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\\r\\n"))")
                try server.sendRaw(bytes)
                let response = try server.waitForResponse(id: .null)
                output("<-- \(response.jsonText)")
            }
        }
        server.closeInput()
        for message in try server.drain() { output("<-- \(message.jsonText)") }
        let status = try server.waitForExit()
        output("")
        output("server exited with status \(status)")
        output("")
        if script == .managed {
            output("The package on disk now holds:")
            let files = (FileManager.default.enumerator(atPath: samplePath)?.allObjects as? [String] ?? []).sorted()
            for file in files { output("  \(file)") }
            return status
        }
        output("The sample document on disk now holds:")
        output(Self.text(of: samplePath) ?? "(unreadable)")
        return status
    }

    /// The file's text, or nil when it cannot be read or is not UTF-8.
    private static func text(of path: String) -> String? {
        guard let file = try? Descriptor.open(path, .readOnly), let bytes = try? readToEnd(from: file.unowned, path: path) else {
            return nil
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private func printQueuedNotifications(_ server: ServerProcess) {
        for message in server.takeNotifications() {
            output("<-- \(message.jsonText)")
        }
    }
}

/// A temporary directory for the demo's sample document.
struct SampleDirectory {
    let path: String

    init() throws {
        do {
            path = try makeTemporaryDirectory(prefix: "/tmp/docsession-demo-")
        } catch {
            throw ServerProcess.Failure("cannot create a temporary directory: errno \(error.errno.rawValue)")
        }
    }

    /// Writes a file and answers its path.
    func write(name: String, text: String) throws -> String {
        let file = path + "/" + name
        do {
            let created = try Descriptor.open(
                file, .writeOnly, options: [.create, .truncate], permissions: FilePermissions(rawValue: 0o666))
            try writeAll(Array(text.utf8), to: created.unowned, path: file)
            try created.close()
        } catch {
            throw ServerProcess.Failure("cannot write \(file)")
        }
        return file
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
