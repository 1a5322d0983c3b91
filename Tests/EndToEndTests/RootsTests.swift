import Foundation
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sandbox roots over stdio (protocol §11.1): `--root DIR` and `initializationOptions.roots`; every
/// path of `document/open`, `document/create` and `document/save` beneath a root, whatever `..`, a
/// symlink or a rename racing with the request does; without roots, the user's permissions only.
@Suite("Sandbox roots over stdio")
struct RootsTests {
    /// A root `r/` and a directory `out/` beside it, in a fresh directory:
    ///
    ///     r/a.txt            "inside\n"
    ///     r/sub/b.txt        "sub\n"
    ///     r/relout           -> ../out/secret.txt      (relative, to a file outside)
    ///     r/absout           -> OUT/secret.txt         (absolute, to a file outside)
    ///     r/reldir           -> ../out                 (relative, to a directory outside)
    ///     r/absdir           -> OUT                    (absolute, to a directory outside)
    ///     r/relin            -> a.txt                  (relative, inside)
    ///     r/absin            -> R/a.txt                (absolute, inside)
    ///     r/sublink          -> sub                    (a directory inside)
    ///     out/secret.txt     "outside\n"
    final class Layout {
        let directory: TemporaryDirectory
        let root: String
        let out: String

        init() throws {
            directory = try TemporaryDirectory(prefix: "docsession-e2e")
            root = directory.file("r")
            out = directory.file("out")
            for made in [root, out, root + "/sub"] { try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: false) }
            try directory.write("r/a.txt", "inside\n")
            try directory.write("r/sub/b.txt", "sub\n")
            try directory.write("out/secret.txt", "outside\n")
            let links = [
                ("relout", "../out/secret.txt"), ("absout", out + "/secret.txt"), ("reldir", "../out"), ("absdir", out),
                ("relin", "a.txt"), ("absin", root + "/a.txt"), ("sublink", "sub"),
            ]
            for (name, target) in links { try symlink(target, root + "/" + name) }
        }

        func symlink(_ target: String, _ at: String) throws {
            guard Glibc.symlink(target, at) == 0 else { throw E2EError("symlink \(at): errno \(errno)") }
        }

        func text(_ path: String) -> String? { FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } }

        /// The names in `out/`, which no request may add to or change.
        var outNames: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).sorted() }

        /// A session serving with `--root r` (and `extra` arguments), initialized.
        func session(_ extra: [String] = [], initialize params: JSONValue? = nil) throws -> Session {
            let session = try Session(["--root", root] + extra)
            let result = try session.initialize(params)
            if params == nil { #expect(result["capabilities"]?["roots"] == [.string(fileURI(root))]) }
            return session
        }
    }

    /// Checks a -32022 answer: `data` names the field, the path as asked, a reason, and the roots.
    @discardableResult
    func expectOutside(
        _ session: Session, _ method: String, _ params: JSONValue, field: String, uri: String? = nil, roots: [String],
        reason: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let error = try session.callFailing(method, params, code: -32022, sourceLocation: sourceLocation)
        let data = error["data"]
        #expect(data?["field"] == .string(field), "\(error.jsonText)", sourceLocation: sourceLocation)
        if let uri { #expect(data?["uri"] == .string(uri), "\(error.jsonText)", sourceLocation: sourceLocation) }
        #expect(data?["roots"] == .array(roots.map { .string(fileURI($0)) }), "\(error.jsonText)", sourceLocation: sourceLocation)
        #expect(data?["reason"]?.stringValue?.isEmpty == false, "\(error.jsonText)", sourceLocation: sourceLocation)
        if let reason {
            #expect(data?["reason"]?.stringValue?.contains(reason) == true, "\(error.jsonText)", sourceLocation: sourceLocation)
        }
        #expect(error["message"]?.stringValue?.hasPrefix(field + ": ") == true, "\(error.jsonText)", sourceLocation: sourceLocation)
        return error
    }

    // MARK: - Refusals

    @Test("document/open: `..`, an absolute path outside, and symlinks pointing out (relative and absolute, to a file and to a directory) are -32022")
    func openRefusals() throws {
        let layout = try Layout()
        let session = try layout.session()
        let root = layout.root
        let refused: [(String, String)] = [
            (root + "/../out/secret.txt", "‘..’ leads out of root"),
            (root + "/sub/../../out/secret.txt", "‘..’ leads out of root"),
            (root + "/..", "‘..’ leads out of root"),
            (layout.out + "/secret.txt", "not inside any root"),
            ("/etc/passwd", "not inside any root"),
            (root + "/relout", "symlink \(root)/relout points to ../out/secret.txt"),
            (root + "/absout", "symlink \(root)/absout points to \(layout.out)/secret.txt, outside the roots"),
            (root + "/reldir/secret.txt", "symlink \(root)/reldir points to ../out"),
            (root + "/absdir/secret.txt", "symlink \(root)/absdir points to \(layout.out), outside the roots"),
            (root + "/sublink/../../out/secret.txt", "leads out of root"),
        ]
        for (path, reason) in refused {
            try expectOutside(
                session, "document/open", ["uri": .string(fileURI(path))], field: "params.uri", uri: fileURI(path), roots: [root], reason: reason)
        }
        // Nothing was opened: the first document opened now is d1.
        let opened = try session.open(root + "/a.txt")
        #expect(opened["document"] == "d1")
        try session.shutdownAndExit()
    }

    @Test("symlinks inside pointing inside (relative, absolute, to a directory) and `..` that stays inside are followed")
    func insideLinksAllowed() throws {
        let layout = try Layout()
        let session = try layout.session()
        let root = layout.root
        for path in [root + "/relin", root + "/absin", root + "/sub/../a.txt", root + "/sublink/../a.txt"] {
            let info = try session.open(path)
            // One file: the document of a.txt, under its own uri.
            #expect(info["document"] == "d1", "\(path)")
            #expect(info["uri"] == .string(fileURI(root + "/a.txt")), "\(path)")
            #expect(info["text"] == "inside\n", "\(path)")
        }
        let sub = try session.open(root + "/sublink/b.txt")
        #expect(sub["text"] == "sub\n")
        #expect(sub["uri"] == .string(fileURI(root + "/sub/b.txt")))
        // The root itself, spelt with a trailing `/.`, is a directory: not a document, but not outside.
        try session.callFailing("document/open", ["uri": .string(fileURI(root + "/."))], code: -32016)
        try session.shutdownAndExit()
    }

    @Test("document/create and save-as outside the roots are -32022 and write nothing")
    func createAndSaveAsOutside() throws {
        let layout = try Layout()
        let session = try layout.session()
        let root = layout.root
        let before = layout.outNames
        for path in [layout.out + "/new.txt", root + "/../out/new.txt", root + "/reldir/new.txt", root + "/absdir/new.txt"] {
            try expectOutside(session, "document/create", ["uri": .string(fileURI(path)), "text": "x"], field: "params.uri", roots: [root])
        }
        for path in [layout.out, root + "/reldir", root + "/absdir", root + "/.."] {
            try expectOutside(
                session, "document/create", ["directory": .string(fileURI(path)), "naming": ["prefix": "Note"]], field: "params.directory",
                roots: [root])
        }
        let info = try session.open(root + "/a.txt")
        let handle = try #require(info["document"])
        try session.edit("d1", version: 1, [Edit(whole: "edited\n")])
        for path in [layout.out + "/x.txt", root + "/../out/x.txt", root + "/reldir/x.txt", root + "/absdir/x.txt", root + "/relout", root + "/absout"] {
            try expectOutside(session, "document/save", ["document": handle, "to": .string(fileURI(path)), "force": true], field: "params.to", roots: [root])
        }
        #expect(layout.outNames == before)
        #expect(layout.text(layout.out + "/secret.txt") == "outside\n")
        #expect(layout.text(root + "/a.txt") == "inside\n")
        // Inside, save-as and create work (a new file beside the others).
        let saved = try session.call("document/save", ["document": handle, "to": .string(fileURI(root + "/sub/copy.txt"))])
        #expect(saved["uri"] == .string(fileURI(root + "/sub/copy.txt")))
        #expect(layout.text(root + "/sub/copy.txt") == "edited\n")
        let created = try session.call("document/create", ["uri": .string(fileURI(root + "/sublink/new.txt")), "text": "new"])
        #expect(created["uri"] == .string(fileURI(root + "/sub/new.txt")))
        #expect(layout.text(root + "/sub/new.txt") == "new")
        try session.shutdownAndExit()
    }

    @Test("document/create never follows a symlink at the new file's name, even a dangling one pointing inside")
    func createDoesNotFollowFinalSymlink() throws {
        let layout = try Layout()
        try layout.symlink("not-yet.txt", layout.root + "/dangling")
        try layout.symlink(layout.out + "/not-yet.txt", layout.root + "/dangling-out")
        let session = try layout.session()
        for name in ["dangling", "dangling-out", "relin", "relout"] {
            let path = layout.root + "/" + name
            let error = try session.callFailing("document/create", ["uri": .string(fileURI(path)), "text": "x"], code: -32013)
            #expect(error["data"]?["uri"] == .string(fileURI(path)))
        }
        #expect(!FileManager.default.fileExists(atPath: layout.root + "/not-yet.txt"))
        #expect(!FileManager.default.fileExists(atPath: layout.out + "/not-yet.txt"))
        try session.shutdownAndExit()
    }

    @Test("without --root the same paths are allowed (the user's own permissions apply); capabilities.roots is null")
    func withoutRootsAllowed() throws {
        let layout = try Layout()
        let session = try Session()
        let result = try session.initialize()
        #expect(result["capabilities"]?["roots"] == .null)
        let root = layout.root
        for path in [root + "/../out/secret.txt", root + "/relout", root + "/absout", root + "/reldir/secret.txt", root + "/absdir/secret.txt"] {
            let info = try session.open(path)
            #expect(info["text"] == "outside\n", "\(path)")
            try session.call("document/close", ["document": info["document"]!])
        }
        let created = try session.call("document/create", ["uri": .string(fileURI(root + "/reldir/new.txt")), "text": "n"])
        #expect(layout.text(layout.out + "/new.txt") == "n")
        try session.call("document/save", ["document": created["document"]!, "to": .string(fileURI(root + "/absdir/copy.txt"))])
        #expect(layout.text(layout.out + "/copy.txt") == "n")
        let named = try session.call("document/create", ["directory": .string(fileURI(root + "/reldir")), "naming": ["prefix": "Note"]])
        #expect(named["displayName"] == "Note 1")
        #expect(FileManager.default.fileExists(atPath: layout.out + "/Note 1"))
        try session.shutdownAndExit()
    }

    // MARK: - initialize

    @Test("initializationOptions.roots narrows the server's roots: inside is taken and reported, outside is -32022, empty is -32602")
    func initializeNarrowing() throws {
        let layout = try Layout()
        let root = layout.root
        // Inside: the new roots are reported (canonical, through the symlink) and enforced.
        do {
            let session = try Session(["--root", root])
            let result = try session.initialize(["initializationOptions": ["roots": [.string(fileURI(root + "/sublink"))]]])
            #expect(result["capabilities"]?["roots"] == [.string(fileURI(root + "/sub"))])
            #expect(try session.open(root + "/sub/b.txt")["text"] == "sub\n")
            try expectOutside(session, "document/open", ["uri": .string(fileURI(root + "/a.txt"))], field: "params.uri", roots: [root + "/sub"])
            try expectOutside(session, "document/open", ["uri": .string(fileURI(root + "/sub/../a.txt"))], field: "params.uri", roots: [root + "/sub"])
            try session.shutdownAndExit()
        }
        // Outside, through `..`, or through a symlink out: -32022, and the server stays
        // uninitialized (a corrected initialize is taken).
        do {
            let session = try Session(["--root", root])
            for outside in [layout.out, root + "/..", root + "/reldir"] {
                let error = try expectOutside(
                    session, "initialize", ["initializationOptions": ["roots": [.string(fileURI(root + "/sub")), .string(fileURI(outside))]]],
                    field: "params.initializationOptions.roots", uri: fileURI(outside), roots: [root])
                _ = error
            }
            try session.callFailing("document/open", ["uri": .string(fileURI(root + "/a.txt"))], code: -32002)
            let result = try session.initialize(["initializationOptions": ["roots": [.string(fileURI(root + "/sub")), .string(fileURI(root))]]])
            #expect(result["capabilities"]?["roots"] == [.string(fileURI(root + "/sub")), .string(fileURI(root))])
            #expect(try session.open(root + "/a.txt")["text"] == "inside\n")
            try session.shutdownAndExit()
        }
        // Empty: -32602; not a list of file URIs: -32602 naming the entry; a missing directory: -32010.
        do {
            let session = try Session(["--root", root])
            try session.callInvalid("initialize", ["initializationOptions": ["roots": []]], field: "params.initializationOptions.roots")
            try session.callInvalid("initialize", ["initializationOptions": ["roots": "file:///tmp"]], field: "params.initializationOptions.roots")
            try session.callInvalid(
                "initialize", ["initializationOptions": ["roots": [.string(fileURI(root)), "relative/dir"]]],
                field: "params.initializationOptions.roots[1]")
            try session.callFailing("initialize", ["initializationOptions": ["roots": [.string(fileURI(root + "/missing"))]]], code: -32010)
            try session.callFailing("initialize", ["initializationOptions": ["roots": [.string(fileURI(root + "/a.txt"))]]], code: -32010)
            let result = try session.initialize()
            #expect(result["capabilities"]?["roots"] == [.string(fileURI(root))])
            try session.shutdownAndExit()
        }
        // Without --root, the client's list becomes the roots.
        do {
            let session = try Session()
            let result = try session.initialize(["initializationOptions": ["roots": [.string(fileURI(layout.out))]]])
            #expect(result["capabilities"]?["roots"] == [.string(fileURI(layout.out))])
            #expect(try session.open(layout.out + "/secret.txt")["text"] == "outside\n")
            try expectOutside(session, "document/open", ["uri": .string(fileURI(root + "/a.txt"))], field: "params.uri", roots: [layout.out])
            try session.shutdownAndExit()
        }
    }

    // MARK: - The command line

    @Test("--root that is missing or not a directory: exit status 64 with a message on stderr; a relative one is taken from the current directory")
    func serverRootArguments() throws {
        let layout = try Layout()
        for bad in [layout.root + "/missing", layout.root + "/a.txt", "relative/missing-\(getpid())"] {
            let run = try RawRun.run(["--root", bad], input: framed(requestText(id: 1, method: "initialize", params: [:])))
            #expect(run.status == 64, "\(bad): \(run.stderr)")
            #expect(run.stderr.contains("--root"), "\(bad): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(bad): nothing is served")
        }
        // A relative root names a directory of the current directory (the server's is the test's).
        let cwd = FileManager.default.currentDirectoryPath
        let relative = "Sources"
        if FileManager.default.fileExists(atPath: cwd + "/" + relative) {
            let session = try Session(["--root", relative, "--root", layout.root])
            let result = try session.initialize()
            let real = URL(fileURLWithPath: cwd + "/" + relative).resolvingSymlinksInPath().path
            #expect(result["capabilities"]?["roots"] == [.string(fileURI(real)), .string(fileURI(layout.root))])
            try session.shutdownAndExit()
        }
    }

    // MARK: - Races

    /// Swaps two names atomically (renameat2 RENAME_EXCHANGE), or, where that is missing, with
    /// three renames through a temporary name.
    static func exchange(_ a: String, _ b: String) {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        struct Holder { nonisolated(unsafe) static let function: RenameAt2? = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: RenameAt2.self) } }
        if let function = Holder.function, function(AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */) == 0 { return }
        let temporary = a + ".swap"
        rename(a, temporary)
        rename(b, a)
        rename(temporary, b)
    }

    /// A thread swapping `a` and `b` until stopped; answers how many swaps it made.
    final class Swapper: @unchecked Sendable {
        private let lock = NSLock()
        private var stopped = false
        private var swaps = 0
        private let done = DispatchSemaphore(value: 0)

        init(_ a: String, _ b: String) {
            Thread.detachNewThread { [self] in
                while !lock.withLock({ stopped }) {
                    RootsTests.exchange(a, b)
                    lock.withLock { swaps += 1 }
                }
                done.signal()
            }
        }

        func stop() -> Int {
            lock.withLock { stopped = true }
            done.wait()
            return lock.withLock { swaps }
        }
    }

    @Test("a directory swapped again and again with a symlink out while 300 opens go through it: every open that succeeds has the inside file's text")
    func swapRaceOnOpen() throws {
        let layout = try Layout()
        let root = layout.root
        try FileManager.default.createDirectory(atPath: root + "/d", withIntermediateDirectories: false)
        try layout.directory.write("r/d/f.txt", "INSIDE\n")
        try layout.directory.write("out/f.txt", "OUTSIDE\n")
        try layout.symlink(layout.out, root + "/swap")
        let session = try layout.session(["--no-watch"])
        let swapper = Swapper(root + "/d", root + "/swap")
        var opened = 0
        var refused = 0
        var leaked: [String] = []
        var other: [String] = []
        for _ in 0..<300 {
            let response = try session.request("document/open", ["uri": .string(fileURI(root + "/d/f.txt"))])
            if let result = response["result"] {
                opened += 1
                if result["text"] != "INSIDE\n" { leaked.append(result.jsonText) }
                try session.call("document/close", ["document": result["document"]!])
            } else if response["error"]?["code"] == -32022 {
                refused += 1
            } else if response["error"]?["code"] != -32010 {
                // ENOENT while the three-rename fallback has the name away; nothing else.
                other.append(response.jsonText)
            }
        }
        let swaps = swapper.stop()
        #expect(leaked.isEmpty, "opened the outside file: \(leaked.prefix(3))")
        #expect(other.isEmpty, "unexpected answers: \(other.prefix(3))")
        #expect(swaps > 0)
        #expect(opened + refused > 0)
        #expect(layout.text(layout.out + "/f.txt") == "OUTSIDE\n")
        try session.shutdownAndExit()
    }

    @Test("a save, save-as or revert after the document's directory was swapped for a symlink out is -32022 and writes nothing outside")
    func saveAfterSwap() throws {
        let layout = try Layout()
        let root = layout.root
        try FileManager.default.createDirectory(atPath: root + "/d", withIntermediateDirectories: false)
        try layout.directory.write("r/d/f.txt", "INSIDE\n")
        try layout.directory.write("out/f.txt", "OUTSIDE\n")
        let session = try layout.session(["--no-watch"])
        let info = try session.open(root + "/d/f.txt")
        let handle = try #require(info["document"])
        try session.edit("d1", version: 1, [Edit(whole: "CHANGED\n")])
        let before = layout.outNames
        // The directory moves away and a symlink out takes its name.
        #expect(rename(root + "/d", root + "/d.moved") == 0)
        try layout.symlink(layout.out, root + "/d")
        try expectOutside(session, "document/save", ["document": handle], field: "params.document", uri: fileURI(root + "/d/f.txt"), roots: [root])
        try expectOutside(session, "document/save", ["document": handle, "force": true], field: "params.document", roots: [root])
        try expectOutside(session, "document/save", ["document": handle, "to": .string(fileURI(root + "/d/g.txt"))], field: "params.to", roots: [root])
        try expectOutside(session, "document/revert", ["document": handle], field: "params.document", roots: [root])
        // Closing saves first (save "ifChanged", the default): refused too, the document stays open.
        try expectOutside(session, "document/close", ["document": handle], field: "params.document", roots: [root])
        try expectOutside(session, "document/close", ["document": handle, "save": "ifChanged"], field: "params.document", roots: [root])
        #expect(layout.outNames == before)
        #expect(layout.text(layout.out + "/f.txt") == "OUTSIDE\n")
        #expect(layout.text(root + "/d.moved/f.txt") == "INSIDE\n")
        // The document still holds its edits; with the directory back, the save goes through.
        #expect(unlink(root + "/d") == 0)
        #expect(rename(root + "/d.moved", root + "/d") == 0)
        let (text, _) = try session.read("d1")
        #expect(text == "CHANGED\n")
        try session.call("document/save", ["document": handle])
        #expect(layout.text(root + "/d/f.txt") == "CHANGED\n")
        #expect(layout.text(layout.out + "/f.txt") == "OUTSIDE\n")
        try session.shutdownAndExit()
    }

    @Test("an autosave after the document's directory was swapped for a symlink out writes nothing outside: saveFailed with the -32022 detail")
    func autosaveAfterSwap() throws {
        let layout = try Layout()
        let root = layout.root
        try FileManager.default.createDirectory(atPath: root + "/d", withIntermediateDirectories: false)
        try layout.directory.write("r/d/f.txt", "INSIDE\n")
        try layout.directory.write("out/f.txt", "OUTSIDE\n")
        // Unwatched: the watcher would follow the moved directory (and the document with it).
        let session = try layout.session(
            ["--no-watch"], initialize: ["initializationOptions": ["autosave": ["policy": "afterDelay", "delay": 300]]])
        _ = try session.open(root + "/d/f.txt")
        #expect(rename(root + "/d", root + "/d.moved") == 0)
        try layout.symlink(layout.out, root + "/d")
        // The edit starts the autosave's delay; the swap is already in place when it fires.
        try session.edit("d1", version: 1, [Edit(whole: "CHANGED\n")])
        var failed: JSONValue? = nil
        let deadline = ContinuousClock.now + .seconds(10)
        while failed == nil, ContinuousClock.now < deadline {
            failed = try session.takeStateChanges(atLeast: 1).first { $0["params"]?["reason"] == "saveFailed" }
        }
        let params = try #require(failed?["params"], "no saveFailed after the autosave")
        #expect(params["autosave"] == true)
        #expect(params["error"]?["code"] == "outsideRoots", "\(params.jsonText)")
        #expect(layout.text(layout.out + "/f.txt") == "OUTSIDE\n")
        #expect(layout.text(root + "/d.moved/f.txt") == "INSIDE\n")
        #expect(layout.outNames == ["f.txt", "secret.txt"])
        try session.shutdownAndExit()
    }
}
