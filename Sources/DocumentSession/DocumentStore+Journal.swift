import FileStore
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

// The journal of unsaved changes, as the store keeps it: which documents have one, when one starts,
// ends or starts again, and recovery from a dead server's journal (JournalRecords.swift,
// JournalWriter.swift, FileStore/JournalFile.swift).
//
// The rule: a document has a journal exactly while it has unsaved changes. The first change of a
// document in sync with its file starts one (header, base: the synced text); every change after
// appends a record; a save, revert or reload that brings the document back in sync deletes it; a
// change of the synced text while changes stay unsaved (a save that left edits made during it, a
// conflict resolved to a merge), or a journal grown past its bound, starts it again from the
// synced text and the current text (compaction).

/// A journal this store writes, as the loop knows it. A class: the edit path counts bytes into it in
/// place, with one lookup.
final class ActiveJournal {
    var name: String
    /// The synced text the journal's base holds (compared by identity: a new synced text starts a
    /// new journal).
    var base: TextBuffer
    var bytes: Int
    /// Past this many bytes, the journal starts again from the current text.
    var limit: Int

    init(name: String, base: TextBuffer, bytes: Int) {
        self.name = name
        self.base = base
        self.bytes = bytes
        limit = 8 << 20 + 3 * base.utf8Count
    }
}

/// A dead server's journal of a file this store opened: offered until recovered, discarded or the
/// document is closed.
public struct RecoveryOffer: Sendable {
    /// When the journal was last written (nanoseconds since 1970).
    public var date: Int64
    /// The changes of the text it holds.
    public var edits: Int
    /// Whether the file still holds the journal's base text (else recovering makes a conflict).
    public var fileMatchesBase: Bool
    /// The version the document had when the journal ended.
    public var version: Int64
    /// What was cut at the journal's end: a torn or corrupt record, never guessed at.
    public var cut: JournalFraming.Cut?
    let claimed: ClaimedJournal
    let journal: RecoveredJournal
}

/// What a look for dead servers' journals of a file found.
struct JournalScan: Sendable {
    var offer: RecoveryOffer?
    /// Journals of the file that live servers hold.
    var heldElsewhere: Int
    /// The file's old content put back from the backup of an in-place save killed while writing
    /// it (`SafeSave.restoreInterruptedSave`), done before the file was read.
    var restoredSave: SafeSave.RestoredSave? = nil
}

/// A journal waiting to be recovered (`workspace/recoverable`).
public struct RecoverableJournal: Sendable, Equatable {
    public var path: String
    public var date: Int64
    public var edits: Int
    public var version: Int64
    /// Whether this store has the file open (and offers it there).
    public var open: Bool
}

extension DocumentStore {
    // MARK: - Writing

    /// After a change of the document (of its text: `change`; or only of its state): appends the
    /// change, or starts, restarts or deletes the journal (the rule above). `wasUnsaved`: whether
    /// the document had unsaved changes before.
    func journalNote(_ handle: String, _ change: JournalChange?, wasUnsaved: Bool) {
        guard let writer = journal else { return }
        let active = journals[handle]
        // Read in place: this runs after every edit.
        guard let (inSync, unsaved, version, sameBase) = documents.peek(handle, { document in
            // A file never written (an editor's new buffer) needs no journal while its text is empty.
            (!document.hasUnsavedChanges && (!document.deletedOnDisk || document.unwritten) && !document.state.contains(.inConflict),
             document.hasUnsavedChanges, document.version, active.map { document.syncedText.isIdentical(to: $0.base) } ?? false)
        }) else { return }
        if inSync {
            if journals.removeValue(forKey: handle) != nil { writer.submit(.drop(handle: handle)) }
            return
        }
        if let active, sameBase, active.bytes < active.limit {
            guard let change else { return }
            let size = JournalCodec.size(of: change)
            active.bytes += size
            journalBytesNoted += size
            writer.submit(.change(handle: handle, change: change, version: version, unsaved: unsaved))
            return
        }
        // After a failure, a new journal is tried again only after a pause: on a full disk every
        // change would otherwise write the whole base text again.
        if active == nil, let retry = journalRetry[handle], ContinuousClock.now < retry { return }
        journalRetry[handle] = nil
        // The change goes as a record after the synced text only when the text before it was the
        // synced text. Clean almost always means that; not for Vim's empty buffer of an empty file
        // ("\n" showing "", ``settleIfSynced(_:)``), whose lengths tell it apart.
        var follows = active == nil && !wasUnsaved
        if follows, let change, let (now, synced) = documents.peek(handle, { ($0.buffer.utf8Count, $0.syncedText.utf8Count) }) {
            let grown = change.edits.reduce(0) { $0 + $1.insertedText.utf8.count - $1.removedText.utf8.count }
            follows = now - grown == synced
        }
        startJournal(handle, then: follows ? change : nil)
    }

    /// Starts the document's journal (again): its synced text as the base, its text now (unless
    /// `change` is given: the document was in sync just before it, so the base is the text before
    /// it, and the change follows as a record).
    private func startJournal(_ handle: String, then change: JournalChange?) {
        guard let writer = journal, let document = documents[handle] else { return }
        let name = JournalDirectory.newName(forPath: document.path)
        let header = JournalHeader(
            path: document.path, created: Self.now(), encoding: document.encoding, byteOrderMark: document.hasByteOrderMark,
            lineEnding: document.lineEnding, identity: document.identity, deletedOnDisk: document.deletedOnDisk,
            version: change == nil ? document.version : document.version - 1)
        let text = change == nil ? document.buffer : document.syncedText
        writer.submit(.start(
            handle: handle, name: name, header: header, base: document.syncedText, text: text, version: document.version,
            unsaved: document.hasUnsavedChanges))
        let active = ActiveJournal(name: name, base: document.syncedText, bytes: document.syncedText.utf8Count + (change == nil ? document.buffer.utf8Count : 0))
        journalBytesNoted += active.bytes
        if let change {
            active.bytes += JournalCodec.size(of: change)
            journalBytesNoted += JournalCodec.size(of: change)
            writer.submit(.change(handle: handle, change: change, version: document.version, unsaved: document.hasUnsavedChanges))
        }
        journals[handle] = active
    }

    /// A change whose journal record (or the journal it starts, with its base) takes more bytes
    /// than this is answered only once it is written and flushed (protocol §8.22): the writer's
    /// batching window (`flushDelay`) is sized for typing, and a 20 MB whole-text edit's 60 MB
    /// took longer than it to reach the disk.
    public static let largeChange = 1 << 20

    /// The bytes handed to the journal since the last call, and the count starts again.
    public func takeJournalBytes() -> Int {
        defer { journalBytesNoted = 0 }
        return journalBytesNoted
    }

    /// ``takeJournalBytes()`` for a caller on the store's thread.
    public nonisolated func takeJournalBytesOnItsThread() -> Int {
        assumeIsolated { store in store.takeJournalBytes() }
    }

    /// Waits until every journal record handed over so far is written and flushed (at once, not
    /// after the delay); returns at once without a journal.
    public func flushJournal() async {
        await journal?.flush()
    }

    /// The document's file moved: its journal follows (a name for the new path, and a record).
    func journalMoved(_ handle: String, to path: String) {
        guard let writer = journal, let active = journals[handle] else { return }
        active.name = JournalDirectory.newName(forPath: path)
        writer.submit(.rename(handle: handle, name: active.name, record: JournalCodec.moved(to: path)))
    }

    /// The document is gone from the store: its journal goes, and an offer not taken is let go
    /// (the dead server's journal stays on disk, to be offered at the next open).
    func journalClosed(_ handle: String, releasing: Bool = false) {
        if journals.removeValue(forKey: handle) != nil { journal?.submit(releasing ? .release(handle: handle) : .drop(handle: handle)) }
        recoveries[handle] = nil
        heldElsewhere[handle] = nil
        restoredSaves[handle] = nil
        journalFailures.remove(handle)
        journalRetry[handle] = nil
    }

    /// The writer could not write the document's journal (`error`): a change at least 5 s later
    /// starts a new one; the client hears of it once, until a journal of the document is written
    /// again (`error` nil).
    func journalFailed(_ handle: String, _ error: FileSystemError?) {
        guard let error else {
            // Written again: a later failure is told again.
            journalFailures.remove(handle)
            return
        }
        journals[handle] = nil
        journalRetry[handle] = .now + .seconds(5)
        guard let document = documents[handle], !journalFailures.contains(handle) else { return }
        journalFailures.insert(handle)
        events(DocumentEvent(
            handle: handle, path: document.path, version: document.version, state: document.state,
            previousState: document.state, hasUnsavedChanges: document.hasUnsavedChanges, reason: .journalFailed,
            error: .fileSystem(error), autosave: false))
    }

    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    // MARK: - Options and the end

    /// Whether unsaved changes are journaled (a journal directory could be used).
    public var journaling: Bool { journal != nil }

    /// The flush delay in force, in milliseconds.
    public var journalFlushDelayMilliseconds: Int {
        guard let delay = journal?.flushDelay else { return 0 }
        return Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
    }

    /// Sets the longest a change waits before it is flushed to disk.
    public func setJournalFlushDelay(_ delay: Duration) {
        journal?.flushDelay = delay
    }

    /// Writes and flushes every change journaled so far (`shutdown`, the end of input). With
    /// `keep` false (a shutdown without hot exit), every journal of this store is deleted instead.
    public func finishJournals(keep: Bool) async {
        guard let writer = journal else { return }
        if !keep {
            journals = [:]
            writer.submit(.dropAll)
        }
        await writer.flush()
    }

    /// Writes what the journal's writer holds at once (not after the flush delay), and waits
    /// until it is on disk.
    public func flushJournals() async {
        await journal?.flush()
    }

    /// Test-visible: the journals are flushed and closed, not deleted, and the store forgets them, as
    /// if its process had died (another store may then claim them).
    func abandonJournals() async {
        guard let writer = journal else { return }
        journals = [:]
        writer.submit(.releaseAll)
        await writer.flush()
    }

    /// ``finishJournals(keep:)`` with `keep`, from any thread, blocking (a signal's thread): true
    /// when everything was flushed within `limit`.
    public nonisolated func flushJournalsBlocking(within limit: Duration) -> Bool {
        journal?.flushBlocking(within: limit) ?? true
    }

    // MARK: - Recovery

    /// Looks for dead servers' journals of the file at `path`, whose text was just read as `disk`:
    /// blocks (runs on the load's thread). A journal whose text is the file's (nothing was lost) is
    /// deleted quietly; one with nothing whole in it too. Of several, the newest is offered; the
    /// others stay on disk for later.
    static func scanJournals(
        _ directory: JournalDirectory, path: String, disk: TextBuffer, isOwn: (String) -> Bool = { _ in false }
    ) -> JournalScan {
        var found: [(ClaimedJournal, RecoveredJournal)] = []
        var held = 0
        // This process's own journals (one still being deleted after a close) are neither offered
        // nor another server's.
        for name in directory.names(forPath: path) where !isOwn(name) {
            guard let claimed = directory.claim(name) else {
                if FileIdentity.current(path: directory.path(of: name)) != nil { held += 1 }
                continue
            }
            guard let journal = RecoveredJournal.read(claimed.bytes) else {
                claimed.remove()  // nothing whole in it: nothing to recover
                continue
            }
            // Another file's whose path hashes alike (let go, not deleted).
            guard journal.path == path else { continue }
            if journal.text == disk {
                claimed.remove()
                continue
            }
            found.append((claimed, journal))
        }
        guard let (claimed, journal) = found.max(by: { $0.0.modified < $1.0.modified }) else {
            return JournalScan(offer: nil, heldElsewhere: held)
        }
        let offer = RecoveryOffer(
            date: claimed.modified, edits: journal.edits, fileMatchesBase: journal.baseText == disk, version: journal.version,
            cut: journal.cut, claimed: claimed, journal: journal)
        return JournalScan(offer: offer, heldElsewhere: held)
    }

    /// Whether the open that loaded the document put its file's old content back from the backup of
    /// an interrupted in-place save (until the document is closed).
    public func restoredSave(_ handle: String) -> SafeSave.RestoredSave? { restoredSaves[handle] }

    /// The recovery waiting for the document, if any.
    public func recoveryOffer(_ handle: String) -> RecoveryOffer? { recoveries[handle] }

    /// How many live servers hold journals of the document's file (they have unsaved changes to it).
    public func journalsHeldElsewhere(_ handle: String) -> Int { heldElsewhere[handle] ?? 0 }

    /// Brings back the unsaved text of a dead server's journal of the document, with its version
    /// and undo history (undo goes back to the journal's base). When the file no longer holds the
    /// base, the document comes back in conflict: mine the recovered text, theirs the file's, the
    /// base the journal's base, so that `resolveConflict` merges. The journal becomes the
    /// document's. Answers the new version and the edits from the text before.
    public func recover(_ handle: String, encoding: PositionEncoding) async throws(DocumentError) -> (version: Int64, edits: [TextEdit], inConflict: Bool) {
        try checkRecoverable(handle)
        await acquire(handle)
        defer { release(handle) }
        try checkRecoverable(handle)
        let offer = recoveries[handle]!
        let before = documents[handle]!
        let current = before.buffer, target = offer.journal.text
        let steps = await runOnOwnThread { TextDiff.edits(from: current, to: target) }
        guard let now = documents[handle] else { throw .unknownDocument(handle) }
        guard now.buffer.isIdentical(to: current), recoveries[handle] != nil else {
            throw .staleVersion(current: now.version, given: before.version)
        }
        var sent: [TextEdit] = []
        let matches = offer.fileMatchesBase
        recoveries[handle] = nil
        // The dead journal becomes the document's before the change is noted: the journal goes on
        // from it (cut at its last whole record) rather than starting another with the whole text.
        if let writer = journal {
            journals[handle] = ActiveJournal(
                name: offer.claimed.name, base: matches ? before.syncedText : offer.journal.baseText, bytes: offer.journal.length)
            writer.submit(.adopt(handle: handle, journal: offer.claimed, length: offer.journal.length))
        }
        change(handle, reason: .recovered, always: true) { document in
            sent.reserveCapacity(steps.count)
            for step in steps {
                sent.append(document.buffer.textEdit(for: step, encoding: encoding))
                document.buffer.apply(step)
            }
            document.history = offer.journal.history
            document.version = max(offer.journal.version, document.version + 1)
            if !matches {
                document.syncedText = offer.journal.baseText
                document.history.forgetCleanPoint()
                document.state.insert(.inConflict)
            } else if !offer.journal.unsaved {
                document.history.markClean()
            }
        }
        if !matches {
            let loaded = LoadedText(
                path: before.path, encoding: before.encoding, hasByteOrderMark: before.hasByteOrderMark,
                lineEnding: before.lineEnding, identity: before.identity)
            presenter.conflicts[handle] = DiskVersion(text: current, identity: before.identity, loaded: loaded, error: nil)
            // A way into conflict like any (§8.21): the file's text, which `mine` and a save would
            // overwrite, is kept as a conflict version.
            keepVersion(of: before.path, kind: .conflict, text: current)
        }
        if matches { scheduleAutosave(handle) }
        return (documents[handle]!.version, sent, !matches)
    }

    private func checkRecoverable(_ handle: String) throws(DocumentError) {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        guard recoveries[handle] != nil else { throw .noRecovery(handle: handle) }
        if document.state.contains(.editingDisabled) { throw .editingDisabled(handle: handle, reason: "the document is busy") }
        if document.hasUnsavedChanges || document.state.contains(.inConflict) {
            throw .unsavedChanges(handle: handle, path: document.path, reason: "recovering would replace them: save or revert first")
        }
    }

    /// Deletes the dead server's journal offered for the document.
    public func discardRecovery(_ handle: String) throws(DocumentError) {
        guard documents[handle] != nil else { throw .unknownDocument(handle) }
        guard let offer = recoveries.removeValue(forKey: handle) else { throw .noRecovery(handle: handle) }
        offer.claimed.remove()
    }

    /// Every journal waiting to be recovered: those offered for open documents, and dead servers'
    /// journals of files not open here. Reads the journal directory on a thread of its own.
    public func recoverable() async -> [RecoverableJournal] {
        guard let directory = journalDirectory else { return [] }
        var items = recoveries.compactMap { handle, offer -> RecoverableJournal? in
            guard let document = documents[handle] else { return nil }
            return RecoverableJournal(path: document.path, date: offer.date, edits: offer.edits, version: offer.journal.version, open: true)
        }
        let offered = Set(recoveries.values.map(\.claimed.name))
        let writer = journal
        let found = await runOnOwnThread { () -> [RecoverableJournal] in
            var found: [RecoverableJournal] = []
            for name in directory.allNames() where !offered.contains(name) && !(writer?.owns(name) ?? false) {
                // Claimed for the look only: the lock goes with the value.
                guard let claimed = directory.claim(name) else { continue }
                guard let journal = RecoveredJournal.read(claimed.bytes) else { continue }
                found.append(RecoverableJournal(path: journal.path, date: claimed.modified, edits: journal.edits, version: journal.version, open: false))
            }
            return found
        }
        // Another dead journal of a file open here (an older one than that offered) is still of an
        // open file.
        items += found.map { item in
            var item = item
            item.open = handleByPath[item.path] != nil
            return item
        }
        return items.sorted { ($0.date, $0.path) > ($1.date, $1.path) }
    }
}
