import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

extension Server {
    /// `document/save`: the text as of this request (edits sent after it stay unsaved), through the
    /// safe-save protocol off the ordered queue; `to` saves as a new file and moves the session
    /// there; `force` overwrites a file changed on disk. `$/progress` under `workDoneToken`;
    /// cancellable until the file is replaced.
    func saveDocument(_ params: SaveDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<SaveDocumentResult> {
        let handle = params.handle
        var newPath: String? = nil
        if let path = params.newPath { newPath = try await checkPath(path, field: "params.to", mustExist: false).path }
        if newPath == nil { try await checkDocumentPath(handle, mustExist: false, context) }
        let store = store
        let ticket: SaveTicket
        do throws(DocumentError) {
            ticket = try await store.beginSave(handle, to: newPath, force: params.force)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        let progress = ProgressReporter(token: params.workDoneToken, title: "Saving", writer: writer)
        return .later(
            {
                defer { progress.end() }
                do throws(DocumentError) {
                    let saved = try await store.finishSave(
                        ticket, progress: { done, total in progress.report(done: done, total: total) },
                        isCancelled: { context.cancellation.isCancelled }, keepingTurn: true)
                    return .success(SaveDocumentResult(saved: saved))
                } catch {
                    return .failure(Self.responseError(error, id: context.id))
                }
            }, answered: Self.releasingTurn(of: ticket.handle, store))
    }

    /// What a request whose work kept its document's turn (`keepingTurn: true`) runs once its
    /// answer is written: it lets go of the turn, so that the next save, revert, close, delete or
    /// move of the document is answered after this one (§4.7).
    static func releasingTurn(of handle: String?, _ store: DocumentStore) -> (@Sendable () async -> Void)? {
        guard let handle else { return nil }
        return { await store.releaseTurn(of: handle) }
    }

    /// `document/revert`: the text reloaded from the file as one undo step; edits are refused
    /// while it runs. Answers the document info.
    func revertDocument(_ params: RevertDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<DocumentInfo> {
        let handle = params.handle
        let includeText = params.includeText
        try await checkDocumentPath(handle, mustExist: true, context)
        let store = store
        let ticket: ExclusiveTicket
        do throws(DocumentError) {
            ticket = try await store.beginRevert(handle)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        let membership = membership
        return .later(
            {
                do throws(DocumentError) {
                    let reverted = try await Self.attributed(to: membership) { () throws(DocumentError) in
                        try await store.finishRevert(ticket, keepingTurn: true)
                    }
                    return .success(DocumentInfo(reverted, includeText: includeText))
                } catch {
                    // The revert reads with the document's own encoding, so no hint to name one.
                    return .failure(Self.responseError(error, id: context.id, encodingWasNamed: true))
                }
            }, answered: Self.releasingTurn(of: ticket.handle, store))
    }

    /// `document/close`: `save` is `ifChanged` (the default: unsaved changes are saved first, and
    /// if that fails the document stays open) or `never` (they are dropped).
    func closeDocument(_ params: CloseDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<CloseDocumentResult> {
        let handle = params.handle
        let policy = params.policy
        let store = store
        if let released = releaseIfShared(handle) { return .now(released) }
        // A close that will save re-checks the path as document/save does (-32022: nothing is
        // written, the document stays open).
        if policy == .ifChanged, roots != nil, (try? await store.document(handle))?.hasUnsavedChanges == true {
            try await checkDocumentPath(handle, mustExist: false, context)
        }
        let ticket: ExclusiveTicket
        do throws(DocumentError) {
            ticket = try await store.beginClose(handle, save: policy)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        // Nothing to save and nothing running on the document: closed in request order.
        if ticket.closedNow { return .now(CloseDocumentResult(saved: false)) }
        return .later(
            {
                do throws(DocumentError) {
                    return .success(CloseDocumentResult(saved: try await store.finishClose(ticket, save: policy, keepingTurn: true)))
                } catch {
                    return .failure(Self.responseError(error, id: context.id))
                }
            }, answered: Self.releasingTurn(of: ticket.handle, store))
    }

    /// The params of `document/stateChanged`.
    static func json(_ event: DocumentEvent) -> JSONValue {
        var params: JSONObject = [
            "document": .string(event.handle), "uri": .string(FileURI.uri(from: event.path)),
            "version": .integer(event.version), "state": stateJSON(event.state),
            "previousState": stateJSON(event.previousState), "reason": .string(event.reason.rawValue),
            "hasUnsavedChanges": .bool(event.hasUnsavedChanges),
        ]
        if event.autosave { params["autosave"] = true }
        if let readOnly = event.readOnly { params["readOnly"] = .bool(readOnly) }
        if let error = event.error { params["error"] = errorDetail(error) }
        return .object(params)
    }

    /// The error detail of protocol.md for any document error: a failed system call has all of
    /// code, errno, syscall, path, message, recoverable, suggestions; other failures name their
    /// own code (`changedOnDisk`, `unencodable`, ...) and have no errno or syscall.
    static func errorDetail(_ error: DocumentError) -> JSONValue {
        switch error {
        case .save(.fileSystem(let detail)), .fileSystem(let detail), .load(.fileSystem(let detail)):
            return detail.json
        default:
            let response = responseError(error, id: .null)
            var detail: JSONObject = ["code": .string(detailCode(error)), "message": .string(response.message)]
            if case .object(let data)? = response.data {
                for (key, value) in data where detail[key] == nil { detail[key] = value }
            }
            let (recoverable, suggestions) = advice(error)
            detail["recoverable"] = .bool(recoverable)
            detail["suggestions"] = .array(suggestions.map { .string($0) })
            return .object(detail)
        }
    }

    private static func detailCode(_ error: DocumentError) -> String {
        switch error {
        case .save(.changedOnDisk), .packageChangedOnDisk: return "changedOnDisk"
        case .deletedOnDisk: return "deletedOnDisk"
        case .save(.unencodable): return "unencodable"
        case .save(.notRegularFile), .load(.notRegularFile): return "notRegularFile"
        case .save(.alreadyExists), .alreadyExists, .openElsewhere: return "alreadyExists"
        case .save(.outsideRoots), .load(.outsideRoots), .pathChanged: return "outsideRoots"
        case .load(.notText): return "notText"
        case .save(.cancelled), .load(.cancelled): return "cancelled"
        default: return "error"
        }
    }

    private static func advice(_ error: DocumentError) -> (Bool, [String]) {
        switch error {
        case .save(.changedOnDisk): return (true, ["resolveConflict", "revert", "saveAs", "force"])
        case .packageChangedOnDisk: return (true, ["resolveConflict", "revert", "force"])
        case .deletedOnDisk: return (true, ["save", "saveAs", "close"])
        case .save(.alreadyExists): return (false, ["force", "saveAs"])
        case .openElsewhere, .alreadyExists: return (false, ["saveAs"])
        case .save(.unencodable): return (false, ["saveAs"])
        case .save(.notRegularFile), .load(.notRegularFile): return (false, ["saveAs"])
        case .load(.notText): return (false, ["openWithEncoding"])
        default: return (false, [])
        }
    }

    /// With sandbox roots, checks that an open document's file is still beneath them before the
    /// server writes or reads it again (a directory of its path may have been swapped for a
    /// symlink pointing out since it was opened): -32022 if not.
    func checkDocumentPath(_ handle: String, mustExist: Bool, _ context: RequestContext) async throws(ResponseError) {
        guard roots != nil else { return }
        let path: String
        do throws(DocumentError) {
            path = try await store.document(handle).path
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        _ = try await checkPath(path, field: "params.document", mustExist: mustExist)
    }
}
