import FileStore
import Foundation
import Testing
import TextBuffer

@testable import DocumentSession

/// A store that journals into `state`'s journal directory, with one document opened from `name`.
private func journaledStore(_ state: TemporaryDirectory, file: String, flushDelay: Duration = .milliseconds(20)) async throws -> DocumentStore {
    let directory = try JournalDirectory.open(stateDirectory: state.path)
    return DocumentStore(watchFiles: false, journal: directory, journalFlushDelay: flushDelay)
}

/// The journals in `state` read back, by name.
private func journals(_ state: TemporaryDirectory) throws -> [String: RecoveredJournal] {
    let directory = try JournalDirectory.open(stateDirectory: state.path)
    var found: [String: RecoveredJournal] = [:]
    for name in directory.allNames() {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path(of: name))))
        found[name] = RecoveredJournal.read(bytes)
    }
    return found
}

@Suite("The journal of unsaved changes")
struct JournalTests {
    @Test("a document has a journal exactly while it has unsaved changes; it replays to the same text, version and undo history")
    func replayMatchesTheLiveDocument() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\ntwo\n")
        let store = try await journaledStore(state, file: path)
        let handle = try await store.open(path: path, encoding: nil).handle
        await store.finishJournals(keep: true)
        #expect(try journals(state).isEmpty, "a clean document has no journal")

        var version: Int64 = 1
        // Typing that merges into one step, a labelled edit, a no-op edit, an undo and a redo.
        for (index, character) in "abc".enumerated() {
            version = try await store.edit(handle, version: version, edits: [insert(String(character), at: 0, index)], encoding: .utf16, label: "Typing", merge: true)
        }
        version = try await store.edit(handle, version: version, edits: [replace(TextRange(1, 0, 1, 3), with: "TWO")], encoding: .utf16, label: "Shout", merge: false)
        version = try await store.edit(handle, version: version, edits: [], encoding: .utf16, label: nil, merge: false)
        version = try await store.undo(handle, version: version, encoding: .utf16).version
        version = try await store.redo(handle, version: version, encoding: .utf16).version
        version = try await store.undo(handle, version: version, encoding: .utf16).version
        await store.finishJournals(keep: true)

        let live = try await store.document(handle)
        let found = try journals(state)
        #expect(found.count == 1)
        let journal = try #require(found.values.first)
        #expect(journal.cut == nil)
        #expect(journal.text == live.buffer)
        #expect(journal.version == live.version && journal.version == version)
        #expect(journal.baseText.text == "one\ntwo\n")
        #expect(journal.history.undoCount == live.history.undoCount && journal.history.redoCount == live.history.redoCount)
        #expect(journal.history.undoLabel == live.history.undoLabel && journal.history.redoLabel == live.history.redoLabel)
        #expect(journal.unsaved)
        // Undo all the way in the replayed history comes back to the base, clean.
        var history = journal.history
        var text = journal.text
        while history.canUndo { _ = history.undo(&text, encoding: .utf8) }
        #expect(text.text == "one\ntwo\n" && !history.hasUnsavedChanges)

        // Undo back to the file's text: clean, so the journal goes.
        _ = try await store.undo(handle, version: version, encoding: .utf16)
        await store.finishJournals(keep: true)
        #expect(try await !store.document(handle).hasUnsavedChanges)
        #expect(try journals(state).isEmpty)
    }

    @Test("a save deletes the journal; closing without saving deletes it; a shutdown without hot exit deletes every one")
    func journalsEndWithTheUnsavedChanges() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let first = try files.write("a.txt", "a\n"), second = try files.write("b.txt", "b\n"), third = try files.write("c.txt", "c\n")
        let store = try await journaledStore(state, file: first)
        var handles: [String] = []
        for path in [first, second, third] {
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("x", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
            handles.append(handle)
        }
        await store.finishJournals(keep: true)
        #expect(try journals(state).count == 3)
        _ = try await store.save(handles[0])
        await store.finishJournals(keep: true)
        #expect(try journals(state).values.map(\.path).sorted() == [second, third])
        _ = try await store.close(handles[1], save: .never)
        await store.finishJournals(keep: true)
        #expect(try journals(state).values.map(\.path) == [third])
        await store.finishJournals(keep: false)
        #expect(try journals(state).isEmpty)
    }

    @Test("a dead store's journal is offered at the next open and recovered with its undo history; discard deletes it")
    func recoverAfterDeath() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("draft.txt", "hello\n")
        do {
            let store = try await journaledStore(state, file: path)
            let handle = try await store.open(path: path, encoding: nil).handle
            var version: Int64 = 1
            for word in ["one ", "two ", "three "] {
                version = try await store.edit(handle, version: version, edits: [insert(word, at: 0, 0)], encoding: .utf16, label: nil, merge: false)
            }
            await store.abandonJournals()
        }
        let store = try await journaledStore(state, file: path)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.buffer.text == "hello\n")
        let offer = try #require(await store.recoveryOffer(opened.handle))
        #expect(offer.edits == 3 && offer.version == 4 && offer.fileMatchesBase && offer.cut == nil)

        let (version, edits, inConflict) = try await store.recover(opened.handle, encoding: .utf16)
        #expect(version == 4 && !inConflict && !edits.isEmpty)
        var document = try await store.document(opened.handle)
        #expect(document.buffer.text == "three two one hello\n" && document.hasUnsavedChanges)
        await #expect(throws: DocumentError.noRecovery(handle: opened.handle)) { try await store.recover(opened.handle, encoding: .utf16) }
        // Undo goes back to the file's text, step by step.
        var at = version
        for expected in ["two one hello\n", "one hello\n", "hello\n"] {
            at = try await store.undo(opened.handle, version: at, encoding: .utf16).version
            #expect(try await store.document(opened.handle).buffer.text == expected)
        }
        document = try await store.document(opened.handle)
        #expect(!document.hasUnsavedChanges)
        // The journal became this document's: clean now, so it is gone.
        await store.finishJournals(keep: true)
        #expect(try journals(state).isEmpty)
    }

    @Test("recovering over a file changed since the journal's base comes back in conflict, and a merge keeps both sides")
    func recoverIntoConflict() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("list.txt", "apples\npears\nplums\n")
        do {
            let store = try await journaledStore(state, file: path)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [replace(TextRange(0, 0, 0, 6), with: "APPLES")], encoding: .utf16, label: nil, merge: false)
            await store.abandonJournals()
        }
        _ = try files.write("list.txt", "apples\npears\nPLUMS\n")
        let store = try await journaledStore(state, file: path)
        let opened = try await store.open(path: path, encoding: nil)
        let offer = try #require(await store.recoveryOffer(opened.handle))
        #expect(!offer.fileMatchesBase)
        let (version, _, inConflict) = try await store.recover(opened.handle, encoding: .utf16)
        #expect(inConflict)
        #expect(try await store.document(opened.handle).buffer.text == "APPLES\npears\nplums\n")
        _ = try await store.resolveConflict(opened.handle, .merge(text: nil), version: version, encoding: .utf16)
        #expect(try await store.document(opened.handle).buffer.text == "APPLES\npears\nPLUMS\n")
    }

    @Test("a journal whose text is the file's is deleted quietly; a discarded one is not offered again")
    func nothingToOffer() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("same.txt", "text\n")
        do {
            let store = try await journaledStore(state, file: path)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [insert("new ", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
            await store.abandonJournals()
        }
        // Another program wrote the same text the journal holds: nothing was lost.
        _ = try files.write("same.txt", "new text\n")
        do {
            let store = try await journaledStore(state, file: path)
            let opened = try await store.open(path: path, encoding: nil)
            #expect(await store.recoveryOffer(opened.handle) == nil)
            #expect(try journals(state).isEmpty)
            _ = try await store.edit(opened.handle, version: 1, edits: [insert("more ", at: 0, 0)], encoding: .utf16, label: nil, merge: false)
            await store.abandonJournals()
        }
        let store = try await journaledStore(state, file: path)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(await store.recoveryOffer(opened.handle) != nil)
        #expect(await store.recoverable().map(\.path) == [path])
        try await store.discardRecovery(opened.handle)
        #expect(await store.recoveryOffer(opened.handle) == nil)
        #expect(try journals(state).isEmpty)
        #expect(await store.recoverable().isEmpty)
    }

    @Test("an in-place save killed while writing the file: the next open puts the old content back from the backup, says so, and the journal brings back what was being saved; a live save's backup is left alone")
    func interruptedInPlaceSave() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("linked.txt", "old text\n")
        var status = stat()
        #expect(stat(path, &status) == 0)
        let inode = String(UInt64(status.st_ino), radix: 16)
        do {
            let store = try await journaledStore(state, file: path)
            let handle = try await store.open(path: path, encoding: nil).handle
            _ = try await store.edit(handle, version: 1, edits: [replace(TextRange(0, 0, 0, 3), with: "new")], encoding: .utf16, label: nil, merge: false)
            await store.abandonJournals()
        }
        // What a save killed in the middle of writing leaves: the flushed backup (named after the
        // inode) and a file part new, part old.
        let backup = try files.write(".docsession-backup-\(inode)-1f2e3d", "old text\n")
        // Written in place (the same inode), as an in-place save writes.
        let descriptor = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        #expect(descriptor >= 0 && write(descriptor, "new t", 5) == 5)
        close(descriptor)
        #expect(stat(path, &status) == 0 && String(UInt64(status.st_ino), radix: 16) == inode)
        // Another file's backup, and a live save's (its lock held), are not this one's to restore.
        let other = try files.write(".docsession-backup-\(String(UInt64(status.st_ino) + 1, radix: 16))-aa", "other")

        let store = try await journaledStore(state, file: path)
        let opened = try await store.open(path: path, encoding: nil)
        let restored = try #require(await store.restoredSave(opened.handle))
        #expect(restored.size == 9 && restored.backup.hasPrefix(".docsession-backup-\(inode)-"))
        #expect(opened.buffer.text == "old text\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old text\n")
        #expect(!FileManager.default.fileExists(atPath: backup))
        #expect(FileManager.default.fileExists(atPath: other))
        let offer = try #require(await store.recoveryOffer(opened.handle))
        #expect(offer.fileMatchesBase)
        _ = try await store.recover(opened.handle, encoding: .utf16)
        #expect(try await store.document(opened.handle).buffer.text == "new text\n")
    }

    @Test("the backup of a save still running (its lock held) is not restored")
    func liveBackupIsLeftAlone() async throws {
        let files = try TemporaryDirectory()
        let path = try files.write("busy.txt", "half written")
        var status = stat()
        #expect(stat(path, &status) == 0)
        let backup = try files.write(".docsession-backup-\(String(UInt64(status.st_ino), radix: 16))-77", "whole old text")
        let held = open(backup, O_RDONLY | O_CLOEXEC)
        defer { close(held) }
        #expect(flock(held, LOCK_EX | LOCK_NB) == 0)
        let store = DocumentStore(watchFiles: false)
        let opened = try await store.open(path: path, encoding: nil)
        #expect(await store.restoredSave(opened.handle) == nil)
        #expect(opened.buffer.text == "half written")
        #expect(FileManager.default.fileExists(atPath: backup))
    }
}

@Suite("Handoff: journal copies for a session snapshot")
struct JournalCopyTests {
    @Test("the copy of a journaled document replays to its text, version and undo history, including the changes just made; a clean document has none")
    func copyOfTheLiveJournal() async throws {
        let files = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\ntwo\n")
        // A long flush delay: the copy must not wait for it, and must hold the last change.
        let store = try await journaledStore(state, file: path, flushDelay: .seconds(30))
        let handle = try await store.open(path: path, encoding: nil).handle
        #expect(try await store.journalCopy(handle) == nil)
        var version: Int64 = 1
        version = try await store.edit(handle, version: version, edits: [insert("A", at: 0, 0)], encoding: .utf16, label: "First", merge: false)
        version = try await store.edit(handle, version: version, edits: [insert("B", at: 1, 0)], encoding: .utf16, label: "Second", merge: false)
        let bytes = try #require(try await store.journalCopy(handle))
        let copy = try #require(RecoveredJournal.read(bytes))
        let live = try await store.document(handle)
        #expect(copy.cut == nil)
        #expect(copy.text == live.buffer && copy.version == version && copy.unsaved)
        #expect(copy.history.undoCount == 2 && copy.history.undoLabel == "Second")
        #expect(copy.baseText.text == "one\ntwo\n" && copy.path == path)
        await #expect(throws: DocumentError.unknownDocument("d9")) { try await store.journalCopy("d9") }
    }

    @Test("without a journal, the copy is made from the document: its synced and current texts, one undo step between them")
    func copyWithoutAJournal() async throws {
        let files = try TemporaryDirectory()
        let path = try files.write("notes.txt", "one\ntwo\n")
        let store = DocumentStore(watchFiles: false)
        let handle = try await store.open(path: path, encoding: nil).handle
        let version = try await store.edit(handle, version: 1, edits: [insert("new ", at: 1, 0)], encoding: .utf16, label: nil, merge: false)
        let bytes = try #require(try await store.journalCopy(handle))
        let copy = try #require(RecoveredJournal.read(bytes))
        #expect(copy.text.text == "one\nnew two\n" && copy.baseText.text == "one\ntwo\n")
        #expect(copy.version == version && copy.unsaved && copy.history.undoCount == 1)
        var history = copy.history, text = copy.text
        _ = history.undo(&text, encoding: .utf8)
        #expect(text.text == "one\ntwo\n" && !history.hasUnsavedChanges)
    }
}
