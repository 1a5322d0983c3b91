import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

extension Server {
    /// `document/resolveConflict`: `resolution` is `mine` (keep the document's text), `theirs`
    /// (take the file's) or `merge` (a three-way merge, or the client's own merged `text`). Answers
    /// `{resolved: true, version, edits}`, or `{resolved: false, version, conflicts}` when a merge
    /// found both sides changing the same lines (then nothing changed).
    func resolveConflict(_ params: ResolveConflictRequest, _ context: RequestContext) async throws(ResponseError) -> ResolveConflictResult {
        let handle = params.handle
        let store = store
        let encoding = positionEncoding
        // In request order, like an edit: requests sent after it see its outcome (the file is read
        // and merged off the actor, but the queue waits for it).
        do throws(DocumentError) {
            let (newVersion, edits) = try await attributed { () throws(DocumentError) in
                try await store.resolveConflict(handle, params.resolution, version: params.version, encoding: encoding, id: params.id)
            }
            return .resolved(version: newVersion, edits: edits)
        } catch {
            if case .mergeConflicts(let regions) = error, let document = try? await store.document(handle) {
                return .conflicts(version: document.version, regions.map { region in
                    ResolveConflictResult.Conflict(
                        range: document.buffer.range(ofUTF8Range: region.mineUTF8Range, encoding: encoding),
                        mine: region.mine, theirs: region.theirs, base: region.base)
                })
            }
            throw Self.responseError(error, id: context.id)
        }
    }

    /// `document/versions`: the document's conflict versions and saved versions, newest first.
    func listVersions(_ params: ListVersionsRequest) async throws(ResponseError) -> VersionsResult {
        do throws(DocumentError) {
            return VersionsResult(versions: try await store.versions(params.handle), copies: try await store.syncCopies(params.handle))
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/readVersion`: the text of one version.
    func readVersion(_ params: ReadVersionRequest, _ context: RequestContext) -> Answer<ReadVersionResult> {
        let (handle, id) = (params.handle, params.id)
        let store = store
        return .later {
            do throws(DocumentError) {
                let text = try await store.readVersion(handle, id: id)
                return .success(ReadVersionResult(id: id, text: text.text))
            } catch {
                return .failure(Self.responseError(error, id: context.id))
            }
        }
    }

    /// `document/restoreVersion`: a version's text put back as one undoable edit, in request order
    /// like an edit.
    func restoreVersion(_ params: RestoreVersionRequest, _ context: RequestContext) async throws(ResponseError) -> EditsResult {
        do throws(DocumentError) {
            let encoding = positionEncoding
            let (newVersion, edits) = try await attributed { () throws(DocumentError) in
                try await store.restoreVersion(params.handle, id: params.id, version: params.version, encoding: encoding)
            }
            return EditsResult(version: newVersion, edits: edits)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
    }
}
