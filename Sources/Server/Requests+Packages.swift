import DocumentSession
import FileStore
import JSON
import JSONRPC
import ManagedStore

// The requests of package and managed documents (Server+Packages.swift; protocol/README.md §13).

/// `document/open` and `document/create`'s `storeOptions`: the migrations the client declares
/// and whether the store is read-only.
extension Params {
    func storeOptions(_ key: String) throws(ResponseError) -> StoreOptions? {
        guard let options = try optionalObject(key) else { return nil }
        let migrations = try options.optionalStringArray("migrations") ?? []
        for (index, script) in migrations.enumerated() where script.allSatisfy(\.isWhitespace) {
            throw .invalidParams(field: "\(options.fieldPath("migrations"))[\(index)]", "an empty script (each migration is SQL that changes the schema)")
        }
        let timeLimit = try options.optionalInteger("timeLimit", in: Int64(StoreOptions.timeLimits.lowerBound)...Int64(StoreOptions.timeLimits.upperBound))
        let memoryLimit = try options.optionalInteger(
            "memoryLimit", in: Int64(StoreOptions.memoryLimits.lowerBound)...Int64(StoreOptions.memoryLimits.upperBound))
        return StoreOptions(
            migrations: migrations, readOnly: try options.optionalBool("readOnly") ?? false,
            timeLimit: timeLimit.map { Int($0) } ?? StoreOptions.defaultTimeLimit,
            memoryLimit: memoryLimit.map { Int($0) } ?? StoreOptions.defaultMemoryLimit)
    }

    /// A relative entry path of a package, checked.
    func entryPath(_ key: String) throws(ResponseError) -> String {
        let path = try string(key)
        if let problem = EntryReading.pathProblem(path) {
            throw .invalidParams(field: fieldPath(key), "\"\(path)\" is not an entry path: \(problem)")
        }
        return path
    }

    /// An entry's new content: `text` (written as UTF-8) or `base64` (any bytes), exactly one.
    func entryBytes() throws(ResponseError) -> [UInt8] {
        let text = try optionalString("text")
        let encoded = try optionalString("base64")
        switch (text, encoded) {
        case (let text?, nil):
            guard text.utf8.count <= PackageStore.maximumEntrySize else {
                throw .invalidParams(field: fieldPath("text"), "\(text.utf8.count) bytes, more than the \(PackageStore.maximumEntrySize) an entry may hold")
            }
            return Array(text.utf8)
        case (nil, let encoded?):
            let bytes: [UInt8]
            do throws(Base64.DecodingError) {
                bytes = try Base64.decode(encoded)
            } catch {
                throw .invalidParams(field: fieldPath("base64"), "not base64: \(error.reason) at character \(error.offset)")
            }
            guard bytes.count <= PackageStore.maximumEntrySize else {
                throw .invalidParams(field: fieldPath("base64"), "\(bytes.count) bytes, more than the \(PackageStore.maximumEntrySize) an entry may hold")
            }
            return bytes
        case (nil, nil):
            throw .invalidParams(field: fieldPath("text"), "missing (give text, or base64 for bytes)")
        case (_?, _?):
            throw .invalidParams(field: fieldPath("base64"), "give text or base64, not both")
        }
    }

    /// SQL params: an array (positional, `?` and `?NNN`) or an object (named, `:name`, `@name`,
    /// `$name`, given without the sign); values null, booleans (1 or 0), integers, numbers,
    /// strings, or `{"base64": ...}` for a blob.
    func sqlParams(_ key: String) throws(ResponseError) -> SQLParams {
        switch value(key) {
        case nil:
            return .none
        case .array(let values)?:
            var converted: [SQLValue] = []
            for (index, value) in values.enumerated() {
                converted.append(try Self.sqlValue(value, field: "\(fieldPath(key))[\(index)]"))
            }
            return .positional(converted)
        case .object(let members)?:
            var converted: [String: SQLValue] = [:]
            for (name, value) in members {
                guard !name.isEmpty, !":@$".contains(name.first!) else {
                    throw .invalidParams(field: "\(fieldPath(key)).\(name)", "name a param without its sign (\"id\" for :id)")
                }
                converted[name] = try Self.sqlValue(value, field: "\(fieldPath(key)).\(name)")
            }
            return .named(converted)
        case let other?:
            throw .invalidParams(field: fieldPath(key), "expected an array (positional) or an object (named), got \(other.kindDescription)")
        }
    }

    static func sqlValue(_ value: JSONValue, field: String) throws(ResponseError) -> SQLValue {
        switch value {
        case .null: return .null
        case .bool(let flag): return .integer(flag ? 1 : 0)
        case .integer(let integer): return .integer(integer)
        case .double(let real): return .real(real)
        case .string(let text): return .text(text)
        case .object(let object):
            guard object.count == 1, case .string(let encoded)? = object["base64"] else {
                throw .invalidParams(field: field, "an object param must be {\"base64\": \"...\"} (a blob)")
            }
            do throws(Base64.DecodingError) {
                return .blob(try Base64.decode(encoded))
            } catch {
                throw .invalidParams(field: field + ".base64", "not base64: \(error.reason) at character \(error.offset)")
            }
        case .array:
            throw .invalidParams(field: field, "an array is not an SQL value (null, boolean, number, string or {\"base64\": ...})")
        }
    }
}

extension Server {
    /// An SQL value on the wire: blobs as `{"base64": ...}`.
    static func json(_ value: SQLValue) -> JSONValue {
        switch value {
        case .null: return .null
        case .integer(let integer): return .integer(integer)
        case .real(let real): return real.isFinite ? .double(real) : .null
        case .text(let text): return .string(text)
        case .blob(let bytes): return ["base64": .string(Base64.encode(bytes))]
        }
    }
}

/// `document/readEntry` → ``ReadEntryResult``.
struct ReadEntryRequest: RequestType, PackageAwareRequest {
    static let method = "document/readEntry"
    typealias Result = ReadEntryResult
    var handle: String
    var path: String
    /// `text`: refused when the bytes are not UTF-8; `base64`: always bytes; nil: text when they are UTF-8.
    var form: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        path = try params.entryPath("path")
        form = try params.optionalEnumeration("as", ["text", "base64"])
    }
}

struct ReadEntryResult: RequestResult {
    var handle: String
    var read: EntryRead
    var text: String?

    var json: JSONValue {
        var result: JSONObject = [
            "document": .string(handle), "path": .string(read.path), "size": .integer(Int64(read.bytes.count)),
            "unsaved": .bool(read.unsaved),
        ]
        if let text { result["text"] = .string(text) } else { result["base64"] = .string(Base64.encode(read.bytes)) }
        return .object(result)
    }
}

/// `document/writeEntry` → ``VersionResult``.
struct WriteEntryRequest: RequestType, PackageAwareRequest {
    static let method = "document/writeEntry"
    typealias Result = VersionResult
    var handle: String
    var path: String
    var bytes: [UInt8]
    var version: Int64?
    var label: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        path = try params.entryPath("path")
        bytes = try params.entryBytes()
        version = try params.optionalInteger("version", in: 0...Int64.max)
        label = try params.optionalString("label")
    }
}

/// `document/deleteEntry` → ``VersionResult``.
struct DeleteEntryRequest: RequestType, PackageAwareRequest {
    static let method = "document/deleteEntry"
    typealias Result = VersionResult
    var handle: String
    var path: String
    var version: Int64?
    var label: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        path = try params.entryPath("path")
        version = try params.optionalInteger("version", in: 0...Int64.max)
        label = try params.optionalString("label")
    }
}

/// `{version}`: the document's version after a change.
struct VersionResult: RequestResult {
    var version: Int64
    var json: JSONValue { ["version": .integer(version)] }
}

/// `store/execute` → ``ExecuteStoreResult``.
struct ExecuteStoreRequest: RequestType, PackageAwareRequest {
    static let method = "store/execute"
    typealias Result = ExecuteStoreResult
    var handle: String
    var sql: String
    var params: SQLParams
    var version: Int64?
    var label: String?

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        sql = try params.string("sql")
        if sql.allSatisfy(\.isWhitespace) { throw .invalidParams(field: "params.sql", "empty: give one or more SQL statements") }
        self.params = try params.sqlParams("params")
        version = try params.optionalInteger("version", in: 0...Int64.max)
        label = try params.optionalString("label")
    }
}

struct ExecuteStoreResult: RequestResult {
    var version: Int64
    var result: ExecuteResult

    var json: JSONValue {
        [
            "version": .integer(version), "changes": .integer(Int64(result.rowsChanged)),
            "lastInsertRowid": .integer(result.lastInsertRowID), "undoable": .bool(result.changed),
        ]
    }
}

/// `store/query` → ``QueryStoreResult``.
struct QueryStoreRequest: RequestType, PackageAwareRequest {
    static let method = "store/query"
    typealias Result = QueryStoreResult
    var handle: String
    var sql: String
    var params: SQLParams

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        sql = try params.string("sql")
        if sql.allSatisfy(\.isWhitespace) { throw .invalidParams(field: "params.sql", "empty: give one SQL statement") }
        self.params = try params.sqlParams("params")
    }
}

struct QueryStoreResult: RequestResult {
    var result: QueryResult

    var json: JSONValue {
        [
            "columns": .array(result.columns.map { .string($0) }),
            "rows": .array(result.rows.map { row in .array(row.map(Server.json)) }),
        ]
    }
}

/// A package document's description (`document/open`, `create`, `revert`, `state`).
struct PackageInfo: RequestResult {
    var document: PackageDocument
    var recovered: PackageRecovery? = nil
    /// A dead server's journal of the package, offered (`document/open`).
    var recovery: PackageRecoveryOffer? = nil
    /// Live servers hold journals of the package (`document/open`).
    var editedElsewhere = false

    var json: JSONValue {
        var info: JSONObject = [
            "document": .string(document.handle), "uri": .string(FileURI.uri(from: document.path)),
            "version": .integer(document.version), "kind": .string(document.kind.rawValue),
            "state": Server.stateJSON(document.state), "displayName": .string(document.displayName),
            "hasUnsavedChanges": .bool(document.hasUnsavedChanges),
            "canUndo": .bool(document.canUndo), "canRedo": .bool(document.canRedo),
        ]
        if let label = document.undoLabel { info["undoLabel"] = .string(label) }
        if let label = document.redoLabel { info["redoLabel"] = .string(label) }
        info["entries"] = .array(document.entryList.map { entry in
            ["path": .string(entry.path), "kind": .string(entry.kind.rawValue), "size": .integer(entry.size)]
        })
        if let store = document.storeSummary {
            info["store"] = [
                "userVersion": .integer(Int64(store.userVersion)),
                "migrated": ["from": .integer(Int64(store.migratedFrom)), "to": .integer(Int64(store.migratedTo))],
                "readOnly": .bool(store.readOnly),
            ]
        }
        if let recovery { info["recovery"] = Server.json(recovery) }
        if editedElsewhere { info["editedElsewhere"] = true }
        if let recovered {
            info["interruptedSave"] = ["outcome": .string(recovered.outcome.rawValue), "removed": .array(recovered.removed.map { .string($0) })]
        }
        return .object(info)
    }
}

/// `document/versions` of a package: the disk's sides of its conflicts kept (a managed document's
/// store as another program left it), newest first, each with the `uri` of the copy.
struct PackageVersionsResult: RequestResult {
    var versions: [PackageConflictVersion]

    var json: JSONValue {
        ["versions": .array(versions.reversed().map { version in
            [
                "id": .string(version.id), "kind": "conflict",
                "date": .string(Timestamp.iso8601(nanoseconds: version.date)), "size": .integer(version.size),
                "uri": .string(FileURI.uri(from: version.path)),
            ]
        })]
    }
}

/// `document/undo` and `redo` of a package: `{version, entries, store}`.
struct PackageStepResult: RequestResult {
    var step: PackageStore.StepResult
    var json: JSONValue {
        [
            "version": .integer(step.version),
            "entries": .array(step.entries.map { ["path": .string($0.path), "change": .string($0.change.rawValue)] }),
            "store": .bool(step.store),
        ]
    }
}

/// `document/save` of a package.
struct PackageSaveAnswer: RequestResult {
    var outcome: PackageStore.PackageSaveOutcome
    var json: JSONValue {
        let result = outcome.result
        return [
            "version": .integer(outcome.version), "uri": .string(FileURI.uri(from: outcome.path)),
            "durable": .bool(result.durable), "method": .string(result.method.rawValue),
            "entries": ["written": .integer(Int64(result.written)), "cloned": .integer(Int64(result.cloned)),
                        "linked": .integer(Int64(result.linked)), "copied": .integer(Int64(result.copied))],
        ]
    }
}
