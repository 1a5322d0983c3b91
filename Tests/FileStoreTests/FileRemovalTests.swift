import Foundation
import TestSupport
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body` in a fresh temporary directory, removed afterwards.
private func withDirectory(_ body: (String) throws -> Void) throws {
    let directory = try TemporaryDirectory(prefix: "docsession-removal")
    try body(directory.path)
}

@Suite("FileRemoval and FileTransfer.moveReporting: the file calls a delete and a move of a document make")
struct FileRemovalTests {
    @Test("a regular file is unlinked")
    func unlinksARegularFile() throws {
        try withDirectory { directory in
            let file = directory + "/a.txt"
            #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
            try FileRemoval.unlinkRegularFile(file, reportedAs: "/client/a.txt")
            #expect(access(file, F_OK) != 0 && errno == ENOENT)
        }
    }

    @Test("a missing file, a directory and a symbolic link are refused, reported for the client's path")
    func refusals() throws {
        try withDirectory { directory in
            #expect(throws: FileSystemError(errno: ENOENT, syscall: "lstat", path: "/client/missing")) {
                try FileRemoval.unlinkRegularFile(directory + "/missing", reportedAs: "/client/missing")
            }
            let subdirectory = directory + "/sub"
            #expect(mkdir(subdirectory, 0o700) == 0)
            #expect(throws: FileSystemError(errno: EINVAL, syscall: "lstat", path: "/client/sub",
                                            reason: "not a regular file; only regular files are deleted")) {
                try FileRemoval.unlinkRegularFile(subdirectory, reportedAs: "/client/sub")
            }
            let target = directory + "/target"
            #expect(FileManager.default.createFile(atPath: target, contents: Data()))
            #expect(symlink(target, directory + "/link") == 0)
            #expect(throws: FileSystemError.self) {
                try FileRemoval.unlinkRegularFile(directory + "/link", reportedAs: "/client/link")
            }
            #expect(access(target, F_OK) == 0)
            #expect(access(subdirectory, F_OK) == 0)
        }
    }

    @Test("moveReporting answers the identities before and after, and whether the file moved")
    func moveReporting() throws {
        try withDirectory { directory in
            let source = directory + "/a", destination = directory + "/b"
            #expect(FileManager.default.createFile(atPath: source, contents: Data("x".utf8)))
            var status = stat()
            #expect(lstat(source, &status) == 0)
            let moved = try FileTransfer.moveReporting(from: source, to: destination, replace: false)
            #expect(moved.moved)
            #expect(moved.before?.sameState(as: FileIdentity(status)) == true)
            #expect(moved.after.inode == FileIdentity(status).inode)
            // The same file under both names: nothing happens, the source's name stays.
            #expect(link(destination, source) == 0)
            let same = try FileTransfer.moveReporting(from: source, to: destination, replace: true)
            #expect(!same.moved)
        }
    }
}
