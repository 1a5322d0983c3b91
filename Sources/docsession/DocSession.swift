import ArgumentParser
import Client
import JSONRPC
import Logging
import Server

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
        subcommands: [Serve.self, Demo.self],
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

    @Option(name: .long, help: "Where to keep earlier versions of documents (default: $XDG_STATE_HOME/docsession, else ~/.local/state/docsession).")
    var stateDir: String?

    @Flag(name: .long, help: "Do not watch the documents' files for changes by other programs.")
    var noWatch = false

    func run() async throws {
        // A file-size limit or a closed pipe must surface as EFBIG or EPIPE, not kill the server.
        signal(SIGPIPE, SIG_IGN)
        signal(SIGXFSZ, SIG_IGN)

        // The protocol gets its own duplicate of stdout; fd 1 then points at stderr, so a stray
        // print anywhere in the process cannot corrupt the protocol stream.
        let protocolOutput = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        guard protocolOutput >= 0 else { throw ValidationError("cannot duplicate stdout: errno \(errno)") }
        guard dup2(STDERR_FILENO, STDOUT_FILENO) >= 0 else { throw ValidationError("cannot redirect stdout: errno \(errno)") }

        let logger = try LogSetup.bootstrap(level: logLevel.level, file: logFile)
        let writer = MessageWriter(fileDescriptor: protocolOutput)
        let server = Server(
            writer: writer, logger: logger,
            configuration: Server.Configuration(
                maxMessageSize: maxMessageSize.bytes, stateDirectory: stateDir ?? StateDirectory.default,
                watchFiles: !noWatch))
        let connection = Connection(
            input: STDIN_FILENO, writer: writer, maxMessageSize: maxMessageSize.bytes, logger: logger)
        let status = await connection.run(handler: server)
        Glibc.exit(status)
    }
}

/// `docsession demo`: the README's first command.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a scripted session against a fresh server and print the traffic.")

    func run() throws {
        let status = try Client.Demo(output: { print($0) }).run(executable: CurrentExecutable.path, arguments: ["serve"])
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
