import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

// LSP's text synchronisation (the LSP mode, issue 21; Server+TextSync.swift): the notifications
// an editor's own LSP client sends about its buffers, and `workspace/executeCommand`.

extension Params {
    /// A required object member.
    func object(_ key: String) throws(ResponseError) -> Params {
        guard let object = try optionalObject(key) else { throw .invalidParams(field: fieldPath(key), "missing (an object is required)") }
        return object
    }
}

/// LSP's `TextDocumentIdentifier`: a document's URI, read as a path. Only `file://` URIs name
/// documents a session can mirror.
struct EditorDocument: Sendable, Equatable {
    var uri: String
    var path: String

    init(_ params: Params) throws(ResponseError) {
        uri = try params.string("uri")
        do throws(FileURI.Invalid) {
            path = try FileURI.path(from: uri)
        } catch {
            throw .invalidParams(field: params.fieldPath("uri"), error.reason)
        }
    }

    /// A URI given as a command's argument (`field` names it).
    init(argument: JSONValue, field: String) throws(ResponseError) {
        guard case .string(let uri) = argument else {
            throw .invalidParams(field: field, "expected the document's URI (a string), got \(argument.kindDescription)")
        }
        self.uri = uri
        do throws(FileURI.Invalid) {
            path = try FileURI.path(from: uri)
        } catch {
            throw .invalidParams(field: field, error.reason)
        }
    }
}

/// `textDocument/didOpen`: the editor opened a buffer of a file, with its text and version.
struct DidOpenTextDocumentNotification: NotificationType {
    static let method = "textDocument/didOpen"
    var document: EditorDocument
    var languageID: String
    var version: Int64
    var text: String

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let item = try Params(byName: rawParams, method: Self.method).object("textDocument")
        document = try EditorDocument(item)
        languageID = try item.string("languageId")
        version = try item.integer("version", in: Int64(Int32.min)...Int64(Int32.max))
        text = try item.string("text")
    }
}

/// `textDocument/didChange`: the editor's changes, in order, each against the result of the one
/// before (a change without a range replaces the whole text), bringing it to `version`.
struct DidChangeTextDocumentNotification: NotificationType {
    static let method = "textDocument/didChange"
    var document: EditorDocument
    var version: Int64
    /// The changes, or why they cannot be read: the buffer is known, and a change it made is lost
    /// to the session (its handler marks the mirror as no longer exact).
    var changes: Result<[TextEdit], ResponseError>

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: Self.method)
        let identifier = try params.object("textDocument")
        document = try EditorDocument(identifier)
        version = try identifier.integer("version", in: Int64(Int32.min)...Int64(Int32.max))
        // `rangeLength` (deprecated in LSP) is not looked at: the range says what is replaced.
        do throws(ResponseError) {
            changes = .success(try params.textEdits("contentChanges"))
        } catch {
            changes = .failure(error)
        }
    }
}

/// `textDocument/willSave`: the editor is about to write the file (`reason`: 1 manual, 2 after a
/// delay, 3 focus out).
struct WillSaveTextDocumentNotification: NotificationType {
    static let method = "textDocument/willSave"
    var document: EditorDocument
    var reason: Int64

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: Self.method)
        document = try EditorDocument(params.object("textDocument"))
        reason = try params.integer("reason", in: 1...3)
    }
}

/// `textDocument/didSave`: the editor wrote the file itself (`text` is not asked for and, if sent,
/// not looked at: the file is read).
struct DidSaveTextDocumentNotification: NotificationType {
    static let method = "textDocument/didSave"
    var document: EditorDocument

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: Self.method)
        document = try EditorDocument(params.object("textDocument"))
        _ = try params.optionalString("text")
    }
}

/// `textDocument/didClose`: the editor closed the buffer; unsaved edits in it were discarded.
struct DidCloseTextDocumentNotification: NotificationType {
    static let method = "textDocument/didClose"
    var document: EditorDocument

    init(params rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: Self.method)
        document = try EditorDocument(params.object("textDocument"))
    }
}

/// `workspace/executeCommand` → the command's result: one of ``ExecuteCommandRequest/Command``,
/// with the document's URI first in `arguments`.
struct ExecuteCommandRequest: RequestType {
    static let method = "workspace/executeCommand"
    typealias Result = CommandResult

    enum Command: Sendable, Equatable {
        case save(EditorDocument)
        case revert(EditorDocument)
        case versions(EditorDocument)
        case restoreVersion(EditorDocument, id: String)
        case showVersion(EditorDocument, id: String)

        var document: EditorDocument {
            switch self {
            case .save(let document), .revert(let document), .versions(let document), .restoreVersion(let document, _),
                .showVersion(let document, _): document
            }
        }
    }

    /// The commands `executeCommandProvider` lists.
    static let commands = ["docsession.save", "docsession.revert", "docsession.versions", "docsession.restoreVersion", "docsession.showVersion"]

    var command: Command

    init(params: Params) throws(ResponseError) {
        let name = try params.string("command")
        guard Self.commands.contains(name) else {
            throw .invalidParams(
                field: params.fieldPath("command"),
                "\"\(name)\" is not a command of this server (it has \(Self.commands.map { "\"\($0)\"" }.joined(separator: ", ")))")
        }
        let field = params.fieldPath("arguments")
        guard let value = params.value("arguments") else { throw .invalidParams(field: field, "missing (\(name) takes the document's URI)") }
        guard case .array(let arguments) = value else { throw .invalidParams(field: field, "expected an array, got \(value.kindDescription)") }
        let wanted = name == "docsession.restoreVersion" || name == "docsession.showVersion" ? 2 : 1
        guard arguments.count == wanted else {
            throw .invalidParams(
                field: field,
                wanted == 2 ? "\(name) takes two arguments, the document's URI and a version id (got \(arguments.count))"
                    : "\(name) takes one argument, the document's URI (got \(arguments.count))")
        }
        let document = try EditorDocument(argument: arguments[0], field: "\(field)[0]")
        switch name {
        case "docsession.save": command = .save(document)
        case "docsession.revert": command = .revert(document)
        case "docsession.versions": command = .versions(document)
        default:
            guard case .string(let id) = arguments[1] else {
                throw .invalidParams(field: "\(field)[1]", "expected a version id (a string), got \(arguments[1].kindDescription)")
            }
            command = name == "docsession.showVersion" ? .showVersion(document, id: id) : .restoreVersion(document, id: id)
        }
    }
}

/// A command's result, as the command makes it.
struct CommandResult: RequestResult {
    var json: JSONValue
}
