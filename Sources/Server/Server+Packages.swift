import DocumentSession
import FileStore
import JSON
import JSONRPC
import ManagedStore
import UTF8Validation

// Package and managed documents (issue 18; protocol/README.md §13): the methods of their own
// (`document/readEntry`, `writeEntry`, `deleteEntry`, `store/execute`, `store/query`) and the
// document methods they share with text documents (`open`, `create`, `state`, `undo`, `redo`,
// `save`, `revert`, `close`, `resolveConflict`), which go to the ``PackageStore`` for its handles.

/// A result that is one of two kinds: a text document's, or a package's.
enum EitherResult<Text: RequestResult, Package: RequestResult>: RequestResult {
    case text(Text)
    case package(Package)

    var json: JSONValue {
        switch self {
        case .text(let result): return result.json
        case .package(let result): return result.json
        }
    }
}

extension Answer {
    /// The same answer, its result wrapped as a text document's.
    func asText<Package: RequestResult>() -> Answer<EitherResult<Result, Package>> {
        switch self {
        case .now(let result): return .now(.text(result))
        case .later(let work, let answered): return .later({ await work().map { .text($0) } }, answered: answered)
        }
    }
}

extension Server {
    /// Whether `handle` names a package document (open or not: the wording of errors says so).
    nonisolated func isPackage(_ handle: String) -> Bool { PackageStore.isPackageHandle(handle) }

    /// Runs a package store call, its errors worded as every document error is.
    func packageCall<T>(_ body: () async throws(DocumentError) -> T) async throws(ResponseError) -> T {
        do throws(DocumentError) {
            return try await body()
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// The kind `document/open` opens `path` as: the one asked for, else a package for a
    /// directory with a package's extension or a managed store; nil for a text document.
    func packageKind(of path: String, asked: String?) -> PackageKind? {
        switch asked {
        case "package": return .package
        case "managed": return .managed
        case "text": return nil
        default:
            guard PackageStore.isDirectory(path) else { return nil }
            return PackageStore.impliedKind(ofDirectory: path)
        }
    }

    /// `document/open` of a package or managed document.
    func openPackage(_ params: OpenDocumentRequest, kind: PackageKind) async throws(ResponseError) -> PackageInfo {
        let target = try await checkPath(params.path, field: "params.uri", mustExist: true)
        defer { withExtendedLifetime(target) {} }
        guard PackageStore.isDirectory(target.path) else {
            throw .invalidParams(field: "params.kind", "\"\(kind.rawValue)\" opens a directory, and \(target.path) is not one")
        }
        let (document, recovered) = try await packageCall { () throws(DocumentError) in
            try await packages.open(path: target.path, kind: kind, storeOptions: params.storeOptions ?? StoreOptions())
        }
        holdPackage(document)
        return PackageInfo(
            document: document, recovered: recovered, recovery: await packages.recoveryOffer(document.handle),
            editedElsewhere: await packages.journalsHeldElsewhere(document.handle) > 0)
    }

    /// `document/create` of a package or managed document.
    func createPackage(_ params: CreateDocumentRequest, kind: PackageKind) async throws(ResponseError) -> PackageInfo {
        guard case .file(let path) = params.location else {
            throw .invalidParams(field: "params.directory", "a \(kind.rawValue) document is created at a uri, not by a naming rule")
        }
        let target = try await creationPath(path, field: "params.uri")
        defer { withExtendedLifetime(target) {} }
        let document = try await packageCall { () throws(DocumentError) in
            try await packages.create(path: target.path, kind: kind, storeOptions: params.storeOptions ?? StoreOptions())
        }
        holdPackage(document)
        return PackageInfo(document: document)
    }

    func readEntry(_ params: ReadEntryRequest) async throws(ResponseError) -> ReadEntryResult {
        try requirePackage(params.handle, "read entries")
        let read = try await packageCall { () throws(DocumentError) in try await packages.readEntry(params.handle, path: params.path) }
        var text: String? = nil
        if params.form != "base64" {
            let valid = read.bytes.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
            if valid {
                text = String(decoding: read.bytes, as: UTF8.self)
            } else if params.form == "text" {
                let offset = read.bytes.withUnsafeBufferPointer { UTF8Validation.wellFormedPrefix($0) }
                throw ResponseError(
                    .notText, "\(params.path) is not UTF-8 text: byte \(offset); read it with as: \"base64\"",
                    data: ["path": .string(params.path), "offset": .integer(Int64(offset)), "encoding": "utf-8"])
            }
        }
        return ReadEntryResult(handle: params.handle, read: read, text: text)
    }

    func writeEntry(_ params: WriteEntryRequest) async throws(ResponseError) -> VersionResult {
        try requirePackage(params.handle, "write entries")
        let version = try await packageCall { () throws(DocumentError) in
            try await packages.writeEntry(params.handle, path: params.path, bytes: params.bytes, version: params.version, label: params.label)
        }
        // A large entry is answered once its journal record is on disk (§8.22).
        await packages.flushIfLarge(params.handle)
        return VersionResult(version: version)
    }

    func deleteEntry(_ params: DeleteEntryRequest) async throws(ResponseError) -> VersionResult {
        try requirePackage(params.handle, "delete entries")
        return VersionResult(version: try await packageCall { () throws(DocumentError) in
            try await packages.deleteEntry(params.handle, path: params.path, version: params.version, label: params.label)
        })
    }

    /// `store/execute`: in the document's line, off the queue (protocol §4.7): the statements run
    /// on a thread of their own while other documents are served; a cancellation or the client's
    /// end stops them (-32800), as `storeOptions.timeLimit` does (-32029).
    func executeStore(_ params: ExecuteStoreRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<ExecuteStoreResult> {
        try requirePackage(params.handle, "run SQL")
        _ = try await packageCall { () throws(DocumentError) in try await packages.info(params.handle) }
        let running = await packages.enqueueExecute(
            params.handle, sql: params.sql, params: params.params, version: params.version, label: params.label,
            stop: Self.stopCondition(context))
        let id = context.id
        return .later {
            switch await running.value {
            case .success(let (version, result)): return .success(ExecuteStoreResult(version: version, result: result))
            case .failure(let error): return .failure(Self.storeCallError(error, id: id))
            }
        }
    }

    /// `store/query`: in the document's line, off the queue, as `store/execute`.
    func queryStore(_ params: QueryStoreRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<QueryStoreResult> {
        try requirePackage(params.handle, "run SQL")
        _ = try await packageCall { () throws(DocumentError) in try await packages.info(params.handle) }
        let running = await packages.enqueueQuery(params.handle, sql: params.sql, params: params.params, stop: Self.stopCondition(context))
        let id = context.id
        return .later {
            switch await running.value {
            case .success(let result): return .success(QueryStoreResult(result: result))
            case .failure(let error): return .failure(Self.storeCallError(error, id: id))
            }
        }
    }

    /// When a store call's statements stop early: its request cancelled, or its client gone.
    static func stopCondition(_ context: RequestContext) -> @Sendable () -> Bool {
        let token = context.cancellation
        return { token.isCancelled || token.isAbandoned }
    }

    /// The wire error of a store call: -32800 for one its client cancelled, as any other.
    static func storeCallError(_ error: DocumentError, id: RequestID) -> ResponseError {
        if case .store(let store) = error, store.kind == .cancelled { return .cancelled(id) }
        return responseError(error, id: .null)
    }

    /// A package request that reads or changes the document (an entry, its state): answered now
    /// when no store call of the document is waiting or running; else after them, off the queue, so
    /// that a long statement holds only its own document's requests.
    ///
    /// With `afterSaves`, in the line it also waits for the saves asked before it, and runs holding
    /// the document's turn (undo, redo, revert, close, resolveConflict, recover: their own wait for
    /// saves does not wait for the line again).
    func packageRequest<R: RequestResult>(
        _ handle: String, afterSaves: Bool = false, _ body: @escaping @Sendable () async throws(ResponseError) -> R
    ) async throws(ResponseError) -> Answer<R> {
        let waiting = await packages.inLineIfBusy(handle, afterSaves: afterSaves) { () -> Result<R, ResponseError> in
            do throws(ResponseError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        guard let waiting else { return .now(try await body()) }
        return .later { await waiting.value }
    }

    /// A package method on a text document's handle is -32031 (the store would say "unknown").
    func requirePackage(_ handle: String, _ operation: String) throws(ResponseError) {
        if !isPackage(handle) && handle.hasPrefix("d") && handle.dropFirst().allSatisfy(\.isNumber) {
            throw Self.responseError(.wrongKind(handle: handle, kind: "text", operation: operation), id: .null)
        }
    }

    func packageStep(_ handle: String, version: Int64?, undo: Bool) async throws(ResponseError) -> PackageStepResult {
        let step = try await packageCall { () throws(DocumentError) in
            undo ? try await packages.undo(handle, version: version) : try await packages.redo(handle, version: version)
        }
        await packages.flushIfLarge(handle)
        return PackageStepResult(step: step)
    }

    func packageState(_ handle: String) async throws(ResponseError) -> PackageInfo {
        PackageInfo(document: try await packageCall { () throws(DocumentError) in try await packages.info(handle) })
    }

    /// `document/save` of a package: in request order for the document (a later write stays
    /// unsaved), answered when the new tree is in place.
    func savePackage(_ params: SaveDocumentRequest) async throws(ResponseError) -> Answer<PackageSaveAnswer> {
        let packages = packages
        let handle = params.handle
        let force = params.force
        // A save as (`to`): checked against the roots as a text document's is.
        var newPath: String? = nil
        if let path = params.newPath { newPath = try await checkPath(path, field: "params.to", mustExist: false).path }
        _ = try await packageCall { () throws(DocumentError) in try await packages.info(handle) }
        if let newPath {
            // Held in request order: a later request's save as to it, or open of it, comes after.
            let store = store
            try await packageCall { () throws(DocumentError) in
                try await packages.reserveSaveAs(handle, to: newPath, isHeldElsewhere: { path in await store.openDocument(atOrUnder: path) })
            }
        }
        // In line in request order: a save asked for after this one runs after it.
        let saving = await packages.enqueueSave(handle, force: force, to: newPath, reserved: newPath != nil)
        return .later {
            switch await saving.value {
            case .success(let outcome): return .success(PackageSaveAnswer(outcome: outcome))
            case .failure(let error): return .failure(Self.responseError(error, id: .null))
            }
        }
    }

    func revertPackage(_ handle: String) async throws(ResponseError) -> PackageInfo {
        PackageInfo(document: try await packageCall { () throws(DocumentError) in try await packages.revert(handle) })
    }

    func closePackage(_ params: CloseDocumentRequest) async throws(ResponseError) -> CloseDocumentResult {
        if let released = releaseIfShared(params.handle) { return released }
        return CloseDocumentResult(saved: try await packageCall { () throws(DocumentError) in
            try await packages.close(params.handle, discard: params.policy == .never)
        })
    }

    func resolvePackageConflict(_ params: ResolveConflictRequest) async throws(ResponseError) -> PackageInfo {
        let takeTheirs: Bool
        switch params.resolution {
        case .mine: takeTheirs = false
        case .theirs: takeTheirs = true
        case .merge:
            throw .invalidParams(field: "params.resolution", "a package is resolved with \"mine\" or \"theirs\" (its entries are not merged line by line)")
        }
        return PackageInfo(document: try await packageCall { () throws(DocumentError) in
            try await packages.resolveConflict(params.handle, takeTheirs: takeTheirs, version: params.version)
        })
    }

    /// The params of `document/didChange` for a package's reload.
    static func didChangeEntries(_ event: DocumentEvent, entries: [EntryChange], store: Bool) -> JSONValue {
        [
            "document": .string(event.handle), "uri": .string(FileURI.uri(from: event.path)),
            "version": .integer(event.version), "reason": "external",
            "entries": .array(entries.map { ["path": .string($0.path), "change": .string($0.change.rawValue)] }),
            "store": .bool(store),
        ]
    }
}
