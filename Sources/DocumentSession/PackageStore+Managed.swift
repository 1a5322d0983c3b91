import FileStore
import ManagedStore
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

// Managed documents (UIManagedDocument's role, issue 18.2): a package whose store is a SQLite
// database. The store is never used in place: it is copied (SQLite's backup API) into a private
// working copy in WAL mode, where `store/execute` writes one transaction per request with the
// session extension recording its changeset (the undo step); a save publishes a consistent copy of
// the working store (backup API again, rollback journal, no `-wal` or `-shm`) into the staged tree
// that the package save swaps in whole, with the additional content beside it. docs/Modules.md
// ("ManagedStore") has the argument.

/// A managed document's store as the client sees it in the document's info.
public struct StoreSummary: Sendable, Equatable {
    /// `PRAGMA user_version`: how many of the client's migrations the store has had.
    public var userVersion: Int
    /// The schema versions before and after this open's migrations.
    public var migratedFrom: Int
    public var migratedTo: Int
    public var readOnly: Bool
}

/// Where a managed document keeps its store (UIManagedDocument's layout).
enum DatabaseLayout {
    static let storePath = "StoreContent/persistentStore"
    static let additionalContent = "StoreContent/AdditionalContent"
    /// Directories the layout implies: never listed as empty directories of their own.
    static let storeDirectories: Set<String> = ["StoreContent"]

    /// The store and the files SQLite keeps beside it (`-wal`, `-shm`, `-journal`): not entries.
    static func isStoreFile(_ path: String) -> Bool {
        path == storePath || path == storePath + "-wal" || path == storePath + "-shm" || path == storePath + "-journal"
    }
}

/// The managed store of one open document. The actor and a save's thread (which publishes it)
/// share it; every use goes through the lock, and the store itself is not thread-safe.
final class DatabaseHandle: @unchecked Sendable {
    /// Guards the store (with the summary, which a reload changes).
    private let lock: Mutex<StoreSummary>
    private let store: ManagedStore
    let workingPath: String

    init(store: ManagedStore, workingPath: String, readOnly: Bool) {
        self.store = store
        self.workingPath = workingPath
        lock = Mutex(StoreSummary(userVersion: store.migratedTo, migratedFrom: store.migratedFrom, migratedTo: store.migratedTo, readOnly: readOnly))
    }

    var summary: StoreSummary { lock.withLock { $0 } }

    func locked<T>(_ body: (ManagedStore) throws(StoreError) -> T) throws(StoreError) -> T {
        let result: Result<T, StoreError> = lock.withLock { _ in
            do throws(StoreError) {
                return .success(try body(store))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Publishes a consistent copy of the store at `path` (inside a staged package tree).
    func publish(to path: String) throws(FileSystemError) {
        do throws(StoreError) {
            try locked { store throws(StoreError) in try store.publish(to: path) }
        } catch {
            throw FileSystemError(errno: EIO, syscall: "sqlite3_backup_step", path: path, reason: "\(error.codeName): \(error.message)")
        }
    }

    /// Undoes or redoes the store's next step; answers the store's change count after it.
    @discardableResult
    func step(forward: Bool) throws(DocumentError) -> Int64 {
        do throws(StoreError) {
            return try locked { store throws(StoreError) in
                forward ? try store.redo() : try store.undo()
                return store.changeCount
            }
        } catch {
            throw .store(error)
        }
    }

    /// The working copy's size on disk (with its WAL): what a copy of it in a journal weighs.
    var workingCopySize: Int {
        [workingPath, workingPath + "-wal"].reduce(0) { $0 + Int(FileIdentity.current(path: $1)?.size ?? 0) }
    }

    /// A copy of the working copy's content (as a published store) and the store's change count
    /// then, for a journal's state record; nil when it cannot be made. Blocks: the journal's thread.
    func snapshot() -> (count: Int64, bytes: [UInt8])? {
        let path = workingPath + ".journal-copy"
        return try? locked { store throws(StoreError) -> (count: Int64, bytes: [UInt8])? in
            unlink(path)
            defer { unlink(path) }
            try store.publish(to: path)
            guard let descriptor = try? Descriptor.open(path, .readOnly),
                  let bytes = try? readToEnd(from: descriptor.unowned, path: path)
            else { return nil }
            return (store.changeCount, bytes)
        }
    }

    /// Takes a journal's copy of a store as the working copy (migrated like an open, the undo
    /// history dropped). Blocks.
    func load(_ bytes: [UInt8]) throws(DocumentError) {
        let path = workingPath + ".recovered"
        unlink(path)
        defer { unlink(path) }
        do throws(FileSystemError) { _ = try FileCreation.createNew(path: path, bytes: bytes) } catch { throw .fileSystem(error) }
        do throws(StoreError) { try reload(fromPublished: path) } catch { throw .store(error) }
    }

    /// A journal's step taken (applied unless the working copy holds it) or moved over. Blocks.
    func replay(changeset: [UInt8], apply: Bool) throws(DocumentError) {
        do throws(StoreError) { try locked { store throws(StoreError) in try store.takeStep(changeset, apply: apply) } } catch { throw .store(error) }
    }

    func replayMove(forward: Bool, apply: Bool) throws(DocumentError) {
        if apply {
            try step(forward: forward)
            return
        }
        do throws(StoreError) { try locked { store throws(StoreError) in try store.moveStep(forward: forward) } } catch { throw .store(error) }
    }

    /// Takes the published store at `path` as the working copy (the undo history is dropped).
    func reload(fromPublished path: String) throws(StoreError) {
        let result: Result<Void, StoreError> = lock.withLock { summary in
            do throws(StoreError) {
                try store.reload(fromPublished: path)
                summary = StoreSummary(userVersion: store.migratedTo, migratedFrom: store.migratedFrom, migratedTo: store.migratedTo, readOnly: summary.readOnly)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Closes the store and removes its working copy (with SQLite's files beside it).
    func close() {
        lock.withLock { _ in store.close() }
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(workingPath + suffix) }
    }
}

extension PackageStore {
    /// Opens the store of the package at `packagePath` (nil: a new, empty store) in a working copy
    /// of this server's, applying the client's migrations.
    func openDatabase(packagePath: String?, options: StoreOptions) async throws(DocumentError) -> DatabaseHandle {
        if workingDirectory == nil {
            let stateDirectory = stateDirectory
            let made = await runOnOwnThread { () -> Result<ManagedWorkingDirectory, FileSystemError> in
                do throws(FileSystemError) {
                    return .success(try ManagedWorkingDirectory.open(stateDirectory: stateDirectory))
                } catch {
                    return .failure(error)
                }
            }
            switch made {
            // Another open may have made one meanwhile: the first stays, this one goes.
            case .success(let directory): if workingDirectory == nil { workingDirectory = directory } else { directory.remove() }
            case .failure(let error): throw .fileSystem(error)
            }
        }
        let workingDirectory = self.workingDirectory!  // made above
        let workingPath = workingDirectory.path + "/store-\(nextWorkingCopy).sqlite"
        nextWorkingCopy += 1
        let published = packagePath.map { $0 + "/" + DatabaseLayout.storePath }
        let result = await runOnOwnThread { () -> Result<DatabaseHandle, StoreError> in
            do throws(StoreError) {
                let existing = published.flatMap { (try? fileStatus($0)) != nil ? $0 : nil }
                let store = try ManagedStore(publishedPath: existing, workingPath: workingPath, options: options)
                return .success(DatabaseHandle(store: store, workingPath: workingPath, readOnly: options.readOnly))
            } catch {
                for suffix in ["", "-wal", "-shm", "-journal"] { unlink(workingPath + suffix) }
                return .failure(error)
            }
        }
        switch result {
        case .success(let database): return database
        case .failure(let error): throw .store(error)
        }
    }

    /// Takes the package's store as it is on disk now (a reload, a revert, `theirs`).
    func reloadDatabase(_ database: DatabaseHandle, packagePath: String) async throws(DocumentError) {
        let published = packagePath + "/" + DatabaseLayout.storePath
        let result = await runOnOwnThread { () -> Result<Void, StoreError> in
            do throws(StoreError) {
                try database.reload(fromPublished: published)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        if case .failure(let error) = result { throw .store(error) }
    }

    /// Copies the disk's store of a package in conflict into the working directory: the conflict
    /// version of a managed document (nil when it cannot be copied).
    func keepConflictVersion(_ database: DatabaseHandle, packagePath: String, handle: String) -> PackageConflictVersion? {
        guard let workingDirectory, let document = documents[handle] else { return nil }
        let id = "c\(document.conflictVersions.count + 1)"
        let destination = workingDirectory.path + "/" + handle + "-" + id + ".sqlite"
        let copied: FileIdentity
        do throws(FileSystemError) {
            copied = try FileTransfer.copy(from: packagePath + "/" + DatabaseLayout.storePath, to: destination, replace: true)
        } catch {
            return nil
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return PackageConflictVersion(
            id: id, path: destination, date: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec), size: Int64(copied.size))
    }

    func database(_ handle: String) throws(DocumentError) -> DatabaseHandle {
        let document = try document(handle)
        guard let database = databases[handle] else {
            throw .wrongKind(handle: handle, kind: document.kind.rawValue, operation: "run SQL (only a managed document has a store)")
        }
        return database
    }

    /// `store/execute` asked for now, in the document's line (after the saves and store calls asked
    /// before it; ``waitForSave(_:)`` makes the document's other requests wait for it): the
    /// statements run on a thread of their own while the server serves other documents. `stop`
    /// is asked while they run; true stops them (`StoreError.Kind.cancelled`).
    public func enqueueExecute(
        _ handle: String, sql: String, params: SQLParams, version: Int64?, label: String?,
        stop: (@Sendable () -> Bool)? = nil
    ) -> Task<Result<(Int64, ExecuteResult), DocumentError>, Never> {
        inLine(handle) { () -> Result<(Int64, ExecuteResult), DocumentError> in
            do throws(DocumentError) {
                return .success(try await self.executeInTurn(handle, sql: sql, params: params, version: version, label: label, stop: stop))
            } catch {
                return .failure(error)
            }
        }
    }

    /// `store/query` asked for now, in the document's line, as ``enqueueExecute``.
    public func enqueueQuery(
        _ handle: String, sql: String, params: SQLParams, stop: (@Sendable () -> Bool)? = nil
    ) -> Task<Result<QueryResult, DocumentError>, Never> {
        inLine(handle) { () -> Result<QueryResult, DocumentError> in
            do throws(DocumentError) {
                return .success(try await self.queryInTurn(handle, sql: sql, params: params, stop: stop))
            } catch {
                return .failure(error)
            }
        }
    }

    /// `store/execute`: the statements in one transaction, one undoable step when they changed
    /// something; the version goes up by one in any case (an accepted request, as an edit).
    public func execute(
        _ handle: String, sql: String, params: SQLParams, version: Int64?, label: String?
    ) async throws(DocumentError) -> (Int64, ExecuteResult) {
        try await waitForSave(handle)
        return try await executeInTurn(handle, sql: sql, params: params, version: version, label: label, stop: nil)
    }

    /// `store/execute` once the saves and calls before it have ended.
    private func executeInTurn(
        _ handle: String, sql: String, params: SQLParams, version: Int64?, label: String?, stop: (@Sendable () -> Bool)?
    ) async throws(DocumentError) -> (Int64, ExecuteResult) {
        let document = try document(handle)
        try checkVersion(document, version)
        try checkEditable(document)
        let database = try database(handle)
        let result = await runOnOwnThread { () -> Result<(ExecuteResult, [UInt8]?, Int64), StoreError> in
            do throws(StoreError) {
                return .success(try database.locked { store throws(StoreError) in
                    let executed = try store.execute(sql, params: params, stop: stop)
                    return (executed, executed.changed ? store.lastStep : nil, store.changeCount)
                })
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .failure(let error):
            throw .store(error)
        case .success(let (executed, changeset, count)):
            let wasUnsaved = documents[handle]?.hasUnsavedChanges ?? false
            if executed.changed {
                let version = apply(handle, PackageStep(change: .store, label: label), reason: .edited)
                journalNote(handle, .store(changeset: changeset ?? [], label: label), wasUnsaved: wasUnsaved, storeCount: count)
                // A large changeset (or the journal's start with the store's copy) is answered once
                // it is on disk (§8.22).
                await flushIfLarge(handle)
                return (version, executed)
            }
            guard var current = documents[handle] else { throw .unknownDocument(handle) }
            current.version += 1
            documents[handle] = current
            journalNote(handle, .noChange, wasUnsaved: wasUnsaved)
            return (current.version, executed)
        }
    }

    /// `store/query`: one read-only statement's rows.
    public func query(_ handle: String, sql: String, params: SQLParams) async throws(DocumentError) -> QueryResult {
        try await waitForSave(handle)
        return try await queryInTurn(handle, sql: sql, params: params, stop: nil)
    }

    /// `store/query` once the saves and calls before it have ended.
    private func queryInTurn(_ handle: String, sql: String, params: SQLParams, stop: (@Sendable () -> Bool)?) async throws(DocumentError) -> QueryResult {
        let database = try database(handle)
        let result = await runOnOwnThread { () -> Result<QueryResult, StoreError> in
            do throws(StoreError) {
                return .success(try database.locked { store throws(StoreError) in try store.query(sql, params: params, stop: stop) })
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let rows): return rows
        case .failure(let error): throw .store(error)
        }
    }
}

extension DatabaseHandle: PackageStoreReplay {}
