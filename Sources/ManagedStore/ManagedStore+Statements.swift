import CSQLite

extension ManagedStore {
    /// Writes: runs the statements of `sql` (one or more, separated by `;`) in one transaction
    /// (`BEGIN IMMEDIATE` ... `COMMIT`) while a session records the changeset.
    ///
    /// Parameters are bound by position (`?`, `?NNN`; consumed in order across the statements: the
    /// second statement's first parameter takes the value after the first statement's last) or by
    /// name (`:name`, `@name`, `$name`; a key may be written with or without its prefix); a
    /// parameter without a value, or a value no statement uses, is refused. On any failure the
    /// transaction is rolled back, so a failed request changes nothing, and the error names the
    /// statement that failed. A change is one undo step (and clears the steps to redo); a request
    /// that changed nothing (an empty changeset) is not.
    ///
    /// Refused (kind and reason in the error, nothing changed): schema changes (`schemaChange`: they
    /// go in the migrations), writes to a table without a declared PRIMARY KEY (`noPrimaryKey`),
    /// ATTACH, DETACH, `VACUUM INTO`, `load_extension`, PRAGMAs that set anything, transaction
    /// statements (`refused`), and any write to a read-only store (`readOnly`).
    ///
    /// The statements run within `options.timeLimit` and stop early when `stop` answers true (it is
    /// asked every few microseconds, from the calling thread): then they are rolled back and the
    /// error's kind is `timeLimit` or `cancelled`.
    @discardableResult
    public func execute(_ sql: String, params: SQLParams = .none, stop: (@Sendable () -> Bool)? = nil) throws(StoreError) -> ExecuteResult {
        let connection = try openConnection(sql)
        guard !options.readOnly else { throw .refusal(.readOnly, "the store was opened read-only", statement: sql) }
        guard let handle = connection.handle else { throw .refusal(.closed, "the store is closed", statement: sql) }
        try connection.run("BEGIN IMMEDIATE")
        let changes: [UInt8]
        let before = sqlite3_total_changes64(handle)
        do throws(StoreError) {
            connection.arm(timeLimit: options.timeLimit, stop: stop)
            defer { connection.disarm() }
            changes = try ManagedStore.recordingChanges(on: connection) { () throws(StoreError) in
                try runStatements(sql, params: params, on: connection, mode: .write)
            }
            try connection.run("COMMIT")
        } catch {
            try? connection.run("ROLLBACK")
            throw error
        }
        let changed = !changes.isEmpty
        if changed {
            undoSteps.append(changes)
            redoSteps = []
            changeCount += 1
        }
        return ExecuteResult(
            rowsChanged: Int(sqlite3_total_changes64(handle) - before),
            lastInsertRowID: sqlite3_last_insert_rowid(handle), changed: changed)
    }

    /// Reads: runs one statement that writes nothing (`sqlite3_stmt_readonly`; else refused) and
    /// answers its column names and rows, each value typed by `sqlite3_column_type`. Parameters as
    /// for `execute`. Text after the statement other than blanks and comments is refused.
    ///
    /// Runs within `options.timeLimit` and stops early when `stop` answers true, as `execute`; an
    /// answer that would take more than `options.memoryLimit` (its values' bytes, 16 more for each
    /// value) is refused with `memoryLimit` once it grows past it, rather than held.
    public func query(_ sql: String, params: SQLParams = .none, stop: (@Sendable () -> Bool)? = nil) throws(StoreError) -> QueryResult {
        let connection = try openConnection(sql)
        guard let handle = connection.handle else { throw .refusal(.closed, "the store is closed", statement: sql) }
        connection.policy.mode = .read
        connection.policy.reset()
        defer { connection.policy.mode = .internal }
        let utf8 = Array(sql.utf8CString)
        return try utf8.withUnsafeBufferPointer { (buffer) throws(StoreError) -> QueryResult in
            var statement: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            guard sqlite3_prepare_v2(handle, buffer.baseAddress, Int32(buffer.count), &statement, &tail) == SQLITE_OK else {
                throw connection.lastError(statement: sql)
            }
            guard let statement else { throw .refusal(.refused, "the query holds no statement", statement: sql) }
            defer { sqlite3_finalize(statement) }
            if let tail, ManagedStore.holdsStatement(handle, tail) {
                throw .refusal(.refused, "a query is one statement; run several with execute", statement: sql)
            }
            guard sqlite3_stmt_readonly(statement) != 0 else {
                throw .refusal(.refused, "a query may not write; writes go through execute", statement: sql)
            }
            var binder = ParameterBinder(params)
            try binder.bind(statement, text: sql)
            try binder.checkAllUsed(text: sql)
            let columns = (0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) }
            var rows: [[SQLValue]] = []
            var size = 0
            connection.arm(timeLimit: options.timeLimit, stop: stop)
            defer { connection.disarm() }
            while true {
                let code = sqlite3_step(statement)
                if code == SQLITE_DONE { break }
                guard code == SQLITE_ROW else { throw connection.lastError(statement: sql) }
                let row = Connection.row(of: statement)
                size += row.reduce(0) { $0 + $1.answerSize }
                if size > options.memoryLimit {
                    throw StoreError(
                        code: SQLITE_TOOBIG,
                        message: "the answer would take more than storeOptions.memoryLimit (\(options.memoryLimit) bytes) after \(rows.count) rows; ask for fewer rows (LIMIT) or columns",
                        statement: sql, kind: .memoryLimit)
                }
                rows.append(row)
            }
            return QueryResult(columns: columns, rows: rows)
        }
    }

    /// `execute` with positional parameters held in an array.
    @discardableResult
    public func execute(_ sql: String, params: [SQLValue]) throws(StoreError) -> ExecuteResult {
        try execute(sql, params: SQLParams.positional(params))
    }

    /// `execute` with named parameters held in a dictionary.
    @discardableResult
    public func execute(_ sql: String, params: [String: SQLValue]) throws(StoreError) -> ExecuteResult {
        try execute(sql, params: SQLParams.named(params))
    }

    /// `query` with positional parameters held in an array.
    public func query(_ sql: String, params: [SQLValue]) throws(StoreError) -> QueryResult {
        try query(sql, params: SQLParams.positional(params))
    }

    /// `query` with named parameters held in a dictionary.
    public func query(_ sql: String, params: [String: SQLValue]) throws(StoreError) -> QueryResult {
        try query(sql, params: SQLParams.named(params))
    }

    /// Runs every statement of `sql` on `connection` in `mode`, binding `params`; throws the first
    /// failure, naming its statement. The caller owns the transaction.
    func runStatements(_ sql: String, params: SQLParams, on connection: Connection, mode: AuthorizerPolicy.Mode) throws(StoreError) {
        guard let handle = connection.handle else { throw .refusal(.closed, "the store is closed", statement: sql) }
        connection.policy.mode = mode
        defer { connection.policy.mode = .internal }
        var binder = ParameterBinder(params)
        let utf8 = Array(sql.utf8CString)
        try utf8.withUnsafeBufferPointer { (buffer) throws(StoreError) in
            guard let start = buffer.baseAddress else { return }
            let end = start + buffer.count - 1  // the terminating NUL
            var next: UnsafePointer<CChar> = start
            while next < end {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                connection.policy.reset()
                let code = sqlite3_prepare_v2(handle, next, Int32(end - next), &statement, &tail)
                guard code == SQLITE_OK else {
                    // The tail of a refused prepare points where parsing stopped, inside the
                    // statement: the error names the whole statement instead.
                    throw connection.lastError(statement: ManagedStore.wholeStatement(from: next, end: end))
                }
                defer { sqlite3_finalize(statement) }
                guard let statement else { break }  // only blanks and comments were left
                let text = String(cString: sqlite3_sql(statement)).trimmingBlanks()
                if sqlite3_stmt_readonly(statement) == 0, !connection.policy.sawChange {
                    throw .refusal(.refused, "VACUUM (and VACUUM INTO, which would write another file) is not allowed", statement: text)
                }
                try binder.bind(statement, text: text)
                while true {
                    connection.policy.refusal = nil
                    let step = sqlite3_step(statement)
                    if step == SQLITE_DONE { break }
                    guard step == SQLITE_ROW else { throw connection.lastError(statement: text) }
                }
                guard let tail else { break }
                next = tail
            }
        }
        try binder.checkAllUsed(text: sql)
    }

    /// The statement text from `start` to `stop` (for a statement that failed to prepare, whose
    /// tail SQLite may not set: then the rest of the text).
    static func text(from start: UnsafePointer<CChar>, to stop: UnsafePointer<CChar>, end: UnsafePointer<CChar>) -> String {
        let upper = stop > start ? stop : end
        let bytes = UnsafeRawBufferPointer(start: start, count: upper - start)
        return String(decoding: bytes, as: UTF8.self).trimmingBlanks()
    }

    /// The statement that starts at `start`: the shortest text up to a `;` that SQLite calls a
    /// complete statement (`sqlite3_complete`, which knows quotes and comments), else the rest.
    static func wholeStatement(from start: UnsafePointer<CChar>, end: UnsafePointer<CChar>) -> String {
        var bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(start).assumingMemoryBound(to: UInt8.self), count: end - start))
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ";") {
                var prefix = Array(bytes[...index])
                prefix.append(0)
                let complete = prefix.withUnsafeBufferPointer { buffer in
                    buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { sqlite3_complete($0) }
                }
                if complete != 0 {
                    bytes = Array(bytes[..<index])
                    break
                }
            }
            index += 1
        }
        return String(decoding: bytes, as: UTF8.self).trimmingBlanks()
    }

    /// Whether `tail` holds another statement (not only blanks and comments).
    static func holdsStatement(_ handle: OpaquePointer, _ tail: UnsafePointer<CChar>) -> Bool {
        // sqlite3_complete would accept comments only as incomplete; preparing is exact. Preparing
        // in `read` mode calls the authorizer, which is harmless: the statement is never run.
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, tail, -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        return code != SQLITE_OK || statement != nil
    }
}

extension String {
    /// The text without blanks at either end.
    func trimmingBlanks() -> String {
        let blanks: Set<Character> = [" ", "\n", "\t", "\r"]
        var text = Substring(self)
        while let first = text.first, blanks.contains(first) { text = text.dropFirst() }
        while let last = text.last, blanks.contains(last) { text = text.dropLast() }
        return String(text)
    }
}

/// Binds a request's parameters to its statements, one after the other, and checks that each value
/// was used.
struct ParameterBinder {
    private let params: SQLParams
    /// The positional values bound so far (the next statement's first parameter takes the next).
    private var positionalOffset = 0
    /// The names bound so far.
    private var namesUsed: Set<String> = []

    init(_ params: SQLParams) { self.params = params }

    /// Binds the parameters of `statement` (whose text is `text`, for errors).
    mutating func bind(_ statement: OpaquePointer, text: String) throws(StoreError) {
        let count = Int(sqlite3_bind_parameter_count(statement))
        guard count > 0 else { return }
        switch params {
        case .none:
            throw .refusal(.refused, "the statement has \(count) parameter(s) and none was given", statement: text)
        case .positional(let values):
            guard positionalOffset + count <= values.count else {
                throw .refusal(.refused, "the statements have more parameters than the \(values.count) given", statement: text)
            }
            for index in 1...count {
                try bindValue(values[positionalOffset + index - 1], to: statement, at: Int32(index), text: text)
            }
            positionalOffset += count
        case .named(let values):
            for index in 1...count {
                guard let raw = sqlite3_bind_parameter_name(statement, Int32(index)) else {
                    throw .refusal(.refused, "parameter \(index) has no name, but the parameters were given by name", statement: text)
                }
                let name = String(cString: raw)
                let bare = String(name.dropFirst())
                let key = values[name] != nil ? name : bare
                guard let value = values[key] else {
                    throw .refusal(.refused, "no value for parameter \(name)", statement: text)
                }
                namesUsed.insert(key)
                try bindValue(value, to: statement, at: Int32(index), text: text)
            }
        }
    }

    /// Refuses values that no statement used (a misspelt name, a value too many).
    func checkAllUsed(text: String) throws(StoreError) {
        switch params {
        case .none: return
        case .positional(let values):
            guard positionalOffset == values.count else {
                throw .refusal(.refused, "\(values.count) parameter(s) given but the statements use \(positionalOffset)", statement: text)
            }
        case .named(let values):
            let unused = Set(values.keys).subtracting(namesUsed)
            guard unused.isEmpty else {
                throw .refusal(.refused, "no statement has the parameter(s) \(unused.sorted().joined(separator: ", "))", statement: text)
            }
        }
    }

    private func bindValue(_ value: SQLValue, to statement: OpaquePointer, at index: Int32, text: String) throws(StoreError) {
        let code: Int32
        switch value {
        case .null: code = sqlite3_bind_null(statement, index)
        case .integer(let number): code = sqlite3_bind_int64(statement, index, number)
        case .real(let number): code = sqlite3_bind_double(statement, index, number)
        case .text(let string):
            code = sqlite3_bind_text64(statement, index, string, UInt64(string.utf8.count), transientDestructor, UInt8(SQLITE_UTF8))
        case .blob(let bytes):
            if bytes.isEmpty {
                // An empty blob stays a blob (a nil pointer would bind NULL).
                code = sqlite3_bind_zeroblob(statement, index, 0)
            } else {
                code = bytes.withUnsafeBytes { buffer in
                    sqlite3_bind_blob64(statement, index, buffer.baseAddress, UInt64(buffer.count), transientDestructor)
                }
            }
        }
        guard code == SQLITE_OK else {
            throw StoreError(code: code, message: "binding parameter \(index) failed", statement: text)
        }
    }
}
