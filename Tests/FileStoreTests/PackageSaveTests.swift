import Foundation
import SystemPackage
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

// PackageSave: a package (a directory that is one document) saved by a staged tree swapped in whole,
// and the recovery of each state an interrupted save can leave.

private let packageName = "notes.textbundle"

/// A parent directory and the package path in it.
private func makePackageHome() throws -> (TemporaryDirectory, String) {
    let home = try TemporaryDirectory(prefix: "docsession-package")
    return (home, home.file(packageName))
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func write(_ path: String, _ text: String) -> PackageEntryWrite {
    PackageEntryWrite(path: path, source: .bytes(bytes(text)))
}

private func unchanged(_ path: String) -> PackageEntryWrite { PackageEntryWrite(path: path, source: .unchanged) }

private func text(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

private func lstatus(_ path: String) -> stat? {
    var result = stat()
    return lstat(path, &result) == 0 ? result : nil
}

private func mode(_ path: String) -> mode_t? { lstatus(path).map { $0.st_mode & 0o7777 } }

private func inode(_ path: String) -> ino_t? { lstatus(path)?.st_ino }

/// The names in `directory`, sorted.
private func listing(_ directory: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
}

/// The relative paths and kinds of the package's tree.
private func tree(_ package: String) throws -> [String] {
    try PackageSave.entries(of: package).map { "\($0.path) \($0.kind.rawValue)" }
}

/// The first version of the package: a text, an image under assets/.
@discardableResult
private func saveFirstVersion(_ package: String) throws -> PackageSaveResult {
    try PackageSave.save(packageAt: package, entries: [write("text.md", "# One\n"), write("assets/img.png", "PNG-1")])
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

@Suite("PackageSave: saving a package atomically")
struct PackageSaveTests {
    @Test("a first save creates the package by a no-replace rename, with modes 0644 and 0755, and leaves nothing beside it")
    func firstSave() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        let result = try saveFirstVersion(package)
        #expect(result.method == .firstSave)
        #expect(result.written == 2 && result.copied == 0 && result.cloned == 0 && result.linked == 0)
        #expect(result.oldTree == nil && result.cleanupError == nil)
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try text(package + "/assets/img.png") == "PNG-1")
        #expect(mode(package) == 0o755 && mode(package + "/assets") == 0o755 && mode(package + "/text.md") == 0o644)
        #expect(try listing(home.path) == [packageName])
        #expect(try tree(package) == ["assets directory", "assets/img.png file", "text.md file"])
    }

    @Test("a second save exchanges the trees: new content, the unchanged file copied (or cloned) to a new inode, the old tree removed")
    func secondSaveExchanges() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let oldImage = inode(package + "/assets/img.png")
        let oldRoot = inode(package)
        let result = try PackageSave.save(packageAt: package, entries: [write("text.md", "# Two\n"), unchanged("assets/img.png")])
        #expect(result.method == .exchange)
        #expect(result.written == 1 && result.cloned + result.copied == 1 && result.linked == 0)
        #expect(try text(package + "/text.md") == "# Two\n")
        #expect(try text(package + "/assets/img.png") == "PNG-1")
        #expect(inode(package + "/assets/img.png") != oldImage)
        #expect(inode(package) != oldRoot)
        #expect(try listing(home.path) == [packageName])
    }

    @Test("a save as (source): the unchanged entries and the package's mode come from the source, which is left as it was")
    func saveAsFromSource() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        #expect(chmod(package, 0o750) == 0)
        let copy = home.file("copy.textbundle")
        let result = try PackageSave.save(
            packageAt: copy, entries: [write("text.md", "# Copy\n"), unchanged("assets/img.png")], source: package)
        #expect(result.method == .firstSave && result.written == 1 && result.cloned + result.copied == 1)
        #expect(try text(copy + "/text.md") == "# Copy\n" && text(copy + "/assets/img.png") == "PNG-1")
        #expect(mode(copy) == 0o750)
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == ["copy.textbundle", packageName])

        // A directory at the destination is exchanged (and left for the caller with removeOldTree
        // false); a regular file there is never replaced.
        let again = try PackageSave.save(
            packageAt: copy, entries: [write("text.md", "# Again\n")], removeOldTree: false, source: package)
        #expect(again.method == .exchange)
        #expect(try tree(copy) == ["text.md file"] && text(copy + "/text.md") == "# Again\n")
        let left = try #require(again.oldTree)
        #expect(try text(left + "/text.md") == "# Copy\n")
        try PackageSave.removeLeftover(left)
        let file = home.file("plain")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("a file".utf8)))
        let refused = failure { () throws(FileSystemError) in
            _ = try PackageSave.save(packageAt: file, entries: [write("text.md", "x")], source: package)
        }
        #expect(refused?.errno == ENOTDIR)
        #expect(try text(file) == "a file")
        #expect(try listing(home.path) == ["copy.textbundle", packageName, "plain"])
    }

    @Test("with linkUnchanged, an unchanged file that cannot be cloned is hard-linked: the same inode in the new tree")
    func linkUnchanged() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let oldImage = inode(package + "/assets/img.png")
        let result = try PackageSave.save(packageAt: package, entries: [write("text.md", "# Two\n"), unchanged("assets/img.png")],
                                          linkUnchanged: true)
        #expect(result.cloned + result.linked == 1 && result.copied == 0)
        if result.linked == 1 { #expect(inode(package + "/assets/img.png") == oldImage) }
        #expect(try text(package + "/assets/img.png") == "PNG-1")
        #expect(lstatus(package + "/assets/img.png")?.st_nlink == 1)  // the old tree's name is gone
        #expect(try listing(home.path) == [packageName])
    }

    @Test("an entry left out is deleted, and a directory left empty is not kept")
    func deletesEntries() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let result = try PackageSave.save(packageAt: package, entries: [unchanged("text.md")])
        #expect(result.method == .exchange)
        #expect(try tree(package) == ["text.md file"])
    }

    @Test("nested directories are made, and an unchanged directory keeps its mode")
    func nestedDirectories() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try PackageSave.save(packageAt: package, entries: [write("a/b/c/d.txt", "d"), write("a/e.txt", "e"), write("f.txt", "f")])
        #expect(chmod(package + "/a/b", 0o750) == 0)
        try PackageSave.save(packageAt: package, entries: [unchanged("a/b/c/d.txt"), write("a/e.txt", "E"), write("g/h.txt", "h")])
        #expect(try tree(package) == ["a directory", "a/b directory", "a/b/c directory", "a/b/c/d.txt file", "a/e.txt file",
                                      "g directory", "g/h.txt file"])
        #expect(try text(package + "/a/b/c/d.txt") == "d" && text(package + "/a/e.txt") == "E")
        #expect(mode(package + "/a/b") == 0o750 && mode(package + "/g") == 0o755)
    }

    @Test("an unchanged symlink stays a symlink to the same target, never followed")
    func symlinkKept() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try home.write("outside.txt", "outside")
        #expect(symlink("text.md", package + "/link") == 0)
        #expect(symlink(home.file("outside.txt"), package + "/assets/away") == 0)
        let result = try PackageSave.save(packageAt: package, entries: [
            unchanged("text.md"), unchanged("link"), unchanged("assets/away"),
        ])
        #expect(result.symlinks == 2 && result.copied + result.cloned == 1)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: package + "/link") == "text.md")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: package + "/assets/away") == home.file("outside.txt"))
        #expect(try tree(package) == ["assets directory", "assets/away symlink", "link symlink", "text.md file"])
        #expect(try text(home.file("outside.txt")) == "outside")
    }

    @Test("a symlinked directory inside the package is never followed: kept as a link, not read through")
    func symlinkedDirectoryNotFollowed() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try PackageSave.save(packageAt: package, entries: [write("text.md", "# One\n")])
        #expect(mkdir(home.file("outside"), 0o755) == 0)
        try home.write("outside/img.png", "outside")
        #expect(symlink(home.file("outside"), package + "/assets") == 0)
        let error = failure { () throws(FileSystemError) in
            _ = try PackageSave.save(packageAt: package, entries: [unchanged("text.md"), unchanged("assets/img.png")])
        }
        #expect(error?.errno == ENOENT && error?.path == package + "/assets/img.png")
        let result = try PackageSave.save(packageAt: package, entries: [unchanged("text.md"), unchanged("assets")])
        #expect(result.symlinks == 1)
        #expect(try tree(package) == ["assets symlink", "text.md file"])
        #expect(try text(home.file("outside/img.png")) == "outside")
        #expect(try listing(home.path) == [packageName, "outside"])
    }

    @Test("keepOldTree leaves the old tree there instead of removing it")
    func keepsOldTree() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let kept = home.file("version-1")
        let result = try PackageSave.save(packageAt: package, entries: [write("text.md", "# Two\n")], keepOldTree: kept)
        #expect(result.oldTree == kept && result.cleanupError == nil)
        #expect(try text(kept + "/text.md") == "# One\n" && text(kept + "/assets/img.png") == "PNG-1")
        #expect(try text(package + "/text.md") == "# Two\n")
        #expect(try listing(home.path) == [packageName, "version-1"])
    }

    @Test("without RENAME_EXCHANGE the save renames under an intent record, with the same result and nothing left")
    func fallbackRenames() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let result = try PackageSave.save(packageAt: package, entries: [write("text.md", "# Two\n"), unchanged("assets/img.png")],
                                          exchangeUnsupported: true)
        #expect(result.method == .renames)
        #expect(result.written == 1 && result.copied + result.cloned == 1)
        #expect(try text(package + "/text.md") == "# Two\n" && text(package + "/assets/img.png") == "PNG-1")
        #expect(try listing(home.path) == [packageName])
        let kept = home.file("version-1")
        let second = try PackageSave.save(packageAt: package, entries: [unchanged("text.md")], keepOldTree: kept, exchangeUnsupported: true)
        #expect(second.method == .renames && second.oldTree == kept)
        #expect(try tree(kept) == ["assets directory", "assets/img.png file", "text.md file"])
        #expect(try listing(home.path) == [packageName, "version-1"])
    }

    @Test("modes: given permissions are set exactly, kept by the next save, and the package's own mode stays")
    func modesKept() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try PackageSave.save(packageAt: package, entries: [
            PackageEntryWrite(path: "secret.txt", source: .bytes(bytes("s")), permissions: [.ownerReadWrite]),
            PackageEntryWrite(path: "run.sh", source: .bytes(bytes("#!/bin/sh\n")), permissions: FilePermissions(rawValue: 0o755)),
        ])
        #expect(mode(package + "/secret.txt") == 0o600 && mode(package + "/run.sh") == 0o755)
        #expect(chmod(package, 0o750) == 0)
        try PackageSave.save(packageAt: package, entries: [write("secret.txt", "t"), unchanged("run.sh")])
        #expect(mode(package + "/secret.txt") == 0o600 && mode(package + "/run.sh") == 0o755 && mode(package) == 0o750)
        try PackageSave.save(packageAt: package, entries: [
            PackageEntryWrite(path: "run.sh", source: .unchanged, permissions: FilePermissions(rawValue: 0o700)),
        ], linkUnchanged: true)
        #expect(mode(package + "/run.sh") == 0o700)
    }

    @Test("a producer writes its file in the staged tree; the save sets its mode and counts it written")
    func producer() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        let result = try PackageSave.save(packageAt: package, entries: [
            PackageEntryWrite(path: "StoreContent/persistentStore", source: .produce({ (path) throws(FileSystemError) in
                guard FileManager.default.createFile(atPath: path, contents: Data("SQLite format 3\0".utf8)) else {
                    throw FileSystemError(errno: EIO, syscall: "create", path: path)
                }
            })),
        ])
        #expect(result.written == 1)
        #expect(try text(package + "/StoreContent/persistentStore") == "SQLite format 3\0")
        #expect(mode(package + "/StoreContent/persistentStore") == 0o644)
    }

    @Test("bad relative paths are refused with EINVAL before anything is written", arguments: [
        "../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "", "a/",
    ])
    func badPathsRefused(_ path: String) throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let before = try PackageSave.signature(of: package)
        let error = failure { () throws(FileSystemError) in _ = try PackageSave.save(packageAt: package, entries: [write(path, "x")]) }
        #expect(error?.errno == EINVAL)
        #expect(try PackageSave.signature(of: package) == before)
        #expect(try listing(home.path) == [packageName])
    }

    @Test("a path given twice, or as both a file and a directory, is refused")
    func clashingPathsRefused() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        #expect(failure { () throws(FileSystemError) in _ = try PackageSave.save(packageAt: package, entries: [write("a", "1"), write("a", "2")]) }?.errno == EINVAL)
        #expect(failure { () throws(FileSystemError) in _ = try PackageSave.save(packageAt: package, entries: [write("a", "1"), write("a/b", "2")]) }?.errno == EINVAL)
        #expect(lstatus(package) == nil)
    }

    @Test("a failure while staging removes the staged tree and leaves the package as it was")
    func failureBeforeSwap() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let before = try PackageSave.signature(of: package)
        let missing = failure { () throws(FileSystemError) in
            _ = try PackageSave.save(packageAt: package, entries: [write("text.md", "# Two\n"), unchanged("gone.txt")])
        }
        #expect(missing?.errno == ENOENT && missing?.path == package + "/gone.txt")
        let refused = failure { () throws(FileSystemError) in
            _ = try PackageSave.save(packageAt: package, entries: [
                write("text.md", "# Two\n"),
                PackageEntryWrite(path: "store", source: .produce({ (path) throws(FileSystemError) in
                    throw FileSystemError(errno: ENOSPC, syscall: "sqlite3_backup_step", path: path)
                })),
            ])
        }
        #expect(refused?.errno == ENOSPC)
        #expect(try PackageSave.signature(of: package) == before)
        #expect(try listing(home.path) == [packageName])
    }

    @Test("a package that appears during a first save is not replaced: EEXIST, and the staged tree goes")
    func firstSaveRace() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        let error = failure { () throws(FileSystemError) in
            _ = try PackageSave.save(packageAt: package, entries: [
                PackageEntryWrite(path: "text.md", source: .produce({ (path) throws(FileSystemError) in
                    // Another program creates the package while this one stages.
                    mkdir(package, 0o755)
                    _ = FileManager.default.createFile(atPath: package + "/theirs.txt", contents: Data("theirs".utf8))
                    _ = FileManager.default.createFile(atPath: path, contents: Data("ours".utf8))
                })),
            ])
        }
        #expect(error?.errno == EEXIST && error?.syscall == "renameat2")
        #expect(try text(package + "/theirs.txt") == "theirs")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("entries and signature stay the same when nothing changes, and change when another program writes inside")
    func signatureSeesOtherPrograms() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let signature = try PackageSave.signature(of: package)
        let listed = try PackageSave.entries(of: package)
        _ = try text(package + "/text.md")  // reading changes nothing
        #expect(try PackageSave.signature(of: package) == signature)
        #expect(try PackageSave.entries(of: package) == listed)
        #expect(listed.map(\.size) == [Int64(lstatus(package + "/assets")!.st_size), 5, 6])

        // Written in place (the same inode) by another program.
        let handle = try #require(FileHandle(forWritingAtPath: package + "/text.md"))
        handle.write(Data("# Uno!\n".utf8))
        try handle.close()
        #expect(inode(package + "/text.md") == signature.items.first { $0.path == "text.md" }.map { ino_t($0.inode) })
        #expect(try PackageSave.signature(of: package) != signature)
        #expect(try PackageSave.entries(of: package).map(\.size) == [listed[0].size, 5, 7])

        let afterWrite = try PackageSave.signature(of: package)
        _ = FileManager.default.createFile(atPath: package + "/assets/new.png", contents: Data("x".utf8))
        #expect(try PackageSave.signature(of: package) != afterWrite)
        #expect(try PackageSave.entries(of: package).count == listed.count + 1)

        // Our own save is recorded after it, and then matches.
        try PackageSave.save(packageAt: package, entries: [unchanged("text.md")])
        let recorded = try PackageSave.signature(of: package)
        #expect(try PackageSave.signature(of: package) == recorded)
    }

    @Test("entries and signature name the path of a missing package or one that is a file")
    func treeErrors() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        #expect(failure { () throws(FileSystemError) in _ = try PackageSave.entries(of: package) }?.errno == ENOENT)
        try home.write(packageName, "a file")
        let error = failure { () throws(FileSystemError) in _ = try PackageSave.signature(of: package) }
        #expect(error?.errno == ENOTDIR && error?.path == package)
    }
}

@Suite("PackageSave: recovering an interrupted save")
struct PackageRecoveryTests {
    private let stageName = "." + packageName + ".docsession-stage-00000000000000ab"
    private let oldName = "." + packageName + ".docsession-old-00000000000000cd"
    private let intentName = "." + packageName + ".docsession-intent"

    /// A staged tree (the new version) at `name` in `home`.
    private func stage(_ home: TemporaryDirectory, at name: String, text: String = "# New\n") throws {
        #expect(mkdir(home.file(name), 0o700) == 0)
        try home.write(name + "/text.md", text)
    }

    private func writeIntent(_ home: TemporaryDirectory) throws {
        try home.write(intentName, PackageIntentRecord(stage: stageName, old: oldName).bytes)
    }

    @Test("nothing to do: nil, and nothing touched")
    func nothing() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try home.write(".other.docsession-stage-00000000000000ab", "not ours")
        #expect(try PackageSave.recoverInterruptedSave(packageAt: package) == nil)
        #expect(try listing(home.path).count == 2)
    }

    @Test("a staged tree of a first save never renamed: removed, still no package")
    func stageOnly() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try stage(home, at: stageName)
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery == PackageRecovery(outcome: .rolledBack, removed: [stageName], tornIntentRecord: false))
        #expect(try listing(home.path) == [])
        #expect(try PackageSave.recoverInterruptedSave(packageAt: package) == nil)
    }

    @Test("the old tree left at the staging name after an exchange: removed, the package kept")
    func oldTreeAtStageName() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: stageName, text: "# Old\n")
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery?.outcome == .cleanedUp && recovery?.removed == [stageName])
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("an old tree is removed whatever its names: one that is not UTF-8 included")
    func removesNonUTF8Names() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: stageName, text: "# Old\n")
        let name: [CChar] = Array((home.file(stageName) + "/bad-").utf8CString.dropLast()) + [CChar(bitPattern: 0xFF), 0]
        let made = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        #expect(made >= 0)
        close(made)
        #expect(try PackageSave.recoverInterruptedSave(packageAt: package)?.removed == [stageName])
        #expect(try listing(home.path) == [packageName])
    }

    @Test("intent record, package renamed away, staged tree there: the second rename is made")
    func finishesRenames() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: stageName)
        try writeIntent(home)
        #expect(rename(package, home.file(oldName)) == 0)
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery == PackageRecovery(outcome: .finished, removed: [intentName, oldName].sorted(), tornIntentRecord: false))
        #expect(try text(package + "/text.md") == "# New\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("intent record, nothing renamed yet: rolled back, the staged tree removed")
    func rollsBackRenames() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: stageName)
        try writeIntent(home)
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery == PackageRecovery(outcome: .rolledBack, removed: [intentName, stageName].sorted(), tornIntentRecord: false))
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("intent record, both renames made: the old tree and the record removed")
    func cleansUpAfterRenames() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        #expect(rename(package, home.file(oldName)) == 0)
        try stage(home, at: packageName)
        try writeIntent(home)
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery?.outcome == .cleanedUp && recovery?.removed == [intentName, oldName].sorted())
        #expect(try text(package + "/text.md") == "# New\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("an old tree left by the fallback after its record went: removed, the package kept")
    func oldTreeWithoutRecord() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: oldName, text: "# Old\n")
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery == PackageRecovery(outcome: .cleanedUp, removed: [oldName], tornIntentRecord: false))
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("the leftovers of a package whose name starts with this one's staging name are not this one's")
    func othersLeftoversKept() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        let other = "." + packageName + ".docsession-stage-x.docsession-old-00000000000000ef"
        try stage(home, at: other)
        #expect(try PackageSave.recoverInterruptedSave(packageAt: package) == nil)
        #expect(try listing(home.path) == [other, packageName].sorted())
    }

    @Test("intent record, package moved away and the staged tree gone: the old tree is put back")
    func putsOldTreeBack() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        #expect(rename(package, home.file(oldName)) == 0)
        try writeIntent(home)
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery?.outcome == .rolledBack)
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("a torn intent record is a save not started: the record and the staged tree go, the package stays")
    func tornIntentRecord() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try stage(home, at: stageName)
        let whole = PackageIntentRecord(stage: stageName, old: oldName).bytes
        try home.write(intentName, Array(whole.prefix(whole.count - 3)))
        let recovery = try PackageSave.recoverInterruptedSave(packageAt: package)
        #expect(recovery == PackageRecovery(outcome: .rolledBack, removed: [intentName, stageName].sorted(), tornIntentRecord: true))
        #expect(try text(package + "/text.md") == "# One\n")
        #expect(try listing(home.path) == [packageName])
    }

    @Test("an intent record is whole only as written: every cut and every flipped byte is refused")
    func intentRecordChecked() {
        let names = PackageSave.SiblingNames(name: packageName)
        let record = PackageIntentRecord(stage: stageName, old: oldName)
        let whole = record.bytes
        #expect(PackageIntentRecord(parsing: whole, names: names) == record)
        for length in 0..<whole.count {
            #expect(PackageIntentRecord(parsing: Array(whole.prefix(length)), names: names) == nil)
        }
        for index in whole.indices {
            var damaged = whole
            damaged[index] ^= 0x20
            #expect(PackageIntentRecord(parsing: damaged, names: names) == nil)
        }
        // A record naming siblings of another package, or a path, is not acted on.
        let other = PackageIntentRecord(stage: "../elsewhere", old: oldName).bytes
        #expect(PackageIntentRecord(parsing: other, names: names) == nil)
    }

    @Test("after a save through the fallback or an exchange, recovery finds nothing to do")
    func nothingAfterSaves() throws {
        let (home, package) = try makePackageHome()
        defer { withExtendedLifetime(home) {} }  // the directory goes with it
        try saveFirstVersion(package)
        try PackageSave.save(packageAt: package, entries: [unchanged("text.md")])
        try PackageSave.save(packageAt: package, entries: [unchanged("text.md")], exchangeUnsupported: true)
        #expect(try PackageSave.recoverInterruptedSave(packageAt: package) == nil)
    }
}
