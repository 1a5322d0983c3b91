import ArgumentParser
import Client
import Execution
import FileStore
import JSON
import Logging
import Server
import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Issue 19's commands: `docsession daemon` (one server for every editor of this user, on a Unix
// socket), `docsession connect` (an editor's stdio bridged to it, the daemon started when none
// runs) and `docsession coordinate` (a command run under a coordination lease).

/// `--runtime-dir`, shared by the three commands.
struct RuntimeDirectoryOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The daemon's directory, holding daemon.sock and daemon.lock (default: $XDG_RUNTIME_DIR/docsession, else /tmp/docsession-$UID). It must be a directory (not a link) owned by you with mode 0700; one that is not is refused, never repaired.",
        valueName: "dir"))
    var runtimeDir: String?

    var directory: RuntimeDirectory {
        RuntimeDirectory(path: runtimeDir.map(CurrentDirectory.absolute) ?? RuntimeDirectory.defaultPath())
    }

    /// The locks per file under the directory (made when missing, and checked), which every save
    /// and `coordinate` take; nil with a warning when the directory cannot be used (saves then
    /// take only their directory's lock, and a coordinated command does not reach this server).
    func fileLocks(logger: Logger) -> FileLocks? {
        switch FileLocks.open(runtimeDirectory: directory.path) {
        case .success(let locks): return locks
        case .failure(let error):
            logger.warning("saves do not take their file's lock across processes: \(error.message)")
            return nil
        }
    }
}

/// The server options of `serve` that a daemon takes, and that `connect` passes on to a daemon it
/// starts (they do not reach a daemon already running).
struct DaemonServerOptions: ParsableArguments {
    @Option(name: .long, help: "Where to keep earlier versions and journals (default: $XDG_STATE_HOME/docsession, else ~/.local/state/docsession).")
    var stateDir: String?

    @Option(name: .long, help: "Lowest level logged: trace, debug, info, notice, warning, error, critical (default: warning).")
    var logLevel: LogLevelArgument?

    @Option(name: .long, help: "Append the daemon's logs to this file (a daemon started by connect has no stderr: without it, its logs are lost).")
    var logFile: String?

    @Option(name: .long, help: "Largest message accepted, in bytes; K, M and G suffixes allowed (default: 64M).")
    var maxMessageSize: ByteCount?

    @Option(name: .long, help: "Largest file read whole, in bytes; K, M and G suffixes allowed (default: derived from memory, as for serve).")
    var maxFileSize: ByteCount?

    @Option(name: .customLong("root"), help: ArgumentHelp(
        "A directory every path of every request must stay beneath (repeatable), as for serve.", valueName: "dir"))
    var roots: [String] = []

    @Flag(name: .long, help: "Do not watch the documents' files for changes by other programs.")
    var noWatch = false

    @Flag(name: .long, help: "Do not journal unsaved changes.")
    var noJournal = false

    var level: Logger.Level { logLevel?.level ?? .warning }

    /// The options given, as arguments for the daemon `connect` starts; paths made absolute (the
    /// daemon works from `/`).
    var arguments: [String] {
        var arguments: [String] = []
        if let stateDir { arguments += ["--state-dir", CurrentDirectory.absolute(stateDir)] }
        if let logLevel { arguments += ["--log-level", logLevel.level.rawValue] }
        if let logFile { arguments += ["--log-file", CurrentDirectory.absolute(logFile)] }
        if let maxMessageSize { arguments += ["--max-message-size", String(maxMessageSize.bytes)] }
        if let maxFileSize { arguments += ["--max-file-size", String(maxFileSize.bytes)] }
        for root in roots { arguments += ["--root", CurrentDirectory.absolute(root)] }
        if noWatch { arguments.append("--no-watch") }
        if noJournal { arguments.append("--no-journal") }
        return arguments
    }

    /// The configuration every connection's server gets; a root that cannot be used is a usage error.
    func configuration() throws -> Server.Configuration {
        let sandbox = try SandboxArgument.roots(roots)
        if let maxFileSize { FileSizeLimit.set(maxFileSize.bytes) }
        return Server.Configuration(
            maxMessageSize: maxMessageSize?.bytes ?? 64 << 20,
            stateDirectory: stateDir.map(CurrentDirectory.absolute) ?? StateDirectory.default,
            watchFiles: !noWatch, roots: sandbox, journal: !noJournal)
    }
}

// MARK: - docsession daemon

/// `docsession daemon`: one server process for every editor of this user, on a Unix socket.
struct Daemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve every editor of this user on a Unix socket (docsession connect starts it when none runs).",
        discussion: """
            Listens on DIR/daemon.sock (bound under umask 077; every connection's peer checked with \
            SO_PEERCRED: another user's is refused and logged). DIR/daemon.lock, locked for the \
            daemon's life, holds its pid: a second daemon exits with status 75, and a socket left by \
            a killed daemon is replaced without a prompt. SIGTERM, SIGHUP and SIGINT flush the \
            journals, remove the socket and exit with 128 + the signal. Exit status 1: the runtime \
            directory is refused or the socket cannot be made.
            """)

    @OptionGroup var runtime: RuntimeDirectoryOptions

    @OptionGroup var server: DaemonServerOptions

    @Option(name: .long, help: ArgumentHelp(
        "Exit (status 0, socket removed) once no connection has been open for this many seconds; 0: never.",
        valueName: "seconds"))
    var idleExit: Int = 0

    func validate() throws {
        if idleExit < 0 { throw ValidationError("--idle-exit must be 0 or more seconds") }
    }

    func run() async throws {
        // As serve: glibc's thread cache sized for json-c (re-executes once), and a full disk or a
        // closed connection surfacing as EFBIG or EPIPE.
        MallocTuning.reexecWithLargerThreadCache()
        try? ignoreSignal(SIGPIPE)
        try? ignoreSignal(SIGXFSZ)

        let directory = runtime.directory
        do {
            try directory.prepare()
        } catch {
            StandardError.write("docsession daemon: \(error.message)")
            throw ExitCode(1)
        }
        let lock: DaemonLock
        do {
            switch try directory.acquireLock() {
            case .acquired(let acquired):
                lock = acquired
            case .held(let holder):
                let pid = holder.map(String.init) ?? "unknown"
                StandardError.write("docsession daemon: a daemon is already running (pid \(pid)) on \(directory.socketPath)")
                throw ExitCode(DaemonConnection.alreadyRunningStatus)
            }
        } catch let error as FileSystemError {
            StandardError.write("docsession daemon: \(error.message)")
            throw ExitCode(1)
        }

        let logger = try LogSetup.bootstrap(level: server.level, file: server.logFile)
        var configuration = try server.configuration()
        configuration.fileLocks = runtime.fileLocks(logger: logger)
        let hub = Hub(configuration: configuration, logger: logger)

        // The lock is ours: whatever is at the socket's path is a dead daemon's (or garbage).
        let socketPath = directory.socketPath
        let daemon: DaemonProcess
        do {
            daemon = try DaemonProcess.listening(on: socketPath, lock: lock, hub: hub, logger: logger)
        } catch {
            StandardError.write("docsession daemon: cannot listen on \(socketPath): \(error)")
            throw ExitCode(1)
        }

        do {
            try onSignals([SIGTERM, SIGHUP, SIGINT]) { signal in
                daemon.end(status: 128 + signal, reason: "signal \(signal)")
            }
        } catch {
            logger.warning("signals end the daemon without flushing the journals or removing the socket: \(error)")
        }
        LoopExecutor.shared.addReadable(daemon.listenerDescriptor) {
            daemon.acceptWaiting()
            return true
        }
        if idleExit > 0 {
            let limit = Duration.seconds(idleExit)
            try startThread(name: "ds-idle-exit") {
                while true {
                    usleep(250_000)
                    daemon.endIfIdle(for: limit)
                }
            }
        }
        logger.info("daemon started: pid \(getpid()), socket \(socketPath)")
        // Every path it was given is absolute by now: the daemon holds no directory of the
        // caller's busy (an unmount, say).
        _ = chdir("/")
        while true {
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}

/// The running daemon's state: the listener, its socket's identity, the open connections (for
/// `--idle-exit`), and the one way out.
final class DaemonProcess: Sendable {
    private let listener: Descriptor
    private let socketPath: String
    private let identity: (device: UInt, inode: UInt)
    private let lock: DaemonLock
    private let hub: Hub
    private let logger: Logger
    private let user = geteuid()
    /// Connections accepted and not yet ended, since when there has been none, and the idle end's
    /// steps: the socket removed (`closing`: no new connection can come, those already queued are
    /// still served), then nothing left to accept (`exiting`: nothing is accepted any more).
    private let connections = Mutex<ConnectionState>(ConnectionState())

    private struct ConnectionState {
        var open = 0
        var idleSince: ContinuousClock.Instant? = .now
        var closing = false
        var exiting = false
    }
    private let ending = Atomic<Bool>(false)

    /// Listens on `socketPath`, replacing whatever is there (the caller holds the lock).
    static func listening(on socketPath: String, lock: DaemonLock, hub: Hub, logger: Logger) throws(SystemCallError) -> DaemonProcess {
        do {
            try removeFile(socketPath)
        } catch where error.errno == .noSuchFileOrDirectory {}
        let listener = try UnixSocket.listen(path: socketPath)
        let status = try fileStatus(socketPath, followingSymlinks: false)
        return DaemonProcess(
            listener: listener, socketPath: socketPath, identity: (UInt(status.st_dev), UInt(status.st_ino)), lock: lock,
            hub: hub, logger: logger)
    }

    private init(
        listener: consuming Descriptor, socketPath: String, identity: (device: UInt, inode: UInt), lock: DaemonLock,
        hub: Hub, logger: Logger
    ) {
        self.listener = listener
        self.socketPath = socketPath
        self.identity = identity
        self.lock = lock
        self.hub = hub
        self.logger = logger
    }

    var listenerDescriptor: Int32 { listener.rawValue }

    /// Accepts every waiting connection (the loop's thread, when the listener is readable): one
    /// from another user is refused (closed without a byte, logged), the others served by the hub.
    func acceptWaiting() {
        while true {
            guard let connection = nextConnection() else { return }
            let peer: PeerCredentials
            do {
                peer = try connection.peerCredentials()
            } catch {
                logger.warning("refused a connection whose peer is unknown: \(error)")
                connectionEnded()
                continue
            }
            guard peer.user == user else {
                logger.warning("refused a connection from uid \(peer.user) (pid \(peer.process)): this daemon serves uid \(user) only")
                connectionEnded()
                continue
            }
            let descriptor = connection.take()  // the hub's: it closes it when the connection ends
            let hub = self.hub
            Task {
                await hub.serve(descriptor: descriptor, peerProcess: peer.process)
                self.connectionEnded()
            }
        }
    }

    /// The next waiting connection, or nil when none waits or accepting fails (out of descriptors,
    /// say: the connection stays queued and is tried again; a pause keeps the loop from spinning).
    /// It counts as open from here (under the same lock as the idle end's decision, so that the
    /// daemon never ends with a connection accepted and not yet served).
    private func nextConnection() -> Descriptor? {
        do {
            return try connections.withLock { state throws(SystemCallError) -> Descriptor? in
                if state.exiting { return nil }
                switch try listener.acceptConnection(path: socketPath) {
                case .none:
                    return nil
                case .some(let connection):
                    state.open += 1
                    state.idleSince = nil
                    return connection
                }
            }
        } catch {
            logger.error("cannot accept a connection: \(error)")
            usleep(50_000)
            return nil
        }
    }

    private func connectionEnded() {
        connections.withLock { state in
            state.open -= 1
            if state.open == 0 { state.idleSince = .now }
        }
    }

    /// Ends the daemon when no connection has been open for `limit` (called every quarter second):
    /// first the socket is removed, so that no new connection can come (a `connect` meanwhile
    /// starts a daemon, which takes over once this one's lock is released); a connection already
    /// queued is still accepted and served; once none is open and none waits, the process ends.
    func endIfIdle(for limit: Duration) {
        enum Step { case wait, close, exit }
        let step = connections.withLock { state -> Step in
            guard state.open == 0, !state.exiting else { return .wait }
            if state.closing {
                // Still queued from before the socket went: accepted by the loop first.
                let waiting = (try? pollDescriptor(listener.unowned, events: Int16(POLLIN), timeoutMilliseconds: 0)) ?? 0
                if waiting & Int16(POLLIN) != 0 { return .wait }
                state.exiting = true
                return .exit
            }
            guard let since = state.idleSince, ContinuousClock.now - since >= limit else { return .wait }
            state.closing = true
            return .close
        }
        switch step {
        case .wait:
            return
        case .close:
            logger.info("no connection for \(limit): socket removed, ending")
            removeSocketIfOurs()
        case .exit:
            end(status: 0, reason: "idle for \(limit)")
        }
    }

    /// Removes the socket when it is still the one this daemon bound (it holds the lock, so no
    /// other daemon can have bound one there since).
    private func removeSocketIfOurs() {
        if let status = try? fileStatus(socketPath, followingSymlinks: false),
           UInt(status.st_dev) == identity.device, UInt(status.st_ino) == identity.inode {
            try? removeFile(socketPath)
        }
    }

    /// The one way out: the journals flushed, the socket removed when it is still this daemon's,
    /// the process ended with `status`. A second caller returns at once (the first one exits).
    func end(status: Int32, reason: String) {
        guard ending.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else { return }
        logger.info("daemon ending (\(reason)): journals flushed, socket removed")
        _ = hub.flushJournals(within: .seconds(5))
        removeSocketIfOurs()
        Glibc.exit(status)
    }
}

// MARK: - docsession connect

/// `docsession connect`: an editor's stdin and stdout bridged to the daemon.
struct Connect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bridge stdin and stdout to the daemon, starting it when none runs (for editors: replaces `docsession serve`).",
        discussion: """
            Bytes pass unchanged both ways; at the end of stdin the daemon is told so and its \
            answers still come. Exit status 0 when the daemon closes the connection (after exit), \
            1 when the runtime directory is refused, no daemon could be reached or started, or the \
            connection failed. The server options are given to a daemon this command starts; a \
            running daemon keeps its own.
            """)

    @OptionGroup var runtime: RuntimeDirectoryOptions

    @Flag(name: .long, help: "Accepted for editors that pass it (as serve does); stdio is the only transport.")
    var stdio = false

    @Flag(name: .long, help: "Do not start a daemon when none runs: fail instead.")
    var noStart = false

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for a daemon this command starts to listen.", valueName: "seconds"))
    var startTimeout: Double = 10

    @OptionGroup var server: DaemonServerOptions

    func run() throws {
        try? ignoreSignal(SIGPIPE)
        let directory = runtime.directory
        do {
            _ = try directory.checkIfPresent()
        } catch {
            StandardError.write("docsession connect: \(error.message)")
            throw ExitCode(1)
        }
        let socket = reachDaemon(directory)
        let status = Bridge.run(socket: socket, errors: { StandardError.write("docsession connect: \($0)") })
        // The stdin thread may still be blocked reading: the process ends here.
        Glibc.exit(status)
    }

    /// A connection to the daemon, started when none runs (unless --no-start); exits 1 otherwise.
    private func reachDaemon(_ directory: RuntimeDirectory) -> Descriptor {
        do throws(DaemonConnection.Failure) {
            if noStart {
                switch try DaemonConnection.connect(socketPath: directory.socketPath) {
                case .some(let connection):
                    return connection
                case .none:
                    fail("no daemon is listening on \(directory.socketPath) (and --no-start)")
                }
            }
            // With --log-file, the daemon's stdout and stderr go there too (a crash's last words);
            // this process's descriptor of it is left to its exit.
            let output = server.logFile.flatMap { path in
                (try? Descriptor.open(
                    CurrentDirectory.absolute(path), .writeOnly, options: [.create, .append],
                    permissions: FilePermissions(rawValue: 0o644)))?.take()
            }.map(FileDescriptor.init(rawValue:))
            return try DaemonConnection.connectStarting(
                socketPath: directory.socketPath, executable: CurrentExecutable.path,
                arguments: ["daemon", "--runtime-dir", directory.path] + server.arguments, output: output,
                timeout: startTimeout)
        } catch {
            fail("\(error)")
        }
    }

    private func fail(_ message: String) -> Never {
        StandardError.write("docsession connect: \(message)")
        Glibc.exit(1)
    }
}

// MARK: - docsession coordinate

/// `docsession coordinate`: a command run under a coordination lease on a file.
struct Coordinate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command under a coordination lease on FILE, so that editors attached to the daemon save first or stand aside.",
        usage: "docsession coordinate (--read | --write | --delete | --move <dest>) <file> [--runtime-dir <dir>] [--verbose] -- <command> [<args>...]",
        discussion: """
            --read: every editor holding FILE saves it first. --write, --delete, --move: they stop \
            editing it until the command ends, then read it again (or follow the deletion or the \
            move). The command runs with this process's stdin, stdout and stderr; the lease ends \
            when it does (or when this process dies). When no daemon runs, no editor holds FILE \
            through one, and the command runs at once. Exit status: the command's (128 + the \
            signal when one killed it; 127 when it cannot be started), or 1 when the lease is \
            refused (the daemon's error printed, the command not run).
            """)

    @Flag(name: .long, help: "Editors holding FILE save their unsaved changes first.")
    var read = false

    @Flag(name: .long, help: "Editors holding FILE stand aside while the command writes it.")
    var write = false

    @Flag(name: .long, help: "Editors holding FILE stand aside while the command deletes it.")
    var delete = false

    @Option(name: .long, help: ArgumentHelp("Editors holding FILE stand aside while the command moves it to DEST.", valueName: "dest"))
    var move: String?

    @Argument(help: "The file the command reads, writes, deletes or moves.")
    var file: String

    @OptionGroup var runtime: RuntimeDirectoryOptions

    @Flag(name: .long, help: "Say on stderr when no daemon runs and the command runs without a lease.")
    var verbose = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        let intents = [read, write, delete, move != nil].filter { $0 }.count
        guard intents == 1 else { throw ValidationError("give exactly one of --read, --write, --delete and --move DEST") }
        guard !command.isEmpty else { throw ValidationError("give the command to run after --") }
    }

    private var intent: String { read ? "read" : write ? "write" : delete ? "delete" : "move" }

    func run() throws {
        try? ignoreSignal(SIGPIPE)
        let directory = runtime.directory
        // Whoever holds FILE: the daemon (its clients' documents), and every server of its own
        // (an editor's `docsession serve`) listening under servers/.
        var parties: [(name: String, client: DaemonClient)] = []
        do throws(DaemonConnection.Failure) {
            if let socket = daemonConnection(directory) { parties.append(("the daemon", try DaemonClient(socket: socket))) }
            parties += try serverConnections(directory)
        } catch {
            StandardError.write("docsession coordinate: \(error)")
            throw ExitCode(1)
        }
        if parties.isEmpty {
            if verbose {
                StandardError.write("docsession coordinate: no daemon is listening on \(directory.socketPath): running the command without a lease")
            }
            Glibc.exit(runLocked())
        }
        // Every lease first; a refusal ends those granted and runs nothing.
        var leases: [(client: DaemonClient, lease: String)] = []
        for (name, client) in parties {
            var lease: String? = nil
            do throws(DaemonConnection.Failure) {
                lease = try takeLease(client, from: name)
            } catch {
                StandardError.write("docsession coordinate: \(name): \(error)")
            }
            guard let lease else {
                for (granted, id) in leases { endLease(granted, id) }
                for (_, other) in parties { close(other) }
                throw ExitCode(1)
            }
            leases.append((client, lease))
        }
        let status = runLocked()
        // The command has run: whatever fails from here is said, and its status is still the answer.
        for (client, lease) in leases { endLease(client, lease) }
        for (_, client) in parties { close(client) }
        Glibc.exit(status)
    }

    /// A connection to the daemon, nil when none runs; exits 1 when the runtime directory is
    /// refused or connecting fails otherwise.
    private func daemonConnection(_ directory: RuntimeDirectory) -> Descriptor? {
        do {
            guard try directory.checkIfPresent() else { return nil }
        } catch {
            StandardError.write("docsession coordinate: \(error.message)")
            Glibc.exit(1)
        }
        do throws(DaemonConnection.Failure) {
            return try DaemonConnection.connect(socketPath: directory.socketPath)
        } catch {
            StandardError.write("docsession coordinate: \(error)")
            Glibc.exit(1)
        }
    }

    /// Connections to the servers of their own listening under `servers/` (their sockets named by
    /// pid); a socket nobody listens on any more (a killed server's) is removed.
    private func serverConnections(_ directory: RuntimeDirectory) throws(DaemonConnection.Failure) -> [(name: String, client: DaemonClient)] {
        let servers = directory.path + "/servers"
        guard (try? directory.checkIfPresent()) == true, let names = try? listDirectory(servers) else { return [] }
        var connections: [(name: String, client: DaemonClient)] = []
        for name in names.sorted() where name.hasSuffix(".sock") {
            let path = servers + "/" + name
            let socket: Descriptor
            do {
                socket = try UnixSocket.connect(path: path)
            } catch where error.errno == .connectionRefused {
                try? removeFile(path)
                continue
            } catch {
                if verbose { StandardError.write("docsession coordinate: \(path): \(error)") }
                continue
            }
            connections.append(("the server of process \(name.dropLast(5))", try DaemonClient(socket: socket)))
        }
        return connections
    }

    /// initialize and the lease; answers its id, or nil when it was refused (said on stderr).
    private func takeLease(_ client: DaemonClient, from name: String) throws(DaemonConnection.Failure) -> String? {
        let initialize: JSONObject = [
            "processId": .integer(Int64(getpid())), "clientInfo": ["name": "docsession coordinate"], "capabilities": [:],
        ]
        if case .error(let code, let message, let data) = try client.request("initialize", .object(initialize)) {
            report("initialize (\(name))", code, message, data)
            return nil
        }
        try client.notify("initialized", .object([:]))
        var params: JSONObject = ["uri": .string(uri(file)), "intent": .string(intent)]
        if let move { params["destination"] = .string(uri(move)) }
        switch try client.request("workspace/coordinate", .object(params)) {
        case .error(let code, let message, let data):
            report("the lease on \(file) (\(name))", code, message, data)
            return nil
        case .result(let result):
            guard let granted = result["lease"]?.stringValue else {
                StandardError.write("docsession coordinate: \(name)'s answer holds no lease: \(result.jsonText)")
                return nil
            }
            return granted
        }
    }

    private func endLease(_ client: DaemonClient, _ lease: String) {
        do throws(DaemonConnection.Failure) {
            if case .error(let code, let message, let data) = try client.request(
                "workspace/endCoordination", .object(["lease": .string(lease)]))
            {
                report("ending the lease", code, message, data)
            }
        } catch {
            StandardError.write("docsession coordinate: ending the lease: \(error)")
        }
    }

    /// Runs the command holding FILE's lock across processes (``FileLocks``): exclusive to write,
    /// delete or move it, shared to read it, so that servers that are not the daemon (an editor's
    /// own stdio server) do not save it meanwhile; their saves wait for the command. Taken after
    /// the lease (a read lease's saves take the same lock), and waited for while a save holds it.
    private func runLocked() -> Int32 {
        var held: FileLocks.Held? = nil
        // Made when missing (a server started meanwhile finds the lock taken), and checked first:
        // a refused directory was reported before, and nothing is made in it.
        switch FileLocks.open(runtimeDirectory: runtime.directory.path) {
        case .success(let locks):
            let absolute = CurrentDirectory.absolute(file)
            let target = (try? SafeSave.resolveSymlinks(absolute)) ?? absolute
            do throws(FileSystemError) {
                held = try locks.lock(target, exclusive: !read, waited: {
                    if verbose { StandardError.write("docsession coordinate: waiting for a save of \(target) to end") }
                })
            } catch {
                StandardError.write("docsession coordinate: \(file)'s lock cannot be taken: \(error.message); servers that are not the daemon are not held back")
            }
        case .failure(let error):
            StandardError.write("docsession coordinate: no file locks (\(error.message)); servers that are not the daemon are not held back")
        }
        defer { held?.release() }
        return runCommand()
    }

    private func close(_ client: DaemonClient) {
        _ = try? client.request("shutdown")
        try? client.notify("exit")
        client.finish()
    }

    private func report(_ what: String, _ code: Int64, _ message: String, _ data: JSONValue?) {
        var line = "docsession coordinate: \(what) refused (\(code)): \(message)"
        if let data { line += " " + data.jsonText }
        StandardError.write(line)
    }

    /// Runs the command with this process's standard descriptors and waits for it; SIGINT and
    /// SIGQUIT are ignored here meanwhile (as `system(3)` does: a ^C reaches the command, and
    /// this process ends the lease after it). Answers its status as a shell would.
    private func runCommand() -> Int32 {
        try? ignoreSignal(SIGINT)
        try? ignoreSignal(SIGQUIT)
        let pid: Int32
        do {
            pid = try spawnProcess(command[0], arguments: Array(command.dropFirst()), searchingPath: !command[0].contains("/"))
        } catch {
            StandardError.write("docsession coordinate: cannot run \(command[0]): \(error.errno.description)")
            return error.errno == .noSuchFileOrDirectory ? 127 : 126
        }
        do {
            return try waitForProcess(pid)?.shellStatus ?? 1
        } catch {
            StandardError.write("docsession coordinate: cannot wait for \(command[0]): \(error)")
            return 1
        }
    }

    /// The file URI of `path` made absolute, without `.` components or repeated slashes.
    private func uri(_ path: String) -> String {
        let absolute = CurrentDirectory.absolute(path)
        let parts = absolute.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        return FileURIText.uri(from: "/" + parts.joined(separator: "/"))
    }
}

/// A server of its own (`serve`) listening for `docsession coordinate` on
/// `<runtime>/servers/<pid>.sock` (protocol/README.md §14.3), so that a coordinated command reaches
/// its documents too: a reader's lease saves them first, a writer's disables their editing. Every
/// peer must be this user; each connection is served by `Server.serveCoordinator`.
enum CoordinatorEndpoint {
    /// Starts listening (on the loop); a warning, and no endpoint, when the directory or the socket
    /// cannot be made. The socket is removed at exit by `remove()`, and a dead server's is removed
    /// by the next `coordinate` that finds nobody listening on it.
    static func start(runtime: RuntimeDirectory, server: Server, logger: Logger) {
        // The runtime directory is checked first, as `connect` checks it: one another user made, or
        // that others can write, is refused and nothing is made in it.
        let directory: String
        do throws(FileSystemError) {
            directory = try runtime.privateSubdirectory("servers")
        } catch {
            logger.warning("coordinated commands do not reach this server: \(error.message)")
            return
        }
        // Sockets of servers that are gone (killed: nobody removed them) go first.
        for name in (try? listDirectory(directory)) ?? [] where name.hasSuffix(".sock") {
            if let pid = Int32(name.dropLast(5)), pid != getpid(), !processExists(pid) { try? removeFile(directory + "/" + name) }
        }
        let path = directory + "/\(getpid()).sock"
        let listener: Listener
        do {
            try? removeFile(path)
            listener = Listener(try UnixSocket.listen(path: path))
        } catch {
            logger.warning("coordinated commands do not reach this server: cannot listen on \(path): \(error)")
            return
        }
        socketPath.withLock { $0 = path }
        let user = geteuid()
        LoopExecutor.shared.addReadable(listener.descriptor.rawValue) {
            while true {
                let accepted: Descriptor?
                do {
                    accepted = try listener.descriptor.acceptConnection(path: path)
                } catch {
                    logger.warning("cannot accept a coordinator's connection: \(error)")
                    return true
                }
                guard let connection = accepted else { return true }
                let peer = try? connection.peerCredentials()
                guard let peer, peer.user == user else {
                    logger.warning("refused a coordinator's connection from \(peer.map(\.description) ?? "an unknown peer"): this server serves uid \(user) only")
                    try? connection.close()
                    continue
                }
                let raw = connection.take()  // closed by serveCoordinator when the connection ends
                Task { await server.serveCoordinator(descriptor: raw) }
            }
        }
    }

    /// The listening socket, kept for the process's life.
    private final class Listener: Sendable {
        let descriptor: Descriptor
        init(_ descriptor: consuming Descriptor) { self.descriptor = descriptor }
    }

    private static let socketPath = Mutex<String?>(nil)

    /// Removes the endpoint's socket (the process is ending).
    static func remove() {
        if let path = socketPath.withLock({ $0 }) { try? removeFile(path) }
    }
}

