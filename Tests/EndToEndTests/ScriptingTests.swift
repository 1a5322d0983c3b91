import Foundation
import JSON
import Testing

/// JSON-RPC scripting from the shell, as a user runs it: `docsession call METHOD [PARAMS]` and
/// `docsession run SCRIPT`, each starting its own server.
@Suite("Scripting: docsession call and run")
struct ScriptingTests {
    var stateArguments: [String] { ["--state-dir", NSTemporaryDirectory() + "/docsession-e2e-state-\(getpid())"] }

    func lines(_ run: RawRun) -> [String] {
        String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test("call prints the result as one line of JSON and exits 0")
    func callPrintsTheResult() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("notes.txt", "Hello, café ☕\n")
        let run = try RawRun.run(["call", "document/open", #"{"uri":"\#(fileURI(path))","includeText":true}"#] + stateArguments)
        #expect(run.status == 0, "\(run.stderr)")
        let output = lines(run)
        #expect(output.count == 1)
        let result = try JSONParser().parse(output.first ?? "")
        #expect(result["document"] == "d1")
        #expect(result["text"] == "Hello, café ☕\n")
        #expect(result["encoding"] == "utf-8")
    }

    @Test("call: an error response goes to stderr with its code, exit 1; bad PARAMS are a usage error, exit 2")
    func callErrors() throws {
        let failed = try RawRun.run(["call", "document/read", #"{"document":"d9"}"#] + stateArguments)
        #expect(failed.status == 1)
        #expect(failed.stdout.isEmpty)
        #expect(failed.stderr.contains("-32011"), "\(failed.stderr)")
        let notJSON = try RawRun.run(["call", "document/read", "{document: d1}"])
        #expect(notJSON.status == 2)
        #expect(notJSON.stderr.contains("PARAMS is not JSON"), "\(notJSON.stderr)")
        let array = try RawRun.run(["call", "document/read", "[1]"])
        #expect(array.status == 2)
        #expect(array.stderr.contains("PARAMS must be an object"), "\(array.stderr)")
    }

    @Test("run: a JSON Lines script, ids assigned, each answer awaited; the transcript shows both directions and the notifications in order")
    func runScript() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let path = try directory.write("list.md", "- bread\n")
        let script = try directory.write("edit.jsonl", """
            # Open, add an item, save: the server is initialized and shut down around the script.
            {"method": "document/open", "params": {"uri": "\(fileURI(path))", "includeText": false}}
            {"method": "document/edit", "params": {"document": "d1", "version": 1, "edits": [{"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "text": "- milk\\n"}]}}

            {"id": "save-1", "method": "document/save", "params": {"document": "d1"}}
            """)
        let run = try RawRun.run(["run", script] + stateArguments)
        #expect(run.status == 0, "\(run.stderr)")
        let output = lines(run)
        #expect(output.count == 8, "\(output)")
        #expect(output[0].hasPrefix(#"--> {"method":"document/open","#) || output[0].hasPrefix("--> {"), "\(output[0])")
        let first = try JSONParser().parse(String(output[0].dropFirst(4)))
        #expect(first["id"] == 1)
        #expect(first["jsonrpc"] == "2.0")
        #expect(output[1].hasPrefix("<-- "))
        // The edit: stateChanged (edited) before its response.
        #expect(output[3].contains(#""method":"document/stateChanged""#) && output[3].contains(#""reason":"edited""#))
        #expect(output[4].contains(#""id":2"#) && output[4].contains(#""version":2"#))
        // The save keeps its own id.
        #expect(output[5].contains(#""id":"save-1""#))
        #expect(output[6].contains(#""reason":"saved""#))
        #expect(output[7].contains(#""id":"save-1""#) && output[7].contains(#""durable":true"#))
        #expect(try directory.contents("list.md") == Array("- bread\n- milk\n".utf8))
    }

    @Test("run --json prints only what the server sent; an error response makes the exit status 1")
    func runJSONLines() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        let script = try directory.write("bad.jsonl", """
            {"method": "document/read", "params": {"document": "d1"}}
            {"method": "$/setTrace", "params": {"value": "off"}, "notification": true}
            """)
        let run = try RawRun.run(["run", "--json", script] + stateArguments)
        #expect(run.status == 1)
        let output = lines(run)
        #expect(output.count == 1, "\(output)")
        let response = try JSONParser().parse(output[0])
        #expect(response["error"]?["code"] == -32011)
    }

    @Test("run: a line that is not a message names its line and why, exit 2, nothing sent")
    func runRefusesABadScript() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        for (text, expected) in [
            (#"{"method": "document/read"}\#n[1, 2]"#, "bad.jsonl:2: expected a JSON object"),
            (#"{"params": {}}"#, #"bad.jsonl:1: a message needs a string "method""#),
            (#"{"method": "x", "notification": "yes"}"#, #"bad.jsonl:1: "notification" must be true or false"#),
            ("{oops", "bad.jsonl:1: not JSON"),
        ] {
            let script = try directory.write("bad.jsonl", text)
            let run = try RawRun.run(["run", script] + stateArguments)
            #expect(run.status == 2, "\(text)")
            #expect(run.stderr.contains(expected), "\(text): \(run.stderr)")
            #expect(run.stdout.isEmpty)
        }
    }

    @Test("run: a script that cannot be read (missing, or a directory) names it and why, exit 2, nothing sent")
    func runRefusesAnUnreadableScript() throws {
        let directory = try TemporaryDirectory(prefix: "docsession-e2e")
        for (script, reason) in [(directory.file("missing.jsonl"), "No such file or directory"), (directory.path, "Is a directory")] {
            let run = try RawRun.run(["run", script] + stateArguments)
            #expect(run.status == 2, "\(script)")
            #expect(run.stderr.contains("docsession run: cannot read \(script): \(reason)"), "\(run.stderr)")
            #expect(run.stdout.isEmpty)
        }
    }
}
