import FileStore
import Synchronization
import TextBuffer

// Undo that survives (`initializationOptions.persistUndo`; issue 17, point 5): a document's undo
// history is kept on disk, one file per path (FileStore/UndoFile.swift), and given back when the
// path is opened again while the file still holds the bytes the history was kept for (Vim's
// undofile rule: the content hash decides). A reload of a file changed by another program while
// the document is open is an undoable step like any other, so such a change does not lose the
// history; a change while it is closed does.
//
// A file is the 8 bytes `DSUNDO1\n`, a CRC-32C (u32 LE) of everything after it, then (with the
// journal's field encoding, `JournalBytes`):
//
//     u8 format (1), string path, i64 size, u64 XXH64 of the file's bytes,
//     u32 steps, u32 position, u8 has a clean point, u32 clean position,
//     per step: u8 has a label, string label, u32 edits, per edit: u64 UTF-8 offset, string
//     removed, string inserted.
//
// The history is written as seen from its clean point (the file's text): the position is the
// clean point, and steps made after the last save are left out (`Snapshot.atCleanPoint()`).

enum PersistedUndo {
    static let magic: [UInt8] = Array("DSUNDO1\n".utf8)
    static let format: UInt8 = 1

    /// What a file holds.
    struct Contents: Sendable, Equatable {
        var path: String
        /// The size and XXH64 of the file's bytes the history ends at.
        var size: Int64
        var hash: UInt64
        var snapshot: UndoHistory.Snapshot
    }

    static func encode(_ contents: Contents) -> [UInt8] {
        var out = JournalBytes()
        out.bytes.append(contentsOf: magic)
        out.u32(0)  // the checksum, filled in last
        out.u8(format)
        out.string(contents.path)
        out.i64(contents.size)
        out.u64(contents.hash)
        let snapshot = contents.snapshot
        out.u32(UInt32(snapshot.steps.count))
        out.u32(UInt32(snapshot.position))
        out.bool(snapshot.cleanPosition != nil)
        out.u32(UInt32(snapshot.cleanPosition ?? 0))
        for step in snapshot.steps {
            out.bool(step.label != nil)
            out.string(step.label ?? "")
            out.u32(UInt32(step.edits.count))
            for edit in step.edits {
                out.u64(UInt64(edit.utf8Range.lowerBound))
                out.string(edit.removedText)
                out.string(edit.insertedText)
            }
        }
        let start = magic.count + 4
        let crc = out.bytes.withUnsafeBytes { crc32c(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        out.bytes.withUnsafeMutableBytes { $0.storeBytes(of: crc.littleEndian, toByteOffset: magic.count, as: UInt32.self) }
        return out.bytes
    }

    /// The contents of a file's bytes; nil when they are not a whole undo file of this format (the
    /// magic, the checksum, every length, the positions within the steps).
    static func decode(_ bytes: [UInt8]) -> Contents? {
        let start = magic.count + 4
        guard bytes.count >= start, bytes[..<magic.count].elementsEqual(magic) else { return nil }
        var header = JournalReader(bytes, magic.count..<start)
        guard let crc = try? header.u32(),
              crc == bytes.withUnsafeBytes({ crc32c(UnsafeRawBufferPointer(rebasing: $0[start...])) })
        else { return nil }
        var reader = JournalReader(bytes, start..<bytes.count)
        do throws(JournalReader.Short) {
            guard try reader.u8() == format else { return nil }
            let path = try reader.string()
            let size = try reader.i64()
            let hash = try reader.u64()
            let count = Int(try reader.u32())
            let position = Int(try reader.u32())
            let hasClean = try reader.bool()
            let clean = Int(try reader.u32())
            // Each step takes at least 9 bytes: a count larger than the bytes left is corrupt.
            guard count <= bytes.count / 9 else { return nil }
            var steps: [UndoHistory.Snapshot.Step] = []
            steps.reserveCapacity(count)
            for _ in 0..<count {
                let hasLabel = try reader.bool()
                let label = try reader.string()
                let editCount = Int(try reader.u32())
                guard editCount <= bytes.count / 16 else { return nil }
                var edits: [AppliedEdit] = []
                edits.reserveCapacity(editCount)
                for _ in 0..<editCount {
                    let offset = try reader.u64()
                    let removed = try reader.string()
                    let inserted = try reader.string()
                    guard offset <= UInt64(Int.max / 2) else { return nil }
                    let lower = Int(offset)
                    edits.append(AppliedEdit(utf8Range: lower..<lower + removed.utf8.count, removedText: removed, insertedText: inserted))
                }
                steps.append(UndoHistory.Snapshot.Step(edits: edits, label: hasLabel ? label : nil))
            }
            guard reader.isAtEnd, position <= count, !hasClean || clean <= count else { return nil }
            return Contents(
                path: path, size: size, hash: hash,
                snapshot: UndoHistory.Snapshot(steps: steps, position: position, cleanPosition: hasClean ? clean : nil))
        } catch {
            return nil
        }
    }

    /// Whether every step of `snapshot` fits `text`, the text at its position: each undo step,
    /// undone from there back to the oldest, and each redo step, redone from there to the newest,
    /// replaces exactly the text it says it removes. O(the history's text).
    static func fits(_ snapshot: UndoHistory.Snapshot, text: TextBuffer) -> Bool {
        func fits(_ edit: AppliedEdit, _ text: TextBuffer) -> Bool {
            edit.utf8Range.upperBound <= text.utf8Count
                && text.isScalarBoundary(edit.utf8Range.lowerBound) && text.isScalarBoundary(edit.utf8Range.upperBound)
                && text.text(in: edit.utf8Range).utf8.elementsEqual(edit.removedText.utf8)
        }
        var back = text
        for step in snapshot.steps[..<snapshot.position].reversed() {
            for edit in step.edits.reversed() {
                let inverse = edit.inverse
                guard fits(inverse, back) else { return false }
                back.apply(inverse)
            }
        }
        var forward = text
        for step in snapshot.steps[snapshot.position...] {
            for edit in step.edits {
                guard fits(edit, forward) else { return false }
                forward.apply(edit)
            }
        }
        return true
    }

    /// What was found for a file just opened.
    enum Found: Sendable {
        /// No history kept for the path (or only another path's, whose key is the same).
        case none
        /// The history kept for the file's bytes, and their hash.
        case restored(UndoHistory, hash: UInt64)
        /// A history of other bytes (the file changed while closed) or an unreadable file: it was
        /// deleted.
        case dropped(reason: String)
    }

    /// Looks for the history kept for the file at `path`, whose bytes were just read as `disk`
    /// (decoded from `encoding`, after a byte order mark if `byteOrderMark`; `size` bytes): blocks
    /// (runs on the load's thread). A history kept for other bytes, or a file that is not a whole
    /// undo file, is deleted.
    static func restore(
        from directory: UndoDirectory, path: String, disk: TextBuffer, encoding: TextEncoding, byteOrderMark: Bool, size: Int64
    ) -> Found {
        guard let bytes = directory.read(forPath: path) else { return .none }
        guard let contents = decode(bytes) else {
            directory.remove(forPath: path)
            return .dropped(reason: "unreadable")
        }
        // Another path's (the same key): not ours to judge.
        guard contents.path == path else { return .none }
        guard contents.size == size, let hash = disk.contentHash(encoding: encoding, byteOrderMark: byteOrderMark), hash == contents.hash else {
            directory.remove(forPath: path)
            return .dropped(reason: "the file changed")
        }
        // The history starts at the file's text: its position is its clean point.
        var snapshot = contents.snapshot
        snapshot.cleanPosition = snapshot.position
        guard fits(snapshot, text: disk), let history = UndoHistory(snapshot: snapshot) else {
            directory.remove(forPath: path)
            return .dropped(reason: "unreadable")
        }
        return .restored(history, hash: hash)
    }

    /// Writes `history` for the file at `path`, whose bytes are `synced` encoded in `encoding` (the
    /// text at the history's clean point): blocks. Nothing is written when the history has no clean
    /// point or no step from it (a file kept before stays: it still describes the file's bytes, or
    /// its hash will not match them).
    static func write(
        to directory: UndoDirectory, path: String, snapshot: UndoHistory.Snapshot, synced: TextBuffer, encoding: TextEncoding,
        byteOrderMark: Bool
    ) throws(FileSystemError) {
        guard let snapshot = snapshot.atCleanPoint(), !snapshot.steps.isEmpty else { return }
        var size = 0
        var hasher = ContentHasher()
        do throws(SaveError) {
            try synced.encode(encoding, byteOrderMark: byteOrderMark) { bytes in
                size += bytes.count
                bytes.withUnsafeBytes { hasher.update($0) }
            }
        } catch {
            return  // text the file's encoding cannot hold: it is not the file's
        }
        let bytes = encode(Contents(path: path, size: Int64(size), hash: hasher.finalize(), snapshot: snapshot))
        try directory.write(bytes, forPath: path)
    }
}

/// The writes of kept undo histories, one at a time in the order asked for, on a pooled thread at
/// nice 10, off the store's actor. A write not started yet gives way to a newer one of the same path
/// (a save, then the close), so the backlog holds at most one write per path.
final class UndoWriteQueue: Sendable {
    private struct Item: Sendable {
        var path: String
        var work: @Sendable () -> Void
    }

    private struct State {
        var items: [Item] = []
        /// The path of the write running, if one is.
        var running: String?
        var draining = false
    }

    let directory: UndoDirectory
    private let state = Mutex(State())

    init(directory: UndoDirectory) {
        self.directory = directory
    }

    /// Keeps `history` for `path` (see ``PersistedUndo/write(to:path:snapshot:synced:encoding:byteOrderMark:)``).
    /// The values go to the writing thread and are let go of at normal priority. The history is let
    /// go of as soon as its snapshot is taken: while the writing thread holds it, the first change
    /// of a document still open would copy its steps on the loop.
    func keep(_ history: UndoHistory, synced: TextBuffer, encoding: TextEncoding, byteOrderMark: Bool, path: String) {
        let historyBox = HandOver(history), textBox = HandOver(synced)
        let directory = directory
        enqueue(path: path) {
            // The history goes at the end of this statement (its steps' edits live on in the
            // snapshot, let go of below).
            let snapshot = historyBox.take().snapshot
            let synced = textBox.take()
            try? PersistedUndo.write(
                to: directory, path: path, snapshot: snapshot, synced: synced, encoding: encoding, byteOrderMark: byteOrderMark)
            releaseInBackground((snapshot, synced))
        }
    }

    /// Deletes the history kept for `path`, after the writes queued before.
    func remove(path: String) {
        let directory = directory
        enqueue(path: path) { directory.remove(forPath: path) }
    }

    /// Whether a write of `path` is queued or running.
    func isBusy(path: String) -> Bool {
        state.withLock { $0.running == path || $0.items.contains { $0.path == path } }
    }

    /// Waits until every write queued so far is done, or `limit` has passed (by the clock); answers
    /// whether the queue is empty.
    func finish(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while true {
            if state.withLock({ $0.items.isEmpty && !$0.draining }) { return true }
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private func enqueue(path: String, _ work: @escaping @Sendable () -> Void) {
        let (start, old) = state.withLock { state -> (Bool, Item?) in
            if let index = state.items.firstIndex(where: { $0.path == path }) {
                // Not started: the newer write replaces it, in its place in the line.
                let old = state.items[index]
                state.items[index].work = work
                return (false, old)
            }
            state.items.append(Item(path: path, work: work))
            if state.draining { return (false, nil) }
            state.draining = true
            return (true, nil)
        }
        // The replaced write's closure holds a history and a text: let go of off the caller's thread.
        if let old { releaseInBackground(old) }
        if start { runDetached(niceness: 10) { self.drain() } }
    }

    private func drain() {
        while let item = next() {
            item.work()
            state.withLock { $0.running = nil }
        }
    }

    private func next() -> Item? {
        state.withLock { state in
            guard !state.items.isEmpty else {
                state.draining = false
                return nil
            }
            let item = state.items.removeFirst()
            state.running = item.path
            return item
        }
    }
}

extension DocumentStore {
    /// Keeps the documents' undo histories in `directory` from now on (nil: not any more; the
    /// writes queued still run).
    public func setPersistUndo(_ directory: UndoDirectory?) {
        undoWrites = directory.map(UndoWriteQueue.init(directory:))
    }

    /// Whether undo histories are kept across closes and restarts.
    public var persistsUndo: Bool { undoWrites != nil }

    /// Queues the write of the document's history, as seen from its clean point, for its path
    /// (after a save, at a close, at the end): nothing when the document has no file whose text is
    /// its clean point (in conflict, deleted on disk).
    func keepUndo(_ document: Document) {
        guard let undoWrites, !document.deletedOnDisk, !document.state.contains(.inConflict),
              document.history.canUndo || document.history.canRedo
        else { return }
        undoWrites.keep(
            document.history, synced: document.syncedText, encoding: document.encoding, byteOrderMark: document.hasByteOrderMark,
            path: document.path)
    }

    /// The file at `path` was deleted: so is the history kept for it.
    func dropKeptUndo(forPath path: String) {
        undoWrites?.remove(path: path)
    }

    /// Writes the history of every open document (`shutdown`, the end of input) and waits for the
    /// writes, up to `limit`; answers whether all were written.
    public func keepUndoHistories(within limit: Duration) async -> Bool {
        guard let undoWrites else { return true }
        for document in documents.values { keepUndo(document) }
        return await undoWrites.finish(within: limit)
    }

    /// Waits for the writes of `path`'s history queued before an open of it (a close just before).
    func waitForKeptUndo(ofPath path: String) async {
        guard let undoWrites, undoWrites.isBusy(path: path) else { return }
        _ = await undoWrites.finish(within: .seconds(10))
    }
}
