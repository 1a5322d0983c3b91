import CFileSystem
import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

@Suite("CRC-32C")
struct CRC32CTests {
    @Test("the standard's check values (RFC 3720 B.4, and the CRC catalogue's check)")
    func vectors() {
        #expect(crc32c(Array("123456789".utf8)) == 0xE306_9283)
        #expect(crc32c([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(crc32c([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(crc32c((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(crc32c((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
        #expect(crc32c([UInt8]()) == 0)
    }

    @Test("the processor's instruction and the table agree, at every length and alignment; extending composes")
    func hardwareAndTable() {
        var generator = SeededGenerator(seed: 17)
        let bytes = (0..<1100).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { raw in
            for start in 0..<9 {
                for length in [0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 1000] {
                    let base = raw.baseAddress! + start
                    let fast = cfs_crc32c_extend(0, base, length)
                    let table = cfs_crc32c_extend_portable(0, base, length)
                    #expect(fast == table, "length \(length) at \(start)")
                    let split = length / 3
                    #expect(cfs_crc32c_extend(cfs_crc32c_extend(0, base, split), base + split, length - split) == table)
                }
            }
        }
    }
}

@Suite("Journal framing")
struct JournalFramingTests {
    /// The magic bytes and three records.
    static func sample() -> (bytes: [UInt8], offsets: [Int]) {
        var bytes = JournalFraming.magic
        var offsets: [Int] = []
        for (type, payload) in [(UInt8(1), Array("header".utf8)), (2, []), (4, Array(repeating: 0xAB, count: 300))] {
            offsets.append(bytes.count)
            JournalFraming.append(type: type, payload: payload, to: &bytes)
        }
        return (bytes, offsets)
    }

    @Test("records read back whole, in order, with their types and payloads")
    func roundTrip() {
        let (bytes, offsets) = Self.sample()
        let (records, cut) = JournalFraming.records(in: bytes)
        #expect(cut == nil)
        #expect(records.map(\.type) == [1, 2, 4])
        #expect(records.map(\.offset) == offsets)
        #expect(Array(bytes[records[0].payload]) == Array("header".utf8))
        #expect(records[1].payload.isEmpty)
        #expect(bytes[records[2].payload].allSatisfy { $0 == 0xAB } && records[2].payload.count == 300)
    }

    @Test("a file cut at any byte of its last record keeps the records before and reports the cut as torn")
    func tornAtEveryByte() {
        let (bytes, offsets) = Self.sample()
        let last = offsets[2]
        for length in last..<bytes.count {
            let (records, cut) = JournalFraming.records(in: Array(bytes[0..<length]))
            #expect(records.count == 2, "cut at \(length)")
            if length == last {
                #expect(cut == nil)
            } else {
                #expect(cut == JournalFraming.Cut(offset: last, bytes: length - last, reason: "torn"), "cut at \(length)")
            }
        }
    }

    @Test("a changed byte in a record stops reading there (checksum), even when later records are whole")
    func corruptInTheMiddle() {
        var (bytes, offsets) = Self.sample()
        bytes[offsets[1] + 8] ^= 0x01  // the second record's type byte
        let (records, cut) = JournalFraming.records(in: bytes)
        #expect(records.count == 1)
        #expect(cut == JournalFraming.Cut(offset: offsets[1], bytes: bytes.count - offsets[1], reason: "checksum"))
        var payload = Self.sample().bytes
        payload[offsets[2] + JournalFraming.headerSize + 100] ^= 0x80
        #expect(JournalFraming.records(in: payload).cut?.reason == "checksum")
        #expect(JournalFraming.records(in: payload).records.count == 2)
    }

    @Test("bytes that are not a journal are cut whole")
    func notAJournal() {
        #expect(JournalFraming.records(in: Array("hello world".utf8)).cut?.reason == "notAJournal")
        #expect(JournalFraming.records(in: []).cut?.reason == "torn")
    }
}

@Suite("Journal files and their locks")
struct JournalFileTests {
    @Test("a journal held by a writer cannot be claimed; once let go it can, with everything written")
    func claimOnlyWhenNotHeld() throws {
        let state = try TemporaryDirectory()
        let directory = try JournalDirectory.open(stateDirectory: state.path + "/nested/state")
        var status = stat()
        #expect(stat(directory.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
        let name = JournalDirectory.newName(forPath: "/notes/a.txt")
        #expect(name.hasPrefix(JournalDirectory.key(forPath: "/notes/a.txt") + "-") && name.hasSuffix(".journal"))
        var record: [UInt8] = []
        JournalFraming.append(type: 1, payload: Array("x".utf8), to: &record)
        do {
            let file = try JournalFile.create(in: directory, name: name)
            try file.append(record)
            try file.sync()
            #expect(directory.names(forPath: "/notes/a.txt") == [name])
            #expect(directory.names(forPath: "/notes/b.txt").isEmpty)
            #expect(directory.claim(name) == nil, "a live writer's journal must not be claimable")
        }
        let claimed = try #require(directory.claim(name))
        #expect(claimed.bytes == JournalFraming.magic + record)
        #expect(directory.claim(name) == nil, "a claimed journal must not be claimable twice")
        let reopened = try claimed.reopenForAppending(length: JournalFraming.magic.count)
        try reopened.append(record + record)
        #expect(reopened.size == JournalFraming.magic.count + 2 * record.count)
        claimed.remove()
        #expect(directory.allNames().isEmpty)
    }

    @Test("a directory that cannot be written is refused when opened, naming it")
    func unwritable() throws {
        let state = try TemporaryDirectory()
        _ = try state.write("journal", "a file where the directory should be")
        #expect(throws: FileSystemError.self) { try JournalDirectory.open(stateDirectory: state.path) }
    }
}

/// The names in `directory`, but `.` and `..`.
private func snapshotEntries(_ directory: String) throws(FileSystemError) -> [String] {
    try DocumentNaming.entryNames(in: directory).map { String(decoding: $0, as: UTF8.self) }.filter { $0 != "." && $0 != ".." }.sorted()
}

@Suite("Session snapshots' files")
struct SnapshotDirectoryTests {
    @Test("a snapshot is written whole under its token (0700), read back, its journal copy moved into the journal directory as the newest, and removed")
    func writeReadMoveRemove() throws {
        let state = try TemporaryDirectory()
        let snapshots = try SnapshotDirectory.open(stateDirectory: state.path)
        let journals = try JournalDirectory.open(stateDirectory: state.path)
        let token = SnapshotDirectory.newToken()
        #expect(SnapshotDirectory.isToken(token))
        #expect(try snapshots.readManifest(token: token) == nil, "nothing under a token never written")
        let journal = JournalFraming.magic + Array("records".utf8)
        try snapshots.write(token: token, manifest: Array("{}".utf8), journals: [("1.journal", journal)])
        var status = stat()
        #expect(stat(snapshots.path(of: token), &status) == 0 && status.st_mode & 0o777 == 0o700)
        #expect(try snapshots.readManifest(token: token) == Array("{}".utf8))
        #expect(snapshots.tokens().map(\.token) == [token])
        // No partial directory is left beside it.
        #expect(try snapshotEntries(snapshots.path) == [token])

        // An old modification time on the copy: the move makes it now.
        var old = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, snapshots.path(of: token) + "/1.journal", &old, 0) == 0)
        let name = JournalDirectory.newName(forPath: "/notes/a.txt")
        try snapshots.moveJournal(token: token, name: "1.journal", into: journals, as: name)
        #expect(journals.names(forPath: "/notes/a.txt") == [name])
        let claimed = try #require(journals.claim(name))
        #expect(claimed.bytes == journal)
        #expect(claimed.modified > 1_000_000 * 1_000_000_000 * 1000, "the moved copy is dated now, the newest journal of its file")
        // A copy cannot be moved twice, nor a name that is not a copy's.
        #expect(throws: FileSystemError.self) {
            try snapshots.moveJournal(token: token, name: "1.journal", into: journals, as: JournalDirectory.newName(forPath: "/x"))
        }
        #expect(throws: FileSystemError.self) {
            try snapshots.moveJournal(token: token, name: "../manifest.json", into: journals, as: JournalDirectory.newName(forPath: "/x"))
        }
        #expect(snapshots.remove(token: token))
        #expect(!snapshots.remove(token: token))
        #expect(try snapshots.readManifest(token: token) == nil)
        #expect(snapshots.tokens().isEmpty)
    }

    @Test("tokens and copy names that could name another file are refused")
    func names() throws {
        for bad in ["", "../x", "0123456789ABCDEF0123456789ABCDEF", String(repeating: "0", count: 31), String(repeating: "0", count: 33), ".partial-" + String(repeating: "a", count: 32)] {
            #expect(!SnapshotDirectory.isToken(bad), "\(bad)")
        }
        #expect(SnapshotDirectory.isJournalName("1.journal") && SnapshotDirectory.isJournalName("12.journal"))
        for bad in [".journal", "../1.journal", "1.journal/", "a.journal", "1.journa", "manifest.json", "1234567890123.journal"] {
            #expect(!SnapshotDirectory.isJournalName(bad), "\(bad)")
        }
        let state = try TemporaryDirectory()
        let snapshots = try SnapshotDirectory.open(stateDirectory: state.path)
        #expect(try snapshots.readManifest(token: "../journal") == nil)
        #expect(!snapshots.remove(token: "../journal"))
    }

    @Test("a write that fails leaves nothing: no token, no partial directory")
    func failedWriteLeavesNothing() throws {
        let state = try TemporaryDirectory()
        let snapshots = try SnapshotDirectory.open(stateDirectory: state.path)
        let token = SnapshotDirectory.newToken()
        // The same copy name twice: the second create fails (O_EXCL).
        #expect(throws: FileSystemError.self) {
            try snapshots.write(token: token, manifest: [], journals: [("1.journal", [1]), ("1.journal", [2])])
        }
        #expect(try snapshotEntries(snapshots.path).isEmpty)
    }
}
