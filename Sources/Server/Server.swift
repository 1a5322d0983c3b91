import FileStore
import JSON
import DocumentSession
import JSONRPC
import TextBuffer
import Logging
import Synchronization

/// The protocol's method table and lifecycle: it decodes params into core types, calls the core,
/// and encodes results. It is the only module that knows both the wire and the core.
///
/// An actor on its store's executor (the loop's thread): its state is touched on that one thread
/// only, which the compiler checks, and its calls to the store need no hop. The connection calls it
/// in arrival order.
public actor Server: MessageHandler {
    /// The server's name and version, as `initialize` and `--version` report them.
    public static let name = "docsession"
    public static let version = "0.1.0"

    /// Where the server is in LSP's lifecycle.
    public enum Lifecycle: Sendable, Equatable {
        /// Before `initialize`: only `initialize` and `exit` are accepted.
        case uninitialized
        /// Serving.
        case running
        /// After `shutdown`: only `exit` is accepted.
        case shutDown
    }

    /// Options fixed when the server starts.
    public struct Configuration: Sendable {
        /// The largest message accepted, reported to the client by `initialize`.
        public var maxMessageSize: Int
        /// Where the server keeps its state (earlier versions of documents, under `versions/`);
        /// nil: nothing is kept.
        public var stateDirectory: String?
        /// Whether the documents' files are watched for changes by other programs.
        public var watchFiles: Bool
        /// The directories every path of every request must stay beneath (`--root`); nil: the
        /// user's own permissions apply.
        public var roots: SandboxRoots?
        /// Whether unsaved changes are journaled under the state directory (`journal/`), so that
        /// they survive the process's death (`--no-journal`: not).
        public var journal: Bool
        /// The locks per file across processes that every save takes (``FileLocks``, under the
        /// user's runtime directory); nil: only the directory's lock.
        public var fileLocks: FileLocks?
        public init(
            maxMessageSize: Int = 64 << 20, stateDirectory: String? = nil, watchFiles: Bool = true, roots: SandboxRoots? = nil,
            journal: Bool = true, fileLocks: FileLocks? = nil
        ) {
            self.fileLocks = fileLocks
            self.maxMessageSize = maxMessageSize
            self.stateDirectory = stateDirectory
            self.watchFiles = watchFiles
            self.roots = roots
            self.journal = journal
        }
    }

    public internal(set) var lifecycle: Lifecycle = .uninitialized
    /// Set by `exit`; the connection reads it after each message (``exitStatus``).
    let exitState = Mutex<Int32?>(nil)
    /// The exit status once `exit` has been handled.
    public nonisolated var exitStatus: Int32? { exitState.withLock { $0 } }
    /// The position encoding chosen at `initialize` (utf-16 until then, LSP's default).
    public internal(set) var positionEncoding: PositionEncoding = .utf16
    /// The trace level set by `initialize` or `$/setTrace`.
    public internal(set) var trace: TraceLevel = .off

    let writer: MessageWriter
    let logger: Logger
    let configuration: Configuration
    /// The open documents; their state changes go out as `document/stateChanged`. Its executor is
    /// the server's.
    let store: DocumentStore

    /// The store's executor: the server and the store are isolated to the same thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { store.unownedExecutor }
    /// The sandbox roots in force (`--root`, narrowed by `initialize`); nil: no roots.
    var roots: SandboxRoots?
    /// The live workspace queries (`workspace/query` with `watch`), by id.
    var queries = WorkspaceQueries()
    /// Whether `shutdown` keeps the journals of unsaved documents (`initializationOptions.hotExit`).
    var hotExit = true
    /// The failure to watch files last logged (``noteFileWatching()``): each one once.
    var fileWatchingReported: String?
    /// The storage locations (`initializationOptions.storage`, §11.8), nil when none were given.
    var storage: StorageRoots?
    /// Where session snapshots for a handoff go (`session/snapshot`): nil without a usable state
    /// directory, and then why.
    var snapshots: SnapshotDirectory? = nil
    var snapshotsUnavailable = "the server was started without a state directory"
    /// What the client asked to have back for each document (`document/setClientState`), by
    /// handle; a closed document's is let go at the next set or snapshot.
    var clientStates: [String: JSONValue] = [:]
    /// The LSP mode: the mirrored buffers and the requests sent to the client (Server+TextSync.swift).
    var editorSync = EditorSync()
    /// Edits the immediate path applied whose journal records are large: answered by the ordinary
    /// path (``editDocument(_:id:)``) once they are on disk.
    var editsAwaitingFlush: [RequestID: EditDocumentResult] = [:]
    /// The mirrored documents' events, handled by the LSP mode instead of sent as `document/*`.
    let mirrorEvents: MirrorEventRoute
    /// The open package and managed documents (Server+Packages.swift); its executor is the server's.
    let packages: PackageStore
    /// In a daemon (``Hub``): this connection's place among the clients sharing the stores; nil
    /// for a server of its own (`docsession serve`).
    let membership: Membership?
    /// The leases this connection holds (`workspace/coordinate`, Server+Coordination.swift).
    var coordinations = Coordinations()
    /// A coordinator's connection to a server of its own (`docsession coordinate` reaching an
    /// editor's stdio server; Server+CoordinationEndpoint.swift): only the lifecycle and the two
    /// coordination methods are answered, and nothing of the store's settings is touched.
    let coordinatorOnly: Bool

    public init(writer: MessageWriter, logger: Logger, configuration: Configuration = Configuration()) {
        let route = MirrorEventRoute()
        let stores = Self.makeStores(configuration: configuration, logger: logger, documentEvents: { event in
            if route.take(event) { return }
            Self.send(event, to: writer)
        }, packageEvents: { event in
            Self.sendPackageEvent(event, to: writer)
        })
        self.init(writer: writer, logger: logger, configuration: configuration, stores: stores, mirrorEvents: route, membership: nil)
    }

    /// A server over stores it may share with other servers (a daemon's connections: ``Hub``).
    init(
        writer: MessageWriter, logger: Logger, configuration: Configuration, stores: Stores, mirrorEvents: MirrorEventRoute,
        membership: Membership?, coordinatorOnly: Bool = false
    ) {
        self.coordinatorOnly = coordinatorOnly
        self.roots = configuration.roots
        self.writer = writer
        self.logger = logger
        self.configuration = configuration
        self.store = stores.store
        self.packages = stores.packages
        self.mirrorEvents = mirrorEvents
        self.membership = membership
        if let directory = configuration.stateDirectory {
            do throws(FileSystemError) {
                snapshots = try Workspace.openSnapshots(inStateDirectory: directory)
            } catch {
                snapshotsUnavailable = "the state directory cannot be used: \(error.message)"
                logger.warning("sessions cannot be handed off: \(error.message)")
            }
        }
    }

    /// The document stores a server works on: its own, or a daemon's, shared.
    struct Stores: Sendable {
        let store: DocumentStore
        let packages: PackageStore
    }

    /// The stores for `configuration`, their events going to `documentEvents` and `packageEvents`.
    static func makeStores(
        configuration: Configuration, logger: Logger, documentEvents: @escaping @Sendable (DocumentEvent) -> Void,
        packageEvents: @escaping @Sendable (DocumentEvent) -> Void
    ) -> Stores {
        var versions: VersionStore? = nil
        var unavailable = "the server was started without a state directory"
        var journal: JournalDirectory? = nil
        var journalUnavailable = unavailable
        if let directory = configuration.stateDirectory {
            do throws(FileSystemError) {
                versions = try Workspace.openVersionStore(inStateDirectory: directory)
            } catch {
                unavailable = "the state directory cannot be used: \(error.message)"
                logger.warning("earlier versions of documents are not kept: \(error.message)")
            }
            if !configuration.journal {
                journalUnavailable = "the server was started with --no-journal"
            } else {
                do throws(FileSystemError) {
                    journal = try Workspace.openJournal(inStateDirectory: directory)
                } catch {
                    journalUnavailable = "the journal directory cannot be used: \(error.message)"
                    logger.warning("unsaved changes are not journaled (they die with the process): \(error.message)")
                }
            }
        }
        let store = DocumentStore(
            events: documentEvents, watchFiles: configuration.watchFiles, versions: versions,
            versionsUnavailableReason: versions == nil ? unavailable : nil,
            journal: journal, journalUnavailableReason: journal == nil ? journalUnavailable : nil)
        let packages = PackageStore(
            events: packageEvents, watchFiles: configuration.watchFiles, stateDirectory: configuration.stateDirectory,
            executor: store.executor, journalOf: store)
        return Stores(store: store, packages: packages)
    }

    /// Writes a text document's event as the protocol's notification.
    static func send(_ event: DocumentEvent, to writer: MessageWriter) {
        switch event.kind {
        case .stateChanged:
            writer.send(Notification(method: "document/stateChanged", params: Self.json(event)))
        case .textChanged(let edits):
            writer.send(Notification(method: "document/didChange", params: [
                "document": .string(event.handle), "uri": .string(FileURI.uri(from: event.path)),
                "version": .integer(event.version), "reason": "external", "edits": .array(edits.map(Self.json)),
            ]))
        case .moved(let oldPath):
            writer.send(Notification(method: "document/didMove", params: Self.didMoveParams(event, oldPath: oldPath)))
        case .versionsChanged(let added, let removed, let resolved):
            writer.send(Notification(
                method: "document/didChangeVersions",
                params: Self.didChangeVersionsParams(event, added: added, removed: removed, resolved: resolved)))
        case .reloadProposed:
            // Only mirrored documents propose reloads, and their events were taken before.
            break
        case .entriesChanged:
            // Only packages' (below).
            break
        }
    }

    /// Writes a package document's event as the protocol's notification.
    static func sendPackageEvent(_ event: DocumentEvent, to writer: MessageWriter) {
        switch event.kind {
        case .entriesChanged(let entries, let store):
            writer.send(Notification(method: "document/didChange", params: Self.didChangeEntries(event, entries: entries, store: store)))
        default:
            writer.send(Notification(method: "document/stateChanged", params: Self.json(event)))
        }
    }

    static func didMoveParams(_ event: DocumentEvent, oldPath: String) -> JSONValue {
        [
            "document": .string(event.handle), "oldUri": .string(FileURI.uri(from: oldPath)),
            "uri": .string(FileURI.uri(from: event.path)),
            "displayName": .string(Document.displayName(forPath: event.path)),
            "fileType": .string(FileType.identifier(forPath: event.path)),
        ]
    }

    // MARK: - Method table

    /// The requests the server answers: each method's type (its name, params and result) and its
    /// handler. The dispatcher's table, ``clientMethods`` and the specification test all read it.
    /// Adding a method: see docs/Adding a method.md.
    static let requests: [RequestEntry] = [
        RequestEntry(InitializeRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.initialize(params)) },
        RequestEntry(ShutdownRequest.self) { server, params, _ in .now(await server.shutdown(params)) },
        RequestEntry(OpenDocumentRequest.self) { server, params, context throws(ResponseError) in
            // A save as writing this path (asked for before this open) is waited for: the open
            // finds the package it made, and the document it moved there.
            await server.packages.waitForSaveAs(to: params.path)
            if let kind = server.packageKind(of: params.path, asked: params.kind) { return .now(.package(try await server.openPackage(params, kind: kind))) }
            return try await server.openDocument(params, context).asText()
        },
        RequestEntry(CreateDocumentRequest.self) { server, params, _ throws(ResponseError) in
            if let kind = params.kind.flatMap(PackageKind.init(rawValue:)) { return .now(.package(try await server.createPackage(params, kind: kind))) }
            return .now(.text(try await server.createDocument(params)))
        },
        RequestEntry(ReadDocumentRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.readDocument(params)) },
        RequestEntry(EditDocumentRequest.self) { server, params, context throws(ResponseError) in
            .now(try await server.editDocument(params, id: context.id))
        },
        RequestEntry(UndoRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in
                    .package(try await server.packageStep(params.handle, version: params.version, undo: true))
                }
            }
            return .now(.text(try await server.undoOrRedo(params.handle, version: params.version, undo: true)))
        },
        RequestEntry(RedoRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in
                    .package(try await server.packageStep(params.handle, version: params.version, undo: false))
                }
            }
            return .now(.text(try await server.undoOrRedo(params.handle, version: params.version, undo: false)))
        },
        RequestEntry(DocumentStateRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) {
                let handle = params.handle
                return try await server.packageRequest(handle) { () throws(ResponseError) in .package(try await server.packageState(handle)) }
            }
            return .now(.text(try await server.documentState(params)))
        },
        RequestEntry(CloseDocumentRequest.self) { server, params, context throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in try await server.closePackage(params) }
            }
            return try await server.closeDocument(params, context)
        },
        RequestEntry(SaveDocumentRequest.self) { server, params, context throws(ResponseError) in
            if server.isPackage(params.handle) {
                switch try await server.savePackage(params) {
                case .now(let result): return .now(.package(result))
                case .later(let work, let answered): return .later({ await work().map { .package($0) } }, answered: answered)
                }
            }
            return try await server.saveDocument(params, context).asText()
        },
        RequestEntry(RevertDocumentRequest.self) { server, params, context throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in
                    .package(try await server.revertPackage(params.handle))
                }
            }
            return try await server.revertDocument(params, context).asText()
        },
        RequestEntry(ResolveConflictRequest.self) { server, params, context throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in
                    .package(try await server.resolvePackageConflict(params))
                }
            }
            return .now(.text(try await server.resolveConflict(params, context)))
        },
        RequestEntry(ListVersionsRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) {
                return .now(.package(PackageVersionsResult(versions: try await server.packageState(params.handle).document.conflictVersions)))
            }
            return .now(.text(try await server.listVersions(params)))
        },
        RequestEntry(ReadVersionRequest.self) { server, params, context in server.readVersion(params, context) },
        RequestEntry(DeleteVersionRequest.self) { server, params, context throws(ResponseError) in
            .now(try await server.deleteVersion(params, context))
        },
        RequestEntry(DiffVersionsRequest.self) { server, params, context in server.diffVersions(params, context) },
        RequestEntry(RestoreVersionRequest.self) { server, params, context throws(ResponseError) in
            .now(try await server.restoreVersion(params, context))
        },
        RequestEntry(DeleteDocumentRequest.self) { server, params, context throws(ResponseError) in try await server.deleteDocument(params, context) },
        RequestEntry(MoveDocumentRequest.self) { server, params, context throws(ResponseError) in try await server.moveDocument(params, context) },
        RequestEntry(RenameDocumentRequest.self) { server, params, context throws(ResponseError) in try await server.renameDocument(params, context) },
        RequestEntry(ImportFileRequest.self) { server, params, context throws(ResponseError) in try await server.importFile(params, context) },
        RequestEntry(ExportFileRequest.self) { server, params, context throws(ResponseError) in try await server.exportFile(params, context) },
        RequestEntry(MoveToStorageRequest.self) { server, params, context throws(ResponseError) in try await server.moveToStorage(params, context) },
        RequestEntry(MoveAllToStorageRequest.self) { server, params, context throws(ResponseError) in .now(try await server.moveAllToStorage(params, context)) },
        RequestEntry(QueryRequest.self) { server, params, context throws(ResponseError) in .now(try await server.query(params, context)) },
        RequestEntry(StopQueryRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.stopQuery(params)) },
        RequestEntry(RecoverRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) {
                return try await server.packageRequest(params.handle, afterSaves: true) { () throws(ResponseError) in
                    .package(try await server.recoverPackage(params.handle))
                }
            }
            return .now(.text(try await server.recover(params)))
        },
        RequestEntry(DiscardRecoveryRequest.self) { server, params, _ throws(ResponseError) in
            if server.isPackage(params.handle) { return .now(try await server.discardPackageRecovery(params.handle)) }
            return .now(try await server.discardRecovery(params))
        },
        RequestEntry(RecoverableRequest.self) { server, params, _ in .now(await server.recoverable(params)) },
        RequestEntry(SetClientStateRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.setClientState(params)) },
        RequestEntry(SnapshotSessionRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.snapshotSession(params)) },
        RequestEntry(RestoreSessionRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.restoreSession(params)) },
        RequestEntry(DiscardSnapshotRequest.self) { server, params, _ throws(ResponseError) in .now(try await server.discardSnapshot(params)) },
        RequestEntry(ReadEntryRequest.self) { server, params, _ throws(ResponseError) in
            try await server.packageRequest(params.handle) { () throws(ResponseError) in try await server.readEntry(params) }
        },
        RequestEntry(WriteEntryRequest.self) { server, params, _ throws(ResponseError) in
            try await server.packageRequest(params.handle) { () throws(ResponseError) in try await server.writeEntry(params) }
        },
        RequestEntry(DeleteEntryRequest.self) { server, params, _ throws(ResponseError) in
            try await server.packageRequest(params.handle) { () throws(ResponseError) in try await server.deleteEntry(params) }
        },
        RequestEntry(ExecuteStoreRequest.self) { server, params, context throws(ResponseError) in try await server.executeStore(params, context) },
        RequestEntry(QueryStoreRequest.self) { server, params, context throws(ResponseError) in try await server.queryStore(params, context) },
        RequestEntry(CoordinateRequest.self) { server, params, context throws(ResponseError) in try await server.coordinate(params, context) },
        RequestEntry(EndCoordinationRequest.self) { server, params, context throws(ResponseError) in try await server.endCoordination(params, context) },
        RequestEntry(ExecuteCommandRequest.self) { server, params, context throws(ResponseError) in try await server.executeCommand(params, context) },
    ]

    /// The notifications the server acts on.
    static let notifications: [NotificationEntry] = [
        NotificationEntry(InitializedNotification.self) { server, _ in server.initialized() },
        NotificationEntry(ExitNotification.self) { server, _ in server.exit() },
        NotificationEntry(SetTraceNotification.self) { server, params in server.setTrace(params) },
        NotificationEntry(DidOpenTextDocumentNotification.self) { server, params in await server.didOpen(params) },
        NotificationEntry(DidChangeTextDocumentNotification.self) { server, params in await server.didChange(params) },
        NotificationEntry(WillSaveTextDocumentNotification.self) { server, params in server.willSave(params) },
        NotificationEntry(DidSaveTextDocumentNotification.self) { server, params in await server.didSave(params) },
        NotificationEntry(DidCloseTextDocumentNotification.self) { server, params in await server.didClose(params) },
    ]

    /// ``requests`` by method name: the dispatcher's table.
    static let requestHandlers: [String: RequestEntry] = Dictionary(uniqueKeysWithValues: requests.map { ($0.method, $0) })

    /// ``notifications`` by method name.
    static let notificationHandlers: [String: NotificationEntry] = Dictionary(
        uniqueKeysWithValues: notifications.map { ($0.method, $0) })

    /// Every method a client may send that the server implements: the registry's requests and
    /// notifications, plus `$/cancelRequest`, which the connection applies ahead of the queue.
    public static var clientMethods: Set<String> {
        Set(requests.map(\.method)).union(notifications.map(\.method)).union(["$/cancelRequest"])
    }

    /// Every notification the server may send.
    public static let serverNotifications: Set<String> = [
        "$/logTrace", "$/progress", "document/stateChanged", "document/didChange", "document/didMove",
        "document/didChangeVersions", "workspace/didChangeFiles", "textDocument/publishDiagnostics", "window/showMessage",
        "window/logMessage",
    ]

    // MARK: - MessageHandler

    public func handle(_ request: Request, context: RequestContext) async -> Reply {
        traceReceived("request '\(request.method) - (\(request.id))'.", params: request.params)
        let started = ContinuousClock.now
        let reply = await answer(request, context: context)
        guard case .now(let result) = reply else {
            guard case .later(let work, let answered) = reply, trace != .off else { return reply }
            // Deferred work is traced when its answer is ready, at the level in force now.
            let level = trace
            let writer = writer
            let label = "'\(request.method) - (\(request.id))'"
            return .later(
                {
                    let result = await work()
                    let elapsed = started.duration(to: .now)
                    Self.sendTrace(Self.responseTraceMessage(label, elapsed), verbose: Self.traceOutcome(result), level: level, writer: writer)
                    return result
                }, answered: answered)
        }
        if trace != .off {
            let label = "'\(request.method) - (\(request.id))'"
            sendTrace(Self.responseTraceMessage(label, started.duration(to: .now)), verbose: Self.traceOutcome(result))
        }
        return .now(result)
    }

    static func responseTraceMessage(_ label: String, _ elapsed: Duration) -> String {
        let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
        let rounded = (milliseconds * 1000).rounded() / 1000
        return "Sending response \(label). Processing request took \(rounded)ms"
    }

    static func traceOutcome(_ result: Result<JSONValue, ResponseError>) -> JSONValue {
        switch result {
        case .success(let value): return value
        case .failure(let error): return error.json
        }
    }

    private func answer(_ request: Request, context: RequestContext) async -> Reply {
        switch lifecycle {
        case .uninitialized where request.method != InitializeRequest.method:
            return .now(.failure(ResponseError(.serverNotInitialized, "Server not initialized: send initialize before \(request.method)")))
        case .running where request.method == InitializeRequest.method:
            return .now(.failure(ResponseError(.invalidRequest, "initialize was already received; it may be sent only once")))
        case .shutDown:
            return .now(.failure(ResponseError(.invalidRequest, "Server is shut down: only the exit notification is accepted (got \(request.method))")))
        default:
            break
        }
        if coordinatorOnly, !Self.coordinatorMethods.contains(request.method) {
            return .now(.failure(ResponseError(
                .methodNotFound, "\(request.method) is not served here: this connection to a server of its own serves coordination only (initialize, workspace/coordinate, workspace/endCoordination, shutdown)")))
        }
        guard let entry = Self.requestHandlers[request.method] else {
            if Self.clientMethods.contains(request.method) {
                return .now(.failure(ResponseError(.invalidRequest, "\(request.method) is a notification: send it without an id")))
            }
            return .now(.failure(ResponseError(.methodNotFound, "Method not found: \(request.method)")))
        }
        return await entry.run(self, request, context)
    }

    /// `document/edit` is answered synchronously when the request path runs on the store's thread
    /// (the loop) and nothing is traced: no task switch, no job. Everything else, and an edit
    /// before `initialize` or after `shutdown`, goes down ``handle(_:context:)``.
    public nonisolated func answerImmediately(_ request: Request, context: RequestContext) -> Result<JSONValue, ResponseError>? {
        // On the store's thread is on the server's executor.
        guard request.method == EditDocumentRequest.method, !coordinatorOnly, store.isOnItsThread else { return nil }
        return assumeIsolated { server in server.answerEditNow(request) }
    }

    /// ``answerImmediately(_:context:)`` on the server's executor.
    private func answerEditNow(_ request: Request) -> Result<JSONValue, ResponseError>? {
        guard lifecycle == .running, trace == .off else { return nil }
        // Already applied by an earlier offer of the same request (the reader offers it, then the
        // dispatcher): it waits for its flush.
        guard editsAwaitingFlush[request.id] == nil else { return nil }
        do throws(ResponseError) {
            let result = try editNow(EditDocumentRequest.decode(request))
            if store.takeJournalBytesOnItsThread() > DocumentStore.largeChange {
                // Applied now, at its turn; answered by the ordinary path once the journal has it
                // on disk (editDocument), without holding the loop meanwhile.
                editsAwaitingFlush[request.id] = result
                return nil
            }
            return .success(result.json)
        } catch {
            return .failure(error)
        }
    }

    /// `document/edit`'s params are read straight from the parsed text (``EditDocumentRequest/init(view:)``).
    public nonisolated var paramsPredecoder: ParamsPredecoder? { EditDocumentRequest.predecode }

    public func handle(_ notification: Notification) async {
        traceReceived("notification '\(notification.method)'.", params: notification.params)
        // LSP: before initialize and after shutdown, notifications other than exit are dropped.
        guard notification.method == ExitNotification.method || lifecycle == .running else {
            logger.debug("dropped notification \(notification.method) (lifecycle \(lifecycle))")
            return
        }
        guard let entry = Self.notificationHandlers[notification.method] else {
            if Self.requestHandlers[notification.method] != nil {
                // A request sent without an id cannot be answered, so it is not acted on either.
                logger.warning("ignored \(notification.method) sent as a notification: it is a request and needs an id")
            } else {
                // Unknown notifications are ignored, as JSON-RPC and LSP ask.
                logger.debug("ignored unknown notification \(notification.method)")
            }
            return
        }
        await entry.run(self, notification)
    }

    public func handle(_ response: Response) async {
        // An answer to one of the server's requests (the LSP mode's), or unsolicited.
        received(response)
    }

    public func inputEnded(midMessage: Bool) async -> Int32 {
        let status: Int32 = lifecycle == .shutDown ? 0 : 1
        // The coordinating process is gone: its leases end, and the documents they held edit again.
        await endAllCoordinations()
        if coordinatorOnly { return status }
        if membership != nil {
            // A daemon's client vanished: its holds end, and what it alone held unsaved stays in
            // the journal, offered at the next open.
            await releaseAllHolds(keepJournals: true)
            return status
        }
        if status != 0 { logger.warning("input ended without shutdown and exit; exiting with status 1") }
        // No answer will come to the requests still waiting.
        editorSync.outgoing.abandonAll()
        // The end of input is an end like a crash's for the client: what it had unsaved stays,
        // flushed, to be offered at the next open.
        await store.finishJournals(keep: true)
        // Without shutdown (which kept them already), the undo histories of the open documents
        // are kept now.
        if lifecycle != .shutDown, await !store.keepUndoHistories(within: .seconds(10)) {
            logger.warning("undo histories not all written at the end of input within 10 s")
        }
        return status
    }
}
