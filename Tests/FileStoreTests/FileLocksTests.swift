import Foundation
import Synchronization
import TestSupport
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

@Suite("FileLocks: one save of a file at a time across processes and threads")
struct FileLocksTests {
    @Test("the locks directory is made 0700; one of another mode is refused")
    func directory() throws {
        let runtime = try TemporaryDirectory(prefix: "docsession-locks")
        let locks = try FileLocks.open(runtimeDirectory: runtime.path).get()
        var status = stat()
        #expect(lstat(locks.directory, &status) == 0)
        #expect(status.st_mode & 0o7777 == 0o700)
        #expect(chmod(locks.directory, 0o755) == 0)
        guard case .failure(let error) = FileLocks.open(runtimeDirectory: runtime.path) else {
            Issue.record("a locks directory of mode 0755 was used")
            return
        }
        #expect(error.message.contains("755"))
    }

    @Test("an exclusive lock waits for another descriptor's, then is taken; a shared lock admits another shared one")
    func exclusion() throws {
        let runtime = try TemporaryDirectory(prefix: "docsession-locks")
        let locks = try FileLocks.open(runtimeDirectory: runtime.path).get()
        let first = try #require(try locks.lock("/some/file.txt", exclusive: true))
        // Another lock of the same file is refused while the first is held (cancelled at once).
        let waitedCount = Mutex(0)
        let refused = try locks.lock("/some/file.txt", exclusive: true, isCancelled: { waitedCount.withLock { $0 } > 0 }, waited: {
            waitedCount.withLock { $0 += 1 }
        })
        #expect(refused == nil)
        #expect(waitedCount.withLock { $0 } == 1)
        // Another file's lock is its own.
        let other = try #require(try locks.lock("/some/other.txt", exclusive: true))
        other.release()
        // Released on another thread once this one has found it held and waits: then taken.
        let waiting = DispatchSemaphore(value: 0)
        let releaser = Thread { waiting.wait(); first.release() }
        releaser.start()
        let second = try #require(try locks.lock("/some/file.txt", exclusive: true, waited: { waiting.signal() }))
        second.release()
        // Shared locks admit each other, not an exclusive one.
        let readerA = try #require(try locks.lock("/some/file.txt", exclusive: false))
        let readerB = try #require(try locks.lock("/some/file.txt", exclusive: false))
        #expect(try locks.lock("/some/file.txt", exclusive: true, isCancelled: { true }) == nil)
        readerA.release()
        readerB.release()
        #expect(try locks.lock("/some/file.txt", exclusive: true, isCancelled: { true }) != nil)
    }

    @Test("a save waits while another holds the file's lock, and is cancellable meanwhile")
    func saveWaits() throws {
        let runtime = try TemporaryDirectory(prefix: "docsession-locks")
        let documents = try TemporaryDirectory(prefix: "docsession-locks-docs")
        let locks = try FileLocks.open(runtimeDirectory: runtime.path).get()
        let path = documents.path + "/a.txt"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8)))
        let held = try #require(try locks.lock(path, exclusive: true))
        #expect(throws: SaveError.cancelled) {
            _ = try SafeSave.save(SafeSave.Request(path: path, expected: nil, force: true, locks: locks), isCancelled: { true }) { (sink) throws(SaveError) in
                try sink.write(Array("new".utf8))
            }
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old")
        held.release()
        _ = try SafeSave.save(SafeSave.Request(path: path, expected: nil, force: true, locks: locks)) { (sink) throws(SaveError) in
            try sink.write(Array("new".utf8))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new")
    }
}
