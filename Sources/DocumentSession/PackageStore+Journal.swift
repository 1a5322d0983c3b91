import FileStore
import ManagedStore
import SystemCalls

// The journal of packages' unsaved changes (PackageJournal.swift; protocol/README.md §13.7), kept as
// the text journal is kept (DocumentStore+Journal.swift): a package has a journal exactly while it
// has unsaved changes; the first change of a package in sync with its tree starts one, every change
// after appends a record, a save, revert or reload that brings it back in sync deletes it, and a
// change of its base while changes stay unsaved starts it again from the entries it holds. A dead
// server's journal of a package is offered when the package is opened, and recovered or discarded
// as a text document's is.
//
// A managed document's store transactions are journaled as their changesets (the session
// extension's, the undo steps' own); a journal that starts again copies the store's working copy
// into its state record, on the journal's thread.

/// A package's journal this store writes, as the store knows it.
struct PackageActiveJournal {
    var name: String
    var bytes: Int
    /// Past this many bytes, the journal starts again from the entries the package holds.
    var limit: Int
    /// The undo history a replay of the journal rebuilds: its steps and position. An undo or redo
    /// the replay could not repeat (of a step from before the journal started) starts it again.
    var steps: Int
    var position: Int
}

/// A dead server's journal of a package this store opened: offered until recovered, discarded or
/// the package is closed.
public struct PackageRecoveryOffer: Sendable {
    /// When the journal was last written (nanoseconds since 1970).
    public var date: Int64
    /// The changes it holds.
    public var edits: Int
    /// Whether the package's tree on disk is still the journal's base (else recovering makes a
    /// conflict).
    public var fileMatchesBase: Bool
    /// The version the document had when the journal ended.
    public var version: Int64
    /// What was cut at the journal's end, never guessed at.
    public var cut: JournalFraming.Cut?
    let claimed: ClaimedJournal
    var journal: RecoveredPackageJournal
}

extension PackageStore {
    // MARK: - Writing

    /// After a change of the package (`op`): appends it, or starts, restarts or deletes the journal.
    /// `wasUnsaved`: whether the package had unsaved changes before.
    func journalNote(_ handle: String, _ op: PackageJournalOp, wasUnsaved: Bool, storeCount: Int64 = -1) {
        guard let writer = journal, let document = documents[handle] else { return }
        guard document.hasUnsavedChanges else {
            dropJournal(handle)
            return
        }
        if var active = journals[handle], active.bytes < active.limit, active.follow(op) {
            active.bytes += PackageJournalCodec.size(of: op)
            journals[handle] = active
            journalBytesNoted[handle, default: 0] += PackageJournalCodec.size(of: op)
            let version = document.version
            writer.submit(.appendRecords(handle: handle, records: { PackageJournalCodec.change(op, version: version, unsaved: true, storeCount: storeCount) }))
            return
        }
        if journals[handle] == nil, let retry = journalRetry[handle], ContinuousClock.now < retry { return }
        journalRetry[handle] = nil
        // A new step of a package in sync just before: the journal's base is the tree on disk, and
        // the change follows as a record (an undo after a recovery goes back to the base). Else
        // the journal starts from every entry the package holds.
        let newStep = op != .undo && op != .redo && op != .noChange
        startJournal(handle, then: newStep && !wasUnsaved && journals[handle] == nil ? op : nil, storeCount: storeCount)
    }

    /// Starts the package's journal (again): a header naming its tree on disk, then `op` as its
    /// first change, or (nil) a state record of every entry it holds now.
    func startJournal(_ handle: String, then op: PackageJournalOp?, storeCount: Int64 = -1) {
        guard let writer = journal, let document = documents[handle], document.hasUnsavedChanges else { return }
        let name = JournalDirectory.newName(forPath: document.path, package: true)
        let header = PackageJournalHeader(
            path: document.path, created: DocumentStore.now(), etag: document.signature.etag,
            version: op == nil ? document.version : document.version - 1,
            storeVersion: document.storeSummary.map { Int64($0.userVersion) } ?? -1)
        let unsavedBytes = document.unsavedBytes
        var active = PackageActiveJournal(name: name, bytes: 0, limit: PackageActiveJournal.limit(unsavedBytes), steps: 0, position: 0)
        let version = document.version
        let records: @Sendable () throws(FileSystemError) -> [UInt8]
        let database = databases[handle]
        if let op, database == nil {
            _ = active.follow(op)
            active.bytes = 64 + header.path.utf8.count + PackageJournalCodec.size(of: op)
            records = { PackageJournalCodec.header(header) + PackageJournalCodec.change(op, version: version, unsaved: true, storeCount: storeCount) }
        } else {
            // Past what one record holds: not journaled (a state of more than 4 GiB in memory).
            guard unsavedBytes < JournalFraming.maxPayload / 2 else { return }
            // A managed document's journal always carries its store (a copy in the state record):
            // its steps are changesets, which replay only onto the store they were recorded on. The
            // store on disk is that store only while the tree is the journal's base; a save killed
            // between its swap and the journal's restart leaves the old journal beside the new
            // store, and its steps replayed there resurrected deleted rows. For a first step (the
            // document was in sync just before it), the state is the base's (not unsaved, the
            // version before), the copy is made later on the journal's thread (holding the step,
            // told apart by the change count), and the step follows as a record: the undo history
            // still goes back to the base.
            var state = document.journalState
            var follows: [UInt8] = []
            if let op {
                state = document.journalState(before: op)
                _ = active.follow(op)
                follows = PackageJournalCodec.change(op, version: version, unsaved: true, storeCount: storeCount)
            }
            active.bytes = 64 + header.path.utf8.count + unsavedBytes + state.entries.reduce(0) { $0 + 16 + $1.path.utf8.count } + follows.count
            records = { [state, follows] () throws(FileSystemError) -> [UInt8] in
                var state = state
                // The store as it is when the journal's thread gets here: later steps already in
                // it are told apart by the change count (they follow as records too).
                if let database {
                    guard let copy = database.snapshot(), copy.bytes.count < JournalFraming.maxPayload / 2 else {
                        // Told to the client as a journal that cannot be written (`journalFailed`).
                        throw FileSystemError(errno: 5 /* EIO */, syscall: "sqlite3_backup_step", path: database.workingPath, reason: "the store could not be copied into the journal")
                    }
                    state.store = .init(count: copy.count, bytes: copy.bytes)
                }
                return PackageJournalCodec.header(header) + PackageJournalCodec.state(state) + follows
            }
        }
        journals[handle] = active
        // A managed journal's start carries a copy of the store, made on the journal's thread:
        // counted at the working copy's size.
        journalBytesNoted[handle, default: 0] += active.bytes + (database?.workingCopySize ?? 0)
        writer.submit(.startRecords(handle: handle, name: name, records: records))
    }

    /// The bytes handed to the package's journal since the last call, and the count starts again.
    public func takeJournalBytes(_ handle: String) -> Int {
        journalBytesNoted.removeValue(forKey: handle) ?? 0
    }

    /// Waits until every journal record handed over so far is written and flushed (at once).
    public func flushJournal() async {
        await journal?.flush()
    }

    /// After a change of `handle`: when its journal records took more than
    /// `DocumentStore.largeChange`, waits until they are on disk (protocol §8.22), so that the
    /// change is answered only once a kill can no longer lose it.
    public func flushIfLarge(_ handle: String) async {
        if takeJournalBytes(handle) > DocumentStore.largeChange { await flushJournal() }
    }

    /// The package is in sync with its tree, or closed: its journal goes.
    func dropJournal(_ handle: String) {
        guard let writer = journal, journals.removeValue(forKey: handle) != nil else { return }
        writer.submit(.drop(handle: handle))
    }

    /// After a change of the package's base (a save, a conflict resolved to `mine`): the journal
    /// goes when nothing is unsaved, else starts again from the entries.
    func journalBaseChanged(_ handle: String) {
        guard journal != nil, let document = documents[handle] else { return }
        if document.hasUnsavedChanges { startJournal(handle, then: nil) } else { dropJournal(handle) }
    }

    /// The writer could not write the package's journal: the next change starts a new one, after a
    /// pause (on a full disk every change would otherwise write every entry again).
    func journalFailed(_ handle: String, _ error: FileSystemError?) {
        guard error != nil else { return }
        journals[handle] = nil
        journalRetry[handle] = .now + .seconds(5)
        guard let document = documents[handle] else { return }
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .journalFailed,
            error: error.map { .fileSystem($0) }, autosave: false))
    }

    // MARK: - Recovery

    /// Looks for dead servers' journals of the package at `path`, whose tree was just read (blocks:
    /// runs on the open's thread). A journal that replays to no unsaved change is deleted quietly,
    /// and so is one with nothing whole in it; of the others, the newest is offered. A managed
    /// document's journal is replayed onto a scratch store (`trialStore`: the disk's store, which
    /// the journal's copy replaces when it has one) as `document/recover` will replay it, so that
    /// the offer's `edits`, `version` and `cut` say exactly what a recovery brings back.
    static func scanJournals(
        _ directory: JournalDirectory, path: String, document: PackageDocument, tree: DiskTree, storeVersion: Int64,
        trialStore: (@Sendable () -> DatabaseHandle?)? = nil, isOwn: (String) -> Bool
    ) -> (offer: PackageRecoveryOffer?, held: Int) {
        var found: [PackageRecoveryOffer] = []
        var held = 0
        for name in directory.names(forPath: path, package: true) where !isOwn(name) {
            guard let claimed = directory.claim(name) else {
                if FileIdentity.current(path: directory.path(of: name)) != nil { held += 1 }
                continue
            }
            guard var journal = RecoveredPackageJournal.read(claimed.bytes) else {
                claimed.remove()
                continue
            }
            guard journal.header.path == path else { continue }
            let matches = journal.header.etag == tree.signature.etag && journal.header.storeVersion == storeVersion
            let trial = journal.carriesStore || journal.hasStoreSteps ? trialStore?() : nil
            let replayed = journal.replay(onto: document, tree: tree.entries, store: trial, baseOnDisk: matches)
            trial?.close()
            // One that could not be replayed onto the tree on disk is offered all the same (never
            // dropped silently): its cut says why.
            if !replayed.hasUnsavedChanges && journal.cut?.reason != "notOnBase" {
                claimed.remove()
                continue
            }
            found.append(PackageRecoveryOffer(
                date: claimed.modified, edits: replayed.edits, fileMatchesBase: matches,
                version: journal.version, cut: journal.cut, claimed: claimed, journal: journal))
        }
        return (found.max { $0.date < $1.date }, held)
    }

    // MARK: - Handoff

    /// The open packages' handles, in the order they were opened.
    public var handles: [String] {
        documents.keys.sorted { (Int($0.dropFirst()) ?? 0, $0) < (Int($1.dropFirst()) ?? 0, $1) }
    }

    /// The options a managed document's store was opened with (its migrations), nil for a package.
    public func storeOptions(_ handle: String) -> StoreOptions? {
        guard let database = databases[handle] else { return nil }
        return try? database.locked { store throws(StoreError) in store.options }
    }

    /// The package's unsaved work as a journal's bytes, for a session snapshot: nil when it has
    /// none. Its journal as written so far (every change before this call included), which keeps
    /// the undo history; when it has none (the server journals nothing, or the journal could not
    /// be written), a journal made here of every entry and (a managed document's) a copy of the
    /// store, without the history.
    public func journalCopy(_ handle: String) async throws(DocumentError) -> [UInt8]? {
        let document = try document(handle)
        guard document.hasUnsavedChanges else { return nil }
        if let writer = journal, journals[handle] != nil {
            if let bytes = await writer.copy(of: handle) { return bytes }
        }
        let now = try self.document(handle)
        let header = PackageJournalHeader(
            path: now.path, created: DocumentStore.now(), etag: now.signature.etag, version: now.version,
            storeVersion: now.storeSummary.map { Int64($0.userVersion) } ?? -1)
        let whole = now.journalState
        let database = databases[handle]
        return await runOnOwnThread { () -> [UInt8]? in
            var state = whole
            if let database {
                guard let copy = database.snapshot() else { return nil }
                state.store = .init(count: copy.count, bytes: copy.bytes)
            }
            return JournalFraming.magic + PackageJournalCodec.header(header) + PackageJournalCodec.state(state)
        }
    }

    /// Moves a snapshot's journal copy of a package into the journal directory as a dead server's
    /// (``DocumentStore/placeSnapshotJournal(_:token:name:forPath:)``, for packages).
    public func placeSnapshotJournal(
        _ snapshots: SnapshotDirectory, token: String, name: String, forPath path: String
    ) async throws(FileSystemError) -> String {
        try await DocumentStore.placeSnapshotJournal(snapshots, token: token, name: name, in: journalDirectory, forPath: path, package: true)
    }

    /// The name of the dead server's journal offered for the package, if any.
    public func recoveryOfferName(_ handle: String) -> String? { recoveries[handle]?.claimed.name }

    /// The recovery waiting for the package, if any.
    public func recoveryOffer(_ handle: String) -> PackageRecoveryOffer? { recoveries[handle] }

    /// How many live servers hold journals of the package (they have unsaved changes to it).
    public func journalsHeldElsewhere(_ handle: String) -> Int { heldElsewhere[handle] ?? 0 }

    /// What `document/recover` did to a package.
    public struct RecoveryResult: Sendable {
        public var version: Int64
        /// The entries the recovery wrote or deleted.
        public var entries: [EntryChange]
        public var inConflict: Bool
        public var hasUnsavedChanges: Bool
    }

    /// Brings back the unsaved changes of a dead server's journal of the package, with their undo
    /// history (undo goes back to the journal's base). When the tree on disk is no longer the base,
    /// the package comes back in conflict (`mine` keeps the recovered entries, `theirs` takes the
    /// disk's). The journal becomes the package's.
    public func recover(_ handle: String) async throws(DocumentError) -> RecoveryResult {
        try await waitForSave(handle)
        var document = try document(handle)
        guard var offer = recoveries[handle] else { throw .noRecovery(handle: handle) }
        try checkEditable(document)
        // A managed document's migration at this open is not a change of its own to keep: the
        // journal's store was migrated the same way.
        let onlyMigrated = document.steps.isEmpty && document.unsavedBytes == 0
            && document.storeSummary.map { $0.migratedTo != $0.migratedFrom } == true
        if (document.hasUnsavedChanges && !onlyMigrated) || document.state.contains(.inConflict) {
            throw .unsavedChanges(handle: handle, path: document.path, reason: "recovering would replace them: save or revert first")
        }
        // Replayed onto the entries as they are now (the package is in sync with its tree), and a
        // managed document's steps onto its store, off the loop, with editing held meanwhile.
        let replayed: ReplayedPackage
        if let database = databases[handle] {
            let journal = offer.journal, fresh = document, previous = document.state
            document.state.insert(.editingDisabled)
            documents[handle] = document
            let matches = offer.fileMatchesBase
            let (result, read) = await runOnOwnThread { () -> (ReplayedPackage, RecoveredPackageJournal) in
                var journal = journal
                return (journal.replay(onto: fresh, tree: fresh.entries, store: database, baseOnDisk: matches), journal)
            }
            guard var now = documents[handle] else { throw .unknownDocument(handle) }
            now.state = previous
            if read.changes.count != offer.journal.changes.count || read.cut != offer.journal.cut {
                // The replay stopped before where the offer said (the store changed since the
                // open): never taken silently. The working copy is the disk's store again, and the
                // offer now says what the journal holds.
                documents[handle] = now
                try await reloadDatabase(database, packagePath: now.path)
                now.storeSummary = database.summary
                documents[handle] = now
                offer.journal = read
                offer.cut = read.cut
                offer.edits = result.edits
                offer.version = read.version
                recoveries[handle] = offer
                let cut = read.cut.map { "at offset \($0.offset) (\($0.reason))" } ?? "earlier"
                throw .store(StoreError(
                    code: 21 /* SQLITE_MISUSE */,
                    message: "the journal no longer replays as offered: it stops \(cut); the offer now says what it holds (document/open answers it again)",
                    kind: .file))
            }
            now.storeSummary = database.summary
            document = now
            replayed = result
            offer.journal = read
        } else {
            replayed = offer.journal.replay(onto: document, tree: document.entries, baseOnDisk: offer.fileMatchesBase)
        }
        recoveries[handle] = nil
        let changes = EntryChange.between(document.entries, replayed.entries)
        let previous = document.state
        document.entries = replayed.entries
        document.emptyDirectories = replayed.emptyDirectories
        document.steps = replayed.steps
        document.position = replayed.position
        document.cleanPosition = replayed.cleanPosition
        document.version = max(offer.journal.version, document.version + 1)
        if !offer.fileMatchesBase {
            // Theirs is the tree on disk; a save is refused until the conflict is resolved.
            document.cleanPosition = nil
            document.theirSignature = document.signature
            document.state.insert(.inConflict)
        }
        documents[handle] = document
        // The dead journal becomes the package's (cut at its last whole record), when its base is
        // the tree on disk; else a new one starts from the recovered entries.
        if let writer = journal, document.hasUnsavedChanges {
            // A managed document's journal starts again from a copy of its store: the store's
            // change counts of the dead server's records are not this one's.
            if offer.fileMatchesBase && document.kind == .package {
                journals[handle] = PackageActiveJournal(
                    name: offer.claimed.name, bytes: offer.journal.length, limit: PackageActiveJournal.limit(document.unsavedBytes),
                    steps: replayed.steps.count, position: replayed.position)
                writer.submit(.adopt(handle: handle, journal: offer.claimed, length: offer.journal.length))
            } else {
                startJournal(handle, then: nil)
                offer.claimed.remove()
            }
        } else {
            offer.claimed.remove()
        }
        emit(document, previous: previous, reason: .recovered)
        return RecoveryResult(
            version: document.version, entries: changes, inConflict: !offer.fileMatchesBase, hasUnsavedChanges: document.hasUnsavedChanges)
    }

    /// Deletes the dead server's journal offered for the package.
    public func discardRecovery(_ handle: String) throws(DocumentError) {
        _ = try document(handle)
        guard let offer = recoveries.removeValue(forKey: handle) else { throw .noRecovery(handle: handle) }
        offer.claimed.remove()
    }

    /// Every package journal waiting to be recovered: those offered for open packages, and dead
    /// servers' journals of packages not open here (read on a thread of its own).
    public func recoverable() async -> [RecoverableJournal] {
        guard let directory = journalDirectory else { return [] }
        var items = recoveries.compactMap { handle, offer -> RecoverableJournal? in
            guard let document = documents[handle] else { return nil }
            return RecoverableJournal(path: document.path, date: offer.date, edits: offer.edits, version: offer.version, open: true)
        }
        let offered = Set(recoveries.values.map(\.claimed.name))
        let writer = journal
        let found = await runOnOwnThread { () -> [RecoverableJournal] in
            var found: [RecoverableJournal] = []
            for name in directory.allNames(package: true) where !offered.contains(name) && !(writer?.owns(name) ?? false) {
                guard let claimed = directory.claim(name), let journal = RecoveredPackageJournal.read(claimed.bytes) else { continue }
                // The changes as recorded (a replay needs the tree; the offer at the open counts those
                // that fit), and a state that was unsaved (a managed journal's first change starts it
                // from the base's state, which is no change).
                let edits = journal.changes.count + (journal.state?.unsaved == true ? 1 : 0)
                found.append(RecoverableJournal(path: journal.header.path, date: claimed.modified, edits: edits, version: journal.version, open: false))
            }
            return found
        }
        items += found.map { item in
            var item = item
            item.open = handleByPath[item.path] != nil
            return item
        }
        return items
    }
}

extension PackageDocument {
    /// Every entry the package holds now (as on disk, or its unsaved bytes) and its empty
    /// directories: a journal's state record (a managed store's copy is added on the journal's
    /// thread).
    var journalState: PackageJournalState {
        let listed = entries.keys.sorted().map { path -> (path: String, entry: PackageJournalState.Entry) in
            if case .bytes(let bytes) = entries[path]! { return (path, .bytes(bytes)) }
            return (path, .onDisk)
        }
        return PackageJournalState(version: version, unsaved: true, entries: listed, emptyDirectories: emptyDirectories.sorted())
    }

    /// The state a managed document's journal starts from when `op`, its first step, was just
    /// taken by a document in sync before it: the entries and empty directories as they were
    /// before it, at the version before, not unsaved.
    func journalState(before op: PackageJournalOp) -> PackageJournalState {
        var state = journalState
        state.version = version - 1
        state.unsaved = false
        switch op {
        case .write, .delete:
            guard position > 0, case .entry(let path, let before, _) = steps[position - 1].change else { break }
            var entries = Dictionary(uniqueKeysWithValues: state.entries.map { ($0.path, $0.entry) })
            switch before {
            case nil: entries[path] = nil
            case .bytes(let bytes)?: entries[path] = .bytes(bytes)
            case .onDisk?: entries[path] = .onDisk
            }
            state.entries = entries.keys.sorted().map { ($0, entries[$0]!) }
        case .removeDirectory(let path):
            state.emptyDirectories = (state.emptyDirectories + [path]).sorted()
            // The removal is outside the history: after it, no position matches the disk.
        case .store, .undo, .redo, .noChange:
            break
        }
        return state
    }

    /// The bytes of the entries written and not saved.
    var unsavedBytes: Int {
        entries.values.reduce(0) { sum, content in
            if case .bytes(let bytes) = content { return sum + bytes.count }
            return sum
        }
    }
}

extension PackageActiveJournal {
    /// The bound of a journal started with `unsavedBytes` of entries held: 32 MiB, plus twice those.
    static func limit(_ unsavedBytes: Int) -> Int { (32 << 20) + 2 * unsavedBytes }

    /// Follows `op` in the history a replay rebuilds; false when a replay could not repeat it (an
    /// undo or redo past what the journal holds).
    mutating func follow(_ op: PackageJournalOp) -> Bool {
        switch op {
        case .write, .delete, .store:
            steps = position + 1
            position += 1
        case .removeDirectory, .noChange:
            break
        case .undo:
            guard position > 0 else { return false }
            position -= 1
        case .redo:
            guard position < steps else { return false }
            position += 1
        }
        return true
    }
}
