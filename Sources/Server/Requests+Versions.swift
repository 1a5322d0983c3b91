import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

// The requests about a document's kept versions beyond listing, reading and restoring them
// (Server+Versions.swift), and the shape of a version on the wire.

/// `document/deleteVersion` → `null`.
struct DeleteVersionRequest: RequestType {
    static let method = "document/deleteVersion"
    typealias Result = NullResult
    var handle: String
    var id: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        id = try params.string("id")
    }
}

/// `document/diffVersions` → ``DiffVersionsResult``: the edits from one version's text to another's
/// (`to` absent: the document's current text).
struct DiffVersionsRequest: RequestType {
    static let method = "document/diffVersions"
    typealias Result = DiffVersionsResult
    var handle: String
    var from: String
    var to: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        from = try params.string("from")
        to = try params.optionalString("to")
    }
}

/// `{edits}`: in order, each against the text the ones before it made.
struct DiffVersionsResult: RequestResult {
    var edits: [TextEdit]
    var json: JSONValue { ["edits": .array(edits.map(Server.json))] }
}

extension Server {
    /// A version as `document/versions` and `document/didChangeVersions` show it (`VersionInfo`).
    static func json(_ version: VersionStore.Version) -> JSONValue {
        var info: [(String, JSONValue)] = [
            ("id", .string(version.id)), ("kind", .string(version.kind.rawValue)),
            ("date", .string(Timestamp.iso8601(nanoseconds: version.date))), ("size", .integer(Int64(version.size))),
            ("resolved", .bool(version.resolved)),
        ]
        if version.kind == .syncConflict, let origin = version.origin {
            info.append(("origin", .string(origin)))
            // What the copy's name said of the tool and the other side (it was a copy of this
            // document, whose name may have changed since: any reading of the name will do).
            if let copy = SyncConflictNames.candidates(origin).first {
                info.append(("tool", .string(copy.tool.rawValue)))
                if let device = copy.device { info.append(("device", .string(device))) }
            }
            // A copy still beside the file (unresolved): where it is.
            if !version.resolved, version.id.hasPrefix(DocumentStore.syncCopyPrefix), let directory = FileWatcher.split(version.documentPath)?.directory {
                info.append(("uri", .string(FileURI.uri(from: FileWatcher.join(directory, origin)))))
            }
        }
        return .object(JSONObject(info))
    }

    /// `document/didChangeVersions`'s params.
    static func didChangeVersionsParams(
        _ event: DocumentEvent, added: [VersionStore.Version], removed: [String], resolved: [String]
    ) -> JSONValue {
        [
            "document": .string(event.handle), "uri": .string(FileURI.uri(from: event.path)),
            "added": .array(added.map(Server.json)), "removed": .array(removed.map(JSONValue.string)),
            "resolved": .array(resolved.map(JSONValue.string)),
        ]
    }
}
