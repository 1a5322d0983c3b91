import FileStore
import JSON
import JSONRPC

// The workspace's queries (Server+Query.swift).

/// `workspace/query` → ``WorkspaceQueryResult``.
struct QueryRequest: RequestType {
    static let method = "workspace/query"
    typealias Result = WorkspaceQueryResult
    /// `root` as a path, not yet checked against the roots.
    var root: String
    var recursive: Bool
    var watch: Bool
    var pattern: GlobPattern

    init(params: Params) throws(ResponseError) {
        root = try params.filePath("root")
        recursive = try params.optionalBool("recursive") ?? true
        watch = try params.optionalBool("watch") ?? false
        let globText = try params.optionalString("glob") ?? (recursive ? "**/*" : "*")
        do throws(GlobError) {
            pattern = try GlobPattern(globText)
        } catch {
            throw .invalidParams(field: "params.glob", error.description)
        }
    }
}

/// The files that match, and the live query's id (nil without `watch`).
struct WorkspaceQueryResult: RequestResult {
    var query: String?
    /// Each a `FileInfo` (``Server/fileInfo(_:_:)``).
    var files: [JSONValue]
    var json: JSONValue { ["query": query.map { .string($0) } ?? .null, "files": .array(files)] }
}

/// `workspace/stopQuery` → `null`.
struct StopQueryRequest: RequestType {
    static let method = "workspace/stopQuery"
    typealias Result = NullResult
    var query: String

    init(params: Params) throws(ResponseError) {
        query = try params.string("query")
    }
}
