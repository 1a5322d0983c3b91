import CSQLite
import Foundation
import SystemCalls
import Testing
import TestSupport

@testable import ManagedStore

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
