import CSQLite
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// How a managed store is opened.
public struct StoreOptions: Sendable, Equatable {
    /// The migration scripts, in order: script `i` (1-based) brings the schema from version `i - 1`
    /// to `i`, tracked by `PRAGMA user_version`. Each may hold several statements and change the
    /// schema; it may not attach files, load extensions, run transaction statements (the store
    /// runs each script in a transaction of its own) or set PRAGMAs (so `foreign_keys` stays on
    /// during a migration, and `user_version` is the store's to set).
    public var migrations: [String]
    /// Whether the store only answers reads: its working copy runs with `query_only=ON` and
    /// `execute` is refused.
    public var readOnly: Bool

    /// How long one request's statements (a `query`, an `execute`) or one migration script may run,
    /// in milliseconds, before they are stopped and rolled back (`StoreError.Kind.timeLimit`).
    public var timeLimit: Int
    /// The most bytes one string or blob may take (`SQLITE_LIMIT_LENGTH`), and the most a query's
    /// answer may take (its values' bytes, 16 more for each value): past it, `memoryLimit`.
    public var memoryLimit: Int

    /// The default `timeLimit`: ten seconds, far above what a store an editor edits needs, and
    /// short enough that a runaway statement gives its thread back soon.
    public static let defaultTimeLimit = 10_000
    /// The default `memoryLimit`: 64 MiB, the largest message the protocol carries.
    public static let defaultMemoryLimit = 64 << 20
    /// The bounds a client may choose within.
    public static let timeLimits = 1...3_600_000
    public static let memoryLimits = (1 << 20)...(1 << 30)

    /// Options with the given migrations, writable unless `readOnly`.
    public init(
        migrations: [String] = [], readOnly: Bool = false, timeLimit: Int = StoreOptions.defaultTimeLimit,
        memoryLimit: Int = StoreOptions.defaultMemoryLimit
    ) {
        self.migrations = migrations
        self.readOnly = readOnly
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
    }
}

/// The SQLite store of a managed document (UIManagedDocument's persistent store): a private
/// working copy of the published store, migrated by `PRAGMA user_version`, written one request
/// per transaction, each change undoable through the session extension, published as a
/// consistent rollback-journal copy.
///
/// Not thread-safe: a store is used from one thread at a time (the server's calls come one after
/// the other; SQLite's connection is opened `SQLITE_OPEN_NOMUTEX`). Its calls block on the disk, so
/// the server runs them off the loop.
public final class ManagedStore {
    /// The working copy's connection; nil once closed.
    var connection: Connection?
    /// The path of the private working copy.
    public let workingPath: String
    /// The options the store was opened with.
    public let options: StoreOptions
    /// The schema version before this open's migrations (`PRAGMA user_version` of the copy).
    public internal(set) var migratedFrom: Int = 0
    /// The schema version after them: `options.migrations.count` when all succeeded.
    public internal(set) var migratedTo: Int = 0
    /// The changesets of the steps that can be undone, oldest first.
    var undoSteps: [[UInt8]] = []
    /// The changesets of the steps undone that can be redone, the next to redo last.
    var redoSteps: [[UInt8]] = []
    /// How many times the working copy's content has changed since the store was opened: each
    /// execute that changed something, undo, redo, reload and step taken (a journal tells by it
    /// which of its steps a copy of the store already holds).
    public internal(set) var changeCount: Int64 = 0

    /// Opens the store: copies the published store at `publishedPath` (when it exists; else the
    /// store starts empty) into a private working copy at `workingPath` (a path the caller chooses,
    /// such as one under the server's state directory; a working copy left there, with its `-wal`
    /// and `-shm`, is replaced) with the backup API, opens the copy in WAL mode with
    /// `synchronous=NORMAL` and `foreign_keys=ON`, installs the authorizer, then applies the
    /// migrations beyond its `PRAGMA user_version`, each in a transaction of its own that also sets
    /// `user_version` to the script's 1-based index.
    ///
    /// A failing migration is rolled back and the store is not opened: the error names the script's
    /// index, SQLite's code and message and the statement; the migrations before it stay applied in
    /// the working copy (each was its own transaction), and the published store is untouched. A
    /// file that is not a database, or is corrupt, fails with `SQLITE_NOTADB` or `SQLITE_CORRUPT`.
    /// A read-only store is migrated the same way (the copy is private) before `query_only` is set.
    public init(publishedPath: String?, workingPath: String, options: StoreOptions) throws(StoreError) {
        self.workingPath = workingPath
        self.options = options
        ManagedStore.limitHeap()
        let connection = try ManagedStore.makeWorkingCopy(from: publishedPath, at: workingPath, maximumLength: options.memoryLimit)
        self.connection = connection
        do throws(StoreError) {
            try migrate(connection)
            try ManagedStore.listKeyedTables(connection)
            if options.readOnly { try connection.run("PRAGMA query_only = ON") }
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Closes the working copy (checkpointing its WAL into it); undo history is dropped. Later
    /// calls throw `closed`; a second close does nothing.
    public func close() {
        connection?.close()
        connection = nil
        undoSteps = []
        redoSteps = []
    }

    /// Whether there is a step to undo.
    public var canUndo: Bool { !undoSteps.isEmpty }
    /// Whether there is an undone step to redo.
    public var canRedo: Bool { !redoSteps.isEmpty }

    /// The open connection, or the `closed` error.
    func openConnection(_ statement: String? = nil) throws(StoreError) -> Connection {
        guard let connection, connection.handle != nil else {
            throw .refusal(.closed, "the store is closed", statement: statement)
        }
        return connection
    }

    /// Makes the working copy at `workingPath` from `publishedPath` (or empty) and opens it with
    /// the store's settings and authorizer.
    static func makeWorkingCopy(from publishedPath: String?, at workingPath: String, maximumLength: Int) throws(StoreError) -> Connection {
        // The working copy's files are removed first: never let that be the published store.
        if let publishedPath, try isSameFile(publishedPath, workingPath) {
            throw .refusal(.file, "the working copy's path \(workingPath) is the published store's")
        }
        try removeDatabaseFiles(at: workingPath)
        let connection = try Connection(path: workingPath, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        if let publishedPath, try fileExists(publishedPath) {
            let source = try Connection(path: publishedPath, flags: SQLITE_OPEN_READONLY)
            defer { source.close() }
            try copy(from: source, to: connection)
        }
        // Reading the schema finds a file that is not a database, or a damaged first page, now
        // rather than at the first request.
        _ = try connection.integer("SELECT count(*) FROM sqlite_schema")
        let mode = try connection.rows("PRAGMA journal_mode = WAL").first?.first
        guard mode == .text("wal") else {
            throw StoreError(code: SQLITE_ERROR, message: "the working copy could not use WAL (journal_mode is \(String(describing: mode)))", statement: "PRAGMA journal_mode = WAL")
        }
        try connection.run("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA trusted_schema = OFF")
        try connection.harden(maximumLength: maximumLength)
        return connection
    }

    /// Applies the migrations beyond `user_version`, each in its own transaction, stopping at the
    /// first that fails (rolled back, then thrown with its index).
    private func migrate(_ connection: Connection) throws(StoreError) {
        let version = Int(try connection.integer("PRAGMA user_version"))
        migratedFrom = version
        migratedTo = version
        guard version < options.migrations.count else { return }
        for index in (version + 1)...options.migrations.count {
            try connection.run("BEGIN IMMEDIATE")
            do throws(StoreError) {
                connection.arm(timeLimit: options.timeLimit, stop: nil)
                defer { connection.disarm() }
                try runStatements(options.migrations[index - 1], params: .none, on: connection, mode: .migration)
                try connection.run("PRAGMA user_version = \(index)")
                try connection.run("COMMIT")
            } catch {
                try? connection.run("ROLLBACK")
                var failure = error
                failure.migration = index
                throw failure
            }
            migratedTo = index
        }
    }

    /// SQLite's heap, for every store of the process, is held under a quarter of the machine's
    /// memory (`sqlite3_hard_heap_limit64`): past it a statement fails with `SQLITE_NOMEM` instead
    /// of the process running out. Set once, at the first store's open.
    static func limitHeap() {
        _ = heapLimit
    }

    private static let heapLimit: Int64 = {
        let pages = Int64(sysconf(Int32(_SC_PHYS_PAGES)))
        let size = Int64(sysconf(Int32(_SC_PAGESIZE)))
        let limit = pages > 0 && size > 0 ? pages * size / 4 : 1 << 30
        sqlite3_hard_heap_limit64(limit)
        return limit
    }()

    /// Lists the tables with a declared primary key and the views, for the authorizer.
    static func listKeyedTables(_ connection: Connection) throws(StoreError) {
        let rows = try connection.rows(
            """
            SELECT lower(m.name), m.type, (SELECT count(*) FROM pragma_table_info(m.name) WHERE pk > 0)
            FROM sqlite_schema AS m WHERE m.type IN ('table', 'view')
            """)
        var keyed: Set<String> = []
        var views: Set<String> = []
        for row in rows {
            guard case .text(let name) = row[0], case .text(let type) = row[1] else { continue }
            if type == "view" {
                views.insert(name)
            } else if case .integer(let keys) = row[2], keys > 0 {
                keyed.insert(name)
            }
        }
        connection.policy.tablesWithKeys = keyed
        connection.policy.views = views
    }
}
