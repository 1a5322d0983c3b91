#if canImport(Glibc)
    import Glibc
#endif
import DocumentSession
import FileStore
import JSON
import JSONRPC
import ManagedStore
import TextBuffer

/// The project's own error codes, in JSON-RPC's server range -32000...-32099 (LSP uses -32001 and
/// -32002 there). Each has a section in protocol/README.md.
extension ErrorCode {
    /// -32010: a file-system call failed; `data` holds the error detail.
    public static let fileSystemError = ErrorCode(rawValue: -32010)
    /// -32011: no open document has this handle.
    public static let unknownDocument = ErrorCode(rawValue: -32011)
    /// -32012: edits are refused for now.
    public static let editingDisabled = ErrorCode(rawValue: -32012)
    /// -32013: `document/create` found a file already there.
    public static let alreadyExists = ErrorCode(rawValue: -32013)
    /// -32014: the file does not decode as text; `data` names the byte offset.
    public static let notText = ErrorCode(rawValue: -32014)
    /// -32016: the path is a directory or a special file.
    public static let notRegularFile = ErrorCode(rawValue: -32016)
    /// -32017: the file changed on disk since it was read or saved; the save was refused.
    public static let changedOnDisk = ErrorCode(rawValue: -32017)
    /// -32018: the text holds a character the file's encoding cannot represent.
    public static let unencodable = ErrorCode(rawValue: -32018)
    /// -32019: `document/resolveConflict` on a document that is not in conflict.
    public static let notInConflict = ErrorCode(rawValue: -32019)
    /// -32020: no version of the document has this id.
    public static let unknownVersion = ErrorCode(rawValue: -32020)
    /// -32021: earlier versions are not kept (no usable state directory).
    public static let versionsUnavailable = ErrorCode(rawValue: -32021)
    /// -32022: a path of the request lands outside the allowed roots (`--root`, `roots`).
    public static let outsideRoots = ErrorCode(rawValue: -32022)
    /// -32023: the operation would drop unsaved edits (`document/delete` without `discard`).
    public static let unsavedChanges = ErrorCode(rawValue: -32023)
    /// -32024: no live query has this id.
    public static let unknownQuery = ErrorCode(rawValue: -32024)
    /// -32025: `document/recover` or `document/discardRecovery` on a document with no journal of a
    /// dead server waiting.
    public static let noRecovery = ErrorCode(rawValue: -32025)
    /// -32026: `session/restore` or `session/discardSnapshot` of a token that names no snapshot
    /// (restored already, discarded, or taken with another state directory).
    public static let noSnapshot = ErrorCode(rawValue: -32026)
    /// -32027: sessions cannot be handed off here: no usable state directory, or (restoring unsaved
    /// work) no journal.
    public static let handoffUnavailable = ErrorCode(rawValue: -32027)
    /// -32028: no entry of the package has this path, or the path cannot be read or written as
    /// asked (a directory, a symbolic link, under a file, the managed store's own).
    public static let entryError = ErrorCode(rawValue: -32028)
    /// -32029: SQLite refused or failed a statement of a managed document (or a migration);
    /// `data` holds its extended result code, the code's name, its message and the statement.
    public static let storeError = ErrorCode(rawValue: -32029)
    /// -32030: a statement was refused before it ran: it would reach another file (ATTACH,
    /// load_extension, VACUUM INTO), change the schema outside a migration, write a table whose
    /// changes could not be undone, or write a read-only store.
    public static let statementRefused = ErrorCode(rawValue: -32030)
    /// -32031: the method is for another kind of document (a text method on a package, an entry
    /// method on a text document, a store method on a plain package).
    public static let wrongKind = ErrorCode(rawValue: -32031)
    /// -32032: a lease was refused (`workspace/coordinate`): a document of the file could not be
    /// saved first; `data` names the document, its uri and the save's own error.
    public static let coordinationRefused = ErrorCode(rawValue: -32032)
    /// -32033: no lease of this connection has this id (never granted, or ended already).
    public static let unknownLease = ErrorCode(rawValue: -32033)
}

extension FileSystemError {
    /// The error detail of protocol.md: code, errno, syscall, path, message, recoverable, suggestions.
    var json: JSONValue {
        var detail: JSONObject = [
            "code": .string(code), "errno": .integer(Int64(errno)), "syscall": .string(syscall),
            "path": .string(path), "message": .string(message), "recoverable": .bool(recoverable),
            "suggestions": .array(suggestions.map { .string($0) }),
        ]
        if let size { detail["size"] = .integer(size) }
        if let limit { detail["limit"] = .integer(limit) }
        return .object(detail)
    }
}

extension Server {
    /// The wire error for a document error; `field` names the params member a position error is
    /// about (edit errors name their own, `params.edits[i]...`).
    static func responseError(_ error: DocumentError, id: RequestID, field: String = "params", encodingWasNamed: Bool = false) -> ResponseError {
        switch error {
        case .unknownDocument(let handle):
            return ResponseError(.unknownDocument, "No open document has the handle \"\(handle)\"", data: ["document": .string(handle)])
        case .staleVersion(let current, let given):
            return ResponseError(
                .contentModified, "The document is at version \(current); the request was made against version \(given)",
                data: ["version": .integer(current)])
        case .invalidText(.invalidEdit(let index, let editField, let reason)):
            return .invalidParams(field: "params.edits[\(index)].\(editField.rawValue)", reason.description)
        case .invalidText(let reason):
            return .invalidParams(field: field, reason.description)
        case .load(.fileSystem(let detail)), .fileSystem(let detail):
            return ResponseError(.fileSystemError, detail.message, data: detail.json)
        case .load(.notText(let path, let offset, let encoding, let reason)):
            let hint = encodingWasNamed ? "" : "; name an encoding to open it anyway"
            return ResponseError(
                .notText, "\(path) is not \(encoding.rawValue) text: byte \(offset): \(reason)\(hint)",
                data: ["path": .string(path), "offset": .integer(Int64(offset)), "encoding": .string(encoding.rawValue)])
        case .load(.notRegularFile(let path, let kind)):
            return ResponseError(.notRegularFile, "\(path) is a \(kind), not a regular file", data: ["path": .string(path), "kind": .string(kind)])
        case .load(.outsideRoots(let path)):
            let reason = "the file opened to read it is not beneath the roots now (a directory of its path renamed or swapped since it was checked?); nothing was read"
            return ResponseError(
                .outsideRoots, "\(field): \(path): \(reason)",
                data: ["field": .string(field), "uri": .string(FileURI.uri(from: path)), "reason": .string(reason)])
        case .load(.cancelled):
            return .cancelled(id)
        case .alreadyExists(let path):
            return ResponseError(.alreadyExists, "A file already exists at \(path); it was left as it is", data: ["uri": .string(FileURI.uri(from: path))])
        case .save(.fileSystem(let detail)):
            return ResponseError(.fileSystemError, detail.message, data: detail.json)
        case .save(.changedOnDisk(let path, let expected, let found)):
            let what = found == nil ? "was deleted" : "changed on disk"
            return ResponseError(
                .changedOnDisk,
                "\(path) \(what) since it was read or last saved; resolve the conflict, save with force to overwrite it, or revert",
                data: ["path": .string(path), "uri": .string(FileURI.uri(from: path)), "expectedEtag": .string(etag(expected)),
                       "etag": found.map { .string(etag($0)) } ?? .null])
        case .save(.notRegularFile(let path, let kind)):
            return ResponseError(.notRegularFile, "\(path) is a \(kind), not a regular file", data: ["path": .string(path), "kind": .string(kind)])
        case .save(.alreadyExists(let path)):
            return ResponseError(
                .alreadyExists, "A file already exists at \(path); it was left as it is (save with force to replace it)",
                data: ["uri": .string(FileURI.uri(from: path))])
        case .openElsewhere(let path, let handle):
            return ResponseError(
                .alreadyExists, "\(path) is open as document \(handle); close it first",
                data: ["uri": .string(FileURI.uri(from: path)), "document": .string(handle)])
        case .save(.unencodable(let offset, let scalar, let encoding)):
            let hex = String(scalar, radix: 16, uppercase: true)
            let name = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            return ResponseError(
                .unencodable, "The text holds \(name) (at UTF-8 offset \(offset)), which \(encoding.rawValue) cannot represent; save as another encoding",
                data: ["offset": .integer(Int64(offset)), "character": .string(name), "encoding": .string(encoding.rawValue)])
        case .save(.outsideRoots(let path, let directory)):
            let reason = "the directory it would be written in, \(directory), is not beneath the roots now (renamed or swapped since it was checked?); nothing was written"
            return ResponseError(
                .outsideRoots, "\(field): \(path): \(reason)",
                data: ["field": .string(field), "uri": .string(FileURI.uri(from: path)), "reason": .string(reason)])
        case .save(.cancelled):
            return .cancelled(id)
        case .editingDisabled(let handle, let reason):
            return ResponseError(.editingDisabled, "Editing document \(handle) is disabled: \(reason)", data: ["document": .string(handle)])
        case .deletedOnDisk(let path):
            return ResponseError(
                .changedOnDisk, "\(path) was deleted on disk; the text is kept, and the next save writes the file again",
                data: ["path": .string(path), "uri": .string(FileURI.uri(from: path))])
        case .notInConflict(let handle):
            return ResponseError(.notInConflict, "Document \(handle) is not in conflict: there is nothing to resolve", data: ["document": .string(handle)])
        case .conflictCopyNotNamed(let handle, let ids):
            return .invalidParams(
                field: "params.id",
                "missing: document \(handle) has \(ids.count) conflict copies (\(ids.joined(separator: ", "))); name the one to take or merge")
        case .mergeConflicts(let regions):
            return ResponseError(.changedOnDisk, "The merge found \(regions.count) conflicting region(s)")
        case .theirsUnreadable(let load):
            return responseError(.load(load), id: id, encodingWasNamed: true)
        case .unknownVersion(let version):
            return ResponseError(.unknownVersion, "No version of this document has the id \"\(version)\"", data: ["id": .string(version)])
        case .versionsUnavailable(let reason):
            return ResponseError(.versionsUnavailable, "Earlier versions are not kept: \(reason)")
        case .pathChanged(let path):
            let reason = "the path was renamed or swapped while it was checked against the roots; nothing was opened"
            return ResponseError(
                .outsideRoots, "\(field): \(path): \(reason)",
                data: ["field": .string(field), "uri": .string(FileURI.uri(from: path)), "reason": .string(reason)])
        case .noRecovery(let handle):
            return ResponseError(
                .noRecovery, "Document \(handle) has no unsaved work of an earlier server waiting to be recovered",
                data: ["document": .string(handle)])
        case .unsavedChanges(let handle, let path, let reason):
            return ResponseError(
                .unsavedChanges, "Document \(handle) has unsaved changes of its own; \(reason)",
                data: ["document": .string(handle), "uri": .string(FileURI.uri(from: path))])
        case .entry(let entry):
            return entryError(entry)
        case .packageChangedOnDisk(let path, let expected, let found):
            let what = found == nil ? "was deleted" : "changed on disk (another program changed the package)"
            return ResponseError(
                .changedOnDisk,
                "\(path) \(what) since it was read or last saved; resolve the conflict, save with force to overwrite it, or revert",
                data: ["path": .string(path), "uri": .string(FileURI.uri(from: path)), "expectedEtag": .string(expected),
                       "etag": found.map { .string($0) } ?? .null])
        case .wrongKind(let handle, let kind, let operation):
            return ResponseError(
                .wrongKind, "Document \(handle) is a \(kind) document: it cannot \(operation)",
                data: ["document": .string(handle), "kind": .string(kind)])
        case .store(let store):
            return storeError(store)
        case .coordinated(let handle, let lease, let intent):
            return ResponseError(
                .editingDisabled,
                "Editing document \(handle) is disabled: another party holds lease \(lease) to \(intent) its file; edits and saves wait for the lease to end",
                data: ["document": .string(handle), "reason": "coordinated", "lease": .string(lease), "intent": .string(intent)])
        }
    }

    /// -32032 for a refused lease: the document that could not be saved first, its uri, and the
    /// save's own error (`code`, `message`, `data`, as `document/save` answers it).
    static func responseError(_ error: CoordinationError, id: RequestID) -> ResponseError {
        switch error {
        case .saveFailed(let handle, let path, let failure):
            let save = responseError(failure, id: id)
            return ResponseError(
                .coordinationRefused, "The lease was refused: document \(handle) could not be saved first: \(save.message)",
                data: ["document": .string(handle), "uri": .string(FileURI.uri(from: path)), "error": save.json])
        }
    }

    static func entryError(_ error: EntryError) -> ResponseError {
        switch error {
        case .invalidPath(let path, let reason):
            return .invalidParams(field: "params.path", "\"\(path)\" is not an entry path: \(reason)")
        case .noSuchEntry(let path):
            return ResponseError(.entryError, "The package has no entry \(path)", data: ["path": .string(path), "reason": "noSuchEntry"])
        case .isDirectory(let path):
            return ResponseError(.entryError, "\(path) is a directory of the package, not a file", data: ["path": .string(path), "reason": "isDirectory"])
        case .underFile(let path, let file):
            return ResponseError(
                .entryError, "\(path) cannot be an entry: \(file) is a file of the package, not a directory",
                data: ["path": .string(path), "reason": "underFile", "file": .string(file)])
        case .symbolicLink(let path):
            return ResponseError(
                .entryError, "\(path) is a symbolic link: links inside a package are kept but never followed",
                data: ["path": .string(path), "reason": "symbolicLink"])
        case .reserved(let path, let reason):
            return ResponseError(.entryError, "\(path) is the managed store's own: \(reason)", data: ["path": .string(path), "reason": "reserved"])
        }
    }

    /// -32029 for SQLite's errors, -32030 for statements refused before they ran.
    static func storeError(_ error: StoreError) -> ResponseError {
        var data: JSONObject = ["code": .integer(Int64(error.code)), "codeName": .string(error.codeName), "message": .string(error.message)]
        if let statement = error.statement { data["statement"] = .string(statement) }
        if let migration = error.migration { data["migration"] = .integer(Int64(migration)) }
        data["kind"] = .string(error.kind.rawValue)
        switch error.kind {
        case .timeLimit: data["limit"] = "storeOptions.timeLimit"
        case .memoryLimit: data["limit"] = "storeOptions.memoryLimit"
        default: break
        }
        let what = error.migration.map { "migration \($0)" } ?? "the statement"
        if error.kind == .timeLimit || error.kind == .memoryLimit || error.kind == .cancelled {
            return ResponseError(.storeError, "SQLite: \(error.message)", data: .object(data))
        }
        if error.kind != .sqlite && error.kind != .file && error.kind != .publish {
            return ResponseError(.statementRefused, "\(what) was refused: \(error.message)", data: .object(data))
        }
        return ResponseError(.storeError, "SQLite: \(error.codeName): \(error.message)\(error.migration.map { " (migration \($0); the store is as it was before it)" } ?? "")", data: .object(data))
    }
}

// The other core errors' wire forms: every core error becomes a wire error in this file.
extension Server {
    /// The -32010 error of a failed system call.
    static func fileSystemError(_ detail: FileSystemError) -> ResponseError {
        ResponseError(.fileSystemError, detail.message, data: detail.json)
    }

    static func notRegularFile(_ path: String, kind: String) -> ResponseError {
        ResponseError(.notRegularFile, "\(path) is a \(kind), not a regular file", data: ["path": .string(path), "kind": .string(kind)])
    }

    /// The wire error of a refused file operation: -32023 for unsaved changes (`data`: `document`,
    /// `uri`), -32013 for an existing destination (`data`: `uri`), the document errors otherwise.
    static func responseError(_ error: FileOperationError, id: RequestID) -> ResponseError {
        switch error {
        case .unsavedChanges(let handle, let path):
            return ResponseError(
                .unsavedChanges,
                "\(path) is open as document \(handle), which has unsaved changes; save or close it first, or delete with discard to drop them",
                data: ["document": .string(handle), "uri": .string(FileURI.uri(from: path))])
        case .document(.fileSystem(let detail)) where detail.errno == EEXIST:
            return ResponseError(
                .alreadyExists, "A file already exists at \(detail.path); it was left as it is (ask to replace it, or choose another name)",
                data: ["uri": .string(FileURI.uri(from: detail.path))])
        case .document(let error):
            return responseError(error, id: id)
        }
    }

    /// The wire error for a refused path: -32022 outside the roots (`data`: `field`, `uri`,
    /// `reason`, `roots`), -32602 for a path that is not one, -32010 for a failed system call.
    static func responseError(_ error: SandboxError, field: String, roots: SandboxRoots) -> ResponseError {
        switch error.kind {
        case .outsideRoots:
            return ResponseError(
                .outsideRoots, "\(field): \(error.message)",
                data: [
                    "field": .string(field), "uri": .string(FileURI.uri(from: error.path)), "reason": .string(error.reason),
                    "roots": .array(roots.paths.map { .string(FileURI.uri(from: $0)) }),
                ])
        case .invalidPath:
            return .invalidParams(field: field, error.reason)
        case .fileSystem(let detail):
            return fileSystemError(detail)
        }
    }
}
