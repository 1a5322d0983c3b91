import DocumentSession
import JSONRPC

// The handlers of the requests about kept versions beyond listing, reading and restoring them
// (Requests+Versions.swift).
extension Server {
    /// `document/deleteVersion`: removes one kept version, in request order; the document's
    /// clients hear it (`document/didChangeVersions`).
    func deleteVersion(_ params: DeleteVersionRequest, _ context: RequestContext) async throws(ResponseError) -> NullResult {
        do throws(DocumentError) {
            try await store.deleteVersion(params.handle, id: params.id)
            return NullResult()
        } catch {
            throw Self.responseError(error, id: context.id)
        }
    }

    /// `document/diffVersions`: the edits from one version's text to another's or to the current
    /// text, in the client's position encoding; worked out off the queue, like a read.
    func diffVersions(_ params: DiffVersionsRequest, _ context: RequestContext) -> Answer<DiffVersionsResult> {
        let (handle, from, to) = (params.handle, params.from, params.to)
        let (store, encoding) = (store, positionEncoding)
        return .later {
            do throws(DocumentError) {
                return .success(DiffVersionsResult(edits: try await store.diffVersions(handle, from: from, to: to, encoding: encoding)))
            } catch {
                return .failure(Self.responseError(error, id: context.id))
            }
        }
    }
}
