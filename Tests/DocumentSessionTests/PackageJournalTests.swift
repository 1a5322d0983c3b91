@testable import FileStore
import Testing

@testable import DocumentSession

/// The package journal's records (PackageJournal.swift): written, read back, cut where they stop
/// making sense, and replayed onto a package's tree through the live document's own mutations.
@Suite("Package journals: records and replay")
struct PackageJournalTests {
    let header = PackageJournalHeader(path: "/docs/notes.textbundle", created: 1_700_000_000_000_000_000, etag: "abc123", version: 4)

    func journal(_ parts: [[UInt8]]) -> [UInt8] { JournalFraming.magic + parts.flatMap { $0 } }

    /// A package on disk with two files (as opened: every entry as on disk).
    func opened() -> PackageDocument {
        PackageDocument(
            handle: "p1", path: header.path, kind: .package,
            entries: ["text.md": .onDisk(kind: .file, size: 5, modified: 1), "info.json": .onDisk(kind: .file, size: 3, modified: 1)],
            emptyDirectories: ["empty"], signature: PackageSignature(items: []))
    }

    @Test("every record reads back as written: the header, a state, and each kind of change")
    func roundTrip() throws {
        let state = PackageJournalState(
            version: 4, unsaved: true, entries: [("a.bin", .bytes([0, 255, 7])), ("text.md", .onDisk)], emptyDirectories: ["empty"])
        let ops: [PackageJournalOp] = [
            .write(path: "deep/b.txt", bytes: Array("b\n".utf8), label: "Type"), .write(path: "c", bytes: [], label: nil),
            .delete(path: "text.md", label: "Delete"), .delete(path: "c", label: nil), .removeDirectory(path: "empty"), .undo, .redo,
        ]
        var parts = [PackageJournalCodec.header(header), PackageJournalCodec.state(state)]
        for (index, op) in ops.enumerated() { parts.append(PackageJournalCodec.change(op, version: Int64(5 + index), unsaved: index % 2 == 0)) }
        let bytes = journal(parts)
        let read = try #require(RecoveredPackageJournal.read(bytes))
        #expect(read.header == header)
        #expect(read.state == state)
        #expect(read.changes.map(\.op) == ops)
        #expect(read.changes.map(\.version) == Array(5...11))
        #expect(read.changes.map(\.unsaved) == [true, false, true, false, true, false, true])
        #expect(read.cut == nil && read.length == bytes.count && read.version == 11)
    }

    @Test("no whole header: nothing to recover; a text journal's records are not a package's")
    func notAPackageJournal() {
        #expect(RecoveredPackageJournal.read([]) == nil)
        #expect(RecoveredPackageJournal.read(journal([])) == nil)
        let header = PackageJournalCodec.header(header)
        #expect(RecoveredPackageJournal.read(journal([Array(header.dropLast())])) == nil, "torn inside the header")
        var otherFormat = JournalBytes()
        otherFormat.u8(9)
        var framed: [UInt8] = []
        JournalFraming.append(type: 1, payload: otherFormat.bytes, to: &framed)
        #expect(RecoveredPackageJournal.read(journal([framed])) == nil)
    }

    @Test("a record that makes no sense cuts the journal there (unreadable); a torn one is cut as torn")
    func cuts() throws {
        let first = PackageJournalCodec.change(.write(path: "a", bytes: [1], label: nil), version: 2, unsaved: true)
        var bad = JournalBytes()
        bad.i64(3)
        bad.bool(true)
        bad.u8(42)  // no such operation
        var badRecord: [UInt8] = []
        JournalFraming.append(type: PackageJournalRecordType.change.rawValue, payload: bad.bytes, to: &badRecord)
        let after = PackageJournalCodec.change(.undo, version: 4, unsaved: true)
        let bytes = journal([PackageJournalCodec.header(header), first, badRecord, after])
        let read = try #require(RecoveredPackageJournal.read(bytes))
        let badOffset = JournalFraming.magic.count + PackageJournalCodec.header(header).count + first.count
        #expect(read.changes.map(\.op) == [.write(path: "a", bytes: [1], label: nil)])
        #expect(read.cut == JournalFraming.Cut(offset: badOffset, bytes: bytes.count - badOffset, reason: "unreadable"))
        #expect(read.length == badOffset && read.version == 2)

        let torn = journal([PackageJournalCodec.header(header), first, Array(after.dropLast(2))])
        let readTorn = try #require(RecoveredPackageJournal.read(torn))
        #expect(readTorn.changes.count == 1 && readTorn.cut?.reason == "torn")
    }

    @Test("replay rebuilds the entries and the undo history; a change that does not fit is cut there")
    func replay() throws {
        let ops: [PackageJournalOp] = [
            .write(path: "text.md", bytes: Array("new\n".utf8), label: "Type"), .delete(path: "info.json", label: "Delete"),
            .undo, .write(path: "dir/x", bytes: [1], label: nil), .removeDirectory(path: "empty"),
            // Under a file now: does not fit, and nothing after it is used.
            .write(path: "dir/x/y", bytes: [2], label: nil), .write(path: "later", bytes: [3], label: nil),
        ]
        var parts = [PackageJournalCodec.header(header)]
        for (index, op) in ops.enumerated() { parts.append(PackageJournalCodec.change(op, version: Int64(2 + index), unsaved: true)) }
        var read = try #require(RecoveredPackageJournal.read(journal(parts)))
        let document = opened()
        let replayed = read.replay(onto: document, tree: document.entries)
        #expect(replayed.edits == 5)
        #expect(replayed.entries["text.md"] == .bytes(Array("new\n".utf8)))
        #expect(replayed.entries["info.json"] == .onDisk(kind: .file, size: 3, modified: 1), "the deletion was undone")
        #expect(replayed.entries["dir/x"] == .bytes([1]) && replayed.entries["later"] == nil)
        #expect(replayed.emptyDirectories.isEmpty)
        // The undo history: Type, then the redo branch replaced by dir/x; the directory's removal
        // is outside it, so no position is clean any more.
        #expect(replayed.steps.map(\.label) == ["Type", nil] && replayed.position == 2 && replayed.cleanPosition == nil)
        #expect(read.cut?.reason == "unreadable" && read.version == 6)
    }

    @Test("a state record starts from the entries it lists: as on disk, or with their bytes; the rest are gone")
    func replayFromState() throws {
        let state = PackageJournalState(version: 7, unsaved: true, entries: [("info.json", .onDisk), ("new.txt", .bytes([9]))], emptyDirectories: [])
        let parts = [
            PackageJournalCodec.header(header), PackageJournalCodec.state(state),
            PackageJournalCodec.change(.undo, version: 8, unsaved: true),
        ]
        var read = try #require(RecoveredPackageJournal.read(journal(parts)))
        let document = opened()
        let replayed = read.replay(onto: document, tree: document.entries)
        // The undo has nothing to undo in what the journal holds: cut, the state kept.
        #expect(replayed.entries == ["info.json": .onDisk(kind: .file, size: 3, modified: 1), "new.txt": .bytes([9])])
        #expect(replayed.hasUnsavedChanges && replayed.steps.isEmpty && replayed.edits == 0)
        #expect(read.cut?.reason == "unreadable" && read.version == 7)
    }

    @Test("the history a replay rebuilds is followed as changes come: an undo or redo past it is refused")
    func follow() {
        var active = PackageActiveJournal(name: "n", bytes: 0, limit: 1 << 20, steps: 0, position: 0)
        #expect(!active.follow(.undo) && !active.follow(.redo))
        #expect(active.follow(.write(path: "a", bytes: [], label: nil)) && active.follow(.delete(path: "a", label: nil)))
        #expect(active.follow(.undo) && active.follow(.undo) && !active.follow(.undo))
        #expect(active.follow(.redo) && active.follow(.write(path: "b", bytes: [], label: nil)) && !active.follow(.redo))
        #expect(active.follow(.removeDirectory(path: "d")) && active.steps == 2 && active.position == 2)
    }

    /// Records what a replay asks of a managed document's store.
    final class FakeStore: PackageStoreReplay, @unchecked Sendable {
        var calls: [String] = []
        func load(_ bytes: [UInt8]) throws(DocumentError) { calls.append("load \(bytes)") }
        func replay(changeset: [UInt8], apply: Bool) throws(DocumentError) { calls.append("take \(changeset) apply \(apply)") }
        func replayMove(forward: Bool, apply: Bool) throws(DocumentError) { calls.append("\(forward ? "redo" : "undo") apply \(apply)") }
    }

    @Test("a managed journal's steps that the state's copy of the store holds are taken into the history, not applied again")
    func managedReplay() throws {
        var managed = opened()
        managed = PackageDocument(
            handle: "p1", path: header.path, kind: .managed, entries: managed.entries, emptyDirectories: [], signature: PackageSignature(items: []))
        // The copy was made when the store's change count was 5: the first two steps below (counts
        // 4 and 5, made before the journal's thread took the copy) are in it; the rest are not.
        let state = PackageJournalState(version: 9, unsaved: true, entries: [("text.md", .onDisk)], emptyDirectories: [], store: .init(count: 5, bytes: [7, 7]))
        let parts = [
            PackageJournalCodec.header(header), PackageJournalCodec.state(state),
            PackageJournalCodec.change(.store(changeset: [1], label: "A"), version: 10, unsaved: true, storeCount: 4),
            PackageJournalCodec.change(.undo, version: 11, unsaved: true, storeCount: 5),
            PackageJournalCodec.change(.redo, version: 12, unsaved: true, storeCount: 6),
            PackageJournalCodec.change(.store(changeset: [2], label: "B"), version: 13, unsaved: true, storeCount: 7),
            PackageJournalCodec.change(.noChange, version: 14, unsaved: true),
        ]
        var read = try #require(RecoveredPackageJournal.read(journal(parts)))
        #expect(read.state?.store == .init(count: 5, bytes: [7, 7]))
        let store = FakeStore()
        let replayed = read.replay(onto: managed, tree: managed.entries, store: store)
        #expect(store.calls == ["load [7, 7]", "take [1] apply false", "undo apply false", "redo apply true", "take [2] apply true"])
        #expect(replayed.steps.map(\.label) == ["A", "B"] && replayed.position == 2 && replayed.edits == 5 && read.cut == nil)
        #expect(replayed.entries == ["text.md": .onDisk(kind: .file, size: 5, modified: 1)])

        // A plain package's journal with a store step does not fit: cut there.
        var plain = try #require(RecoveredPackageJournal.read(journal([PackageJournalCodec.header(header), parts[2]])))
        _ = plain.replay(onto: opened(), tree: opened().entries)
        #expect(plain.cut?.reason == "unreadable")
    }

    @Test("off its base, a journal replays whole or not at all: a store step without a copy of its own, or a change that does not fit, cuts it after its header (notOnBase)")
    func offBase() throws {
        let managed = PackageDocument(
            handle: "p1", path: header.path, kind: .managed, entries: opened().entries, emptyDirectories: [], signature: PackageSignature(items: []))
        // No copy of the store (an older server's journal): its changesets are not the disk's store's.
        let storeSteps = [
            PackageJournalCodec.header(header),
            PackageJournalCodec.change(.write(path: "x", bytes: [1], label: nil), version: 5, unsaved: true),
            PackageJournalCodec.change(.store(changeset: [1], label: "A"), version: 6, unsaved: true, storeCount: 1),
        ]
        var read = try #require(RecoveredPackageJournal.read(journal(storeSteps)))
        let store = FakeStore()
        let replayed = read.replay(onto: managed, tree: managed.entries, store: store, baseOnDisk: false)
        #expect(store.calls.isEmpty && replayed.edits == 0 && replayed.entries == managed.entries && !replayed.hasUnsavedChanges)
        #expect(read.changes.isEmpty && read.cut?.reason == "notOnBase" && read.cut?.offset == read.length && read.version == 4)
        // On its base, the same journal replays onto the disk's store.
        var onBase = try #require(RecoveredPackageJournal.read(journal(storeSteps)))
        let applied = FakeStore()
        _ = onBase.replay(onto: managed, tree: managed.entries, store: applied, baseOnDisk: true)
        #expect(applied.calls == ["take [1] apply true"] && onBase.cut == nil)

        // With a copy, the steps replay onto it, whatever the disk holds.
        let state = PackageJournalState(version: 4, unsaved: false, entries: [("text.md", .onDisk)], emptyDirectories: [], store: .init(count: 0, bytes: [7]))
        var carried = try #require(RecoveredPackageJournal.read(journal([storeSteps[0], PackageJournalCodec.state(state), storeSteps[2]])))
        let copy = FakeStore()
        let fromCopy = carried.replay(onto: managed, tree: managed.entries, store: copy, baseOnDisk: false)
        #expect(copy.calls == ["load [7]", "take [1] apply true"] && carried.cut == nil && fromCopy.edits == 1 && fromCopy.hasUnsavedChanges)
        // With a copy that holds a change that does not fit the tree on disk: nothing of the
        // journal, the copy neither (it holds the change), cut from the state record on.
        let unfit = PackageJournalCodec.change(.delete(path: "gone", label: nil), version: 6, unsaved: true)
        var holding = try #require(RecoveredPackageJournal.read(journal([storeSteps[0], PackageJournalCodec.state(state), storeSteps[2], unfit])))
        let untouched = FakeStore()
        let nothing = holding.replay(onto: managed, tree: managed.entries, store: untouched, baseOnDisk: false)
        #expect(untouched.calls == ["load [7]", "take [1] apply true"], "tried, then the working copy is not loaded again")
        #expect(holding.state == nil && holding.changes.isEmpty && holding.cut?.reason == "notOnBase" && holding.version == 4)
        #expect(nothing.edits == 0 && nothing.entries == managed.entries)

        // A plain package: the first write fits the tree on disk, the deletion does not (the entry
        // is gone there). A prefix would be neither state: nothing is replayed.
        let plainParts = [
            PackageJournalCodec.header(header),
            PackageJournalCodec.change(.write(path: "text.md", bytes: [1], label: nil), version: 5, unsaved: true),
            PackageJournalCodec.change(.delete(path: "gone", label: nil), version: 6, unsaved: true),
        ]
        var plain = try #require(RecoveredPackageJournal.read(journal(plainParts)))
        let document = opened()
        let none = plain.replay(onto: document, tree: document.entries, baseOnDisk: false)
        #expect(none.entries == document.entries && none.edits == 0 && plain.cut?.reason == "notOnBase" && plain.version == 4)
        // On its base, the prefix is kept and the rest cut as unreadable.
        var prefix = try #require(RecoveredPackageJournal.read(journal(plainParts)))
        let kept = prefix.replay(onto: document, tree: document.entries, baseOnDisk: true)
        #expect(kept.edits == 1 && prefix.cut?.reason == "unreadable" && prefix.version == 5)
    }
}
