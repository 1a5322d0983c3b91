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
        let directory = freshDirectory()
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

@Suite("ContentHasher: XXH64 through libxxhash")
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

    /// The hashes of the hand-written XXH64 that libxxhash replaced (computed with it, built with
    /// `swiftc -O`, before it was removed): the content hashes in identities and the version
    /// store's slot names, which are on disk, stay the same.
    static let handWritten: [(length: Int, seed0: UInt64, seedPrime1: UInt64)] = [
        (1, 0xD344_BBA2_863D_D894, 0xB56F_F5C8_2733_7640), (3, 0x8137_FD80_E1F7_CA03, 0xE2D1_0F6B_1FCA_C518),
        (4, 0x17AD_7619_88EE_FECF, 0x3444_E139_10E8_5C68), (5, 0x0181_E112_D84E_A125, 0x5D99_B8CF_3BF3_CD5F),
        (7, 0x2255_D5FF_1EDF_2DB0, 0x26F2_6A5C_88BA_110F), (8, 0x069B_F80E_2523_AFC5, 0xB33A_8D28_69F5_3F62),
        (9, 0xE2A6_756A_ABE6_671E, 0x579A_7A54_4CC3_A9ED), (15, 0x6B60_1381_A7F1_CDED, 0x135E_005A_16B3_D897),
        (16, 0xA8B3_8815_B5F0_EDCA, 0x14E8_0C7E_910E_0256), (31, 0xA508_1993_2215_D32C, 0x2147_837F_257A_3021),
        (32, 0x5FC3_1660_58E8_50F6, 0x68CF_839E_ABAF_176C), (33, 0xBEEA_4863_673B_DE59, 0xDAD1_231C_EBB4_9FCE),
        (63, 0xFE99_51A6_C61B_A6C1, 0x5AFC_3274_23A1_FA57), (64, 0x2428_CE01_26C4_35B9, 0x51FB_7DA7_FA54_AB83),
        (65, 0xE37B_0DAD_D2BA_BB1C, 0xC950_2E7E_9949_1A67), (100, 0xD4AC_883B_C0FA_3A3C, 0x9C81_9E89_2C08_3F84),
        (255, 0x5A90_E32D_7EF7_42C4, 0x686A_1FBD_299C_9491), (1000, 0xEA09_0445_1971_1FF1, 0xD27A_EA48_898A_1AE2),
        (4113, 0xAB9B_480A_48B2_2ED3, 0x4229_3B78_6A77_A02C), (65_536, 0xA11E_6DFD_294D_82E4, 0xC647_3273_73EA_E809),
        ((1 << 20) + 13, 0x50C7_E8D8_8825_B555, 0x104A_A365_143C_1A26),
    ]

    /// The inputs of ``handWritten``: SplitMix64 seeded with the length, the top byte of each draw.
    static func testBytes(_ count: Int) -> [UInt8] {
        var state = UInt64(count)
        return (0..<count).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return UInt8(truncatingIfNeeded: (z ^ (z >> 31)) >> 56)
        }
    }

    @Test("the same hashes as the hand-written XXH64 it replaced, one-shot and in pieces, with two seeds")
    func sameAsHandWritten() {
        for (length, seed0, seedPrime1) in Self.handWritten {
            let bytes = Self.testBytes(length)
            #expect(ContentHasher.hash(bytes) == seed0, "length \(length)")
            for (seed, expected) in [(UInt64(0), seed0), (0x9E37_79B1_85EB_CA87, seedPrime1)] {
                for piece in [1, 7, 32, 1 << 20] where piece <= max(length, 1) && (piece >= 32 || length <= 65_536) {
                    var hasher = ContentHasher(seed: seed)
                    var offset = 0
                    while offset < length {
                        let end = min(length, offset + piece)
                        bytes[offset..<end].withUnsafeBytes { hasher.update($0) }
                        offset = end
                    }
                    #expect(hasher.finalize() == expected, "length \(length), seed \(seed), pieces of \(piece)")
                }
            }
        }
        // The version store's slot names (the hash of the path, in hexadecimal).
        #expect(ContentHasher.hash("/home/user/notes.txt".utf8) == 0x4A35_94EE_FC83_7118)
        #expect(ContentHasher.hash("/tmp/docsession-protocol-fixtures/notes.txt".utf8) == 0x3AD2_07DA_A054_2F6F)
    }

    @Test("a copy of a hasher is a value: feeding one leaves the other as it was")
    func copies() {
        var first = ContentHasher()
        Array("abc".utf8).withUnsafeBytes { first.update($0) }
        var second = first
        Array(" and more".utf8).withUnsafeBytes { second.update($0) }
        #expect(first.finalize() == ContentHasher.hash(Array("abc".utf8)))
        #expect(second.finalize() == ContentHasher.hash(Array("abc and more".utf8)))
        Array("d".utf8).withUnsafeBytes { first.update($0) }
        #expect(first.finalize() == ContentHasher.hash(Array("abcd".utf8)))
        #expect(second.finalize() == ContentHasher.hash(Array("abc and more".utf8)))
    }

    @Test("a file's hash is the hash of its bytes")
    func file() throws {
        let bytes = Self.testBytes((1 << 20) * 2 + 5)  // three reads of hashFile's 1 MiB buffer
        let path = writeTemporaryFile(bytes, name: "hashed.bin")
        let (hash, identity) = try #require(ContentHasher.hashFile(path: path))
        #expect(hash == ContentHasher.hash(bytes))
        #expect(identity.size == Int64(bytes.count))
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
