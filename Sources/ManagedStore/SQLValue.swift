/// One SQLite value, typed as SQLite stores it (its storage class).
public enum SQLValue: Sendable, Equatable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit signed integer.
    case integer(Int64)
    /// An IEEE 754 double.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes, stored as they are.
    case blob([UInt8])
}

extension SQLValue {
    /// What the value counts for against a query's `memoryLimit`: its bytes, and 16 more.
    var answerSize: Int {
        switch self {
        case .null, .integer, .real: return 16
        case .text(let text): return 16 + text.utf8.count
        case .blob(let bytes): return 16 + bytes.count
        }
    }
}

/// The parameters bound to a statement: none, by position (`?`, `?NNN`, 1-based), or by name
/// (`:name`, `@name`, `$name`; the key is the name without its prefix, or with it).
public enum SQLParams: Sendable, Equatable, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// No parameters: a statement with a parameter fails with a refusal naming it.
    case none
    /// Values bound in order: the first to `?1` (or the first `?`), and so on.
    case positional([SQLValue])
    /// Values bound by name.
    case named([String: SQLValue])

    /// Positional parameters written as an array literal.
    public init(arrayLiteral elements: SQLValue...) { self = .positional(elements) }

    /// Named parameters written as a dictionary literal.
    public init(dictionaryLiteral elements: (String, SQLValue)...) {
        self = .named(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

/// What a write answers.
public struct ExecuteResult: Sendable, Equatable {
    /// The rows inserted, updated or deleted by all the statements (`sqlite3_total_changes`
    /// before and after), triggers and foreign-key actions included.
    public var rowsChanged: Int
    /// The rowid of the last row inserted on the connection (`sqlite3_last_insert_rowid`); 0 if none
    /// ever was.
    public var lastInsertRowID: Int64
    /// Whether the write changed anything: its changeset is not empty, so it is an undo step.
    public var changed: Bool

    /// A result with the given values.
    public init(rowsChanged: Int, lastInsertRowID: Int64, changed: Bool) {
        self.rowsChanged = rowsChanged
        self.lastInsertRowID = lastInsertRowID
        self.changed = changed
    }
}

/// What a read answers: its column names and its rows, each value typed by
/// `sqlite3_column_type`.
public struct QueryResult: Sendable, Equatable {
    /// The result's column names (`sqlite3_column_name`), in order.
    public var columns: [String]
    /// The rows, each with one value per column.
    public var rows: [[SQLValue]]

    /// A result with the given columns and rows.
    public init(columns: [String], rows: [[SQLValue]]) {
        self.columns = columns
        self.rows = rows
    }
}
