import CFileSystem
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Why a path was refused by ``SandboxRoots``: the path asked for and a sentence saying precisely
/// why, for the server's error answer.
public struct SandboxError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The path, or a `..` or a symlink on its way, leads outside every root.
        case outsideRoots
        /// The path cannot be resolved at all: not absolute, a NUL byte, or (to create a file) a
        /// last component that is not a name.
        case invalidPath
        /// A system call failed on the way: a missing component (`ENOENT`), a file used as a
        /// directory (`ENOTDIR`), a symlink loop (`ELOOP`), a permission (`EACCES`), ...
        case fileSystem(FileSystemError)
    }

    public var kind: Kind
    /// The path as the request gave it.
    public var path: String
    /// Why, without the path: "‘..’ leads out of root /srv/docs", "symlink /srv/docs/link points
    /// to /etc/passwd, outside the roots", "not an absolute path", or a ``FileSystemError``'s message.
    public var reason: String

    public init(_ kind: Kind, path: String, reason: String) {
        self.kind = kind
        self.path = path
        self.reason = reason
    }

    /// A sentence naming the path and the reason.
    public var message: String {
        switch kind {
        case .outsideRoots: "\(path) is outside the roots: \(reason)"
        case .invalidPath: "\(path) is not a valid path: \(reason)"
        case .fileSystem: reason
        }
    }

    public var description: String { message }

    static func fileSystem(_ error: FileSystemError, path: String) -> SandboxError {
        SandboxError(.fileSystem(error), path: path, reason: error.message)
    }

    static func fileSystem(errno number: Int32, syscall: String, path: String, subject: String? = nil, reason: String? = nil) -> SandboxError {
        fileSystem(FileSystemError(errno: number, syscall: syscall, path: subject ?? path, reason: reason), path: path)
    }
}

/// What ``SandboxRoots/resolve(_:mustExist:)`` found: the object pinned by an `O_PATH` descriptor
/// (or, for a file to create, its directory pinned and its name), so that later operations act on
/// exactly what was checked, whatever is renamed or replaced meanwhile.
///
/// The descriptors belong to this object (owned `Descriptor`s) and are closed when it goes away:
/// keep it alive for as long as ``procPath`` or the descriptors' numbers are used. `O_PATH`
/// descriptors neither read nor write; reopen the object with ``open(_:mode:)`` (or open
/// ``procPath`` yourself).
public final class ResolvedPath: Sendable {
    /// The canonical absolute path of the object (of its directory plus ``name`` when it does not
    /// exist yet), as the kernel names the pinned descriptor at resolution time.
    public let realPath: String
    /// The object's `O_PATH` descriptor (see ``descriptor``).
    private let object: Descriptor?
    /// Its directory's `O_PATH` descriptor (see ``parentDescriptor``).
    private let parent: Descriptor?
    /// The object's name in that directory (after symlinks: the target's name). A save by rename
    /// replaces `name` in ``parentDescriptor``.
    public let name: String

    init(realPath: String, object: consuming Descriptor?, parent: consuming Descriptor?, name: String) {
        self.realPath = realPath
        self.object = object
        self.parent = parent
        self.name = name
    }

    /// The number of an `O_PATH` descriptor of the object, owned by this object; nil when it does
    /// not exist (`mustExist: false`). Never a symlink: a final symlink is resolved (beneath the
    /// roots) to its target.
    public var descriptor: Int32? { rawValue(of: object) }

    /// The number of an `O_PATH` descriptor of the directory holding the object, owned by this
    /// object; nil only when the path is a root itself (its directory is outside the roots).
    public var parentDescriptor: Int32? { rawValue(of: parent) }

    /// Whether the object existed at resolution time.
    public var exists: Bool { descriptor != nil }

    /// The device and inode of the resolved object (nil when it does not exist yet): an operation
    /// that goes by path checks it got this same file.
    public var fileIdentity: FileIdentity? {
        guard let descriptor else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        return FileIdentity(status)
    }

    /// A path that acts on exactly the resolved object, without resolving the request again:
    /// `/proc/self/fd/N` reopens the pinned inode; for an object to create, `/proc/self/fd/D/name`
    /// names `name` in the pinned directory. In the second case only the last component is looked
    /// up again: open it with `O_NOFOLLOW` (or `O_CREAT | O_EXCL`) so that a symlink planted there
    /// since is not followed, as ``open(_:mode:)`` does.
    public var procPath: String {
        if let descriptor { return "/proc/self/fd/\(descriptor)" }
        return "/proc/self/fd/\(parentDescriptor!)/\(name)"
    }

    /// `/proc/self/fd/D` for the pinned directory holding the object (nil for a root itself).
    public var parentProcPath: String? { parentDescriptor.map { "/proc/self/fd/\($0)" } }

    /// Opens the resolved object with open(2) `flags` (`O_CLOEXEC` added): the pinned inode when it
    /// existed (`O_NOFOLLOW` is ignored there), else `name` in the pinned directory with
    /// `O_NOFOLLOW` added, created with `mode` when `flags` has `O_CREAT`.
    public func open(_ flags: Int32, mode: mode_t = 0o666) throws(FileSystemError) -> Descriptor {
        let access = FileDescriptor.AccessMode(rawValue: flags & O_ACCMODE)
        let options = FileDescriptor.OpenOptions(rawValue: flags & ~O_ACCMODE)
        do {
            if let descriptor {
                return try Descriptor.open("/proc/self/fd/\(descriptor)", access, options: options.subtracting(.noFollow), permissions: FilePermissions(rawValue: mode))
            }
            return try Descriptor.open(name, access, options: options.union(.noFollow), permissions: FilePermissions(rawValue: mode), relativeTo: FileDescriptor(rawValue: parentDescriptor!))
        } catch {
            throw FileSystemError(errno: error.errno.rawValue, syscall: "open", path: realPath)
        }
    }
}

/// The directories a server may touch (its `--root`s, narrowed by a client's `initialize`), and
/// the resolution of a request's path so that it cannot land outside them: not by `..`, not by a
/// symlink, not by a rename racing with the check.
///
/// Each root is held by an `O_PATH` descriptor opened at init: renaming a root's ancestor later
/// does not change what the root is. A request's path is absolute; it must begin with a root,
/// spelled either as given or as its canonical real path (so a root given through a symlinked
/// parent is reachable both ways). A path that would reach a root only through a symlink outside
/// the roots (`/home/u/docs` -> `/srv/docs`) is refused: nothing outside the roots is looked at.
/// The rest is resolved relative to the root's descriptor:
///
/// - With openat2(2) (Linux 5.6), `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel follows
///   relative symlinks and `..` while they stay beneath the root and refuses the rest atomically.
/// - Whatever openat2 refuses (`EXDEV`, `ELOOP`), cannot do (`ENOSYS` on older kernels, `EPERM`
///   under a seccomp filter, `EAGAIN` after retries), or where the final component is a symlink, is
///   resolved by a walk: one component at a time with `openat(O_PATH | O_NOFOLLOW)`, reading each
///   symlink through its own descriptor (`readlinkat(fd, "")`) and walking its target. `..` pops the
///   walk's own stack of directory descriptors rather than asking the kernel for the parent, so a
///   directory moved meanwhile cannot make it climb elsewhere. The walk either finds a legitimate
///   route (an absolute symlink, see below) or says precisely why the path is refused.
///
/// Rules (the same on both paths):
/// - `..` is not lexical: it goes to the parent of the directory actually reached (after
///   symlinks), as the kernel does. A `..` above the root the resolution is in is refused, even if
///   the path would come back in through another root (`/srv/a/../b/x` with roots `/srv/a` and
///   `/srv/b`): spell the path through the other root instead. When roots nest, the outermost that
///   begins the path is tried first, then the others.
/// - A relative symlink is followed while it stays beneath the root; its `..` follow the rule above.
/// - An absolute symlink is supported when its target, read as a path, begins with a root (the
///   same or another): resolution restarts beneath that root's descriptor with the target's rest.
///   A target outside every root is refused, naming the link and its target.
/// - At most ``symlinkHopLimit`` symlinks per resolution (`ELOOP` beyond, naming the last link).
/// - The result's real location (read back from `/proc/self/fd`) must be inside a root (where the
///   root is now); this only fails if a directory on the way was moved out of the roots during the
///   resolution.
///
/// Immutable and thread-safe; resolutions are independent.
public final class SandboxRoots: Sendable {
    /// One root: its descriptor, its canonical path and the spellings that name it in requests. A
    /// class, so that the roots' list can hold it: the root owns its descriptor, closed once, when
    /// the last reference goes (with the `SandboxRoots`, or after a resolution still using it).
    final class Root: Sendable {
        let directory: Descriptor
        let realPath: String
        /// The components of the canonical path, and of the spelling given when it differs.
        let spellings: [[String]]

        init(directory: consuming Descriptor, realPath: String, spellings: [[String]]) {
            self.directory = directory
            self.realPath = realPath
            self.spellings = spellings
        }

        /// The number of the root's descriptor, for a call made while the root is held.
        var descriptor: Int32 { directory.rawValue }
    }

    /// How paths are resolved: openat2 first (the walk for what it refuses), or the walk only (for
    /// kernels without openat2, and for tests of the walk).
    enum Resolver: Sendable {
        case openat2
        case walk
    }

    let roots: [Root]
    let resolver: Resolver

    /// The most symlinks one resolution follows, as Linux's own limit (`MAXSYMLINKS`).
    public static let symlinkHopLimit = 40

    /// Opens `paths`, each an absolute path to an existing directory (symlinks in it followed, now
    /// and once). Duplicates and nested roots are allowed. An empty list refuses every path.
    public convenience init(_ paths: [String]) throws(FileSystemError) {
        try self.init(paths, resolver: .openat2)
    }

    convenience init(_ paths: [String], resolver: Resolver) throws(FileSystemError) {
        // A failure drops the roots opened so far, which closes them.
        var opened: [Root] = []
        for path in paths { opened.append(try Self.openRoot(path)) }
        self.init(roots: opened, resolver: resolver)
    }

    private init(roots: [Root], resolver: Resolver) {
        self.roots = roots
        self.resolver = resolver
    }

    /// The roots' canonical paths when they were opened, in the order given. (A root renamed since,
    /// or under a renamed ancestor, is still the directory opened, and its old spellings still name it.)
    public var paths: [String] { roots.map(\.realPath) }

    /// Whether this kernel (and its seccomp filter, if any) lets openat2(2) resolve beneath a
    /// directory; without it every resolution takes the walk.
    public static var openat2Available: Bool {
        let fd = cfs_openat2_path(AT_FDCWD, ".", O_DIRECTORY, UInt64(CFS_RESOLVE_BENEATH))
        guard fd >= 0 else { return false }
        _ = Descriptor(owningRawValue: fd)  // dropped: closed
        return true
    }

    /// Narrower roots, as a client's `initialize` may ask: each of `paths` must resolve (with the
    /// rules of ``resolve(_:mustExist:)``) to a directory inside these roots; the new root is that
    /// directory, pinned. The result resolves the same way as `self`.
    public func narrowed(to paths: [String]) throws(SandboxError) -> SandboxRoots {
        // A failure drops the roots opened so far, which closes them.
        var opened: [Root] = []
        for path in paths {
            let resolved = try resolve(path, mustExist: true)
            guard let descriptor = resolved.descriptor, Self.isDirectory(descriptor) else {
                throw .fileSystem(errno: ENOTDIR, syscall: "open", path: path, reason: "a root must be a directory")
            }
            let copy = try Self.duplicate(descriptor, path: path)
            opened.append(Root(directory: copy, realPath: resolved.realPath, spellings: Self.spellings(given: path, real: resolved.realPath)))
        }
        return SandboxRoots(roots: opened, resolver: resolver)
    }

    /// Resolves the absolute `path` beneath the roots (see the type's rules).
    ///
    /// With `mustExist`, the object must exist; it may be a directory or the root itself. Without,
    /// to create or replace a file: the last component must be a name (not "", ".", ".."), the
    /// directory holding it must resolve beneath a root, and the name need not exist. If it exists
    /// and is a symlink, its target is resolved beneath the roots too (a save through a symlink
    /// writes its target), and may itself not exist yet.
    public func resolve(_ path: String, mustExist: Bool) throws(SandboxError) -> ResolvedPath {
        guard path.hasPrefix("/") else { throw SandboxError(.invalidPath, path: path, reason: "not an absolute path") }
        guard !path.utf8.contains(0) else { throw SandboxError(.invalidPath, path: path, reason: "a NUL byte in the path") }
        let components = Self.components(path)
        let trailingSlash = path.hasSuffix("/") && !components.isEmpty
        if !mustExist {
            let last = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
            guard !last.isEmpty, last != ".", last != ".." else {
                throw SandboxError(.invalidPath, path: path, reason: "the last component must be a name (not ‘/’, ‘.’ or ‘..’) to create or replace a file")
            }
        }
        let candidates = matchingRoots(components)
        guard !candidates.isEmpty else {
            throw SandboxError(.outsideRoots, path: path, reason: "not inside any root (roots: \(paths.joined(separator: ", ")))")
        }
        var firstFailure: SandboxError?
        for (root, count) in candidates {
            do throws(SandboxError) {
                let rest = Array(components[count...])
                var resolved: ResolvedPath? = nil
                if resolver == .openat2 { resolved = try resolveWithOpenat2(root, rest, path: path, mustExist: mustExist) }
                if resolved == nil { resolved = try walk(root, rest, path: path, mustExist: mustExist) }
                try check(resolved!, path: path, trailingSlash: trailingSlash)
                return resolved!
            } catch {
                if firstFailure == nil { firstFailure = error }
            }
        }
        throw firstFailure!
    }

    // MARK: - Resolution

    /// The fast path: openat2 for the directory, one `O_NOFOLLOW` open for the last name. Nil when
    /// the walk must decide (openat2 refused or unavailable, a final symlink, a last component that
    /// is not a name).
    func resolveWithOpenat2(_ root: Root, _ rest: [String], path: String, mustExist: Bool) throws(SandboxError) -> ResolvedPath? {
        guard let name = rest.last, name != ".." else { return nil }
        let directory = rest.dropLast().joined(separator: "/")
        let parentNumber = cfs_openat2_path(root.descriptor, directory.isEmpty ? "." : directory, O_DIRECTORY, UInt64(CFS_RESOLVE_BENEATH | CFS_RESOLVE_NO_MAGICLINKS))
        if parentNumber < 0 {
            switch errno {
            case EXDEV, ELOOP, EAGAIN, ENOSYS, EPERM, EINVAL, E2BIG: return nil
            case let number: throw .fileSystem(errno: number, syscall: "openat2", path: path)
            }
        }
        // From here each way out either hands the descriptors to the result or drops (closes) them.
        let parent = Descriptor(owningRawValue: parentNumber)
        let objectNumber = cfs_openat_path(parent.rawValue, name, O_NOFOLLOW)
        if objectNumber < 0 {
            let number = errno
            if number == ENOENT && !mustExist { return try Self.result(parent: consume parent, name: name, object: nil, path: path) }
            throw .fileSystem(errno: number, syscall: "openat", path: path)
        }
        let object = Descriptor(owningRawValue: objectNumber)
        var status = stat()
        guard fstat(object.rawValue, &status) == 0, status.st_mode & S_IFMT != S_IFLNK else { return nil }
        return try Self.result(parent: consume parent, name: name, object: consume object, path: path)
    }

    /// A component still to walk, and the symlink it comes from (for the error messages).
    private struct Step {
        let name: String
        let link: (path: String, target: String)?
    }

    /// A directory reached by the walk: its descriptor, path and name. A class, so that the walk's
    /// stack (an array) can hold it: it owns its descriptor, closed once, when the frame is popped,
    /// replaced or left behind by the walk's end.
    private final class Frame {
        let directory: Descriptor
        let path: String
        let name: String

        init(directory: consuming Descriptor, path: String, name: String) {
            self.directory = directory
            self.path = path
            self.name = name
        }

        /// The number of the frame's descriptor, for a call made while the frame is held.
        var descriptor: Int32 { directory.rawValue }
    }

    /// The walk: one component at a time from `root`, never following a symlink but reading it and
    /// walking its target (see the type's rules).
    private func walk(_ start: Root, _ rest: [String], path: String, mustExist: Bool) throws(SandboxError) -> ResolvedPath {
        // The frames own their descriptors: whatever way the walk ends, the stack left is dropped.
        var stack: [Frame] = []
        var root = start
        stack.append(try Self.rootFrame(root, path: path))
        var pending = rest.reversed().map { Step(name: $0, link: nil) }
        var hops = 0
        while let step = pending.popLast() {
            if step.name.isEmpty || step.name == "." { continue }
            if step.name == ".." {
                guard stack.count > 1 else {
                    if let link = step.link {
                        throw SandboxError(.outsideRoots, path: path, reason: "symlink \(link.path) points to \(link.target), which leads out of root \(root.realPath)")
                    }
                    throw SandboxError(.outsideRoots, path: path, reason: "‘..’ leads out of root \(root.realPath)")
                }
                stack.removeLast()
                continue
            }
            let directory = stack[stack.count - 1]
            let here = Self.join(directory.path, step.name)
            let objectNumber = cfs_openat_path(directory.descriptor, step.name, O_NOFOLLOW)
            if objectNumber < 0 {
                let number = errno
                if number == ENOENT && pending.isEmpty && !mustExist {
                    return try Self.result(parent: Self.duplicate(directory.descriptor, path: path), name: step.name, object: nil, path: path)
                }
                throw .fileSystem(errno: number, syscall: "openat", path: path, subject: here)
            }
            // Pushed as a frame, handed to the result, or dropped (closed) on the way out.
            let object = Descriptor(owningRawValue: objectNumber)
            var status = stat()
            guard fstat(object.rawValue, &status) == 0 else {
                let number = errno
                throw .fileSystem(errno: number, syscall: "fstat", path: path, subject: here)
            }
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                stack.append(Frame(directory: object, path: here, name: step.name))
            case S_IFLNK:
                let target = try Self.readLink(object.rawValue, path: path, subject: here)
                hops += 1
                guard hops <= Self.symlinkHopLimit else {
                    throw .fileSystem(errno: ELOOP, syscall: "readlinkat", path: path, subject: path, reason: "more than \(Self.symlinkHopLimit) symbolic links, the last \(here) → \(target) (a symlink loop?)")
                }
                guard !target.isEmpty else { throw .fileSystem(errno: ENOENT, syscall: "readlinkat", path: path, subject: here, reason: "an empty symlink") }
                var components = Self.components(target)
                if target.hasPrefix("/") {
                    guard let (next, count) = matchingRoots(components).first else {
                        throw SandboxError(.outsideRoots, path: path, reason: "symlink \(here) points to \(target), outside the roots")
                    }
                    stack = [try Self.rootFrame(next, path: path)]
                    root = next
                    components.removeFirst(count)
                }
                pending.append(contentsOf: components.reversed().map { Step(name: $0, link: (here, target)) })
            default:
                guard pending.isEmpty else {
                    throw .fileSystem(errno: ENOTDIR, syscall: "openat", path: path, subject: here, reason: "a component that is not a directory")
                }
                let parent = try Self.duplicate(directory.descriptor, path: path)
                return try Self.result(parent: consume parent, name: step.name, object: consume object, path: path)
            }
        }
        // The path ends at a directory: the top of the stack.
        let top = stack[stack.count - 1]
        let object = try Self.duplicate(top.descriptor, path: path)
        var parent: Descriptor? = nil
        if stack.count > 1 { parent = try Self.duplicate(stack[stack.count - 2].descriptor, path: path) }
        return try Self.result(parent: consume parent, name: top.name, object: consume object, path: path)
    }

    /// Whether what `descriptor` holds (already open) lies beneath a root now, by the kernel's own
    /// path of it: a check with no window between it and the use of the descriptor.
    public func holds(descriptor: Int32) -> Bool {
        guard let path = Self.descriptorPath(descriptor), path.hasPrefix("/") else { return false }
        let real = Self.components(path)
        return roots.contains { root in Self.hasPrefix(real, Self.components(Self.descriptorPath(root.descriptor) ?? root.realPath)) }
    }

    /// Whether the canonical absolute `path` (one the server recorded after resolving it: a
    /// document's or a journal's file) lies beneath a root, by its spelling alone, without looking
    /// at the file system: it begins with a root's canonical path (then or now) or the spelling it
    /// was given as. A path with `..` is not beneath any.
    public func encloses(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        let parts = Self.components(path)
        guard !parts.contains("..") else { return false }
        return roots.contains { root in
            root.spellings.contains { Self.hasPrefix(parts, $0) }
                || Self.hasPrefix(parts, Self.components(Self.descriptorPath(root.descriptor) ?? root.realPath))
        }
    }

    /// Refuses a result that is not inside the roots after all, or not a directory when the path
    /// ended with a slash.
    private func check(_ resolved: ResolvedPath, path: String, trailingSlash: Bool) throws(SandboxError) {
        // Against where the roots are now: a root's ancestor may have been renamed since init.
        let real = Self.components(resolved.realPath)
        guard roots.contains(where: { root in Self.hasPrefix(real, Self.components(Self.descriptorPath(root.descriptor) ?? root.realPath)) }) else {
            throw SandboxError(.outsideRoots, path: path, reason: "it resolved to \(resolved.realPath), outside the roots (a directory on the way moved during the resolution?)")
        }
        if trailingSlash, let descriptor = resolved.descriptor, !Self.isDirectory(descriptor) {
            throw .fileSystem(errno: ENOTDIR, syscall: "openat", path: path, subject: resolved.realPath, reason: "the path ends with ‘/’")
        }
    }

    /// The roots one of whose spellings begins `components`, outermost (fewest components) first,
    /// with the number of components the spelling takes.
    private func matchingRoots(_ components: [String]) -> [(Root, Int)] {
        var found: [(Root, Int)] = []
        for root in roots {
            let counts = root.spellings.filter { Self.hasPrefix(components, $0) }.map(\.count)
            if let count = counts.min() { found.append((root, count)) }
        }
        return found.sorted { $0.1 < $1.1 }
    }

    // MARK: - Helpers

    private static func openRoot(_ path: String) throws(FileSystemError) -> Root {
        guard path.hasPrefix("/") else {
            throw FileSystemError(errno: EINVAL, syscall: "open", path: path, reason: "a root must be an absolute path")
        }
        let number = cfs_openat_path(AT_FDCWD, path, O_DIRECTORY)
        guard number >= 0 else { throw FileSystemError(errno: errno, syscall: "open", path: path, reason: "a root must be an existing directory") }
        let directory = Descriptor(owningRawValue: number)
        guard let real = descriptorPath(number) else {
            let failure = errno
            throw FileSystemError(errno: failure, syscall: "readlink", path: "/proc/self/fd/\(number)", reason: "the canonical path of root \(path)")
        }
        return Root(directory: directory, realPath: real, spellings: spellings(given: path, real: real))
    }

    /// The real path's components, and the given spelling's when it differs and has no `..`
    /// (whose meaning depends on symlinks).
    private static func spellings(given: String, real: String) -> [[String]] {
        let realComponents = components(real)
        let givenComponents = components(given)
        if givenComponents == realComponents || givenComponents.contains("..") { return [realComponents] }
        return [realComponents, givenComponents]
    }

    /// A walk's first frame: a copy of the root's descriptor.
    private static func rootFrame(_ root: Root, path: String) throws(SandboxError) -> Frame {
        let directory = try duplicate(root.descriptor, path: path)
        return Frame(directory: directory, path: root.realPath, name: components(root.realPath).last ?? "/")
    }

    /// Builds the result from descriptors it takes over (dropped, so closed, on failure).
    private static func result(parent: consuming Descriptor?, name: String, object: consuming Descriptor?, path: String) throws(SandboxError) -> ResolvedPath {
        let objectNumber = rawValue(of: object)
        let pinned = objectNumber ?? rawValue(of: parent)!
        guard let real = descriptorPath(pinned) else {
            let number = errno
            throw .fileSystem(errno: number, syscall: "readlink", path: path, subject: "/proc/self/fd/\(pinned)")
        }
        return ResolvedPath(realPath: objectNumber == nil ? join(real, name) : real, object: object, parent: parent, name: name)
    }

    /// The path the kernel gives a descriptor (readlink of `/proc/self/fd/N`); nil with errno set.
    static func descriptorPath(_ descriptor: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(descriptor)", &buffer, Int(PATH_MAX))
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The target of the symlink `descriptor` holds (opened with `O_PATH | O_NOFOLLOW`).
    private static func readLink(_ descriptor: Int32, path: String, subject: String) throws(SandboxError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(descriptor, "", &buffer, Int(PATH_MAX))
        guard count >= 0 else { throw .fileSystem(errno: errno, syscall: "readlinkat", path: path, subject: subject) }
        guard count < Int(PATH_MAX) else { throw .fileSystem(errno: ENAMETOOLONG, syscall: "readlinkat", path: path, subject: subject) }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A new descriptor for what `descriptor` holds (`fcntl(F_DUPFD_CLOEXEC)`), owned by the caller.
    private static func duplicate(_ descriptor: Int32, path: String) throws(SandboxError) -> Descriptor {
        do {
            return try Descriptor.duplicate(FileDescriptor(rawValue: descriptor))
        } catch {
            throw .fileSystem(FileSystemError(error, path: path), path: path)
        }
    }

    private static func isDirectory(_ descriptor: Int32) -> Bool {
        var status = stat()
        return fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
    }

    /// A path's components without the empty ones and `.` (both mean nothing); `..` kept.
    static func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init).filter { $0 != "." }
    }

    private static func hasPrefix(_ components: [String], _ prefix: [String]) -> Bool {
        components.count >= prefix.count && zip(components, prefix).allSatisfy { $0 == $1 }
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

/// The number of the descriptor `descriptor` holds, nil when it holds none.
private func rawValue(of descriptor: borrowing Descriptor?) -> Int32? {
    switch descriptor {
    case .some(let held): held.rawValue
    case .none: nil
    }
}
