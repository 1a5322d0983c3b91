import DocumentSession
import FileStore
import JSON
import JSONRPC

// The storage locations (Server+Storage.swift, protocol §11.8).

/// `local` or `synced`: one of the two storage locations of `initializationOptions.storage`.
enum StorageName: String, Sendable, CaseIterable {
    case local, synced

    var other: StorageName { self == .local ? .synced : .local }

    init(_ params: Params) throws(ResponseError) {
        guard let name = try params.optionalEnumeration("storage", Self.allCases.map(\.rawValue)) else {
            throw .invalidParams(field: params.fieldPath("storage"), "missing (\"local\" or \"synced\" is required)")
        }
        self = StorageName(rawValue: name)!
    }
}

/// The two storage roots taken at `initialize`: real paths of existing directories, neither inside
/// the other.
struct StorageRoots: Sendable {
    var local: String
    var synced: String

    subscript(_ name: StorageName) -> String { name == .local ? local : synced }

    /// Which storage `path` lies beneath (not the root itself), and its path relative to that root.
    func locate(_ path: String) -> (storage: StorageName, relativePath: String)? {
        for name in StorageName.allCases {
            let root = self[name]
            let prefix = root == "/" ? "/" : root + "/"
            if path.hasPrefix(prefix) && path.count > prefix.count { return (name, String(path.dropFirst(prefix.count))) }
        }
        return nil
    }

    var json: JSONValue {
        ["local": .string(FileURI.uri(from: local)), "synced": .string(FileURI.uri(from: synced))]
    }
}

/// `document/moveToStorage` → ``MoveDocumentResult`` (as `document/move`).
struct MoveToStorageRequest: RequestType {
    static let method = "document/moveToStorage"
    typealias Result = MoveDocumentResult
    var source: FileSource
    var storage: StorageName

    init(params: Params) throws(ResponseError) {
        source = try FileSource(params)
        storage = try StorageName(params)
    }
}

/// `workspace/moveAllToStorage` → ``MoveAllToStorageResult``.
struct MoveAllToStorageRequest: RequestType {
    static let method = "workspace/moveAllToStorage"
    typealias Result = MoveAllToStorageResult
    var storage: StorageName
    /// LSP's work-done progress token: `$/progress` counts the documents moved.
    var workDoneToken: JSONValue?

    init(params: Params) throws(ResponseError) {
        storage = try StorageName(params)
        workDoneToken = try params.progressToken("workDoneToken")
    }
}

/// What a move of every document did: each document's old and new place, and its open document.
struct MoveAllToStorageResult: RequestResult {
    struct Moved: Sendable {
        var from: String
        var to: String
        var handle: String?
    }
    var moved: [Moved]

    var json: JSONValue {
        [
            "moved": .array(moved.map { item in
                [
                    "from": .string(FileURI.uri(from: item.from)), "to": .string(FileURI.uri(from: item.to)),
                    "document": item.handle.map { .string($0) } ?? .null,
                ]
            }),
        ]
    }
}
