import FileStore
import JSON
import JSONRPC
import TextBuffer
import DocumentSession
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// LSP's trace levels (`$/setTrace`).
public enum TraceLevel: String, Sendable, CaseIterable {
    case off, messages, verbose
}

extension Server {
    /// `initialize`: negotiates the position encoding and the trace level; answers the server's
    /// info and capabilities.
    func initialize(_ params: InitializeRequest) async throws(ResponseError) -> InitializeResult {
        // Everything is read and checked before anything changes: a bad field leaves the server
        // uninitialized.
        var narrowedRoots: SandboxRoots? = nil
        if let paths = params.roots { narrowedRoots = try await narrowRoots(to: paths) }
        var storageRoots: StorageRoots? = nil
        if let given = params.storage { storageRoots = try await checkStorage(given, roots: narrowedRoots ?? roots) }
        // The first encoding the client lists that the server knows; utf-16 when none is listed
        // (every LSP client must support it).
        let chosen = params.positionEncodings?.lazy.compactMap(PositionEncoding.init(rawValue:)).first ?? .utf16

        if membership != nil || coordinatorOnly, params.editorClient {
            throw ResponseError(
                .invalidRequest,
                "the LSP mode (capabilities.textDocument) is served by `docsession serve`, one editor per server; a daemon's clients use the document/* methods",
                data: ["field": "params.capabilities.textDocument"])
        }
        positionEncoding = chosen
        if let narrowedRoots { roots = narrowedRoots }
        storage = storageRoots
        // A daemon's store is shared: its roots are the daemon's (each connection's own narrowing
        // still applies to the paths it names), and its settings are the first client's.
        let ownsSettings = coordinatorOnly ? false : membership.map { $0.hub.initialized($0.id, name: params.clientName ?? "", encoding: chosen, roots: roots) } ?? true
        // A server's own store takes its client's settings (a coordinator's connection touches none).
        let ownStore = membership == nil && !coordinatorOnly
        if ownStore {
            await store.setRoots(roots)
            await store.setFileLocks(configuration.fileLocks)
        }
        if let traceLevel = params.trace { trace = traceLevel }
        lifecycle = .running
        if ownsSettings {
            await store.setAutosave(params.autosave)
            if let delay = params.flushDelay { await store.setJournalFlushDelay(.milliseconds(delay)) }
            if let bytes = params.maxFileSize { FileSizeLimit.set(Int(bytes)) }
            if params.persistUndo { await startPersistingUndo() }
        }
        if ownStore { await store.setPositionEncoding(chosen) }
        hotExit = params.hotExit
        if ownStore, let pid = params.processID { await watchClient(pid) }
        if params.editorClient { startEditorSync() }
        let journaling = await store.journaling
        return InitializeResult(
            positionEncoding: chosen, maxMessageSize: configuration.maxMessageSize, autosave: await store.autosavePolicy,
            watchFiles: configuration.watchFiles, keepsVersions: await store.keepsVersions, roots: roots,
            journal: journaling, flushDelay: Int64(await store.journalFlushDelayMilliseconds), hotExit: params.hotExit,
            persistUndo: await store.persistsUndo, handoff: snapshots != nil, storage: storage, editorClient: params.editorClient)
    }

    /// `persistUndo`: undo histories are kept under `<state dir>/undo/`, if there is a state
    /// directory and that directory can be written (else a warning, and `capabilities.persistUndo`
    /// answers false).
    private func startPersistingUndo() async {
        guard let directory = configuration.stateDirectory else {
            logger.warning("undo histories are not kept: the server was started without a state directory")
            return
        }
        do throws(FileSystemError) {
            await store.setPersistUndo(try await Workspace.openUndoDirectory(inStateDirectory: directory))
        } catch {
            logger.warning("undo histories are not kept: \(error.message)")
        }
    }

    /// Watches the client's process (`processId`): its death is taken as the end of input (the
    /// journals are flushed and kept, the process exits with status 1). Only a process this one
    /// descends from is watched (the client that started the server, directly or through a shell):
    /// any other number may name an unrelated process, or none.
    private func watchClient(_ pid: Int64) async {
        guard pid > 0, pid <= Int64(Int32.max) else { return }
        let store = store
        let logger = logger
        do throws(SystemCallError) {
            _ = try await Workspace.watchClientProcess(Int32(pid)) {
                logger.info("the client's process \(pid) ended: journals flushed, exiting")
                _ = store.flushJournalsBlocking(within: .seconds(5))
                Glibc.exit(1)
            }
        } catch {
            logger.warning("the client's process \(pid) is not watched: \(error)")
        }
    }

    /// The end of the process, however it comes (the end of input, `exit`, a signal's thread):
    /// every journaled change is written and flushed first.
    public nonisolated func flushJournals(within limit: Duration) -> Bool {
        store.flushJournalsBlocking(within: limit)
    }

    /// `initializationOptions.roots` (paths): directories that narrow the server's roots; each
    /// must lie within them (or anywhere, when the server has none).
    private func narrowRoots(to paths: [String]) async throws(ResponseError) -> SandboxRoots {
        let field = InitializeRequest.rootsField
        if let roots {
            do throws(SandboxError) {
                return try await Workspace.narrow(roots, to: paths)
            } catch {
                throw Self.responseError(error, field: field, roots: roots)
            }
        }
        do throws(FileSystemError) {
            return try await Workspace.openRoots(paths)
        } catch {
            throw .invalidParams(field: field, error.message)
        }
    }

    /// `initialized`: the client is ready. Nothing to do yet; later parts start watchers here.
    func initialized() {
        logger.debug("client sent initialized")
    }

    /// `shutdown`: stop accepting work; answers null.
    func shutdown(_ params: ShutdownRequest) async -> NullResult {
        lifecycle = .shutDown
        // The client answers nothing after shutdown: requests still waiting end unanswered.
        editorSync.outgoing.abandonAll()
        // Live queries end: no workspace/didChangeFiles after the response.
        await stopAllQueries()
        // The leases held end: the documents they held edit again, their files checked.
        await endAllCoordinations()
        if coordinatorOnly { return NullResult() }
        // The LSP mode: an editor's client says shutdown when the editor quits (having asked its
        // user to save or discard each modified buffer) or stops the server and keeps its buffers:
        // the mirrors end as at didClose, their journals with them, whatever hot exit says. A
        // crash of the editor says nothing: the end of input keeps them.
        await endAllMirrors()
        if membership != nil {
            // A daemon's client: only its own holds end (the store and the other clients go on);
            // without hot exit, what it alone held unsaved is dropped.
            await releaseAllHolds(keepJournals: hotExit)
            return NullResult()
        }
        // Nothing is saved after shutdown, autosave included.
        await store.setAutosave(.off)
        // The versions of the last saves are written before the answer (up to 10 s; they are
        // queued behind the saves at nice 10), not dropped when the process exits.
        let left = await store.finishVersionWrites(within: .seconds(10))
        if left > 0 { logger.warning("\(left) earlier versions not written by shutdown's deadline (10 s); they are dropped") }
        // Hot exit: the journals of documents with unsaved changes stay, flushed, to be offered
        // at the next open; without it they go.
        await store.finishJournals(keep: hotExit)
        // The undo histories of the documents still open are kept (persistUndo), written before
        // the answer.
        if await !store.keepUndoHistories(within: .seconds(10)) {
            logger.warning("undo histories not all written by shutdown's deadline (10 s)")
        }
        // Packages' journals went with the text documents' above (kept with hot exit, else
        // deleted); the managed stores' working copies go with their directory. What is unsaved
        // and not journaled (a journal that could not be written) ends here.
        let unsaved = await packages.closeAll()
        if !unsaved.isEmpty { logger.warning("package documents closed with unsaved changes no journal holds: \(unsaved.joined(separator: ", "))") }
        return NullResult()
    }

    /// `exit`: status 0 after shutdown, else 1.
    func exit() {
        let status: Int32 = lifecycle == .shutDown ? 0 : 1
        exitState.withLock { $0 = status }
    }

    /// `$/setTrace` (a bad value cannot be answered: ``NotificationEntry`` logs and ignores it).
    func setTrace(_ params: SetTraceNotification) {
        trace = params.value
    }

    // MARK: - Tracing

    /// Sends `$/logTrace` for a message received, when tracing is on.
    func traceReceived(_ what: String, params: JSONValue?) {
        guard trace != .off else { return }
        sendTrace("Received \(what)", verbose: params)
    }

    /// Sends one `$/logTrace`; `verbose` is included only at the verbose level.
    func sendTrace(_ message: String, verbose: JSONValue?) {
        Self.sendTrace(message, verbose: verbose, level: trace, writer: writer)
    }

    static func sendTrace(_ message: String, verbose: JSONValue?, level: TraceLevel, writer: MessageWriter) {
        var params: JSONObject = ["message": .string(message)]
        if level == .verbose { params["verbose"] = .string((verbose ?? .null).jsonText) }
        writer.send(Notification(method: "$/logTrace", params: .object(params)))
    }
}
