import CSQLite

/// What the authorizer of a working copy's connection allows, and the first refusal it made
/// since it was last reset (SQLite answers only "not authorized"; the store words the reason).
final class AuthorizerPolicy {
    /// Whose statements are being prepared or run.
    enum Mode {
        /// The store's own statements (setup, BEGIN/COMMIT, the changeset's application,
        /// the schema's listing): everything is allowed.
        case `internal`
        /// A migration script: schema changes are allowed; other files, extensions, unsafe
        /// PRAGMAs and transaction statements are not.
        case migration
        /// A request's write (`execute`): data changes to tables with a declared primary key (or to
        /// views, whose triggers are checked in turn); no schema change.
        case write
        /// A request's read (`query`): as a write; the store also requires `sqlite3_stmt_readonly`.
        case read
    }

    /// The mode in force.
    var mode: Mode = .internal
    /// The tables of `main` with a declared PRIMARY KEY (lowercased): the ones the session
    /// extension records, so the only ones a request may write. Listed after the migrations and
    /// after a reload, the only times the schema changes.
    var tablesWithKeys: Set<String> = []
    /// The views of `main` (lowercased): writes to them run their INSTEAD OF triggers, whose own
    /// writes the authorizer checks.
    var views: Set<String> = []
    /// The first refusal since the last reset.
    var refusal: StoreError?
    /// Whether an action that changes a table or the schema was seen since the last reset: a
    /// statement that writes (not `sqlite3_stmt_readonly`) without one is a VACUUM, which 3.40.1
    /// prepares without calling the authorizer (`VACUUM INTO` shows its ATTACH only when it runs,
    /// and inside the store's transaction it fails before that, as an ordinary error).
    var sawChange = false

    /// Clears the refusal and the change seen, before a statement is prepared or run.
    func reset() {
        refusal = nil
        sawChange = false
    }

    /// PRAGMAs a request may run that take an argument naming a table or index, or a limit, and
    /// change nothing.
    static let inspectingPragmas: Set<String> = [
        "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
        "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    ]
    /// PRAGMAs a request may read but not set (no argument, no value).
    static let readOnlyPragmas: Set<String> = [
        "user_version", "schema_version", "data_version", "application_id", "page_count", "page_size",
        "freelist_count", "encoding", "foreign_keys",
    ]

    /// The functions a request or a migration may call: SQLite's built-in scalar, aggregate,
    /// window, date, math and JSON functions, and the full-text search's auxiliary functions, as
    /// 3.40.1 has them (`pragma_function_list`). Nothing that loads code, takes or answers a
    /// pointer, writes elsewhere or exists for debugging.
    static let allowedFunctions: Set<String> = [
        // Core scalar functions.
        "abs", "changes", "char", "coalesce", "format", "glob", "hex", "ifnull", "iif", "instr",
        "last_insert_rowid", "length", "like", "likelihood", "likely", "lower", "ltrim", "max", "min",
        "nullif", "printf", "quote", "random", "randomblob", "replace", "round", "rtrim", "sign",
        "soundex", "sqlite_compileoption_get", "sqlite_compileoption_used", "sqlite_source_id",
        "sqlite_version", "substr", "substring", "total_changes", "trim", "typeof", "unicode",
        "unlikely", "upper", "zeroblob", "subtype", "match",
        // Aggregates and window functions.
        "avg", "count", "group_concat", "sum", "total", "row_number", "rank", "dense_rank",
        "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value", "nth_value",
        // Dates and times.
        "date", "time", "datetime", "julianday", "unixepoch", "strftime", "current_date",
        "current_time", "current_timestamp",
        // Mathematics.
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos", "cosh",
        "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power", "radians",
        "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
        // JSON (with the -> and ->> operators).
        "json", "json_array", "json_array_length", "json_extract", "json_insert", "json_object",
        "json_patch", "json_quote", "json_remove", "json_replace", "json_set", "json_type", "json_valid",
        "json_group_array", "json_group_object", "->", "->>",
        // Full-text search's auxiliary functions.
        "snippet", "offsets", "matchinfo", "highlight", "bm25",
    ]

    /// The virtual table modules a migration may create tables of: full-text search and R*Trees.
    /// Refused among others: fts3tokenize, dbstat, sqlite_stmt and the eponymous ones.
    static let allowedModules: Set<String> = ["fts3", "fts4", "fts4aux", "fts5", "fts5vocab", "rtree", "rtree_i32"]

    /// The decision for one action: nil to allow it, or the refusal.
    func decide(action: Int32, _ first: String?, _ second: String?, database: String?) -> StoreError? {
        if mode == .internal { return nil }
        switch action {
        case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE, SQLITE_CREATE_INDEX, SQLITE_CREATE_TABLE,
            SQLITE_CREATE_TRIGGER, SQLITE_CREATE_VIEW, SQLITE_DROP_INDEX, SQLITE_DROP_TABLE, SQLITE_DROP_TRIGGER,
            SQLITE_DROP_VIEW, SQLITE_ALTER_TABLE, SQLITE_CREATE_VTABLE, SQLITE_DROP_VTABLE, SQLITE_REINDEX,
            SQLITE_ANALYZE:
            sawChange = true
        default: break
        }
        let name = first?.lowercased() ?? ""
        switch action {
        case SQLITE_ATTACH:
            // VACUUM INTO shows as the ATTACH of its target, when it runs (3.40.1 calls no
            // authorizer action for VACUUM at prepare time).
            return refuse(.refused, "ATTACH (and VACUUM INTO) would reach another file (\(first ?? ""))")
        case SQLITE_DETACH:
            return refuse(.refused, "DETACH is not allowed")
        case SQLITE_FUNCTION:
            // Only the functions on the list: SQLite's built-ins that compute a value from their
            // arguments. Refused among others: load_extension, fts3_tokenizer (its two-argument
            // form registers a C pointer the caller chooses, and the one-argument form leaks an
            // address), fts5 (a pointer API), sqlite_log, optimize, the rtree debugging functions.
            let function = second?.lowercased() ?? ""
            if AuthorizerPolicy.allowedFunctions.contains(function) { return nil }
            return refuse(.refused, "the function \(second ?? "") is not allowed: only SQLite's built-in functions that compute values are (protocol §13.6 lists them)")
        case SQLITE_CREATE_VTABLE:
            guard mode == .migration else { return schemaChange() }
            let module = second?.lowercased() ?? ""
            if AuthorizerPolicy.allowedModules.contains(module) { return nil }
            return refuse(.refused, "the virtual table module \(second ?? "") is not allowed: only \(AuthorizerPolicy.allowedModules.sorted().joined(separator: ", ")) are")
        case SQLITE_PRAGMA:
            if AuthorizerPolicy.inspectingPragmas.contains(name) { return nil }
            if AuthorizerPolicy.readOnlyPragmas.contains(name), second == nil { return nil }
            let shown = second.map { "\(name) = \($0)" } ?? name
            return refuse(.refused, "PRAGMA \(shown) is not allowed: only PRAGMAs that inspect the schema or read a setting are")
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT:
            return refuse(.refused, "BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: the store runs each request in one transaction of its own")
        case SQLITE_CREATE_INDEX, SQLITE_CREATE_TABLE, SQLITE_CREATE_TEMP_INDEX, SQLITE_CREATE_TEMP_TABLE,
            SQLITE_CREATE_TEMP_TRIGGER, SQLITE_CREATE_TEMP_VIEW, SQLITE_CREATE_TRIGGER, SQLITE_CREATE_VIEW,
            SQLITE_DROP_INDEX, SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_INDEX, SQLITE_DROP_TEMP_TABLE,
            SQLITE_DROP_TEMP_TRIGGER, SQLITE_DROP_TEMP_VIEW, SQLITE_DROP_TRIGGER, SQLITE_DROP_VIEW,
            SQLITE_ALTER_TABLE, SQLITE_DROP_VTABLE:
            return mode == .migration ? nil : schemaChange()
        case SQLITE_REINDEX, SQLITE_ANALYZE:
            return mode == .migration ? nil : refuse(.refused, "REINDEX and ANALYZE are not allowed outside the migrations")
        case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE:
            if mode == .migration { return nil }
            if name == "sqlite_master" || name == "sqlite_schema" || name == "sqlite_temp_master"
                || name == "sqlite_temp_schema" {
                return schemaChange()
            }
            guard database == nil || database == "main" else {
                return refuse(.refused, "writes go to the main database only (not \(database ?? ""))")
            }
            if tablesWithKeys.contains(name) || views.contains(name) { return nil }
            return refuse(
                .noPrimaryKey,
                "table \(first ?? "") has no declared PRIMARY KEY: the session extension does not record its changes, so they could not be undone"
            )
        default:
            // SELECT, READ, RECURSIVE, and the actions SQLite adds later: reading is allowed.
            return nil
        }
    }

    private func schemaChange() -> StoreError {
        refuse(.schemaChange, "schema changes go in storeOptions.migrations: the session extension does not record them, so they could not be undone")
    }

    /// Records `kind` and `message` as the refusal (the first one since the reset wins) and
    /// answers it.
    private func refuse(_ kind: StoreError.Kind, _ message: String) -> StoreError {
        let error = StoreError(code: SQLITE_AUTH, message: message, kind: kind)
        if refusal == nil { refusal = error }
        return error
    }
}

/// The authorizer callback (`sqlite3_set_authorizer`): asks the connection's policy.
let authorize: @convention(c) (
    UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
    UnsafePointer<CChar>?
) -> Int32 = { context, action, first, second, database, _ in
    guard let context else { return SQLITE_DENY }
    let policy = Unmanaged<AuthorizerPolicy>.fromOpaque(context).takeUnretainedValue()
    let refusal = policy.decide(
        action: action, first.map { String(cString: $0) }, second.map { String(cString: $0) },
        database: database.map { String(cString: $0) })
    return refusal == nil ? SQLITE_OK : SQLITE_DENY
}
