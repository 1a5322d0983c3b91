import CSQLite
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

extension ManagedStore {
    /// Publishes a consistent copy of the working store at `path`, a path that does not exist yet
    /// (inside a staged package directory): the backup API copies the working copy's pages into a
    /// new database opened there, which is then set to the rollback journal (`journal_mode=DELETE`:
    /// the copied header says WAL) and closed. The published file's header bytes 18 and 19 are
    /// checked to be 1 (not 2, WAL) and no `-wal`, `-shm` or `-journal` file may be left beside it.
    ///
    /// The copy is written with `synchronous=OFF` and no journal: it is a new file in a staging
    /// directory, so a crash leaves only a file the caller discards. The caller flushes it (and its
    /// directory) and renames the package into place.
    public func publish(to path: String) throws(StoreError) {
        let connection = try openConnection()
        guard try !ManagedStore.fileExists(path) else {
            throw StoreError(code: SQLITE_CANTOPEN, message: "publish needs a new path, and \(path) exists", kind: .publish)
        }
        do throws(StoreError) {
            let destination = try Connection(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            defer { destination.close() }
            try destination.run("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
            try ManagedStore.copy(from: connection, to: destination)
            if try ManagedStore.headerVersions(path) != [1, 1] {
                let mode = try destination.rows("PRAGMA journal_mode = DELETE").first?.first
                guard mode == .text("delete") else {
                    throw StoreError(code: SQLITE_ERROR, message: "the published copy could not leave WAL (journal_mode is \(String(describing: mode)))", kind: .publish)
                }
            }
        } catch {
            try? ManagedStore.removeDatabaseFiles(at: path)
            throw error
        }
        let versions = try ManagedStore.headerVersions(path)
        guard versions == [1, 1] else {
            try? ManagedStore.removeDatabaseFiles(at: path)
            throw StoreError(code: SQLITE_ERROR, message: "the published copy's header says format \(versions), not 1 (rollback journal)", kind: .publish)
        }
        for suffix in ManagedStore.companionSuffixes where try ManagedStore.fileExists(path + suffix) {
            try? ManagedStore.removeDatabaseFiles(at: path)
            throw StoreError(code: SQLITE_ERROR, message: "publishing left \(path + suffix) beside the copy", kind: .publish)
        }
    }

    /// Replaces the working copy by a copy of the published store at `path` (a reload after an
    /// external change), migrated like an open; the undo history is dropped. The published file is
    /// read first (a file that is not a database fails here and the store stays as it was); a
    /// failure after that (the copy, a migration) leaves the store closed.
    public func reload(fromPublished path: String) throws(StoreError) {
        _ = try openConnection()
        let published = try Connection(path: path, flags: SQLITE_OPEN_READONLY)
        defer { published.close() }
        _ = try published.integer("SELECT count(*) FROM sqlite_schema")
        close()
        let fresh = try ManagedStore(publishedPath: path, workingPath: workingPath, options: options)
        connection = fresh.connection
        migratedFrom = fresh.migratedFrom
        migratedTo = fresh.migratedTo
        fresh.connection = nil
        changeCount += 1
    }

    /// The names SQLite puts beside a database.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// Copies every page of `source`'s main database into `destination`'s (`sqlite3_backup_init`,
    /// `step(-1)`, `finish`).
    static func copy(from source: Connection, to destination: Connection) throws(StoreError) {
        guard let sourceHandle = source.handle, let destinationHandle = destination.handle else {
            throw .refusal(.closed, "the store is closed")
        }
        guard let backup = sqlite3_backup_init(destinationHandle, "main", sourceHandle, "main") else {
            throw destination.lastError(statement: nil)
        }
        let step = sqlite3_backup_step(backup, -1)
        let finish = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finish == SQLITE_OK else {
            // The step's failure is the cause; SQLite reports it on the destination's handle.
            let code = sqlite3_extended_errcode(destinationHandle)
            let message = String(cString: sqlite3_errmsg(destinationHandle))
            throw StoreError(code: code != SQLITE_OK ? code : (step != SQLITE_DONE ? step : finish),
                             message: "copying \(source.path) to \(destination.path): \(message)")
        }
    }

    /// Bytes 18 and 19 of the database header at `path` (the file format's write and read
    /// versions: 1 for the rollback journal, 2 for WAL).
    static func headerVersions(_ path: String) throws(StoreError) -> [UInt8] {
        do {
            let file = try Descriptor.open(path, .readOnly)
            var header = [UInt8](repeating: 0, count: 20)
            let count = try header.withUnsafeMutableBytes { (buffer) throws(SystemCallError) in
                try readFully(into: buffer, from: file.unowned, at: 0, path: path)
            }
            guard count == 20 else {
                throw StoreError(code: SQLITE_NOTADB, message: "\(path) is shorter than a database header", kind: .publish)
            }
            return Array(header[18...19])
        } catch let error as SystemCallError {
            throw StoreError(code: SQLITE_IOERR, message: error.description, kind: .file)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(code: SQLITE_IOERR, message: "\(error)", kind: .file)
        }
    }

    /// Whether a file exists at `path` (`stat`; ENOENT answers false, other failures throw).
    static func fileExists(_ path: String) throws(StoreError) -> Bool {
        do throws(SystemCallError) {
            _ = try fileStatus(path)
            return true
        } catch {
            if error.errno == .noSuchFileOrDirectory { return false }
            throw StoreError(code: SQLITE_IOERR, message: error.description, kind: .file)
        }
    }

    /// Whether `first` and `second` name one file: the same path, or the same device and inode.
    static func isSameFile(_ first: String, _ second: String) throws(StoreError) -> Bool {
        if first == second { return true }
        guard try fileExists(first), try fileExists(second) else { return false }
        do throws(SystemCallError) {
            let one = try fileStatus(first)
            let other = try fileStatus(second)
            return one.st_dev == other.st_dev && one.st_ino == other.st_ino
        } catch {
            throw StoreError(code: SQLITE_IOERR, message: error.description, kind: .file)
        }
    }

    /// Removes the database at `path` and its `-wal`, `-shm` and `-journal` files, where they exist.
    static func removeDatabaseFiles(at path: String) throws(StoreError) {
        for name in [path] + companionSuffixes.map({ path + $0 }) {
            do throws(SystemCallError) {
                try removeFile(name)
            } catch {
                if error.errno == .noSuchFileOrDirectory { continue }
                throw StoreError(code: SQLITE_IOERR, message: error.description, kind: .file)
            }
        }
    }
}
