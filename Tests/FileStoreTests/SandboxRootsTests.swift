import CFileSystem
import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A tree for the sandbox tests, under a fresh temporary directory `base` (its real path):
///
///     base/root/a/file.txt                "inside"
///     base/root/a/deep/                   (empty)
///     base/root/linkAbsoluteInside        -> base/root/a/file.txt
///     base/root/linkRelativeInside        -> a/file.txt
///     base/root/linkAbsoluteOut           -> base/outside/secret.txt
///     base/root/a/linkRelativeOut         -> ../../outside/secret.txt
///     base/root/linkDirectoryOut          -> base/outside
///     base/root/linkDanglingInside        -> a/target.txt (missing)
///     base/root/loop1 -> loop2, loop2 -> loop1
///     base/outside/secret.txt             "outside"
///     base/realParent/root2/f.txt         "two"; base/linkParent -> realParent
private final class SandboxTree {
    let base: String
    var root: String { base + "/root" }
    var outside: String { base + "/outside" }

    init() {
        base = try! makeTemporaryDirectory(prefix: "sandboxroots")
        for directory in ["root", "root/a", "root/a/deep", "outside", "realParent", "realParent/root2"] {
            mkdir(base + "/" + directory, 0o755)
        }
        write("root/a/file.txt", "inside")
        write("outside/secret.txt", "outside")
        write("realParent/root2/f.txt", "two")
        link("root/linkAbsoluteInside", base + "/root/a/file.txt")
        link("root/linkRelativeInside", "a/file.txt")
        link("root/linkAbsoluteOut", base + "/outside/secret.txt")
        link("root/a/linkRelativeOut", "../../outside/secret.txt")
        link("root/linkDirectoryOut", base + "/outside")
        link("root/linkDanglingInside", "a/target.txt")
        link("root/loop1", "loop2")
        link("root/loop2", "loop1")
        link("linkParent", "realParent")
    }

    deinit { try? FileManager.default.removeItem(atPath: base) }

    func write(_ relative: String, _ text: String) {
        let fd = open(base + "/" + relative, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "open \(relative): \(errno)")
        let bytes = Array(text.utf8)
        precondition(Glibc.write(fd, bytes, bytes.count) == bytes.count)
        close(fd)
    }

    func link(_ relative: String, _ target: String) {
        precondition(symlink(target, base + "/" + relative) == 0, "symlink \(relative): \(errno)")
    }

    func roots(_ resolver: SandboxRoots.Resolver, _ paths: [String]? = nil) throws -> SandboxRoots {
        try SandboxRoots(paths ?? [root], resolver: resolver)
    }
}

/// The whole content of the file `path` opens (read-only).
private func contents(of path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = read(fd, &buffer, buffer.count)
    return count >= 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
}

/// The device and inode behind a descriptor, or a path (following symlinks).
private func fileID(descriptor: Int32) -> [UInt64] {
    var status = stat()
    precondition(fstat(descriptor, &status) == 0)
    return [UInt64(status.st_dev), UInt64(status.st_ino)]
}

private func fileID(path: String) -> [UInt64] {
    var status = stat()
    precondition(stat(path, &status) == 0)
    return [UInt64(status.st_dev), UInt64(status.st_ino)]
}

/// The refusal `body` throws, if it throws one.
private func refusal(_ body: () throws(SandboxError) -> ResolvedPath) -> SandboxError? {
    do throws(SandboxError) {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

private let resolvers: [SandboxRoots.Resolver] = [.openat2, .walk]

@Suite("SandboxRoots: paths resolved beneath the roots, with openat2 and with the walk")
struct SandboxRootsTests {
    @Test("holds(descriptor:) answers where an open descriptor is now: inside, outside, and after its directory moved out")
    func holdsDescriptor() throws {
        let tree = SandboxTree()
        let roots = try tree.roots(.openat2)
        let inside = open(tree.root + "/a", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let outside = open(tree.outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(inside); close(outside) }
        #expect(roots.holds(descriptor: inside))
        #expect(!roots.holds(descriptor: outside))
        // The same descriptor, once its directory has been moved out of the root, is outside.
        #expect(rename(tree.root + "/a", tree.outside + "/a") == 0)
        #expect(!roots.holds(descriptor: inside))
        // And a save guarded by it writes nothing there.
        let target = tree.outside + "/a/file.txt"
        #expect(throws: SaveError.outsideRoots(path: target, directory: tree.outside + "/a")) {
            try SafeSave.save(
                SafeSave.Request(path: target, expected: nil, force: true, directoryGuard: { roots.holds(descriptor: $0) })
            ) { (sink) throws(SaveError) in try sink.write(Array("written".utf8)) }
        }
        #expect(contents(of: target) == "inside")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tree.outside + "/a").allSatisfy { !$0.hasPrefix(".docsession") })
    }

    @Test("encloses answers by the recorded path's spelling: beneath a root (real or given spelling) or not, never through ‘..’")
    func enclosesRecordedPaths() throws {
        let tree = SandboxTree()
        let roots = try tree.roots(.openat2, [tree.root, tree.base + "/linkParent/root2"])
        #expect(roots.encloses(tree.root))
        #expect(roots.encloses(tree.root + "/a/file.txt"))
        #expect(roots.encloses(tree.root + "/gone/deleted.txt"))  // no file system access: a deleted file's path
        #expect(roots.encloses(tree.base + "/realParent/root2/f.txt"))
        #expect(roots.encloses(tree.base + "/linkParent/root2/f.txt"))
        #expect(!roots.encloses(tree.outside + "/secret.txt"))
        #expect(!roots.encloses(tree.root + "/../outside/secret.txt"))
        #expect(!roots.encloses(tree.root + "x/file.txt"))  // a sibling whose name starts like the root's
        #expect(!roots.encloses("relative/path"))
    }

    @Test("openat2 is available here and the C wrapper refuses an escape with EXDEV", .enabled(if: SandboxRoots.openat2Available))
    func openat2Wrapper() {
        let tree = SandboxTree()
        let rootFD = cfs_openat_path(AT_FDCWD, tree.root, O_DIRECTORY)
        defer { close(rootFD) }
        let inside = cfs_openat2_path(rootFD, "a/file.txt", 0, UInt64(CFS_RESOLVE_BENEATH))
        #expect(inside >= 0)
        close(inside)
        #expect(cfs_openat2_path(rootFD, "../outside/secret.txt", 0, UInt64(CFS_RESOLVE_BENEATH)) == -1 && errno == EXDEV)
        #expect(cfs_openat2_path(rootFD, "linkAbsoluteOut", 0, UInt64(CFS_RESOLVE_BENEATH)) == -1 && errno == EXDEV)
    }

    @Test("the openat2 fast path answers plain paths itself and leaves symlinks out and ‘..’ escapes to the walk", .enabled(if: SandboxRoots.openat2Available))
    func fastPath() throws {
        let tree = SandboxTree()
        let roots = try tree.roots(.openat2)
        let root = roots.roots[0]
        let plain = try roots.resolveWithOpenat2(root, ["a", "deep", "..", "file.txt"], path: "p", mustExist: true)
        #expect(plain?.realPath == tree.root + "/a/file.txt")
        let new = try roots.resolveWithOpenat2(root, ["a", "new.txt"], path: "p", mustExist: false)
        #expect(new?.exists == false && new?.realPath == tree.root + "/a/new.txt")
        #expect(try roots.resolveWithOpenat2(root, ["linkAbsoluteOut"], path: "p", mustExist: true) == nil)
        #expect(try roots.resolveWithOpenat2(root, ["linkDirectoryOut", "secret.txt"], path: "p", mustExist: true) == nil)
        #expect(try roots.resolveWithOpenat2(root, ["a", "..", "..", "outside", "secret.txt"], path: "p", mustExist: true) == nil)
        #expect(try roots.resolveWithOpenat2(root, ["loop1", "x"], path: "p", mustExist: true) == nil)
    }

    @Test("no descriptor outlives its resolution, refused or not", arguments: resolvers)
    func noLeaks(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver)
        let paths = ["/a/file.txt", "/a/new.txt", "/linkAbsoluteInside", "/linkAbsoluteOut", "/a/linkRelativeOut", "/a/../../x", "/loop1", "/a/deep", "/linkDanglingInside"]
        func openCount() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
        let before = openCount()
        for _ in 0..<100 {
            for path in paths {
                _ = try? roots.resolve(tree.root + path, mustExist: path.hasSuffix("new.txt") ? false : true)
                _ = try? roots.resolve(tree.root + path, mustExist: false)
            }
            _ = try? roots.narrowed(to: [tree.root + "/a", tree.outside])
        }
        // Other tests running meanwhile hold a few descriptors; a leak here would be thousands.
        #expect(openCount() - before < 100)
    }

    @Test("files and directories inside resolve to their real paths, pinned", arguments: resolvers)
    func inside(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver)
        #expect(roots.paths == [tree.root])

        let file = try roots.resolve(tree.root + "/a/file.txt", mustExist: true)
        #expect(file.realPath == tree.root + "/a/file.txt")
        #expect(file.exists && file.name == "file.txt")
        #expect(contents(of: file.procPath) == "inside")
        #expect(fileID(descriptor: file.descriptor!) == fileID(path: tree.root + "/a/file.txt"))
        #expect(fileID(descriptor: file.parentDescriptor!) == fileID(path: tree.root + "/a"))
        _ = try file.open(O_RDONLY)

        let spelled = try roots.resolve(tree.root + "//a/./deep/../file.txt", mustExist: true)
        #expect(spelled.realPath == tree.root + "/a/file.txt")

        let directory = try roots.resolve(tree.root + "/a/deep/", mustExist: true)
        #expect(directory.realPath == tree.root + "/a/deep")
        #expect(directory.name == "deep")
        #expect(fileID(descriptor: directory.parentDescriptor!) == fileID(path: tree.root + "/a"))

        let root = try roots.resolve(tree.root, mustExist: true)
        #expect(root.realPath == tree.root && root.parentDescriptor == nil)

        let missing = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/nothing.txt", mustExist: true) }
        #expect(missing?.kind == .fileSystem(FileSystemError(errno: ENOENT, syscall: "openat", path: tree.root + "/a/nothing.txt")))
        let fileAsDirectory = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/file.txt/x", mustExist: true) }
        if case .fileSystem(let error)? = fileAsDirectory?.kind { #expect(error.errno == ENOTDIR) } else { Issue.record("\(String(describing: fileAsDirectory))") }
        let slash = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/file.txt/", mustExist: true) }
        if case .fileSystem(let error)? = slash?.kind { #expect(error.errno == ENOTDIR) } else { Issue.record("\(String(describing: slash))") }
    }

    @Test("‘..’ out of the root, paths outside every root and relative paths are refused, precisely", arguments: resolvers)
    func escapes(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver)

        let dotDot = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/../../outside/secret.txt", mustExist: true) }
        #expect(dotDot == SandboxError(.outsideRoots, path: tree.root + "/a/../../outside/secret.txt", reason: "‘..’ leads out of root \(tree.root)"))
        let etc = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/../../../../../../etc/passwd", mustExist: true) }
        #expect(etc?.kind == .outsideRoots)

        let absolute = refusal { () throws(SandboxError) in try roots.resolve("/etc/passwd", mustExist: true) }
        #expect(absolute == SandboxError(.outsideRoots, path: "/etc/passwd", reason: "not inside any root (roots: \(tree.root))"))
        #expect(absolute?.message == "/etc/passwd is outside the roots: not inside any root (roots: \(tree.root))")
        // A sibling whose name begins like the root's is not inside it (components, not characters).
        let sibling = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "x/file", mustExist: true) }
        #expect(sibling?.kind == .outsideRoots)

        let relative = refusal { () throws(SandboxError) in try roots.resolve("root/a/file.txt", mustExist: true) }
        #expect(relative == SandboxError(.invalidPath, path: "root/a/file.txt", reason: "not an absolute path"))
        // ‘..’ that climbs out of one root is refused even when it comes back into another.
        let twoRoots = try tree.roots(resolver, [tree.root + "/a", tree.outside])
        let across = refusal { () throws(SandboxError) in try twoRoots.resolve(tree.root + "/a/../../outside/secret.txt", mustExist: true) }
        #expect(across == SandboxError(.outsideRoots, path: tree.root + "/a/../../outside/secret.txt", reason: "‘..’ leads out of root \(tree.root)/a"))
        // Nested roots: the outermost is tried first, so a ‘..’ inside it is fine.
        let nested = try tree.roots(resolver, [tree.root + "/a", tree.root])
        #expect(try nested.resolve(tree.root + "/a/../a/file.txt", mustExist: true).realPath == tree.root + "/a/file.txt")
    }

    @Test("symlinks pointing out are refused naming link and target; pointing inside, followed", arguments: resolvers)
    func symlinks(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver)
        let file = fileID(path: tree.root + "/a/file.txt")

        let absoluteOut = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/linkAbsoluteOut", mustExist: true) }
        #expect(absoluteOut == SandboxError(.outsideRoots, path: tree.root + "/linkAbsoluteOut", reason: "symlink \(tree.root)/linkAbsoluteOut points to \(tree.outside)/secret.txt, outside the roots"))
        let relativeOut = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/linkRelativeOut", mustExist: true) }
        #expect(relativeOut == SandboxError(.outsideRoots, path: tree.root + "/a/linkRelativeOut", reason: "symlink \(tree.root)/a/linkRelativeOut points to ../../outside/secret.txt, which leads out of root \(tree.root)"))
        let throughDirectory = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/linkDirectoryOut/secret.txt", mustExist: true) }
        #expect(throughDirectory?.kind == .outsideRoots)

        for link in ["linkAbsoluteInside", "linkRelativeInside"] {
            let resolved = try roots.resolve(tree.root + "/" + link, mustExist: true)
            #expect(resolved.realPath == tree.root + "/a/file.txt")
            #expect(resolved.name == "file.txt")
            #expect(fileID(descriptor: resolved.descriptor!) == file)
            #expect(contents(of: resolved.procPath) == "inside")
        }

        let loop = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/loop1", mustExist: true) }
        guard case .fileSystem(let error)? = loop?.kind else {
            Issue.record("a loop resolved or was refused otherwise: \(String(describing: loop))")
            return
        }
        #expect(error.errno == ELOOP && error.code == "ELOOP")
        #expect(error.message.contains("more than 40 symbolic links"))
        #expect(error.message.contains("a symlink loop"))
    }

    @Test("a root given through a symlinked parent answers to both spellings; renaming its parent later changes nothing", arguments: resolvers)
    func symlinkedParent(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver, [tree.base + "/linkParent/root2"])
        #expect(roots.paths == [tree.base + "/realParent/root2"])
        for spelling in [tree.base + "/linkParent/root2/f.txt", tree.base + "/realParent/root2/f.txt"] {
            let resolved = try roots.resolve(spelling, mustExist: true)
            #expect(resolved.realPath == tree.base + "/realParent/root2/f.txt")
            #expect(contents(of: resolved.procPath) == "two")
        }
        // Point the spelling's parent elsewhere: the root stays the directory opened at init.
        #expect(rename(tree.base + "/realParent", tree.base + "/movedParent") == 0)
        #expect(mkdir(tree.base + "/realParent", 0o755) == 0)
        mkdir(tree.base + "/realParent/root2", 0o755)
        tree.write("realParent/root2/f.txt", "impostor")
        let resolved = try roots.resolve(tree.base + "/linkParent/root2/f.txt", mustExist: true)
        #expect(contents(of: resolved.procPath) == "two")
        #expect(resolved.realPath == tree.base + "/movedParent/root2/f.txt")
    }

    @Test("mustExist false: a new name inside; refused through a symlinked directory out or an existing final symlink out", arguments: resolvers)
    func creation(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        let roots = try tree.roots(resolver)

        let new = try roots.resolve(tree.root + "/a/new.txt", mustExist: false)
        #expect(!new.exists && new.name == "new.txt")
        #expect(new.realPath == tree.root + "/a/new.txt")
        #expect(new.procPath == "/proc/self/fd/\(new.parentDescriptor!)/new.txt")
        let made = try new.open(O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        #expect(Glibc.write(made.rawValue, "made", 4) == 4)
        try made.close()
        #expect(contents(of: tree.root + "/a/new.txt") == "made")

        // An existing file resolves as with mustExist.
        let existing = try roots.resolve(tree.root + "/a/file.txt", mustExist: false)
        #expect(existing.exists && existing.realPath == tree.root + "/a/file.txt")
        // A dangling symlink inside: its target is what a save creates.
        let dangling = try roots.resolve(tree.root + "/linkDanglingInside", mustExist: false)
        #expect(!dangling.exists && dangling.realPath == tree.root + "/a/target.txt")
        #expect(dangling.name == "target.txt")
        #expect(fileID(descriptor: dangling.parentDescriptor!) == fileID(path: tree.root + "/a"))

        let parentOut = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/linkDirectoryOut/new.txt", mustExist: false) }
        #expect(parentOut == SandboxError(.outsideRoots, path: tree.root + "/linkDirectoryOut/new.txt", reason: "symlink \(tree.root)/linkDirectoryOut points to \(tree.outside), outside the roots"))
        let finalOut = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/linkAbsoluteOut", mustExist: false) }
        #expect(finalOut?.kind == .outsideRoots)
        let finalRelativeOut = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/a/linkRelativeOut", mustExist: false) }
        #expect(finalRelativeOut?.kind == .outsideRoots)

        for bad in [tree.root + "/a/", tree.root + "/a/.", tree.root + "/a/.."] {
            let refused = refusal { () throws(SandboxError) in try roots.resolve(bad, mustExist: false) }
            #expect(refused?.kind == .invalidPath)
        }
        let noParent = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/nowhere/new.txt", mustExist: false) }
        if case .fileSystem(let error)? = noParent?.kind { #expect(error.errno == ENOENT) } else { Issue.record("\(String(describing: noParent))") }
    }

    @Test("narrowed: a subdirectory (or a symlink to one) inside is accepted; a directory outside or a file is refused", arguments: resolvers)
    func narrowing(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        tree.link("root/linkToA", "a")
        let roots = try tree.roots(resolver)

        let narrow = try roots.narrowed(to: [tree.root + "/a"])
        #expect(narrow.paths == [tree.root + "/a"])
        #expect(narrow.resolver == resolver)
        #expect(try narrow.resolve(tree.root + "/a/file.txt", mustExist: true).realPath == tree.root + "/a/file.txt")
        let wider = refusal { () throws(SandboxError) in try narrow.resolve(tree.root + "/linkRelativeInside", mustExist: true) }
        #expect(wider?.kind == .outsideRoots)

        let throughLink = try roots.narrowed(to: [tree.root + "/linkToA"])
        #expect(throughLink.paths == [tree.root + "/a"])
        #expect(try throughLink.resolve(tree.root + "/linkToA/file.txt", mustExist: true).realPath == tree.root + "/a/file.txt")

        #expect(throws: SandboxError.self) { try roots.narrowed(to: [tree.outside]) }
        do {
            _ = try roots.narrowed(to: [tree.root + "/a", tree.outside])
            Issue.record("narrowed to a directory outside")
        } catch {
            #expect(error == SandboxError(.outsideRoots, path: tree.outside, reason: "not inside any root (roots: \(tree.root))"))
        }
        do {
            _ = try roots.narrowed(to: [tree.root + "/a/file.txt"])
            Issue.record("narrowed to a file")
        } catch {
            if case .fileSystem(let failure) = error.kind { #expect(failure.errno == ENOTDIR) } else { Issue.record("\(error)") }
        }
    }

    @Test("roots must be absolute paths to existing directories")
    func rootsMustBeDirectories() {
        let tree = SandboxTree()
        #expect(throws: FileSystemError.self) { try SandboxRoots(["relative/dir"]) }
        #expect(throws: FileSystemError.self) { try SandboxRoots([tree.root + "/a/file.txt"]) }
        #expect(throws: FileSystemError.self) { try SandboxRoots([tree.root, tree.base + "/missing"]) }
        #expect((try? SandboxRoots([tree.root, tree.root, tree.root + "/a"]))?.paths == [tree.root, tree.root, tree.root + "/a"])
    }

    /// A thread that keeps exchanging `root/swap` (a real directory holding file.txt "inside")
    /// with `root/swap.tmp` (a symlink to the outside directory, holding file.txt "outside").
    private final class Swapper: Sendable {
        let stop = Atomic<Bool>(false)
        let swaps = Atomic<Int>(0)
        let done = Atomic<Bool>(false)

        func run(_ root: String) {
            Thread.detachNewThread { [self] in
                while !stop.load(ordering: .relaxed) {
                    // RENAME_EXCHANGE (2): both names always exist; swap is a directory or a symlink.
                    if cfs_renameat2(AT_FDCWD, root + "/swap", AT_FDCWD, root + "/swap.tmp", 2) == 0 {
                        swaps.add(1, ordering: .relaxed)
                    }
                }
                done.store(true, ordering: .releasing)
            }
        }

        func finish() {
            stop.store(true, ordering: .relaxed)
            while !done.load(ordering: .acquiring) { usleep(100) }
        }
    }

    private func prepareSwap(_ tree: SandboxTree) {
        mkdir(tree.root + "/swap", 0o755)
        tree.write("root/swap/file.txt", "inside")
        tree.write("outside/file.txt", "outside")
        tree.link("root/swap.tmp", tree.outside)
    }

    @Test("a component swapped with a symlink out, thousands of times during resolution: nothing ever escapes", arguments: resolvers)
    func race(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        prepareSwap(tree)
        let insideFile = fileID(path: tree.root + "/swap/file.txt")
        let outsideFile = fileID(path: tree.outside + "/file.txt")
        // And a relative link out, for the kernel's ‘..’ checks.
        #expect(unlink(tree.root + "/swap.tmp") == 0)
        tree.link("root/swap.tmp", "../outside")
        let roots = try tree.roots(resolver)
        let swapper = Swapper()
        swapper.run(tree.root)
        var succeeded = 0
        var refused = 0
        var escaped: [String] = []
        for index in 0..<4000 {
            let mustExist = index % 2 == 0
            do {
                let resolved = try roots.resolve(tree.root + "/swap/file.txt", mustExist: mustExist)
                succeeded += 1
                let id = fileID(descriptor: resolved.descriptor ?? resolved.parentDescriptor!)
                let real = SandboxRoots.descriptorPath(resolved.descriptor ?? resolved.parentDescriptor!) ?? ""
                if id == outsideFile || id == fileID(path: tree.outside) || !real.hasPrefix(tree.root + "/") {
                    escaped.append("\(real) \(id)")
                } else if resolved.exists && id != insideFile {
                    escaped.append("another file: \(real) \(id)")
                }
            } catch {
                refused += 1
                if case .fileSystem(let failure) = error.kind, failure.errno != ENOENT && failure.errno != ENOTDIR {
                    Issue.record("unexpected refusal: \(error)")
                }
            }
        }
        swapper.finish()
        #expect(escaped.isEmpty, "\(escaped.prefix(5))")
        // How many succeeded and how many were refused depends on timing; only escapes count.
        #expect(succeeded + refused == 4000)
    }

    @Test("the procPath of a resolution acts on the pinned object after the component was swapped for a symlink out", arguments: resolvers)
    func pinnedAfterSwap(_ resolver: SandboxRoots.Resolver) throws {
        let tree = SandboxTree()
        prepareSwap(tree)
        let roots = try tree.roots(resolver)
        let file = try roots.resolve(tree.root + "/swap/file.txt", mustExist: true)
        let created = try roots.resolve(tree.root + "/swap/created.txt", mustExist: false)
        #expect(cfs_renameat2(AT_FDCWD, tree.root + "/swap", AT_FDCWD, tree.root + "/swap.tmp", 2) == 0)
        #expect(contents(of: tree.root + "/swap/file.txt") == "outside")

        #expect(contents(of: file.procPath) == "inside")
        _ = try created.open(O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        #expect(access(tree.root + "/swap.tmp/created.txt", F_OK) == 0)
        #expect(access(tree.outside + "/created.txt", F_OK) != 0)
        // A new resolution through the swapped component is refused.
        let now = refusal { () throws(SandboxError) in try roots.resolve(tree.root + "/swap/file.txt", mustExist: true) }
        #expect(now?.kind == .outsideRoots)
    }
}
