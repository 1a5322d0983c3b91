import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The file work of the storage locations (protocol §11.8): what lies under a storage root (the
/// documents a `workspace/moveAllToStorage` moves), the directories a move makes and the ones it
/// leaves empty, a package directory's rename, and which sync tool marks a folder (the
/// `syncTool` of `workspace/query`).
public enum StorageLocations {
    /// A document under a storage root: a regular file, or a package directory moved whole.
    public struct Item: Sendable, Equatable {
        public enum Kind: String, Sendable { case file, package }
        /// The path relative to the root, "/"-separated.
        public var relativePath: String
        public var kind: Kind
        public init(relativePath: String, kind: Kind) {
            self.relativePath = relativePath
            self.kind = kind
        }
    }

    /// The names a sync tool keeps for itself in a folder: its marker (`.stfolder`, `.sync_*.db`,
    /// `.dropbox.cache`...) and its own directories (`.stversions`). They are not documents: a move
    /// of every document leaves them where they are.
    public static func isToolsOwn(_ name: String) -> Bool {
        name == ".stversions" || name == ".stignore" || marker(name) != nil
    }

    /// The tool whose marker `name` is, if any: Syncthing `.stfolder` (a directory, or a file in
    /// older versions); Nextcloud and ownCloud `.sync_XXXXXXXXXXXX.db`, `._sync_*.db` (older) and
    /// `.sync_journal.db` with their `-wal` and `-shm` (both reported as `nextcloud`); Dropbox
    /// `.dropbox.cache` (a directory) or `.dropbox` (a file). Seafile, Unison and OneDrive leave none.
    public static func marker(_ name: String) -> SyncConflictNames.Tool? {
        if name == ".stfolder" { return .syncthing }
        if name == ".dropbox.cache" || name == ".dropbox" { return .dropbox }
        var base = Substring(name)
        for suffix in ["-wal", "-shm", "-journal"] where base.hasSuffix(suffix) {
            base = base.dropLast(suffix.count)
        }
        if (base.hasPrefix(".sync_") || base.hasPrefix("._sync_")) && base.hasSuffix(".db") && base.count > ".sync_.db".count {
            return .nextcloud
        }
        return nil
    }

    /// The tool whose marker is among `names` (the names of one directory): Syncthing first, then
    /// Nextcloud, then Dropbox, when a folder holds more than one.
    public static func tool(markedBy names: some Sequence<String>) -> SyncConflictNames.Tool? {
        var found: Set<SyncConflictNames.Tool> = []
        for name in names {
            if let tool = marker(name) { found.insert(tool) }
        }
        for tool in [SyncConflictNames.Tool.syncthing, .nextcloud, .dropbox] where found.contains(tool) { return tool }
        return nil
    }

    /// The tool whose marker is in the directory at `path` (one listing of it); nil when there is
    /// none, or the directory cannot be read.
    public static func tool(inDirectory path: String) -> SyncConflictNames.Tool? {
        guard let names = try? listDirectory(path) else { return nil }
        return tool(markedBy: names)
    }

    /// The documents under `root`, sorted by relative path: regular files, and directories
    /// `isPackage` says are packages (moved whole, not entered). Symbolic links and special files
    /// are not documents; neither are the sync tools' temporary files
    /// (``SyncConflictNames/isTemporary(_:)``) nor their markers and own directories
    /// (``isToolsOwn(_:)``). Conflict copies are documents: they move along with their file.
    public static func documents(under root: String, isPackage: (String) -> Bool) throws(FileSystemError) -> [Item] {
        var items: [Item] = []
        var rootStatus = stat()
        guard stat(root, &rootStatus) == 0 else { throw FileSystemError(errno: errno, syscall: "stat", path: root) }
        func walk(_ relative: String) throws(FileSystemError) {
            let directory = relative.isEmpty ? root : root + "/" + relative
            let names: [String]
            do {
                names = try listDirectory(directory)
            } catch {
                throw FileSystemError(error, path: directory)
            }
            for name in names.sorted() {
                if SyncConflictNames.isTemporary(name) || isToolsOwn(name) { continue }
                let path = directory + "/" + name
                let itemPath = relative.isEmpty ? name : relative + "/" + name
                var status = stat()
                guard lstat(path, &status) == 0 else { continue }  // gone meanwhile
                switch status.st_mode & S_IFMT {
                case S_IFREG: items.append(Item(relativePath: itemPath, kind: .file))
                case S_IFDIR:
                    if isPackage(path) {
                        items.append(Item(relativePath: itemPath, kind: .package))
                    } else {
                        try walk(itemPath)
                    }
                default: continue
                }
            }
        }
        try walk("")
        items.sort { $0.relativePath < $1.relativePath }
        return items
    }

    /// How many of `names` (the names of one directory) are sync conflict copies of `name`.
    public static func conflictCopies(of name: String, among names: Set<String>) -> Int {
        conflictCopyCounts(among: names)[name] ?? 0
    }

    /// For each file name of a directory that has conflict copies among `names`, how many: every
    /// name is read once (a directory of n names costs n readings, not n² as asking file by file
    /// would). A name that reads as a copy of several files (OneDrive's host may hold a dash)
    /// counts for each of them that is among `names`.
    public static func conflictCopyCounts(among names: Set<String>) -> [String: Int] {
        var counts: [String: Int] = [:]
        for other in names where !SyncConflictNames.isTemporary(other) {
            for original in Set(SyncConflictNames.candidates(other).map(\.original)) where original != other && names.contains(original) {
                counts[original, default: 0] += 1
            }
        }
        return counts
    }

    /// The real path of the directory `path` (`realpath(3)`): ENOENT when there is none, ENOTDIR
    /// when it is something else.
    public static func realDirectory(_ path: String) throws(FileSystemError) -> String {
        guard let resolved = realpath(path, nil) else {
            throw FileSystemError(errno: errno, syscall: "realpath", path: path)
        }
        defer { free(resolved) }
        let real = String(cString: resolved)
        var status = stat()
        guard stat(real, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "stat", path: path) }
        guard status.st_mode & S_IFMT == S_IFDIR else { throw FileSystemError(errno: ENOTDIR, syscall: "stat", path: path) }
        return real
    }

    /// Whether anything (a file, directory, symbolic link) has the name `path`.
    public static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// Makes the missing directories of `relativeDirectory` under `root` (mode 0777 less the
    /// umask), outermost first; answers the paths of those it made (for ``removeEmptyDirectories(_:)``
    /// to take back). A name that exists but is no directory is ENOTDIR.
    public static func makeDirectories(_ relativeDirectory: String, under root: String) throws(FileSystemError) -> [String] {
        var made: [String] = []
        var path = root
        for component in relativeDirectory.split(separator: "/") {
            path += "/" + component
            if mkdir(path, 0o777) == 0 {
                made.append(path)
                continue
            }
            let number = errno
            var status = stat()
            if number == EEXIST, stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { continue }
            removeEmptyDirectories(made)
            throw FileSystemError(errno: number == EEXIST ? ENOTDIR : number, syscall: "mkdir", path: path)
        }
        return made
    }

    /// Removes the directories at `paths` that are empty, innermost first (errors ignored: a
    /// directory that holds something stays).
    public static func removeEmptyDirectories(_ paths: [String]) {
        for path in paths.sorted(by: { $0.count > $1.count }) { _ = rmdir(path) }
    }

    /// Renames the directory `source` (a package) to `destination`, never over an existing name,
    /// on one file system (EXDEV across file systems: a package is not copied).
    public static func moveDirectory(from source: String, to destination: String) throws(FileSystemError) {
        do {
            try renameNoReplace(source, in: nil, to: destination, in: nil,
                                fromPath: source, toPath: destination, checkThenRename: true)
        } catch {
            if error.errno == .fileExists {
                throw FileSystemError(errno: EEXIST, syscall: error.call, path: destination, reason: "the destination exists and replacing it was not asked for")
            }
            if error.errno == .improperLink {
                throw FileSystemError(errno: EXDEV, syscall: error.call, path: destination, reason: "a package directory is moved by a rename, and the storage locations are on different file systems")
            }
            throw FileSystemError(error, path: destination)
        }
    }
}

/// Which sync tool marks the folder of each file of one query: the nearest marker in the file's
/// directory or an ancestor up to the query's root, each directory listed once.
public struct SyncToolFinder: Sendable {
    public let root: String
    private var byDirectory: [String: SyncConflictNames.Tool?] = [:]

    public init(root: String) {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
    }

    /// The tool marking the folder of the file at `path` (beneath the root), if any.
    public mutating func tool(forFile path: String) -> SyncConflictNames.Tool? {
        var directory = Self.parent(path)
        while true {
            let own: SyncConflictNames.Tool?
            if let cached = byDirectory[directory] {
                own = cached
            } else {
                own = StorageLocations.tool(inDirectory: directory)
                byDirectory[directory] = own
            }
            if let own { return own }
            if directory == root || directory.count <= root.count || directory == "/" { return nil }
            directory = Self.parent(directory)
        }
    }

    public static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
