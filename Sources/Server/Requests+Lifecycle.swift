import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

// LSP's lifecycle: initialize, initialized, shutdown, exit, $/setTrace (Server+Lifecycle.swift).

/// `initialize` → ``InitializeResult``. Everything is read before anything changes: a bad field
/// leaves the server uninitialized.
struct InitializeRequest: RequestType {
    static let method = "initialize"
    typealias Result = InitializeResult
    /// The position encodings the client offers, in its order (nil: none listed).
    var positionEncodings: [String]?
    var trace: TraceLevel?
    var autosave: AutosavePolicy
    /// `initializationOptions.roots` as paths (not empty), to narrow the server's roots.
    var roots: [String]?
    /// Where `roots` is, for errors.
    static let rootsField = "params.initializationOptions.roots"
    /// `initializationOptions.storage`: the local and the synced storage roots as paths (not yet
    /// checked: they must exist, be directories, lie inside the roots, and neither hold the other).
    var storage: (local: String, synced: String)?
    /// Where `storage` is, for errors.
    static let storageField = "params.initializationOptions.storage"
    /// The client's process (`processId`): watched, its death taken as the end of input.
    var processID: Int64?
    /// `initializationOptions.flushDelay`: the longest a journaled change waits to be flushed, in
    /// milliseconds (nil: the server's 200).
    var flushDelay: Int64?
    /// `initializationOptions.maxFileSize`: the largest file read whole, in bytes (nil: the
    /// server's, `--max-file-size` or derived from memory; issue 34.8).
    var maxFileSize: Int64?
    /// `initializationOptions.hotExit`: whether `shutdown` keeps the journals of documents with
    /// unsaved changes (default true).
    var hotExit: Bool
    /// `initializationOptions.persistUndo`: whether undo histories are kept across closes and
    /// restarts (default false).
    var persistUndo: Bool
    /// Whether the client's capabilities carry LSP's `textDocument`: an editor's own LSP client,
    /// which synchronises its buffers with `textDocument/did*` (the LSP mode).
    var editorClient: Bool
    /// `clientInfo.name`, if given: how other clients of a daemon are told who changed a document.
    var clientName: String?

    init(params: Params) throws(ResponseError) {
        processID = try params.optionalInteger("processId")
        clientName = nil
        if let clientInfo = try params.optionalObject("clientInfo") {
            clientName = try clientInfo.string("name")
            _ = try clientInfo.optionalString("version")
        }
        trace = try params.optionalEnumeration("trace", TraceLevel.allCases.map(\.rawValue)).flatMap(TraceLevel.init)
        var offered: [String]? = nil
        editorClient = false
        if let capabilities = try params.optionalObject("capabilities") {
            editorClient = try capabilities.optionalObject("textDocument") != nil
            // LSP 3.17 puts the list under capabilities.general; the short form is accepted too.
            if let general = try capabilities.optionalObject("general") {
                offered = try general.optionalStringArray("positionEncodings")
            }
            let short = try capabilities.optionalStringArray("positionEncodings")
            if offered?.isEmpty ?? true { offered = short }
        }
        positionEncodings = offered
        autosave = .off
        roots = nil
        storage = nil
        flushDelay = nil
        maxFileSize = nil
        hotExit = true
        persistUndo = false
        if let options = try params.optionalObject("initializationOptions") {
            flushDelay = try options.optionalInteger("flushDelay", in: 0...60_000)
            maxFileSize = try options.optionalInteger("maxFileSize", in: 1...Int64.max)
            hotExit = try options.optionalBool("hotExit") ?? true
            persistUndo = try options.optionalBool("persistUndo") ?? false
            if let settings = try options.optionalObject("autosave") {
                let policy = try settings.optionalEnumeration("policy", ["off", "afterDelay"]) ?? "off"
                let delay = try settings.optionalInteger("delay", in: 1...86_400_000)
                if policy == "afterDelay" { autosave = .afterDelay(milliseconds: Int(delay ?? 2000)) }
            }
            roots = try Self.roots(options)
            if let locations = try options.optionalObject("storage") {
                storage = (local: try Self.directoryURI(locations, "local"), synced: try Self.directoryURI(locations, "synced"))
            }
        }
    }

    /// A storage root: a file URI (required).
    private static func directoryURI(_ locations: Params, _ key: String) throws(ResponseError) -> String {
        let uri = try locations.string(key)
        do throws(FileURI.Invalid) {
            return try FileURI.path(from: uri)
        } catch {
            throw .invalidParams(field: locations.fieldPath(key), error.reason)
        }
    }

    /// `initializationOptions.roots`: directories (file URIs); absent: nil.
    private static func roots(_ options: Params) throws(ResponseError) -> [String]? {
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
        return paths
    }
}

/// The server's info and capabilities.
struct InitializeResult: RequestResult {
    var positionEncoding: PositionEncoding
    var maxMessageSize: Int
    var autosave: AutosavePolicy
    var watchFiles: Bool
    var keepsVersions: Bool
    var roots: SandboxRoots?
    /// Whether unsaved changes are journaled, and the flush delay and hot exit in force.
    var journal: Bool
    var flushDelay: Int64
    var hotExit: Bool
    /// Whether undo histories are kept across closes and restarts.
    var persistUndo: Bool
    /// Whether sessions can be snapshotted and restored (`session/snapshot`).
    var handoff: Bool
    /// The storage locations taken (`initializationOptions.storage`), nil without.
    var storage: StorageRoots?
    /// The LSP mode: LSP's `textDocumentSync` and `executeCommandProvider` are answered too.
    var editorClient: Bool

    var json: JSONValue {
        let autosaveJSON: JSONValue
        switch autosave {
        case .off: autosaveJSON = ["policy": "off"]
        case .afterDelay(let milliseconds): autosaveJSON = ["policy": "afterDelay", "delay": .integer(Int64(milliseconds))]
        }
        var capabilities: JSONValue = [
                "positionEncoding": .string(positionEncoding.rawValue),
                "maxMessageSize": .integer(Int64(maxMessageSize)),
                "batches": true,
                "cancellation": true,
                "autosave": autosaveJSON,
                "watchFiles": .bool(watchFiles),
                "versions": .bool(keepsVersions),
                "roots": roots.map { .array($0.paths.map { .string(FileURI.uri(from: $0)) }) } ?? .null,
                "journal": .bool(journal),
                "flushDelay": .integer(flushDelay),
                "hotExit": .bool(hotExit),
                "persistUndo": .bool(persistUndo),
                "handoff": .bool(handoff),
                "storage": storage.map { ["local": .string(FileURI.uri(from: $0.local)), "synced": .string(FileURI.uri(from: $0.synced))] } ?? .null,
            ]
        if editorClient, case .object(var members) = capabilities {
            members["textDocumentSync"] = [
                "openClose": true, "change": 2, "willSave": true, "save": ["includeText": false],
            ]
            members["executeCommandProvider"] = ["commands": .array(ExecuteCommandRequest.commands.map { .string($0) })]
            capabilities = .object(members)
        }
        return [
            "serverInfo": ["name": .string(Server.name), "version": .string(Server.version)],
            "capabilities": capabilities,
        ]
    }
}

/// `shutdown` → `null`: takes no params.
struct ShutdownRequest: ParamlessRequest {
    static let method = "shutdown"
    typealias Result = NullResult
}

/// `initialized`: its params are not looked at.
struct InitializedNotification: NotificationType {
    static let method = "initialized"
    init(params: JSONValue?) {}
}

/// `exit`: its params are not looked at.
struct ExitNotification: NotificationType {
    static let method = "exit"
    init(params: JSONValue?) {}
}

/// `$/setTrace`.
struct SetTraceNotification: NotificationType {
    static let method = "$/setTrace"
    var value: TraceLevel

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: Self.method)
        guard let value = try params.optionalEnumeration("value", TraceLevel.allCases.map(\.rawValue)) else {
            throw ResponseError.invalidParams(field: "params.value", "missing")
        }
        self.value = TraceLevel(rawValue: value) ?? .off
    }
}
