import CFileSystem
import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A new temporary directory on a file system other than /tmp's (/dev/shm, a tmpfs), or nil when
/// there is none to write to.
private func otherFileSystemDirectory() -> String? {
    var tmp = stat()
    var shm = stat()
    guard stat("/tmp", &tmp) == 0, stat("/dev/shm", &shm) == 0, tmp.st_dev != shm.st_dev else { return nil }
    return try? makeTemporaryDirectory(prefix: "docsession-transfer", in: "/dev/shm")
}

private let secondFileSystem: Bool = {
    guard let directory = otherFileSystemDirectory() else { return false }
    rmdir(directory)
    return true
}()

private func status(_ path: String) -> stat? {
    var result = stat()
    return lstat(path, &result) == 0 ? result : nil
}

/// The error `body` throws (failing the test when it throws none).
private func failure(_ body: () throws(FileSystemError) -> Void) -> FileSystemError? {
    do throws(FileSystemError) {
        try body()
        Issue.record("no error was thrown")
        return nil
    } catch {
        return error
    }
}

/// The names in `directory` that are our temp files.
/// A move into `target` that cannot happen (the directory not writable; as root, who writes any
/// directory, a missing one beneath it): refused with the errno, the source kept, and nothing
/// that `leftovers` lists left in `target`.
private func expectMoveRefused(
    into target: String, leftovers: (String) throws -> [String], sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let source = writeTemporaryFile(Array("keep\n".utf8), name: "a.txt")
    let destination: String
    if geteuid() == 0 {
        destination = target + "/missing/a.txt"
    } else {
        chmod(target, 0o555)
        destination = target + "/a.txt"
    }
    defer { chmod(target, 0o755) }
    let error = failure { () throws(FileSystemError) in try FileTransfer.move(from: source, to: destination, replace: false) }
    #expect(error?.code == (geteuid() == 0 ? "ENOENT" : "EACCES"), sourceLocation: sourceLocation)
    #expect(try fileText(source) == "keep\n", sourceLocation: sourceLocation)
    #expect(try leftovers(target).isEmpty, sourceLocation: sourceLocation)
}

private func tempFiles(_ directory: String) throws -> [String] {
    try entries(directory).filter { $0.hasPrefix(SafeSave.tempPrefix) }
}

/// Writes a file of `megabytes` MiB in 1 MiB pieces (never all in memory), each piece different.
private func writeLargeFile(_ path: String, megabytes: Int) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    var piece = [UInt8](repeating: 0, count: 1 << 20)
    for index in 0..<megabytes {
        for offset in stride(from: 0, to: piece.count, by: 64) { piece[offset] = UInt8(truncatingIfNeeded: index &* 31 &+ offset / 64) }
        let wrote = piece.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        precondition(wrote == piece.count)
    }
    close(fd)
}

/// Writes `text` to `path`, replacing any file there.
private func put(_ path: String, _ text: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

private func hash(_ path: String) -> UInt64? { ContentHasher.hashFile(path: path)?.hash }

@Suite("FileTransfer: move, copy and write whole files")
struct FileTransferTests {
    // MARK: Move on one file system

    @Test("a move within a directory renames: same inode, source gone, the identity answered")
    func moveWithinDirectory() throws {
        let source = writeTemporaryFile(Array("text\n".utf8), name: "a.txt")
        let directory = SafeSave.split(source).directory
        let before = try #require(status(source))
        let identity = try FileTransfer.move(from: source, to: directory + "/b.txt", replace: false)
        #expect(status(source) == nil)
        #expect(try fileText(directory + "/b.txt") == "text\n")
        #expect(identity.inode == UInt64(before.st_ino))
        #expect(identity.sameState(as: try #require(FileIdentity.current(path: directory + "/b.txt"))))
        #expect(try entries(directory) == ["b.txt"])
    }

    @Test("a move to another directory")
    func moveToOtherDirectory() throws {
        let source = writeTemporaryFile(Array("text\n".utf8), name: "a.txt")
        let target = freshDirectory()
        try FileTransfer.move(from: source, to: target + "/moved.txt", replace: false)
        #expect(status(source) == nil)
        #expect(try fileText(target + "/moved.txt") == "text\n")
    }

    @Test("an existing destination is not overwritten without replace; with replace it is")
    func refusesToOverwrite() throws {
        let source = writeTemporaryFile(Array("mine\n".utf8), name: "a.txt")
        let directory = SafeSave.split(source).directory
        let destination = directory + "/b.txt"
        put(destination, "theirs\n")
        let error = failure { () throws(FileSystemError) in try FileTransfer.move(from: source, to: destination, replace: false) }
        #expect(error?.code == "EEXIST")
        #expect(try fileText(destination) == "theirs\n")
        #expect(try fileText(source) == "mine\n")
        try FileTransfer.move(from: source, to: destination, replace: true)
        #expect(try fileText(destination) == "mine\n")
        #expect(status(source) == nil)
    }

    @Test("the RENAME_NOREPLACE fallbacks never replace either")
    func noReplaceHelper() throws {
        let directory = freshDirectory()
        put(directory + "/a", "a")
        put(directory + "/b", "b")
        let error = failure { () throws(FileSystemError) in
            try FileTransfer.renameNoReplace(AT_FDCWD, directory + "/a", AT_FDCWD, directory + "/b", sourcePath: directory + "/a", destinationPath: directory + "/b")
        }
        #expect(error?.code == "EEXIST")
        #expect(try fileText(directory + "/b") == "b")
    }

    @Test("moving a file onto itself (the same path or another hard link) does nothing")
    func moveOntoItself() throws {
        let source = writeTemporaryFile(Array("same\n".utf8), name: "a.txt")
        let directory = SafeSave.split(source).directory
        let identity = try FileTransfer.move(from: source, to: source, replace: false)
        #expect(identity.sameState(as: try #require(FileIdentity.current(path: source))))
        #expect(link(source, directory + "/link.txt") == 0)
        try FileTransfer.move(from: source, to: directory + "/link.txt", replace: true)
        try FileTransfer.move(from: source, to: directory + "/./a.txt", replace: true)
        #expect(try fileText(source) == "same\n")
        #expect(try fileText(directory + "/link.txt") == "same\n")
    }

    @Test("only regular files move: directories, symlinks and a missing source are errors; a directory is no destination")
    func onlyRegularFiles() throws {
        let directory = freshDirectory()
        mkdir(directory + "/sub", 0o755)
        #expect(failure { () throws(FileSystemError) in try FileTransfer.move(from: directory + "/sub", to: directory + "/x", replace: false) }?.code == "EISDIR")
        put(directory + "/file", "f")
        symlink(directory + "/file", directory + "/link")
        #expect(failure { () throws(FileSystemError) in try FileTransfer.move(from: directory + "/link", to: directory + "/x", replace: false) }?.code == "EINVAL")
        #expect(failure { () throws(FileSystemError) in try FileTransfer.move(from: directory + "/none", to: directory + "/x", replace: false) }?.code == "ENOENT")
        #expect(failure { () throws(FileSystemError) in try FileTransfer.move(from: directory + "/file", to: directory + "/sub", replace: true) }?.code == "EISDIR")
        mkfifo(directory + "/fifo", 0o644)
        #expect(failure { () throws(FileSystemError) in _ = try FileTransfer.copy(from: directory + "/fifo", to: directory + "/x", replace: false) }?.code == "EINVAL")
        #expect(try fileText(directory + "/file") == "f")
        #expect(status(directory + "/x") == nil)
    }

    @Test("a move that cannot happen (destination directory not writable, or missing as root) leaves the source and no temp file")
    func failedMoveLeavesSource() throws {
        try expectMoveRefused(into: freshDirectory(), leftovers: tempFiles)
    }

    // MARK: Move across file systems

    @Test("a move across file systems copies: content, mode, times and attributes kept, source gone, no temp left",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func moveAcrossFileSystems() throws {
        let source = writeTemporaryFile(Array("far away\n".utf8), name: "a.txt")
        chmod(source, 0o640)
        let fd = open(source, O_RDONLY)
        let hasAttributes = cfs_fsetxattr(fd, "user.docsession.test", "kept", 4) == 0
        close(fd)
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_700_000_000, tv_nsec: 987_654_321)]
        #expect(utimensat(AT_FDCWD, source, &times, 0) == 0)
        let target = try #require(otherFileSystemDirectory())
        let destination = target + "/b.txt"
        let identity = try FileTransfer.move(from: source, to: destination, replace: false)
        #expect(status(source) == nil)
        #expect(try entries(SafeSave.split(source).directory).isEmpty)
        #expect(try fileText(destination) == "far away\n")
        #expect(try fileStatusMode(destination) == 0o640)
        let moved = try #require(status(destination))
        #expect(moved.st_mtim.tv_sec == 1_700_000_000 && moved.st_mtim.tv_nsec == 987_654_321)
        #expect(identity.sameState(as: FileIdentity(moved)))
        if hasAttributes {
            var value = [UInt8](repeating: 0, count: 16)
            let got = cfs_lgetxattr(destination, "user.docsession.test", &value, value.count)
            // tmpfs keeps user attributes from Linux 6.6; where it refuses them they are left out.
            if got >= 0 { #expect(Array(value[0..<got]) == Array("kept".utf8)) }
        }
        #expect(try entries(target) == ["b.txt"])
    }

    @Test("a 50 MB move across file systems (copied in pieces) and a 50 MB copy arrive whole",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func largeFiles() throws {
        let directory = freshDirectory()
        let source = directory + "/large.bin"
        writeLargeFile(source, megabytes: 50)
        let expected = try #require(hash(source))
        let copied = try FileTransfer.copy(from: source, to: directory + "/copy.bin", replace: false)
        #expect(copied.size == 50 << 20)
        #expect(hash(directory + "/copy.bin") == expected)
        let target = try #require(otherFileSystemDirectory())
        defer { unlink(target + "/large.bin"); rmdir(target) }
        let moved = try FileTransfer.move(from: source, to: target + "/large.bin", replace: false)
        #expect(moved.size == 50 << 20)
        #expect(hash(target + "/large.bin") == expected)
        #expect(status(source) == nil)
        #expect(try entries(target) == ["large.bin"])
    }

    @Test("across file systems an existing destination is refused before copying, and replaced when asked",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func acrossFileSystemsReplace() throws {
        let source = writeTemporaryFile(Array("mine\n".utf8), name: "a.txt")
        let target = try #require(otherFileSystemDirectory())
        let destination = target + "/b.txt"
        put(destination, "theirs\n")
        #expect(failure { () throws(FileSystemError) in try FileTransfer.move(from: source, to: destination, replace: false) }?.code == "EEXIST")
        #expect(try fileText(destination) == "theirs\n")
        #expect(try fileText(source) == "mine\n")
        try FileTransfer.move(from: source, to: destination, replace: true)
        #expect(try fileText(destination) == "mine\n")
        #expect(status(source) == nil)
        #expect(try entries(target) == ["b.txt"])
    }

    @Test("a destination created while the copy runs is not overwritten: the source stays, no temp is left",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func destinationAppearsMidway() throws {
        let source = writeTemporaryFile(Array("mine\n".utf8), name: "a.txt")
        let target = try #require(otherFileSystemDirectory())
        let destination = target + "/b.txt"
        let error = failure { () throws(FileSystemError) in
            _ = try FileTransfer.move(from: source, to: destination, replace: false) {
                put(destination, "theirs\n")
            }
        }
        #expect(error?.code == "EEXIST")
        #expect(try fileText(destination) == "theirs\n")
        #expect(try fileText(source) == "mine\n")
        #expect(try entries(target) == ["b.txt"])
    }

    @Test("a source replaced while it is copied is not removed: EAGAIN, the new source kept, nothing placed",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func sourceChangesMidway() throws {
        let source = writeTemporaryFile(Array("old\n".utf8), name: "a.txt")
        let target = try #require(otherFileSystemDirectory())
        let error = failure { () throws(FileSystemError) in
            _ = try FileTransfer.move(from: source, to: target + "/b.txt", replace: false) {
                // Another editor's safe save: a new file renamed over the source.
                put(source + ".new", "newer\n")
                rename(source + ".new", source)
            }
        }
        #expect(error?.code == "EAGAIN")
        #expect(try fileText(source) == "newer\n")
        #expect(try entries(target).isEmpty)
    }

    @Test("across file systems, a destination directory that cannot take the file leaves the source and no temp",
          .enabled(if: secondFileSystem, "needs /dev/shm on a file system other than /tmp's"))
    func acrossFileSystemsFailure() throws {
        try expectMoveRefused(into: try #require(otherFileSystemDirectory()), leftovers: entries)
    }

    // MARK: Copy and write

    @Test("copy: content and mode kept, source untouched, no temp; an existing destination only with replace")
    func copies() throws {
        let source = writeTemporaryFile(Array("original\n".utf8), name: "a.txt")
        chmod(source, 0o604)
        let target = freshDirectory()
        let identity = try FileTransfer.copy(from: source, to: target + "/c.txt", replace: false)
        #expect(try fileText(target + "/c.txt") == "original\n")
        #expect(try fileStatusMode(target + "/c.txt") == 0o604)
        #expect(identity.sameState(as: try #require(FileIdentity.current(path: target + "/c.txt"))))
        #expect(try fileText(source) == "original\n")
        put(target + "/d.txt", "theirs")
        #expect(failure { () throws(FileSystemError) in _ = try FileTransfer.copy(from: source, to: target + "/d.txt", replace: false) }?.code == "EEXIST")
        #expect(try fileText(target + "/d.txt") == "theirs")
        _ = try FileTransfer.copy(from: source, to: target + "/d.txt", replace: true)
        #expect(try fileText(target + "/d.txt") == "original\n")
        #expect(try entries(target) == ["c.txt", "d.txt"])
    }

    @Test("write: the bytes, a new file's mode from the umask, a replaced file's mode kept, no temp")
    func writes() throws {
        let target = freshDirectory()
        let identity = try FileTransfer.write(Array("exported\n".utf8), to: target + "/e.txt", replace: false)
        #expect(identity.size == 9)
        #expect(try fileText(target + "/e.txt") == "exported\n")
        #expect(try fileStatusMode(target + "/e.txt") == 0o666 & ~SafeSave.processUmask)
        chmod(target + "/e.txt", 0o600)
        #expect(failure { () throws(FileSystemError) in _ = try FileTransfer.write([1], to: target + "/e.txt", replace: false) }?.code == "EEXIST")
        #expect(try fileText(target + "/e.txt") == "exported\n")
        _ = try FileTransfer.write(Array("again\n".utf8), to: target + "/e.txt", replace: true)
        #expect(try fileText(target + "/e.txt") == "again\n")
        #expect(try fileStatusMode(target + "/e.txt") == 0o600)
        _ = try FileTransfer.write([], to: target + "/empty", replace: false)
        #expect(try contentsOf(target + "/empty").isEmpty)
        #expect(failure { () throws(FileSystemError) in _ = try FileTransfer.write([], to: target + "/missing/x", replace: false) }?.code == "ENOENT")
        #expect(try entries(target) == ["e.txt", "empty"])
    }

    @Test("import and export under a free name: report.txt taken gives report 2.txt, nothing overwritten")
    func uniqueTransfers() throws {
        let source = writeTemporaryFile(Array("imported\n".utf8), name: "report.txt")
        let target = freshDirectory()
        put(target + "/report.txt", "theirs")
        let first = try FileTransfer.copy(from: source, intoDirectory: target, preferredName: "report.txt")
        #expect(first.path == target + "/report 2.txt")
        #expect(try fileText(first.path) == "imported\n")
        let second = try FileTransfer.write(Array("exported".utf8), intoDirectory: target, preferredName: "report.txt")
        #expect(second.path == target + "/report 3.txt")
        #expect(second.identity.size == 8)
        let fresh = try FileTransfer.write([], intoDirectory: target, preferredName: "new.txt")
        #expect(fresh.path == target + "/new.txt")
        #expect(try fileText(target + "/report.txt") == "theirs")
        #expect(failure { () throws(FileSystemError) in _ = try FileTransfer.write([], intoDirectory: target, preferredName: "a/b") }?.code == "EINVAL")
        #expect(try entries(target) == ["new.txt", "report 2.txt", "report 3.txt", "report.txt"])
    }
}
