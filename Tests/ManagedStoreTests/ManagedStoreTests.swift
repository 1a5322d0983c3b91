import CSQLite
import Foundation
import SystemCalls
import Testing
import TestSupport

@testable import ManagedStore

/// The schema most tests use: people with a unique name, notes that belong to them.
let peopleMigrations = [
    "CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, height REAL, photo BLOB)",
    "CREATE TABLE note(id INTEGER PRIMARY KEY, person INTEGER REFERENCES person(id) ON DELETE CASCADE, body TEXT)",
    "ALTER TABLE person ADD COLUMN nickname TEXT; CREATE INDEX note_person ON note(person)",
]

/// A store opened in `directory` from `published` (nil: none), its working copy at `work.sqlite`.
func openStore(
    _ directory: TemporaryDirectory, published: String? = nil, migrations: [String] = peopleMigrations, readOnly: Bool = false
) throws -> ManagedStore {
    try ManagedStore(
        publishedPath: published, workingPath: directory.file("work.sqlite"),
        options: StoreOptions(migrations: migrations, readOnly: readOnly))
}

/// The rows of `sql`, for comparisons.
func rows(_ store: ManagedStore, _ sql: String) throws -> [[SQLValue]] { try store.query(sql).rows }

/// Runs `body`, which must throw a StoreError, and answers it.
func storeError(_ body: () throws -> Void) -> StoreError? {
    do {
        try body()
        return nil
    } catch let error as StoreError {
        return error
    } catch {
        return nil
    }
}

@Suite struct ManagedStoreMigrationTests {
    @Test func aNewStoreTakesEveryMigrationAndAReopenOnlyTheMissingOnes() throws {
        let directory = try TemporaryDirectory()
        let published = directory.file("published.sqlite")
        do {
            let store = try openStore(directory, migrations: Array(peopleMigrations.prefix(1)))
            #expect(store.migratedFrom == 0 && store.migratedTo == 1)
            try store.execute("INSERT INTO person(name) VALUES ('Ada')")
            try store.publish(to: published)
            store.close()
        }
        let store = try openStore(directory, published: published)
        #expect(store.migratedFrom == 1)
        #expect(store.migratedTo == 3)
        #expect(try rows(store, "PRAGMA user_version") == [[.integer(3)]])
        // The row written before the migrations is still there, with the column the third added.
        #expect(try rows(store, "SELECT name, nickname FROM person") == [[.text("Ada"), .null]])
        try store.publish(to: directory.file("again.sqlite"))
        store.close()
        let again = try openStore(directory, published: directory.file("again.sqlite"))
        #expect(again.migratedFrom == 3 && again.migratedTo == 3)
    }

    @Test func aFailingMigrationRollsBackAndNamesItsIndexCodeMessageAndStatement() throws {
        let directory = try TemporaryDirectory()
        let published = directory.file("published.sqlite")
        let first = try openStore(directory, migrations: Array(peopleMigrations.prefix(1)))
        try first.execute("INSERT INTO person(name) VALUES ('Ada')")
        try first.publish(to: published)
        first.close()
        let failing = peopleMigrations.prefix(1) + [
            "CREATE TABLE extra(id INTEGER PRIMARY KEY); INSERT INTO person(name) VALUES ('Ada')"
        ]
        let error = storeError { _ = try openStore(directory, published: published, migrations: Array(failing)) }
        #expect(error?.migration == 2)
        #expect(error?.codeName == "SQLITE_CONSTRAINT_UNIQUE")
        #expect(error?.message.contains("UNIQUE constraint failed: person.name") == true)
        #expect(error?.statement == "INSERT INTO person(name) VALUES ('Ada')")
        // The working copy is as it was: version 1, no table `extra`, one person.
        let working = try Connection(path: directory.file("work.sqlite"), flags: SQLITE_OPEN_READWRITE)
        #expect(try working.integer("PRAGMA user_version") == 1)
        #expect(try working.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'extra'") == 0)
        #expect(try working.integer("SELECT count(*) FROM person") == 1)
        working.close()
        // So is the published store.
        let store = try openStore(directory, published: published, migrations: Array(peopleMigrations.prefix(1)))
        #expect(try rows(store, "PRAGMA user_version") == [[.integer(1)]])
        #expect(try rows(store, "SELECT count(*) FROM sqlite_schema WHERE name = 'extra'") == [[.integer(0)]])
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
    }

    @Test func aDatabaseWithADamagedSchemaPageIsRefusedAsCorrupt() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let published = directory.file("published.sqlite")
        try store.publish(to: published)
        store.close()
        // Page 1 holds the header (100 bytes) and then the schema table's b-tree page: garble it.
        var bytes = try directory.contents("published.sqlite")
        for index in 100..<400 { bytes[index] = 0xA5 }
        try directory.write("published.sqlite", bytes)
        let error = storeError { _ = try openStore(directory, published: published) }
        #expect(error?.codeName.hasPrefix("SQLITE_CORRUPT") == true, "\(String(describing: error))")
    }

    @Test func arraysAndDictionariesOfValuesAreParameters() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let positional: [SQLValue] = [.text("Ada")]
        let named: [String: SQLValue] = ["id": .integer(1)]
        try store.execute("INSERT INTO person(name) VALUES (?)", params: positional)
        #expect(try store.query("SELECT name FROM person WHERE id = :id", params: named).rows == [[.text("Ada")]])
    }

    @Test func theWorkingCopyMayNotBeThePublishedStore() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let published = directory.file("published.sqlite")
        try store.publish(to: published)
        store.close()
        let link = directory.file("link.sqlite")
        try FileManager.default.linkItem(atPath: published, toPath: link)
        for working in [published, link] {
            let error = storeError {
                _ = try ManagedStore(publishedPath: published, workingPath: working, options: StoreOptions())
            }
            #expect(error?.kind == .file)
        }
        #expect(FileManager.default.fileExists(atPath: published))
    }

    @Test func aFileThatIsNotADatabaseIsRefusedWithNotADB() throws {
        let directory = try TemporaryDirectory()
        let published = try directory.write("published.sqlite", String(repeating: "not a database ", count: 100))
        let error = storeError { _ = try openStore(directory, published: published) }
        #expect(error?.codeName == "SQLITE_NOTADB")
    }
}

@Suite struct ManagedStoreStatementTests {
    @Test func valuesComeBackTypedWithPositionalAndNamedParameters() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let inserted = try store.execute(
            "INSERT INTO person(name, height, photo, nickname) VALUES (?, ?, ?, ?)",
            params: [.text("Ada"), .real(1.65), .blob([0, 1, 255]), .null])
        #expect(inserted == ExecuteResult(rowsChanged: 1, lastInsertRowID: 1, changed: true))
        try store.execute(
            "INSERT INTO person(name, height, photo) VALUES (:name, @height, $photo)",
            params: ["name": .text("Grace"), "@height": .integer(2), "photo": .blob([])])
        try store.execute("INSERT INTO person(name) VALUES (?2); INSERT INTO person(name) VALUES (?1)",
                          params: [.text("Edsger"), .text("Barbara"), .text("Alan")])
        let result = try store.query("SELECT id, name, height, photo, nickname FROM person WHERE id <= ? ORDER BY id", params: [.integer(2)])
        #expect(result.columns == ["id", "name", "height", "photo", "nickname"])
        #expect(result.rows == [
            [.integer(1), .text("Ada"), .real(1.65), .blob([0, 1, 255]), .null],
            // height has REAL affinity: the integer 2 is stored as 2.0.
            [.integer(2), .text("Grace"), .real(2), .blob([]), .null],
        ])
        #expect(try store.query("SELECT typeof(?), ?", params: [.integer(2), .text("é")]).rows == [[.text("integer"), .text("é")]])
        // Positional values are consumed in order across statements: ?2 of the first took
        // "Barbara", ?1 of the second "Alan".
        #expect(try rows(store, "SELECT name FROM person WHERE id > 2 ORDER BY id") == [[.text("Barbara")], [.text("Alan")]])
    }

    @Test func missingAndUnusedParametersAreRefused() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        #expect(storeError { try store.execute("INSERT INTO person(name) VALUES (?)") }?.kind == .refused)
        #expect(storeError { try store.execute("INSERT INTO person(name) VALUES (:name)", params: ["nmae": .text("x")]) }?.kind == .refused)
        #expect(storeError { try store.execute("INSERT INTO person(name) VALUES (?)", params: [.text("a"), .text("b")]) }?.kind == .refused)
        #expect(try rows(store, "SELECT count(*) FROM person") == [[.integer(0)]])
        #expect(!store.canUndo)
    }

    @Test func aUniqueViolationChangesNothingAndLeavesTheUndoStack() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(name) VALUES ('Ada')")
        let error = storeError { try store.execute("INSERT INTO person(name) VALUES ('Ada')") }
        #expect(error?.codeName == "SQLITE_CONSTRAINT_UNIQUE")
        #expect(error?.code == 2067)
        #expect(error?.kind == .sqlite)
        #expect(error?.statement == "INSERT INTO person(name) VALUES ('Ada')")
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
        #expect(store.undoSteps.count == 1)
        #expect(!store.canRedo)
    }

    @Test func whenTheSecondStatementFailsTheFirstIsRolledBack() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(name) VALUES ('Ada')")
        let error = storeError {
            try store.execute("UPDATE person SET name = 'Grace'; INSERT INTO person(name) VALUES (NULL)")
        }
        #expect(error?.codeName == "SQLITE_CONSTRAINT_NOTNULL")
        #expect(error?.statement == "INSERT INTO person(name) VALUES (NULL)")
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
        #expect(store.undoSteps.count == 1)
    }

    @Test func aWriteThatChangesNothingIsNoUndoStep() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let result = try store.execute("DELETE FROM person WHERE id = 42")
        #expect(result.changed == false && result.rowsChanged == 0)
        #expect(!store.canUndo)
    }

    @Test func aQueryThatWritesOrHoldsTwoStatementsIsRefused() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        #expect(storeError { _ = try store.query("INSERT INTO person(name) VALUES ('x')") }?.kind == .refused)
        #expect(storeError { _ = try store.query("SELECT 1; SELECT 2") }?.kind == .refused)
        #expect(try store.query("SELECT 1 -- a comment\n").rows == [[.integer(1)]])
        #expect(try rows(store, "PRAGMA table_info(person)").count == 5)
    }
}

@Suite struct ManagedStoreUndoTests {
    @Test func insertUpdateAndDeleteUndoAndRedo() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let all = "SELECT id, name, height FROM person ORDER BY id"
        let empty: [[SQLValue]] = []
        let inserted: [[SQLValue]] = [[.integer(1), .text("Ada"), .real(1.5)], [.integer(2), .text("Alan"), .null]]
        let updated: [[SQLValue]] = [[.integer(1), .text("Ada"), .real(1.75)], [.integer(2), .text("Alan"), .null]]
        let deleted: [[SQLValue]] = [[.integer(2), .text("Alan"), .null]]

        try store.execute("INSERT INTO person(name, height) VALUES ('Ada', 1.5), ('Alan', NULL)")
        try store.execute("UPDATE person SET height = 1.75 WHERE name = 'Ada'")
        try store.execute("DELETE FROM person WHERE id = 1")
        #expect(try rows(store, all) == deleted)

        try store.undo()
        #expect(try rows(store, all) == updated)
        try store.undo()
        #expect(try rows(store, all) == inserted)
        try store.undo()
        #expect(try rows(store, all) == empty)
        #expect(!store.canUndo && store.canRedo)
        #expect(storeError { try store.undo() }?.kind == .nothingToUndo)

        try store.redo()
        #expect(try rows(store, all) == inserted)
        try store.redo()
        #expect(try rows(store, all) == updated)
        try store.redo()
        #expect(try rows(store, all) == deleted)
        #expect(store.canUndo && !store.canRedo)

        // A new change after an undo clears what could be redone.
        try store.undo()
        try store.execute("INSERT INTO person(name) VALUES ('Grace')")
        #expect(!store.canRedo)
    }

    @Test func anUndoThatMeetsAConflictChangesNothingAndKeepsTheStep() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(id, name) VALUES (1, 'Ada')")
        try store.execute("UPDATE person SET name = 'Ada Lovelace' WHERE id = 1")
        // Another connection changes the row behind the store's back (nothing in the server does).
        let other = try Connection(path: directory.file("work.sqlite"), flags: SQLITE_OPEN_READWRITE)
        try other.run("UPDATE person SET name = 'Someone else' WHERE id = 1")
        other.close()
        let error = storeError { try store.undo() }
        #expect(error?.codeName == "SQLITE_ABORT")
        #expect(error?.message.contains("conflict") == true)
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Someone else")]])
        #expect(store.undoSteps.count == 2 && !store.canRedo)
    }

    @Test func undoOfADeleteBringsBackTheRowsItsCascadeDeleted() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(id, name) VALUES (1, 'Ada'); INSERT INTO note(person, body) VALUES (1, 'engine')")
        try store.execute("DELETE FROM person WHERE id = 1")
        #expect(try rows(store, "SELECT count(*) FROM note") == [[.integer(0)]])
        try store.undo()
        #expect(try rows(store, "SELECT body FROM note") == [[.text("engine")]])
    }
}

@Suite struct ManagedStorePolicyTests {
    @Test func hostileStatementsAreRefusedAndChangeNothing() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(name) VALUES ('Ada')")
        let target = directory.file("vacuumed.sqlite")
        let cases: [(String, StoreError.Kind)] = [
            ("ATTACH 'x' AS y", .refused),
            ("SELECT load_extension('x')", .refused),
            ("VACUUM INTO '\(target)'", .refused),
            ("PRAGMA writable_schema = 1", .refused),
            ("PRAGMA journal_mode = DELETE", .refused),
            ("PRAGMA user_version = 7", .refused),
            ("CREATE TABLE t(a)", .schemaChange),
            ("DROP TABLE note", .schemaChange),
            ("ALTER TABLE person ADD COLUMN x", .schemaChange),
            ("CREATE TEMP TABLE t(a)", .schemaChange),
            ("BEGIN", .refused),
            ("COMMIT", .refused),
            ("SAVEPOINT s", .refused),
            ("INSERT INTO person(name) VALUES ('Grace'); DETACH y", .refused),
        ]
        for (sql, kind) in cases {
            let error = storeError { try store.execute(sql) }
            #expect(error?.kind == kind, "\(sql): \(String(describing: error))")
            #expect(error?.statement != nil, "\(sql)")
        }
        #expect(storeError { _ = try store.query("SELECT load_extension('x')") }?.kind == .refused)
        #expect(storeError { _ = try store.query("ATTACH 'x' AS y") }?.kind == .refused)
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
        #expect(try rows(store, "PRAGMA user_version") == [[.integer(3)]])
        #expect(store.undoSteps.count == 1)
        let schema = storeError { try store.execute("CREATE TABLE t(a)") }
        #expect(schema?.message.contains("storeOptions.migrations") == true)
    }

    @Test func writesToATableWithoutAPrimaryKeyAreRefusedNamingIt() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory, migrations: ["CREATE TABLE loose(a, b)", "CREATE TABLE keyed(k TEXT PRIMARY KEY, v) WITHOUT ROWID"])
        let error = storeError { try store.execute("INSERT INTO loose VALUES (1, 2)") }
        #expect(error?.kind == .noPrimaryKey)
        #expect(error?.message.contains("loose") == true)
        #expect(try rows(store, "SELECT count(*) FROM loose") == [[.integer(0)]])
        try store.execute("INSERT INTO keyed VALUES ('a', 1)")
        try store.undo()
        #expect(try rows(store, "SELECT count(*) FROM keyed") == [[.integer(0)]])
    }

    @Test func aReadOnlyStoreAnswersReadsAndRefusesWrites() throws {
        let directory = try TemporaryDirectory()
        let published = directory.file("published.sqlite")
        let writer = try openStore(directory)
        try writer.execute("INSERT INTO person(name) VALUES ('Ada')")
        try writer.publish(to: published)
        writer.close()
        let reader = try ManagedStore(
            publishedPath: published, workingPath: directory.file("reader.sqlite"),
            options: StoreOptions(migrations: peopleMigrations, readOnly: true))
        #expect(try rows(reader, "SELECT name FROM person") == [[.text("Ada")]])
        #expect(storeError { try reader.execute("DELETE FROM person") }?.kind == .readOnly)
        #expect(try rows(reader, "SELECT count(*) FROM person") == [[.integer(1)]])
    }
}

@Suite struct ManagedStorePublishingTests {
    @Test func aPublishedCopyIsARollbackJournalDatabaseAloneWithTheSameRows() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(name, photo) VALUES ('Ada', x'00ff'), ('Alan', NULL)")
        let published = directory.file("published.sqlite")
        try store.publish(to: published)
        let header = try directory.contents("published.sqlite")
        #expect(header[18] == 1 && header[19] == 1)
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: published + suffix), "\(suffix)")
        }
        // A second publish to the same path is refused: the caller stages a new one.
        #expect(storeError { try store.publish(to: published) }?.kind == .publish)
        let copy = try ManagedStore(publishedPath: published, workingPath: directory.file("copy.sqlite"), options: StoreOptions(migrations: peopleMigrations))
        #expect(try rows(copy, "SELECT name, photo FROM person ORDER BY id") == rows(store, "SELECT name, photo FROM person ORDER BY id"))
        #expect(copy.migratedFrom == 3)
    }

    @Test func reloadReplacesTheWorkingCopyAndDropsUndo() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.execute("INSERT INTO person(name) VALUES ('Ada')")
        let published = directory.file("published.sqlite")
        try store.publish(to: published)
        try store.execute("INSERT INTO person(name) VALUES ('Alan')")
        #expect(store.canUndo)
        try store.reload(fromPublished: published)
        #expect(!store.canUndo && !store.canRedo)
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
        try store.execute("INSERT INTO person(name) VALUES ('Grace')")
        try store.undo()
        #expect(try rows(store, "SELECT name FROM person") == [[.text("Ada")]])
    }

    @Test func aClosedStoreRefusesCalls() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        store.close()
        #expect(storeError { _ = try store.query("SELECT 1") }?.kind == .closed)
        #expect(storeError { try store.execute("DELETE FROM person") }?.kind == .closed)
    }
}

/// The cost of `publish()` on a 100,000-row table against the floor, a plain backup into a new
/// file (SQLite's defaults there: rollback journal, `synchronous=FULL`) followed by `fsync`. Enabled only with `DOCSESSION_MEASURE=1`: it writes some 10 MB several
/// times and its figures mean something only on a quiet machine, so it is not part of the suite's
/// checks (it checks nothing but that both copies are made).
@Suite struct PublishMeasurement {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DOCSESSION_MEASURE"] == "1", "a measurement, run with DOCSESSION_MEASURE=1"))
    func publishAgainstAPlainBackup() throws {
        let directory = try TemporaryDirectory()
        let store = try ManagedStore(
            publishedPath: nil, workingPath: directory.file("work.sqlite"),
            options: StoreOptions(migrations: ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n REAL)"]))
        try store.execute(
            """
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100000)
            INSERT INTO t(name, n) SELECT printf('%048d', i), i * 0.5 FROM c
            """)
        let clock = ContinuousClock()
        func flush(_ path: String) throws {
            let file = try Descriptor.open(path, .readOnly)
            try file.sync(path: path)
        }
        var published: [Duration] = []
        var publishedFlushed: [Duration] = []
        var plain: [Duration] = []
        for round in 0..<5 {
            let target = directory.file("published-\(round).sqlite")
            let start = clock.now
            try store.publish(to: target)
            published.append(clock.now - start)
            try flush(target)
            publishedFlushed.append(clock.now - start)

            let copyPath = directory.file("plain-\(round).sqlite")
            let plainStart = clock.now
            let destination = try Connection(path: copyPath, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            try ManagedStore.copy(from: store.connection!, to: destination)
            destination.close()
            try flush(copyPath)
            plain.append(clock.now - plainStart)
        }
        let size = try fileStatus(directory.file("published-0.sqlite")).st_size
        func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
        print("publish of 100,000 rows (\(size) bytes): median \(median(published)), with the caller's fsync \(median(publishedFlushed)); plain backup + fsync: median \(median(plain)); all: \(published) / \(publishedFlushed) / \(plain)")
    }
}
