import Foundation
import SystemCalls
import TestSupport
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's runtime directory and its liveness lock (issue 19).
@Suite("The runtime directory")
struct RuntimeDirectoryTests {
    private func mode(_ path: String) throws -> mode_t {
        try fileStatus(path, followingSymlinks: false).st_mode & 0o7777
    }

    @Test("the default: $XDG_RUNTIME_DIR/docsession when absolute, else /tmp/docsession-<euid>")
    func defaultPath() {
        #expect(RuntimeDirectory.defaultPath(runtimeDirectory: "/run/user/1000", user: 1000) == "/run/user/1000/docsession")
        #expect(RuntimeDirectory.defaultPath(runtimeDirectory: "/run/user/1000/", user: 1000) == "/run/user/1000/docsession")
        #expect(RuntimeDirectory.defaultPath(runtimeDirectory: "relative", user: 1000) == "/tmp/docsession-1000")
        #expect(RuntimeDirectory.defaultPath(runtimeDirectory: "", user: 7) == "/tmp/docsession-7")
        #expect(RuntimeDirectory.defaultPath(runtimeDirectory: nil, user: 0) == "/tmp/docsession-0")
    }

    @Test("a missing directory is made with mode 0700 and passes")
    func createdPrivate() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let directory = RuntimeDirectory(path: parent.file("run"))
        #expect(try directory.checkIfPresent() == false)
        try directory.prepare()
        #expect(try mode(directory.path) == 0o700)
        #expect(try directory.checkIfPresent() == true)
        // Again: an existing good directory is taken as it is.
        try directory.prepare()
        #expect(directory.socketPath == parent.file("run") + "/daemon.sock")
    }

    @Test("a directory that group or others can enter is refused with its mode, and left as it is")
    func openModeRefused() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let path = parent.file("run")
        #expect(mkdir(path, 0o700) == 0)
        #expect(chmod(path, 0o755) == 0)
        let error = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).prepare() }
        #expect(error?.message == "the runtime directory \(path) has mode 0755: group or others can enter it; it must be 0700")
        #expect(error?.code == "EACCES")
        #expect(try mode(path) == 0o755)
        #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).checkIfPresent() }
        #expect(chmod(path, 0o710) == 0)
        let group = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).check() }
        #expect(group?.message.contains("has mode 0710") == true)
    }

    @Test("a directory owned by another user is refused with both uids")
    func otherOwnerRefused() throws {
        try #require(geteuid() == 0, "needs root to chown")
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let path = parent.file("run")
        #expect(mkdir(path, 0o700) == 0)
        #expect(chown(path, 65534, 65534) == 0)
        let error = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).prepare() }
        #expect(error?.message == "the runtime directory \(path) is owned by uid 65534, not 0")
        #expect(try fileStatus(path).st_uid == 65534)
    }

    @Test("a symbolic link is refused, even to a good directory")
    func symbolicLinkRefused() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let target = parent.file("real")
        #expect(mkdir(target, 0o700) == 0)
        let path = parent.file("run")
        #expect(symlink(target, path) == 0)
        let error = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).prepare() }
        #expect(error?.message.hasPrefix("the runtime directory \(path) is a symbolic link") == true)
        #expect(try directoryEntries(target).isEmpty)
    }

    @Test("a file in the way is refused")
    func notADirectory() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let path = try parent.write("run", "x")
        let error = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).prepare() }
        #expect(error?.message == "the runtime directory \(path) is not a directory")
    }

    @Test("a missing parent is an error naming the path")
    func missingParent() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let path = parent.file("none/run")
        let error = #expect(throws: FileSystemError.self) { try RuntimeDirectory(path: path).prepare() }
        #expect(error?.code == "ENOENT")
        #expect(error?.path == path)
    }

    @Test("the lock: taken, it holds this pid; a second taker (another open file) learns the holder's pid")
    func lock() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let directory = RuntimeDirectory(path: parent.file("run"))
        try directory.prepare()
        let first = try directory.acquireLock()
        guard case .acquired(let held) = first else {
            Issue.record("the first acquisition did not take the lock")
            return
        }
        #expect(held.path == directory.lockPath)
        #expect(String(decoding: try parent.contents("run/daemon.lock"), as: UTF8.self) == "\(getpid())\n")
        #expect(try mode(directory.lockPath) == 0o600)
        guard case .held(let holder) = try directory.acquireLock() else {
            Issue.record("a second acquisition took a held lock")
            return
        }
        #expect(holder == getpid())
        withExtendedLifetime(held) {}
    }

    @Test("the lock is free again once its holder is gone, and the new holder rewrites the pid")
    func lockReleased() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let directory = RuntimeDirectory(path: parent.file("run"))
        try directory.prepare()
        // A stale, longer pid from an earlier holder is replaced whole.
        _ = try parent.write("run/daemon.lock", "123456789\n")
        do {
            guard case .acquired = try directory.acquireLock() else {
                Issue.record("an unheld lock was not taken")
                return
            }
        }
        guard case .acquired(let again) = try directory.acquireLock() else {
            Issue.record("a released lock was not taken again")
            return
        }
        #expect(String(decoding: try parent.contents("run/daemon.lock"), as: UTF8.self) == "\(getpid())\n")
        withExtendedLifetime(again) {}
    }

    @Test("a symbolic link at daemon.lock is not followed")
    func lockLinkRefused() throws {
        let parent = try TemporaryDirectory(prefix: "docsession-runtime")
        let directory = RuntimeDirectory(path: parent.file("run"))
        try directory.prepare()
        let victim = try parent.write("victim", "keep")
        #expect(symlink(victim, directory.lockPath) == 0)
        let error = #expect(throws: FileSystemError.self) { _ = try directory.acquireLock() }
        #expect(error?.code == "ELOOP")
        #expect(String(decoding: try parent.contents("victim"), as: UTF8.self) == "keep")
    }

    private func directoryEntries(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path)
    }
}
