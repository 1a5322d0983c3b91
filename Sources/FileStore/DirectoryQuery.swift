import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A regular file found under a query's root.
public struct DirectoryEntry: Sendable, Hashable, CustomStringConvertible {
    /// The absolute path: the root as given (trailing slashes dropped), "/", the relative path.
    public var path: String
    /// The path relative to the root, "/"-separated, without a leading "/".
    public var relativePath: String
    /// The last component of the path.
    public var name: String
    /// The size in bytes.
    public var size: Int64
    /// The modification time, nanoseconds since 1970 (as ``FileIdentity/modificationTime``).
    public var modificationTime: Int64
    /// The file's device, inode, size and times when it was seen (not followed through symlinks).
    public var identity: FileIdentity

    public init(path: String, relativePath: String, identity: FileIdentity) {
        self.path = path
        self.relativePath = relativePath
        if let slash = relativePath.lastIndex(of: "/") {
            name = String(relativePath[relativePath.index(after: slash)...])
        } else {
            name = relativePath
        }
        size = identity.size
        modificationTime = identity.modificationTime
        self.identity = identity
    }

    public var description: String { relativePath }

    /// Whether `other` is the same file with the same size and modification time: what a query
    /// reports as unchanged (a change of mode or owner alone, which moves only the status-change
    /// time, is not a change of the document).
    public func sameContentState(as other: DirectoryEntry) -> Bool {
        identity.device == other.identity.device && identity.inode == other.identity.inode
            && size == other.size && modificationTime == other.modificationTime
    }
}

/// Lists the documents under a root that match a glob: the one-shot half of `workspace/query`
/// (``DirectoryWatch`` is the live half).
///
/// Only regular files are reported. Symbolic links are never reported, whatever they point at, and
/// never followed into directories, so a link cycle cannot make a walk loop (the root itself may be
/// a symlink to a directory: it is opened as given). A directory reached twice (a bind mount of an
/// ancestor) is walked once. Subdirectories that cannot be opened (permissions, removed during the
/// walk) are skipped; an unreadable or missing root is an error. Directories in which no path can
/// match the pattern (``GlobPattern/mayMatchInside(_:)``) are not opened.
///
/// The walk goes through directory descriptors (`openat`, `fdopendir`, `fstatat` relative to each
/// directory's descriptor), one descriptor open per level of depth, and `stat`s only the files
/// whose name matches (the directory entry's type says which are files).
public enum DirectoryQuery {
    /// The regular files under `root` whose path relative to it matches `pattern`, sorted by
    /// relative path; with `recursive` false, only the root's own files.
    public static func scan(
        root: String, pattern: GlobPattern, recursive: Bool
    ) throws(FileSystemError) -> [DirectoryEntry] {
        let root = normalizedRoot(root)
        let directory: Descriptor
        do {
            directory = try Descriptor.open(root, .readOnly, options: .directory)
        } catch {
            throw FileSystemError(error, path: root)
        }
        var entries: [DirectoryEntry] = []
        var walker = DirectoryWalker(root: root, pattern: pattern, recursive: recursive)
        walker.walk(directory, relativeDirectory: "", enter: { _ in true }) { entries.append($0) }
        entries.sort { $0.relativePath < $1.relativePath }
        return entries
    }

    /// The root without trailing slashes ("/" stays "/").
    static func normalizedRoot(_ root: String) -> String {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        return root
    }

    /// The absolute path of `relativePath` under `root` ("" is the root).
    static func absolutePath(root: String, _ relativePath: String) -> String {
        if relativePath.isEmpty { return root }
        return root == "/" ? "/" + relativePath : root + "/" + relativePath
    }

    /// The relative path of `name` in the directory `relativeDirectory` ("" is the root).
    static func join(_ relativeDirectory: String, _ name: String) -> String {
        relativeDirectory.isEmpty ? name : relativeDirectory + "/" + name
    }
}

/// The recursive walk shared by ``DirectoryQuery/scan(root:pattern:recursive:)`` and
/// ``DirectoryWatch`` (which adds a watch on each directory before listing it).
struct DirectoryWalker {
    private struct DirectoryKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    let root: String
    let pattern: GlobPattern
    let recursive: Bool
    private var visited = Set<DirectoryKey>()

    init(root: String, pattern: GlobPattern, recursive: Bool) {
        self.root = root
        self.pattern = pattern
        self.recursive = recursive
    }

    /// Walks the open directory `directoryFile` (the walk takes it over: a `DIR` stream closes it,
    /// or it is dropped), at `relativeDirectory` under the root. `enter` is called with each
    /// directory's relative path before it is listed (false: skip it); `file` with each matching
    /// regular file.
    mutating func walk(
        _ directoryFile: consuming Descriptor, relativeDirectory: String,
        enter: (String) -> Bool, file: (DirectoryEntry) -> Void
    ) {
        var status = stat()
        guard fstat(directoryFile.rawValue, &status) == 0,
            visited.insert(DirectoryKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))).inserted,
            enter(relativeDirectory), let directory = fdopendir(directoryFile.rawValue)
        else { return }  // dropped: closed
        _ = directoryFile.take()  // the stream owns it now
        defer { closedir(directory) }
        let descriptor = dirfd(directory)
        var subdirectories: [String] = []
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let record = readdir(directory) {
            let name = String(cString: (UnsafeRawPointer(record) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name == "." || name == ".." { continue }
            let type = record.pointee.d_type
            let relative = DirectoryQuery.join(relativeDirectory, name)
            if type == UInt8(DT_LNK) { continue }
            if type == UInt8(DT_DIR) {
                if recursive { subdirectories.append(name) }
                continue
            }
            if type != UInt8(DT_REG) && type != UInt8(DT_UNKNOWN) { continue }
            let matching = pattern.matches(relative)
            if !matching && (type == UInt8(DT_REG) || !recursive) { continue }
            var fileStatus = stat()
            guard fstatat(descriptor, name, &fileStatus, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if fileStatus.st_mode & S_IFMT == S_IFDIR {
                if recursive { subdirectories.append(name) }
            } else if matching && fileStatus.st_mode & S_IFMT == S_IFREG {
                file(DirectoryEntry(path: DirectoryQuery.absolutePath(root: root, relative),
                                    relativePath: relative, identity: FileIdentity(fileStatus)))
            }
        }
        for name in subdirectories {
            let relative = DirectoryQuery.join(relativeDirectory, name)
            guard pattern.mayMatchInside(relative) else { continue }
            guard let child = try? Descriptor.open(name, .readOnly, options: [.directory, .noFollow], relativeTo: FileDescriptor(rawValue: descriptor)) else {
                continue  // unreadable or gone: skipped
            }
            walk(child, relativeDirectory: relative, enter: enter, file: file)
        }
    }
}
