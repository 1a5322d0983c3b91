import DocumentSession
import FileStore
import JSON
import JSONRPC

// Placeholder: workspace queries (issue 8) are being written on their own branch.

/// The live queries of a server.
struct WorkspaceQueries {}

extension Server {
    func query(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "workspace/query is not available yet")
    }
    func stopQuery(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "workspace/stopQuery is not available yet")
    }
}
