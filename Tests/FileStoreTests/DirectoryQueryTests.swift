import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under the temporary directory.
private func makeDirectory() -> String {
    DirectoryQuery.normalizedRoot(try! makeTemporaryDirectory(prefix: "directoryquery"))
}

private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// Creates `relativePath` under `root` with `text`, making its directories.
private func makeFile(_ root: String, _ relativePath: String, _ text: String = "x\n") {
    let path = root + "/" + relativePath
    let directory = (path as NSString).deletingLastPathComponent
    try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    precondition(fd >= 0, "open \(path): \(errno)")
    let bytes = Array(text.utf8)
    if !bytes.isEmpty { precondition(write(fd, bytes, bytes.count) == bytes.count) }
    close(fd)
}

private func scan(_ root: String, _ pattern: String, recursive: Bool = true) throws -> [String] {
    try DirectoryQuery.scan(root: root, pattern: GlobPattern(pattern), recursive: recursive).map(\.relativePath)
}

@Suite("DirectoryQuery: listing the files under a root that match a glob")
struct DirectoryQueryTests {
    @Test("recursive and non-recursive, filtered by the pattern, sorted by relative path")
    func recursiveAndNot() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        for path in ["b.txt", "a.txt", "c.md", "sub/d.txt", "sub/deeper/e.txt", "sub/deeper/f.md", ".hidden.txt"] {
            makeFile(root, path)
        }
        #expect(try scan(root, "**/*.txt") == [".hidden.txt", "a.txt", "b.txt", "sub/d.txt", "sub/deeper/e.txt"])
        #expect(try scan(root, "**/*.txt", recursive: false) == [".hidden.txt", "a.txt", "b.txt"])
        #expect(try scan(root, "*.txt") == [".hidden.txt", "a.txt", "b.txt"])
        #expect(try scan(root, "sub/**/*.md") == ["sub/deeper/f.md"])
        #expect(try scan(root, "**/*.{md,txt}").count == 7)
        #expect(try scan(root, "**/*.swift") == [])
        #expect(try scan(root + "/", "*.md") == ["c.md"])
    }

    @Test("entries carry the absolute path, name, size, time and identity of the file")
    func entryFields() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeFile(root, "dir/file.txt", "12345")
        let entries = try DirectoryQuery.scan(root: root, pattern: GlobPattern("**"), recursive: true)
        let entry = try #require(entries.first)
        #expect(entries.count == 1)
        #expect(entry.path == root + "/dir/file.txt")
        #expect(entry.relativePath == "dir/file.txt")
        #expect(entry.name == "file.txt")
        #expect(entry.size == 5)
        let identity = try #require(FileIdentity.current(path: entry.path))
        #expect(entry.identity == identity)
        #expect(entry.modificationTime == identity.modificationTime)
        #expect(entry.modificationTime > 1_600_000_000 * 1_000_000_000)
    }

    @Test("only regular files: symlinks (to files or directories) are neither reported nor followed")
    func symlinks() throws {
        let root = makeDirectory()
        let outside = makeDirectory()
        defer { removeTree(root); removeTree(outside) }
        makeFile(root, "real.txt")
        makeFile(outside, "far.txt")
        #expect(symlink(root + "/real.txt", root + "/link.txt") == 0)
        #expect(symlink(outside, root + "/linkdir") == 0)
        #expect(mkfifo(root + "/pipe.txt", 0o644) == 0)
        #expect(try scan(root, "**") == ["real.txt"])
    }

    @Test("symlink cycles do not loop")
    func symlinkCycles() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeFile(root, "a/b/x.txt")
        #expect(symlink(root, root + "/a/b/up") == 0)
        #expect(symlink("..", root + "/a/parent") == 0)
        #expect(symlink("loop", root + "/loop") == 0)
        #expect(try scan(root, "**") == ["a/b/x.txt"])
    }

    @Test("a symlinked root is opened as given")
    func symlinkedRoot() throws {
        let root = makeDirectory()
        let holder = makeDirectory()
        defer { removeTree(root); removeTree(holder) }
        makeFile(root, "x.txt")
        #expect(symlink(root, holder + "/root") == 0)
        let entries = try DirectoryQuery.scan(root: holder + "/root", pattern: GlobPattern("*"), recursive: true)
        #expect(entries.map(\.path) == [holder + "/root/x.txt"])
    }

    @Test("a missing root or a file as root is an error; an unreadable subdirectory is skipped")
    func errors() throws {
        let root = makeDirectory()
        defer {
            chmod(root + "/locked", 0o755)
            removeTree(root)
        }
        #expect(throws: FileSystemError.self) { try scan(root + "/missing", "**") }
        do {
            _ = try scan(root + "/missing", "**")
        } catch let error as FileSystemError {
            #expect(error.code == "ENOENT")
        }
        makeFile(root, "file.txt")
        do {
            _ = try scan(root + "/file.txt", "**")
            Issue.record("a file was accepted as a root")
        } catch let error as FileSystemError {
            #expect(error.code == "ENOTDIR")
        }
        makeFile(root, "locked/secret.txt")
        makeFile(root, "open/visible.txt")
        #expect(chmod(root + "/locked", 0) == 0)
        let found = try scan(root, "**/*.txt")
        if geteuid() == 0 {
            // Root reads through permissions: the directory is read, nothing to skip.
            #expect(found == ["file.txt", "locked/secret.txt", "open/visible.txt"])
        } else {
            #expect(found == ["file.txt", "open/visible.txt"])
        }
    }

    @Test("10,000 files in 100 directories: every one listed once, in order")
    func tenThousandFiles() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        for directory in 0..<100 {
            let path = root + "/d\(directory)"
            #expect(mkdir(path, 0o755) == 0)
            for file in 0..<100 {
                let fd = open(path + "/f\(file).txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
                #expect(fd >= 0)
                close(fd)
            }
        }
        // Speed is the benchmarks' to measure (a timed test fails on a busy machine: 1.36 s with both
        // processors kept busy); this checks that all 10,000 come back, once each, in order.
        let entries = try DirectoryQuery.scan(root: root, pattern: GlobPattern("**/*.txt"), recursive: true)
        #expect(entries.count == 10_000)
        #expect(Set(entries.map(\.relativePath)).count == 10_000)
        #expect(entries.map(\.relativePath) == entries.map(\.relativePath).sorted())
    }
}
