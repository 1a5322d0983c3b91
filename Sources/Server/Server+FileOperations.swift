import DocumentSession
import FileStore
import JSON
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// The coordinated lifecycle and picker operations (protocol §11.4–§11.7): delete, move and rename
/// a document's file, import a file into a directory, export a document's text or a file. Every
/// path goes through ``requestPath(_:_:mustExist:)`` (the sandbox roots); the operation acts on the
/// checked object (a name in a pinned directory) and reports the path recorded.
extension Server {
    /// `document/delete`: `{uri | document, discard?}` → `{deleted: true, closed}`.
    func deleteDocument(_ params: DeleteDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<DeleteDocumentResult> {
        let source = try await sourceFile(params.source)
        let discard = params.discard
        try await Self.requireRegularFile(source)
        let file = source.operand
        let store = store
        let ticket: FileOperationTicket
        do throws(FileOperationError) {
            ticket = try await store.beginDelete(file, discard: discard)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        let work: @Sendable (_ keepingTurn: Bool) async -> Result<DeleteDocumentResult, ResponseError> = { keepingTurn in
            defer { withExtendedLifetime(source) {} }
            do throws(FileOperationError) {
                return .success(DeleteDocumentResult(
                    closed: try await store.finishDelete(ticket, file, discard: discard, keepingTurn: keepingTurn)))
            } catch {
                return .failure(Self.responseError(error, id: context.id))
            }
        }
        // Nothing running on the document: in request order (the unlink runs on a thread of its
        // own meanwhile). Otherwise after the save, revert or close running on it, off the queue.
        guard ticket.runsAtOnce else {
            return .later({ await work(true) }, answered: Self.releasingTurn(of: ticket.handle, store))
        }
        return .now(try await work(false).get())
    }

    /// `document/move`: `{uri | document, to, replace?}` → `{uri, displayName, fileType, document}`.
    func moveDocument(_ params: MoveDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<MoveDocumentResult> {
        let source = try await sourceFile(params.source)
        let destination = try await checkPath(params.destination, field: "params.to", mustExist: false)
        return try await move(source, to: destination, replace: params.replace, context)
    }

    /// `document/rename`: `{uri | document, name}` → as `document/move`, in the same directory.
    func renameDocument(_ params: RenameDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<MoveDocumentResult> {
        let source = try await sourceFile(params.source)
        let name = params.name
        let directory = Self.directory(of: source.request.path)
        let destination = try await checkPath(directory == "/" ? "/" + name : directory + "/" + name, field: "params.name", mustExist: false)
        return try await move(source, to: destination, replace: false, context)
    }

    /// `workspace/import`: `{from, directory, name?, open?}` → `{uri, name, document?}`: a copy of
    /// `from` in `directory` under `name` or the next free name (`report 2.txt`), never replacing.
    func importFile(_ params: ImportFileRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<ImportFileResult> {
        let from = try await checkPath(params.from, field: "params.from", mustExist: true)
        let directory = try await checkPath(params.directory, field: "params.directory", mustExist: true)
        let name = params.name
        let open = params.open
        try await Self.requireCopySource(from, field: "params.from")
        let store = store
        return .later {
            let outcome = await Workspace.copy(
                from: FileOperand(path: from.path, entry: from.operationPath),
                intoDirectory: FileOperand(path: directory.path, entry: directory.operationPath), preferredName: name)
            let copied: String
            switch outcome {
            case .success(let (path, _)): copied = Document.displayName(forPath: path)
            case .failure(let error): return .failure(Self.responseError(.document(.fileSystem(error)), id: context.id))
            }
            let path = directory.path == "/" ? "/" + copied : directory.path + "/" + copied
            var result = ImportFileResult(path: path, name: copied)
            if open {
                do throws(DocumentError) {
                    result.document = DocumentInfo(try await store.open(path: path, encoding: nil), includeText: true)
                } catch {
                    return .failure(Self.responseError(error, id: context.id))
                }
            }
            return .success(result)
        }
    }

    /// `workspace/export`: `{document | uri, to, replace?}` → `{uri, size}`: a document's current
    /// text, or a copy of a file, written to `to`.
    func exportFile(_ params: ExportFileRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<ExportFileResult> {
        let source: RequestPath?
        switch params.source {
        case .document: source = nil
        case .file(let path): source = try await checkPath(path, field: "params.uri", mustExist: true)
        }
        let destination = try await checkPath(params.destination, field: "params.to", mustExist: false)
        let replace = params.replace
        let target = FileOperand(path: destination.path, entry: destination.entryPath)
        let store = store
        if case .document(let handle) = params.source {
            // The text as of this request: edits sent after it are not exported.
            let ticket: ExportTicket
            do throws(DocumentError) {
                ticket = try await store.beginExport(handle, to: target)
            } catch {
                throw Self.responseError(.document(error), id: context.id)
            }
            return .later {
                defer { withExtendedLifetime(destination) {} }
                do throws(DocumentError) {
                    let written = try await DocumentStore.finishExport(ticket, replace: replace)
                    return .success(ExportFileResult(path: destination.path, size: written.size))
                } catch {
                    return .failure(Self.responseError(.document(error), id: context.id))
                }
            }
        }
        let from = source!
        try await Self.requireCopySource(from, field: "params.uri")
        do throws(DocumentError) {
            try await store.checkNotOpen(destination.path)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        return .later {
            let outcome = await Workspace.copy(from: FileOperand(path: from.path, entry: from.operationPath), to: target, replace: replace)
            switch outcome {
            case .success(let identity):
                return .success(ExportFileResult(path: destination.path, size: identity.size))
            case .failure(let error):
                return .failure(Self.responseError(.document(.fileSystem(error)), id: context.id))
            }
        }
    }

    // MARK: - Moving

    /// Moves (or renames) the source file to `destination`, off the queue: the file work (across
    /// file systems a copy, a flush, then the unlink) runs on a thread of its own, under the lock of
    /// the file's document if it is open; that document follows (`document/didMove` before the
    /// response).
    func move(_ source: SourceFile, to destination: RequestPath, replace: Bool, _ context: RequestContext) async throws(ResponseError) -> Answer<MoveDocumentResult> {
        try await Self.requireRegularFile(source)
        let from = source.operand
        let to = FileOperand(path: destination.path, entry: destination.entryPath)
        let store = store
        let ticket: FileOperationTicket
        do throws(FileOperationError) {
            ticket = try await store.beginMove(from, to: to)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        return .later(
            {
                defer { withExtendedLifetime((source, destination)) {} }
                do throws(FileOperationError) {
                    let moved = try await store.finishMove(ticket, from: from, to: to, replace: replace, keepingTurn: true)
                    return .success(MoveDocumentResult(path: moved.path, handle: moved.handle))
                } catch {
                    return .failure(Self.responseError(error, id: context.id))
                }
            }, answered: Self.releasingTurn(of: ticket.handle, store))
    }

    // MARK: - Params

    /// The file a delete, move or rename acts on: `uri`, or the file of the open document
    /// `document` (exactly one of them), checked against the roots.
    struct SourceFile: Sendable {
        /// The path as the client gave it (or the document's path).
        let given: String
        let request: RequestPath
        /// The params member it came from, for errors.
        let field: String
        var operand: FileOperand { FileOperand(path: request.path, entry: request.entryPath) }
    }

    func sourceFile(_ source: FileSource) async throws(ResponseError) -> SourceFile {
        let handle: String
        switch source {
        case .uri(let given):
            return SourceFile(given: given, request: try await checkPath(given, field: "params.uri", mustExist: true), field: "params.uri")
        case .document(let given):
            handle = given
        }
        let document: Document
        do throws(DocumentError) {
            document = try await store.document(handle)
        } catch {
            throw Self.responseError(error, id: .null)
        }
        let field = "params.document"
        return SourceFile(given: document.path, request: try await checkPath(document.path, field: field, mustExist: true), field: field)
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// A delete or move acts on regular files only: a directory, a special file or a symbolic link
    /// (the link itself, named by the request) is -32016.
    static func requireRegularFile(_ source: SourceFile) async throws(ResponseError) {
        if (try? await Workspace.kind(of: source.given, followingLinks: false)) == .symbolicLink {
            throw notRegularFile(source.given, kind: "symbolic link")
        }
        let kind: FileKind
        do throws(FileSystemError) {
            kind = try await Workspace.kind(of: source.request.entryPath, followingLinks: false, reportedAs: source.request.path)
        } catch {
            throw fileSystemError(error)
        }
        try requireRegular(kind, path: source.request.path)
    }

    /// A copy's source (symbolic links followed) must be a regular file.
    private static func requireCopySource(_ source: RequestPath, field: String) async throws(ResponseError) {
        let kind: FileKind
        do throws(FileSystemError) {
            kind = try await Workspace.kind(of: source.operationPath, followingLinks: true, reportedAs: source.path)
        } catch {
            throw fileSystemError(error)
        }
        try requireRegular(kind, path: source.path)
    }

    private static func requireRegular(_ kind: FileKind, path: String) throws(ResponseError) {
        switch kind {
        case .regular: return
        case .directory: throw notRegularFile(path, kind: "directory")
        case .symbolicLink, .special: throw notRegularFile(path, kind: "special file")
        }
    }
}

extension RequestPath {
    /// The name to act on when the directory entry itself changes (unlink, rename, replace): with
    /// roots, the object's name in its pinned directory (`/proc/self/fd/D/name`; the pinned object's
    /// own `/proc/self/fd/N` is a link that cannot be renamed or unlinked); without, the path.
    var entryPath: String {
        guard let resolved, let directory = resolved.parentProcPath else { return operationPath }
        return directory + "/" + resolved.name
    }
}

