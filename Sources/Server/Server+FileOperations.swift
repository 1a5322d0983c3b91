import DocumentSession
import FileStore
import JSON
import JSONRPC

// Placeholder: the coordinated file operations (issue 8) are being written on their own branch.
extension Server {
    func deleteDocument(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "document/delete is not available yet")
    }
    func moveDocument(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "document/move is not available yet")
    }
    func renameDocument(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "document/rename is not available yet")
    }
    func importFile(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "workspace/import is not available yet")
    }
    func exportFile(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        throw ResponseError(.methodNotFound, "workspace/export is not available yet")
    }
}
