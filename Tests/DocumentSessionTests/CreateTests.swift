import DocumentSession
import FileStore
import Foundation
import Synchronization
import Testing
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

@Suite("DocumentStore: creating")
struct CreateTests {
    @Test("create writes exactly the text (UTF-8, no BOM) and opens it clean at version 1", arguments: [
        ("", LineEndingStyle.none), ("hello\n", .lf), ("a\r\nb😀\r\n", .crlf), ("x\ry", .cr), ("e\u{301}\n\r\n", .mixed),
    ])
    func createsTheFile(text: String, style: LineEndingStyle) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("new.swift")
        let store = DocumentStore()
        let document = try await store.create(path: path, text: text)
        #expect(try contents(path) == bytes(text))
        #expect(bytes(document.buffer.text) == bytes(text))
        #expect(document.version == 1)
        #expect(document.encoding == .utf8)
        #expect(!document.hasByteOrderMark)
        #expect(document.lineEnding == style)
        #expect(!document.hasUnsavedChanges)
        #expect(document.state == [])
        #expect(document.path == path)
        #expect(document.fileType == "swift")
        let status = try fileStatus(path)
        #expect(document.identity.inode == UInt64(status.st_ino))
        #expect(document.identity.size == Int64(text.utf8.count))
        #expect(await store.count == 1)
    }

    @Test("the new file's mode is 0666 less the umask, and it is a regular file")
    func mode() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("mode.txt")
        _ = try await DocumentStore().create(path: path, text: "m")
        let status = try fileStatus(path, follow: false)
        #expect(status.st_mode & S_IFMT == S_IFREG)
        let expected = 0o666 & ~(try currentUmask())
        #expect(status.st_mode & 0o7777 == expected, "mode \(String(status.st_mode & 0o7777, radix: 8)), expected \(String(expected, radix: 8))")
    }

    @Test("create never overwrites: a file, a directory, a dangling symlink already at the path")
    func neverOverwrites() async throws {
        let directory = try TemporaryDirectory()
        let store = DocumentStore()

        let existing = try directory.write("existing.txt", "precious\n")
        let error = await thrownError { try await store.create(path: existing, text: "clobber") }
        #expect(error == .alreadyExists(path: existing))
        #expect(try contents(existing) == bytes("precious\n"))

        let subdirectory = directory.file("sub")
        try FileManager.default.createDirectory(atPath: subdirectory, withIntermediateDirectories: false)
        #expect(await thrownError { try await store.create(path: subdirectory, text: "x") } == .alreadyExists(path: subdirectory))

        // A dangling symlink: following it would create a file elsewhere.
        let target = directory.file("target.txt")
        let dangling = directory.file("dangling.txt")
        #expect(symlink(target, dangling) == 0)
        #expect(await thrownError { try await store.create(path: dangling, text: "x") } == .alreadyExists(path: dangling))
        #expect(!FileManager.default.fileExists(atPath: target), "create followed a symlink")
        #expect(await store.count == 0)
    }

    @Test("create over a file already open: refused, the open document untouched")
    func createOverAnOpenDocument() async throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("open.txt", "open\n")
        let store = DocumentStore()
        let document = try await store.open(path: path, encoding: nil)
        #expect(await thrownError { try await store.create(path: path, text: "new") } == .alreadyExists(path: path))
        #expect(try await store.document(document.handle).buffer.text == "open\n")
        #expect(await store.count == 1)
    }

    @Test("a file created by someone else at the same moment is never overwritten: exactly one creator wins")
    func raceWithAnotherCreator() async throws {
        let directory = try TemporaryDirectory()
        let store = DocumentStore()
        var storeWins = 0
        var otherWins = 0
        for round in 0..<100 {
            let path = directory.file("race-\(round).txt")
            let theirs = Array("theirs \(round)\n".utf8)
            // The other creator: plain O_CREAT|O_EXCL from another thread, as another program would.
            let other = Task.detached { () -> Bool in
                let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
                guard fd >= 0 else { return false }
                _ = theirs.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
                return true
            }
            let ours: Bool
            do throws(DocumentError) {
                _ = try await store.create(path: path, text: "ours \(round)\n")
                ours = true
            } catch {
                #expect(error == .alreadyExists(path: path))
                ours = false
            }
            let otherWon = await other.value
            #expect(ours != otherWon, "round \(round): both or neither created the file")
            let onDisk = try contents(path)
            if ours {
                storeWins += 1
                #expect(onDisk == bytes("ours \(round)\n"), "round \(round)")
            } else {
                otherWins += 1
                #expect(onDisk == theirs, "round \(round): the other creator's file was overwritten")
            }
        }
        #expect(storeWins + otherWins == 100)
        #expect(await store.count == storeWins)
    }

    @Test("two stores (two servers) creating one path at once: one wins, the other gets alreadyExists")
    func raceBetweenStores() async throws {
        let directory = try TemporaryDirectory()
        for round in 0..<50 {
            let path = directory.file("both-\(round).txt")
            let left = DocumentStore()
            let right = DocumentStore()
            async let a = thrownError { try await left.create(path: path, text: "left") }
            async let b = thrownError { try await right.create(path: path, text: "right") }
            let (leftError, rightError) = await (a, b)
            #expect((leftError == nil) != (rightError == nil), "round \(round): \(String(describing: leftError)) / \(String(describing: rightError))")
            let winner = leftError == nil ? "left" : "right"
            #expect(try contents(path) == bytes(winner))
            let errors: [DocumentError] = [leftError, rightError].compactMap { $0 }
            #expect(errors == [DocumentError.alreadyExists(path: path)])
        }
    }

    @Test("create in a missing directory: a file-system error naming ENOENT, open and the path")
    func missingDirectory() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("no/such/dir/new.txt")
        let error = await thrownError { try await DocumentStore().create(path: path, text: "x") }
        guard case .fileSystem(let detail)? = error else {
            Issue.record("expected a file-system error, got \(String(describing: error))")
            return
        }
        #expect(detail.code == "ENOENT")
        #expect(detail.errno == ENOENT)
        #expect(detail.syscall == "open")
        #expect(detail.path == path)
    }

    @Test("a created document is the one a later open of its path answers")
    func openAfterCreate() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("made.txt")
        let store = DocumentStore()
        let created = try await store.create(path: path, text: "made\n")
        let opened = try await store.open(path: path, encoding: nil)
        #expect(opened.handle == created.handle)
        let symlinkPath = directory.file("alias.txt")
        #expect(symlink(path, symlinkPath) == 0)
        #expect(try await store.open(path: symlinkPath, encoding: nil).handle == created.handle)
        #expect(await store.count == 1)
    }
}
