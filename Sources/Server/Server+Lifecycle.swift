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
    func initialize(_ rawParams: JSONValue?) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: "initialize")
        // Read everything before changing anything: a bad field leaves the server uninitialized.
        _ = try params.optionalInteger("processId")
        if let clientInfo = try params.optionalObject("clientInfo") {
            _ = try clientInfo.string("name")
            _ = try clientInfo.optionalString("version")
        }
        let traceLevel = try params.optionalEnumeration("trace", TraceLevel.allCases.map(\.rawValue))
        var offered: [String]? = nil
        if let capabilities = try params.optionalObject("capabilities") {
            // LSP 3.17 puts the list under capabilities.general; the short form is accepted too.
            if let general = try capabilities.optionalObject("general") {
                offered = try general.optionalStringArray("positionEncodings")
            }
            let short = try capabilities.optionalStringArray("positionEncodings")
            if offered?.isEmpty ?? true { offered = short }
        }
        // The first encoding the client lists that the server knows; utf-16 when none is listed
        // (every LSP client must support it).
        let chosen = offered?.lazy.compactMap(PositionEncoding.init(rawValue:)).first ?? .utf16
        var autosave = AutosavePolicy.off
        var narrowedRoots: SandboxRoots? = nil
        if let options = try params.optionalObject("initializationOptions") {
            if let settings = try options.optionalObject("autosave") {
                let policy = try settings.optionalEnumeration("policy", ["off", "afterDelay"]) ?? "off"
                let delay = try settings.optionalInteger("delay", in: 1...86_400_000)
                if policy == "afterDelay" { autosave = .afterDelay(milliseconds: Int(delay ?? 2000)) }
            }
            narrowedRoots = try clientRoots(options)
        }

        positionEncoding = chosen
        if let narrowedRoots { roots = narrowedRoots }
        await store.setRoots(roots)
        if let traceLevel { trace = TraceLevel(rawValue: traceLevel) ?? .off }
        lifecycle = .running
        await store.setAutosave(autosave)
        await store.setPositionEncoding(chosen)
        let autosaveJSON: JSONValue
        switch autosave {
        case .off: autosaveJSON = ["policy": "off"]
        case .afterDelay(let milliseconds): autosaveJSON = ["policy": "afterDelay", "delay": .integer(Int64(milliseconds))]
        }
        return [
            "serverInfo": ["name": .string(Self.name), "version": .string(Self.version)],
            "capabilities": [
                "positionEncoding": .string(chosen.rawValue),
                "maxMessageSize": .integer(Int64(configuration.maxMessageSize)),
                "batches": true,
                "cancellation": true,
                "autosave": autosaveJSON,
                "watchFiles": .bool(configuration.watchFiles),
                "versions": .bool(await store.keepsVersions),
                "roots": roots.map { .array($0.paths.map { .string(FileURI.uri(from: $0)) }) } ?? .null,
            ],
        ]
    }

    /// `initializationOptions.roots`: directories (file URIs) that narrow the server's roots; each
    /// must lie within them (or anywhere, when the server has none). Absent: nothing changes.
    private func clientRoots(_ options: Params) throws(ResponseError) -> SandboxRoots? {
        guard let uris = try options.optionalStringArray("roots") else { return nil }
        let field = options.fieldPath("roots")
        guard !uris.isEmpty else {
            throw .invalidParams(field: field, "an empty list would allow nothing; leave roots out to keep the server's")
        }
        var paths: [String] = []
        for (index, uri) in uris.enumerated() {
            do throws(FileURI.Invalid) {
                paths.append(try FileURI.path(from: uri))
            } catch {
                throw .invalidParams(field: "\(field)[\(index)]", error.reason)
            }
        }
        if let roots {
            do throws(SandboxError) {
                return try roots.narrowed(to: paths)
            } catch {
                throw Self.responseError(error, field: field, roots: roots)
            }
        }
        do throws(FileSystemError) {
            return try SandboxRoots(paths)
        } catch {
            throw .invalidParams(field: field, error.message)
        }
    }

    /// `initialized`: the client is ready. Nothing to do yet; later parts start watchers here.
    func initialized() {
        logger.debug("client sent initialized")
    }

    /// `shutdown`: stop accepting work; answers null.
    func shutdown(_ params: JSONValue?) async throws(ResponseError) -> JSONValue {
        try Params.expectNone(params, method: "shutdown")
        lifecycle = .shutDown
        // Live queries end: no workspace/didChangeFiles after the response.
        stopAllQueries()
        // Nothing is saved after shutdown, autosave included.
        await store.setAutosave(.off)
        // The versions of the last saves are written before the answer (up to 10 s; they are
        // queued behind the saves at nice 10), not dropped when the process exits.
        let left = await store.finishVersionWrites(within: .seconds(10))
        if left > 0 { logger.warning("\(left) earlier versions not written by shutdown's deadline (10 s); they are dropped") }
        return .null
    }

    /// `exit`: status 0 after shutdown, else 1.
    func exit() {
        exitStatus = lifecycle == .shutDown ? 0 : 1
    }

    /// `$/setTrace`: a notification, so a bad value cannot be answered; it is logged and ignored.
    func setTrace(_ rawParams: JSONValue?) {
        do throws(ResponseError) {
            let params = try Params(byName: rawParams, method: "$/setTrace")
            guard let value = try params.optionalEnumeration("value", TraceLevel.allCases.map(\.rawValue)) else {
                throw ResponseError.invalidParams(field: "params.value", "missing")
            }
            trace = TraceLevel(rawValue: value) ?? .off
        } catch {
            logger.warning("ignored $/setTrace: \(error.message)")
        }
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
