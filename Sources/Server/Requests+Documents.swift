import DocumentSession
import FileStore
import JSON
import JSONRPC
import ManagedStore
import TextBuffer

// The requests of a document's session (Server+Documents.swift): their params and results.

/// `document/open` → ``DocumentInfo``.
struct OpenDocumentRequest: RequestType {
    static let method = "document/open"
    typealias Result = EitherResult<DocumentInfo, PackageInfo>
    /// `uri` as a path, not yet checked against the roots.
    var path: String
    var encoding: TextEncoding?
    var includeText: Bool
    var workDoneToken: JSONValue?
    /// `text`, `package` or `managed` (nil: a package when the path is a directory with a
    /// package's extension or a managed store, else text).
    var kind: String?
    /// A managed document's migrations and read-only flag.
    var storeOptions: StoreOptions?

    init(params: Params) throws(ResponseError) {
        path = try params.filePath("uri")
        encoding = try params.textEncoding("encoding")
        includeText = try params.optionalBool("includeText") ?? true
        workDoneToken = try params.progressToken("workDoneToken")
        kind = try params.optionalEnumeration("kind", ["text", "package", "managed"])
        storeOptions = try params.storeOptions("storeOptions")
        if storeOptions != nil && kind != "managed" && kind != nil {
            throw .invalidParams(field: "params.storeOptions", "only a managed document takes storeOptions (kind is \"\(kind!)\")")
        }
        if kind == "package" || kind == "managed", encoding != nil {
            throw .invalidParams(field: "params.encoding", "a \(kind!) document has no text encoding (its entries are bytes)")
        }
    }
}

/// `document/create` → ``DocumentInfo``: at `uri`, or in `directory` under a name its `naming`
/// rule makes.
struct CreateDocumentRequest: RequestType {
    static let method = "document/create"
    typealias Result = EitherResult<DocumentInfo, PackageInfo>

    enum Location: Sendable {
        /// `uri`, as a path not yet checked against the roots.
        case file(String)
        /// `directory` (a path not yet checked) and the `naming` rule.
        case directory(String, rule: NamingRule, nameFromFirstLine: Bool)
    }

    var location: Location
    var text: String
    /// `package` or `managed` for a directory document (nil: a text file).
    var kind: String?
    var storeOptions: StoreOptions?

    init(params: Params) throws(ResponseError) {
        kind = try params.optionalEnumeration("kind", ["text", "package", "managed"])
        if kind == "text" { kind = nil }
        storeOptions = try params.storeOptions("storeOptions")
        if storeOptions != nil && kind != "managed" {
            throw .invalidParams(field: "params.storeOptions", "only a managed document takes storeOptions (give kind \"managed\")")
        }
        if let kind, params.value("text") != nil {
            throw .invalidParams(field: "params.text", "a \(kind) document has no text (write its entries with document/writeEntry)")
        }
        let hasURI = params.value("uri") != nil
        let hasDirectory = params.value("directory") != nil
        guard hasURI != hasDirectory else {
            // Neither: the uri is what is missing (as before directories could be named).
            if !hasURI { throw .invalidParams(field: "params.uri", "missing (give uri, or directory with naming)") }
            throw .invalidParams(field: "params", "give either uri or directory (with naming), not both")
        }
        text = try params.optionalString("text") ?? ""
        if hasURI {
            if params.value("naming") != nil {
                throw .invalidParams(field: "params.naming", "naming goes with directory, not with uri")
            }
            location = .file(try params.filePath("uri"))
            return
        }
        guard let naming = try params.optionalObject("naming") else {
            throw .invalidParams(field: "params.naming", "missing: a directory needs a naming rule ({prefix, style, extension})")
        }
        let nameFrom = try naming.optionalEnumeration("nameFrom", ["rule", "firstLine"]) ?? "rule"
        // Named after the text, the rule is only the fallback for a blank text: "Untitled 1.txt"
        // unless the client gives a prefix.
        let rule = try naming.namingRule(defaultPrefix: nameFrom == "firstLine" ? "Untitled" : "")
        location = .directory(try params.filePath("directory"), rule: rule, nameFromFirstLine: nameFrom == "firstLine")
    }
}

/// `document/read` → ``ReadDocumentResult``: the text, whole or of a range.
struct ReadDocumentRequest: RequestType {
    static let method = "document/read"
    typealias Result = ReadDocumentResult
    var handle: String
    var range: TextRange?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        range = try params.optionalObject("range").map { (range) throws(ResponseError) in try range.textRange() }
    }
}

struct ReadDocumentResult: RequestResult {
    var text: String
    var version: Int64
    var json: JSONValue { ["text": .string(text), "version": .integer(version)] }
}

/// The result of `document/edit`: the new version.
struct EditDocumentResult: RequestResult {
    var version: Int64
    var json: JSONValue { ["version": .integer(version)] }
}

/// `document/undo` and `document/redo`: the same params (`document`, an optional `version`).
protocol HistoryStepRequest: RequestType where Result == EitherResult<EditsResult, PackageStepResult> {
    var handle: String { get }
    var version: Int64? { get }
    init(handle: String, version: Int64?)
}

extension HistoryStepRequest {
    init(params: Params) throws(ResponseError) {
        self.init(handle: try params.string("document"), version: try params.optionalInteger("version", in: 0...Int64.max))
    }
}

/// `document/undo` → ``EditsResult``.
struct UndoRequest: HistoryStepRequest, PackageAwareRequest {
    static let method = "document/undo"
    typealias Result = EitherResult<EditsResult, PackageStepResult>
    var handle: String
    var version: Int64?
}

/// `document/redo` → ``EditsResult``.
struct RedoRequest: HistoryStepRequest, PackageAwareRequest {
    static let method = "document/redo"
    typealias Result = EitherResult<EditsResult, PackageStepResult>
    var handle: String
    var version: Int64?
}

/// A new version and the edits that turned the previous text into it (`document/undo`, `redo`,
/// `restoreVersion`).
struct EditsResult: RequestResult {
    var version: Int64
    var edits: [TextEdit]
    var json: JSONValue { ["version": .integer(version), "edits": .array(edits.map(Server.json))] }
}

/// `document/state` → ``DocumentStateResult``.
struct DocumentStateRequest: RequestType, PackageAwareRequest {
    static let method = "document/state"
    typealias Result = EitherResult<DocumentStateResult, PackageInfo>
    var handle: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
    }
}

/// The state flags and the undo and change-tracking summary of a document.
struct DocumentStateResult: RequestResult {
    var handle: String
    var document: Document

    var json: JSONValue {
        var result: JSONObject = [
            "document": .string(handle), "uri": .string(FileURI.uri(from: document.path)),
            "version": .integer(document.version), "state": Server.stateJSON(document.state),
            "hasUnsavedChanges": .bool(document.hasUnsavedChanges),
            "canUndo": .bool(document.history.canUndo), "canRedo": .bool(document.history.canRedo),
            "etag": .string(Server.etag(document.identity)),
        ]
        if let label = document.history.undoLabel { result["undoLabel"] = .string(label) }
        if let label = document.history.redoLabel { result["redoLabel"] = .string(label) }
        if document.readOnly { result["readOnly"] = true }
        return .object(result)
    }
}

/// The document info `document/open`, `create` and `revert` answer (and `workspace/import` with
/// `open`): taken from the document when the answer is made.
struct DocumentInfo: RequestResult {
    var handle: String
    var path: String
    var version: Int64
    /// The text, when the request asked for it.
    var text: String?
    var state: DocumentState
    var fileType: String
    var displayName: String
    var modificationTime: Int64
    var encoding: TextEncoding
    var byteOrderMark: Bool
    var lineEnding: String
    var hasUnsavedChanges: Bool
    var readOnly: Bool
    /// A dead server's journal of the file, waiting (`document/open` only).
    var recovery: RecoveryOffer? = nil
    /// Whether a live server holds a journal of the file: it has unsaved changes to it.
    var editedElsewhere = false
    /// The file's content put back from the backup of an interrupted in-place save by the open.
    var restoredSave: SafeSave.RestoredSave? = nil

    init(_ document: Document, includeText: Bool) {
        handle = document.handle
        path = document.path
        version = document.version
        text = includeText ? document.buffer.text : nil
        state = document.state
        fileType = document.fileType
        displayName = document.displayName
        modificationTime = document.identity.modificationTime
        encoding = document.encoding
        byteOrderMark = document.hasByteOrderMark
        lineEnding = document.lineEnding.rawValue
        hasUnsavedChanges = document.hasUnsavedChanges
        readOnly = document.readOnly
    }

    var json: JSONValue {
        var info: JSONObject = [
            "document": .string(handle),
            "uri": .string(FileURI.uri(from: path)),
            "version": .integer(version),
        ]
        if let text { info["text"] = .string(text) }
        info["state"] = Server.stateJSON(state)
        info["fileType"] = .string(fileType)
        info["displayName"] = .string(displayName)
        info["modificationDate"] = .string(Timestamp.iso8601(nanoseconds: modificationTime))
        info["encoding"] = .string(encoding.rawValue)
        info["byteOrderMark"] = .bool(byteOrderMark)
        info["lineEnding"] = .string(lineEnding)
        info["hasUnsavedChanges"] = .bool(hasUnsavedChanges)
        if readOnly { info["readOnly"] = true }
        if let recovery { info["recovery"] = Server.json(recovery) }
        if editedElsewhere { info["editedElsewhere"] = true }
        if let restoredSave {
            info["restoredFromBackup"] = [
                "date": .string(Timestamp.iso8601(nanoseconds: restoredSave.date)), "size": .integer(Int64(restoredSave.size)),
            ]
        }
        return .object(info)
    }
}
