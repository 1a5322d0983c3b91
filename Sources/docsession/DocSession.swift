import ArgumentParser
import Client
import Execution
import FileStore
import JSONRPC
import Logging
import Server
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The `docsession` command: argument parsing and wiring only; the work lives in the modules.
@main
struct DocSession: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docsession",
        abstract: "A document-session server speaking JSON-RPC 2.0 over stdio with LSP's framing.",
        discussion: """
            With no subcommand, serves one client on stdin and stdout (the same as `docsession serve`).
            Logs go to stderr (warnings and above unless --log-level says otherwise) or to --log-file.
            """,
        version: Server.version,
        subcommands: [Serve.self, Demo.self, Call.self, Run.self, ReplayCommand.self, Daemon.self, Connect.self, Coordinate.self],
        defaultSubcommand: Serve.self
    )
}

/// `docsession serve`: the server itself.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve one client over stdin and stdout (the default).")

    @Flag(name: .long, help: "Talk over stdin and stdout (the default and only transport).")
    var stdio = false

    @Option(name: .long, help: "Lowest level logged: trace, debug, info, notice, warning, error, critical.")
    var logLevel: LogLevelArgument = LogLevelArgument(level: .warning)

    @Option(name: .long, help: "Append logs to this file instead of stderr.")
    var logFile: String?

    @Option(name: .long, help: "Largest message accepted, in bytes; K, M and G suffixes allowed.")
    var maxMessageSize: ByteCount = ByteCount(bytes: 64 << 20)

    @Option(name: .long, help: "Largest file read whole (a document's, a version's, a package entry's), in bytes; K, M and G suffixes allowed (default: a quarter of the memory available at start, or of the address-space limit when lower; initializationOptions.maxFileSize overrides it).")
    var maxFileSize: ByteCount?

    @Option(name: .long, help: "Where to keep earlier versions of documents (default: $XDG_STATE_HOME/docsession, else ~/.local/state/docsession).")
    var stateDir: String?

    @Option(name: .customLong("root"), help: ArgumentHelp(
        "A directory every path of every request must stay beneath (repeatable; symlinks and '..' cannot lead out). Without it, the user's own permissions apply.",
        valueName: "dir"))
    var roots: [String] = []

    @Flag(name: .long, help: "Do not watch the documents' files for changes by other programs.")
    var noWatch = false

    @OptionGroup var runtime: RuntimeDirectoryOptions

    @Flag(name: .long, help: "Do not take each file's lock under the runtime directory while saving (saves still lock their directory), and do not listen for `docsession coordinate` there: then neither other servers' saves nor coordinated commands reach this server.")
    var noFileLocks = false

    @Flag(name: .long, help: "Do not journal unsaved changes (by default they are kept under the state directory's journal/, flushed within initializationOptions.flushDelay, so that they survive the process's death).")
    var noJournal = false

    @Option(name: .long, help: ArgumentHelp(
        "Append every message, both ways, to this file as JSON Lines (vscode-jsonrpc's JSON trace).",
        discussion: """
            One record per message: {"isLSPMessage": true, "type": T, "message": {...}, "timestamp": MS}, \
            T from the client's point of view (send-request, send-notification, send-response for what \
            the client sent; receive-response, receive-notification, receive-request for what the server \
            wrote). A batch and its answer are recorded one record per message. Input that is not a \
            JSON-RPC message is recorded as "send-invalid" with the raw body as a JSON string; a framing \
            fault, which has no body, with "message": null and "fault". One write(2) per record.
            """, valueName: "file"))
    var record: String?

    func run() async throws {
        // First, before anything is read or opened: glibc's per-thread cache sized for json-c's
        // allocations (see MallocTuning; re-executes once).
        MallocTuning.reexecWithLargerThreadCache()
        // A file-size limit or a closed pipe must surface as EFBIG or EPIPE, not kill the server.
        // (Neither can fail: both signals can be ignored.)
        try? ignoreSignal(SIGPIPE)
        try? ignoreSignal(SIGXFSZ)

        // The protocol gets its own duplicate of stdout; fd 1 then points at stderr, so a stray
        // print anywhere in the process cannot corrupt the protocol stream. The duplicate is the
        // writer's until the process exits (`take()`: nothing closes it before).
        let protocolOutput: Int32
        do {
            protocolOutput = try Descriptor.duplicate(.standardOutput, atLeast: 3).take()
        } catch {
            throw ValidationError("cannot duplicate stdout: errno \(error.errno.rawValue)")
        }
        do {
            try duplicate(.standardError, onto: .standardOutput)
        } catch {
            throw ValidationError("cannot redirect stdout: errno \(error.errno.rawValue)")
        }

        let logger = try LogSetup.bootstrap(level: logLevel.level, file: logFile)
        if let maxFileSize { FileSizeLimit.set(maxFileSize.bytes) }
        // Not a usage error: the file cannot be opened (printed as "Error: ...", exit status 1).
        let recorder = try record.map { path in try Recorder(path: path) }
        // A root that cannot be used is a usage error, before serving.
        let sandbox = try SandboxArgument.roots(roots)
        let writer = MessageWriter(fileDescriptor: protocolOutput, recorder: recorder)
        let server = Server(
            writer: writer, logger: logger,
            configuration: Server.Configuration(
                maxMessageSize: maxMessageSize.bytes, stateDirectory: stateDir ?? StateDirectory.default,
                watchFiles: !noWatch, roots: sandbox, journal: !noJournal, fileLocks: noFileLocks ? nil : runtime.fileLocks(logger: logger)))
        // SIGTERM, SIGHUP and SIGINT end the process as the end of input would, after the journals
        // of unsaved changes are flushed (status 128 + the signal, as the shell reports it).
        do {
            try onSignals([SIGTERM, SIGHUP, SIGINT]) { signal in
                logger.info("signal \(signal): journals flushed, exiting")
                _ = server.flushJournals(within: .seconds(5))
                CoordinatorEndpoint.remove()
                Glibc.exit(128 + signal)
            }
        } catch {
            logger.warning("signals end the process without flushing the journals: \(error)")
        }
        let connection = Connection(
            input: STDIN_FILENO, writer: writer, maxMessageSize: maxMessageSize.bytes, logger: logger, recorder: recorder)
        // `docsession coordinate` reaches this server's documents through a socket of its own.
        if !noFileLocks { CoordinatorEndpoint.start(runtime: runtime.directory, server: server, logger: logger) }
        let status = await connection.run(handler: server)
        // After `exit`: the journals kept (hot exit) or dropped by `shutdown` are flushed.
        _ = server.flushJournals(within: .seconds(5))
        CoordinatorEndpoint.remove()
        Glibc.exit(status)
    }
}

/// `docsession demo`: the README's first command.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a scripted session against a fresh server and print the traffic.")

    @Flag(name: .long, help: "A managed document instead: a SQLite store in a package, undo, a refused statement, the save.")
    var managed = false

    func run() throws {
        let status = try Client.Demo(output: { print($0) }, script: managed ? .managed : .text)
            .run(executable: CurrentExecutable.path, arguments: ["serve"])
        if status != 0 { throw ExitCode(status) }
    }
}

/// `docsession replay FILE`: a recorded session against a fresh server (the work is Client.Replay).
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay a session recorded with --record against a fresh server and compare the answers.",
        discussion: Client.Replay.discussion)

    @Argument(help: "The recording (JSON Lines, as `serve --record` writes them).")
    var file: String

    @Flag(name: .long, help: "Rewrite FILE with what the server answers now (keeping ${ROOT}); exit 0.")
    var update = false

    @Option(name: .long, help: ArgumentHelp("The directory the recording was made in, read as ${ROOT}.", valueName: "dir"))
    var root: String?

    @Option(name: .customLong("server-arg"), parsing: .unconditionalSingleValue, help: ArgumentHelp("An argument for the server (repeatable), after `serve --state-dir ROOT/.state`.", valueName: "arg"))
    var serverArgs: [String] = []

    @Option(name: .long, help: "Seconds to wait for each response.")
    var timeout: Double = 10

    func run() throws {
        let status = Client.Replay(
            file: file, update: update, recordedRoot: root, executable: CurrentExecutable.path, serverArguments: serverArgs,
            timeout: timeout, output: { print($0) }, errors: { StandardError.write($0) }
        ).run()
        if status != 0 { throw ExitCode(status) }
    }
}

/// The XDG base directory specification's state directory for the server.
enum StateDirectory {
    static var `default`: String? {
        if let state = getenv("XDG_STATE_HOME").map({ String(cString: $0) }), state.hasPrefix("/") {
            return state + "/docsession"
        }
        guard let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/") else { return nil }
        return home + "/.local/state/docsession"
    }
}
