import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

// The requests about a document's file and its earlier versions (Server+Presenting.swift).

/// `document/resolveConflict` → ``ResolveConflictResult``.
struct ResolveConflictRequest: RequestType, PackageAwareRequest {
    static let method = "document/resolveConflict"
    typealias Result = EitherResult<ResolveConflictResult, PackageInfo>
    var handle: String
    var resolution: ConflictResolution
    var version: Int64?
    /// The conflict version to resolve against: a sync tool's copy (`sync:<name>`).
    var id: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        id = try params.optionalString("id")
        guard let how = try params.optionalEnumeration("resolution", ["mine", "theirs", "merge"]) else {
            throw .invalidParams(field: "params.resolution", "missing (one of \"mine\", \"theirs\", \"merge\" is required)")
        }
        let text = try params.optionalString("text")
        if text != nil && how != "merge" {
            throw .invalidParams(field: "params.text", "only a \"merge\" resolution takes a text (this one is \"\(how)\")")
        }
        version = try params.optionalInteger("version")
        resolution = how == "mine" ? .mine : how == "theirs" ? .theirs : .merge(text: text)
    }
}

/// `{resolved: true, version, edits}`, or `{resolved: false, version, conflicts}` when a merge
/// found both sides changing the same lines (then nothing changed).
enum ResolveConflictResult: RequestResult {
    /// One region both sides changed: its range in the document's text, and the three texts.
    struct Conflict: Sendable {
        var range: TextRange
        var mine: String
        var theirs: String
        var base: String
    }

    case resolved(version: Int64, edits: [TextEdit])
    case conflicts(version: Int64, [Conflict])

    var json: JSONValue {
        switch self {
        case .resolved(let version, let edits):
            return ["resolved": true, "version": .integer(version), "edits": .array(edits.map(Server.json))]
        case .conflicts(let version, let conflicts):
            return [
                "resolved": false, "version": .integer(version),
                "conflicts": .array(conflicts.map { conflict in
                    [
                        "range": Server.json(conflict.range),
                        "mine": .string(conflict.mine), "theirs": .string(conflict.theirs), "base": .string(conflict.base),
                    ]
                }),
            ]
        }
    }
}

/// `document/versions` → ``VersionsResult``.
struct ListVersionsRequest: RequestType, PackageAwareRequest {
    static let method = "document/versions"
    typealias Result = EitherResult<VersionsResult, PackageVersionsResult>
    var handle: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
    }
}

/// The document's versions, newest first: sync tools' conflict copies beside its file (unresolved)
/// and the kept conflict and saved versions.
struct VersionsResult: RequestResult {
    var versions: [VersionStore.Version]
    var copies: [SyncCopyFile] = []

    var json: JSONValue {
        var entries: [(date: Int64, json: JSONValue)] = versions.map { version in (version.date, Server.json(version)) }
        for copy in copies {
            let directory = FileWatcher.split(copy.path)?.directory ?? "/"
            entries.append((copy.date, Server.json(DocumentStore.version(of: copy, documentPath: FileWatcher.join(directory, copy.copy.original)))))
        }
        // Newest first; a stable sort keeps the store's order among equal dates.
        let sorted = entries.enumerated().sorted { ($0.element.date, -$0.offset) > ($1.element.date, -$1.offset) }
        return ["versions": .array(sorted.map(\.element.json))]
    }
}

/// `document/readVersion` → ``ReadVersionResult``.
struct ReadVersionRequest: RequestType {
    static let method = "document/readVersion"
    typealias Result = ReadVersionResult
    var handle: String
    var id: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        id = try params.string("id")
    }
}

struct ReadVersionResult: RequestResult {
    var id: String
    var text: String
    var json: JSONValue { ["id": .string(id), "text": .string(text)] }
}

/// `document/restoreVersion` → ``EditsResult``: a version's text put back as one undoable edit.
struct RestoreVersionRequest: RequestType {
    static let method = "document/restoreVersion"
    typealias Result = EditsResult
    var handle: String
    var id: String
    var version: Int64?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        id = try params.string("id")
        version = try params.optionalInteger("version")
    }
}
