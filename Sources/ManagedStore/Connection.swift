import CSQLite

/// SQLite's `SQLITE_TRANSIENT`: bind copies the bytes (the macro is a cast, which Swift does not
/// import).
let transientDestructor = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

/// One SQLite connection the store owns, closed once by `close()` (or at deinit), with its
/// authorizer's policy.
final class Connection {
    /// The handle; nil once closed.
    private(set) var handle: OpaquePointer?
    /// The path opened, for messages.
    let path: String
    /// What the authorizer allows; the connection's authorizer reads it through an unretained
    /// pointer, valid because the policy lives as long as the connection and the authorizer is
    /// removed (by closing) before the policy goes.
    let policy = AuthorizerPolicy()

    /// Opens `path` with `flags` (`SQLITE_OPEN_*`); extended result codes on. On a failure the
    /// handle SQLite made anyway is closed and the error names the path.
    init(path: String, flags: Int32) throws(StoreError) {
        self.path = path
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            let extended = opened.map { sqlite3_extended_errcode($0) } ?? code
            sqlite3_close_v2(opened)
            throw StoreError(code: extended, message: "\(message) (opening \(path))")
        }
        handle = opened
        sqlite3_extended_result_codes(opened, 1)
    }

    deinit { close() }

    /// Closes the connection (`sqlite3_close_v2`: statements left are finalised by SQLite when they
    /// go); a second call does nothing.
    func close() {
        guard let handle else { return }
        sqlite3_set_authorizer(handle, nil, nil)
        sqlite3_close_v2(handle)
        self.handle = nil
    }

    /// Installs the authorizer, the hardening of SQLite's "Defense Against the Dark Arts" that a
    /// connection can take, and the limits that keep statements inside this file and the budget:
    /// - no database may be attached (`SQLITE_LIMIT_ATTACHED` 0, beneath the authorizer's refusal
    ///   of ATTACH, which also catches `VACUUM INTO`'s attach of its target at run time);
    /// - `SQLITE_DBCONFIG_DEFENSIVE` on (no writes to the schema table or `sqlite_dbpage`, no
    ///   `PRAGMA writable_schema`, no `journal_mode=OFF`), `SQLITE_DBCONFIG_TRUSTED_SCHEMA` off
    ///   (functions in the schema's views, triggers and defaults must be innocuous),
    ///   `SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER` off (Debian builds it on: `fts3_tokenizer(name,
    ///   pointer)` would register a C pointer), extension loading off;
    /// - `PRAGMA cell_size_check` on (a damaged or hostile file is found, not followed);
    /// - `SQLITE_LIMIT_LENGTH` at `maximumLength` (no string or blob longer: `SQLITE_TOOBIG`);
    /// - the progress handler, which stops a statement past its budget (``arm(timeLimit:stop:)``).
    /// Throws when SQLite refuses a setting (it never should: then the store does not open).
    func harden(maximumLength: Int) throws(StoreError) {
        guard let handle else { throw .refusal(.closed, "the store is closed") }
        let settings: [(Int32, Int32, String)] = [
            (SQLITE_DBCONFIG_DEFENSIVE, 1, "SQLITE_DBCONFIG_DEFENSIVE"),
            (SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "SQLITE_DBCONFIG_TRUSTED_SCHEMA"),
            (SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, "SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER"),
            (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, "SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION"),
        ]
        for (option, value, name) in settings {
            var now: Int32 = -1
            let code = docsession_sqlite3_db_config_int(handle, option, value, &now)
            guard code == SQLITE_OK, now == value else {
                throw StoreError(code: code == SQLITE_OK ? SQLITE_ERROR : code, message: "SQLite did not take \(name) = \(value) (it is \(now))")
            }
        }
        try run("PRAGMA cell_size_check = ON")
        sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, Int32(clamping: maximumLength))
        sqlite3_set_authorizer(handle, authorize, Unmanaged.passUnretained(policy).toOpaque())
        sqlite3_progress_handler(handle, StatementBudget.interval, checkBudget, Unmanaged.passUnretained(budget).toOpaque())
    }

    /// The budget of the statements running now; the progress handler reads it through an
    /// unretained pointer, valid as the policy's is.
    let budget = StatementBudget()

    /// Gives the statements run until ``disarm()`` `timeLimit` milliseconds from now, and stops
    /// them early when `stop` answers true (a cancelled request, a client gone).
    func arm(timeLimit: Int, stop: (@Sendable () -> Bool)?) {
        budget.deadline = .now + .milliseconds(max(0, timeLimit))
        budget.timeLimit = timeLimit
        budget.stop = stop
        budget.stopped = nil
    }

    /// Lifts the budget (the store's own statements run without one).
    func disarm() {
        budget.deadline = nil
        budget.stop = nil
    }

    /// The error SQLite reports for the last call on the connection: its extended code and message;
    /// a refusal recorded by the authorizer since its reset replaces SQLite's "not authorized"
    /// (`SQLITE_AUTH`, or `SQLITE_ERROR` for a function refused).
    func lastError(statement: String?) -> StoreError {
        if let stopped = budget.stopped, let handle, sqlite3_errcode(handle) == SQLITE_INTERRUPT {
            return budget.error(stopped, statement: statement)
        }
        if let handle, sqlite3_errcode(handle) == SQLITE_TOOBIG {
            return StoreError(
                code: SQLITE_TOOBIG,
                message: "a string or blob would be longer than storeOptions.memoryLimit (\(sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, -1)) bytes)",
                statement: statement, kind: .memoryLimit)
        }
        if let refusal = policy.refusal {
            var error = refusal
            error.statement = statement
            return error
        }
        guard let handle else { return .refusal(.closed, "the store is closed", statement: statement) }
        return StoreError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), statement: statement)
    }

    /// Runs `sql` (statements without parameters or rows of interest) in `mode`, for the store's
    /// own statements (setup, transactions). Throws the first failure.
    func run(_ sql: String, mode: AuthorizerPolicy.Mode = .internal) throws(StoreError) {
        guard let handle else { throw .refusal(.closed, "the store is closed", statement: sql) }
        let saved = policy.mode
        policy.mode = mode
        policy.reset()
        defer { policy.mode = saved }
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw lastError(statement: sql) }
    }

    /// The first column of the first row of `sql` as an integer (internal mode).
    func integer(_ sql: String) throws(StoreError) -> Int64 {
        try rows(sql).first?.first.flatMap { if case .integer(let value) = $0 { value } else { nil } } ?? 0
    }

    /// The rows of one statement `sql` without parameters (internal mode), typed.
    func rows(_ sql: String) throws(StoreError) -> [[SQLValue]] {
        guard let handle else { throw .refusal(.closed, "the store is closed", statement: sql) }
        let saved = policy.mode
        policy.mode = .internal
        policy.reset()
        defer { policy.mode = saved }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw lastError(statement: sql)
        }
        defer { sqlite3_finalize(statement) }
        var result: [[SQLValue]] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return result }
            guard code == SQLITE_ROW else { throw lastError(statement: sql) }
            result.append(Connection.row(of: statement))
        }
    }

    /// The current row of `statement`, each value typed by `sqlite3_column_type`.
    static func row(of statement: OpaquePointer) -> [SQLValue] {
        (0..<sqlite3_column_count(statement)).map { column in
            switch sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
            case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
            case SQLITE_TEXT:
                let count = Int(sqlite3_column_bytes(statement, column))
                guard let bytes = sqlite3_column_text(statement, column) else { return .text("") }
                return .text(String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self))
            case SQLITE_BLOB:
                let count = Int(sqlite3_column_bytes(statement, column))
                guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return .blob([]) }
                return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
            default: return .null
            }
        }
    }
}

/// What a connection's statements may spend: a deadline and a way to be stopped, read by the
/// progress handler every ``interval`` virtual machine instructions (a few microseconds).
final class StatementBudget {
    /// How many instructions between two looks at the budget.
    static let interval: Int32 = 1000
    /// Why the statement was stopped.
    enum Stop: Equatable {
        case timeLimit
        case cancelled
    }

    /// When a statement is stopped; nil: no deadline.
    var deadline: ContinuousClock.Instant?
    /// The limit the deadline came from, in milliseconds (for the error).
    var timeLimit = 0
    /// Answers true when the statement's request is no longer wanted.
    var stop: (@Sendable () -> Bool)?
    /// Set when the handler stopped a statement.
    var stopped: Stop?

    /// Whether the statement must stop now (recording why).
    func exceeded() -> Bool {
        if let stop, stop() {
            stopped = .cancelled
            return true
        }
        if let deadline, ContinuousClock.now >= deadline {
            stopped = .timeLimit
            return true
        }
        return false
    }

    /// The error of a statement stopped for `reason`.
    func error(_ reason: Stop, statement: String?) -> StoreError {
        switch reason {
        case .timeLimit:
            return StoreError(
                code: SQLITE_INTERRUPT,
                message: "the statement ran longer than storeOptions.timeLimit (\(timeLimit) ms) and was stopped; nothing changed",
                statement: statement, kind: .timeLimit)
        case .cancelled:
            return StoreError(code: SQLITE_INTERRUPT, message: "the request was cancelled; nothing changed", statement: statement, kind: .cancelled)
        }
    }
}

/// The progress handler (`sqlite3_progress_handler`): non-zero stops the statement with
/// `SQLITE_INTERRUPT`.
let checkBudget: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { context in
    guard let context else { return 0 }
    return Unmanaged<StatementBudget>.fromOpaque(context).takeUnretainedValue().exceeded() ? 1 : 0
}
