import FileStore
import JSON
import JSONRPC
import TextBuffer
import DocumentSession

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
        // The first encoding the client lists that the server knows; utf-16 when none is listed
        // (every LSP client must support it).
        let chosen = params.positionEncodings?.lazy.compactMap(PositionEncoding.init(rawValue:)).first ?? .utf16

        positionEncoding = chosen
        if let narrowedRoots { roots = narrowedRoots }
        await store.setRoots(roots)
        if let traceLevel = params.trace { trace = traceLevel }
        lifecycle = .running
        await store.setAutosave(params.autosave)
        await store.setPositionEncoding(chosen)
        return InitializeResult(
            positionEncoding: chosen, maxMessageSize: configuration.maxMessageSize, autosave: params.autosave,
            watchFiles: configuration.watchFiles, keepsVersions: await store.keepsVersions, roots: roots)
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
        // Live queries end: no workspace/didChangeFiles after the response.
        await stopAllQueries()
        // Nothing is saved after shutdown, autosave included.
        await store.setAutosave(.off)
        // The versions of the last saves are written before the answer (up to 10 s; they are
        // queued behind the saves at nice 10), not dropped when the process exits.
        let left = await store.finishVersionWrites(within: .seconds(10))
        if left > 0 { logger.warning("\(left) earlier versions not written by shutdown's deadline (10 s); they are dropped") }
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
