import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Collects a watcher's events and waits, bounded, for the ones a test expects.
private final class EventLog: Sendable {
    private let events = Mutex<[FileEvent]>([])

    func append(_ event: FileEvent) { events.withLock { $0.append(event) } }

    var all: [FileEvent] { events.withLock { $0 } }

    func events(for path: String) -> [FileEvent] { all.filter { $0.path == path } }

    /// Waits up to `seconds` for an event satisfying `matches`; answers it, or nil at the deadline.
    @discardableResult
    func waitFor(
        seconds: Double = 5, _ matches: @escaping (FileEvent) -> Bool
    ) async -> FileEvent? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let found = all.first(where: matches) { return found }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return all.first(where: matches)
    }

    func waitFor(_ kind: FileEvent.Kind, at path: String) async -> FileEvent? {
        await waitFor { $0.path == path && $0.kind == kind }
    }
}

/// A fresh directory under the temporary directory.
private func makeDirectory() -> String {
    try! makeTemporaryDirectory(prefix: "filewatcher")
}

private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// Writes `text` to `path` (created or truncated) with open, write, close.
private func writeFile(_ path: String, _ text: String, flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) {
    let fd = open(path, flags | O_CLOEXEC, 0o644)
    precondition(fd >= 0, "open \(path): \(errno)")
    let bytes = Array(text.utf8)
    if !bytes.isEmpty { precondition(write(fd, bytes, bytes.count) == bytes.count) }
    close(fd)
}

/// Opens `path` for reading, reads a little, closes it (`IN_OPEN`, `IN_ACCESS`, `IN_CLOSE_NOWRITE`).
private func readFile(_ path: String) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    precondition(fd >= 0, "open \(path): \(errno)")
    var buffer = [UInt8](repeating: 0, count: 64)
    _ = read(fd, &buffer, buffer.count)
    close(fd)
}

/// The links in /proc/self/fd, and how many of them point at `target` (all when nil).
private func openDescriptors(pointingAt target: String? = nil) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    guard let target else { return names.count }
    return names.filter { name in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)) == target
    }.count
}

/// Waits, bounded, until a write to `sentinel` (a watched file) has been reported: every event
/// the kernel queued before that write has been delivered by then (windows end in arrival order).
private func settle(_ log: EventLog, sentinel: String) async {
    let before = log.events(for: sentinel).count
    writeFile(sentinel, "sentinel \(before)\n")
    let seen = await log.waitFor { _ in log.events(for: sentinel).count > before }
    #expect(seen != nil, "the sentinel's write was not reported")
}

// Serialized: the stop() test also counts all of the process's descriptors, which this suite's
// other tests, run beside it, would move.
@Suite("FileWatcher: inotify on parent directories", .serialized)
struct FileWatcherTests {
    @Test("an in-place write is one modified event, with the default debounce")
    func inPlaceWrite() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/a.txt"
        writeFile(file, "one\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        let token = try watcher.watch(path: file)
        writeFile(file, "two\n")
        let event = await log.waitFor(.modified, at: file)
        #expect(event?.token == token)
    }

    @Test("a burst of 1,000 small writes within the debounce is one modified event")
    func burstOfWrites() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/burst.txt"
        let sentinel = directory + "/sentinel.txt"
        writeFile(file, "")
        writeFile(sentinel, "")
        let log = EventLog()
        let watcher = try FileWatcher(debounce: .milliseconds(250), handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        _ = try watcher.watch(path: sentinel)
        let fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC)
        #expect(fd >= 0)
        for index in 0..<1_000 {
            let bytes = Array("line \(index)\n".utf8)
            #expect(write(fd, bytes, bytes.count) == bytes.count)
        }
        close(fd)
        #expect(await log.waitFor(.modified, at: file) != nil)
        await settle(log, sentinel: sentinel)
        #expect(log.events(for: file).map(\.kind) == [.modified])
    }

    @Test("truncate then write is one modified event")
    func truncateThenWrite() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/t.txt"
        let sentinel = directory + "/sentinel.txt"
        writeFile(file, "original content\n")
        writeFile(sentinel, "")
        let log = EventLog()
        let watcher = try FileWatcher(debounce: .milliseconds(250), handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        _ = try watcher.watch(path: sentinel)
        writeFile(file, "")  // truncated and closed: empty for a moment
        writeFile(file, "new content\n", flags: O_WRONLY)
        #expect(await log.waitFor(.modified, at: file) != nil)
        await settle(log, sentinel: sentinel)
        #expect(log.events(for: file).map(\.kind) == [.modified])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "new content\n")
    }

    @Test("a rename over the file (write a temp, rename it over) is replaced, another inode")
    func renameReplace() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/r.txt"
        let sentinel = directory + "/sentinel.txt"
        writeFile(file, "before\n")
        writeFile(sentinel, "")
        let recorded = try #require(FileIdentity.current(path: file))
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        _ = try watcher.watch(path: sentinel)
        writeFile(directory + "/.r.txt.tmp", "after\n")
        #expect(rename(directory + "/.r.txt.tmp", file) == 0)
        #expect(await log.waitFor(.replaced, at: file) != nil)
        await settle(log, sentinel: sentinel)
        #expect(log.events(for: file).map(\.kind) == [.replaced])
        #expect(FileWatcher.classify(recorded: recorded, now: FileIdentity.current(path: file)) == .replacedByAnotherFile)
    }

    @Test("sed -i (a real external writer replacing by rename) is replaced")
    func sedInPlace() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/bin/sed") else { return }
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/s.txt"
        writeFile(file, "hello\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        let sed = Process()
        sed.executableURL = URL(fileURLWithPath: "/bin/sed")
        sed.arguments = ["-i", "s/hello/world/", file]
        try sed.run()
        sed.waitUntilExit()
        #expect(sed.terminationStatus == 0)
        #expect(await log.waitFor(.replaced, at: file) != nil)
    }

    @Test("a same-size write with the modification time restored (touch -r) is modified; only the hash tells")
    func sameSizeWriteWithRestoredTime() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/same.txt"
        writeFile(file, "abcdef\n")
        var recorded = try #require(FileIdentity.current(path: file))
        recorded.contentHash = try #require(ContentHasher.hashFile(path: file)).hash
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        writeFile(file, "ABCDEF\n", flags: O_WRONLY)
        // Restore the modification (and access) time as `touch -r` would.
        var times = [
            timespec(tv_sec: Int(recorded.modificationTime / 1_000_000_000), tv_nsec: Int(recorded.modificationTime % 1_000_000_000)),
            timespec(tv_sec: Int(recorded.modificationTime / 1_000_000_000), tv_nsec: Int(recorded.modificationTime % 1_000_000_000)),
        ]
        #expect(utimensat(AT_FDCWD, file, &times, 0) == 0)
        #expect(await log.waitFor(.modified, at: file) != nil)

        var now = try #require(FileIdentity.current(path: file))
        #expect(now.size == recorded.size && now.modificationTime == recorded.modificationTime)
        #expect(now.changeTime != recorded.changeTime)
        // By status alone: a touch (the ctime moved, nothing else), to be confirmed by hashing.
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .touched)
        now.contentHash = try #require(ContentHasher.hashFile(path: file)).hash
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .contentChanged)
    }

    @Test("mv within the directory is movedTo the new path")
    func moveWithinDirectory() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/old.txt"
        writeFile(file, "x\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        #expect(rename(file, directory + "/new.txt") == 0)
        #expect(await log.waitFor(.movedTo(newPath: directory + "/new.txt"), at: file) != nil)
    }

    @Test("mv into another watched directory is movedTo the new path there")
    func moveToAnotherWatchedDirectory() async throws {
        let first = makeDirectory()
        let second = makeDirectory()
        defer { removeTree(first); removeTree(second) }
        let file = first + "/doc.txt"
        writeFile(file, "x\n")
        writeFile(second + "/other.txt", "y\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        _ = try watcher.watch(path: second + "/other.txt")
        #expect(watcher.watchedDirectoryCount == 2)
        #expect(rename(file, second + "/doc.txt") == 0)
        #expect(await log.waitFor(.movedTo(newPath: second + "/doc.txt"), at: file) != nil)
    }

    @Test("mv onto another watched file: the mover is movedTo, the name it lands on replaced")
    func moveOntoWatchedFile() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let a = directory + "/a.txt", b = directory + "/b.txt"
        writeFile(a, "a\n")
        writeFile(b, "b\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: a)
        _ = try watcher.watch(path: b)
        #expect(rename(a, b) == 0)
        #expect(await log.waitFor(.movedTo(newPath: b), at: a) != nil)
        #expect(await log.waitFor(.replaced, at: b) != nil)
    }

    @Test("mv into an unwatched directory is movedAway, with no new path")
    func moveOutOfSight() async throws {
        let directory = makeDirectory()
        let elsewhere = makeDirectory()
        defer { removeTree(directory); removeTree(elsewhere) }
        let file = directory + "/gone.txt"
        writeFile(file, "x\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        #expect(rename(file, elsewhere + "/gone.txt") == 0)
        let event = await log.waitFor { event in
            if case .movedAway = event.kind { return event.path == file }
            return false
        }
        #expect(event != nil)
        #expect(!log.events(for: file).contains { if case .movedTo = $0.kind { true } else { false } })
    }

    @Test("siblings: a name the filter takes is reported to the registration that asked (created, renamed in, deleted); others not")
    func siblings() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/notes.md", other = directory + "/other.md"
        writeFile(file, "x\n")
        writeFile(other, "y\n")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file, siblings: { $0.hasPrefix("notes.sync-conflict-") })
        _ = try watcher.watch(path: other)
        let copy = directory + "/notes.sync-conflict-20261128-101502-ABCDEFG.md"
        writeFile(directory + "/unrelated.md", "z\n")
        writeFile(directory + "/.incoming", "theirs\n")
        #expect(rename(directory + "/.incoming", copy) == 0)
        #expect(await log.waitFor(.sibling(name: "notes.sync-conflict-20261128-101502-ABCDEFG.md"), at: file) != nil)
        #expect(unlink(copy) == 0)
        let copyEvents = { log.events(for: file).filter { $0.kind == .sibling(name: "notes.sync-conflict-20261128-101502-ABCDEFG.md") }.count }
        await log.waitFor(seconds: 20) { _ in copyEvents() >= 2 }
        #expect(copyEvents() == 2)
        // Nothing for the names the filter refused, and nothing for the registration without one.
        #expect(!log.events(for: file).contains { $0.kind == .sibling(name: "unrelated.md") || $0.kind == .sibling(name: ".incoming") })
        #expect(!log.events(for: other).contains { if case .sibling = $0.kind { true } else { false } })
    }

    @Test("rm is deleted; classify says gone")
    func remove() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/rm.txt"
        writeFile(file, "x\n")
        let recorded = try #require(FileIdentity.current(path: file))
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        #expect(unlink(file) == 0)
        #expect(await log.waitFor(.deleted, at: file) != nil)
        #expect(FileWatcher.classify(recorded: recorded, now: FileIdentity.current(path: file)) == .gone)
    }

    @Test("a delete then a new file at the name within the window (a backup-rename save) is replaced")
    func deleteThenRecreate() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/v.txt"
        writeFile(file, "x\n")
        let log = EventLog()
        let watcher = try FileWatcher(debounce: .milliseconds(250), handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        #expect(rename(file, file + "~") == 0)
        writeFile(file, "y\n")
        #expect(unlink(file + "~") == 0)
        #expect(await log.waitFor(.replaced, at: file) != nil)
    }

    @Test("files in one directory share one directory watch, released with the last")
    func sharedDirectoryWatch() async throws {
        let directory = makeDirectory()
        let other = makeDirectory()
        defer { removeTree(directory); removeTree(other) }
        let watcher = try FileWatcher { _ in }
        defer { watcher.stop() }
        let a = try watcher.watch(path: directory + "/a.txt")
        let b = try watcher.watch(path: directory + "/b.txt")
        let aAgain = try watcher.watch(path: directory + "/./a.txt")
        #expect(watcher.watchedDirectoryCount == 1)
        let c = try watcher.watch(path: other + "/c.txt")
        #expect(watcher.watchedDirectoryCount == 2)
        watcher.unwatch(a)
        watcher.unwatch(c)
        #expect(watcher.watchedDirectoryCount == 1)
        watcher.unwatch(b)
        watcher.unwatch(b)  // twice: ignored
        #expect(watcher.watchedDirectoryCount == 1)
        watcher.unwatch(aAgain)
        #expect(watcher.watchedDirectoryCount == 0)
        #expect(throws: FileSystemError.self) { try watcher.watch(path: directory + "/missing/x.txt") }
        #expect(watcher.watchedDirectoryCount == 0)
    }

    @Test("unwatch stops a file's events; the others in its directory keep theirs")
    func unwatchStopsEvents() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let a = directory + "/a.txt", b = directory + "/b.txt"
        writeFile(a, "")
        writeFile(b, "")
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        let token = try watcher.watch(path: a)
        _ = try watcher.watch(path: b)
        writeFile(a, "1\n")
        #expect(await log.waitFor(.modified, at: a) != nil)
        watcher.unwatch(token)
        writeFile(a, "2\n")
        #expect(unlink(a) == 0)
        await settle(log, sentinel: b)
        #expect(log.events(for: a).map(\.kind) == [.modified])
    }

    @Test("a directory's last file unwatched and another watched there at once still reports (30 times)")
    func rewatchAtOnce() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let log = EventLog()
        let watcher = try FileWatcher(handler: log.append)
        defer { watcher.stop() }
        var token = try watcher.watch(path: directory + "/f0.txt")
        for round in 1...30 {
            // The directory's watch is removed (its IN_IGNORED still to come) and added again.
            watcher.unwatch(token)
            let path = directory + "/f\(round).txt"
            token = try watcher.watch(path: path)
            writeFile(path, "\(round)\n")
            let seen = await log.waitFor(seconds: 2) { $0.path == path }
            #expect(seen != nil, "round \(round): the write was not reported")
            if seen == nil { break }
        }
    }

    @Test("stop() joins the thread and closes every descriptor; nothing is delivered after it")
    func stopLeavesNoDescriptors() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/f.txt"
        writeFile(file, "")
        let totalBefore = openDescriptors()
        for round in 0..<10 {
            let log = EventLog()
            let watcher = try FileWatcher(handler: log.append)
            _ = try watcher.watch(path: file)
            _ = try watcher.watch(path: directory + "/other.txt")
            #expect(inotifyInstancesWatching(directory) == 1)
            writeFile(file, "round \(round)\n")
            #expect(await log.waitFor(.modified, at: file) != nil)
            writeFile(file, "pending at stop\n")
            watcher.stop()
            let delivered = log.all.count
            watcher.stop()  // idempotent
            #expect(throws: FileSystemError.self) { try watcher.watch(path: file) }
            writeFile(file, "after stop\n")
            #expect(log.all.count == delivered)
            #expect(inotifyInstancesWatching(directory) == 0, "round \(round): the inotify descriptor outlived stop()")
        }
        // A watcher dropped without stop() is stopped by deinit.
        do {
            let watcher = try FileWatcher { _ in }
            _ = try watcher.watch(path: file)
            #expect(inotifyInstancesWatching(directory) == 1)
        }
        #expect(inotifyInstancesWatching(directory) == 0, "the inotify descriptor outlived deinit")
        // Other suites run meanwhile and open files, so the total may wander a little; a leak here
        // would be 22 descriptors.
        #expect(openDescriptors() - totalBefore < 10)
    }

    @Test("stop() from inside the handler ends the watcher without deadlock")
    func stopFromHandler() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/h.txt"
        writeFile(file, "")
        let log = EventLog()
        let holder = Mutex<FileWatcher?>(nil)
        let watcher = try FileWatcher { event in
            log.append(event)
            holder.withLock { $0 }?.stop()
        }
        holder.withLock { $0 = watcher }
        _ = try watcher.watch(path: file)
        writeFile(file, "x\n")
        #expect(await log.waitFor(.modified, at: file) != nil)
        // The thread closes its descriptors as it ends, just after the handler returns.
        let deadline = ContinuousClock.now + .seconds(30)
        while inotifyInstancesWatching(directory) != 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(inotifyInstancesWatching(directory) == 0)
        holder.withLock { $0 = nil }
    }

    @Test("an overflow of the kernel's queue is a rescan of every watched file")
    func overflowIsRescan() async throws {
        let limit = (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16384
        guard limit <= 70_000 else { return }
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/watched.txt"
        writeFile(file, "")
        let log = EventLog()
        let released = Mutex(false)
        // The handler holds the watcher's thread on the first event, so the kernel's queue fills.
        let watcher = try FileWatcher { event in
            log.append(event)
            let deadline = ContinuousClock.now + .seconds(10)
            while !released.withLock({ $0 }) && ContinuousClock.now < deadline { usleep(1000) }
        }
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        writeFile(file, "x\n")
        #expect(await log.waitFor(.modified, at: file) != nil)
        // Distinct names cannot be merged by the kernel: each create, close and unlink queues one.
        for index in 0..<(limit / 2 + 100) {
            let name = directory + "/n\(index)"
            writeFile(name, "", flags: O_WRONLY | O_CREAT)
            unlink(name)
        }
        released.withLock { $0 = true }
        #expect(await log.waitFor(.rescan, at: file) != nil)
    }

    @Test("with closesAfterReading a file read and closed (as chattr does to set its flags) is a modified event, without it nothing; a reader in a loop never delays the report of a write")
    func closesAfterReading() async throws {
        let directory = makeDirectory()
        defer { removeTree(directory) }
        let file = directory + "/read.txt"
        let sentinel = directory + "/sentinel.txt"
        writeFile(file, "text\n")
        writeFile(sentinel, "")

        // Without: a read reports nothing (the sentinel's write, reported after it, proves it).
        let plainLog = EventLog()
        let plain = try FileWatcher(handler: plainLog.append)
        defer { plain.stop() }
        _ = try plain.watch(path: file)
        _ = try plain.watch(path: sentinel)
        readFile(file)
        await settle(plainLog, sentinel: sentinel)
        #expect(plainLog.events(for: file).isEmpty, "\(plainLog.all)")

        let log = EventLog()
        let watcher = try FileWatcher(closesAfterReading: true, handler: log.append)
        defer { watcher.stop() }
        _ = try watcher.watch(path: file)
        readFile(file)
        #expect(await log.waitFor(.modified, at: file) != nil)

        // A read every 5 ms, well within the 50 ms window, while the file is written: the write is
        // reported though the name is never quiet for a window (a close after reading starts a
        // window, it never extends one).
        let before = log.events(for: file).count
        writeFile(file, "written\n")
        var reported = false
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            readFile(file)
            if log.events(for: file).count > before {
                reported = true
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(reported, "the write was not reported while a reader kept reading")
    }

    @Test("classify compares identities")
    func classify() {
        var status = stat()
        status.st_dev = 1
        status.st_ino = 10
        status.st_size = 100
        status.st_mtim = timespec(tv_sec: 1000, tv_nsec: 5)
        status.st_ctim = timespec(tv_sec: 1000, tv_nsec: 5)
        var recorded = FileIdentity(status)
        var now = recorded
        #expect(FileWatcher.classify(recorded: recorded, now: nil) == .gone)
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .unchanged)
        now.changeTime += 1
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .touched)
        now.modificationTime += 1
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .touched)
        recorded.contentHash = 7
        now.contentHash = 7
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .touched)
        now.contentHash = 8
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .contentChanged)
        now = recorded
        now.size = 101
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .contentChanged)
        now = recorded
        now.inode = 11
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .replacedByAnotherFile)
        now = recorded
        now.device = 2
        #expect(FileWatcher.classify(recorded: recorded, now: now) == .replacedByAnotherFile)
    }

    @Test("paths split into directory and name")
    func split() {
        #expect(FileWatcher.split("/a/b.txt")! == ("/a", "b.txt"))
        #expect(FileWatcher.split("/b.txt")! == ("/", "b.txt"))
        #expect(FileWatcher.split("b.txt")! == (".", "b.txt"))
        #expect(FileWatcher.split("/a/b/")! == ("/a", "b"))
        #expect(FileWatcher.split("/") == nil)
        #expect(FileWatcher.split("") == nil)
        #expect(FileWatcher.split("/a/..") == nil)
    }
}
