import CSQLite
import Testing
import TestSupport

@testable import ManagedStore

/// SQLite's "Defense Against the Dark Arts", item by item, read back from the working copy's
/// connection (issue 34.1): what `Connection.harden(maximumLength:)` sets is in force.
@Suite struct ManagedStoreHardeningTests {
    /// The integer setting `option` of the connection (-1 leaves it as it is and reads it).
    private func setting(_ handle: OpaquePointer, _ option: Int32) -> Int32 {
        var now: Int32 = -2
        #expect(docsession_sqlite3_db_config_int(handle, option, -1, &now) == SQLITE_OK)
        return now
    }

    @Test func everySettingOfTheListIsInForce() throws {
        let directory = try TemporaryDirectory()
        let store = try ManagedStore(
            publishedPath: nil, workingPath: directory.file("work.sqlite"),
            options: StoreOptions(migrations: ["CREATE TABLE t(id INTEGER PRIMARY KEY, x)"], memoryLimit: 2 << 20))
        let handle = try #require(store.connection?.handle)
        #expect(setting(handle, SQLITE_DBCONFIG_DEFENSIVE) == 1)
        #expect(setting(handle, SQLITE_DBCONFIG_TRUSTED_SCHEMA) == 0)
        #expect(setting(handle, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER) == 0)
        #expect(setting(handle, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION) == 0)
        #expect(sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, -1) == 0)
        #expect(sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, -1) == 2 << 20)
        #expect(try store.connection?.integer("PRAGMA cell_size_check") == 1)
        #expect(try store.connection?.integer("PRAGMA trusted_schema") == 0)
        #expect(sqlite3_hard_heap_limit64(-1) > 0)
    }

    @Test func aStatementPastItsTimeLimitIsStoppedAndRolledBack() throws {
        let directory = try TemporaryDirectory()
        let store = try ManagedStore(
            publishedPath: nil, workingPath: directory.file("work.sqlite"),
            options: StoreOptions(migrations: ["CREATE TABLE t(id INTEGER PRIMARY KEY, x)"], timeLimit: 200))
        try store.execute("INSERT INTO t(x) VALUES (1)")
        let endless = "INSERT INTO t(x) SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c)"
        let error = storeError { try store.execute(endless) }
        #expect(error?.kind == .timeLimit)
        #expect(error?.code == SQLITE_INTERRUPT)
        #expect(try rows(store, "SELECT count(*) FROM t") == [[.integer(1)]])
        #expect(store.canUndo && store.changeCount == 1)
    }

    @Test func aStopAskedForEndsTheStatementAsCancelled() throws {
        let directory = try TemporaryDirectory()
        let store = try ManagedStore(
            publishedPath: nil, workingPath: directory.file("work.sqlite"),
            options: StoreOptions(migrations: ["CREATE TABLE t(id INTEGER PRIMARY KEY, x)"], timeLimit: 3_600_000))
        let error = storeError {
            _ = try store.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", stop: { true })
        }
        #expect(error?.kind == .cancelled)
        // The budget goes with the statement: the next one runs.
        #expect(try rows(store, "SELECT 1") == [[.integer(1)]])
    }
}
