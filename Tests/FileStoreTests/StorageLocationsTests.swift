import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

private func makeDirectory() -> String {
    DirectoryQuery.normalizedRoot(try! makeTemporaryDirectory(prefix: "storagelocations"))
}

private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

private func makeFile(_ root: String, _ relativePath: String, _ text: String = "x\n") {
    let path = root + "/" + relativePath
    try! FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

@Suite("StorageLocations: a storage root's documents, a move's directories, the sync tools' markers")
struct StorageLocationsTests {
    @Test("documents: regular files and packages whole, sorted; links, temporary files, markers and tools' directories left out")
    func documents() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        for path in ["b.txt", "a/c.md", "a/d/e.txt", "Story.textbundle/text.md", ".stfolder/x", ".stversions/old.txt",
                     ".sync_0123456789ab.db", ".syncthing.b.txt.tmp", "b.sync-conflict-20261128-101502-ABCDEFG.txt"] {
            makeFile(root, path)
        }
        symlink("b.txt", root + "/link.txt")
        let items = try StorageLocations.documents(under: root) { $0.hasSuffix(".textbundle") }
        #expect(items.map(\.relativePath) == ["Story.textbundle", "a/c.md", "a/d/e.txt", "b.sync-conflict-20261128-101502-ABCDEFG.txt", "b.txt"])
        #expect(items.first?.kind == .package)
        #expect(throws: FileSystemError.self) { try StorageLocations.documents(under: root + "/missing") { _ in false } }
    }

    @Test("markers: Syncthing, Nextcloud and ownCloud (both forms, the journal's -wal), Dropbox; nothing else")
    func markers() {
        #expect(StorageLocations.marker(".stfolder") == .syncthing)
        #expect(StorageLocations.marker(".sync_0123456789ab.db") == .nextcloud)
        #expect(StorageLocations.marker("._sync_0123456789ab.db") == .nextcloud)
        #expect(StorageLocations.marker(".sync_journal.db") == .nextcloud)
        #expect(StorageLocations.marker(".sync_0123456789ab.db-wal") == .nextcloud)
        #expect(StorageLocations.marker(".dropbox.cache") == .dropbox)
        #expect(StorageLocations.marker(".dropbox") == .dropbox)
        for name in [".sync_.db", "sync_x.db", ".stfolder2", "notes.txt", ".seafile-data", ".unison"] {
            #expect(StorageLocations.marker(name) == nil, "\(name)")
        }
        #expect(StorageLocations.tool(markedBy: [".dropbox", ".stfolder"]) == .syncthing)
    }

    @Test("SyncToolFinder: the nearest marker up to the root, never above it")
    func finder() {
        let root = makeDirectory()
        defer { removeTree(root) }
        makeFile(root, "Sync/.stfolder")
        makeFile(root, "Sync/sub/deeper/a.txt")
        makeFile(root, "Sync/sub/Cloud/.sync_0123456789ab.db")
        makeFile(root, "Sync/sub/Cloud/b.txt")
        makeFile(root, "Plain/c.txt")
        var finder = SyncToolFinder(root: root)
        #expect(finder.tool(forFile: root + "/Sync/sub/deeper/a.txt") == .syncthing)
        #expect(finder.tool(forFile: root + "/Sync/sub/Cloud/b.txt") == .nextcloud)
        #expect(finder.tool(forFile: root + "/Plain/c.txt") == nil)
        var below = SyncToolFinder(root: root + "/Sync/sub")
        #expect(below.tool(forFile: root + "/Sync/sub/deeper/a.txt") == nil)
    }

    @Test("conflict copies are counted among a directory's names, the tools' temporary files not")
    func conflictCopies() {
        let names: Set<String> = ["a.md", "a.sync-conflict-20261128-101502-ABCDEFG.md", "a (conflicted copy 2026-11-28 101502).md",
                                  "b.md", ".syncthing.a.md.tmp"]
        #expect(StorageLocations.conflictCopies(of: "a.md", among: names) == 2)
        #expect(StorageLocations.conflictCopies(of: "b.md", among: names) == 0)
    }

    @Test("directories: made outermost first and taken back; a file in the way is ENOTDIR; a package renamed, never over a name")
    func directoriesAndPackages() throws {
        let root = makeDirectory()
        defer { removeTree(root) }
        let made = try StorageLocations.makeDirectories("x/y/z", under: root)
        #expect(made == [root + "/x", root + "/x/y", root + "/x/y/z"])
        #expect(try StorageLocations.makeDirectories("x/y", under: root).isEmpty)
        StorageLocations.removeEmptyDirectories(made)
        #expect(!StorageLocations.exists(root + "/x"))
        makeFile(root, "file")
        #expect(throws: FileSystemError.self) { try StorageLocations.makeDirectories("file/sub", under: root) }
        makeFile(root, "P.textbundle/text.md")
        makeFile(root, "Q.textbundle/text.md")
        #expect(throws: FileSystemError.self) { try StorageLocations.moveDirectory(from: root + "/P.textbundle", to: root + "/Q.textbundle") }
        try StorageLocations.moveDirectory(from: root + "/P.textbundle", to: root + "/R.textbundle")
        #expect(StorageLocations.exists(root + "/R.textbundle/text.md") && !StorageLocations.exists(root + "/P.textbundle"))
    }
}
