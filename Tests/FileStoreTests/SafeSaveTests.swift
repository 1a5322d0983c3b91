import CFileSystem
import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Saves `text` over `path` as the document layer does, expecting the identity `expected`.
@discardableResult
func save(_ text: String, to path: String, expected: FileIdentity?, force: Bool = false, createOnly: Bool = false) throws(SaveError) -> SafeSave.Outcome {
    try SafeSave.save(SafeSave.Request(path: path, expected: expected, force: force, createOnly: createOnly)) { (sink) throws(SaveError) in
        try sink.write(Array(text.utf8))
    }
}

func identity(_ path: String) throws -> FileIdentity {
    var status = stat()
    guard stat(path, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
    return FileIdentity(status)
}

func fileText(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

func entries(_ directory: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: directory).sorted() }

@Suite("SafeSave: the save protocol")
struct SafeSaveTests {
    @Test("a save replaces the content through a temp file: new inode, mode and xattr kept, no temp left, the new identity")
    func replaces() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "doc.txt")
        chmod(path, 0o640)
        let fd = open(path, O_RDONLY)
        let hasAttributes = cfs_fsetxattr(fd, "user.docsession.test", "kept", 4) == 0
        close(fd)
        let before = try identity(path)
        let outcome = try save("new text\n", to: path, expected: before)
        #expect(try fileText(path) == "new text\n")
        #expect(outcome.method == .rename)
        #expect(outcome.size == 9)
        #expect(outcome.durable)
        #expect(outcome.identity.inode != before.inode)
        #expect(outcome.identity.sameState(as: try identity(path)))
        #expect(try fileStatusMode(path) == 0o640)
        if hasAttributes {
            var value = [UInt8](repeating: 0, count: 16)
            let got = cfs_lgetxattr(path, "user.docsession.test", &value, value.count)
            #expect(got == 4 && Array(value[0..<max(got, 0)]) == Array("kept".utf8))
        }
        #expect(try entries(SafeSave.split(path).directory) == ["doc.txt"])
    }

    @Test("a file changed on disk since it was read is not overwritten; force overwrites it")
    func changedOnDisk() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "doc.txt")
        let before = try identity(path)
        try Array("theirs\n".utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        #expect(throws: SaveError.changedOnDisk(path: path, expected: before, found: try identity(path))) {
            try save("mine\n", to: path, expected: before)
        }
        #expect(try fileText(path) == "theirs\n")
        #expect(try entries(SafeSave.split(path).directory) == ["doc.txt"])
        try save("mine\n", to: path, expected: before, force: true)
        #expect(try fileText(path) == "mine\n")
    }

    @Test("a same-size write with the modification time restored is caught (the change time moved)")
    func sameSizeTimesRestored() throws {
        let path = writeTemporaryFile(Array("abc\n".utf8), name: "doc.txt")
        var before = try identity(path)
        before.contentHash = ContentHasher.hash(Array("abc\n".utf8))
        let handle = open(path, O_WRONLY)
        _ = "xyz\n".withCString { write(handle, $0, 4) }
        close(handle)
        var times = [timespec(tv_sec: Int(before.modificationTime / 1_000_000_000), tv_nsec: Int(before.modificationTime % 1_000_000_000)),
                     timespec(tv_sec: Int(before.modificationTime / 1_000_000_000), tv_nsec: Int(before.modificationTime % 1_000_000_000))]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        #expect(try identity(path).modificationTime == before.modificationTime)
        #expect(throws: SaveError.self) { try save("mine\n", to: path, expected: before) }
        #expect(try fileText(path) == "xyz\n")
    }

    @Test("a file whose times changed but whose bytes hash the same is not a conflict")
    func touchedIsNotAConflict() throws {
        let path = writeTemporaryFile(Array("same\n".utf8), name: "doc.txt")
        var before = try identity(path)
        before.contentHash = ContentHasher.hash(Array("same\n".utf8))
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        try save("mine\n", to: path, expected: before)
        #expect(try fileText(path) == "mine\n")
    }

    @Test("a touched file whose expected identity has no hash yet: the hash is computed then, once, and decides")
    func touchedBeforeTheHashIsKnown() throws {
        let path = writeTemporaryFile(Array("same\n".utf8), name: "doc.txt")
        let before = try identity(path)  // as after an open whose background hash has not come in
        #expect(before.contentHash == nil)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let calls = Counter()
        // Without a way to compute the hash, a touch looks like a change: refused.
        #expect(throws: SaveError.self) { try save("mine\n", to: path, expected: before) }
        // A hash of other bytes: still a change.
        let other = SafeSave.Request(path: path, expected: before, expectedHash: { calls.add(); return ContentHasher.hash(Array("else\n".utf8)) })
        #expect(throws: SaveError.self) { try SafeSave.save(other) { (sink) throws(SaveError) in try sink.write(Array("mine\n".utf8)) } }
        #expect(try fileText(path) == "same\n")
        // The hash of the bytes the identity describes: only the times changed, the save goes on.
        let request = SafeSave.Request(path: path, expected: before, expectedHash: { calls.add(); return ContentHasher.hash(Array("same\n".utf8)) })
        let outcome = try SafeSave.save(request) { (sink) throws(SaveError) in try sink.write(Array("mine\n".utf8)) }
        #expect(try fileText(path) == "mine\n")
        #expect(calls.value == 2)
        // Not asked for when the file is as expected.
        let untouched = SafeSave.Request(path: path, expected: outcome.identity, expectedHash: { calls.add(); return nil })
        try SafeSave.save(untouched) { (sink) throws(SaveError) in try sink.write(Array("again\n".utf8)) }
        #expect(calls.value == 2)
    }

    @Test("symlinks: a chain is written through (the links stay links), a dangling one creates its target, a loop is ELOOP")
    func symlinks() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "target.txt")
        let directory = SafeSave.split(path).directory
        #expect(symlink("target.txt", directory + "/one") == 0)
        #expect(symlink(directory + "/one", directory + "/two") == 0)
        #expect(symlink("two", directory + "/three") == 0)
        let outcome = try save("new\n", to: directory + "/three", expected: try identity(path))
        #expect(outcome.path == path)
        #expect(try fileText(path) == "new\n")
        for link in ["one", "two", "three"] {
            var status = stat()
            #expect(lstat(directory + "/" + link, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK)
        }
        #expect(symlink("missing.txt", directory + "/dangling") == 0)
        try save("created\n", to: directory + "/dangling", expected: nil)
        #expect(try fileText(directory + "/missing.txt") == "created\n")
        #expect(symlink("loop-b", directory + "/loop-a") == 0)
        #expect(symlink("loop-a", directory + "/loop-b") == 0)
        do {
            try save("x", to: directory + "/loop-a", expected: nil)
            Issue.record("a symlink loop saved")
        } catch {
            guard case .fileSystem(let detail) = error else { Issue.record("\(error)"); return }
            #expect(detail.code == "ELOOP")
        }
    }

    @Test("a file with two hard links is written in place: both names see the new text, the inode stays")
    func hardLinks() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "a.txt")
        let other = SafeSave.split(path).directory + "/b.txt"
        #expect(link(path, other) == 0)
        let before = try identity(path)
        let outcome = try save("new and longer\n", to: path, expected: before)
        #expect(outcome.method == .inPlace)
        #expect(outcome.identity.inode == before.inode)
        #expect(try fileText(other) == "new and longer\n")
        try save("short\n", to: path, expected: outcome.identity)
        #expect(try fileText(other) == "short\n")
        #expect(try entries(SafeSave.split(path).directory) == ["a.txt", "b.txt"])
    }

    @Test("create-only never replaces a file; a new file gets 0666 less the umask")
    func createOnly() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "there.txt")
        #expect(throws: SaveError.alreadyExists(path: path)) { try save("x", to: path, expected: nil, createOnly: true) }
        #expect(try fileText(path) == "old\n")
        let new = SafeSave.split(path).directory + "/new.txt"
        try save("fresh\n", to: new, expected: nil, createOnly: true)
        #expect(try fileText(new) == "fresh\n")
        #expect(try fileStatusMode(new) == 0o666 & ~SafeSave.processUmask)
    }

    @Test("a directory or a read-only file is refused; the content producer's failure leaves the file alone")
    func refusals() throws {
        let directory = makeTemporaryDirectory()
        mkdir(directory + "/dir", 0o755)
        #expect(throws: SaveError.notRegularFile(path: directory + "/dir", kind: "directory")) {
            try save("x", to: directory + "/dir", expected: nil)
        }
        let readOnly = writeTemporaryFile(Array("ro\n".utf8), name: "ro.txt")
        chmod(readOnly, 0o444)
        do {
            let expected = try identity(readOnly)
            try save("x", to: readOnly, expected: expected)
            Issue.record("a read-only file was replaced")
        } catch {
            guard case .fileSystem(let detail)? = error as? SaveError else { Issue.record("\(error)"); return }
            #expect(detail.code == "EACCES")
            #expect(detail.syscall == "faccessat")
        }
        #expect(try fileText(readOnly) == "ro\n")
        let path = writeTemporaryFile(Array("keep\n".utf8), name: "keep.txt")
        #expect(throws: SaveError.unencodable(offset: 3, scalar: 0x20AC, encoding: .latin1)) {
            try SafeSave.save(SafeSave.Request(path: path, expected: try identity(path))) { (sink) throws(SaveError) in
                try sink.write(Array("abc".utf8))
                throw .unencodable(offset: 3, scalar: 0x20AC, encoding: .latin1)
            }
        }
        #expect(try fileText(path) == "keep\n")
        #expect(try entries(SafeSave.split(path).directory) == ["keep.txt"])
    }

    @Test("a cancelled save leaves the file and no temp file")
    func cancelled() throws {
        let path = writeTemporaryFile(Array("old\n".utf8), name: "doc.txt")
        #expect(throws: SaveError.cancelled) {
            try SafeSave.save(SafeSave.Request(path: path, expected: try identity(path)), isCancelled: { true }) { (sink) throws(SaveError) in
                try sink.write(Array("new".utf8))
            }
        }
        #expect(try fileText(path) == "old\n")
        #expect(try entries(SafeSave.split(path).directory) == ["doc.txt"])
    }

    @Test("large contents go out in pieces (gathered, not copied): progress reaches the size, the bytes are exact")
    func large() throws {
        let path = writeTemporaryFile([], name: "big.txt")
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<(2 << 20) + 12_345).map { _ in UInt8.random(in: 32...126, using: &generator) }
        let progress = Probe()
        let outcome = try SafeSave.save(SafeSave.Request(path: path, expected: try identity(path)), progress: { progress.record($0) }) { (sink) throws(SaveError) in
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 1000)
                try sink.write(Array(bytes[offset..<end]))
                offset = end
            }
        }
        #expect(outcome.size == bytes.count)
        #expect(try contentsOf(path) == bytes)
        #expect(progress.values.last == bytes.count)
    }

    @Test("the sweep reads a large directory whole (names of every length, records up to the end of readdir's buffer)")
    func sweepLargeDirectory() throws {
        let path = writeTemporaryFile(Array("doc\n".utf8), name: "doc.txt")
        let directory = SafeSave.split(path).directory
        var ours = 0
        for index in 0..<6_000 {
            let length = 1 + index % 200
            let name = index % 500 == 0 ? SafeSave.tempPrefix + String(index) : String(repeating: "n", count: length) + "-\(index)"
            if index % 500 == 0 { ours += 1 }
            close(open(directory + "/" + name, O_WRONLY | O_CREAT, 0o644))
        }
        for _ in 0..<3 { _ = SafeSave.sweepStaleTempFiles(nextTo: path) }
        let left = try entries(directory)
        #expect(left.count == 6_001 - ours)
        #expect(!left.contains { $0.hasPrefix(SafeSave.tempPrefix) })
        try FileManager.default.removeItem(atPath: directory)
    }

    @Test("the sweep removes our temp files beside a document, and nothing else")
    func sweep() throws {
        let path = writeTemporaryFile(Array("doc\n".utf8), name: "doc.txt")
        let directory = SafeSave.split(path).directory
        for name in [".docsession-save-1234", ".docsession-backup-5678", "other.txt"] {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data("x".utf8))
        }
        #expect(SafeSave.sweepStaleTempFiles(nextTo: path) == [".docsession-save-1234"])
        #expect(try entries(directory) == [".docsession-backup-5678", "doc.txt", "other.txt"])
    }
}

@Suite("ContentHasher: XXH64")
struct ContentHasherTests {
    @Test("the reference values of XXH64 (seed 0)")
    func referenceValues() {
        #expect(ContentHasher.hash([]) == 0xEF46_DB37_51D8_E999)
        #expect(ContentHasher.hash(Array("a".utf8)) == 0xD24E_C4F1_A98C_6E5B)
        #expect(ContentHasher.hash(Array("abc".utf8)) == 0x44BC_2CF5_AD77_0999)
        #expect(ContentHasher.hash(Array("Nobody inspects the spammish repetition".utf8)) == 0xFBCE_A83C_8A37_8BF1)
    }

    @Test("fed in any pieces, the hash is the one-shot hash")
    func pieces() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0..<300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var hasher = ContentHasher()
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + Int.random(in: 1...40, using: &generator))
                bytes[offset..<end].withUnsafeBytes { hasher.update($0) }
                offset = end
            }
            #expect(hasher.finalize() == ContentHasher.hash(bytes))
        }
    }
}

func fileStatusMode(_ path: String) throws -> mode_t {
    var status = stat()
    guard stat(path, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
    return status.st_mode & 0o7777
}

func contentsOf(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

final class Probe: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Int] = []
    func record(_ value: Int) { lock.withLock { recorded.append(value) } }
    var values: [Int] { lock.withLock { recorded } }
}

/// Counts calls from a `@Sendable` closure.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
