import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A store in a new temporary directory (or `directory`), flushing unless told not to.
private func makeStore(
    directory: String? = nil, savedLimit: Int = 20, conflictLimit: Int = 20, byteLimit: Int = 512 << 20,
    maxVersionSize: Int = 64 << 20, durable: Bool = true, pathHash: (@Sendable (String) -> UInt64)? = nil
) throws -> VersionStore {
    try VersionStore(
        directory: directory ?? freshDirectory() + "/versions", savedLimit: savedLimit, conflictLimit: conflictLimit,
        byteLimit: byteLimit, maxVersionSize: maxVersionSize, durable: durable,
        pathHash: pathHash ?? { ContentHasher.hash($0.utf8) })
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Adds `text`, expecting it to be stored.
@discardableResult
private func add(_ store: VersionStore, _ path: String, _ kind: VersionStore.Kind, _ text: String) throws -> VersionStore.Version {
    try #require(try store.add(documentPath: path, kind: kind, text: bytes(text)))
}

/// The permission bits of `path`.
private func mode(_ path: String) -> mode_t {
    var status = stat()
    guard lstat(path, &status) == 0 else { return 0o7777 }
    return status.st_mode & 0o7777
}

/// Everything under `directory`, relative, sorted (directories too).
private func tree(_ directory: String) -> [String] {
    (FileManager.default.subpaths(atPath: directory) ?? []).sorted()
}

/// Sets the modification time of `path` to `seconds` ago.
private func age(_ path: String, seconds: Int) {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var times = [timespec(tv_sec: now.tv_sec - seconds, tv_nsec: 0), timespec(tv_sec: now.tv_sec - seconds, tv_nsec: 0)]
    precondition(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0)
}

/// Expects `read(id)` to fail with ENOENT.
private func expectGone(_ store: VersionStore, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try store.read(id)
        Issue.record("expected ENOENT reading \(id)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.errno == ENOENT, sourceLocation: sourceLocation)
        #expect(error.code == "ENOENT", sourceLocation: sourceLocation)
    }
    #expect(store.version(id) == nil, sourceLocation: sourceLocation)
}

@Suite("VersionStore: earlier versions of documents on disk")
struct VersionStoreTests {
    @Test("Added versions list newest first and read back byte for byte")
    func roundTrip() throws {
        let store = try makeStore()
        let path = "/home/user/notes.txt"
        let first = try add(store, path, .saved, "one")
        let second = try add(store, path, .conflict, "two, théirs 😀")
        let third = try add(store, path, .saved, "")
        #expect(store.versions(of: path) == [third, second, first])
        #expect(first.date < second.date && second.date < third.date)
        #expect(second.kind == .conflict && second.documentPath == path && second.size == bytes("two, théirs 😀").count)
        #expect(try store.read(first.id) == bytes("one"))
        #expect(try store.read(second.id) == bytes("two, théirs 😀"))
        #expect(try store.read(third.id) == [])
        #expect(store.version(second.id) == second)
        #expect(store.versions(of: "/home/user/other.txt") == [])
        // The date is the wall clock's.
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        #expect(abs(now - third.date) < 60_000_000_000)
        // An id is a plain file name.
        #expect(!first.id.contains("/") && first.id.hasSuffix(".saved") && second.id.hasSuffix(".conflict"))
        // No temp file is left.
        #expect(!tree(store.directory).contains { $0.contains(VersionStore.tempPrefix) })
    }

    @Test("Chunks are stored concatenated; a text over maxVersionSize is refused with nil")
    func chunksAndMaximumSize() throws {
        let store = try makeStore(maxVersionSize: 10)
        let path = "/tmp/doc.txt"
        let chunked = try #require(try store.add(documentPath: path, kind: .saved, chunks: [bytes("abc"), [], bytes("defgh")]))
        #expect(try store.read(chunked.id) == bytes("abcdefgh"))
        #expect(chunked.size == 8)
        #expect(try store.add(documentPath: path, kind: .saved, text: bytes("12345678901")) == nil)
        #expect(try store.add(documentPath: path, kind: .conflict, chunks: [bytes("123456"), bytes("78901")]) == nil)
        let exact = try #require(try store.add(documentPath: path, kind: .saved, text: bytes("1234567890")))
        #expect(store.versions(of: path).map(\.id) == [exact.id, chunked.id])
        #expect(!tree(store.directory).contains { $0.contains(VersionStore.tempPrefix) })
        // A non-array collection is taken too.
        let sliced = try #require(try store.add(documentPath: path, kind: .saved, text: bytes("xxhelloxx")[2..<7]))
        #expect(try store.read(sliced.id) == bytes("hello"))
    }

    @Test("Per-document limits of each kind evict that kind's oldest versions of that document only")
    func perKindLimits() throws {
        let store = try makeStore(savedLimit: 3, conflictLimit: 2)
        let a = "/work/a.txt"
        let b = "/work/b.txt"
        let other = try add(store, b, .saved, "b0")
        var saved: [VersionStore.Version] = []
        var conflicts: [VersionStore.Version] = []
        for i in 0..<5 {
            saved.append(try add(store, a, .saved, "s\(i)"))
            if i < 4 { conflicts.append(try add(store, a, .conflict, "c\(i)")) }
        }
        let listed = store.versions(of: a)
        #expect(listed.filter { $0.kind == .saved } == [saved[4], saved[3], saved[2]])
        #expect(listed.filter { $0.kind == .conflict } == [conflicts[3], conflicts[2]])
        for gone in [saved[0], saved[1], conflicts[0], conflicts[1]] { expectGone(store, gone.id) }
        #expect(store.versions(of: b) == [other])
        #expect(try store.read(saved[4].id) == bytes("s4"))
    }

    @Test("Over byteLimit, the oldest saved versions go first across documents, then the oldest conflicts")
    func byteLimit() throws {
        let store = try makeStore(byteLimit: 100)
        let a = "/a.txt"
        let b = "/b.txt"
        let thirty = String(repeating: "x", count: 30)
        let c1 = try add(store, a, .conflict, thirty)
        let s1 = try add(store, a, .saved, thirty)
        let s2 = try add(store, b, .saved, thirty)
        func ids() -> Set<String> { Set((store.versions(of: a) + store.versions(of: b)).map(\.id)) }
        #expect(ids() == [c1.id, s1.id, s2.id])
        // 120 bytes: the oldest saved version (of a) goes, although b's version was added.
        let c2 = try add(store, b, .conflict, thirty)
        #expect(ids() == [c1.id, s2.id, c2.id])
        // Then b's saved version, older than the one just added to a.
        let s3 = try add(store, a, .saved, thirty)
        #expect(ids() == [c1.id, c2.id, s3.id])
        // A conflict added: the last saved version goes before any conflict.
        let c3 = try add(store, b, .conflict, thirty)
        #expect(ids() == [c1.id, c2.id, c3.id])
        // No saved version left: the oldest conflict.
        let c4 = try add(store, a, .conflict, thirty)
        #expect(ids() == [c2.id, c3.id, c4.id])
        expectGone(store, c1.id)
        // A version the size of the whole limit stays, alone.
        let big = try add(store, b, .saved, String(repeating: "y", count: 100))
        #expect(ids() == [big.id])
        #expect(store.versions(of: a) == [])
        // The emptied document's slot is gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory).count == 1)
        // Bigger than the byte limit: not stored.
        #expect(try store.add(documentPath: a, kind: .saved, text: bytes(String(repeating: "z", count: 101))) == nil)
    }

    @Test("Unknown ids and ids that are not ids fail with ENOENT")
    func unknownID() throws {
        let store = try makeStore()
        try add(store, "/x", .saved, "secret")
        for id in ["1795300000123456789-4321-7.saved", "../versions", "/etc/passwd", "", "path", "1-2-3.other", "1-2.saved"] {
            expectGone(store, id)
            #expect(!store.remove(id))
        }
    }

    @Test("remove deletes one version; removing the last one removes the document's slot")
    func remove() throws {
        let store = try makeStore()
        let path = "/doc.txt"
        let first = try add(store, path, .saved, "1")
        let second = try add(store, path, .conflict, "2")
        #expect(store.remove(first.id))
        #expect(!store.remove(first.id))
        expectGone(store, first.id)
        #expect(store.versions(of: path) == [second])
        #expect(store.remove(second.id))
        #expect(store.versions(of: path) == [])
        #expect(tree(store.directory) == [])
    }

    @Test("moveDocument carries the versions, with their ids, to the new path only")
    func move() throws {
        let store = try makeStore(savedLimit: 2)
        let old = "/projects/draft.txt"
        let new = "/archive/final.txt"
        let first = try add(store, old, .saved, "first")
        let second = try add(store, old, .conflict, "second")
        try store.moveDocument(from: old, to: new)
        #expect(store.versions(of: old) == [])
        var moved = [second, first]
        for index in moved.indices { moved[index].documentPath = new }
        #expect(store.versions(of: new) == moved)
        #expect(try store.read(first.id) == bytes("first"))
        #expect(store.version(second.id)?.documentPath == new)
        // One slot, the new path's.
        let slots = try FileManager.default.contentsOfDirectory(atPath: store.directory)
        #expect(slots.count == 1)
        #expect(try String(contentsOfFile: store.directory + "/" + slots[0] + "/path", encoding: .utf8) == new)
        // A second store (no hints) finds them too.
        let other = try makeStore(directory: store.directory)
        #expect(try other.read(first.id) == bytes("first"))
        // Moved over a document that has versions: they merge, within the limits.
        let third = try add(store, "/other.txt", .saved, "third")
        try store.moveDocument(from: "/other.txt", to: new)
        #expect(store.versions(of: new).map(\.id) == [third.id, second.id, first.id])
        let fourth = try add(store, "/another.txt", .saved, "fourth")
        try store.moveDocument(from: "/another.txt", to: new)
        #expect(store.versions(of: new).map(\.id) == [fourth.id, third.id, second.id])
        expectGone(store, first.id)
        // Moving a document without versions, or to itself, changes nothing.
        try store.moveDocument(from: "/nothing.txt", to: "/elsewhere.txt")
        try store.moveDocument(from: new, to: new)
        #expect(store.versions(of: "/elsewhere.txt") == [])
        #expect(store.versions(of: new).count == 3)
    }

    @Test("A second store on the same directory sees the first's versions, and the other way round")
    func persistence() throws {
        let first = try makeStore()
        let path = "/persist.txt"
        let one = try add(first, path, .saved, "one")
        let second = try makeStore(directory: first.directory)
        #expect(second.versions(of: path) == [one])
        #expect(try second.read(one.id) == bytes("one"))
        let two = try add(second, path, .conflict, "two")
        #expect(first.versions(of: path) == [two, one])
        #expect(try first.read(two.id) == bytes("two"))
        #expect(second.remove(one.id))
        #expect(first.versions(of: path) == [two])
    }

    @Test("Directories are 0700 (the store's and its missing parents), files 0600")
    func modes() throws {
        let base = freshDirectory()
        let store = try makeStore(directory: base + "/state/docsession/versions/")
        #expect(store.directory == base + "/state/docsession/versions")
        let version = try add(store, "/private.txt", .saved, "private")
        for directory in ["/state", "/state/docsession", "/state/docsession/versions"] {
            #expect(mode(base + directory) == 0o700, "\(directory)")
        }
        let slots = try FileManager.default.contentsOfDirectory(atPath: store.directory)
        #expect(slots.count == 1)
        let slot = store.directory + "/" + slots[0]
        #expect(mode(slot) == 0o700)
        #expect(mode(slot + "/path") == 0o600)
        #expect(mode(slot + "/" + version.id) == 0o600)
        // A file where the directory should be.
        #expect(throws: FileSystemError.self) { try makeStore(directory: slot + "/path") }
    }

    @Test("Temp files older than a minute are swept when a store opens; fresh ones are kept")
    func sweep() throws {
        let directory = freshDirectory() + "/versions"
        let store = try makeStore(directory: directory)
        let version = try add(store, "/kept.txt", .saved, "kept")
        let stale = directory + "/" + VersionStore.tempPrefix + "dead"
        let fresh = directory + "/" + VersionStore.tempPrefix + "live"
        let staleSlot = directory + "/" + VersionStore.tempPrefix + "deadslot"
        #expect(FileManager.default.createFile(atPath: stale, contents: Data("half a version".utf8)))
        #expect(FileManager.default.createFile(atPath: fresh, contents: Data("being written".utf8)))
        try FileManager.default.createDirectory(atPath: staleSlot, withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: staleSlot + "/path", contents: Data("/x".utf8)))
        age(stale, seconds: 120)
        age(staleSlot, seconds: 120)
        // A slot whose removal was cut short after its path file went.
        let emptySlot = directory + "/0123456789abcdef-3"
        try FileManager.default.createDirectory(atPath: emptySlot, withIntermediateDirectories: false)
        _ = try makeStore(directory: directory)
        #expect(!FileManager.default.fileExists(atPath: emptySlot))
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(!FileManager.default.fileExists(atPath: staleSlot))
        #expect(FileManager.default.fileExists(atPath: fresh))
        #expect(try store.read(version.id) == bytes("kept"))
    }

    @Test("Documents with the same file name in different directories stay apart")
    func sameName() throws {
        let store = try makeStore()
        let a = try add(store, "/one/notes.txt", .saved, "one")
        let b = try add(store, "/two/notes.txt", .saved, "two")
        #expect(store.versions(of: "/one/notes.txt") == [a])
        #expect(store.versions(of: "/two/notes.txt") == [b])
    }

    @Test("Paths whose hashes collide get slots of their own")
    func hashCollision() throws {
        let store = try makeStore(pathHash: { _ in 0xABC })
        let a = try add(store, "/a", .saved, "a")
        let b = try add(store, "/b", .saved, "b")
        let c = try add(store, "/c", .saved, "c")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory).sorted()
            == ["0000000000000abc", "0000000000000abc-1", "0000000000000abc-2"])
        #expect(store.versions(of: "/a") == [a])
        #expect(store.versions(of: "/b") == [b])
        #expect(store.versions(of: "/c") == [c])
        // A hole in the chain: later slots are still found, and the hole is reused.
        #expect(store.remove(a.id))
        #expect(store.versions(of: "/c") == [c])
        let d = try add(store, "/d", .saved, "d")
        #expect(try String(contentsOfFile: store.directory + "/0000000000000abc/path", encoding: .utf8) == "/d")
        #expect(store.versions(of: "/d") == [d])
        #expect(store.versions(of: "/b") == [b])
        #expect(store.versions(of: "/a") == [])
    }

    @Test("Ids are unique across 1,000 rapid adds from several threads and two stores")
    func uniqueIDs() throws {
        let first = try makeStore(savedLimit: 5, conflictLimit: 5, durable: false)
        let second = try makeStore(directory: first.directory, savedLimit: 5, conflictLimit: 5, durable: false)
        let ids = Mutex<[String]>([])
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            let store = worker % 2 == 0 ? first : second
            var mine: [String] = []
            for i in 0..<250 {
                let kind: VersionStore.Kind = i % 3 == 0 ? .conflict : .saved
                guard let version = try? store.add(documentPath: "/doc\(i % 4).txt", kind: kind, text: Array("\(worker) \(i)".utf8)) else {
                    failures.add(1, ordering: .relaxed)
                    continue
                }
                mine.append(version.id)
            }
            ids.withLock { $0 += mine }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        let all = ids.withLock { $0 }
        #expect(all.count == 1000)
        #expect(Set(all).count == 1000)
        for document in 0..<4 {
            let listed = first.versions(of: "/doc\(document).txt")
            #expect(listed.filter { $0.kind == .saved }.count == 5)
            #expect(listed.filter { $0.kind == .conflict }.count == 5)
            #expect(listed.map(\.date) == listed.map(\.date).sorted(by: >))
        }
        #expect(!tree(first.directory).contains { $0.contains(VersionStore.tempPrefix) })
    }
}
