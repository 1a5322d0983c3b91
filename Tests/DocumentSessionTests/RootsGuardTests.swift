import DocumentSession
import FileStore
import Foundation
import Testing
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// The store's own checks against the sandbox roots, below the server's re-check of a path: they
/// look at the descriptor a save or a read actually opened, so they also hold in the moment between
/// a check and the use (simulated here by calling the store without the server's check).
@Suite("DocumentStore: saves and re-reads stay beneath the roots")
struct RootsGuardTests {
    /// `root/d/f.txt` ("INSIDE") opened, then `root/d` moved away and replaced by a symlink to
    /// `out/` (whose f.txt is "OUTSIDE").
    private func swapped() async throws -> (DocumentStore, String, TemporaryDirectory) {
        let directory = try TemporaryDirectory()
        for made in ["root", "root/d", "out"] { mkdir(directory.file(made), 0o755) }
        _ = try directory.write("root/d/f.txt", "INSIDE\n")
        _ = try directory.write("out/f.txt", "OUTSIDE\n")
        let store = DocumentStore(watchFiles: false)
        await store.setRoots(try SandboxRoots([directory.file("root")]))
        let document = try await store.open(path: directory.file("root/d/f.txt"), encoding: nil)
        #expect(rename(directory.file("root/d"), directory.file("root/d.moved")) == 0)
        #expect(symlink(directory.file("out"), directory.file("root/d")) == 0)
        return (store, document.handle, directory)
    }

    @Test("a save whose directory now leads out writes nothing there: outsideRoots")
    func save() async throws {
        let (store, handle, directory) = try await swapped()
        _ = try await store.edit(handle, version: 1, edits: [TextEdit(range: nil, text: "CHANGED\n")], encoding: .utf16, label: nil, merge: false)
        await #expect(throws: DocumentError.save(.outsideRoots(path: directory.file("root/d/f.txt"), directory: directory.file("root/d")))) {
            _ = try await store.save(handle, force: true)
        }
        #expect(try String(contentsOfFile: directory.file("out/f.txt"), encoding: .utf8) == "OUTSIDE\n")
        #expect(try String(contentsOfFile: directory.file("root/d.moved/f.txt"), encoding: .utf8) == "INSIDE\n")
        #expect(try await store.document(handle).buffer.text == "CHANGED\n")
    }

    @Test("a save as into a directory that now leads out sweeps nothing there (and writes nothing): outsideRoots; into one inside, it sweeps")
    func saveAsSweepsOnlyInside() async throws {
        let (store, handle, directory) = try await swapped()
        _ = try directory.write("out/.docsession-save-stale", "outside\n")
        await #expect(throws: DocumentError.save(.outsideRoots(path: directory.file("root/d/new.txt"), directory: directory.file("root/d")))) {
            _ = try await store.save(handle, to: directory.file("root/d/new.txt"))
        }
        #expect(FileManager.default.fileExists(atPath: directory.file("out/.docsession-save-stale")))
        #expect(!FileManager.default.fileExists(atPath: directory.file("out/new.txt")))
        _ = try directory.write("root/.docsession-save-stale", "inside\n")
        _ = try await store.save(handle, to: directory.file("root/new.txt"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("root/.docsession-save-stale")))
        #expect(try String(contentsOfFile: directory.file("root/new.txt"), encoding: .utf8) == "INSIDE\n")
    }

    @Test("a revert whose file now leads out reads nothing from there: outsideRoots, the text kept")
    func revert() async throws {
        let (store, handle, directory) = try await swapped()
        await #expect(throws: DocumentError.load(.outsideRoots(path: directory.file("root/d/f.txt")))) {
            _ = try await store.revert(handle)
        }
        #expect(try await store.document(handle).buffer.text == "INSIDE\n")
    }
}
