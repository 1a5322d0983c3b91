import DocumentSession
import JSON
import JSONRPC

/// A request a client sends, as a type: its method's name, its params read and checked from the
/// wire (every refusal worded by ``Params``), and the type of its result.
///
/// Each method has one such type (``OpenDocumentRequest``, ``EditDocumentRequest``, ...), in the
/// `Requests+<Concern>.swift` file of its concern, with its result type; ``Server/requests`` pairs
/// each with its handler.
protocol RequestType: Sendable {
    /// The method's name on the wire.
    static var method: String { get }
    /// What the request answers on success.
    associatedtype Result: RequestResult
    /// Reads the params (an object: ``decode(_:)`` has refused anything else).
    init(params: Params) throws(ResponseError)
    /// Reads the params of `request`: by default, by name through ``init(params:)``.
    static func decode(_ request: Request) throws(ResponseError) -> Self
}

extension RequestType {
    static func decode(_ request: Request) throws(ResponseError) -> Self {
        try Self(params: Params(byName: request.params, method: method))
    }
}

/// A request whose `document` may be a package's handle (`p1`): its handler routes it to the
/// package store (Server+Packages.swift). Any other request given a package's handle is refused
/// with -32031 before its handler runs.
protocol PackageAwareRequest: RequestType {}

/// A request that takes no params (`shutdown`, `workspace/recoverable`, `session/snapshot`):
/// absent, `null`, `{}` and `[]` are accepted, anything else is -32602 naming the first param given.
protocol ParamlessRequest: RequestType {
    init()
}

extension ParamlessRequest {
    init(params: Params) { self.init() }

    static func decode(_ request: Request) throws(ResponseError) -> Self {
        try Params.expectNone(request.params, method: method)
        return Self()
    }
}

/// A result as it goes on the wire. Members are written in the order `json` inserts them (the
/// golden sessions compare bytes).
protocol RequestResult: Sendable {
    var json: JSONValue { get }
}

/// A result that is `null` (`shutdown`, `workspace/stopQuery`).
struct NullResult: RequestResult {
    var json: JSONValue { .null }
}

/// How a handler answers: now, in request order, or later, off the ordered queue (see ``Reply``).
enum Answer<Result: RequestResult>: Sendable {
    case now(Result)
    /// The work runs off the queue; it must not touch the server's own state, only actors.
    /// `answered` runs once the response is written (``Reply/later(_:answered:)``).
    case later(@Sendable () async -> Swift.Result<Result, ResponseError>, answered: (@Sendable () async -> Void)? = nil)
}

/// A notification a client sends, as a type: its method's name and its params.
protocol NotificationType: Sendable {
    static var method: String { get }
    /// Reads the params as sent (`initialized` and `exit` do not look at them); a notification
    /// cannot be answered, so a refusal is logged and the notification ignored.
    init(params: JSONValue?) throws(ResponseError)
}

extension Server {
    /// One method of the registry: a request type and its handler, type-erased for the dispatcher.
    struct RequestEntry: Sendable {
        let method: String
        /// Decodes the params, runs the handler, encodes the result.
        let run: @Sendable (isolated Server, Request, RequestContext) async -> Reply

        /// `handler` runs on the server's executor, as the entry's `run` does: no hop between them.
        init<R: RequestType>(
            _ type: R.Type,
            _ handler: @escaping @Sendable (isolated Server, R, RequestContext) async throws(ResponseError) -> Answer<R.Result>
        ) {
            method = R.method
            run = { server, request, context in
                do throws(ResponseError) {
                    let params = try R.decode(request)
                    if let membership = server.membership, case .object(let members)? = request.params,
                        case .string(let handle)? = members["document"], !membership.hub.holds(membership.id, handle)
                    {
                        throw Server.notHeld(handle, membership: membership)
                    }
                    if !(params is any PackageAwareRequest), case .object(let members)? = request.params,
                        case .string(let handle)? = members["document"], PackageStore.isPackageHandle(handle)
                    {
                        let kind = await server.packages.kind(of: handle)?.rawValue ?? "package"
                        throw ResponseError(
                            .wrongKind, "\(handle) is a \(kind) document's handle, and \(R.method) is for text documents",
                            data: ["document": .string(handle), "kind": .string(kind)])
                    }
                    switch try await handler(server, params, context) {
                    case .now(let result): return .now(.success(result.json))
                    case .later(let work, let answered): return .later({ await work().map(\.json) }, answered: answered)
                    }
                } catch {
                    return .now(.failure(error))
                }
            }
        }
    }

    /// One notification of the registry.
    struct NotificationEntry: Sendable {
        let method: String
        let run: @Sendable (isolated Server, Notification) async -> Void

        init<N: NotificationType>(_ type: N.Type, _ handler: @escaping @Sendable (isolated Server, N) async -> Void) {
            method = N.method
            run = { server, notification in
                do throws(ResponseError) {
                    let params = try N(params: notification.params)
                    await handler(server, params)
                } catch {
                    server.logger.warning("ignored \(N.method): \(error.message)")
                }
            }
        }
    }
}
