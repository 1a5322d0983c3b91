import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Reading a package's tree (its entries, its signature) and the tree helpers the save and the
// recovery share: the names of the save's siblings, listing and removing a directory through
// descriptors (never following a symlink), relative paths checked.

/// What a package's tree holds at one relative path.
public struct PackageEntryInfo: Sendable, Equatable {
    /// The kind of an entry.
    public enum Kind: String, Sendable {
        /// A regular file.
        case file
        /// A directory.
        case directory
        /// A symbolic link (never followed).
        case symlink
        /// Anything else (a FIFO, a socket, a device): listed, never written by a save.
        case other
    }

    /// The path relative to the package ("assets/a.png").
    public var path: String
    /// What is there.
    public var kind: Kind
    /// The size in bytes (`st_size`: a symlink's target's length, a directory's as the file
    /// system reports it).
    public var size: Int64
    /// The permission bits (`st_mode & 07777`).
    public var mode: mode_t
}

/// A fingerprint of a package's tree: a change made by another program (a file written, added,
/// removed, renamed, its mode changed) changes it, and reading the tree does not. Record it after a
/// save of ours and compare it before the next one.
public struct PackageSignature: Sendable, Equatable {
    /// One entry's part of the signature.
    public struct Item: Sendable, Equatable {
        /// The path relative to the package; "" for the package directory itself.
        public var path: String
        /// What is there.
        public var kind: PackageEntryInfo.Kind
        /// The size in bytes.
        public var size: Int64
        /// The inode number.
        public var inode: UInt64
        /// The modification time, in nanoseconds since the epoch.
        public var modificationNanoseconds: Int64
        /// The status change time, in nanoseconds since the epoch (a rename, a `chmod`, a link).
        public var changeNanoseconds: Int64
    }

    /// The package directory first, then every entry sorted by relative path.
    public var items: [Item]

    /// The item at `path` (relative to the package), if the tree has one.
    public func item(_ path: String) -> Item? {
        items.first { $0.path == path }
    }
}

extension PackageSave {
    /// Reads the tree of the package at `packagePath`: every entry (files, directories, symlinks,
    /// others) below it, sorted by relative path, without following a symlink. Skips nothing: the
    /// save's staging and intent names are siblings in the parent, never inside a package.
    ///
    /// Throws a ``FileSystemError`` naming the call and the path: `ENOTDIR` when the package is not a
    /// directory, `EILSEQ` for a name that is not UTF-8 (a save could not name it again).
    public static func entries(of packagePath: String) throws(FileSystemError) -> [PackageEntryInfo] {
        try walk(packagePath).map { PackageEntryInfo(path: $0.path, kind: $0.kind, size: Int64($0.status.st_size), mode: $0.status.st_mode & 0o7777) }
    }

    /// The ``PackageSignature`` of the package at `packagePath`: relative paths, kinds, sizes, inode
    /// numbers, modification and status change times of the package directory and every entry.
    public static func signature(of packagePath: String) throws(FileSystemError) -> PackageSignature {
        let root = try statusOf(packagePath)
        guard root.st_mode & S_IFMT == S_IFDIR else {
            throw FileSystemError(errno: ENOTDIR, syscall: "lstat", path: packagePath, reason: "a package is a directory")
        }
        var items = [signatureItem("", root)]
        for entry in try walk(packagePath) { items.append(signatureItem(entry.path, entry.status)) }
        return PackageSignature(items: items)
    }

    private static func signatureItem(_ path: String, _ status: stat) -> PackageSignature.Item {
        PackageSignature.Item(
            path: path, kind: kind(of: status), size: Int64(status.st_size), inode: UInt64(status.st_ino),
            modificationNanoseconds: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
            changeNanoseconds: Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec))
    }

    /// One entry found by ``walk(_:)``.
    struct WalkedEntry {
        var path: String
        var kind: PackageEntryInfo.Kind
        var status: stat
    }

    /// Every entry below the directory at `packagePath`, sorted by relative path.
    static func walk(_ packagePath: String) throws(FileSystemError) -> [WalkedEntry] {
        let root = try openDirectory(packagePath, relativeTo: nil, path: packagePath)
        var found: [WalkedEntry] = []
        try walk(root, relative: "", packagePath: packagePath, into: &found)
        found.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        return found
    }

    private static func walk(
        _ directory: borrowing Descriptor, relative: String, packagePath: String, into found: inout [WalkedEntry]
    ) throws(FileSystemError) {
        let directoryPath = join(packagePath, relative)
        for name in try names(in: directory, path: directoryPath) {
            let path = relative.isEmpty ? name : relative + "/" + name
            var status = stat()
            guard fstatat(directory.rawValue, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw FileSystemError(errno: errno, syscall: "fstatat", path: join(packagePath, path))
            }
            let entryKind = kind(of: status)
            found.append(WalkedEntry(path: path, kind: entryKind, status: status))
            if entryKind == .directory {
                let child = try openDirectory(name, relativeTo: directory.rawValue, path: join(packagePath, path))
                try walk(child, relative: path, packagePath: packagePath, into: &found)
            }
        }
    }

    static func kind(of status: stat) -> PackageEntryInfo.Kind {
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .symlink
        default: return .other
        }
    }

    // MARK: - Names

    /// The names the save gives its siblings of the package `name` in the parent directory.
    struct SiblingNames {
        let name: String
        /// `.<name>.docsession-stage-`: a staged tree, or the old tree after an exchange.
        var stagePrefix: String { "." + name + ".docsession-stage-" }
        /// `.<name>.docsession-old-`: the old tree during the fallback's renames.
        var oldPrefix: String { "." + name + ".docsession-old-" }
        /// `.<name>.docsession-intent`: the fallback's intent record.
        var intent: String { "." + name + ".docsession-intent" }

        /// Whether `sibling` is `prefix` and exactly 16 hex digits: the names of another package
        /// that starts with this one's (`x` and `x.docsession-stage-y`) never count as ours.
        static func matches(_ sibling: String, prefix: String) -> Bool {
            guard sibling.hasPrefix(prefix) else { return false }
            let rest = sibling.utf8.dropFirst(prefix.utf8.count)
            return rest.count == 16 && rest.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
        }

        /// `prefix` and 16 random hex digits.
        static func random(_ prefix: String) -> String {
            var generator = SystemRandomNumberGenerator()
            let hex = String(generator.next() as UInt64, radix: 16)
            return prefix + String(repeating: "0", count: 16 - hex.count) + hex
        }
    }

    /// The parent directory and the last component of `packagePath`, refused (`EINVAL`) when the
    /// last component is empty, `.` or `..`.
    static func split(_ packagePath: String) throws(FileSystemError) -> (parent: String, name: String) {
        var trimmed = Substring(packagePath)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        let parent: String
        let name: String
        if let slash = trimmed.lastIndex(of: "/") {
            parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
            name = String(trimmed[trimmed.index(after: slash)...])
        } else {
            parent = "."
            name = String(trimmed)
        }
        guard !name.isEmpty, name != ".", name != ".." else {
            throw FileSystemError(errno: EINVAL, syscall: "save", path: packagePath, reason: "a package path must end in a name")
        }
        return (parent, name)
    }

    /// Whether `path` is a relative path a package may hold: not empty, no leading "/", no empty,
    /// "." or ".." component.
    static func isValidRelativePath(_ path: String) -> Bool {
        // The one rule for entry paths, which the server checks first (EntryReading.pathProblem).
        EntryReading.pathProblem(path) == nil
    }

    static func join(_ directory: String, _ relative: String) -> String {
        if relative.isEmpty { return directory }
        return directory.hasSuffix("/") ? directory + relative : directory + "/" + relative
    }

    // MARK: - Directories through descriptors

    /// `lstat` of `path`.
    static func statusOf(_ path: String) throws(FileSystemError) -> stat {
        do {
            return try fileStatus(path, followingSymlinks: false)
        } catch {
            throw FileSystemError(error)
        }
    }

    /// The status of `name` in `directory`, or nil when there is nothing there.
    static func status(of name: String, in directory: Int32, path: String) throws(FileSystemError) -> stat? {
        var status = stat()
        if fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 { return status }
        if errno == ENOENT { return nil }
        throw FileSystemError(errno: errno, syscall: "fstatat", path: path)
    }

    /// Opens the directory `name` (relative to `directory`, the working directory when nil), never
    /// following a symlink at its last component.
    static func openDirectory(_ name: String, relativeTo directory: Int32?, path: String) throws(FileSystemError) -> Descriptor {
        do {
            return try Descriptor.open(name, .readOnly, options: [.directory, .noFollow],
                                       relativeTo: directory.map { FileDescriptor(rawValue: $0) })
        } catch {
            throw FileSystemError(error, path: path)
        }
    }

    /// The names in the open directory `directory` (without "." and ".."). A name that is not UTF-8
    /// throws `EILSEQ` (a save could not name it again), or with `skippingNonUTF8` is left out (the
    /// recovery looks only for its own names among a parent's).
    static func names(in directory: borrowing Descriptor, path: String, skippingNonUTF8: Bool = false) throws(FileSystemError) -> [String] {
        var names: [String] = []
        for raw in try rawNames(in: directory.rawValue, path: path) {
            guard let name = String(validating: raw.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) else {
                if skippingNonUTF8 { continue }
                throw FileSystemError(errno: EILSEQ, syscall: "readdir", path: path, reason: "an entry's name is not UTF-8")
            }
            names.append(name)
        }
        return names
    }

    /// The names in the open directory `directory` as stored, each with its terminating NUL
    /// (without "." and "..").
    private static func rawNames(in directory: Int32, path: String) throws(FileSystemError) -> [[CChar]] {
        // fdopendir owns the descriptor it is given: it gets a duplicate, and `directory` stays the caller's.
        let duplicateNumber = dup(directory)
        guard duplicateNumber >= 0 else { throw FileSystemError(errno: errno, syscall: "dup", path: path) }
        let duplicate = Descriptor(owningRawValue: duplicateNumber)
        guard let stream = fdopendir(duplicate.rawValue) else { throw FileSystemError(errno: errno, syscall: "fdopendir", path: path) }
        _ = duplicate.take()  // the stream owns it now
        defer { closedir(stream) }
        var names: [[CChar]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw FileSystemError(errno: errno, syscall: "readdir", path: path) }
                return names
            }
            // Read up to the NUL through a pointer: loading `d_name` would copy 256 bytes, past the
            // end of a short record (see SafeSave.sweepStaleTempFiles).
            let pointer = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self)
            let name = Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer) + 1))
            if name != [0x2E, 0] && name != [0x2E, 0x2E, 0] { names.append(name) }
        }
    }

    /// Removes `name` in `directory` and everything below it, without following a symlink (a
    /// symlink is unlinked, not its target), whatever the names below are. A name already gone is
    /// not an error.
    static func removeTree(_ name: String, in directory: Int32, path: String) throws(FileSystemError) {
        try removeTree(raw: Array(name.utf8CString), in: directory, path: path)
    }

    private static func removeTree(raw name: [CChar], in directory: Int32, path: String) throws(FileSystemError) {
        var status = stat()
        guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return }
            throw FileSystemError(errno: errno, syscall: "fstatat", path: path)
        }
        if status.st_mode & S_IFMT != S_IFDIR {
            guard unlinkat(directory, name, 0) == 0 || errno == ENOENT else {
                throw FileSystemError(errno: errno, syscall: "unlinkat", path: path)
            }
            return
        }
        do {
            let opened = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard opened >= 0 else { throw FileSystemError(errno: errno, syscall: "openat", path: path) }
            let child = Descriptor(owningRawValue: opened)
            for entry in try rawNames(in: child.rawValue, path: path) {
                let shown = String(decoding: entry.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
                try removeTree(raw: entry, in: child.rawValue, path: join(path, shown))
            }
        }
        guard unlinkat(directory, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
            throw FileSystemError(errno: errno, syscall: "unlinkat", path: path)
        }
    }
}

/// Where a directory entry's name starts in its record.
private let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
