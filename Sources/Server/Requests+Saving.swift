import DocumentSession
import FileStore
import JSON
import JSONRPC

// The requests that save, revert and close a document (Server+Saving.swift).

/// `document/save` → ``SaveDocumentResult``.
struct SaveDocumentRequest: RequestType, PackageAwareRequest {
    static let method = "document/save"
    typealias Result = EitherResult<SaveDocumentResult, PackageSaveAnswer>
    var handle: String
    /// `to` as a path, not yet checked against the roots: save as a new file.
    var newPath: String?
    var force: Bool
    var workDoneToken: JSONValue?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        newPath = try params.optionalString("to") == nil ? nil : try params.filePath("to")
        force = try params.optionalBool("force") ?? false
        workDoneToken = try params.progressToken("workDoneToken")
    }
}

/// What a save wrote.
struct SaveDocumentResult: RequestResult {
    var saved: SaveResult

    var json: JSONValue {
        [
            "version": .integer(saved.version), "uri": .string(FileURI.uri(from: saved.path)),
            "etag": .string(Server.etag(saved.identity)),
            "modificationDate": .string(Timestamp.iso8601(nanoseconds: saved.identity.modificationTime)),
            "size": .integer(Int64(saved.size)), "durable": .bool(saved.durable),
            "method": .string(saved.method.rawValue),
        ]
    }
}

/// `document/revert` → ``DocumentInfo``.
struct RevertDocumentRequest: RequestType, PackageAwareRequest {
    static let method = "document/revert"
    typealias Result = EitherResult<DocumentInfo, PackageInfo>
    var handle: String
    var includeText: Bool

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        includeText = try params.optionalBool("includeText") ?? true
    }
}

/// `document/close` → ``CloseDocumentResult``.
struct CloseDocumentRequest: RequestType, PackageAwareRequest {
    static let method = "document/close"
    typealias Result = CloseDocumentResult
    var handle: String
    var policy: DocumentStore.SavePolicy

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        policy = try params.optionalEnumeration("save", ["ifChanged", "never"]).flatMap(DocumentStore.SavePolicy.init) ?? .ifChanged
    }
}

struct CloseDocumentResult: RequestResult {
    /// Whether unsaved changes were saved first.
    var saved: Bool
    /// In a daemon, when other clients still hold the document: how many (only this client's hold
    /// ended; the document stays open).
    var holders: Int? = nil
    var json: JSONValue {
        guard let holders else { return ["saved": .bool(saved)] }
        return ["saved": .bool(saved), "holders": .integer(Int64(holders))]
    }
}
