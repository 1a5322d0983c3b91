import DocumentSession
import FileStore
import JSON
import JSONRPC

// The requests of a handoff to another server (NSUserActivity's role; Server+Handoff.swift): what a
// client wants back per document, a snapshot of the session, its restore.

/// `document/setClientState` → `null`: keeps `state` (any JSON: a cursor, a selection, a scroll
/// position) for the document; `null` clears it.
struct SetClientStateRequest: RequestType, PackageAwareRequest {
    static let method = "document/setClientState"
    typealias Result = NullResult
    /// The most a client state may take, as JSON text.
    static let maxBytes = 1 << 20
    var handle: String
    var state: JSONValue

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        guard let state = params.object["state"] else {
            throw .invalidParams(field: "params.state", "missing (any JSON value to have back at a restore; null clears it)")
        }
        let size = state.serialized().count
        guard size <= Self.maxBytes else {
            throw .invalidParams(field: "params.state", "\(size) bytes as JSON, more than the \(Self.maxBytes) kept")
        }
        self.state = state
    }
}

/// `session/snapshot` → ``SnapshotSessionResult``: takes no params.
struct SnapshotSessionRequest: ParamlessRequest {
    static let method = "session/snapshot"
    typealias Result = SnapshotSessionResult
}

/// One open document as a snapshot holds it.
struct SnapshotEntry: Sendable {
    var path: String
    var version: Int64
    var hasUnsavedChanges: Bool
    /// The name of its journal's copy in the snapshot (unsaved work), if any.
    var journal: String?
    var clientState: JSONValue
    /// A package's kind (`package` or `managed`); nil for a text document.
    var kind: PackageKind? = nil
    /// A managed document's migrations, to open it again with.
    var migrations: [String]? = nil

    /// As the manifest keeps it.
    var manifestJSON: JSONValue {
        var object: JSONObject = [
            "uri": .string(FileURI.uri(from: path)), "version": .integer(version), "hasUnsavedChanges": .bool(hasUnsavedChanges),
            "journal": journal.map { .string($0) } ?? .null, "clientState": clientState,
        ]
        if let kind { object["kind"] = .string(kind.rawValue) }
        if let migrations { object["migrations"] = .array(migrations.map { .string($0) }) }
        return .object(object)
    }
}

/// The token and what it names: `{snapshot, documents: [{uri, version, hasUnsavedChanges}]}`.
struct SnapshotSessionResult: RequestResult {
    var token: String
    var entries: [SnapshotEntry]

    var json: JSONValue {
        [
            "snapshot": .string(token),
            "documents": .array(entries.map { entry in
                [
                    "uri": .string(FileURI.uri(from: entry.path)), "version": .integer(entry.version),
                    "hasUnsavedChanges": .bool(entry.hasUnsavedChanges),
                ]
            }),
        ]
    }
}

/// Reads a `snapshot` token param: 32 lowercase hexadecimal digits.
private func snapshotToken(_ params: Params) throws(ResponseError) -> String {
    let token = try params.string("snapshot")
    guard SnapshotDirectory.isToken(token) else {
        throw .invalidParams(field: "params.snapshot", "not a snapshot token (32 lowercase hexadecimal digits, as session/snapshot answers)")
    }
    return token
}

/// `session/restore` → ``RestoreSessionResult``.
struct RestoreSessionRequest: RequestType {
    static let method = "session/restore"
    typealias Result = RestoreSessionResult
    var token: String
    var includeText: Bool

    init(params: Params) throws(ResponseError) {
        token = try snapshotToken(params)
        includeText = try params.optionalBool("includeText") ?? true
    }
}

/// What became of one document of a restored snapshot.
struct RestoredEntry: Sendable {
    var uri: String
    /// The document's info (a text document's, or a package's).
    var info: JSONValue?
    var clientState: JSONValue
    /// What `document/recover` answered (a text document's result, or a package's).
    var recovered: JSONValue?
    var error: ResponseError?

    var json: JSONValue {
        var object: JSONObject = ["uri": .string(uri)]
        object["document"] = info ?? .null
        object["clientState"] = clientState
        object["recovered"] = recovered ?? .null
        object["error"] = error.map { error in
            var detail: JSONObject = ["code": .integer(Int64(error.code.rawValue)), "message": .string(error.message)]
            if let data = error.data { detail["data"] = data }
            return .object(detail)
        } ?? .null
        return .object(object)
    }
}

/// `{documents: [{uri, document, clientState, recovered, error}]}`, in the snapshot's order.
struct RestoreSessionResult: RequestResult {
    var entries: [RestoredEntry]

    var json: JSONValue { ["documents": .array(entries.map(\.json))] }
}

/// `session/discardSnapshot` → `null`.
struct DiscardSnapshotRequest: RequestType {
    static let method = "session/discardSnapshot"
    typealias Result = NullResult
    var token: String

    init(params: Params) throws(ResponseError) {
        token = try snapshotToken(params)
    }
}
