import SystemCalls
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The process's umask, read from /proc without changing it (umask(2) would change it for every
/// test running meanwhile).
private func processUmask() throws -> mode_t {
    let status = try Descriptor.open("/proc/self/status", .readOnly)
    let text = String(decoding: try readToEnd(from: status.unowned), as: UTF8.self)
    let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Umask:") })
    return try #require(mode_t(line.dropFirst(6).filter { $0 != " " && $0 != "\t" }, radix: 8))
}

/// The names in `directory` that start with `prefix` (temp files left behind).
private func names(in directory: String, startingWith prefix: String) -> [String] {
    guard let stream = opendir(directory) else { return [] }
    defer { closedir(stream) }
    var found: [String] = []
    while let entry = readdir(stream) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        if name.hasPrefix(prefix) { found.append(name) }
    }
    return found
}

/// The steps of a durable replacement taken one at a time, as the save, the version store and the
/// transfers take them, and what a failure at each leaves.
@Suite struct DurableReplacementStepTests {
    @Test("finish, then place: the file is replaced, the temp name is gone, the directory is flushed")
    func finishThenPlace() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("f", "old")
        var staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
        try staged.write(Array("new".utf8))
        try staged.finish()
        // Finished but not placed: the destination is as it was, the temp file holds the bytes.
        #expect(try directory.contents("f") == Array("old".utf8))
        #expect(try directory.contents(staged.tempName) == Array("new".utf8))
        let durable = try staged.place(as: "f", replace: true)
        #expect(durable)
        #expect(staged.placedName == "f")
        #expect(try directory.contents("f") == Array("new".utf8))
        #expect(names(in: directory.path, startingWith: ".test-save-") == [])
    }

    @Test("a name with a slash places the file in a subdirectory (the version store's slots)")
    func placeInASubdirectory() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try #require(mkdir(directory.file("slot"), 0o700) == 0)
        var staged = try DurableReplacement(in: directory.path, tempPrefix: ".tmp-")
        try staged.write(Array("version".utf8))
        try staged.finish(flushing: false)
        #expect(try staged.place(as: "slot/v1", replace: false))
        #expect(try directory.contents("slot/v1") == Array("version".utf8))
        #expect(names(in: directory.path, startingWith: ".tmp-") == [])
    }

    @Test("without replace, a taken name fails with EEXIST, keeps the temp file, and another name takes it")
    func placeUnderAnotherName() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("f", "theirs")
        var staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
        try staged.write(Array("mine".utf8))
        try staged.finish()
        var thrown: SystemCallError?
        do {
            try staged.place(as: "f", replace: false)
        } catch {
            thrown = error
        }
        #expect(thrown == SystemCallError(errno: .fileExists, call: "renameat2", path: directory.file("f")))
        #expect(staged.placedName == nil)
        #expect(try directory.contents("f") == Array("theirs".utf8))
        #expect(names(in: directory.path, startingWith: ".test-save-") == [staged.tempName])
        try staged.place(as: "f 2", replace: false)
        #expect(try directory.contents("f 2") == Array("mine".utf8))
        #expect(try directory.contents("f") == Array("theirs".utf8))
        #expect(names(in: directory.path, startingWith: ".test-save-") == [])
    }

    @Test("a failed rename leaves the destination untouched, and dropping the value removes the temp file")
    func failedRenameLeavesTheDestination() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        // A directory that is not empty cannot be replaced by a file.
        try #require(mkdir(directory.file("d"), 0o700) == 0)
        try directory.write("d/inside", "kept")
        do {
            var staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
            try staged.write(Array("new".utf8))
            try staged.finish()
            var thrown: SystemCallError?
            do {
                try staged.place(as: "d", replace: true)
            } catch {
                thrown = error
            }
            #expect(thrown?.call == "renameat" && thrown?.path == directory.file("d") && thrown?.errno == .isDirectory)
        }
        #expect(try directory.contents("d/inside") == Array("kept".utf8))
        #expect(names(in: directory.path, startingWith: ".test-save-") == [])
    }

    @Test("dropped after the finish but before the placement, the temp file goes and the destination stays")
    func droppedAfterFinish() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("f", "old")
        do {
            var staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
            try staged.write(Array("new".utf8))
            try staged.finish()
        }
        #expect(try directory.contents("f") == Array("old".utf8))
        #expect(names(in: directory.path, startingWith: ".test-save-") == [])
    }

    @Test("a temp file in the caller's open directory: read-write, created with the mode less the umask, and the directory stays open")
    func inTheCallersDirectory() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let open = try Descriptor.open(directory.path, .readOnly, options: .directory)
        let mask = try processUmask()
        do {
            var staged = try DurableReplacement(
                inOpenDirectory: open.unowned, path: directory.path, tempPrefix: ".test-save-",
                permissions: [.ownerReadWrite, .groupRead, .otherRead], access: .readWrite, exactPermissions: false)
            try staged.write(Array("abc".utf8))
            // Opened for reading too (the save reads back nothing, but the in-place copy does).
            var back = [UInt8](repeating: 0, count: 3)
            #expect(back.withUnsafeMutableBytes { pread(staged.descriptor.rawValue, $0.baseAddress, 3, 0) } == 3)
            #expect(back == Array("abc".utf8))
            // No fchmod: 0644 less the umask.
            #expect(try fileStatus(staged.tempPath).st_mode & 0o777 == 0o644 & ~mask)
            try staged.finish()
            try staged.place(as: "f", replace: false)
        }
        // The directory is the caller's: still open after the value is gone.
        #expect(fcntl(open.rawValue, F_GETFD) != -1)
        try flushDirectory(open.unowned, path: directory.path)
        #expect(try directory.contents("f") == Array("abc".utf8))
    }

    @Test("with exact permissions the mode is set whatever the umask")
    func exactPermissions() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        // Bits the usual umasks (022, 002, 077) take away; a umask of 0 would make this test moot.
        try #require(processUmask() & 0o022 != 0)
        let staged = try DurableReplacement(
            in: directory.path, tempPrefix: ".test-save-",
            permissions: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
        #expect(try fileStatus(staged.tempPath).st_mode & 0o777 == 0o666)
    }

    @Test("a directory the temp file cannot be created in: the error names openat and the temp path; nothing is left")
    func creationFailure() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("file", "x")
        // The temp "directory" is a file: open(O_DIRECTORY) fails first.
        #expect(throws: SystemCallError(errno: .notDirectory, call: "open", path: directory.file("file"))) {
            _ = try DurableReplacement(in: directory.file("file"), tempPrefix: ".x-")
        }
        // A temp prefix naming a missing subdirectory: the openat fails, naming the temp file.
        var thrown: SystemCallError?
        do {
            _ = try DurableReplacement(in: directory.path, tempPrefix: "missing/.x-")
        } catch {
            thrown = error
        }
        #expect(thrown?.errno == .noSuchFileOrDirectory && thrown?.call == "openat")
        #expect(thrown?.path?.hasPrefix(directory.file("missing/.x-")) == true)
    }
}

@Suite struct RenameNoReplaceTests {
    @Test("renames to a free name; an existing one fails with EEXIST (renameat2) and both files stay")
    func renameNoReplaceBasics() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("a", "a")
        try directory.write("b", "b")
        var thrown: SystemCallError?
        do {
            try renameNoReplace(directory.file("a"), in: nil, to: directory.file("b"), in: nil,
                                fromPath: directory.file("a"), toPath: directory.file("b"), checkThenRename: true)
        } catch {
            thrown = error
        }
        #expect(thrown == SystemCallError(errno: .fileExists, call: "renameat2", path: directory.file("b")))
        #expect(try directory.contents("a") == Array("a".utf8))
        #expect(try directory.contents("b") == Array("b".utf8))
        try renameNoReplace(directory.file("a"), in: nil, to: directory.file("c"), in: nil,
                            fromPath: directory.file("a"), toPath: directory.file("c"), checkThenRename: false)
        #expect(try directory.contents("c") == Array("a".utf8))
        #expect(access(directory.file("a"), F_OK) != 0)
    }
}
