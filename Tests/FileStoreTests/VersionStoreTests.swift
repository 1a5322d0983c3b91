import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A store in a new temporary directory (or `directory`), flushing unless told not to.
private func makeStore(
    directory: String? = nil, savedLimit: Int = 1000, conflictLimit: Int = 1000, byteLimit: Int = 512 << 20,
    maxVersionSize: Int = 64 << 20, durable: Bool = true, pathHash: (@Sendable (String) -> UInt64)? = nil,
    clock: TestClock? = nil, contentHash: @escaping @Sendable (UInt64) -> UInt64 = { $0 }
) throws -> VersionStore {
    var now: (@Sendable () -> Int64)? = nil
    if let clock { now = { clock.now } }
    return try VersionStore(
        directory: directory ?? freshDirectory() + "/versions", savedLimit: savedLimit, conflictLimit: conflictLimit,
        byteLimit: byteLimit, maxVersionSize: maxVersionSize, durable: durable,
        pathHash: pathHash ?? { ContentHasher.hash($0.utf8) }, now: now, contentHash: contentHash)
}

/// A clock the test sets (nanoseconds since the epoch).
private final class TestClock: Sendable {
    private let value: Mutex<Int64>
    init(_ start: Int64) { value = Mutex(start) }
    var now: Int64 { value.withLock { $0 } }
    func set(_ nanoseconds: Int64) { value.withLock { $0 = nanoseconds } }
}

private let hour: Int64 = 3600 * 1_000_000_000
private let minute: Int64 = 60 * 1_000_000_000
private let day: Int64 = 24 * hour

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Adds `text`, expecting it to be stored.
@discardableResult
private func add(_ store: VersionStore, _ path: String, _ kind: VersionStore.Kind, _ text: String) throws -> VersionStore.Version {
    let addition = try #require(try store.add(documentPath: path, kind: kind, text: bytes(text)))
    #expect(addition.added)
    return addition.version
}

/// The inode of `path`.
private func inode(_ path: String) -> UInt64 {
    var status = stat()
    guard lstat(path, &status) == 0 else { return 0 }
    return UInt64(status.st_ino)
}

/// The slot directory of the store's only document.
private func onlySlot(_ store: VersionStore) throws -> String {
    let slots = try FileManager.default.contentsOfDirectory(atPath: store.directory).filter { !$0.hasPrefix(".") }
    try #require(slots.count == 1)
    return store.directory + "/" + slots[0]
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
        let chunked = try #require(try store.add(documentPath: path, kind: .saved, chunks: [bytes("abc"), [], bytes("defgh")])?.version)
        #expect(try store.read(chunked.id) == bytes("abcdefgh"))
        #expect(chunked.size == 8)
        #expect(try store.add(documentPath: path, kind: .saved, text: bytes("12345678901")) == nil)
        #expect(try store.add(documentPath: path, kind: .conflict, chunks: [bytes("123456"), bytes("78901")]) == nil)
        let exact = try #require(try store.add(documentPath: path, kind: .saved, text: bytes("1234567890"))?.version)
        #expect(store.versions(of: path).map(\.id) == [exact.id, chunked.id])
        #expect(!tree(store.directory).contains { $0.contains(VersionStore.tempPrefix) })
        // A non-array collection is taken too.
        let sliced = try #require(try store.add(documentPath: path, kind: .saved, text: bytes("xxhelloxx")[2..<7])?.version)
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
        // Each text different (the same one would be stored once).
        var texts = (0..<7).map { String(repeating: String($0), count: 30) }.makeIterator()
        func thirty() -> String { texts.next()! }
        let c1 = try add(store, a, .conflict, thirty())
        let s1 = try add(store, a, .saved, thirty())
        let s2 = try add(store, b, .saved, thirty())
        func ids() -> Set<String> { Set((store.versions(of: a) + store.versions(of: b)).map(\.id)) }
        #expect(ids() == [c1.id, s1.id, s2.id])
        // 120 bytes: the oldest saved version (of a) goes, although b's version was added.
        let c2 = try add(store, b, .conflict, thirty())
        #expect(ids() == [c1.id, s2.id, c2.id])
        // Then b's saved version, older than the one just added to a.
        let s3 = try add(store, a, .saved, thirty())
        #expect(ids() == [c1.id, c2.id, s3.id])
        // A conflict added: the last saved version goes before any conflict.
        let c3 = try add(store, b, .conflict, thirty())
        #expect(ids() == [c1.id, c2.id, c3.id])
        // No saved version left: the oldest conflict.
        let c4 = try add(store, a, .conflict, thirty())
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

    @Test("versions(ofPaths:) answers what versions(of:) answers for each path, colliding slots and a hole among them")
    func versionsOfManyPaths() throws {
        let store = try makeStore(pathHash: { $0.hasPrefix("/x") ? 0xABC : ContentHasher.hash($0.utf8) })
        let a = try add(store, "/x/a", .saved, "a")
        let b = try add(store, "/x/b", .conflict, "b")
        let c = try add(store, "/x/c", .saved, "c")
        let d = try add(store, "/d", .saved, "d")
        // A hole: the first colliding slot goes; the later ones are still found.
        #expect(store.remove(a.id))
        let paths = ["/x/a", "/x/b", "/x/c", "/d", "/none", "/x/none"]
        let found = store.versions(ofPaths: paths)
        #expect(found == ["/x/b": [b], "/x/c": [c], "/d": [d]])
        for path in paths { #expect((found[path] ?? []) == store.versions(of: path)) }
        #expect(try makeStore().versions(ofPaths: paths).isEmpty)
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
                mine.append(version.version.id)
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

    @Test("Thinned by age with the test's clock: all of the last hour, one an hour for a day, one a day for 30 days")
    func thinning() throws {
        // A day boundary (UTC): hours and days are counted from it.
        let start: Int64 = 20_000 * day
        let clock = TestClock(start)
        let store = try makeStore(durable: false, clock: clock)
        let path = "/diary.txt"
        var removed: [String] = []
        var all: [String: VersionStore.Version] = [:]
        /// Adds a version at `offset` from `start` (the clock moves there first).
        func at(_ offset: Int64, _ kind: VersionStore.Kind = .saved, resolved: Bool = false) throws -> String {
            clock.set(start + offset)
            let label = "v@\(offset / minute)m \(kind)"
            let addition = try #require(try store.add(documentPath: path, kind: kind, text: bytes(label), resolved: resolved))
            #expect(addition.added && addition.version.date == start + offset)
            removed += addition.removed.map(\.id)
            all[label] = addition.version
            return label
        }
        let older = try at(-31 * day)  // older than 30 days at the end
        let monthOld = try at(-26 * day)  // 29 days old at the end: the newest of its day
        // Day 0 (two days and more ago at the end): only its newest stays.
        let unresolved = try at(30 * minute, .conflict)  // never thinned
        var day0 = try [at(1 * hour)]
        let resolvedConflict = try at(2 * hour, .conflict, resolved: true)  // thinned like a saved one
        day0 += try [at(5 * hour), at(5 * hour + 30 * minute)]
        let day0Newest = try at(23 * hour)
        // Day 1 (a day and more ago): only its newest.
        let day1 = try [at(30 * hour), at(40 * hour)]
        let day1Newest = try at(47 * hour)
        // The last day: the newest of each hour.
        let hour49 = try at(49 * hour)
        let hour49Newest = try at(49 * hour + 30 * minute)
        let hour60 = try at(60 * hour)
        let hour70 = try at(70 * hour + 10 * minute)
        let hour70Newest = try at(70 * hour + 50 * minute)
        // The last hour: every one.
        let lastHour = try [at(71 * hour + 40 * minute), at(72 * hour), at(72 * hour + 10 * minute), at(72 * hour + 20 * minute)]

        let expected = lastHour.reversed() + [hour70Newest, hour60, hour49Newest, day1Newest, day0Newest, unresolved, monthOld]
        #expect(store.versions(of: path).map(\.id) == expected.map { all[$0]!.id })
        let dropped = [older, resolvedConflict, hour49, hour70] + day0 + day1
        #expect(Set(removed) == Set(dropped.map { all[$0]!.id }))
        #expect(removed.count == dropped.count)
        for label in dropped { expectGone(store, all[label]!.id) }

        // 31 days later the newest version alone is kept, old as it is; the unresolved conflict too.
        let late = try at(72 * hour + 31 * day, .conflict)
        #expect(store.versions(of: path).map(\.id) == [all[late]!.id, all[lastHour.last!]!.id, all[unresolved]!.id])
    }

    @Test("Thinned without a version kept (a file opened again long after): the same rules, nothing kept added")
    func thinningWithoutAnAddition() throws {
        let start: Int64 = 20_000 * day
        let clock = TestClock(start)
        let store = try makeStore(durable: false, clock: clock)
        var ids: [String] = []
        for minutes in [0, 10, 20, 30, 40] {
            clock.set(start + Int64(minutes) * minute)
            let addition = try #require(try store.add(documentPath: "/saved.txt", kind: .saved, text: bytes("at \(minutes)")))
            ids.append(addition.version.id)
        }
        // Within the last hour of the newest: nothing goes yet.
        #expect(store.thin(documentPath: "/saved.txt").isEmpty)
        #expect(store.versions(of: "/saved.txt").count == 5)
        // Two days later: one a day; the newest stays (day 20,000 holds them all).
        clock.set(start + 2 * day)
        let removed = store.thin(documentPath: "/saved.txt")
        #expect(Set(removed.map(\.id)) == Set(ids.dropLast()))
        #expect(store.versions(of: "/saved.txt").map(\.id) == [ids.last!])
        for id in ids.dropLast() { expectGone(store, id) }
        #expect(store.thin(documentPath: "/none.txt").isEmpty)
    }

    @Test("The per-document cap no longer cuts the last hour: 300 saves of the last hour all stay")
    func lastHourIsNotCapped() throws {
        let clock = TestClock(20_000 * day)
        let store = try makeStore(durable: false, clock: clock)
        #expect(store.savedLimit >= 1000)
        for i in 0..<300 {
            clock.set(20_000 * day + Int64(i) * 10_000_000_000)
            try add(store, "/autosaved.txt", .saved, "text \(i)")
        }
        #expect(store.versions(of: "/autosaved.txt").count == 300)
    }

    @Test("Stored once per content: the newest's text again adds nothing, an older one's is a hard link")
    func dedupe() throws {
        let store = try makeStore(byteLimit: 10)
        let path = "/same.txt"
        let first = try add(store, path, .saved, "12345")
        let again = try #require(try store.add(documentPath: path, kind: .saved, text: bytes("12345")))
        #expect(!again.added && again.version == first && again.removed.isEmpty)
        #expect(store.versions(of: path) == [first])
        #expect(!tree(store.directory).contains { $0.contains(VersionStore.tempPrefix) })
        #expect(first.contentHash == ContentHasher.hash(bytes("12345")))

        let other = try add(store, path, .saved, "abcde")
        // The first text again, not the newest's: a new version sharing the first's file.
        let third = try add(store, path, .saved, "12345")
        #expect(third.id != first.id && third.contentHash == first.contentHash)
        let slot = try onlySlot(store)
        #expect(inode(slot + "/" + third.id) == inode(slot + "/" + first.id))
        #expect(inode(slot + "/" + other.id) != inode(slot + "/" + first.id))
        // 15 bytes listed, 10 on disk: within the 10-byte budget, nothing was evicted.
        #expect(store.versions(of: path).map(\.id) == [third.id, other.id, first.id])
        #expect(try store.read(third.id) == bytes("12345"))
        // Removing one link keeps the other's text.
        #expect(store.remove(first.id))
        #expect(try store.read(third.id) == bytes("12345"))
        // A conflict with a saved version's text shares it too; the same text as the newest
        // conflict adds nothing.
        let conflict = try add(store, path, .conflict, "abcde")
        #expect(inode(slot + "/" + conflict.id) == inode(slot + "/" + other.id))
        #expect(try store.add(documentPath: path, kind: .conflict, text: bytes("abcde"))?.added == false)
    }

    @Test("Texts whose content hashes collide are stored apart: a hash and a size are not taken for the same bytes")
    func contentHashCollision() throws {
        // Every text hashes alike; "one\n" and "two\n" have the same size.
        let store = try makeStore(contentHash: { _ in 42 })
        let one = try add(store, "/doc", .saved, "one\n")
        let two = try add(store, "/doc", .saved, "two\n")
        #expect(two.id != one.id)
        #expect(try store.read(one.id) == Array("one\n".utf8))
        #expect(try store.read(two.id) == Array("two\n".utf8))
        // The same bytes again are still recognised: the newest's text adds nothing, an older
        // one's is a hard link to it.
        let addition = try #require(try store.add(documentPath: "/doc", kind: .saved, text: Array("two\n".utf8)))
        #expect(!addition.added && addition.version.id == two.id)
        let again = try add(store, "/doc", .saved, "one\n")
        var first = stat(), second = stat()
        let slot = try #require(try FileManager.default.contentsOfDirectory(atPath: store.directory).first { VersionStore.isSlotName($0) })
        #expect(stat(store.directory + "/" + slot + "/" + one.id, &first) == 0 && stat(store.directory + "/" + slot + "/" + again.id, &second) == 0)
        #expect(first.st_ino == second.st_ino)
        #expect(try store.read(again.id) == Array("one\n".utf8))
    }

    @Test("Resolved marks and origins are kept with the versions: across a reopen, a move, and gone with a removal")
    func marks() throws {
        let store = try makeStore()
        let path = "/notes.md"
        let saved = try add(store, path, .saved, "mine")
        #expect(saved.resolved)
        let conflict = try add(store, path, .conflict, "theirs")
        #expect(!conflict.resolved)
        let origin = "notes.sync-conflict-20261128-101500-ABCDEFG.md"
        let copy = try #require(try store.add(documentPath: path, kind: .syncConflict, text: bytes("copy"), origin: origin)?.version)
        #expect(copy.origin == origin && !copy.resolved && copy.id.hasSuffix(".syncConflict"))
        let settled = try #require(try store.add(
            documentPath: path, kind: .syncConflict, text: bytes("settled"), resolved: true, origin: "notes.sync-conflict-2.md")?.version)
        #expect(settled.resolved)
        // The same copy's text again, kept resolved: nothing stored, the existing one marked.
        let again = try #require(try store.add(documentPath: path, kind: .syncConflict, text: bytes("settled"), resolved: true))
        #expect(!again.added && !again.markedResolved && again.version.id == settled.id)

        let marking = try #require(try store.add(documentPath: path, kind: .syncConflict, text: bytes("settled2"), origin: "x.md"))
        #expect(marking.added && !marking.version.resolved)
        let marked = try #require(try store.add(documentPath: path, kind: .syncConflict, text: bytes("settled2"), resolved: true))
        #expect(!marked.added && marked.markedResolved && marked.version.id == marking.version.id && marked.version.resolved)
        #expect(store.remove(marking.version.id))
        #expect(store.markResolved(conflict.id))
        #expect(store.markResolved(saved.id))
        #expect(!store.markResolved("1-2-3.conflict"))
        #expect(!store.markResolved("../x"))
        #expect(store.version(conflict.id)?.resolved == true)

        let reopened = try makeStore(directory: store.directory)
        var listed = reopened.versions(of: path)
        #expect(listed.map(\.id) == [settled.id, copy.id, conflict.id, saved.id])
        #expect(listed.map(\.resolved) == [true, false, true, true])
        #expect(listed.map(\.origin) == ["notes.sync-conflict-2.md", origin, nil, nil])
        #expect(try reopened.read(copy.id) == bytes("copy"))

        try reopened.moveDocument(from: path, to: "/moved/notes.md")
        listed = store.versions(of: "/moved/notes.md")
        #expect(listed.map(\.id) == [settled.id, copy.id, conflict.id, saved.id])
        #expect(listed.map(\.resolved) == [true, false, true, true])
        #expect(listed.map(\.origin) == ["notes.sync-conflict-2.md", origin, nil, nil])

        for version in listed { #expect(store.remove(version.id)) }
        #expect(tree(store.directory) == [])
    }

    @Test("Versions named by an older store (no hash in the name) are listed, read, hashed, linked to and removed")
    func oldNames() throws {
        let store = try makeStore()
        let path = "/legacy.txt"
        let current = try add(store, path, .saved, "current")
        let slot = try onlySlot(store)
        let oldID = "\(current.date - 1_000)-4321-7.saved"
        let oldConflict = "\(current.date - 2_000)-4321-6.conflict"
        #expect(FileManager.default.createFile(atPath: slot + "/" + oldID, contents: Data("legacy".utf8)))
        #expect(FileManager.default.createFile(atPath: slot + "/" + oldConflict, contents: Data("theirs".utf8)))
        let listed = store.versions(of: path)
        #expect(listed.map(\.id) == [current.id, oldID, oldConflict])
        #expect(listed[1].contentHash == ContentHasher.hash(bytes("legacy")) && listed[1].size == 6 && listed[1].resolved)
        #expect(!listed[2].resolved)
        #expect(try store.read(oldID) == bytes("legacy"))
        #expect(store.version(oldID) == listed[1])
        // The old text again: a link to the old file.
        let again = try add(store, path, .saved, "legacy")
        #expect(inode(slot + "/" + again.id) == inode(slot + "/" + oldID))
        #expect(store.markResolved(oldConflict))
        #expect(store.version(oldConflict)?.resolved == true)
        #expect(store.remove(oldID) && store.remove(oldConflict))
        #expect(store.versions(of: path).map(\.id) == [again.id, current.id])
    }
}
