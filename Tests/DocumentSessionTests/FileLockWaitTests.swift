import Foundation
import Synchronization
import Testing

@testable import DocumentSession
@testable import FileStore

/// The descriptors of this process open on lock files under `directory`: the test's own locks and
/// those of the saves waiting for them (each keeps its lock file open while it waits).
private func openLockFiles(under directory: String) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return names.filter { name in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name))?.hasPrefix(directory + "/") == true
    }.count
}

/// Documents with an unsaved edit each, whose files' locks across processes the test holds (as
/// another server or `docsession coordinate` would).
private func lockedDocuments(
    _ count: Int, store: DocumentStore, directory: TemporaryDirectory, locks: FileLocks
) async throws -> (handles: [String], paths: [String], held: [FileLocks.Held]) {
    var (handles, paths, held) = ([String](), [String](), [FileLocks.Held]())
    for index in 0..<count {
        let path = try directory.write("locked\(index).txt", "old \(index)\n")
        let document = try await store.open(path: path, encoding: nil)
        _ = try await typeAtStart(store, document.handle, "new ")
        handles.append(document.handle)
        paths.append(path)
        held.append(try #require(try locks.lock(SafeSave.resolveSymlinks(path), exclusive: true)))
    }
    return (handles, paths, held)
}

@Suite("DocumentStore: saves waiting for another process's file lock")
struct FileLockWaitTests {
    @Test("saves waiting for locks held elsewhere hold no thread: more of them than the pool has threads wait at once, and another file opens and saves meanwhile")
    func waitsHoldNoThread() async throws {
        let runtime = try TemporaryDirectory(prefix: "docsession-lockwait")
        let directory = try TemporaryDirectory()
        let locks = try FileLocks.open(runtimeDirectory: runtime.path).get()
        let store = DocumentStore(events: { _ in }, watchFiles: false)
        await store.setFileLocks(locks)
        // More saves than the pool runs threads: waiting on them, they would take every thread.
        let count = BlockingThreadPool.defaultMaximum(idle: false) + 4
        let (handles, paths, held) = try await lockedDocuments(count, store: store, directory: directory, locks: locks)
        let saves = handles.map { handle in Task { try await store.save(handle) } }
        // Every save has found its file's lock held and waits (its lock file open): the test's
        // descriptors and one of each save's.
        // (Looked at every 20 ms: a listing of the process's descriptors is not free, and the
        // suite's other tasks share the cooperative threads.)
        let allWaiting = await waitUntil(interval: .milliseconds(20)) { openLockFiles(under: locks.directory) == 2 * count }
        #expect(allWaiting, "\(openLockFiles(under: locks.directory) - count) of \(count) saves reached their lock")

        // Meanwhile another file opens, takes an edit and saves: a load and a save on the pool.
        let otherDone = Mutex(false)
        let otherPath = try directory.write("other.txt", "other\n")
        let other = Task {
            let document = try await store.open(path: otherPath, encoding: nil)
            _ = try await typeAtStart(store, document.handle, "saved ")
            _ = try await store.save(document.handle)
            otherDone.withLock { $0 = true }
        }
        let otherRan = await waitUntil(interval: .milliseconds(20)) { otherDone.withLock { $0 } }
        #expect(otherRan, "an open and a save of another file did not run while \(count) saves waited for locks")
        // The waiting saves wrote nothing.
        for (index, path) in paths.enumerated() {
            #expect(try contents(path) == Array("old \(index)\n".utf8))
        }

        // Let go: every save takes its lock and writes.
        for lock in held { lock.release() }
        try await other.value
        #expect(try contents(otherPath) == Array("saved other\n".utf8))
        for (index, save) in saves.enumerated() {
            _ = try await save.value
            #expect(try contents(paths[index]) == Array("new old \(index)\n".utf8))
            #expect(try await !store.document(handles[index]).hasUnsavedChanges)
        }
        // The saves let go of their locks: every one can be taken again at once.
        for path in paths {
            #expect(try locks.lock(SafeSave.resolveSymlinks(path), exclusive: true, isCancelled: { true }) != nil)
        }
    }

    @Test("a save waiting for a lock held elsewhere is cancellable: it writes nothing and the text stays unsaved")
    func waitIsCancellable() async throws {
        let runtime = try TemporaryDirectory(prefix: "docsession-lockwait")
        let directory = try TemporaryDirectory()
        let locks = try FileLocks.open(runtimeDirectory: runtime.path).get()
        let log = EventLog()
        let store = DocumentStore(events: { log.record($0) }, watchFiles: false)
        await store.setFileLocks(locks)
        let (handles, paths, held) = try await lockedDocuments(1, store: store, directory: directory, locks: locks)
        let cancelled = Mutex(false)
        let save = Task { try await store.save(handles[0], isCancelled: { cancelled.withLock { $0 } }) }
        #expect(await waitUntil(interval: .milliseconds(20)) { openLockFiles(under: locks.directory) == 2 })
        cancelled.withLock { $0 = true }
        await #expect(throws: DocumentError.save(.cancelled)) { _ = try await save.value }
        #expect(try contents(paths[0]) == Array("old 0\n".utf8))
        #expect(try await store.document(handles[0]).hasUnsavedChanges)
        #expect(!log.reasons.contains(.saved))
        // The cancelled save let go of its lock file; the test's lock is still the only one.
        #expect(openLockFiles(under: locks.directory) == 1)
        held[0].release()
    }
}
