import DocumentSession
import FileStore
import JSON
import JSONRPC

// The coordinated file operations and the picker's import and export (Server+FileOperations.swift).

/// The file a delete, move or rename acts on, as the params name it: `uri`, or the open document
/// `document` (exactly one of them); resolved and checked against the roots by the handler.
enum FileSource: Sendable {
    /// `uri` as a path.
    case uri(String)
    /// A document handle.
    case document(String)

    init(_ params: Params) throws(ResponseError) {
        try Self.requireOne(params)
        if try params.optionalString("uri") != nil {
            self = .uri(try params.filePath("uri"))
        } else {
            self = .document(try params.string("document"))
        }
    }

    /// Exactly one of `uri` and `document`.
    static func requireOne(_ params: Params) throws(ResponseError) {
        switch (params.value("uri"), params.value("document")) {
        case (nil, nil): throw .invalidParams(field: params.fieldPath("uri"), "missing (a file URI, or a document handle as `document`, is required)")
        case (.some, .some): throw .invalidParams(field: params.fieldPath("document"), "give either `uri` or `document`, not both")
        default: return
        }
    }
}

extension Params {
    /// A plain file name: not empty, `.` or `..`, without `/` or NUL.
    func fileName(_ key: String) throws(ResponseError) -> String {
        let name = try string(key)
        if name.isEmpty || name == "." || name == ".." || name.utf8.contains(UInt8(ascii: "/")) || name.utf8.contains(0) {
            throw .invalidParams(field: fieldPath(key), "not a file name (a name is not empty, ‘.’ or ‘..’, and holds no ‘/’ or NUL)")
        }
        return name
    }
}

/// `document/delete` → ``DeleteDocumentResult``.
struct DeleteDocumentRequest: RequestType {
    static let method = "document/delete"
    typealias Result = DeleteDocumentResult
    var source: FileSource
    var discard: Bool

    init(params: Params) throws(ResponseError) {
        source = try FileSource(params)
        discard = try params.optionalBool("discard") ?? false
    }
}

struct DeleteDocumentResult: RequestResult {
    /// The handle of the document the delete closed, if one was open.
    var closed: String?
    var json: JSONValue { ["deleted": true, "closed": closed.map { .string($0) } ?? .null] }
}

/// `document/move` → ``MoveDocumentResult``.
struct MoveDocumentRequest: RequestType {
    static let method = "document/move"
    typealias Result = MoveDocumentResult
    var source: FileSource
    /// `to` as a path, not yet checked against the roots.
    var destination: String
    var replace: Bool

    init(params: Params) throws(ResponseError) {
        source = try FileSource(params)
        destination = try params.filePath("to")
        replace = try params.optionalBool("replace") ?? false
    }
}

/// `document/rename` → ``MoveDocumentResult``: a move in the same directory.
struct RenameDocumentRequest: RequestType {
    static let method = "document/rename"
    typealias Result = MoveDocumentResult
    var source: FileSource
    var name: String

    init(params: Params) throws(ResponseError) {
        source = try FileSource(params)
        name = try params.fileName("name")
    }
}

/// Where a moved or renamed file is now, and its document if it is open.
struct MoveDocumentResult: RequestResult {
    var path: String
    var handle: String?

    var json: JSONValue {
        [
            "uri": .string(FileURI.uri(from: path)),
            "displayName": .string(Document.displayName(forPath: path)),
            "fileType": .string(FileType.identifier(forPath: path)),
            "document": handle.map { .string($0) } ?? .null,
        ]
    }
}

/// `workspace/import` → ``ImportFileResult``.
struct ImportFileRequest: RequestType {
    static let method = "workspace/import"
    typealias Result = ImportFileResult
    /// `from` and `directory` as paths, not yet checked against the roots.
    var from: String
    var directory: String
    /// `name`, or the source's own name.
    var name: String
    var open: Bool

    init(params: Params) throws(ResponseError) {
        from = try params.filePath("from")
        directory = try params.filePath("directory")
        name = params.value("name") == nil ? Document.displayName(forPath: from) : try params.fileName("name")
        open = try params.optionalBool("open") ?? false
    }
}

struct ImportFileResult: RequestResult {
    var path: String
    var name: String
    /// The copy opened as a document, when the request asked.
    var document: DocumentInfo?

    var json: JSONValue {
        var result: JSONObject = ["uri": .string(FileURI.uri(from: path)), "name": .string(name)]
        if let document { result["document"] = document.json }
        return .object(result)
    }
}

/// `workspace/export` → ``ExportFileResult``: a document's text or a copy of a file, to `to`.
struct ExportFileRequest: RequestType {
    static let method = "workspace/export"
    typealias Result = ExportFileResult

    enum Source: Sendable {
        case document(String)
        /// `uri` as a path, not yet checked against the roots.
        case file(String)
    }

    var source: Source
    /// `to` as a path, not yet checked against the roots.
    var destination: String
    var replace: Bool

    init(params: Params) throws(ResponseError) {
        try FileSource.requireOne(params)
        if let handle = try params.optionalString("document") {
            source = .document(handle)
        } else {
            source = .file(try params.filePath("uri"))
        }
        destination = try params.filePath("to")
        replace = try params.optionalBool("replace") ?? false
    }
}

struct ExportFileResult: RequestResult {
    var path: String
    var size: Int64
    var json: JSONValue { ["uri": .string(FileURI.uri(from: path)), "size": .integer(size)] }
}
