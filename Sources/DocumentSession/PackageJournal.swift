import FileStore

// The journal of a package's unsaved changes (protocol/README.md §13.7): what its records say, and
// how a dead server's journal is replayed onto the package as it is on disk. The files, framing,
// locks and writer are the text journal's (FileStore/JournalFile.swift, JournalWriter.swift); the
// names end in `.pjournal`, so each reader sees only its own kind.
//
// A package's journal holds, in order:
//
//  1. `header`: the package's path, when the journal started, the etag of the tree on disk it
//     starts from (the **base**: as opened, saved, reverted or reloaded), the version then, and
//     a managed document's schema version (`PRAGMA user_version` after the open's migrations);
//  2. `state`, at most once, right after the header: every entry the document held when the
//     journal started, when that was not the base (a journal started again after a save that left
//     changes unsaved, after a conflict resolved to `mine`, or grown past its bound): each entry
//     either as on disk or with its bytes, the empty directories, and a managed document's store
//     (a copy of its working copy, with the store's change count when the copy was made);
//  3. `change`s, one per change: an entry written (with its bytes) or deleted, an empty directory
//     removed, a store transaction (its changeset), an undo, a redo, a store request that changed
//     nothing; each with the version it produced, whether the document had unsaved changes after
//     it, and for the store's, its change count after it (a step the state's copy already holds
//     is taken into the history without being applied again).
//
// Replaying the changes through the same mutations the live document uses
// (``PackageDocument/take(_:)``, ``PackageDocument/stepEntry(forward:)``) rebuilds the entries and
// the undo history: an undo after a recovery goes back step by step to the base.

/// The record types of a package's journal.
enum PackageJournalRecordType: UInt8 {
    case header = 1, state = 3, change = 4
}

/// One change of a package document, as journaled.
enum PackageJournalOp: Sendable, Equatable {
    case write(path: String, bytes: [UInt8], label: String?)
    case delete(path: String, label: String?)
    /// An empty directory removed (outside the undo history).
    case removeDirectory(path: String)
    /// A managed store's transaction: its changeset (the session extension's).
    case store(changeset: [UInt8], label: String?)
    case undo
    case redo
    /// A request that changed nothing but the version (a store statement that changed no row).
    case noChange

    var code: UInt8 {
        switch self {
        case .write: return 1
        case .delete: return 2
        case .undo: return 3
        case .redo: return 4
        case .removeDirectory: return 5
        case .store: return 6
        case .noChange: return 7
        }
    }
}

/// The first record of a package's journal.
struct PackageJournalHeader: Sendable, Equatable {
    static let format: UInt8 = 1
    var path: String
    /// When the journal started (nanoseconds since 1970).
    var created: Int64
    /// The etag of the package's tree the journal starts from.
    var etag: String
    var version: Int64
    /// A managed document's schema version after the open's migrations; -1 for a package.
    var storeVersion: Int64 = -1
}

/// The entries a journal started from when they were not the base's.
struct PackageJournalState: Sendable, Equatable {
    enum Entry: Sendable, Equatable {
        /// As in the package on disk.
        case onDisk
        case bytes([UInt8])
    }

    var version: Int64
    var unsaved: Bool
    var entries: [(path: String, entry: Entry)]
    var emptyDirectories: [String]
    /// A managed document's store: a copy of the working copy, and the store's change count then.
    var store: StoreCopy? = nil

    struct StoreCopy: Sendable, Equatable {
        var count: Int64
        var bytes: [UInt8]
    }

    static func == (a: Self, b: Self) -> Bool {
        a.version == b.version && a.unsaved == b.unsaved && a.emptyDirectories == b.emptyDirectories
            && a.entries.map(\.path) == b.entries.map(\.path) && a.entries.map(\.entry) == b.entries.map(\.entry)
            && a.store == b.store
    }
}

/// Encodes a package journal's records (framed: ``JournalFraming``).
enum PackageJournalCodec {
    static func header(_ header: PackageJournalHeader) -> [UInt8] {
        var payload = JournalBytes()
        payload.u8(PackageJournalHeader.format)
        payload.string(header.path)
        payload.i64(header.created)
        payload.string(header.etag)
        payload.i64(header.version)
        payload.i64(header.storeVersion)
        return framed(.header, payload)
    }

    static func state(_ state: PackageJournalState) -> [UInt8] {
        var payload = JournalBytes()
        payload.i64(state.version)
        payload.bool(state.unsaved)
        payload.u32(UInt32(state.entries.count))
        for (path, entry) in state.entries {
            payload.string(path)
            switch entry {
            case .onDisk: payload.u8(0)
            case .bytes(let bytes):
                payload.u8(1)
                blob(bytes, into: &payload)
            }
        }
        payload.u32(UInt32(state.emptyDirectories.count))
        for path in state.emptyDirectories { payload.string(path) }
        payload.bool(state.store != nil)
        if let store = state.store {
            payload.i64(store.count)
            blob(store.bytes, into: &payload)
        }
        return framed(.state, payload)
    }

    static func change(_ op: PackageJournalOp, version: Int64, unsaved: Bool, storeCount: Int64 = -1) -> [UInt8] {
        var payload = JournalBytes()
        payload.i64(version)
        payload.bool(unsaved)
        payload.i64(storeCount)
        payload.u8(op.code)
        switch op {
        case .write(let path, let bytes, let label):
            payload.string(path)
            optionalString(label, into: &payload)
            blob(bytes, into: &payload)
        case .delete(let path, let label):
            payload.string(path)
            optionalString(label, into: &payload)
        case .removeDirectory(let path):
            payload.string(path)
        case .store(let changeset, let label):
            optionalString(label, into: &payload)
            blob(changeset, into: &payload)
        case .undo, .redo, .noChange:
            break
        }
        return framed(.change, payload)
    }

    /// How many bytes a change's record takes (the journal's bound counts them).
    static func size(of op: PackageJournalOp) -> Int {
        switch op {
        case .write(let path, let bytes, let label): return 40 + path.utf8.count + (label?.utf8.count ?? 0) + bytes.count
        case .delete(let path, let label): return 32 + path.utf8.count + (label?.utf8.count ?? 0)
        case .removeDirectory(let path): return 32 + path.utf8.count
        case .store(let changeset, let label): return 40 + (label?.utf8.count ?? 0) + changeset.count
        case .undo, .redo, .noChange: return 28
        }
    }

    private static func blob(_ bytes: [UInt8], into payload: inout JournalBytes) {
        payload.u64(UInt64(bytes.count))
        payload.bytes.append(contentsOf: bytes)
    }

    private static func optionalString(_ value: String?, into payload: inout JournalBytes) {
        payload.bool(value != nil)
        if let value { payload.string(value) }
    }

    private static func framed(_ type: PackageJournalRecordType, _ payload: JournalBytes) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.bytes.count + JournalFraming.headerSize)
        JournalFraming.append(type: type.rawValue, payload: payload.bytes, to: &out)
        return out
    }
}

/// A dead server's package journal, read: its records up to the first torn or corrupt one.
struct RecoveredPackageJournal: Sendable {
    struct Change: Sendable {
        var version: Int64
        var unsaved: Bool
        /// A store change's count after it (-1: not the store's).
        var storeCount: Int64
        var op: PackageJournalOp
        /// Where its record starts in the file (a change that does not replay is cut there).
        var offset: Int
    }

    var header: PackageJournalHeader
    var state: PackageJournalState?
    /// Where the state record starts in the file, when there is one.
    var stateOffset: Int? = nil
    var changes: [Change]
    /// What was cut at the end (torn, a failed checksum), never guessed at.
    var cut: JournalFraming.Cut?
    /// The length of the whole records read (where an adopted journal goes on).
    var length: Int
    /// The file's whole size.
    var size: Int

    /// Reads a package journal's bytes; nil when there is no whole header (nothing to recover).
    static func read(_ bytes: [UInt8]) -> RecoveredPackageJournal? {
        let (records, cut) = JournalFraming.records(in: bytes)
        guard let first = records.first, first.type == PackageJournalRecordType.header.rawValue else { return nil }
        var reader = JournalReader(bytes, first.payload)
        guard let header = try? readHeader(&reader) else { return nil }
        var journal = RecoveredPackageJournal(
            header: header, state: nil, changes: [], cut: cut, length: first.payload.upperBound, size: bytes.count)
        for (index, record) in records.enumerated().dropFirst() {
            var reader = JournalReader(bytes, record.payload)
            do throws(JournalReader.Short) {
                switch PackageJournalRecordType(rawValue: record.type) {
                case .state where index == 1:
                    journal.state = try readState(&reader)
                    journal.stateOffset = record.offset
                case .change:
                    let version = try reader.i64()
                    let unsaved = try reader.u8() != 0
                    let storeCount = try reader.i64()
                    let op = try readOp(&reader)
                    journal.changes.append(Change(
                        version: version, unsaved: unsaved, storeCount: storeCount, op: op, offset: record.offset))
                default:
                    throw JournalReader.Short()
                }
                guard reader.isAtEnd else { throw JournalReader.Short() }
            } catch {
                journal.cutAt(record.offset)
                return journal
            }
            journal.length = record.payload.upperBound
        }
        return journal
    }

    /// Cuts the journal before the record at `offset`: its content does not fit ("unreadable"), or
    /// it needs the journal's base, which is not on disk ("notOnBase").
    mutating func cutAt(_ offset: Int, reason: String = "unreadable") {
        changes.removeAll { $0.offset >= offset }
        length = offset
        cut = JournalFraming.Cut(offset: offset, bytes: size - offset, reason: reason)
    }

    /// Whether the journal's store steps replay onto a store of its own: the copy its state record
    /// holds (every managed journal this server writes starts with one), rather than the store
    /// on disk, which is their base only while the tree is the journal's.
    var carriesStore: Bool { state?.store != nil }

    /// Whether any change is a store's transaction.
    var hasStoreSteps: Bool {
        changes.contains { if case .store = $0.op { return true } else { return false } }
    }

    /// The version the document had at the journal's end.
    var version: Int64 { changes.last?.version ?? state?.version ?? header.version }

    private static func readHeader(_ reader: inout JournalReader) throws(JournalReader.Short) -> PackageJournalHeader {
        guard try reader.u8() == PackageJournalHeader.format else { throw JournalReader.Short() }
        let header = PackageJournalHeader(
            path: try reader.string(), created: try reader.i64(), etag: try reader.string(), version: try reader.i64(), storeVersion: try reader.i64())
        guard reader.isAtEnd else { throw JournalReader.Short() }
        return header
    }

    private static func readState(_ reader: inout JournalReader) throws(JournalReader.Short) -> PackageJournalState {
        let version = try reader.i64()
        let unsaved = try reader.u8() != 0
        var entries: [(path: String, entry: PackageJournalState.Entry)] = []
        for _ in 0..<Int(try reader.u32()) {
            let path = try reader.string()
            switch try reader.u8() {
            case 0: entries.append((path, .onDisk))
            case 1: entries.append((path, .bytes(try blob(&reader))))
            default: throw JournalReader.Short()
            }
        }
        var directories: [String] = []
        for _ in 0..<Int(try reader.u32()) { directories.append(try reader.string()) }
        var store: PackageJournalState.StoreCopy? = nil
        if try reader.u8() != 0 { store = .init(count: try reader.i64(), bytes: try blob(&reader)) }
        return PackageJournalState(version: version, unsaved: unsaved, entries: entries, emptyDirectories: directories, store: store)
    }

    private static func readOp(_ reader: inout JournalReader) throws(JournalReader.Short) -> PackageJournalOp {
        switch try reader.u8() {
        case 1:
            let path = try reader.string()
            let label = try optionalString(&reader)
            return .write(path: path, bytes: try blob(&reader), label: label)
        case 2:
            let path = try reader.string()
            return .delete(path: path, label: try optionalString(&reader))
        case 3: return .undo
        case 4: return .redo
        case 5: return .removeDirectory(path: try reader.string())
        case 6:
            let label = try optionalString(&reader)
            return .store(changeset: try blob(&reader), label: label)
        case 7: return .noChange
        default: throw JournalReader.Short()
        }
    }

    private static func blob(_ reader: inout JournalReader) throws(JournalReader.Short) -> [UInt8] {
        let count = try reader.u64()
        guard count <= UInt64(Int.max) else { throw JournalReader.Short() }
        return Array(try reader.take(Int(count)))
    }

    private static func optionalString(_ reader: inout JournalReader) throws(JournalReader.Short) -> String? {
        try reader.u8() != 0 ? try reader.string() : nil
    }
}

/// A journal replayed onto a package's tree: the document it makes.
struct ReplayedPackage: Sendable {
    var entries: [String: EntryContent]
    var emptyDirectories: Set<String>
    var steps: [PackageStep]
    var position: Int
    var cleanPosition: Int?
    /// The changes replayed (each written entry, deletion, undo, redo).
    var edits: Int
    var hasUnsavedChanges: Bool { cleanPosition != position }
}

/// What a replay does to a managed document's store (``DatabaseHandle``); without one, a replay
/// only follows the history (a look at a journal before it is recovered).
protocol PackageStoreReplay {
    /// Takes a copy of the store as the working copy.
    func load(_ bytes: [UInt8]) throws(DocumentError)
    /// Takes a step: applied unless the working copy holds it already.
    func replay(changeset: [UInt8], apply: Bool) throws(DocumentError)
    /// Undoes or redoes the next step: applied unless the working copy shows it already.
    func replayMove(forward: Bool, apply: Bool) throws(DocumentError)
}

extension RecoveredPackageJournal {
    /// Replays the journal onto `document` (as opened from the disk's `tree`), through the live
    /// mutations, and onto its store when `store` is given. A change that does not fit (an entry
    /// path that is a directory now, an undo with nothing to undo, a changeset whose rows are not
    /// as it expects) cuts the journal there, as a text journal's edit that does not fit its text
    /// does; what came before it is kept.
    ///
    /// `baseOnDisk`: whether `tree` is the journal's base. When it is not (a save killed between its
    /// swap and the journal's restart, another program's change), the changes are replayed whole
    /// or not at all: a store step of a journal that carries no store of its own does not fit
    /// (applied to another store than the one it was recorded on, its changesets resurrect or
    /// lose rows), and a prefix up to a change that does not fit would be neither the journal's
    /// state nor the disk's. Then nothing of the journal is replayed, its state record neither:
    /// the cut is at the first record after the header, reason "notOnBase".
    mutating func replay(
        onto document: PackageDocument, tree: [String: EntryContent], store: (any PackageStoreReplay)? = nil, baseOnDisk: Bool = true
    ) -> ReplayedPackage {
        let original = document
        var document = document
        document.steps = []
        document.position = 0
        document.cleanPosition = 0
        // Store steps up to this count are in the state's copy already.
        let copied = state?.store?.count ?? Int64.min
        if let copy = state?.store, let store, (try? store.load(copy.bytes)) == nil {
            // The copy cannot be taken: nothing of the journal is.
            cutAt(changes.first?.offset ?? length)
            return ReplayedPackage(
                entries: document.entries, emptyDirectories: document.emptyDirectories, steps: [], position: 0, cleanPosition: 0, edits: 0)
        }
        if let state {
            var entries: [String: EntryContent] = [:]
            for (path, entry) in state.entries {
                switch entry {
                case .onDisk: if let content = tree[path] { entries[path] = content }
                case .bytes(let bytes): entries[path] = .bytes(bytes)
                }
            }
            document.entries = entries
            document.emptyDirectories = Set(state.emptyDirectories)
            if state.unsaved { document.cleanPosition = nil }
        }
        var replayed = 0
        let storeBase = carriesStore || baseOnDisk
        for change in changes {
            let apply = change.storeCount > copied
            let fits: Bool
            if case .store = change.op, !storeBase {
                fits = false
            } else {
                fits = document.replay(change.op, store: store.map { store in (store, apply) })
            }
            guard fits else {
                if !baseOnDisk, let first = changes.first {
                    // Nothing of the journal, its state record neither: a store's copy holds some
                    // of the changes cut (those made before the journal's thread copied it), and
                    // its entries were the state of a version whose changes follow it.
                    cutAt(stateOffset ?? first.offset, reason: "notOnBase")
                    state = nil
                    return replay(onto: original, tree: tree, store: store, baseOnDisk: baseOnDisk)
                }
                cutAt(change.offset)
                break
            }
            replayed += 1
        }
        return ReplayedPackage(
            entries: document.entries, emptyDirectories: document.emptyDirectories, steps: document.steps,
            position: document.position, cleanPosition: document.cleanPosition, edits: replayed)
    }
}

extension PackageDocument {
    /// Takes a new step (nil: a change outside the history, after which no position matches the
    /// disk) and raises the version.
    mutating func take(_ step: PackageStep?) {
        if let step {
            if case .entry(let path, _, let after) = step.change { entries[path] = after }
            steps.removeSubrange(position...)
            if let clean = cleanPosition, clean > position { cleanPosition = nil }
            steps.append(step)
            position += 1
        } else {
            cleanPosition = nil
        }
        version += 1
    }

    /// Undoes or redoes an entry's step (not a store's: nil, nothing done), raising the version.
    mutating func stepEntry(forward: Bool) -> EntryChange? {
        let index = forward ? position : position - 1
        guard steps.indices.contains(index), case .entry(let path, let before, let after) = steps[index].change else { return nil }
        let content = forward ? after : before
        entries[path] = content
        position += forward ? 1 : -1
        version += 1
        return EntryChange(path: path, change: content == nil ? .deleted : .written)
    }

    /// Whether an entry may be written at `path` now (the checks of `document/writeEntry`, for a
    /// package).
    func mayWrite(_ path: String) -> Bool {
        EntryReading.pathProblem(path) == nil && !isDirectory(path) && fileAncestor(of: path) == nil
    }

    /// Applies a journaled change as the live request did (to the store too, when given: `apply`
    /// false when its copy holds the change already); false when it does not fit.
    mutating func replay(_ op: PackageJournalOp, store: (replay: any PackageStoreReplay, apply: Bool)? = nil) -> Bool {
        switch op {
        case .write(let path, let bytes, let label):
            guard mayWrite(path) else { return false }
            take(PackageStep(change: .entry(path: path, before: entries[path], after: .bytes(bytes)), label: label))
        case .delete(let path, let label):
            guard let before = entries[path] else { return false }
            take(PackageStep(change: .entry(path: path, before: before, after: nil), label: label))
        case .removeDirectory(let path):
            guard emptyDirectories.remove(path) != nil else { return false }
            take(nil)
        case .store(let changeset, let label):
            guard kind == .managed else { return false }
            if let store { guard (try? store.replay.replay(changeset: changeset, apply: store.apply)) != nil else { return false } }
            take(PackageStep(change: .store, label: label))
        case .noChange:
            version += 1
        case .undo, .redo:
            let forward = op == .redo
            guard forward ? canRedo : canUndo else { return false }
            if case .store = steps[forward ? position : position - 1].change {
                if let store { guard (try? store.replay.replayMove(forward: forward, apply: store.apply)) != nil else { return false } }
                position += forward ? 1 : -1
                version += 1
            } else {
                guard stepEntry(forward: forward) != nil else { return false }
            }
        }
        return true
    }
}
