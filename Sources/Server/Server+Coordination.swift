import DocumentSession
import FileStore
import JSON
import JSONRPC

/// The connection's leases (`workspace/coordinate`): their ids (`l1`, `l2`, ...) and the store's
/// leases they name.
struct Coordinations {
    var leases: [String: CoordinationLease] = [:]
    /// The number of the next lease's id.
    var nextNumber = 1
}

/// Coordination (protocol §14.3): another party (a formatter, `sed -i`, a git hook, another
/// editor's server) takes a lease on a file, and the open documents of the file react as
/// NSFilePresenter's do to NSFileCoordinator: they save first for a reader, stand aside for a
/// writer, and read the file again when the lease ends.
extension Server {
    /// `workspace/coordinate`: `{uri, intent, destination?}` → `{lease, intent, documents, saved}`.
    func coordinate(_ params: CoordinateRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<CoordinateResult> {
        let path = try await checkPath(params.path, field: "params.uri", mustExist: false).path
        var destination: String? = nil
        if let given = params.destination {
            destination = try await checkPath(given, field: "params.destination", mustExist: false).path
        }
        if let package = await packages.handle(forPath: path) {
            let kind = await packages.kind(of: package)?.rawValue ?? "package"
            throw Self.responseError(.wrongKind(handle: package, kind: kind, operation: "be coordinated yet (only text documents are)"), id: context.id)
        }
        let intent = params.intent
        let name = "l\(coordinations.nextNumber)"
        let store = store
        let ticket: CoordinationTicket
        do throws(CoordinationError) {
            ticket = try await store.beginCoordination(path: path, intent: intent, destination: destination, label: name)
        } catch {
            throw Self.responseError(error, id: context.id)
        }
        coordinations.nextNumber += 1
        coordinations.leases[name] = ticket.lease
        let finish: @Sendable () async -> Result<CoordinateResult, ResponseError> = {
            do throws(CoordinationError) {
                let grant = try await store.finishCoordination(ticket)
                return .success(CoordinateResult(lease: name, intent: intent, documents: grant.documents, saved: grant.saved))
            } catch {
                await self.forgetLease(name)
                return .failure(Self.responseError(error, id: context.id))
            }
        }
        // Nothing to save or wait for: granted in request order.
        if ticket.grantedAtOnce { return .now(try await finish().get()) }
        return .later(finish)
    }

    /// A lease refused after it was begun (a `read` lease whose save failed).
    private func forgetLease(_ name: String) {
        coordinations.leases[name] = nil
    }

    /// `workspace/endCoordination`: `{lease}` → `{documents: [{document, outcome}]}`.
    func endCoordination(_ params: EndCoordinationRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<EndCoordinationResult> {
        guard let lease = coordinations.leases.removeValue(forKey: params.lease),
              let ticket = await store.beginEndCoordination(lease) else {
            throw ResponseError(
                .unknownLease, "No lease has the id \"\(params.lease)\" on this connection (never granted, or ended already)",
                data: ["lease": .string(params.lease)])
        }
        let store = store
        // Nothing to check (a read lease, documents still held or closed): answered in order.
        if !ticket.checksFiles { return .now(EndCoordinationResult(documents: await store.finishEndCoordination(ticket))) }
        // The files are checked off the ordered queue (a read of each), under each document's lock.
        return .later { .success(EndCoordinationResult(documents: await store.finishEndCoordination(ticket))) }
    }

    /// Every lease of the connection ends (`shutdown`, the end of input): no editor stays disabled
    /// for a coordinating process that is gone.
    func endAllCoordinations() async {
        let leases = Array(coordinations.leases.values)
        coordinations.leases = [:]
        guard !leases.isEmpty else { return }
        await store.endCoordinations(leases)
    }
}
