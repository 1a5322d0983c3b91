import FileStore
import TextBuffer

// What the journal's records say (their framing and files: FileStore/JournalFile.swift), and how a
// journal is read back into a document's text, version and undo history.
//
// A journal holds, in order:
//
//  1. `header`: the document's path, the journal's start date, the file's encoding, byte order
//     mark, line endings and identity (device, inode, size, times, content hash), and the version
//     the base text had;
//  2. `base`: the base text, whole (UTF-8): the text last synced with the file (read, saved,
//     reloaded). Kept so that a recovery can merge when the file changed since;
//  3. `text`, at most once, right after the base: the text when the journal started, when that
//     was not the base (a journal started for a document already unsaved: after a save that left
//     edits unsaved, a compaction, a conflict resolved to a merge);
//  4. `change`s: one per change of the text (an edit, even one that changed nothing, an undo, a
//     redo, a restored version, ...): the version it produced, what it did to the undo history,
//     whether the document was unsaved after it, and its edits in UTF-8 offsets with the removed
//     and inserted text (enough to check each against the text it applies to);
//  5. `moved`: the document's file moved to another path.

/// The record types.
enum JournalRecordType: UInt8 {
    case header = 1, base = 2, text = 3, change = 4, moved = 5
}

/// What a change did to the undo history.
enum JournalHistoryOp: UInt8, Sendable {
    /// Nothing (an edit that changed no text: only the version moved).
    case none = 0
    /// A new undo step.
    case record = 1
    /// Folded into the last step.
    case merge = 2
    case undo = 3
    case redo = 4
}

/// One change as the store hands it to the journal.
struct JournalChange: Sendable {
    var history: JournalHistoryOp
    var label: String?
    /// The edits in the order they applied, each against the text the one before left.
    var edits: [AppliedEdit]
}

/// The first record of a journal.
struct JournalHeader: Sendable, Equatable {
    static let format: UInt8 = 1
    var path: String
    /// When the journal started (nanoseconds since 1970).
    var created: Int64
    var encoding: TextEncoding
    var byteOrderMark: Bool
    var lineEnding: LineEndingStyle
    var identity: FileIdentity
    var deletedOnDisk: Bool
    /// The version of the document when the journal started.
    var version: Int64
}

/// Little-endian fields, appended.
struct JournalBytes {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }
    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }
    mutating func string(_ value: String) {
        let utf8 = value.utf8
        u32(UInt32(utf8.count))
        if utf8.withContiguousStorageIfAvailable({ bytes.append(contentsOf: $0) }) == nil {
            bytes.append(contentsOf: utf8)
        }
    }
}

/// Little-endian fields, read; every read checks the bounds (a whole record whose checksum holds
/// was written by this code, but a reader never trusts a length).
struct JournalReader {
    let bytes: [UInt8]
    var offset: Int
    let end: Int

    struct Short: Error {}

    init(_ bytes: [UInt8], _ range: Range<Int>) {
        self.bytes = bytes
        offset = range.lowerBound
        end = range.upperBound
    }

    var isAtEnd: Bool { offset == end }

    mutating func take(_ count: Int) throws(Short) -> ArraySlice<UInt8> {
        guard count >= 0, end - offset >= count else { throw Short() }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func u8() throws(Short) -> UInt8 { try take(1).first! }
    mutating func u32() throws(Short) -> UInt32 {
        let slice = try take(4)
        return slice.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
    mutating func u64() throws(Short) -> UInt64 {
        let slice = try take(8)
        return slice.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
    mutating func i64() throws(Short) -> Int64 { Int64(bitPattern: try u64()) }
    mutating func bool() throws(Short) -> Bool { try u8() != 0 }
    mutating func string() throws(Short) -> String {
        let count = Int(try u32())
        return String(decoding: try take(count), as: UTF8.self)
    }
    mutating func rest() -> ArraySlice<UInt8> {
        defer { offset = end }
        return bytes[offset..<end]
    }
}

enum JournalCodec {
    /// A whole journal, in memory: the magic bytes, the header, the base and, when it differs, the
    /// text (with the version and whether it is unsaved): what a journal started for the document
    /// now would hold, without the changes before it.
    static func whole(header: JournalHeader, base: TextBuffer, text: TextBuffer, version: Int64, unsaved: Bool) -> [UInt8] {
        func utf8(_ text: TextBuffer, after prefix: [UInt8]) -> [UInt8] {
            var bytes = prefix
            bytes.reserveCapacity(prefix.count + text.utf8Count)
            for chunk in text.utf8Chunks { chunk.withUnsafeBytes { bytes.append(contentsOf: $0) } }
            return bytes
        }
        var out = JournalFraming.magic
        out += Self.header(header)
        JournalFraming.append(type: JournalRecordType.base.rawValue, payload: utf8(base, after: []), to: &out)
        if !text.isIdentical(to: base), text != base {
            var prefix = JournalBytes()
            prefix.i64(version)
            prefix.bool(unsaved)
            JournalFraming.append(type: JournalRecordType.text.rawValue, payload: utf8(text, after: prefix.bytes), to: &out)
        }
        return out
    }

    static func header(_ header: JournalHeader) -> [UInt8] {
        var out = JournalBytes()
        out.u8(JournalHeader.format)
        out.string(header.path)
        out.i64(header.created)
        out.string(header.encoding.rawValue)
        out.bool(header.byteOrderMark)
        out.string(header.lineEnding.rawValue)
        out.u64(header.identity.device)
        out.u64(header.identity.inode)
        out.i64(header.identity.size)
        out.i64(header.identity.modificationTime)
        out.i64(header.identity.changeTime)
        out.bool(header.identity.contentHash != nil)
        out.u64(header.identity.contentHash ?? 0)
        out.bool(header.deletedOnDisk)
        out.i64(header.version)
        var record: [UInt8] = []
        JournalFraming.append(type: JournalRecordType.header.rawValue, payload: out.bytes, to: &record)
        return record
    }

    static func readHeader(_ reader: inout JournalReader) throws(JournalReader.Short) -> JournalHeader? {
        guard try reader.u8() == JournalHeader.format else { return nil }
        let path = try reader.string()
        let created = try reader.i64()
        guard let encoding = TextEncoding(rawValue: try reader.string()) else { return nil }
        let byteOrderMark = try reader.bool()
        guard let lineEnding = LineEndingStyle(rawValue: try reader.string()) else { return nil }
        var identity = FileIdentity(
            device: try reader.u64(), inode: try reader.u64(), size: try reader.i64(),
            modificationTime: try reader.i64(), changeTime: try reader.i64())
        let hasHash = try reader.bool()
        let hash = try reader.u64()
        identity.contentHash = hasHash ? hash : nil
        let deletedOnDisk = try reader.bool()
        let version = try reader.i64()
        return JournalHeader(
            path: path, created: created, encoding: encoding, byteOrderMark: byteOrderMark, lineEnding: lineEnding,
            identity: identity, deletedOnDisk: deletedOnDisk, version: version)
    }

    /// The `change` record of `change`, which left the document at `version`, unsaved or not.
    static func change(_ change: JournalChange, version: Int64, unsaved: Bool) -> [UInt8] {
        var out = JournalBytes()
        appendChange(change, version: version, unsaved: unsaved, to: &out)
        return out.bytes
    }

    /// The bytes a `change` record of `change` takes, framing included (for the journal's bound).
    static func size(of change: JournalChange) -> Int {
        var size = JournalFraming.headerSize + 18 + (change.label?.utf8.count ?? 0)
        for edit in change.edits { size += 16 + edit.removedText.utf8.count + edit.insertedText.utf8.count }
        return size
    }

    /// Appends the `change` record of `change` to `out`: the payload is written in place after room
    /// for the record's header, which is filled in last (one buffer, no copy of the payload).
    static func appendChange(_ change: JournalChange, version: Int64, unsaved: Bool, to out: inout JournalBytes) {
        let start = out.bytes.count
        out.bytes.append(contentsOf: repeatElement(0, count: 8))
        out.u8(JournalRecordType.change.rawValue)
        out.i64(version)
        out.u8(change.history.rawValue)
        out.bool(unsaved)
        out.string(change.label ?? "")
        out.u32(UInt32(change.edits.count))
        for edit in change.edits {
            out.u64(UInt64(edit.utf8Range.lowerBound))
            out.string(edit.removedText)
            out.string(edit.insertedText)
        }
        let length = out.bytes.count - start - JournalFraming.headerSize
        out.bytes.withUnsafeMutableBytes { raw in
            // The checksum covers the type byte and the payload.
            let crc = crc32c(UnsafeRawBufferPointer(rebasing: raw[(start + 8)...]))
            raw.storeBytes(of: crc.littleEndian, toByteOffset: start, as: UInt32.self)
            raw.storeBytes(of: UInt32(length).littleEndian, toByteOffset: start + 4, as: UInt32.self)
        }
    }

    static func moved(to path: String) -> [UInt8] {
        var out = JournalBytes()
        out.string(path)
        var record: [UInt8] = []
        JournalFraming.append(type: JournalRecordType.moved.rawValue, payload: out.bytes, to: &record)
        return record
    }
}

/// A journal read back: the document as the journal leaves it.
struct RecoveredJournal: Sendable {
    var header: JournalHeader
    /// The path the document had last (after the moves the journal recorded).
    var path: String
    var baseText: TextBuffer
    var text: TextBuffer
    var history: UndoHistory
    var version: Int64
    /// Whether the document was unsaved at the end (by the journal's last change).
    var unsaved: Bool
    /// The changes that changed the text.
    var edits: Int
    /// The length of the whole records read (where appending may go on).
    var length: Int
    /// Where reading stopped before the end, and why.
    var cut: JournalFraming.Cut?

    /// Reads a journal's bytes. nil when there is nothing to recover: no whole header and base (a
    /// journal cut before its first change was flushed), or not a journal at all.
    static func read(_ bytes: [UInt8]) -> RecoveredJournal? {
        let (records, framingCut) = JournalFraming.records(in: bytes)
        guard records.count >= 2, records[0].type == JournalRecordType.header.rawValue,
              records[1].type == JournalRecordType.base.rawValue
        else { return nil }
        var headerReader = JournalReader(bytes, records[0].payload)
        guard let header = try? JournalCodec.readHeader(&headerReader),
              let base = TextBuffer(utf8: bytes[records[1].payload])
        else { return nil }
        var journal = RecoveredJournal(
            header: header, path: header.path, baseText: base, text: base, history: UndoHistory(), version: header.version,
            unsaved: false, edits: 0, length: records[1].payload.upperBound, cut: framingCut)
        for (index, record) in records.enumerated().dropFirst(2) {
            if !journal.apply(record, bytes: bytes, first: index == 2) {
                journal.cut = JournalFraming.Cut(offset: record.offset, bytes: bytes.count - record.offset, reason: "unreadable")
                break
            }
            journal.length = record.payload.upperBound
        }
        return journal
    }

    /// Applies one record; false when it does not fit (its edits do not match the text).
    private mutating func apply(_ record: JournalFraming.Record, bytes: [UInt8], first: Bool) -> Bool {
        var reader = JournalReader(bytes, record.payload)
        switch JournalRecordType(rawValue: record.type) {
        case .text:
            guard first, let version = try? reader.i64(), let unsaved = try? reader.bool(),
                  let started = TextBuffer(utf8: reader.rest())
            else { return false }
            // The text the journal started from, as one undoable step from the base: undo goes
            // back to the base.
            let steps = TextDiff.edits(from: baseText, to: started)
            for step in steps { text.apply(step) }
            history.record(steps, label: nil)
            self.version = version
            self.unsaved = unsaved
            if !unsaved { history.markClean() }
            if !steps.isEmpty { edits += 1 }
            return true
        case .change:
            do throws(JournalReader.Short) {
                let version = try reader.i64()
                guard let op = JournalHistoryOp(rawValue: try reader.u8()) else { return false }
                let unsaved = try reader.bool()
                let label = try reader.string()
                let count = Int(try reader.u32())
                guard count <= record.payload.count else { return false }
                var changes: [AppliedEdit] = []
                changes.reserveCapacity(count)
                var check = text
                for _ in 0..<count {
                    let start = Int(try reader.u64())
                    let removed = try reader.string()
                    let inserted = try reader.string()
                    let end = start + removed.utf8.count
                    guard start >= 0, end <= check.utf8Count, check.text(in: start..<end).utf8.elementsEqual(removed.utf8) else {
                        return false
                    }
                    let edit = AppliedEdit(utf8Range: start..<end, removedText: removed, insertedText: inserted)
                    check.apply(edit)
                    changes.append(edit)
                }
                guard reader.isAtEnd else { return false }
                switch op {
                case .none:
                    guard changes.isEmpty else { return false }
                case .record, .merge:
                    text = check
                    history.record(changes, label: label.isEmpty ? nil : label, merge: op == .merge)
                case .undo:
                    if history.editsForUndo() == changes {
                        _ = history.undo(&text, encoding: .utf8)
                    } else {
                        // Not a step this history holds (one from before the journal started):
                        // the text as it was, and a step that undo can take back.
                        text = check
                        history.record(changes, label: "Undo")
                    }
                case .redo:
                    if history.editsForRedo() == changes {
                        _ = history.redo(&text, encoding: .utf8)
                    } else {
                        text = check
                        history.record(changes, label: "Redo")
                    }
                }
                self.version = version
                self.unsaved = unsaved
                if !unsaved {
                    history.markClean()
                } else if !history.hasUnsavedChanges {
                    history.forgetCleanPoint()
                }
                if !changes.isEmpty { edits += 1 }
                return true
            } catch {
                return false
            }
        case .moved:
            guard let path = try? reader.string(), reader.isAtEnd else { return false }
            self.path = path
            return true
        case .header, .base, nil:
            return false
        }
    }
}
