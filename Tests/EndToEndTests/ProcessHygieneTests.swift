import Foundation
import JSON
import JSONRPC
import Server
import Testing

/// The executable around the protocol: its flags, where logs go, tracing, a vanishing client.
@Suite("Process hygiene")
struct ProcessHygieneTests {
    /// A normal session as raw bytes: initialize, initialized, a request, shutdown, exit.
    static let normalSession: [UInt8] =
        framed(requestText(id: 1, method: "initialize")) + framed(notificationText(method: "initialized"))
        + framed(requestText(id: 2, method: "probe")) + framed(requestText(id: 3, method: "shutdown"))
        + framed(notificationText(method: "exit"))

    @Test("--version prints the version and exits 0", arguments: [["--version"], ["serve", "--version"]])
    func versionFlag(arguments: [String]) throws {
        let run = try RawRun.run(arguments)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(run.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == Server.version)
    }

    @Test("--help prints usage and exits 0", arguments: [["--help"], ["-h"], ["serve", "--help"], ["help"]])
    func helpFlag(arguments: [String]) throws {
        let run = try RawRun.run(arguments)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let text = run.stdoutText + run.stderr
        #expect(text.contains("USAGE"), "\(text)")
        #expect(text.contains("--log-level"), "\(text)")
        #expect(!run.stdout.contains(bytes: "Content-Length"))
    }

    @Test("bad arguments are refused with a message on stderr and nothing on stdout", arguments: [
        ["--frobnicate"], ["--log-level", "loud"], ["--max-message-size", "0"], ["--max-message-size", "lots"],
        ["--max-message-size", "-1K"], ["serve", "extra"],
    ])
    func badArgumentsAreRefused(arguments: [String]) throws {
        let run = try RawRun.run(arguments, input: Self.normalSession)
        #expect(run.status != 0)
        #expect(!run.stderr.isEmpty)
        #expect(run.stdout.isEmpty, "\(run.stdoutText)")
    }

    @Test("--stdio is accepted, with and without the serve subcommand", arguments: [
        ["--stdio"], ["serve", "--stdio"], ["serve"], ["--stdio", "--max-message-size", "64M"],
    ])
    func stdioFlagIsAccepted(arguments: [String]) throws {
        let session = try Session(arguments)
        #expect(try session.initialize()["capabilities"]?["positionEncoding"] == "utf-16")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("at the default log level a normal session writes nothing to stderr")
    func defaultLevelIsQuiet() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("initialized")
        try session.notify("no/such/notification")
        try session.sendBody("{bad json")
        expectError(try session.next(), code: -32700, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
        #expect(session.finalStderr().isEmpty, "stderr: \(session.server.stderrText)")
    }

    @Test("--log-level debug writes logs to stderr, and stdout stays protocol only")
    func debugLevelLogsToStderr() throws {
        let session = try Session(["--log-level", "debug"])
        try session.initialize()
        try session.notify("initialized")
        try session.expectNothingElse()
        try session.shutdownAndExit()
        let stderr = session.stderr(containing: "initialized")
        #expect(stderr.contains("initialized"), "stderr: \(stderr)")
        #expect(stderr.contains("debug"), "stderr: \(stderr)")
    }

    @Test("--log-file writes the logs to that file and nothing to stderr")
    func logFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docsession-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("server.log").path

        let session = try Session(["--log-level", "debug", "--log-file", path])
        try session.initialize()
        try session.notify("initialized")
        try session.expectNothingElse()
        try session.shutdownAndExit()
        let log = try String(contentsOfFile: path, encoding: .utf8)
        #expect(log.contains("initialized"), "log: \(log)")
        #expect(session.finalStderr().isEmpty, "stderr: \(session.server.stderrText)")

        // At the default level the file gets the warnings: here, input ending without shutdown.
        let second = try Session(["--log-file", path])
        try second.initialize()
        try second.finish(status: 1)
        let appended = try String(contentsOfFile: path, encoding: .utf8)
        #expect(appended.hasPrefix(log), "the log file is appended to")
        #expect(appended.dropFirst(log.count).contains("without shutdown"), "log: \(appended)")
        #expect(second.finalStderr().isEmpty, "stderr: \(second.server.stderrText)")
    }

    @Test("a --log-file that cannot be opened is refused before serving")
    func unwritableLogFile() throws {
        let run = try RawRun.run(["--log-file", "/nonexistent-directory/for/docsession.log"], input: Self.normalSession)
        #expect(run.status != 0)
        #expect(run.stderr.contains("/nonexistent-directory/for/docsession.log"), "stderr: \(run.stderr)")
        #expect(run.stdout.isEmpty)
    }

    @Test("fd 1 of the serving process points at stderr, so a stray print cannot reach the protocol stream")
    func strayPrintsGoToStderr() throws {
        let session = try Session()
        try session.initialize()
        let pid = session.server.processIdentifier
        let standardOutput = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/1")
        let standardError = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/2")
        #expect(standardOutput == standardError)
        try session.shutdownAndExit()
    }

    @Test("SIGPIPE and SIGXFSZ are ignored, so a closed pipe or a file-size limit is an error, not a death")
    func signalsIgnored() throws {
        let session = try Session()
        try session.initialize()
        let status = try String(contentsOfFile: "/proc/\(session.server.processIdentifier)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") })
        let mask = try #require(UInt64(line.dropFirst("SigIgn:".count).trimmingCharacters(in: .whitespaces), radix: 16))
        #expect(mask & (1 << (13 - 1)) != 0, "SIGPIPE (13) ignored")
        #expect(mask & (1 << (25 - 1)) != 0, "SIGXFSZ (25) ignored")
        try session.shutdownAndExit()
    }

    @Test("the server survives its stdout reader going away and still exits 0 after shutdown and exit")
    func survivesClosedStdout() throws {
        let run = try RawRun.run([], input: Self.normalSession, closeStdoutEarly: true)
        #expect(run.status == 0, "stderr: \(run.stderr)")
    }

    @Test("a normal session over raw pipes: exit status 0 and stdout strictly framed")
    func normalSessionOverRawPipes() throws {
        let run = try RawRun.run([], input: Self.normalSession)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let messages = try run.strictMessages()
        #expect(messages.map { $0["id"] } == [1, 2, 3])
        #expect(run.stderr.isEmpty)
    }

    @Test("docsession demo runs its scripted session against a fresh server and exits 0")
    func demo() throws {
        let run = try RawRun.run(["demo"])
        #expect(run.status == 0, "stdout: \(run.stdoutText) stderr: \(run.stderr)")
        #expect(run.stdoutText.contains("server exited with status 0"), "\(run.stdoutText)")
        // It saves, shows a failed save with its detail, and closes saving the last edit.
        for shown in [#""reason":"saved""#, #""method":"rename""#, #""code":-32010"#, #""reason":"saveFailed""#,
                      #""syscall":"openat","path":"/sys""#, #""result":{"saved":true}"#, "- pears 🍐\n- milk\n"] {
            #expect(run.stdoutText.contains(shown), "the demo should show \(shown)")
        }
    }

    @Test("docsession demo --managed runs a managed document's session: migration, writes, undo, refusals, the save")
    func managedDemo() throws {
        let run = try RawRun.run(["demo", "--managed"])
        #expect(run.status == 0, "stdout: \(run.stdoutText) stderr: \(run.stderr)")
        #expect(run.stdoutText.contains("server exited with status 0"), "\(run.stdoutText)")
        for shown in [#""kind":"managed""#, #""rows":[[1,"bread",1],[2,"café au lait ☕",0]]"#, #""store":true"#,
                      #""codeName":"SQLITE_CONSTRAINT_UNIQUE""#, #""code":-32030"#, #""method":"exchange""#,
                      "  StoreContent/AdditionalContent/notes.md\n", "  StoreContent/persistentStore\n"] {
            #expect(run.stdoutText.contains(shown), "the managed demo should show \(shown)")
        }
        #expect(!run.stdoutText.contains("persistentStore-wal"), "no -wal file is published")
    }

    // MARK: - Tracing

    /// Takes the next message, which must be a `$/logTrace`; answers its params.
    private func expectTrace(
        _ session: Session, containing text: String, verbose: Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let message = try session.next()
        #expect(message["method"] == "$/logTrace", "expected $/logTrace, got \(message.jsonText)", sourceLocation: sourceLocation)
        #expect(message["id"] == nil, sourceLocation: sourceLocation)
        let params = message["params"]
        #expect(params?["message"]?.stringValue?.contains(text) == true, "\(message.jsonText)", sourceLocation: sourceLocation)
        if verbose {
            #expect(params?["verbose"]?.stringValue != nil, "verbose expected: \(message.jsonText)", sourceLocation: sourceLocation)
        } else {
            #expect(params?["verbose"] == nil, "no verbose expected: \(message.jsonText)", sourceLocation: sourceLocation)
        }
    }

    @Test("$/setTrace messages and verbose make the server send $/logTrace; off stops them")
    func setTrace() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("initialized")

        try session.notify("$/setTrace", ["value": "messages"])
        try session.sendRequest(id: "t1", "probe/one")
        try expectTrace(session, containing: "probe/one", verbose: false)
        try expectTrace(session, containing: "probe/one", verbose: false)
        expectError(try session.next(), code: -32601, id: "t1")

        try session.notify("$/setTrace", ["value": "verbose"])
        try expectTrace(session, containing: "$/setTrace", verbose: false)
        try session.sendRequest(id: "t2", "probe/two", ["x": 1])
        try expectTrace(session, containing: "probe/two", verbose: true)
        try expectTrace(session, containing: "probe/two", verbose: true)
        expectError(try session.next(), code: -32601, id: "t2")

        try session.notify("$/setTrace", ["value": "off"])
        try expectTrace(session, containing: "$/setTrace", verbose: true)
        try session.expectNothingElse()
        try session.notify("some/notification")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    /// Takes the next message and checks it is a `$/logTrace` with exactly this message.
    private func expectExactTrace(
        _ session: Session, _ text: String, verbose: String?, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let message = try session.next()
        #expect(message["method"] == "$/logTrace", "expected $/logTrace, got \(message.jsonText)", sourceLocation: sourceLocation)
        #expect(message["params"]?["message"] == .string(text), "\(message.jsonText)", sourceLocation: sourceLocation)
        #expect(message["params"]?["verbose"] == verbose.map(JSONValue.string), "\(message.jsonText)", sourceLocation: sourceLocation)
    }

    @Test("trace messages follow vscode-jsonrpc's wording; verbose carries params and results as JSON text")
    func traceWording() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("$/setTrace", ["value": "verbose"])
        try session.sendRequest(id: "q", "document/frobnicate", ["path": "a/b"])
        try expectExactTrace(session, "Received request 'document/frobnicate - (q)'.", verbose: #"{"path":"a/b"}"#)
        let sending = try session.next()
        let text = sending["params"]?["message"]?.stringValue ?? ""
        #expect(text.hasPrefix("Sending response 'document/frobnicate - (q)'. Processing request took "), "\(text)")
        #expect(text.hasSuffix("ms"), "\(text)")
        #expect(sending["params"]?["verbose"] == #"{"code":-32601,"message":"Method not found: document/frobnicate"}"#)
        expectError(try session.next(), code: -32601, id: "q")
        try session.sendRequest(id: 7, "probe")
        try expectExactTrace(session, "Received request 'probe - (7)'.", verbose: "null")
        _ = try session.next()
        expectError(try session.next(), code: -32601, id: 7)
        try session.notify("initialized")
        try expectExactTrace(session, "Received notification 'initialized'.", verbose: "null")
        try session.notify("$/setTrace", ["value": "messages"])
        try expectExactTrace(session, "Received notification '$/setTrace'.", verbose: #"{"value":"messages"}"#)
        try session.notify("exit", [:])
        try expectExactTrace(session, "Received notification 'exit'.", verbose: nil)
        try session.finish(status: 1)
    }

    @Test("a batch's elements are traced one by one, before the batch's answer; parse errors and invalid messages are not")
    func tracingOfBatchesAndBadInput() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("$/setTrace", ["value": "messages"])
        try session.sendBody("[" + requestText(id: 1, method: "a") + "," + notificationText(method: "b") + ",7]")
        try expectExactTrace(session, "Received request 'a - (1)'.", verbose: nil)
        #expect(try session.next()["params"]?["message"]?.stringValue?.hasPrefix("Sending response 'a - (1)'.") == true)
        try expectExactTrace(session, "Received notification 'b'.", verbose: nil)
        let batch = try session.next()
        #expect(batch.arrayValue?.count == 2, "\(batch.jsonText)")
        try session.sendBody("{oops")
        expectError(try session.next(), code: -32700, id: .null)
        try session.sendBody(#"{"jsonrpc":"1.0","id":3,"method":"x"}"#)
        expectError(try session.next(), code: -32600, id: 3)
        try session.sendBody(#"{"jsonrpc":"2.0","id":3,"result":1}"#)
        try session.notify("$/setTrace", ["value": "off"])
        try expectExactTrace(session, "Received notification '$/setTrace'.", verbose: nil)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("notifications dropped after shutdown are still traced")
    func droppedNotificationsAreTraced() throws {
        let session = try Session()
        try session.sendRequest(id: "i", "initialize", ["trace": "messages"])
        #expect(try session.next()["params"]?["message"]?.stringValue?.hasPrefix("Sending response 'initialize - (i)'.") == true)
        expectResult(try session.next(), id: "i")
        try session.sendRequest(id: "s", "shutdown")
        try expectExactTrace(session, "Received request 'shutdown - (s)'.", verbose: nil)
        _ = try session.next()
        #expect(expectResult(try session.next(), id: "s") == .null)
        try session.notify("initialized")
        try expectExactTrace(session, "Received notification 'initialized'.", verbose: nil)
        try session.notify("exit")
        try expectExactTrace(session, "Received notification 'exit'.", verbose: nil)
        try session.finish(status: 0)
    }

    @Test("a bad $/setTrace value is ignored with a warning on stderr")
    func badSetTraceIsIgnored() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("$/setTrace", ["value": "loud"])
        try session.notify("$/setTrace", [:])
        try session.notify("$/setTrace", ["value": 1])
        try session.expectNothingElse()
        try session.shutdownAndExit()
        #expect(session.stderr(containing: "$/setTrace").contains("$/setTrace"))
    }

    @Test("initialize with a trace level turns tracing on for the requests that follow")
    func initializeTraceParam() throws {
        let session = try Session()
        try session.sendRequest(id: "init", "initialize", ["trace": "messages"])
        // Only $/logTrace may come before the answer to initialize.
        while true {
            let message = try session.next()
            if message["method"] == "$/logTrace" { continue }
            expectResult(message, id: "init")
            break
        }
        try session.sendRequest(id: "after", "probe")
        try expectTrace(session, containing: "probe", verbose: false)
        try expectTrace(session, containing: "probe", verbose: false)
        expectError(try session.next(), code: -32601, id: "after")
        try session.notify("$/setTrace", ["value": "off"])
        try expectTrace(session, containing: "$/setTrace", verbose: false)
        try session.shutdownAndExit()
    }
}

/// `serve` re-executes itself once with glibc's per-thread cache sized for json-c's allocations
/// (Execution's MallocTuning): the same process, the same session, a setting the user made kept.
@Suite("Process hygiene: the allocator setting")
struct MallocTuningTests {
    /// GLIBC_TUNABLES in the environment of the process the client started, as the kernel has it
    /// once the server answers (an exec keeps the process id and replaces the environment).
    static func tunables(_ given: String?) throws -> String? {
        var environment = Session.environment
        environment["GLIBC_TUNABLES"] = given
        let session = try Session([], environment: environment)
        let pid = session.server.processIdentifier
        // Answering initialize means the server runs its session: any re-execution is behind it.
        #expect(try session.initialize()["capabilities"] != nil)
        let raw = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        let entries = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        let value = entries.first { $0.hasPrefix("GLIBC_TUNABLES=") }.map { String($0.dropFirst("GLIBC_TUNABLES=".count)) }
        try session.shutdownAndExit()
        return value
    }

    @Test("without GLIBC_TUNABLES: the server runs with glibc.malloc.tcache_count=32, in the process the client started")
    func added() throws {
        #expect(try Self.tunables(nil) == "glibc.malloc.tcache_count=32")
    }

    @Test("other tunables: the setting put first; a tcache_count the user chose is left alone")
    func kept() throws {
        // glibc, parsing GLIBC_TUNABLES at start, ends the string the kernel shows after the first
        // tunable (it works on a copy, which keeps them all): only the first can be seen here.
        #expect(try Self.tunables("glibc.malloc.mmap_threshold=1000000") == "glibc.malloc.tcache_count=32")
        #expect(try Self.tunables("glibc.malloc.tcache_count=7") == "glibc.malloc.tcache_count=7")
    }
}
