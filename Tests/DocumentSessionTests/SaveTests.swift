import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Synchronization
import Testing

@testable import DocumentSession
import FileStore
import TextBuffer

/// The events a store sent, in order.
final class EventLog: Sendable {
    private let events = Mutex<[DocumentEvent]>([])
    func record(_ event: DocumentEvent) { events.withLock { $0.append(event) } }
    var all: [DocumentEvent] { events.withLock { $0 } }
    var reasons: [DocumentEvent.Reason] { all.map(\.reason) }
    func clear() { events.withLock { $0 = [] } }

    /// Waits (up to 60 s, by the clock: a busy machine stretches sleeps) until an event matches.
    func wait(for matches: (DocumentEvent) -> Bool) async throws -> DocumentEvent {
        _ = await waitUntil(interval: .milliseconds(10)) { all.contains(where: matches) }
        guard let event = all.first(where: matches) else { throw TestFailure("no matching event in \(all)") }
        return event
    }
}

///
/// The file is not watched unless `watch`: these tests are about what a save itself finds on disk,
/// which the watcher would otherwise find first, at a moment of its own.
func storeWithEvents(
    _ bytes: [UInt8], name: String = "doc.txt", encoding: TextEncoding? = nil, watch: Bool = false
) async throws -> (DocumentStore, String, TemporaryDirectory, EventLog) {
    let directory = try TemporaryDirectory()
    let path = try directory.write(name, bytes)
    let log = EventLog()
    let store = DocumentStore(events: { log.record($0) }, watchFiles: watch)
    let document = try await store.open(path: path, encoding: encoding)
    return (store, document.handle, directory, log)
}

/// The content hash of the document's file, once the background hashing has recorded it.
func waitForHash(_ store: DocumentStore, _ handle: String) async throws -> UInt64? {
    _ = try await waitUntil(interval: .milliseconds(10)) { try await store.document(handle).identity.contentHash != nil }
    return try await store.document(handle).identity.contentHash
}

func typeAtStart(_ store: DocumentStore, _ handle: String, _ text: String) async throws -> Int64 {
    let version = try await store.document(handle).version
    return try await store.edit(handle, version: version, edits: [insert(text, at: 0, 0)], encoding: .utf16, label: nil, merge: false)
}

@Suite("DocumentStore: saving")
struct SaveTests {
    @Test("a save writes the text, makes the document clean, records the new identity (its hash from memory, soon after) and reports edited then saved")
    func save() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("world\n".utf8))
        let version = try await typeAtStart(store, handle, "hello ")
        let saved = try await store.save(handle)
        #expect(saved.version == version)
        #expect(try contents(directory.file("doc.txt")) == Array("hello world\n".utf8))
        let document = try await store.document(handle)
        #expect(!document.hasUnsavedChanges)
        #expect(document.identity.sameState(as: saved.identity))
        #expect(try await waitForHash(store, handle) == ContentHasher.hash(Array("hello world\n".utf8)))
        #expect(log.reasons == [.edited, .saved])
        #expect(log.all.map(\.hasUnsavedChanges) == [true, false])
        // A clean document saves without news.
        _ = try await store.save(handle)
        #expect(log.reasons == [.edited, .saved])
    }

    @Test("edits made while a save runs are later versions and stay unsaved after it")
    func editsDuringASave() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("base\n".utf8))
        let first = try await typeAtStart(store, handle, "1")
        let ticket = try await store.beginSave(handle)
        let second = try await typeAtStart(store, handle, "2")
        let saved = try await store.finishSave(ticket)
        #expect(saved.version == first)
        #expect(try contents(directory.file("doc.txt")) == Array("1base\n".utf8))
        let document = try await store.document(handle)
        #expect(document.version == second)
        #expect(document.hasUnsavedChanges)
        // Undoing the later edit reaches the saved text: clean.
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        #expect(!(try await store.document(handle).hasUnsavedChanges))
    }

    @Test("saves of one document run one at a time, in order; the last one writes the last text")
    func oneAtATime() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("x".utf8))
        _ = try await typeAtStart(store, handle, "a")
        let first = try await store.beginSave(handle)
        _ = try await typeAtStart(store, handle, "b")
        let second = try await store.beginSave(handle)
        async let one = store.finishSave(first)
        async let two = store.finishSave(second)
        let (a, b) = try await (one, two)
        #expect(a.version == 2)
        #expect(b.version == 3)
        #expect(try contents(directory.file("doc.txt")) == Array("bax".utf8))
        #expect(!(try await store.document(handle).hasUnsavedChanges))
    }

    @Test("a save refused for want of permission looks at the file again: attributesChanged with readOnly comes after the failure, also with the watcher off")
    func refusedSaveReportsReadOnly() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("text\n".utf8))
        _ = try await typeAtStart(store, handle, "more ")
        let path = directory.file("doc.txt")
        #expect(chmod(path, 0o444) == 0)
        defer { chmod(path, 0o644) }
        let error = await thrownError { try await store.save(handle) }
        guard case .save(.fileSystem(let detail))? = error else { Issue.record("the save gave \(String(describing: error))"); return }
        #expect(detail.errno == EACCES)
        let reasons = log.reasons
        guard let failed = reasons.lastIndex(of: .saveFailed), let noted = reasons.lastIndex(of: .attributesChanged) else {
            Issue.record("events: \(log.all)"); return
        }
        #expect(failed < noted)
        #expect(log.all[noted].readOnly == true)
        #expect(try await store.document(handle).hasUnsavedChanges)
    }

    @Test("saves write in the order they were asked for, whichever one's task comes to the lock first")
    func lineKeepsRequestOrder() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("x".utf8))
        _ = try await typeAtStart(store, handle, "a")
        let first = try await store.beginSave(handle)  // takes the lock
        _ = try await typeAtStart(store, handle, "b")
        let second = try await store.beginSave(handle)  // in line: "bax", version 3
        _ = try await typeAtStart(store, handle, "c")
        let third = try await store.beginSave(handle)  // in line behind it: "cbax", version 4
        // The third's task begins to wait before the second's (the soak saw this order by chance).
        let late = Task { try await store.finishSave(third) }
        #expect(try await waitUntil { await store.turnsWaiting(handle) == 1 })
        let early = Task { try await store.finishSave(second) }
        #expect(try await waitUntil { await store.turnsWaiting(handle) == 2 })
        #expect(try await store.finishSave(first).version == 2)
        let (b, c) = (try await early.value, try await late.value)
        #expect(b.version == 3)
        #expect(c.version == 4)
        // Written last, the newest text: the file never goes back to an older save.
        #expect(try contents(directory.file("doc.txt")) == Array("cbax".utf8))
        #expect(!(try await store.document(handle).hasUnsavedChanges))
    }

    @Test("the encoding, byte order mark and line endings are written back as they were read", arguments: [
        ([0xFF, 0xFE] + Array("h\0i\0\r\0\n\0".utf8), TextEncoding?.none),
        ([0xFE, 0xFF] + Array("\0h\0i\0\n".utf8), TextEncoding?.none),
        ([0xEF, 0xBB, 0xBF] + Array("hi\r\n".utf8), TextEncoding?.none),
        (Array("caf".utf8) + [0xE9, 0x0D], TextEncoding?.some(.latin1)),
    ] as [([UInt8], TextEncoding?)])
    func encodings(bytes: [UInt8], encoding: TextEncoding?) async throws {
        let (store, handle, directory, _) = try await storeWithEvents(bytes, encoding: encoding)
        _ = try await typeAtStart(store, handle, "é")
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        _ = try await store.redo(handle, version: nil, encoding: .utf16)
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        // Clean again, but a forced save proves the bytes round-trip exactly.
        _ = try await store.save(handle, force: true)
        #expect(try contents(directory.file("doc.txt")) == bytes)
        _ = try await typeAtStart(store, handle, "é")
        _ = try await store.save(handle)
        let document = try await store.document(handle)
        let reread = try await DocumentStore().open(path: directory.file("doc.txt"), encoding: encoding)
        #expect(reread.buffer.text == document.buffer.text)
        #expect(reread.encoding == document.encoding)
        #expect(reread.hasByteOrderMark == document.hasByteOrderMark)
    }

    @Test("a character ISO 8859-1 cannot hold fails the save with savingError and the detail; the text and file stay")
    func unencodable() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("caf".utf8) + [0xE9], encoding: .latin1)
        _ = try await typeAtStart(store, handle, "€")
        let error = await thrownError { try await store.save(handle) }
        #expect(error == .save(.unencodable(offset: 0, scalar: 0x20AC, encoding: .latin1)))
        let document = try await store.document(handle)
        #expect(document.state == .savingError)
        #expect(document.buffer.text == "€café")
        #expect(try contents(directory.file("doc.txt")) == Array("caf".utf8) + [0xE9])
        #expect(log.all.last?.reason == .saveFailed)
        #expect(log.all.last?.error == error)
        // The way out: remove it and save; savingError clears.
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        _ = try await typeAtStart(store, handle, "!")
        _ = try await store.save(handle)
        #expect(try await store.document(handle).state == [])
        #expect(log.all.last?.reason == .saved)
        #expect(log.all.last?.previousState == .savingError)
    }

    @Test("a file changed on disk is not overwritten: changedOnDisk, inConflict; force saves and clears it")
    func conflict() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("mine\n".utf8))
        _ = try await typeAtStart(store, handle, "my ")
        try Data("theirs\n".utf8).write(to: URL(fileURLWithPath: directory.file("doc.txt")))
        let error = await thrownError { try await store.save(handle) }
        guard case .save(.changedOnDisk(let path, _, let found))? = error else { Issue.record("\(String(describing: error))"); return }
        #expect(path == directory.file("doc.txt"))
        #expect(found != nil)
        #expect(try await store.document(handle).state == .inConflict)
        #expect(log.all.last?.reason == .externalChange)
        #expect(try contents(directory.file("doc.txt")) == Array("theirs\n".utf8))
        _ = try await store.save(handle, force: true)
        #expect(try contents(directory.file("doc.txt")) == Array("my mine\n".utf8))
        #expect(try await store.document(handle).state == [])
    }

    @Test("a touch before the background hash has come in (a busy machine) is not a conflict: the save computes the hash then", arguments: [
        Array("plain\n".utf8), [0xFF, 0xFE] + Array("u\0t\0f\0\n\0".utf8),
    ])
    func touchedBeforeTheHash(bytes: [UInt8]) async throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("doc.txt", bytes)
        let store = DocumentStore(watchFiles: false)
        await store.stopBackgroundHashing()
        let handle = try await store.open(path: path, encoding: nil).handle
        #expect(try await store.document(handle).identity.contentHash == nil)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        _ = try await typeAtStart(store, handle, "x")
        _ = try await store.save(handle)
        #expect(try await store.document(handle).state == [])
        #expect(try await store.document(handle).identity.contentHash == nil)
        // Touched right after that save, before any hash of it: computed then, again.
        times = [timespec(tv_sec: 2_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        _ = try await typeAtStart(store, handle, "y")
        _ = try await store.save(handle)
        #expect(try await store.document(handle).state == [])
        // A change of the same size with the times restored is still caught.
        let now = try contents(path)
        var changed = now
        changed[changed.count - 1] = changed[changed.count - 1] == 0 ? 1 : 0
        try Data(changed).write(to: URL(fileURLWithPath: path))
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        _ = try await typeAtStart(store, handle, "z")
        #expect(await thrownError { try await store.save(handle) } != nil)
        #expect(try contents(path) == changed)
    }

    @Test("the content hash is recorded after an open (from memory); a file only touched since is not a conflict", arguments: [
        Array("plain\n".utf8), [0xFF, 0xFE] + Array("u\0t\0f\0\n\0".utf8),
    ])
    func touchedIsNotAConflict(bytes: [UInt8]) async throws {
        let (store, handle, directory, _) = try await storeWithEvents(bytes)
        #expect(try await waitForHash(store, handle) == ContentHasher.hash(bytes))
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, directory.file("doc.txt"), &times, 0) == 0)
        _ = try await typeAtStart(store, handle, "x")
        _ = try await store.save(handle)
        #expect(try await store.document(handle).state == [])
    }

    @Test("save-as moves the session to a new file and never replaces one unless forced")
    func saveAs() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("text\n".utf8))
        _ = try await typeAtStart(store, handle, "new ")
        let existing = try directory.write("existing.txt", "keep\n")
        #expect(await thrownError { try await store.save(handle, to: existing) } == .save(.alreadyExists(path: existing)))
        #expect(try contents(existing) == Array("keep\n".utf8))
        let copy = directory.file("copy.txt")
        let saved = try await store.save(handle, to: copy)
        #expect(saved.path == copy)
        #expect(try contents(copy) == Array("new text\n".utf8))
        #expect(try contents(directory.file("doc.txt")) == Array("text\n".utf8))
        let document = try await store.document(handle)
        #expect(document.path == copy)
        #expect(!document.hasUnsavedChanges)
        // Opening the new path answers the same session; the old path is free.
        #expect(try await store.open(path: copy, encoding: nil).handle == handle)
        #expect(try await store.open(path: directory.file("doc.txt"), encoding: nil).handle != handle)
        // A path another document holds is refused; force replaces a file that is not open.
        #expect(await thrownError { try await store.save(handle, to: directory.file("doc.txt"), force: true) }
            == .openElsewhere(path: directory.file("doc.txt"), handle: "d2"))
        _ = try await store.save(handle, to: existing, force: true)
        #expect(try contents(existing) == Array("new text\n".utf8))
    }

    @Test("revert reloads the file as one undoable step, refuses edits while it runs and clears inConflict")
    func revert() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("on disk\n".utf8))
        _ = try await typeAtStart(store, handle, "edited ")
        try Data("changed on disk\n".utf8).write(to: URL(fileURLWithPath: directory.file("doc.txt")))
        _ = await thrownError { try await store.save(handle) }
        #expect(try await store.document(handle).state == .inConflict)
        log.clear()
        let ticket = try await store.beginRevert(handle)
        let refused = await thrownError { try await typeAtStart(store, handle, "x") }
        guard case .editingDisabled? = refused else { Issue.record("\(String(describing: refused))"); return }
        let reverted = try await store.finishRevert(ticket)
        #expect(reverted.buffer.text == "changed on disk\n")
        #expect(reverted.version == 3)
        #expect(!reverted.hasUnsavedChanges)
        #expect(reverted.state == [])
        #expect(log.reasons == [.reverting, .reverted])
        #expect(log.all.first?.state == [.inConflict, .editingDisabled])
        #expect(reverted.history.undoLabel == "Revert")
        // The revert can be undone: the edited text comes back, unsaved.
        _ = try await store.undo(handle, version: nil, encoding: .utf16)
        let undone = try await store.document(handle)
        #expect(undone.buffer.text == "edited on disk\n")
        #expect(undone.hasUnsavedChanges)
    }

    @Test("a revert whose file vanished fails with savingError and the detail; the text stays")
    func revertFails() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("text".utf8))
        _ = try await typeAtStart(store, handle, "my ")
        try FileManager.default.removeItem(atPath: directory.file("doc.txt"))
        let error = await thrownError { try await store.revert(handle) }
        guard case .load(.fileSystem(let detail))? = error else { Issue.record("\(String(describing: error))"); return }
        #expect(detail.code == "ENOENT")
        let document = try await store.document(handle)
        #expect(document.state == .savingError)
        #expect(document.buffer.text == "my text")
        #expect(log.all.last?.reason == .revertFailed)
        // The file is gone: a save recreates it (nothing of anyone's is overwritten).
        _ = try await store.save(handle)
        #expect(try contents(directory.file("doc.txt")) == Array("my text".utf8))
    }

    @Test("save progress counts the file's bytes (a UTF-16 file with its byte order mark): the last report is the size written")
    func progressInFileBytes() async throws {
        let text = String(repeating: "zwei Wörter\n", count: 50_000)
        let bytes: [UInt8] = [0xFF, 0xFE] + text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let (store, handle, directory, _) = try await storeWithEvents(bytes)
        _ = try await typeAtStart(store, handle, "!")
        let reports = Mutex<[(Int, Int)]>([])
        let saved = try await store.save(handle, progress: { done, total in reports.withLock { $0.append((done, total)) } })
        let all = reports.withLock { $0 }
        #expect(all.last?.0 == saved.size)
        #expect(all.allSatisfy { $0.1 == saved.size && $0.0 <= $0.1 })
        #expect(saved.size == bytes.count + 2)
        #expect(try contents(directory.file("doc.txt")).count == saved.size)
    }

    @Test("a large document's save sets progressAvailable while it runs and reports bytes")
    func progress() async throws {
        let text = String(repeating: "line of text\n", count: 200_000)
        let (store, handle, directory, log) = try await storeWithEvents(Array(text.utf8))
        _ = try await typeAtStart(store, handle, "!")
        let reports = Probe()
        defer { withExtendedLifetime(directory) {} }
        _ = try await store.save(handle, progress: { done, total in if done == total { reports.hit() } })
        #expect(reports.calls >= 1)
        #expect(log.reasons == [.edited, .saving, .saved])
        #expect(log.all[1].state == .progressAvailable)
        #expect(log.all[2].state == [])
    }

    @Test("autosave after a quiet delay writes the file and says so; it never overwrites a file changed on disk")
    func autosave() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("text\n".utf8))
        await store.setAutosave(.afterDelay(milliseconds: 50))
        _ = try await typeAtStart(store, handle, "auto ")
        let saved = try await log.wait { $0.reason == .saved }
        #expect(saved.autosave)
        #expect(try contents(directory.file("doc.txt")) == Array("auto text\n".utf8))
        #expect(!(try await store.document(handle).hasUnsavedChanges))
        try Data("theirs\n".utf8).write(to: URL(fileURLWithPath: directory.file("doc.txt")))
        _ = try await typeAtStart(store, handle, "more ")
        let conflict = try await log.wait { $0.reason == .externalChange }
        #expect(conflict.autosave)
        #expect(conflict.state == .inConflict)
        #expect(try contents(directory.file("doc.txt")) == Array("theirs\n".utf8))
        // In conflict, no further autosave tries.
        log.clear()
        _ = try await typeAtStart(store, handle, "again ")
        try await Task.sleep(for: .milliseconds(200))
        #expect(!log.reasons.contains(.saved) && !log.reasons.contains(.externalChange))
    }

    @Test("a burst of 2,000 edits keeps one autosave timer, and saves once, a delay after the last edit")
    func autosaveBurst() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("text\n".utf8))
        // A delay far above any pause of a busy machine between two edits of the burst: a pause
        // longer than the delay would rightly bring a save in the middle (seen with 150 ms).
        await store.setAutosave(.afterDelay(milliseconds: 3_000))
        let started = ContinuousClock.now
        var timers: Set<Int> = []
        for _ in 0..<2_000 {
            _ = try await typeAtStart(store, handle, "a")
            timers.insert(await store.autosaveTimers.count)
        }
        let lastEdit = ContinuousClock.now
        #expect(timers == [1], "timers alive during the burst: \(timers)")
        let saved = try await log.wait { $0.reason == .saved }
        let savedAt = ContinuousClock.now
        #expect(saved.autosave)
        // Not before the delay had passed after the last edit (and the burst outlasted the delay
        // or not: either way only the last edit's deadline counts).
        #expect(savedAt - lastEdit >= .milliseconds(2_990), "saved \(savedAt - lastEdit) after the last edit, \(lastEdit - started) burst")
        #expect(try contents(directory.file("doc.txt")) == Array((String(repeating: "a", count: 2_000) + "text\n").utf8))
        try await Task.sleep(for: .milliseconds(300))
        #expect(log.all.filter { $0.reason == .saved }.count == 1)
        #expect(await store.autosaveTimers.isEmpty)
    }

    @Test("closing reports a closed state; the store sweeps our stale temp files when it opens a document")
    func closeAndSweep() async throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("doc.txt", "text")
        _ = try directory.write(".docsession-save-deadbeef", "half a save")
        let log = EventLog()
        let store = DocumentStore(events: { log.record($0) })
        let handle = try await store.open(path: path, encoding: nil).handle
        #expect(!FileManager.default.fileExists(atPath: directory.file(".docsession-save-deadbeef")))
        #expect(try await store.close(handle, save: .ifChanged) == false)
        #expect(log.all.last?.reason == .closed)
        #expect(log.all.last?.state == .closed)
    }

    @Test("a save as sweeps the stale temp files of killed saves in its destination's directory, by the open's rules: regular files named .docsession-save-* only, no backup, link or directory, nothing elsewhere; a refused save as sweeps too, a save to the document's own file does not")
    func saveAsSweepsTheDestination() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("text\n".utf8))
        let destination = try TemporaryDirectory()
        let elsewhere = try TemporaryDirectory()
        for name in [".docsession-save-deadbeef", ".docsession-save-", ".docsession-backup-1234", "other.txt", "docsession-save-x"] {
            _ = try destination.write(name, "x")
        }
        #expect(mkdir(destination.file(".docsession-save-dir"), 0o755) == 0)
        #expect(symlink("other.txt", destination.file(".docsession-save-link")) == 0)
        _ = try elsewhere.write(".docsession-save-elsewhere", "another directory")
        _ = try directory.write(".docsession-save-beside-the-old-file", "not the destination's")
        func names(_ directory: TemporaryDirectory) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        }

        _ = try await typeAtStart(store, handle, "new ")
        _ = try await store.save(handle, to: destination.file("copy.txt"))
        #expect(try names(destination) == [
            ".docsession-backup-1234", ".docsession-save-dir", ".docsession-save-link", "copy.txt", "docsession-save-x", "other.txt",
        ])
        #expect(try contents(destination.file(".docsession-backup-1234")) == Array("x".utf8))
        #expect(try names(elsewhere) == [".docsession-save-elsewhere"])
        #expect(FileManager.default.fileExists(atPath: directory.file(".docsession-save-beside-the-old-file")))

        // Refused (a file is at `to`): the destination's directory is swept all the same.
        _ = try elsewhere.write("taken.txt", "keep\n")
        #expect(await thrownError { try await store.save(handle, to: elsewhere.file("taken.txt")) }
            == .save(.alreadyExists(path: elsewhere.file("taken.txt"))))
        #expect(try names(elsewhere) == ["taken.txt"])

        // An ordinary save (and a save "as" the document's own file) sweeps nothing.
        _ = try destination.write(".docsession-save-cafe", "x")
        _ = try await typeAtStart(store, handle, "more ")
        _ = try await store.save(handle)
        _ = try await typeAtStart(store, handle, "again ")
        _ = try await store.save(handle, to: destination.file("copy.txt"))
        #expect(FileManager.default.fileExists(atPath: destination.file(".docsession-save-cafe")))
    }
}
