import CFileSystem
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// One file of the tree a package save writes, at a relative path such as "assets/a.png" (no "..",
/// no leading "/", no empty or "." component).
///
/// The tree holds files and symlinks only: a directory exists in the new tree because a file below
/// it does, so an empty directory of the old tree is not kept.
public struct PackageEntryWrite: Sendable {
    /// Where the entry's content comes from.
    public enum Source: Sendable {
        /// The entry at the same relative path in the current package: a regular file is cloned
        /// (`ioctl(FICLONE)`) where the file system can, else hard-linked when the save's
        /// `linkUnchanged` allows it (and the mode stays), else copied; a symlink is made again with
        /// the same target (never followed).
        case unchanged
        /// New content.
        case bytes([UInt8])
        /// A writer that creates the regular file at the absolute path it is given, inside the staged
        /// tree (a SQLite store published with the backup API); the save sets its mode and flushes it
        /// afterwards.
        case produce(@Sendable (_ path: String) throws(FileSystemError) -> Void)
        /// An empty directory (a directory with entries below it exists because of them): made with
        /// the old tree's mode for it, or 0755.
        case directory
    }

    /// The path relative to the package.
    public var path: String
    /// The content.
    public var source: Source
    /// The file's permission bits; nil keeps the old entry's, or gives 0644 to a new file.
    public var permissions: FilePermissions?

    /// An entry at `path` with content from `source`.
    public init(path: String, source: Source, permissions: FilePermissions? = nil) {
        self.path = path
        self.source = source
        self.permissions = permissions
    }
}

/// How a package save put its new tree in place.
public enum PackageSaveMethod: String, Sendable {
    /// `renameat2(RENAME_EXCHANGE)`: the staged tree and the package swapped in one step.
    case exchange
    /// `renameat2(RENAME_NOREPLACE)`: there was no package yet.
    case firstSave
    /// Two renames under an intent record, where the file system cannot exchange (`EINVAL`,
    /// `ENOSYS`): the package to an old-tree name, the staged tree to the package's name.
    case renames
}

/// What a package save did.
public struct PackageSaveResult: Sendable {
    /// How the new tree was put in place.
    public var method: PackageSaveMethod
    /// Unchanged files cloned (`FICLONE`).
    public var cloned: Int
    /// Unchanged files hard-linked (shared with the old tree).
    public var linked: Int
    /// Unchanged files copied.
    public var copied: Int
    /// Unchanged symlinks made again.
    public var symlinks: Int
    /// Files written from bytes or by a producer.
    public var written: Int
    /// Where the old tree was left: `keepOldTree` when it was renamed there; the staging path when
    /// that rename failed (see ``cleanupError``; the next ``PackageSave/recoverInterruptedSave(packageAt:)``
    /// removes it); nil when it was removed or there was none.
    public var oldTree: String?
    /// Whether every flush succeeded. False when a file system could not flush a directory
    /// (`EINVAL`) or the parent's flush after the swap failed: the new tree is in place, but a
    /// power loss might bring the old one back.
    public var durable: Bool
    /// A failure after the swap, which did not undo the save: the old tree could not be removed or
    /// renamed to `keepOldTree`.
    public var cleanupError: FileSystemError?
}

/// The atomic save of a package (a directory that is one document), as `NSFileWrapper`'s write: the
/// new tree is staged beside the package, flushed whole, then swapped in by one rename.
///
/// The crash argument: every file and directory of the staged tree is flushed before the swap, the
/// swap is one `renameat2` (or, in the fallback, two renames that an intent record written before
/// them lets the next open finish or undo), and what is left beside the package is always a tree the
/// package name does not need. So a kill at any system call leaves the package name holding the old
/// tree or the new one, whole, and ``recoverInterruptedSave(packageAt:)`` removes the rest.
public enum PackageSave {
    /// Saves `entries` as the whole tree of the package at `path` (a directory, created if missing).
    ///
    /// Stages the tree in a sibling `.<name>.docsession-stage-<16 hex>` (mode 0700 until it is
    /// complete), writes every file there (`O_EXCL`, `O_NOFOLLOW`, `O_CLOEXEC`) and flushes it,
    /// flushes every directory of the staged tree (deepest first) after giving it its mode (the old
    /// tree's, or 0755), then swaps it in: `RENAME_EXCHANGE` with an existing package,
    /// `RENAME_NOREPLACE` for the first save, or the fallback's renames; flushes the parent; then
    /// removes the old tree, or renames it to `keepOldTree` (same file system only), and flushes the
    /// parent again.
    ///
    /// - Parameters:
    ///   - linkUnchanged: lets an unchanged file that cannot be cloned be hard-linked instead of
    ///     copied: it is then shared by the old and the new tree, which is safe only for files
    ///     nobody writes in place.
    ///   - exchangeUnsupported: a test hook: behave as if `RENAME_EXCHANGE` answered `EINVAL`.
    ///   - removeOldTree: false leaves the old tree where the swap put it (its path in the result's
    ///     `oldTree`), for the caller to remove later with ``removeLeftover(_:)``, off the save's
    ///     answer: the new tree is in place and the parent flushed before that, so nothing waits
    ///     on removing several megabytes; a crash first leaves a leftover the next open removes.
    ///   - source: a save as: the package whose tree the `.unchanged` entries (and the package's
    ///     mode) come from, when it is not `path`. What is at `path` is then only replaced: a
    ///     directory there is exchanged with the staged tree and disposed of as an old tree would
    ///     be; with nothing there, the staged tree is renamed in with `RENAME_NOREPLACE`.
    /// - Throws: ``FileSystemError`` naming the call, errno and path. Any failure before the swap
    ///   removes the staged tree and leaves the package untouched; `EEXIST` when a package appeared
    ///   during a first save, or when an intent record of an interrupted save waits for
    ///   ``recoverInterruptedSave(packageAt:)``; `EINVAL` for a bad or repeated relative path.
    @discardableResult
    public static func save(
        packageAt path: String, entries: [PackageEntryWrite], keepOldTree: String? = nil,
        linkUnchanged: Bool = false, exchangeUnsupported: Bool = false, removeOldTree: Bool = true, source: String? = nil
    ) throws(FileSystemError) -> PackageSaveResult {
        let (parentPath, name) = try split(path)
        try validate(entries, packagePath: path)
        let parent = try openParent(parentPath)
        let names = SiblingNames(name: name)
        let oldStatus = try status(of: name, in: parent.rawValue, path: path)
        if let oldStatus, oldStatus.st_mode & S_IFMT != S_IFDIR {
            throw FileSystemError(errno: ENOTDIR, syscall: "fstatat", path: path, reason: "a package is a directory")
        }
        let oldTree: OwnedDirectory? = oldStatus == nil ? nil : OwnedDirectory(try openDirectory(name, relativeTo: parent.rawValue, path: path))
        // Where unchanged entries come from: the package itself, or (a save as) another one.
        let contentTree: OwnedDirectory?
        var packageMode = oldStatus.map { $0.st_mode & 0o7777 } ?? 0o755
        if let source, source != path {
            let (sourceParentPath, sourceName) = try split(source)
            let sourceParent = try openParent(sourceParentPath)
            guard let sourceStatus = try status(of: sourceName, in: sourceParent.rawValue, path: source),
                  sourceStatus.st_mode & S_IFMT == S_IFDIR else {
                throw FileSystemError(errno: ENOTDIR, syscall: "fstatat", path: source, reason: "the package saved as another is not a directory")
            }
            contentTree = OwnedDirectory(try openDirectory(sourceName, relativeTo: sourceParent.rawValue, path: source))
            packageMode = sourceStatus.st_mode & 0o7777
        } else {
            contentTree = oldTree
        }

        let stageName = try makeStage(in: parent.rawValue, names: names, parentPath: parentPath)
        let stagePath = join(parentPath, stageName)
        var result = PackageSaveResult(method: .firstSave, cloned: 0, linked: 0, copied: 0, symlinks: 0, written: 0,
                                       oldTree: nil, durable: true, cleanupError: nil)
        do {
            let stage = try openDirectory(stageName, relativeTo: parent.rawValue, path: stagePath)
            var staging = StagedTree(stage: stage.rawValue, stagePath: stagePath, packagePath: source ?? path,
                                     old: contentTree?.rawValue, linkUnchanged: linkUnchanged)
            for entry in entries { try staging.write(entry) }
            try staging.finish(packageMode: packageMode)
            result.cloned = staging.cloned
            result.linked = staging.linked
            result.copied = staging.copied
            result.symlinks = staging.symlinks
            result.written = staging.written
            result.durable = staging.durable
        } catch {
            try? removeTree(stageName, in: parent.rawValue, path: stagePath)
            throw error
        }

        // The swap. Until it succeeds, a failure removes the staged tree and leaves the package.
        let leftName: String
        if oldStatus == nil {
            do {
                try renameNoReplace(stageName, in: parent.unowned, to: name, in: parent.unowned, fromPath: stagePath,
                                    toPath: path, checkThenRename: false)
            } catch {
                try? removeTree(stageName, in: parent.rawValue, path: stagePath)
                if error.errno == .fileExists {
                    throw FileSystemError(errno: EEXIST, syscall: "renameat2", path: path, reason: "the package appeared during its first save")
                }
                throw FileSystemError(error, path: path)
            }
            result.method = .firstSave
            result.durable = flushParent(parent.unowned, parentPath) && result.durable
            return result
        }
        if !exchangeUnsupported && exchange(stageName, name, in: parent.rawValue) {
            // The old tree now sits at the staging name.
            result.method = .exchange
            leftName = stageName
            result.durable = flushParent(parent.unowned, parentPath) && result.durable
        } else {
            let number = exchangeUnsupported ? EINVAL : errno
            guard number == EINVAL || number == ENOSYS else {
                try? removeTree(stageName, in: parent.rawValue, path: stagePath)
                throw FileSystemError(errno: number, syscall: "renameat2", path: path, reason: "exchanging the staged tree (removed) with the package (unchanged)")
            }
            leftName = try swapByRenames(stage: stageName, package: name, names: names, parent: parent.unowned, parentPath: parentPath, packagePath: path)
            result.method = .renames
        }
        if !removeOldTree && keepOldTree == nil && result.method == .exchange {
            result.oldTree = join(parentPath, leftName)
            return result
        }
        dispose(leftName, keepOldTree: keepOldTree, parent: parent.unowned, parentPath: parentPath, result: &result)
        return result
    }

    /// Refuses (`EINVAL`, naming the package path joined with the entry's) a relative path that is
    /// not one, a path given twice, and a file that another entry needs as a directory.
    static func validate(_ entries: [PackageEntryWrite], packagePath: String) throws(FileSystemError) {
        var files = Set<String>()
        var directories = Set<String>()
        for entry in entries {
            guard isValidRelativePath(entry.path) else {
                throw FileSystemError(errno: EINVAL, syscall: "save", path: join(packagePath, entry.path),
                    reason: "an entry's path must be relative, without \"..\", \".\" or empty components")
            }
            var components = entry.path.split(separator: "/").dropLast()
            if case .directory = entry.source {
                guard directories.insert(entry.path).inserted else {
                    throw FileSystemError(errno: EINVAL, syscall: "save", path: join(packagePath, entry.path), reason: "the path is given twice")
                }
            } else {
                guard files.insert(entry.path).inserted else {
                    throw FileSystemError(errno: EINVAL, syscall: "save", path: join(packagePath, entry.path), reason: "the path is given twice")
                }
            }
            while !components.isEmpty {
                directories.insert(components.joined(separator: "/"))
                components = components.dropLast()
            }
        }
        if let clash = files.intersection(directories).sorted().first {
            throw FileSystemError(errno: EINVAL, syscall: "save", path: join(packagePath, clash), reason: "the path is both a file and a directory of the tree")
        }
    }

    /// Creates the staging directory (mode 0700) under a fresh name, answering the name.
    private static func makeStage(in parent: Int32, names: SiblingNames, parentPath: String) throws(FileSystemError) -> String {
        for _ in 0..<16 {
            let candidate = SiblingNames.random(names.stagePrefix)
            if mkdirat(parent, candidate, 0o700) == 0 { return candidate }
            guard errno == EEXIST || errno == EINTR else {
                throw FileSystemError(errno: errno, syscall: "mkdirat", path: join(parentPath, candidate), reason: "creating the staged tree")
            }
        }
        throw FileSystemError(errno: EEXIST, syscall: "mkdirat", path: join(parentPath, names.stagePrefix + "*"))
    }

    /// `renameat2(stage, package, RENAME_EXCHANGE)`, retrying `EINTR`; false with errno set on failure.
    private static func exchange(_ stage: String, _ package: String, in parent: Int32) -> Bool {
        while true {
            if cfs_renameat2(parent, stage, parent, package, 2 /* RENAME_EXCHANGE */) == 0 { return true }
            if errno != EINTR { return false }
        }
    }

    /// Flushes the parent directory; answers whether that worked (the swap stands either way).
    static func flushParent(_ parent: FileDescriptor, _ parentPath: String) -> Bool {
        (try? flushDirectory(parent, path: parentPath)) != nil
    }

    /// Removes an old tree a save left with `removeOldTree: false` (its `oldTree`). Nothing is
    /// flushed: should the removal be lost to a crash, the next open removes the tree again. Only a
    /// name of a save's own shape is removed.
    public static func removeLeftover(_ path: String) throws(FileSystemError) {
        let (parentPath, name) = try split(path)
        guard name.hasPrefix("."), name.contains(".docsession-stage-") else {
            throw FileSystemError(errno: EINVAL, syscall: "unlinkat", path: path, reason: "not a package save's leftover")
        }
        let parent = try openParent(parentPath)
        try removeTree(name, in: parent.rawValue, path: path)
    }

    /// Removes the old tree left at `name` (or renames it to `keepOldTree`), then flushes the parent.
    /// Failures are reported in `result`, never thrown: the new tree is in place.
    private static func dispose(
        _ name: String, keepOldTree: String?, parent: FileDescriptor, parentPath: String, result: inout PackageSaveResult
    ) {
        let leftPath = join(parentPath, name)
        if let keepOldTree {
            do {
                try renameNoReplace(name, in: parent, to: keepOldTree, in: nil, fromPath: leftPath, toPath: keepOldTree, checkThenRename: false)
                result.oldTree = keepOldTree
                // The directory it went to, when it is not the parent (flushed below).
                let keptParent = (try? split(keepOldTree))?.parent ?? parentPath
                if keptParent != parentPath {
                    result.durable = (try? flushDirectory(at: keptParent)) != nil && result.durable
                }
            } catch {
                result.oldTree = leftPath
                result.cleanupError = FileSystemError(error, path: keepOldTree, reason: "keeping the old tree (left at \(leftPath))")
            }
        } else {
            do throws(FileSystemError) {
                try removeTree(name, in: parent.rawValue, path: leftPath)
            } catch {
                result.oldTree = leftPath
                result.cleanupError = error
            }
        }
        result.durable = flushParent(parent, parentPath) && result.durable
    }
}

/// A directory descriptor kept in an optional (a `Descriptor` cannot be copied).
final class OwnedDirectory {
    let descriptor: Descriptor
    init(_ descriptor: consuming Descriptor) { self.descriptor = descriptor }
    var rawValue: Int32 { descriptor.rawValue }
    var unowned: FileDescriptor { descriptor.unowned }
}

extension PackageSave {
    /// Opens the parent directory of a package (following symlinks: the parent is the caller's).
    static func openParent(_ parentPath: String) throws(FileSystemError) -> OwnedDirectory {
        do {
            return OwnedDirectory(try Descriptor.open(parentPath, .readOnly, options: .directory))
        } catch {
            throw FileSystemError(error, path: parentPath)
        }
    }
}
