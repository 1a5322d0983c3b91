import CFileSystem
import SystemCalls
import SystemPackage
#if canImport(Glibc)
    import Glibc
#endif

/// Moving, copying and writing whole files for the workspace (document move and rename, import,
/// export), as carefully as a save: nothing is ever replaced unless asked, a new file appears whole
/// or not at all (it is written to a temp file beside its destination, flushed, then renamed into
/// place, and the directory is flushed), and a failure at any step leaves the source as it was and
/// no temp file behind. Only regular files are moved or copied.
///
/// The temp files start with ``SafeSave/tempPrefix``, so that ``SafeSave/sweepStaleTempFiles(nextTo:)``
/// removes one left by a process that was killed; while a transfer runs it holds a shared lock on
/// the destination directory, which makes a sweep leave the directory alone (and a save in that
/// directory wait for the transfer).
public enum FileTransfer {
    // MARK: - Move

    /// Moves the regular file `source` to the path `destination` (a file's path, not a directory
    /// to move into), and answers the moved file's identity there.
    ///
    /// On one file system this is one rename (the inode, and so the file's owner, mode, times and
    /// hard links, stay). Without `replace` an existing destination is never overwritten
    /// (`renameat2` with `RENAME_NOREPLACE`; where the file system lacks it, a hard link and an
    /// unlink; where it has no hard links either, a check then a rename). Across file systems the
    /// file is copied to a temp file in the destination directory (with `copy_file_range` where
    /// the kernel can, in 1 MiB pieces otherwise), which takes the source's mode, its owner where
    /// permitted, its extended attributes where possible and its access and modification times; it
    /// is flushed and renamed into place, the directory is flushed, and only then is the source
    /// unlinked and its directory flushed.
    ///
    /// When `source` and `destination` name the same file (the same path, or two hard links of one
    /// inode), nothing happens: both names stay and the call answers the file's identity.
    ///
    /// - Throws: ENOENT for a missing source; EISDIR for a directory (source or destination);
    ///   EINVAL for a symbolic link or a special file; EEXIST for an existing destination without
    ///   `replace`; EAGAIN when the source changed or was replaced while it was copied across file
    ///   systems; the calls' errors otherwise. In every case the source is where it was, unchanged,
    ///   and no temp file is left. (One case cannot be undone whole: across file systems, if the
    ///   source cannot be unlinked after the copy replaced an existing destination, the copy is
    ///   removed again and the replaced file is gone; the source's directory is checked for write
    ///   permission before anything is copied, which makes that rare.)
    /// ``move(from:to:replace:)``, and what a document following its file needs to know: the
    /// source's identity before the move (nil if it could not be read; the move's own error then
    /// says why), the file's identity after it, and whether it moved at all (false when source and
    /// destination were the same file: the source's name is still there).
    public static func moveReporting(
        from source: String, to destination: String, replace: Bool
    ) throws(FileSystemError) -> (before: FileIdentity?, after: FileIdentity, moved: Bool) {
        let before = (try? fileStatus(source, followingSymlinks: false)).map(FileIdentity.init)
        let after = try move(from: source, to: destination, replace: replace)
        let moved = (try? fileStatus(source, followingSymlinks: false)) == nil
        return (before, after, moved)
    }

    @discardableResult
    public static func move(from source: String, to destination: String, replace: Bool) throws(FileSystemError) -> FileIdentity {
        try move(from: source, to: destination, replace: replace, beforePlacing: {})
    }

    /// ``move(from:to:replace:)`` with a hook called across file systems between the copy and its
    /// placement (tests make a destination appear, or change the source, there).
    static func move(
        from source: String, to destination: String, replace: Bool, beforePlacing: () -> Void
    ) throws(FileSystemError) -> FileIdentity {
        let sourceStatus = try regularFileStatus(source)
        var found = stat()
        if lstat(destination, &found) == 0, found.st_dev == sourceStatus.st_dev, found.st_ino == sourceStatus.st_ino {
            return FileIdentity(found)
        }
        _ = try existingDestination(destination, replace: replace)
        let sourceDirectory = SafeSave.split(source).directory
        let destinationDirectory = SafeSave.split(destination).directory
        do throws(FileSystemError) {
            if replace {
                guard rename(source, destination) == 0 else { throw FileSystemError(errno: errno, syscall: "rename", path: destination) }
            } else {
                try renameNoReplace(AT_FDCWD, source, AT_FDCWD, destination, sourcePath: source, destinationPath: destination)
            }
        } catch where error.errno == EXDEV {
            return try moveAcrossFileSystems(
                from: source, to: destination, replace: replace, expected: sourceStatus, beforePlacing: beforePlacing)
        }
        // Best effort: the move is made either way.
        try? flushDirectory(at: destinationDirectory)
        if sourceDirectory != destinationDirectory { try? flushDirectory(at: sourceDirectory) }
        guard lstat(destination, &found) == 0 else { throw FileSystemError(errno: errno, syscall: "lstat", path: destination) }
        return FileIdentity(found)
    }

    private static func moveAcrossFileSystems(
        from source: String, to destination: String, replace: Bool, expected: stat, beforePlacing: () -> Void
    ) throws(FileSystemError) -> FileIdentity {
        let (sourceDirectory, _) = SafeSave.split(source)
        let (destinationDirectory, destinationName) = SafeSave.split(destination)
        // The source must be removable at the end: found out before anything is copied.
        guard access(sourceDirectory, W_OK) == 0 else {
            throw FileSystemError(errno: errno, syscall: "access", path: sourceDirectory,
                reason: "the source's directory is not writable, so the file could be copied to another file system but not removed from this one; nothing was moved")
        }
        let inputFile: Descriptor
        do {
            inputFile = try Descriptor.open(source, .readOnly, options: [.noFollow, .nonBlocking])
        } catch {
            throw FileSystemError(error)
        }
        let input = inputFile.rawValue
        var status = stat()
        guard fstat(input, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "fstat", path: source) }
        guard status.st_dev == expected.st_dev, status.st_ino == expected.st_ino else { throw sourceChanged(source) }

        let staged = try StagedFile(directory: destinationDirectory, destination: destination)
        try staged.copyContents(from: input, sourcePath: source)
        // Owner and group first (chown clears setuid and setgid), then the mode, the attributes
        // and last the times (writing the attributes does not touch the modification time).
        staged.copyOwner(status)
        try staged.setMode(status.st_mode & 0o7777)
        staged.copyExtendedAttributes(from: input)
        try staged.setTimes(access: status.st_atim, modification: status.st_mtim)
        try staged.flush()
        // A source written to, or replaced (a safe save by another program), while it was copied
        // would lose that change when unlinked: refused, before the placement and again (undoing
        // it) just before the unlink.
        func sourceUnchanged() -> Bool {
            var after = stat()
            var now = stat()
            return fstat(input, &after) == 0 && lstat(source, &now) == 0
                && now.st_dev == status.st_dev && now.st_ino == status.st_ino && after.st_size == status.st_size
                && after.st_mtim.tv_sec == status.st_mtim.tv_sec && after.st_mtim.tv_nsec == status.st_mtim.tv_nsec
        }
        beforePlacing()
        guard sourceUnchanged() else { throw sourceChanged(source) }
        try staged.place(as: destinationName, replace: replace)
        let identity = try staged.placedIdentity()
        guard sourceUnchanged() else {
            staged.removePlaced()
            throw sourceChanged(source)
        }
        guard unlink(source) == 0 else {
            let number = errno
            staged.removePlaced()
            throw FileSystemError(errno: number, syscall: "unlink", path: source,
                reason: "the file was copied to \(destination) but could not be removed here, so the copy was removed again; nothing was moved")
        }
        try? flushDirectory(at: sourceDirectory)  // best effort
        return identity
    }

    private static func sourceChanged(_ source: String) -> FileSystemError {
        FileSystemError(errno: EAGAIN, syscall: "fstat", path: source,
            reason: "the file changed or was replaced while it was copied to another file system; nothing was moved")
    }

    // MARK: - Copy and write

    /// Copies the regular file `source` (symbolic links followed) to the path `destination`,
    /// durably: a temp file in the destination directory, flushed, renamed into place (never over
    /// an existing file unless `replace`), and the directory flushed. The copy has the source's
    /// permission bits (not setuid, setgid or sticky), the process's owner and new times, as `cp`.
    /// Answers the copy's identity.
    ///
    /// - Throws: as ``move(from:to:replace:)``; a failure leaves `destination` as it was and no temp file.
    public static func copy(from source: String, to destination: String, replace: Bool) throws(FileSystemError) -> FileIdentity {
        var status = stat()
        let inputFile = try openSource(source, status: &status)
        let input = inputFile.rawValue
        let (directory, name) = SafeSave.split(destination)
        _ = try existingDestination(destination, replace: replace)
        let staged = try StagedFile(directory: directory, destination: destination)
        try staged.copyContents(from: input, sourcePath: source)
        try staged.setMode(status.st_mode & 0o777)
        try staged.flush()
        try staged.place(as: name, replace: replace)
        return try staged.placedIdentity()
    }

    /// Writes `bytes` (an export of a document's current text) to the path `destination`, durably
    /// as ``copy(from:to:replace:)``. A new file gets 0666 less the umask; a replaced file's mode
    /// is kept. Answers the file's identity.
    public static func write(_ bytes: [UInt8], to destination: String, replace: Bool) throws(FileSystemError) -> FileIdentity {
        let (directory, name) = SafeSave.split(destination)
        let existing = try existingDestination(destination, replace: replace)
        let staged = try StagedFile(directory: directory, destination: destination)
        try staged.write(bytes)
        try staged.setMode(existing.map { $0.st_mode & 0o7777 } ?? 0o666 & ~SafeSave.processUmask)
        try staged.flush()
        try staged.place(as: name, replace: replace)
        return try staged.placedIdentity()
    }

    /// Copies `source` into `directory` under `preferredName` or, when that is taken, the next free
    /// name of ``DocumentNaming/uniqueName(for:in:)`` (`report 2.txt`, ...): an import. The copy is
    /// written once to a temp file and renamed without replacing; a name taken meanwhile moves on to
    /// the next. Answers the copy's path and identity.
    ///
    /// - Throws: EINVAL for a `preferredName` that is not a file name; as ``copy(from:to:replace:)``
    ///   otherwise; EEXIST after ``DocumentNaming/maximumAttempts`` taken names.
    public static func copy(
        from source: String, intoDirectory directory: String, preferredName: String
    ) throws(FileSystemError) -> (path: String, identity: FileIdentity) {
        try DocumentNaming.checkFileName(preferredName, in: directory)
        var status = stat()
        let inputFile = try openSource(source, status: &status)
        let input = inputFile.rawValue
        let staged = try StagedFile(directory: directory, destination: DocumentNaming.join(directory, preferredName))
        try staged.copyContents(from: input, sourcePath: source)
        try staged.setMode(status.st_mode & 0o777)
        try staged.flush()
        let name = try staged.placeUnique(preferredName: preferredName)
        return (DocumentNaming.join(directory, name), try staged.placedIdentity())
    }

    /// Writes `bytes` into `directory` under `preferredName` or the next free name, as
    /// ``copy(from:intoDirectory:preferredName:)``; the file gets 0666 less the umask.
    public static func write(
        _ bytes: [UInt8], intoDirectory directory: String, preferredName: String
    ) throws(FileSystemError) -> (path: String, identity: FileIdentity) {
        try DocumentNaming.checkFileName(preferredName, in: directory)
        let staged = try StagedFile(directory: directory, destination: DocumentNaming.join(directory, preferredName))
        try staged.write(bytes)
        try staged.setMode(0o666 & ~SafeSave.processUmask)
        try staged.flush()
        let name = try staged.placeUnique(preferredName: preferredName)
        return (DocumentNaming.join(directory, name), try staged.placedIdentity())
    }

    // MARK: - Steps

    /// The status of `path` (a final symlink not followed), which must be a regular file.
    private static func regularFileStatus(_ path: String) throws(FileSystemError) -> stat {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "lstat", path: path) }
        try requireRegular(status, path: path)
        return status
    }

    private static func requireRegular(_ status: stat, path: String) throws(FileSystemError) {
        switch status.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR: throw FileSystemError(errno: EISDIR, syscall: "lstat", path: path, reason: "only regular files are moved or copied")
        case S_IFLNK: throw FileSystemError(errno: EINVAL, syscall: "lstat", path: path, reason: "a symbolic link; only regular files are moved")
        default: throw FileSystemError(errno: EINVAL, syscall: "lstat", path: path, reason: "a special file; only regular files are moved or copied")
        }
    }

    /// The source of a copy opened for reading (symlinks followed; a FIFO put there meanwhile does
    /// not block the open), with its status; it must be a regular file.
    private static func openSource(_ path: String, status: inout stat) throws(FileSystemError) -> Descriptor {
        let file: Descriptor
        do {
            file = try Descriptor.open(path, .readOnly, options: [FileDescriptor.OpenOptions(rawValue: O_NOCTTY), .nonBlocking])
        } catch {
            throw FileSystemError(error)
        }
        guard fstat(file.rawValue, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "fstat", path: path) }
        try requireRegular(status, path: path)
        return file
    }

    /// The file at `destination`, if any: nil when there is none; EISDIR for a directory; EEXIST
    /// without `replace`; EINVAL for anything but a regular file.
    private static func existingDestination(_ destination: String, replace: Bool) throws(FileSystemError) -> stat? {
        var status = stat()
        guard lstat(destination, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw FileSystemError(errno: errno, syscall: "lstat", path: destination)
        }
        let kind = status.st_mode & S_IFMT
        if kind == S_IFDIR {
            throw FileSystemError(errno: EISDIR, syscall: "lstat", path: destination, reason: "the destination is a directory; give the file's full path")
        }
        if !replace {
            throw FileSystemError(errno: EEXIST, syscall: "lstat", path: destination, reason: "the destination exists and replacing it was not asked for")
        }
        if kind != S_IFREG {
            throw FileSystemError(errno: EINVAL, syscall: "lstat", path: destination, reason: "the destination is not a regular file; only regular files are replaced")
        }
        return status
    }

    /// Renames without ever replacing: `renameat2` with `RENAME_NOREPLACE`; where the file system
    /// lacks it, a hard link (which fails on an existing name) and an unlink; where it has no hard
    /// links either, a check and a rename (the one case a file created in between is replaced).
    /// EEXIST when the destination exists; EXDEV across file systems.
    static func renameNoReplace(
        _ fromDirectory: Int32, _ from: String, _ toDirectory: Int32, _ to: String, sourcePath: String, destinationPath: String
    ) throws(FileSystemError) {
        do {
            try SystemCalls.renameNoReplace(
                from, in: FileDescriptor(rawValue: fromDirectory), to: to, in: FileDescriptor(rawValue: toDirectory),
                fromPath: sourcePath, toPath: destinationPath, checkThenRename: true)
        } catch {
            throw renameFailure(error, sourcePath: sourcePath, destinationPath: destinationPath)
        }
    }

    /// The error for a failed no-replace rename (``SystemCalls/renameNoReplace(_:in:to:in:fromPath:toPath:checkThenRename:)``).
    static func renameFailure(_ error: SystemCallError, sourcePath: String, destinationPath: String) -> FileSystemError {
        if error.errno == .fileExists && error.call == "renameat2" {
            return FileSystemError(errno: EEXIST, syscall: "renameat2", path: destinationPath, reason: "the destination exists and replacing it was not asked for")
        }
        if error.call == "unlinkat" {
            return FileSystemError(error, path: sourcePath, reason: "removing the old name after linking the new one")
        }
        return FileSystemError(error, path: destinationPath)
    }
}

/// A new file being written beside its destination under a private temp name (mode 0600), until it
/// is renamed into place: a ``DurableReplacement``. Dropped before that, it is closed and unlinked.
/// Holds a shared lock on the directory meanwhile (see ``FileTransfer``).
final class StagedFile {
    let directory: String
    /// The path the file is meant for: errors on the temp file are reported for it.
    let destination: String
    /// The temp file and the directory (which it owns: closing it releases the lock).
    private var replacement: DurableReplacement
    /// The file's inode, recorded when it is flushed.
    private var inode: ino_t = 0

    init(directory: String, destination: String) throws(FileSystemError) {
        self.directory = directory
        self.destination = destination
        let directoryDescriptor: Descriptor
        do {
            directoryDescriptor = try Descriptor.open(directory, .readOnly, options: .directory)
        } catch {
            throw FileSystemError(error)
        }
        // Best effort: without the lock (a file system without flock) only a concurrent sweep
        // could remove the temp file, and then the rename fails; nothing is lost.
        while flock(directoryDescriptor.rawValue, LOCK_SH) != 0 && errno == EINTR {}
        do {
            replacement = try DurableReplacement(
                owningDirectory: directoryDescriptor, path: directory, tempPrefix: SafeSave.tempPrefix,
                permissions: [.ownerReadWrite], access: .readWrite, exactPermissions: false)
        } catch {
            let number = error.errno.rawValue
            guard error.call == "openat" else { throw FileSystemError(error) }
            let refused = number == EACCES || number == EPERM || number == EROFS
            throw FileSystemError(errno: number, syscall: "openat", path: directory,
                reason: refused ? "no new file may be created in the directory" : "creating a temp file in the directory")
        }
    }

    private var fd: Int32 { replacement.descriptor.rawValue }

    private func failure(_ syscall: String, _ number: Int32 = errno) -> FileSystemError {
        FileSystemError(errno: number, syscall: syscall, path: destination,
            reason: "writing a temp file beside it (\(replacement.tempName), removed); the destination is unchanged")
    }

    private func failure(_ error: SystemCallError) -> FileSystemError {
        failure(error.call, error.errno.rawValue)
    }

    /// Appends `bytes`.
    func write(_ bytes: [UInt8]) throws(FileSystemError) {
        do {
            try replacement.write(bytes)
        } catch {
            throw failure(error)
        }
    }

    /// Appends the rest of `input` (from its offset): `copy_file_range` while the kernel can,
    /// then `read` and `write` in 1 MiB pieces.
    func copyContents(from input: Int32, sourcePath: String) throws(FileSystemError) {
        copying: while true {
            let copied = cfs_copy_file_range(input, fd, 1 << 30)
            if copied > 0 { continue }
            // 0 is the end, or a file system that copies nothing this way: the read loop tells.
            if copied == 0 { break }
            switch errno {
            case EINTR: continue
            case EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF, EPERM, ETXTBSY: break copying
            default: throw failure("copy_file_range")
            }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        while true {
            let got: Int
            do {
                got = try readSome(into: buffer, from: FileDescriptor(rawValue: input), path: sourcePath)
            } catch {
                throw FileSystemError(error)
            }
            if got == 0 { return }
            do {
                try writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<got]), to: replacement.descriptor)
            } catch {
                throw failure(error)
            }
        }
    }

    /// Takes `status`'s owner and group where the process may give them (root, or a group it is
    /// in); otherwise the file stays the process's.
    func copyOwner(_ status: stat) {
        if status.st_uid != geteuid() || status.st_gid != getegid() {
            _ = fchown(fd, status.st_uid, status.st_gid)
        }
    }

    func setMode(_ mode: mode_t) throws(FileSystemError) {
        guard fchmod(fd, mode) == 0 else { throw failure("fchmod") }
    }

    /// Copies the extended attributes (user attributes, ACLs, labels) of `input` where possible:
    /// one the destination's file system or the process's privileges refuse is left out.
    func copyExtendedAttributes(from input: Int32) {
        var size = cfs_flistxattr(input, nil, 0)
        guard size > 0 else { return }
        var list = [CChar](repeating: 0, count: size)
        size = cfs_flistxattr(input, &list, list.count)
        guard size > 0 else { return }
        for name in list[0..<size].split(separator: 0) {
            let name = String(decoding: name.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let length = cfs_fgetxattr(input, name, nil, 0)
            guard length >= 0 else { continue }
            var value = [UInt8](repeating: 0, count: max(length, 1))
            let got = cfs_fgetxattr(input, name, &value, value.count)
            guard got >= 0 else { continue }
            _ = cfs_fsetxattr(fd, name, value, got)
        }
    }

    func setTimes(access: timespec, modification: timespec) throws(FileSystemError) {
        let times = [access, modification]
        guard futimens(fd, times) == 0 else { throw failure("futimens") }
    }

    /// Records the file's inode, then flushes the bytes (`fsync`; a failure is never retried) and
    /// closes the file.
    func flush() throws(FileSystemError) {
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw failure("fstat") }
        inode = status.st_ino
        do {
            try replacement.finish()
        } catch {
            throw failure(error)
        }
    }

    /// Renames the file to `name` in its directory (replacing an existing file only if `replace`)
    /// and flushes the directory.
    func place(as name: String, replace: Bool) throws(FileSystemError) {
        do {
            try replacement.place(as: name, replace: replace, checkThenRename: true)
        } catch {
            throw FileTransfer.renameFailure(error, sourcePath: destination, destinationPath: DocumentNaming.join(directory, name))
        }
    }

    /// Places the file under `preferredName` or the next free name for a copy of it; answers the name.
    func placeUnique(preferredName: String) throws(FileSystemError) -> String {
        var taken = try DocumentNaming.entryNames(in: directory)
        var names = DocumentNaming.UniqueNames(preferredName)
        for _ in 0..<DocumentNaming.maximumAttempts {
            let name = names.next(avoiding: taken)
            do throws(FileSystemError) {
                try place(as: name, replace: false)
                return name
            } catch where error.errno == EEXIST {
                taken.insert(Array(name.utf8))
            }
        }
        throw FileSystemError(errno: EEXIST, syscall: "renameat2", path: destination,
            reason: "no free name after \(DocumentNaming.maximumAttempts) attempts")
    }

    /// The identity of the placed file.
    func placedIdentity() throws(FileSystemError) -> FileIdentity {
        let name = replacement.placedName ?? replacement.tempName
        var status = stat()
        guard fstatat(replacement.directory.rawValue, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw FileSystemError(errno: errno, syscall: "fstatat", path: DocumentNaming.join(directory, name))
        }
        return FileIdentity(status)
    }

    /// Undoes the placement: unlinks the placed name if it is still this file, flushes the directory.
    func removePlaced() {
        guard let placedName = replacement.placedName else { return }
        let directoryFD = replacement.directory
        var status = stat()
        if fstatat(directoryFD.rawValue, placedName, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_ino == inode {
            unlinkat(directoryFD.rawValue, placedName, 0)
            try? flushDirectory(directoryFD, path: directory)
        }
    }
}
