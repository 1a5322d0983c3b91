import CFileSystem
import CXXHash
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// The journal's files: one per document with unsaved changes, under `<state dir>/journal/` (0700).
// What the records mean is DocumentSession's (Journal.swift); this file knows their framing, the
// files, and the locks that tell a live server's journal from a dead one's.
//
// A file is the 8 bytes `DSJRNL1\n`, then records. A record is
//
//     crc32c: UInt32 LE   of the type byte and the payload
//     length: UInt32 LE   of the payload
//     type:   UInt8
//     payload
//
// (LevelDB's log without its 32 KiB blocks: a record is read whole, so a length may be large.)
// Reading stops at the first record that is not whole or whose checksum does not hold, and reports
// where and why: nothing after it is guessed at (RocksDB's point-in-time recovery: a file system
// may reorder writes, so a good record after a bad one proves nothing).

/// CRC-32C (Castagnoli) of bytes, extended from `crc` (0 to start).
public func crc32c(_ bytes: UnsafeRawBufferPointer, extending crc: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
    return cfs_crc32c_extend(crc, base, bytes.count)
}

/// CRC-32C of a byte collection.
public func crc32c(_ bytes: some Collection<UInt8>, extending crc: UInt32 = 0) -> UInt32 {
    if let result = bytes.withContiguousStorageIfAvailable({ crc32c(UnsafeRawBufferPointer($0), extending: crc) }) {
        return result
    }
    return Array(bytes).withUnsafeBytes { crc32c($0, extending: crc) }
}

/// The framing of the journal's records.
public enum JournalFraming {
    /// The first bytes of every journal file.
    public static let magic: [UInt8] = Array("DSJRNL1\n".utf8)
    /// The bytes before a record's payload.
    public static let headerSize = 9
    /// The largest payload a record can hold.
    public static let maxPayload = Int(UInt32.max)

    /// Appends one record of `type` holding `payload` to `out`.
    public static func append(type: UInt8, payload: some Collection<UInt8>, to out: inout [UInt8]) {
        precondition(payload.count <= maxPayload, "a journal record holds at most 4 GiB")
        let crc = crc32c(payload, extending: crc32c([type]))
        appendHeader(crc: crc, length: payload.count, type: type, to: &out)
        out.append(contentsOf: payload)
    }

    /// Appends a record's header (for a payload written separately, in parts).
    public static func appendHeader(crc: UInt32, length: Int, type: UInt8, to out: inout [UInt8]) {
        withUnsafeBytes(of: crc.littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(length).littleEndian) { out.append(contentsOf: $0) }
        out.append(type)
    }

    /// One record read back: its type, where its payload lies in the bytes read, and where the
    /// record starts.
    public struct Record: Sendable, Equatable {
        public var type: UInt8
        public var payload: Range<Int>
        public var offset: Int
    }

    /// Where reading stopped before the end of the file, and why.
    public struct Cut: Sendable, Equatable, CustomStringConvertible {
        /// The offset of the first byte not used (the start of the bad record).
        public var offset: Int
        /// How many bytes from there to the end of the file were left out.
        public var bytes: Int
        /// Why: `torn` (the file ends inside a record), `checksum` (a record's checksum does not
        /// hold), `notAJournal` (the file does not start with the magic bytes), `unreadable` (a
        /// whole record whose content made no sense, reported by the reader of the records), or
        /// `notOnBase` (a package's journal whose changes could not be replayed onto a tree that
        /// is not its base, and so were not at all: PackageJournal.swift).
        public var reason: String

        public init(offset: Int, bytes: Int, reason: String) {
            self.offset = offset
            self.bytes = bytes
            self.reason = reason
        }

        public var description: String { "\(bytes) bytes cut at offset \(offset) (\(reason))" }
    }

    /// The whole records of `bytes` (a journal file's content), in order, and where reading stopped
    /// before the end, if it did.
    public static func records(in bytes: [UInt8]) -> (records: [Record], cut: Cut?) {
        guard bytes.count >= magic.count, bytes[0..<magic.count].elementsEqual(magic) else {
            return ([], Cut(offset: 0, bytes: bytes.count, reason: bytes.isEmpty ? "torn" : "notAJournal"))
        }
        var records: [Record] = []
        var offset = magic.count
        return bytes.withUnsafeBytes { raw -> ([Record], Cut?) in
            while offset < raw.count {
                let left = raw.count - offset
                guard left >= headerSize else { return (records, Cut(offset: offset, bytes: left, reason: "torn")) }
                let crc = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
                guard left - headerSize >= length else { return (records, Cut(offset: offset, bytes: left, reason: "torn")) }
                let type = raw[offset + 8]
                let payload = (offset + headerSize)..<(offset + headerSize + length)
                let computed = crc32c(UnsafeRawBufferPointer(rebasing: raw[payload]), extending: crc32c([type]))
                guard computed == crc else { return (records, Cut(offset: offset, bytes: left, reason: "checksum")) }
                records.append(Record(type: type, payload: payload, offset: offset))
                offset = payload.upperBound
            }
            return (records, nil)
        }
    }
}

/// The directory of journal files (`<state dir>/journal`, mode 0700) and the names in it.
///
/// A journal's name is `<key>-<random>.journal`, where the key is the XXH64 of the document's
/// path in 16 hex digits: the journals of one file are found by listing, and two servers (or one
/// server's journal and a dead one's) never share a name.
public struct JournalDirectory: Sendable {
    public let path: String

    /// Opens (creating it and its parents, mode 0700) the journal directory under `stateDirectory`,
    /// and checks that a file can be made in it.
    public static func open(stateDirectory: String) throws(FileSystemError) -> JournalDirectory {
        let path = (stateDirectory.hasSuffix("/") ? stateDirectory : stateDirectory + "/") + "journal"
        try makePrivateDirectory(path, purpose: "the journal directory")
        return JournalDirectory(path: path)
    }

    /// The key of a document's path in journal names.
    public static func key(forPath documentPath: String) -> String {
        var bytes = Array(documentPath.utf8)
        let hash = bytes.withUnsafeMutableBytes { XXH64($0.baseAddress, $0.count, 0) }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The name's ending: `.journal` for a text document's journal, `.pjournal` for a package's
    /// (their records differ: each reader sees only its own).
    public static func suffix(package: Bool) -> String { package ? ".pjournal" : ".journal" }

    /// A new, unused name for a journal of `documentPath`.
    public static func newName(forPath documentPath: String, package: Bool = false) -> String {
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return key(forPath: documentPath) + "-" + String(repeating: "0", count: 16 - random.count) + random + suffix(package: package)
    }

    /// The names of every journal file in the directory (of text documents, or of packages).
    public func allNames(package: Bool = false) -> [String] {
        let names = ((try? DocumentNaming.entryNames(in: path)) ?? []).map { String(decoding: $0, as: UTF8.self) }
        let suffix = Self.suffix(package: package)
        return names.filter { $0.hasSuffix(suffix) && !$0.hasPrefix(".") }.sorted()
    }

    /// The names of the journal files of `documentPath`.
    public func names(forPath documentPath: String, package: Bool = false) -> [String] {
        let prefix = Self.key(forPath: documentPath) + "-"
        return allNames(package: package).filter { $0.hasPrefix(prefix) }
    }

    /// The full path of a name.
    public func path(of name: String) -> String { path + "/" + name }

    /// Takes the journal `name` when no live server holds it: its lock, and everything in it. nil
    /// when another open file holds its lock (a live server's; this process's own other
    /// descriptors count too) or when it is gone.
    public func claim(_ name: String) -> ClaimedJournal? {
        let file = path(of: name)
        guard let descriptor = try? Descriptor.open(file, .readWrite, options: [.noFollow]) else { return nil }
        guard (try? descriptor.tryLockExclusive(path: file)) == true else { return nil }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
              let bytes = try? readToEnd(from: descriptor.unowned, path: file)
        else { return nil }
        let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        return ClaimedJournal(directory: self, name: name, descriptor: descriptor, bytes: bytes, modified: modified)
    }
}

/// A journal file this process holds the lock of: a dead server's, taken to be offered, recovered
/// or discarded. Letting it go releases the lock (the file stays); ``remove()`` deletes it.
public final class ClaimedJournal: Sendable {
    public let directory: JournalDirectory
    public let name: String
    let descriptor: Descriptor
    /// The file's content when it was claimed.
    public let bytes: [UInt8]
    /// When the file was last written (nanoseconds since 1970).
    public let modified: Int64

    init(directory: JournalDirectory, name: String, descriptor: consuming Descriptor, bytes: [UInt8], modified: Int64) {
        self.directory = directory
        self.name = name
        self.descriptor = descriptor
        self.bytes = bytes
        self.modified = modified
    }

    /// Deletes the file (the lock goes when this value does).
    public func remove() {
        try? removeFile(directory.path(of: name))
    }

    /// Makes it a journal to append to: cut at `length` (the end of its last whole record),
    /// positioned at its end.
    public func reopenForAppending(length: Int) throws(FileSystemError) -> JournalFile {
        let file = directory.path(of: name)
        do throws(SystemCallError) {
            let duplicate = try Descriptor.duplicate(descriptor.unowned, atLeast: 3)
            try duplicate.truncate(to: length, path: file)
            try duplicate.seekToEnd(path: file)
            return JournalFile(directory: directory, name: name, descriptor: duplicate, size: length)
        } catch {
            throw FileSystemError(error, path: file)
        }
    }
}

/// A journal this process writes: created with its lock held, appended to, flushed, renamed and
/// removed by one thread at a time (the journal's writer).
public final class JournalFile {
    public let directory: JournalDirectory
    public private(set) var name: String
    let descriptor: Descriptor
    /// The bytes written so far.
    public private(set) var size: Int

    init(directory: JournalDirectory, name: String, descriptor: consuming Descriptor, size: Int) {
        self.directory = directory
        self.name = name
        self.descriptor = descriptor
        self.size = size
    }

    /// Creates the journal `name` (never replacing a file), takes its lock and writes the magic
    /// bytes.
    public static func create(in directory: JournalDirectory, name: String) throws(FileSystemError) -> JournalFile {
        let file = directory.path(of: name)
        do throws(SystemCallError) {
            let descriptor = try Descriptor.open(
                file, .readWrite, options: [.create, .exclusiveCreate, .noFollow], permissions: [.ownerReadWrite])
            guard try descriptor.tryLockExclusive(path: file) else {
                throw SystemCallError(errno: .resourceTemporarilyUnavailable, call: "flock", path: file)
            }
            try writeAll(JournalFraming.magic, to: descriptor.unowned, path: file)
            return JournalFile(directory: directory, name: name, descriptor: descriptor, size: JournalFraming.magic.count)
        } catch {
            try? removeFile(file)
            throw FileSystemError(error, path: file)
        }
    }

    public var path: String { directory.path(of: name) }

    /// Appends `bytes` (whole records). On a failure the file is cut back to where it was, so that
    /// it never ends in a part of a record this process wrote.
    public func append(_ bytes: [UInt8]) throws(FileSystemError) {
        guard !bytes.isEmpty else { return }
        do throws(SystemCallError) {
            try writeAll(bytes, to: descriptor.unowned, path: path)
            size += bytes.count
        } catch {
            try? descriptor.truncate(to: size, path: path)
            _ = try? descriptor.seekToEnd(path: path)
            throw FileSystemError(error, path: path)
        }
    }

    /// Appends one record whose payload is `prefix` followed by the parts `parts` yields (a large
    /// text, written without a copy of it whole).
    public func appendRecord(
        type: UInt8, prefix: [UInt8], length: Int, parts: (_ body: (UnsafeRawBufferPointer) -> Void) -> Void
    ) throws(FileSystemError) {
        guard prefix.count + length <= JournalFraming.maxPayload else {
            throw FileSystemError(errno: EFBIG, syscall: "write", path: path, reason: "a text too large for one journal record")
        }
        var crc = crc32c(prefix, extending: crc32c([type]))
        parts { crc = crc32c($0, extending: crc) }
        var head: [UInt8] = []
        JournalFraming.appendHeader(crc: crc, length: prefix.count + length, type: type, to: &head)
        head.append(contentsOf: prefix)
        let start = size
        var failure: SystemCallError? = nil
        do throws(SystemCallError) {
            try writeAll(head, to: descriptor.unowned, path: path)
            var written = 0
            parts { part in
                guard failure == nil else { return }
                do throws(SystemCallError) { try writeAll(part, to: descriptor.unowned, path: path); written += part.count } catch { failure = error }
            }
            if let failure { throw failure }
            guard written == length else { throw SystemCallError(errno: .invalidArgument, call: "write", path: path) }
            size = start + head.count + length
        } catch {
            try? descriptor.truncate(to: start, path: path)
            _ = try? descriptor.seekToEnd(path: path)
            throw FileSystemError(error, path: path)
        }
    }

    /// Every byte written so far (read back with `pread`: the position stays at the end).
    public func contents() throws(FileSystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        let descriptor = descriptor.unowned, path = path
        let result = bytes.withUnsafeMutableBytes { buffer -> Result<Int, SystemCallError> in
            do throws(SystemCallError) {
                return .success(try readFully(into: buffer, from: descriptor, at: 0, path: path))
            } catch {
                return .failure(error)
            }
        }
        let read: Int
        switch result {
        case .success(let count): read = count
        case .failure(let error): throw FileSystemError(error, path: path)
        }
        guard read == size else { throw FileSystemError(errno: EIO, syscall: "pread", path: path, reason: "the journal is shorter than written") }
        return bytes
    }

    /// Flushes what was appended (`fdatasync`).
    public func sync() throws(FileSystemError) {
        do throws(SystemCallError) { try descriptor.syncData(path: path) } catch { throw FileSystemError(error, path: path) }
    }

    /// Renames the file to `newName` in the same directory (the lock stays: it is the open file's).
    public func rename(to newName: String) throws(FileSystemError) {
        let destination = directory.path(of: newName)
        do throws(SystemCallError) { try renameFile(path, to: destination) } catch { throw FileSystemError(error, path: path) }
        name = newName
    }

    /// Deletes the file; the lock goes when this value does.
    public func remove() {
        try? removeFile(path)
    }

    /// Flushes the directory's entries (after a creation, rename or removal that must last).
    public func syncDirectory() {
        try? flushDirectory(at: directory.path)
    }
}
