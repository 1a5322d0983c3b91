import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

/// A daemon's client (``Hub``, docs/Sharing.md): the documents it holds, and its changes
/// attributed to it.
extension Server {
    /// A handle this connection does not hold: as unknown to it as one never issued, whoever else
    /// holds it.
    static func notHeld(_ handle: String) -> ResponseError {
        ResponseError(
            .unknownDocument, "Unknown document \(handle): this connection has not opened it (open its file with document/open)",
            data: ["document": .string(handle)])
    }

    /// Runs `body`, a store call that changes a document's text at this client's request, with
    /// the change attributed to this connection: the other holders hear of it as `client`'s.
    func attributed<T: Sendable>(_ body: () async throws(DocumentError) -> T) async throws(DocumentError) -> T {
        try await Self.attributed(to: membership, body)
    }

    /// ``attributed(_:)`` for work that runs off the server's queue too (a deferred reply): on the
    /// caller's isolation, so `body` need not be sendable.
    static func attributed<T: Sendable>(
        to membership: Membership?, isolation: isolated (any Actor)? = #isolation, _ body: () async throws(DocumentError) -> T
    ) async throws(DocumentError) -> T {
        guard let membership else { return try await body() }
        let result: Result<T, DocumentError> = await Hub.$origin.withValue(membership.id) {
            do throws(DocumentError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// This connection now holds the text document `handle` (an open or create answered it):
    /// answers the document as it is now, which a change made by another client while the open
    /// finished may have moved past `document`.
    func holdOpened(_ document: Document) async -> Document {
        guard let membership else { return document }
        let current = (try? await store.document(document.handle)) ?? document
        membership.hub.hold(membership.id, handle: current.handle, path: current.path, version: current.version, text: current.buffer)
        return current
    }

    /// This connection now holds the package document `handle`.
    func holdPackage(_ document: PackageDocument) {
        guard let membership else { return }
        membership.hub.hold(membership.id, handle: document.handle, path: document.path, version: document.version, text: TextBuffer())
    }

    /// `document/close` by one of several holders: only its hold ends (nothing is saved, the
    /// others keep editing); nil when this connection is the last holder, or not in a daemon.
    func releaseIfShared(_ handle: String) -> CloseDocumentResult? {
        guard let membership, membership.hub.otherHolders(membership.id, handle) > 0 else { return nil }
        let left = membership.hub.release(membership.id, handle)
        return CloseDocumentResult(saved: false, holders: left)
    }

    /// Ends every hold of this connection (its shutdown, its end): a document it held alone
    /// closes, without saving; its unsaved changes stay in its journal with `keepJournals` (the
    /// client vanished, or hot exit), else they are dropped (packages and managed documents too).
    func releaseAllHolds(keepJournals: Bool) async {
        guard let membership else { return }
        for handle in membership.hub.held(membership.id).sorted() {
            guard membership.hub.release(membership.id, handle) == 0 else { continue }
            if PackageStore.isPackageHandle(handle) {
                if keepJournals { await packages.abandon(handle) } else { _ = try? await packages.close(handle, discard: true) }
            } else if keepJournals {
                await store.abandon(handle)
            } else {
                _ = try? await store.close(handle, save: .never)
            }
        }
    }
}
