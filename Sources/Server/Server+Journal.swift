import DocumentSession
import JSON
import JSONRPC

extension Server {
    /// `document/recover`: brings back a dead server's unsaved text of the document, with its
    /// version and undo history; in conflict when the file changed since (see
    /// ``DocumentStore/recover(_:encoding:)``).
    func recover(_ params: RecoverRequest) async throws(ResponseError) -> RecoverResult {
        do throws(DocumentError) {
            let encoding = positionEncoding
            let (version, edits, inConflict) = try await attributed { () throws(DocumentError) in
                try await store.recover(params.handle, encoding: encoding)
            }
            let unsaved = (try? await store.document(params.handle).hasUnsavedChanges) ?? true
            return RecoverResult(version: version, edits: edits, inConflict: inConflict, hasUnsavedChanges: unsaved)
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/discardRecovery`: deletes the dead server's journal offered for the document.
    func discardRecovery(_ params: DiscardRecoveryRequest) async throws(ResponseError) -> NullResult {
        do throws(DocumentError) {
            try await store.discardRecovery(params.handle)
            return NullResult()
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/recover` of a package: its entries and undo history as the dead server's journal
    /// left them.
    func recoverPackage(_ handle: String) async throws(ResponseError) -> PackageRecoverResult {
        PackageRecoverResult(result: try await packageCall { () throws(DocumentError) in try await packages.recover(handle) })
    }

    /// `document/discardRecovery` of a package.
    func discardPackageRecovery(_ handle: String) async throws(ResponseError) -> NullResult {
        try await packageCall { () throws(DocumentError) in try await packages.discardRecovery(handle) }
        return NullResult()
    }

    /// `workspace/recoverable`: every journal waiting to be recovered, text documents' and
    /// packages', newest first; with roots, only those of files beneath them (issue 34.9: the
    /// state directory holds the journals of every server of the user, wherever their files are).
    func recoverable(_ params: RecoverableRequest) async -> RecoverableResult {
        var journals = await store.recoverable() + (await packages.recoverable())
        if let roots { journals.removeAll { !roots.encloses($0.path) } }
        return RecoverableResult(journals: journals.sorted { ($0.date, $0.path) > ($1.date, $1.path) })
    }
}
