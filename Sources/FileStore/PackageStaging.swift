import CFileSystem
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The staged tree of a package save being built: files written, cloned, linked or copied into the
/// staging directory, each flushed; then the directories given their modes and flushed, deepest
/// first. It owns no descriptor: the save keeps the staging and old-tree directories open.
struct StagedTree {
    /// The staging directory and its path.
    let stage: Int32
    let stagePath: String
    /// The package's path: errors name the package path joined with the entry's.
    let packagePath: String
    /// The old tree (the package as it is), or nil for a first save.
    let old: Int32?
    let linkUnchanged: Bool

    private(set) var cloned = 0
    private(set) var linked = 0
    private(set) var copied = 0
    private(set) var symlinks = 0
    private(set) var written = 0
    private(set) var durable = true
    /// The directories made below the stage, with the modes they get at the end.
    private var directories: [String: mode_t] = [:]
    /// Set when the file system answered that it cannot clone: the later files skip the attempt
    /// (a file created, an `ioctl` refused, the file unlinked).
    private var cloneUnsupported = false

    init(stage: Int32, stagePath: String, packagePath: String, old: Int32?, linkUnchanged: Bool) {
        self.stage = stage
        self.stagePath = stagePath
        self.packagePath = packagePath
        self.old = old
        self.linkUnchanged = linkUnchanged
    }

    /// A failure on the staged copy of `relative`; the package is unchanged.
    private func failure(_ syscall: String, _ relative: String, _ number: Int32 = errno) -> FileSystemError {
        FileSystemError(errno: number, syscall: syscall, path: PackageSave.join(packagePath, relative),
                        reason: "staging the new tree (removed); the package is unchanged")
    }

    private func failure(_ error: SystemCallError, _ relative: String) -> FileSystemError {
        failure(error.call, relative, error.errno.rawValue)
    }

    /// Writes `entry` into the staged tree.
    mutating func write(_ entry: PackageEntryWrite) throws(FileSystemError) {
        if case .directory = entry.source {
            // The directory itself, as a parent of a name inside it.
            try makeParents(of: entry.path + "/-")
            return
        }
        try makeParents(of: entry.path)
        let oldEntry = try oldLocation(of: entry.path)
        let oldStatus = oldEntry?.status
        let oldMode = oldStatus.flatMap { $0.st_mode & S_IFMT == S_IFREG ? $0.st_mode & 0o7777 : nil }
        let mode = entry.permissions?.rawValue ?? oldMode ?? 0o644
        switch entry.source {
        case .bytes(let bytes):
            let file = try create(entry.path)
            do {
                try writeAll(bytes, to: file.unowned)
            } catch {
                throw failure(error, entry.path)
            }
            try finishFile(file, entry.path, mode: mode)
            written += 1
        case .produce(let producer):
            try producer(PackageSave.join(stagePath, entry.path))
            let file: Descriptor
            do {
                file = try Descriptor.open(entry.path, .readOnly, options: .noFollow, relativeTo: FileDescriptor(rawValue: stage))
            } catch {
                throw failure(error, entry.path)
            }
            var status = stat()
            guard fstat(file.rawValue, &status) == 0 else { throw failure("fstat", entry.path) }
            guard status.st_mode & S_IFMT == S_IFREG else {
                throw FileSystemError(errno: EINVAL, syscall: "save", path: PackageSave.join(packagePath, entry.path),
                                      reason: "the producer did not create a regular file")
            }
            try finishFile(file, entry.path, mode: mode)
            written += 1
        case .directory:
            return
        case .unchanged:
            guard let oldEntry else {
                throw FileSystemError(errno: ENOENT, syscall: "fstatat", path: PackageSave.join(packagePath, entry.path),
                    reason: "an unchanged entry the package does not hold (a symlinked directory is not followed); the package is unchanged")
            }
            switch PackageSave.kind(of: oldEntry.status) {
            case .file: try copyUnchanged(entry.path, from: oldEntry, mode: mode, keepsMode: mode == oldMode)
            case .symlink: try copySymlink(entry.path, from: oldEntry)
            case .directory: throw failure("save", entry.path, EISDIR)
            case .other: throw failure("save", entry.path, EINVAL)
            }
        }
    }

    /// An entry of the old tree: the directory that holds it (open), its name there, its status.
    struct OldEntry {
        let directory: OwnedDirectory
        let name: String
        let status: stat
    }

    /// The entry `relative` of the old tree, reached one directory at a time without following a
    /// symlink (`O_NOFOLLOW | O_DIRECTORY`), so that a symlinked directory inside the package never
    /// leads a save outside it; nil when there is no such entry (for a first save, or when a
    /// component is missing, a symlink or not a directory).
    private func oldLocation(of relative: String) throws(FileSystemError) -> OldEntry? {
        guard let old else { return nil }
        var components = relative.split(separator: "/").map(String.init)
        let name = components.removeLast()
        var directory = OwnedDirectory(try PackageSave.openDirectory(".", relativeTo: old, path: packagePath))
        var walked = ""
        for component in components {
            walked = walked.isEmpty ? component : walked + "/" + component
            do {
                directory = OwnedDirectory(try Descriptor.open(component, .readOnly, options: [.directory, .noFollow],
                                                               relativeTo: directory.unowned))
            } catch {
                if error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory || error.errno == .tooManySymbolicLinkLevels {
                    return nil
                }
                throw FileSystemError(error, path: PackageSave.join(packagePath, walked))
            }
        }
        guard let status = try PackageSave.status(of: name, in: directory.rawValue, path: PackageSave.join(packagePath, relative)) else {
            return nil
        }
        return OldEntry(directory: directory, name: name, status: status)
    }

    /// Makes the directories above `relative` in the stage (mode 0700 while staging; the old tree's
    /// mode, or 0755, is given at the end).
    private mutating func makeParents(of relative: String) throws(FileSystemError) {
        let components = relative.split(separator: "/").dropLast()
        var prefix = ""
        for component in components {
            prefix = prefix.isEmpty ? String(component) : prefix + "/" + component
            if directories[prefix] != nil { continue }
            guard mkdirat(stage, prefix, 0o700) == 0 else { throw failure("mkdirat", prefix) }
            var mode: mode_t = 0o755
            if let status = try oldLocation(of: prefix)?.status, status.st_mode & S_IFMT == S_IFDIR {
                mode = status.st_mode & 0o7777
            }
            directories[prefix] = mode
        }
    }

    /// Creates the staged file `relative` (`O_EXCL`, `O_NOFOLLOW`, `O_CLOEXEC`, mode 0600 until
    /// ``finishFile(_:_:mode:)``).
    private func create(_ relative: String) throws(FileSystemError) -> Descriptor {
        do {
            return try Descriptor.open(relative, .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                       permissions: [.ownerReadWrite], relativeTo: FileDescriptor(rawValue: stage))
        } catch {
            throw failure(error, relative)
        }
    }

    /// Gives the file its mode exactly (whatever the umask), flushes it and closes it, checking the close.
    private func finishFile(_ file: consuming Descriptor, _ relative: String, mode: mode_t) throws(FileSystemError) {
        guard fchmod(file.rawValue, mode) == 0 else { throw failure("fchmod", relative) }
        do {
            try file.sync()
            try file.close()
        } catch {
            throw failure(error, relative)
        }
    }

    /// An unchanged regular file: cloned, else linked (when allowed and the mode stays, since a
    /// link shares the inode's mode with the old tree), else copied.
    private mutating func copyUnchanged(_ relative: String, from old: OldEntry, mode: mode_t, keepsMode: Bool) throws(FileSystemError) {
        let source: Descriptor
        do {
            source = try Descriptor.open(old.name, .readOnly, options: .noFollow, relativeTo: old.directory.unowned)
        } catch {
            throw FileSystemError(error, path: PackageSave.join(packagePath, relative), reason: "reading the unchanged file; the package is unchanged")
        }
        if !cloneUnsupported {
            let target = try create(relative)
            if cfs_ficlone(target.rawValue, source.rawValue) == 0 {
                try finishFile(target, relative, mode: mode)
                cloned += 1
                return
            }
            let number = errno
            guard number == EOPNOTSUPP || number == EXDEV || number == EINVAL || number == ENOTTY || number == ENOSYS else {
                throw failure("ioctl(FICLONE)", relative, number)
            }
            cloneUnsupported = true
            // The empty file goes; the name is taken again by the link or the copy.
            _ = consume target
            guard unlinkat(stage, relative, 0) == 0 else { throw failure("unlinkat", relative) }
        }
        if linkUnchanged && keepsMode {
            if linkat(old.directory.rawValue, old.name, stage, relative, 0) == 0 {
                linked += 1
                return
            }
            // A file system without hard links, or one at its link limit: copy instead.
            guard errno == EPERM || errno == EMLINK || errno == EXDEV || errno == EOPNOTSUPP else { throw failure("linkat", relative) }
        }
        // The copy reuses FileTransfer's staged file (copy_file_range, else read and write), placed
        // under the entry's name in its staged directory without replacing anything.
        let slash = relative.lastIndex(of: "/")
        let directory = slash.map { PackageSave.join(stagePath, String(relative[..<$0])) } ?? stagePath
        let name = slash.map { String(relative[relative.index(after: $0)...]) } ?? relative
        let copy = try StagedFile(directory: directory, destination: PackageSave.join(packagePath, relative))
        try copy.copyContents(from: source.rawValue, sourcePath: PackageSave.join(packagePath, relative))
        try copy.setMode(mode)
        try copy.flush()
        try copy.place(as: name, replace: false)
        copied += 1
    }

    /// An unchanged symlink: made again with the same target (`readlinkat`, `symlinkat`).
    private mutating func copySymlink(_ relative: String, from old: OldEntry) throws(FileSystemError) {
        var buffer = [CChar](repeating: 0, count: max(Int(old.status.st_size), 0) + 2)
        let length = readlinkat(old.directory.rawValue, old.name, &buffer, buffer.count - 1)
        guard length >= 0 else { throw failure("readlinkat", relative) }
        guard length < buffer.count - 1 else { throw failure("readlinkat", relative, EAGAIN) }  // it changed meanwhile
        buffer[length] = 0
        guard symlinkat(buffer, stage, relative) == 0 else { throw failure("symlinkat", relative) }
        symlinks += 1
    }

    /// Gives every staged directory its mode and flushes it, deepest first, then the stage itself
    /// (given `packageMode`). A file system that cannot flush a directory (`EINVAL`) makes the save
    /// not durable; any other failure throws.
    mutating func finish(packageMode: mode_t) throws(FileSystemError) {
        let deepestFirst = directories.sorted {
            let (left, right) = ($0.key.utf8.count { $0 == UInt8(ascii: "/") }, $1.key.utf8.count { $0 == UInt8(ascii: "/") })
            return left != right ? left > right : $0.key > $1.key
        }
        for (relative, mode) in deepestFirst {
            // Through one descriptor opened before the mode changes: a mode without read
            // permission would refuse the open that the flush needs.
            let directory = try PackageSave.openDirectory(relative, relativeTo: stage, path: PackageSave.join(stagePath, relative))
            try setModeAndFlush(directory.rawValue, mode, relative)
        }
        try setModeAndFlush(stage, packageMode, "")
    }

    private mutating func setModeAndFlush(_ directory: Int32, _ mode: mode_t, _ relative: String) throws(FileSystemError) {
        guard fchmod(directory, mode) == 0 else { throw failure("fchmod", relative) }
        do {
            try flushDirectory(FileDescriptor(rawValue: directory), path: PackageSave.join(stagePath, relative))
        } catch {
            guard error.errno == .invalidArgument else { throw failure(error, relative) }
            durable = false
        }
    }
}
