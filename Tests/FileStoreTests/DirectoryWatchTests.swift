import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Collects a watch's batches and waits, bounded, for the changes a test expects.
private final class ChangeLog: Sendable {
    private let batches = Mutex<[[DirectoryChange]]>([])
    private let threads = Mutex<Set<UInt>>([])

    func append(_ batch: [DirectoryChange]) {
        batches.withLock { $0.append(batch) }
        threads.withLock { _ = $0.insert(UInt(pthread_self())) }
    }

    var all: [DirectoryChange] { batches.withLock { $0.flatMap { $0 } } }
    var batchCount: Int { batches.withLock { $0.count } }
    var threadCount: Int { threads.withLock { $0.count } }

    /// The changes about `relativePath` (as a destination, for moves), sentinels left out.
    func changes(at relativePath: String) -> [DirectoryChange] { all.filter { $0.relativePath == relativePath } }

    /// Every change but the sentinels'.
    var withoutSentinels: [DirectoryChange] { all.filter { !$0.relativePath.contains("sentinel") } }

    /// Waits up to `seconds` until `condition` holds for the changes so far; answers whether it did.
    @discardableResult
    func waitUntil(seconds: Double = 15, _ condition: @escaping ([DirectoryChange]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition(all) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition(all)
    }

    func waitFor(_ change: DirectoryChange) async -> Bool {
        await waitUntil { $0.contains(change) }
    }
}

/// A fresh directory under the temporary directory.
private func makeDirectory() -> String {
    DirectoryQuery.normalizedRoot(try! makeTemporaryDirectory(prefix: "directorywatch"))
}

private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// Writes `text` to `path` (created or truncated) with open, write, close.
private func writeFile(_ path: String, _ text: String = "x\n", flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) {
    let fd = open(path, flags | O_CLOEXEC, 0o644)
    precondition(fd >= 0, "open \(path): \(errno)")
    let bytes = Array(text.utf8)
    if !bytes.isEmpty { precondition(write(fd, bytes, bytes.count) == bytes.count) }
    close(fd)
}

private func makeDirectories(_ path: String) {
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
}

/// The entry for the file at `path` now, relative to `root`.
private func entry(_ root: String, _ relativePath: String) -> DirectoryEntry {
    let path = root + "/" + relativePath
    var status = stat()
    precondition(lstat(path, &status) == 0)
    return DirectoryEntry(path: path, relativePath: relativePath, identity: FileIdentity(status))
}

private func deleted(_ root: String, _ relativePath: String) -> DirectoryChange {
    .deleted(path: root + "/" + relativePath, relativePath: relativePath)
}

/// Runs `command` with /bin/sh in `directory` and waits for it.
private func shell(_ command: String, in directory: String) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
}

private let sentinelCounter = Atomic<Int>(0)

/// Waits, bounded, until a new sentinel file has been reported created: every event the kernel
/// queued before it has been reported by then (a window ending later cannot have started earlier).
private func settle(_ log: ChangeLog, root: String) async {
    let name = "sentinel-\(sentinelCounter.add(1, ordering: .relaxed).newValue).txt"
    writeFile(root + "/" + name)
    let seen = await log.waitUntil { changes in
        changes.contains { if case .created(let entry) = $0 { entry.relativePath == name } else { false } }
    }
    #expect(seen, "the sentinel was not reported")
}

/// The kernel's id for the eventfd open as `descriptor` (the `eventfd-id:` line of its fdinfo), or
/// nil when it is not an eventfd. Unlike the descriptor's number, the id is never handed on.
private func eventfdIdentity(of descriptor: Int32) -> String? {
    guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8) else { return nil }
    return info.split(separator: "\n").first { $0.hasPrefix("eventfd-id:") }
        .map { $0.dropFirst("eventfd-id:".count).trimmingCharacters(in: .whitespaces) }
}

/// The ids of every eventfd open in this process.
private func openEventfdIdentities() -> Set<String> {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return Set(names.compactMap { Int32($0).flatMap(eventfdIdentity(of:)) })
}

// Serialized: each test starts a watch (a thread and an inotify instance); one at a time keeps this
// suite's share of the user's inotify instances (fs.inotify.max_user_instances) small while the other
// suites run theirs.
@Suite("DirectoryWatch: the live set of files matching a glob", .serialized)
struct DirectoryWatchTests {
    @Test("initial snapshot, then created, changed (by size) and deleted")
    func basics() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        writeFile(root + "/a.txt")
        writeFile(root + "/b.md")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        #expect(watch.initialEntries.map(\.relativePath) == ["a.txt"])
        #expect(watch.initialEntries == (try DirectoryQuery.scan(root: root, pattern: GlobPattern("**/*.txt"), recursive: true)))

        writeFile(root + "/c.txt", "new\n")
        #expect(await log.waitFor(.created(entry(root, "c.txt"))))
        writeFile(root + "/a.txt", "longer content\n")
        #expect(await log.waitFor(.changed(entry(root, "a.txt"))))
        #expect(unlink(root + "/c.txt") == 0)
        #expect(await log.waitFor(deleted(root, "c.txt")))
        writeFile(root + "/ignored.md")
        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 3, "\(log.all)")
        #expect(watch.entries.map(\.relativePath).filter { !$0.contains("sentinel") } == ["a.txt"])
        #expect(log.threadCount == 1)
    }

    @Test("mkdir -p a/b/c && touch a/b/c/x.txt from a shell: x.txt is reported, once")
    func nestedDirectoriesCreatedAfterStart() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        try shell("mkdir -p a/b/c && touch a/b/c/x.txt && mkdir -p p/q && touch p/q/y.txt p/z.txt", in: root)
        #expect(await log.waitFor(.created(entry(root, "a/b/c/x.txt"))))
        #expect(await log.waitFor(.created(entry(root, "p/q/y.txt"))))
        #expect(await log.waitFor(.created(entry(root, "p/z.txt"))))
        // Created from code, as fast as it goes.
        makeDirectories(root + "/m/n/o")
        writeFile(root + "/m/n/o/w.txt")
        writeFile(root + "/m/v.txt")
        #expect(await log.waitFor(.created(entry(root, "m/n/o/w.txt"))))
        #expect(await log.waitFor(.created(entry(root, "m/v.txt"))))
        // The new directories are watched: later files in them are seen too.
        writeFile(root + "/a/b/c/later.txt")
        #expect(await log.waitFor(.created(entry(root, "a/b/c/later.txt"))))
        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 6, "\(log.all)")
        #expect(watch.watchedDirectoryCount == 9)
    }

    @Test("1,000 files created at once: exactly 1,000 created, none twice, none lost, in batches")
    func burst() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeDirectories(root + "/many")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        for index in 0..<1_000 { writeFile(root + "/many/file\(index).txt", "\(index)\n") }
        #expect(await log.waitUntil { $0.count >= 1_000 })
        await settle(log, root: root)
        let changes = log.withoutSentinels
        #expect(changes.count == 1_000)
        let created = Set(changes.compactMap { if case .created(let entry) = $0 { entry.relativePath } else { nil } })
        #expect(created.count == 1_000)
        #expect(created == Set((0..<1_000).map { "many/file\($0).txt" }))
        #expect(log.batchCount < 1_000)
        #expect(watch.entries.count == 1_001)
    }

    @Test("a file written 100 times in a row is one changed (or a few), not 100")
    func debouncedWrites() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        writeFile(root + "/log.txt", "")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("*.txt"), recursive: false,
                                       debounce: .milliseconds(200), handler: log.append)
        defer { watch.stop() }
        for index in 0..<100 { writeFile(root + "/log.txt", "line \(index)\n", flags: O_WRONLY | O_APPEND) }
        #expect(await log.waitUntil { !$0.isEmpty })
        await settle(log, root: root)
        let changes = log.changes(at: "log.txt")
        #expect(changes.count >= 1 && changes.count <= 3, "\(changes)")
        #expect(changes.last == .changed(entry(root, "log.txt")))
    }

    @Test("a change that alters neither size, modification time nor inode is not reported")
    func noChange() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        writeFile(root + "/same.txt")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        #expect(chmod(root + "/same.txt", 0o600) == 0)  // IN_ATTRIB, ctime only
        let fd = open(root + "/same.txt", O_RDWR | O_CLOEXEC)  // IN_CLOSE_WRITE, nothing written
        close(fd)
        await settle(log, root: root)
        #expect(log.changes(at: "same.txt").isEmpty, "\(log.all)")
    }

    @Test("renames: within the root moved, in created, out deleted, to or from a non-matching name")
    func moves() async throws {
        let root = makeDirectory()
        let outside = makeDirectory()
        defer { removeTree(root); removeTree(outside) }
        makeDirectories(root + "/sub")
        for name in ["a.txt", "out.txt", "rename.txt"] { writeFile(root + "/" + name) }
        writeFile(root + "/back.md")
        writeFile(outside + "/in.txt")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }

        #expect(rename(root + "/a.txt", root + "/sub/b.txt") == 0)
        #expect(await log.waitFor(.moved(from: root + "/a.txt", to: entry(root, "sub/b.txt"))))
        #expect(rename(outside + "/in.txt", root + "/in.txt") == 0)
        #expect(await log.waitFor(.created(entry(root, "in.txt"))))
        #expect(rename(root + "/out.txt", outside + "/out.txt") == 0)
        #expect(await log.waitFor(deleted(root, "out.txt")))
        #expect(rename(root + "/rename.txt", root + "/rename.md") == 0)
        #expect(await log.waitFor(deleted(root, "rename.txt")))
        #expect(rename(root + "/back.md", root + "/back.txt") == 0)
        #expect(await log.waitFor(.created(entry(root, "back.txt"))))
        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 5, "\(log.all)")
        #expect(Set(watch.entries.map(\.relativePath).filter { !$0.contains("sentinel") })
                == ["sub/b.txt", "in.txt", "back.txt"])
    }

    @Test("an atomic save (temp file renamed over) is changed; a rename onto a matching file is moved")
    func atomicSave() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        writeFile(root + "/doc.txt", "one\n")
        writeFile(root + "/x.txt", "x\n")
        writeFile(root + "/y.txt", "y\n")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        writeFile(root + "/.doc.txt.tmp", "one\n")
        #expect(rename(root + "/.doc.txt.tmp", root + "/doc.txt") == 0)
        #expect(await log.waitFor(.changed(entry(root, "doc.txt"))))
        #expect(rename(root + "/x.txt", root + "/y.txt") == 0)
        #expect(await log.waitFor(.moved(from: root + "/x.txt", to: entry(root, "y.txt"))))
        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 2, "\(log.all)")
    }

    @Test("directories: moved within (moved per file), out (deleted), in (created), deleted")
    func directoryMoves() async throws {
        let root = makeDirectory()
        let outside = makeDirectory()
        defer { removeTree(root); removeTree(outside) }
        for path in ["d/1.txt", "d/inner/2.txt", "gone/3.txt", "rm/4.txt", "rm/deep/5.txt"] {
            makeDirectories(root + "/" + (path as NSString).deletingLastPathComponent)
            writeFile(root + "/" + path)
        }
        makeDirectories(outside + "/incoming/nested")
        writeFile(outside + "/incoming/6.txt")
        writeFile(outside + "/incoming/nested/7.txt")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }

        #expect(rename(root + "/d", root + "/e") == 0)
        #expect(await log.waitFor(.moved(from: root + "/d/1.txt", to: entry(root, "e/1.txt"))))
        #expect(await log.waitFor(.moved(from: root + "/d/inner/2.txt", to: entry(root, "e/inner/2.txt"))))
        // The moved directory is still watched, at its new path.
        writeFile(root + "/e/inner/new.txt")
        #expect(await log.waitFor(.created(entry(root, "e/inner/new.txt"))))

        #expect(rename(root + "/gone", outside + "/gone") == 0)
        #expect(await log.waitFor(deleted(root, "gone/3.txt")))
        // No longer watched: a file created there now is not reported.
        writeFile(outside + "/gone/after.txt")

        #expect(rename(outside + "/incoming", root + "/incoming") == 0)
        #expect(await log.waitFor(.created(entry(root, "incoming/6.txt"))))
        #expect(await log.waitFor(.created(entry(root, "incoming/nested/7.txt"))))

        try shell("rm -rf rm", in: root)
        #expect(await log.waitFor(deleted(root, "rm/4.txt")))
        #expect(await log.waitFor(deleted(root, "rm/deep/5.txt")))

        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 8, "\(log.all)")
        #expect(Set(watch.entries.map(\.relativePath).filter { !$0.contains("sentinel") })
                == ["e/1.txt", "e/inner/2.txt", "e/inner/new.txt", "incoming/6.txt", "incoming/nested/7.txt"])
    }

    @Test("a directory moved where the pattern cannot reach: its files deleted, its watches removed")
    func directoryMovedOutOfScope() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeDirectories(root + "/src/d/inner")
        writeFile(root + "/src/d/1.txt")
        writeFile(root + "/src/d/inner/2.txt")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("{src/**/*.txt,sentinel*}"),
                                       recursive: true, handler: log.append)
        defer { watch.stop() }
        #expect(watch.watchedDirectoryCount == 4)  // the root, src, src/d, src/d/inner
        // From a watched directory to another (the root), where the pattern cannot reach.
        #expect(rename(root + "/src/d", root + "/d") == 0)
        #expect(await log.waitFor(deleted(root, "src/d/1.txt")))
        #expect(await log.waitFor(deleted(root, "src/d/inner/2.txt")))
        #expect(watch.watchedDirectoryCount == 2)
        #expect(rename(root + "/d", root + "/src/back") == 0)
        #expect(await log.waitFor(.created(entry(root, "src/back/1.txt"))))
        #expect(await log.waitFor(.created(entry(root, "src/back/inner/2.txt"))))
        #expect(watch.watchedDirectoryCount == 4)
        await settle(log, root: root)
        #expect(log.withoutSentinels.count == 4, "\(log.all)")
    }

    @Test("a non-recursive watch sees the root's own files only")
    func nonRecursive() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeDirectories(root + "/sub")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**"), recursive: false,
                                       handler: log.append)
        defer { watch.stop() }
        makeDirectories(root + "/new/dir")
        writeFile(root + "/new/dir/x.txt")
        writeFile(root + "/sub/y.txt")
        writeFile(root + "/top.txt")
        #expect(await log.waitFor(.created(entry(root, "top.txt"))))
        await settle(log, root: root)
        #expect(log.withoutSentinels == [.created(entry(root, "top.txt"))])
        #expect(watch.watchedDirectoryCount == 1)
    }

    @Test("overflow: the tree is scanned again and the difference with the known set reported")
    func overflowReconciles() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeDirectories(root + "/sub")
        for name in ["a.txt", "b.txt", "sub/c.txt", "keep.txt"] { writeFile(root + "/" + name) }
        let log = ChangeLog()
        // A window far longer than the test: only the overflow's rescan can report anything.
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       debounce: .seconds(120), handler: log.append)
        defer { watch.stop() }
        #expect(unlink(root + "/a.txt") == 0)
        writeFile(root + "/b.txt", "longer now\n")
        writeFile(root + "/d.txt")
        makeDirectories(root + "/new")
        writeFile(root + "/new/e.txt")
        try shell("rm -rf sub", in: root)
        watch.simulateOverflow()
        let expected: Set<DirectoryChange> = [
            deleted(root, "a.txt"), .changed(entry(root, "b.txt")), .created(entry(root, "d.txt")),
            .created(entry(root, "new/e.txt")), deleted(root, "sub/c.txt"),
        ]
        #expect(await log.waitUntil(seconds: 15) { $0.count >= expected.count })
        #expect(Set(log.all) == expected)
        #expect(log.all.count == expected.count)
        #expect(log.batchCount == 1)
        // The rescan watched the new directory.
        #expect(watch.watchedDirectoryCount == 2)
        #expect(Set(watch.entries.map(\.relativePath)) == ["b.txt", "d.txt", "keep.txt", "new/e.txt"])
    }

    @Test("the root deleted: its files are reported deleted, then the watch is quiet")
    func rootDeleted() async throws {
        let parent = makeDirectory()
        defer { removeTree(parent) }
        let root = parent + "/root"
        makeDirectories(root + "/sub")
        writeFile(root + "/a.txt")
        writeFile(root + "/sub/b.txt")
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("**/*.txt"), recursive: true,
                                       handler: log.append)
        defer { watch.stop() }
        try shell("rm -rf root", in: parent)
        #expect(await log.waitUntil { Set($0) == [deleted(root, "a.txt"), deleted(root, "sub/b.txt")] })
        makeDirectories(root)
        writeFile(root + "/again.txt")
        try? await Task.sleep(for: .milliseconds(300))  // nothing expected: a short grace period
        #expect(log.all.count == 2, "\(log.all)")
        #expect(watch.entries.isEmpty)
    }

    @Test("a missing root is an error")
    func missingRoot() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        do {
            _ = try DirectoryWatch(root: root + "/missing", pattern: GlobPattern("*"), recursive: true) { _ in }
            Issue.record("a missing root was accepted")
        } catch let error as FileSystemError {
            #expect(error.code == "ENOENT")
        }
    }

    @Test("stop is idempotent, closes its descriptors, and nothing is delivered after it")
    func stopCleansUp() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        let log = ChangeLog()
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("*"), recursive: true,
                                       handler: log.append)
        // Other suites open and close watchers meanwhile, and a closed descriptor's number may be
        // handed straight to one of theirs: the inotify instance is recognised by what it watches
        // (this test's own directory), the eventfd by the kernel's id for it.
        let eventfd = try #require(eventfdIdentity(of: watch.core.wake))
        #expect(inotifyInstancesWatching(root) == 1)
        writeFile(root + "/x")
        #expect(await log.waitFor(.created(entry(root, "x"))))
        watch.stop()
        watch.stop()
        #expect(inotifyInstancesWatching(root) == 0)
        #expect(!openEventfdIdentities().contains(eventfd))
        let count = log.all.count
        writeFile(root + "/y")
        try? await Task.sleep(for: .milliseconds(200))  // nothing expected: a short grace period
        #expect(log.all.count == count)
    }

    @Test("stop from inside the handler detaches and still closes the descriptors")
    func stopFromHandler() async throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        let holder = Mutex<DirectoryWatch?>(nil)
        let calls = Atomic<Int>(0)
        let watch = try DirectoryWatch(root: root, pattern: GlobPattern("*"), recursive: true) { _ in
            calls.add(1, ordering: .relaxed)
            holder.withLock { $0?.stop() }
        }
        holder.withLock { $0 = watch }
        writeFile(root + "/first")
        let deadline = ContinuousClock.now + .seconds(15)
        while calls.load(ordering: .relaxed) == 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        #expect(calls.load(ordering: .relaxed) == 1)
        var closed = false
        while !closed && ContinuousClock.now < deadline {
            closed = inotifyInstancesWatching(root) == 0
            if !closed { try? await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(closed)
        writeFile(root + "/second")
        try? await Task.sleep(for: .milliseconds(200))  // nothing expected: a short grace period
        #expect(calls.load(ordering: .relaxed) == 1)
        holder.withLock { $0 = nil }
    }
}
