import CSQLite

/// A failure of the managed store: what SQLite answered (its extended result code, the code's
/// name and its message), or a refusal of the store's policy, with the statement and, for a
/// migration, the script's index.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is; the server maps it to its wire error.
    public enum Kind: String, Sendable, Equatable {
        /// SQLite failed the statement (a constraint, a busy database, a corrupt file...): see
        /// `code` and `codeName`.
        case sqlite
        /// The store's policy refused the statement (the authorizer: ATTACH, load_extension, an
        /// unsafe PRAGMA, a transaction statement, a statement that writes in a read).
        case refused
        /// A schema change (CREATE, DROP, ALTER) outside the migrations: the session extension does
        /// not record them, so they could not be undone.
        case schemaChange
        /// A write to a table without a declared PRIMARY KEY, which the session extension ignores
        /// (so the write could not be undone); `message` names the table.
        case noPrimaryKey
        /// A write to a store opened read-only.
        case readOnly
        /// Undo with nothing to undo, or redo with nothing to redo.
        case nothingToUndo
        /// A call on a store already closed.
        case closed
        /// A file call around the store failed (removing a stale working copy, checking a published
        /// file); `message` names the call, the path and the errno.
        case file
        /// A published file that is not what publishing promises (its header says WAL, a journal
        /// file was left beside it).
        case publish
        /// A statement ran past `StoreOptions.timeLimit` and was stopped (rolled back).
        case timeLimit
        /// A value or an answer would take more than `StoreOptions.memoryLimit`.
        case memoryLimit
        /// The request of the statement was cancelled (or its client went) while it ran; stopped
        /// and rolled back.
        case cancelled
    }

    /// SQLite's extended result code (`sqlite3_extended_errcode`), such as 2067 for
    /// `SQLITE_CONSTRAINT_UNIQUE`; `SQLITE_AUTH` (23) for a refusal of the authorizer, and
    /// `SQLITE_MISUSE` (21) for other refusals the store makes itself.
    public var code: Int32
    /// The code's name, such as `SQLITE_CONSTRAINT_UNIQUE` (from a table of the extended codes;
    /// `SQLITE_<number>` for one not in it).
    public var codeName: String
    /// SQLite's message (`sqlite3_errmsg`), or the store's sentence for a refusal.
    public var message: String
    /// The text of the statement that failed, when one did.
    public var statement: String?
    /// The 1-based index of the failing migration script in `StoreOptions.migrations`, when a
    /// migration failed.
    public var migration: Int?
    /// What kind of failure this is.
    public var kind: Kind

    /// An error with every field given.
    public init(
        code: Int32, message: String, statement: String? = nil, migration: Int? = nil, kind: Kind = .sqlite
    ) {
        self.code = code
        self.codeName = StoreError.name(ofCode: code)
        self.message = message
        self.statement = statement
        self.migration = migration
        self.kind = kind
    }

    /// A refusal of the store's own (not SQLite's), worded by `message`.
    static func refusal(_ kind: Kind, _ message: String, statement: String? = nil) -> StoreError {
        StoreError(code: kind == .readOnly ? SQLITE_READONLY : SQLITE_MISUSE, message: message, statement: statement, kind: kind)
    }

    public var description: String {
        var text = "\(codeName) (\(code)): \(message)"
        if let migration { text += " [migration \(migration)]" }
        if let statement { text += " in: \(statement)" }
        return text
    }

    /// The name of SQLite's result code `code`: an extended code's when it has one in the table,
    /// else its primary code's with the number (`SQLITE_IOERR(7434)`), else `SQLITE_<number>`.
    public static func name(ofCode code: Int32) -> String {
        if let name = codeNames[code] { return name }
        if let primary = codeNames[code & 0xFF] { return "\(primary)(\(code))" }
        return "SQLITE_\(code)"
    }

    /// The result codes by name (sqlite3.h of 3.40.1): the primary codes and the extended ones a
    /// store's caller can meet. `sqlite3_errstr` answers a sentence, not a name, hence the table.
    private static let codeNames: [Int32: String] = [
        0: "SQLITE_OK", 1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT",
        5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY",
        9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND",
        13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL", 16: "SQLITE_EMPTY",
        17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH",
        21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 24: "SQLITE_FORMAT",
        25: "SQLITE_RANGE", 26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE", 28: "SQLITE_WARNING",
        100: "SQLITE_ROW", 101: "SQLITE_DONE",
        // Extended codes: (primary | n << 8).
        257: "SQLITE_ERROR_MISSING_COLLSEQ", 513: "SQLITE_ERROR_RETRY", 769: "SQLITE_ERROR_SNAPSHOT",
        266: "SQLITE_IOERR_READ", 522: "SQLITE_IOERR_SHORT_READ", 778: "SQLITE_IOERR_WRITE",
        1034: "SQLITE_IOERR_FSYNC", 1290: "SQLITE_IOERR_DIR_FSYNC", 1546: "SQLITE_IOERR_TRUNCATE",
        1802: "SQLITE_IOERR_FSTAT", 2058: "SQLITE_IOERR_UNLOCK", 2314: "SQLITE_IOERR_RDLOCK",
        2570: "SQLITE_IOERR_DELETE", 3082: "SQLITE_IOERR_NOMEM", 3338: "SQLITE_IOERR_ACCESS",
        3594: "SQLITE_IOERR_CHECKRESERVEDLOCK", 3850: "SQLITE_IOERR_LOCK", 4106: "SQLITE_IOERR_CLOSE",
        4618: "SQLITE_IOERR_SHMOPEN", 4874: "SQLITE_IOERR_SHMSIZE", 5386: "SQLITE_IOERR_SHMMAP",
        5642: "SQLITE_IOERR_SEEK", 5898: "SQLITE_IOERR_DELETE_NOENT", 6154: "SQLITE_IOERR_MMAP",
        6410: "SQLITE_IOERR_GETTEMPPATH",
        6666: "SQLITE_IOERR_CONVPATH", 8202: "SQLITE_IOERR_DATA", 8458: "SQLITE_IOERR_CORRUPTFS",
        262: "SQLITE_LOCKED_SHAREDCACHE", 518: "SQLITE_LOCKED_VTAB",
        261: "SQLITE_BUSY_RECOVERY", 517: "SQLITE_BUSY_SNAPSHOT", 773: "SQLITE_BUSY_TIMEOUT",
        270: "SQLITE_CANTOPEN_NOTEMPDIR", 526: "SQLITE_CANTOPEN_ISDIR", 782: "SQLITE_CANTOPEN_FULLPATH",
        1038: "SQLITE_CANTOPEN_CONVPATH", 1550: "SQLITE_CANTOPEN_SYMLINK",
        267: "SQLITE_CORRUPT_VTAB", 523: "SQLITE_CORRUPT_SEQUENCE", 779: "SQLITE_CORRUPT_INDEX",
        264: "SQLITE_READONLY_RECOVERY", 520: "SQLITE_READONLY_CANTLOCK", 776: "SQLITE_READONLY_ROLLBACK",
        1032: "SQLITE_READONLY_DBMOVED", 1288: "SQLITE_READONLY_CANTINIT", 1544: "SQLITE_READONLY_DIRECTORY",
        516: "SQLITE_ABORT_ROLLBACK",
        275: "SQLITE_CONSTRAINT_CHECK", 531: "SQLITE_CONSTRAINT_COMMITHOOK",
        787: "SQLITE_CONSTRAINT_FOREIGNKEY", 1043: "SQLITE_CONSTRAINT_FUNCTION",
        1299: "SQLITE_CONSTRAINT_NOTNULL", 1555: "SQLITE_CONSTRAINT_PRIMARYKEY",
        1811: "SQLITE_CONSTRAINT_TRIGGER", 2067: "SQLITE_CONSTRAINT_UNIQUE", 2323: "SQLITE_CONSTRAINT_VTAB",
        2579: "SQLITE_CONSTRAINT_ROWID", 2835: "SQLITE_CONSTRAINT_PINNED", 3091: "SQLITE_CONSTRAINT_DATATYPE",
        283: "SQLITE_NOTICE_RECOVER_WAL", 539: "SQLITE_NOTICE_RECOVER_ROLLBACK", 284: "SQLITE_WARNING_AUTOINDEX",
        279: "SQLITE_AUTH_USER",
    ]
}
