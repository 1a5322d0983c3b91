import CFileSystem
import SystemCalls
import SystemPackage
#if canImport(Glibc)
    import Glibc
#endif

/// Why a save did not happen. In every case the file on disk is as it was (or, for an in-place
/// write that failed and could not be rolled back, the error names the backup that holds it).
public enum SaveError: Error, Sendable, Equatable {
    /// A system call failed.
    case fileSystem(FileSystemError)
    /// The file changed on disk since it was read or last saved (`found` is nil when it is gone);
    /// saving would overwrite someone else's change. Save with `force` to overwrite it anyway.
    case changedOnDisk(path: String, expected: FileIdentity, found: FileIdentity?)
    /// The path names a directory or a special file.
    case notRegularFile(path: String, kind: String)
    /// A create-only save (save-as to a new file) found a file at the path.
    case alreadyExists(path: String)
    /// The text holds a character the file's encoding cannot represent.
    case unencodable(offset: Int, scalar: UInt32, encoding: TextEncoding)
    /// The caller cancelled before the file was replaced.
    case cancelled
    /// The directory the save would write in is not beneath the sandbox roots (checked on the
    /// opened directory, so nothing renamed or swapped in after a check can redirect the write).
    case outsideRoots(path: String, directory: String)
}

/// Where a save's bytes go: the content producer calls ``write(_:)`` with the file's bytes in order,
/// in pieces it keeps unchanged (a rope's chunks). The sink gathers the pieces themselves, without
/// copying them, and hands them to the kernel with `pwritev` (up to 1 MiB or 1,024 pieces a call);
/// every 8 MiB it starts the writeback of what was written, so that the final `fsync` has less to
/// do. It reports progress and checks for cancellation between calls.
public final class SaveSink {
    let fd: Int32
    let path: String
    /// Said after the failure in an error's message (what the file being written is).
    let context: String?
    /// The pieces not written yet (kept alive, and so their storage, until they are) and their bytes.
    private var pending: [[UInt8]] = []
    private var pendingBytes = 0
    /// Bytes handed to the file so far.
    private(set) var offset: off_t = 0
    /// Where the last started writeback ended.
    private var writebackStart: off_t = 0
    private let progress: (Int) -> Void
    private let isCancelled: () -> Bool

    static let flushBytes = 1 << 20
    static let maximumPieces = 1024
    static let writebackBytes: off_t = 8 << 20

    init(fd: Int32, path: String, context: String? = nil, progress: @escaping (Int) -> Void, isCancelled: @escaping () -> Bool) {
        self.fd = fd
        self.path = path
        self.context = context
        self.progress = progress
        self.isCancelled = isCancelled
        pending.reserveCapacity(Self.maximumPieces)
    }

    /// The bytes written so far (including those still pending).
    public var count: Int { Int(offset) + pendingBytes }

    /// Appends `bytes` to the file. The array is kept, not copied, until it is written.
    public func write(_ bytes: [UInt8]) throws(SaveError) {
        guard !bytes.isEmpty else { return }
        pending.append(bytes)
        pendingBytes += bytes.count
        if pendingBytes >= Self.flushBytes || pending.count == Self.maximumPieces { try flush() }
    }

    /// Writes out the pending pieces: `pwritev` at the running offset, looping over short writes
    /// and EINTR (`SystemCalls.writeAll(_:to:at:path:)`).
    func flush() throws(SaveError) {
        if isCancelled() { throw .cancelled }
        guard !pending.isEmpty else { return }
        let written: Int
        do {
            written = try writeAll(pending, to: FileDescriptor(rawValue: fd), at: Int64(offset), path: path)
        } catch {
            throw .fileSystem(FileSystemError(error, reason: context))
        }
        pending.removeAll(keepingCapacity: true)
        pendingBytes = 0
        offset += off_t(written)
        if offset - writebackStart >= Self.writebackBytes {
            _ = cfs_start_writeback(fd, Int64(writebackStart), Int64(offset - writebackStart))
            writebackStart = offset
        }
        progress(Int(offset))
    }
}

/// The safe-save protocol of the design (safe-save.md, steps 1 to 13): the new bytes go to a temp
/// file in the same directory, are flushed, take on the old file's owner, mode and extended
/// attributes, and replace the file by one rename; the directory is flushed after. A crash at any
/// moment leaves the old or the new content, never a mix.
public enum SafeSave {
    /// Every temp file of ours starts with this; ``sweepStaleTempFiles(nextTo:)`` removes leftovers.
    public static let tempPrefix = ".docsession-save-"
    /// The backup of an in-place write (kept if the process dies in the middle of one).
    public static let backupPrefix = ".docsession-backup-"
    /// The most symlinks followed from the document's path to the file.
    public static let symlinkHopLimit = 40

    /// How the bytes reached the file.
    public enum Method: String, Sendable {
        /// A temp file renamed over the old one (the normal case).
        case rename
        /// Written into the existing file after a backup copy: the file has several hard links, its
        /// owner cannot be reproduced, or it cannot be replaced (a bind-mounted file: EBUSY, EXDEV).
        case inPlace
        /// Nothing was written: the file already held exactly these bytes (it is the one last read
        /// or saved, unchanged since, and the text is the one synced with it). No new modification
        /// time for a sync tool to spread.
        case unchanged
    }

    /// What to save, and how careful to be.
    public struct Request: Sendable {
        /// The document's path (a symlink is written through: the link stays, its target changes).
        public var path: String
        /// The file's identity when it was read or last saved; nil for a file that should not
        /// exist yet.
        public var expected: FileIdentity?
        /// Overwrite a file that changed on disk.
        public var force: Bool
        /// Never replace an existing file (save-as to a new path): `.alreadyExists` instead.
        public var createOnly: Bool

        /// With sandbox roots: answers whether the opened directory the save is about to write in
        /// lies beneath them; the save writes nothing when it does not.
        public var directoryGuard: (@Sendable (Int32) -> Bool)?

        /// The content hash of the file `expected` describes, computed when the check for an
        /// external change needs it and `expected` carries none yet (the caller's background hash
        /// of a file just read or saved has not finished: on a busy machine it may take long). So
        /// whether a touched file is a conflict never depends on how busy the machine is.
        public var expectedHash: (@Sendable () -> UInt64?)?

        /// The locks per file across processes (``FileLocks``): the save waits for the file's, so
        /// that no other server's save and no coordinated command writes at the same time; nil:
        /// only the directory's lock (step 13) is taken.
        public var locks: FileLocks?

        /// The file's lock across processes, taken already by the caller (``takeLock(_:)`` and
        /// ``FileLocks/Pending/wait(interval:longest:isCancelled:)``, a wait that holds no thread): the save
        /// uses it if it is the lock of the file the save writes, and releases it when done; else
        /// the save takes the lock itself, waiting on its thread.
        public var heldLock: FileLocks.Held?

        public init(
            path: String, expected: FileIdentity?, force: Bool = false, createOnly: Bool = false,
            directoryGuard: (@Sendable (Int32) -> Bool)? = nil, expectedHash: (@Sendable () -> UInt64?)? = nil,
            locks: FileLocks? = nil
        ) {
            self.locks = locks
            self.path = path
            self.expected = expected
            self.force = force
            self.createOnly = createOnly
            self.directoryGuard = directoryGuard
            self.expectedHash = expectedHash
        }
    }

    /// What a save did.
    public struct Outcome: Sendable, Equatable {
        /// The file written (the end of any symlink chain).
        public var path: String
        /// The new file's identity (without a content hash: hashing on the save's path cost 8% of a
        /// 10 MB save; the caller hashes the text it wrote off that path, and until then a check
        /// that needs the hash computes it, see ``Request/expectedHash``).
        public var identity: FileIdentity
        /// Bytes written.
        public var size: Int
        /// Whether the directory was flushed too (if that fsync failed the save happened but a
        /// power loss could still undo the rename).
        public var durable: Bool
        public var method: Method

        public init(path: String, identity: FileIdentity, size: Int, durable: Bool, method: Method) {
            (self.path, self.identity, self.size, self.durable, self.method) = (path, identity, size, durable, method)
        }
    }

    /// Takes the lock across processes of the file `request` writes without waiting, for a caller
    /// that would rather not hold a thread while another process holds it: nil when there is
    /// nothing to wait for (the lock is in `request.heldLock` now, or the request takes no lock, or
    /// its path cannot be resolved: the save reports that); else the pending lock to wait on,
    /// after which the caller sets `heldLock` and saves. Blocks (opens the lock file).
    public static func takeLock(_ request: inout Request) throws(SaveError) -> FileLocks.Pending? {
        guard let locks = request.locks, request.heldLock == nil, let target = try? resolveSymlinks(request.path) else {
            return nil
        }
        do throws(FileSystemError) {
            switch try locks.attempt(target, exclusive: true) {
            case .held(let held):
                request.heldLock = held
                return nil
            case .busy(let pending):
                return pending
            }
        } catch {
            throw .fileSystem(error)
        }
    }

    /// Saves the bytes `content` writes into `sink`, following safe-save.md's protocol.
    ///
    /// - Parameters:
    ///   - progress: bytes written so far.
    ///   - isCancelled: checked between writes; a cancel before the rename leaves the file alone.
    ///   - content: writes the file's bytes in order into the sink.
    public static func save(
        _ request: Request,
        progress: @escaping (Int) -> Void = { _ in },
        isCancelled: @escaping () -> Bool = { false },
        content: (SaveSink) throws(SaveError) -> Void
    ) throws(SaveError) -> Outcome {
        // 1. The real file at the end of any symlink chain, and its directory, opened once.
        let target = try resolveSymlinks(request.path)
        // 0. The file's own lock across processes, waited for (cancellable) before anything else.
        var held: FileLocks.Held? = nil
        if let taken = request.heldLock, taken.path == target {
            held = taken
        } else if let locks = request.locks {
            request.heldLock?.release()  // another file's (the link was changed meanwhile)
            do throws(FileSystemError) {
                held = try locks.lock(target, exclusive: true, isCancelled: isCancelled)
            } catch {
                throw .fileSystem(error)
            }
            if held == nil { throw .cancelled }
        }
        defer { held?.release() }
        let (directory, name) = split(target)
        let directoryDescriptor: Descriptor
        do {
            directoryDescriptor = try Descriptor.open(directory, .readOnly, options: .directory)
        } catch {
            throw .fileSystem(FileSystemError(error))
        }
        let directoryFD = directoryDescriptor.rawValue
        // With sandbox roots, the directory as opened (everything below acts through it).
        if let directoryGuard = request.directoryGuard, !directoryGuard(directoryFD) {
            throw .outsideRoots(path: request.path, directory: directory)
        }
        // 13. One save at a time per directory across processes (in-process the document store
        // runs one save per document): an advisory lock on the directory, never on the target,
        // whose inode the rename replaces. It also tells the sweep that no save of ours is running.
        while flock(directoryFD, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .fileSystem(FileSystemError(errno: errno, syscall: "flock", path: directory)) }
        }
        // Unlocked before the descriptor closes (at the end of this scope).
        defer { flock(directoryFD, LOCK_UN) }

        // 2. The target as it is now.
        let existing = try status(directoryFD, name, path: target)
        if let existing {
            let kind = existing.st_mode & S_IFMT
            guard kind == S_IFREG else { throw .notRegularFile(path: target, kind: kind == S_IFDIR ? "directory" : "special file") }
            if request.createOnly { throw .alreadyExists(path: target) }
            // rename() would silently replace a file the user may not write (and root may write
            // anything): refuse read-only files.
            if faccessat(directoryFD, name, W_OK, AT_EACCESS) != 0 {
                throw .fileSystem(FileSystemError(errno: errno, syscall: "faccessat", path: target))
            }
            if existing.st_mode & 0o222 == 0 {
                throw .fileSystem(FileSystemError(errno: EACCES, syscall: "faccessat", path: target, reason: "the file is read-only (no write permission for anyone)"))
            }
        }
        // 3. An external change since the file was read or saved: refused unless forced. A file
        // that vanished is recreated (there is nothing of anyone's to overwrite).
        if let existing, let expected = request.expected, !request.force {
            try checkUnchanged(
                directoryFD, name, path: target, expected: expected, expectedHash: request.expectedHash,
                now: FileIdentity(existing))
        }

        // 4. The method.
        var method = Method.rename
        if let existing, existing.st_nlink > 1 || !canReproduceOwner(existing) { method = .inPlace }

        if method == .rename {
            do throws(SaveError) {
                return try saveByRename(
                    directoryFD: directoryFD, directory: directory, name: name, target: target, existing: existing,
                    request: request, progress: progress, isCancelled: isCancelled, content: content)
            } catch .fileSystem(let error) where existing != nil && error.syscall.hasPrefix("rename")
                && (error.errno == EBUSY || error.errno == EXDEV) {
                // The file cannot be replaced (a bind mount of a single file): write in place.
                method = .inPlace
            }
        }
        return try saveInPlace(
            directoryFD: directoryFD, name: name, target: target, existing: existing!, request: request,
            progress: progress, isCancelled: isCancelled, content: content)
    }

    // MARK: - Rename

    private static func saveByRename(
        directoryFD: Int32, directory: String, name: String, target: String, existing: stat?, request: Request,
        progress: @escaping (Int) -> Void, isCancelled: @escaping () -> Bool, content: (SaveSink) throws(SaveError) -> Void
    ) throws(SaveError) -> Outcome {
        // 5. A private temp file beside the target (never $TMPDIR: rename across file systems
        // fails), created 0600 in the directory as opened; its mode is set in step 7. Dropped
        // before it is placed (any error below), it is closed and unlinked (12).
        var replacement: DurableReplacement
        do {
            replacement = try DurableReplacement(
                inOpenDirectory: FileDescriptor(rawValue: directoryFD), path: directory, tempPrefix: tempPrefix,
                permissions: [.ownerReadWrite], access: .readWrite, exactPermissions: false)
        } catch {
            throw .fileSystem(tempFileFailure(error, directory: directory))
        }
        let tempName = replacement.tempName
        let tempFD = replacement.descriptor.rawValue
        // 6. Every byte.
        // Failures on the temp file are reported for the document's file (the temp file is gone by
        // the time anyone reads the error), saying where they happened.
        let context = "writing the new content to a temp file beside it (\(tempName), removed); the file is unchanged"
        func failure(_ syscall: String, _ number: Int32 = errno) -> SaveError {
            .fileSystem(FileSystemError(errno: number, syscall: syscall, path: target, reason: context))
        }
        let sink = SaveSink(fd: tempFD, path: target, context: context, progress: progress, isCancelled: isCancelled)
        try content(sink)
        try sink.flush()
        // 7. Owner and group, then the mode (chown clears setuid and setgid), then the extended
        // attributes (ACLs among them). A new file gets 0666 less the umask, as any new file.
        if let existing {
            if existing.st_uid != geteuid() || existing.st_gid != getegid() {
                guard fchown(tempFD, existing.st_uid, existing.st_gid) == 0 else { throw failure("fchown") }
            }
            guard fchmod(tempFD, existing.st_mode & 0o7777) == 0 else { throw failure("fchmod") }
            try copyExtendedAttributes(from: target, to: tempFD, context: context)
        } else if let inherited = try defaultACL(of: directory) {
            // The directory has a default ACL: the kernel would ignore the umask and give a new
            // file that ACL limited by the creation mode 0666 (what `touch` gets). The temp file
            // was created 0600, so its inherited ACL is masked: set the one a 0666 file gets.
            let access = Self.aclForNewFile(inherited, mode: 0o666)
            guard cfs_fsetxattr(tempFD, "system.posix_acl_access", access, access.count) == 0 else { throw failure("fsetxattr") }
        } else {
            guard fchmod(tempFD, 0o666 & ~processUmask) == 0 else { throw failure("fchmod") }
        }
        // 8. Flushed before the rename, and close checked. A failed fsync is never retried (Linux
        // may have marked the pages clean): the save fails and the old file stays.
        do {
            try replacement.finish()
        } catch {
            throw failure(error.call, error.errno.rawValue)
        }
        if isCancelled() { throw .cancelled }
        // 3, again: a change made while the temp file was written is not overwritten either.
        if let existing, !request.force {
            let now = try status(directoryFD, name, path: target)
            guard let now, FileIdentity(now).sameState(as: FileIdentity(existing)) else {
                throw .changedOnDisk(path: target, expected: request.expected ?? FileIdentity(existing), found: now.map(FileIdentity.init))
            }
        }
        // 9. Into place: over the file, or for a new one never over a file that appeared meanwhile
        // (renameat2 with RENAME_NOREPLACE; where the file system lacks it, link and unlink).
        // 10. Then the directory entry flushed; if that fails the save stands but is not durable.
        let durable: Bool
        do {
            durable = try replacement.place(as: name, replace: !(request.createOnly || existing == nil))
        } catch {
            if error.errno == .fileExists && error.call == "renameat2" { throw .alreadyExists(path: target) }
            throw .fileSystem(FileSystemError(error, path: target))
        }
        // 11. The new identity, from the file now in place (the content hash is the caller's to
        // add: it can compute it off the critical path from what it wrote).
        let identity = FileIdentity(try status(directoryFD, name, path: target) ?? stat())
        return Outcome(path: target, identity: identity, size: sink.count, durable: durable, method: .rename)
    }

    /// The error for a temp file (or backup) that could not be created in `directory`: the user's
    /// concern is the directory, not our temp name.
    private static func tempFileFailure(_ error: SystemCallError, directory: String) -> FileSystemError {
        let number = error.errno.rawValue
        guard error.call == "openat" else { return FileSystemError(error) }
        if number == EEXIST { return FileSystemError(errno: EEXIST, syscall: "openat", path: directory) }
        let refused = number == EACCES || number == EPERM || number == EROFS
        return FileSystemError(errno: number, syscall: "openat", path: directory,
            reason: refused ? "no new file may be created in the directory, and a safe save needs one beside the file" : "creating a temp file in the directory")
    }

    // MARK: - In place

    /// Writes into the existing file (keeping its inode: hard links, owner): first a backup copy
    /// beside it, flushed; then the new bytes, truncate, fsync; then the backup goes. If writing
    /// fails the backup is copied back; if even that fails the backup stays and the error names it.
    private static func saveInPlace(
        directoryFD: Int32, name: String, target: String, existing: stat, request: Request,
        progress: @escaping (Int) -> Void, isCancelled: @escaping () -> Bool, content: (SaveSink) throws(SaveError) -> Void
    ) throws(SaveError) -> Outcome {
        let (directory, _) = split(target)
        let file: Descriptor
        do {
            file = try Descriptor.open(name, .readWrite, options: [.noFollow, .nonBlocking], relativeTo: FileDescriptor(rawValue: directoryFD))
        } catch {
            throw .fileSystem(FileSystemError(error, path: target))
        }
        let fileFD = file.rawValue
        // The backup: a byte copy of the file as it is (closed after the defer below unlinks it).
        var backupName = ""
        let backup = try createBackupFile(directoryFD, directory: directory, inode: UInt64(existing.st_ino), name: &backupName)
        let backupFD = backup.rawValue
        let backupPath = directory == "/" ? "/" + backupName : directory + "/" + backupName
        var keepBackup = false
        defer { if !keepBackup { unlinkat(directoryFD, backupName, 0) } }
        try copyBytes(from: fileFD, to: backupFD, fromPath: target, toPath: backupPath)
        guard fsync(backupFD) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "fsync", path: backupPath)) }
        try? flushDirectory(FileDescriptor(rawValue: directoryFD), path: directory)
        if isCancelled() { throw .cancelled }

        let sink = SaveSink(fd: fileFD, path: target, progress: progress, isCancelled: isCancelled)
        do throws(SaveError) {
            try content(sink)
            try sink.flush()
            guard ftruncate(fileFD, sink.offset) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "ftruncate", path: target)) }
            guard fsync(fileFD) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "fsync", path: target)) }
        } catch {
            // Put the old bytes back.
            do throws(SaveError) {
                try copyBytes(from: backupFD, to: fileFD, fromPath: backupPath, toPath: target)
                guard fsync(fileFD) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "fsync", path: target)) }
            } catch {
                keepBackup = true
                if case .fileSystem(var detail) = error {
                    detail.message += "; the file may be incomplete: its previous content is in \(backupPath)"
                    throw .fileSystem(detail)
                }
            }
            throw error
        }
        var status = stat()
        guard fstat(fileFD, &status) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "fstat", path: target)) }
        do {
            try file.close()
        } catch {
            throw .fileSystem(FileSystemError(error, path: target))
        }
        return Outcome(path: target, identity: FileIdentity(status), size: sink.count, durable: true, method: .inPlace)
    }

    /// What ``restoreInterruptedSave(of:)`` did: the backup it restored (now deleted), when that
    /// backup was written (nanoseconds since 1970), and the bytes put back.
    public struct RestoredSave: Sendable, Equatable {
        public var backup: String
        public var date: Int64
        public var size: Int
    }

    /// Puts back the content an in-place save killed in the middle of writing left in its backup
    /// (`.docsession-backup-<inode>-<random>` beside the file, flushed before the file was touched):
    /// the file, part new and part old, gets the old bytes again, in place (its inode, links and
    /// owner stay), flushed, and the backup goes. A backup whose lock is held belongs to a save
    /// still running (in this process or another) and is left alone. The text that save was writing
    /// is the journal's to bring back (its base is the restored text). Blocks: run it on the
    /// opening thread, before the file is read. nil when there was nothing to restore (or it could
    /// not be: the backup then stays for the next open).
    public static func restoreInterruptedSave(of path: String) -> RestoredSave? {
        let target = (try? resolveSymlinks(path)) ?? path
        guard let status = try? fileStatus(target), status.st_mode & S_IFMT == S_IFREG else { return nil }
        let (directory, _) = split(target)
        let prefix = backupPrefix + String(UInt64(status.st_ino), radix: 16) + "-"
        guard let entries = try? DocumentNaming.entryNames(in: directory) else { return nil }
        let names = entries.map { String(decoding: $0, as: UTF8.self) }.filter { $0.hasPrefix(prefix) }
        for name in names.sorted() {
            let backupPath = directory == "/" ? "/" + name : directory + "/" + name
            guard let backup = try? Descriptor.open(backupPath, .readOnly, options: [.noFollow]),
                  (try? backup.tryLockExclusive(path: backupPath)) == true
            else { continue }
            var backupStatus = stat()
            guard fstat(backup.rawValue, &backupStatus) == 0, backupStatus.st_mode & S_IFMT == S_IFREG,
                  let file = try? Descriptor.open(target, .writeOnly, options: [.noFollow])
            else { continue }
            do {
                try copyBytes(from: backup.rawValue, to: file.rawValue, fromPath: backupPath, toPath: target)
                try file.sync(path: target)
            } catch {
                continue
            }
            try? removeFile(backupPath)
            try? flushDirectory(at: directory)
            let date = Int64(backupStatus.st_mtim.tv_sec) * 1_000_000_000 + Int64(backupStatus.st_mtim.tv_nsec)
            return RestoredSave(backup: name, date: date, size: Int(backupStatus.st_size))
        }
        return nil
    }

    /// Copies all of `from` (from its start) over `to` (from its start, truncated to the length).
    private static func copyBytes(from: Int32, to: Int32, fromPath: String, toPath: String) throws(SaveError) {
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        do {
            while true {
                let got = try readSome(into: buffer, from: FileDescriptor(rawValue: from), at: offset, path: fromPath)
                if got == 0 { break }
                try writeAll(UnsafeRawBufferPointer(rebasing: buffer[..<got]), to: FileDescriptor(rawValue: to), at: offset, path: toPath)
                offset += Int64(got)
            }
        } catch {
            throw .fileSystem(FileSystemError(error))
        }
        guard ftruncate(to, off_t(offset)) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "ftruncate", path: toPath)) }
    }

    // MARK: - Steps

    /// Follows symlinks from `path` to a path that is not one (which may not exist yet: a dangling
    /// link is written through, creating its target). Relative links resolve against the link's
    /// directory. More than ``symlinkHopLimit`` links: ELOOP.
    public static func resolveSymlinks(_ path: String) throws(SaveError) -> String {
        var current = path
        for _ in 0...symlinkHopLimit {
            var status = stat()
            if lstat(current, &status) != 0 {
                if errno == ENOENT { return current }
                throw .fileSystem(FileSystemError(errno: errno, syscall: "lstat", path: current))
            }
            guard status.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink(current, &buffer, Int(PATH_MAX))
            guard length >= 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "readlink", path: current)) }
            let link = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = link.hasPrefix("/") ? link : split(current).directory.appendingPathComponent(link)
        }
        throw .fileSystem(FileSystemError(errno: ELOOP, syscall: "readlink", path: path, reason: "more than \(symlinkHopLimit) symbolic links"))
    }

    /// The directory and the name of an absolute path.
    static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    /// `fstatat` without following a final symlink; nil when nothing is there.
    private static func status(_ directoryFD: Int32, _ name: String, path: String) throws(SaveError) -> stat? {
        var result = stat()
        if fstatat(directoryFD, name, &result, AT_SYMLINK_NOFOLLOW) == 0 { return result }
        if errno == ENOENT { return nil }
        throw .fileSystem(FileSystemError(errno: errno, syscall: "fstatat", path: path))
    }

    /// Refuses a file whose identity differs from `expected`, unless its bytes still hash the same
    /// (then only its times changed: a `touch`, or a rewrite of the same bytes).
    private static func checkUnchanged(
        _ directoryFD: Int32, _ name: String, path: String, expected: FileIdentity,
        expectedHash: (@Sendable () -> UInt64?)?, now: FileIdentity
    ) throws(SaveError) {
        if now.sameState(as: expected) { return }
        if now.size == expected.size, let hash = expected.contentHash ?? expectedHash?() {
            if let file = try? Descriptor.open(name, .readOnly, options: [.noFollow, .nonBlocking], relativeTo: FileDescriptor(rawValue: directoryFD)),
               let (found, _) = ContentHasher.hashFile(fd: file.rawValue), found == hash {
                return
            }
        }
        throw .changedOnDisk(path: path, expected: expected, found: now)
    }

    /// Whether a new file made by this process can take `existing`'s owner and group.
    private static func canReproduceOwner(_ existing: stat) -> Bool {
        if geteuid() == 0 { return true }
        guard existing.st_uid == geteuid() else { return false }
        if existing.st_gid == getegid() { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let got = getgroups(count, &groups)
        return got > 0 && groups[0..<Int(got)].contains(existing.st_gid)
    }

    /// The backup of an in-place write: an exclusive, private (0600) new file with a random name
    /// after ``backupPrefix`` in the directory (`name` is set to it).
    private static func createBackupFile(_ directoryFD: Int32, directory: String, inode: UInt64, name chosen: inout String) throws(SaveError) -> Descriptor {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            // Named after the file's inode (which an in-place save keeps), so that the next open of
            // the file finds it (``restoreInterruptedSave(of:)``), and locked while the save runs,
            // so that nobody takes a live save's backup for a dead one's.
            let name = backupPrefix + String(inode, radix: 16) + "-" + String(generator.next() as UInt64, radix: 16)
            do {
                let file = try Descriptor.open(
                    name, .readWrite, options: [.create, .exclusiveCreate, .noFollow], permissions: [.ownerReadWrite],
                    relativeTo: FileDescriptor(rawValue: directoryFD))
                _ = try? file.tryLockExclusive(path: name)
                chosen = name
                return file
            } catch {
                if error.errno == .fileExists { continue }
                throw .fileSystem(tempFileFailure(error, directory: directory))
            }
        }
        throw .fileSystem(FileSystemError(errno: EEXIST, syscall: "openat", path: directory))
    }

    /// Copies the extended attributes (user attributes, ACLs, security labels) of `source` onto the
    /// temp file. A file system without them is fine; attributes the process may not set
    /// (`trusted.*`, `security.*` without privilege) are skipped, every other failure fails the save.
    private static func copyExtendedAttributes(from source: String, to fd: Int32, context: String) throws(SaveError) {
        let names = try listAttributes(source)
        for name in names {
            var size = cfs_lgetxattr(source, name, nil, 0)
            guard size >= 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "lgetxattr", path: source)) }
            var value = [UInt8](repeating: 0, count: max(Int(size), 1))
            size = cfs_lgetxattr(source, name, &value, value.count)
            guard size >= 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "lgetxattr", path: source)) }
            if cfs_fsetxattr(fd, name, value, Int(size)) != 0 {
                let number = errno
                let privileged = name.hasPrefix("trusted.") || name.hasPrefix("security.")
                if privileged && (number == EPERM || number == EACCES || number == ENOTSUP) { continue }
                throw .fileSystem(FileSystemError(errno: number, syscall: "fsetxattr", path: source, reason: "copying the attribute \(name), \(context)"))
            }
        }
    }

    private static func listAttributes(_ path: String) throws(SaveError) -> [String] {
        while true {
            let size = cfs_llistxattr(path, nil, 0)
            if size < 0 {
                if errno == ENOTSUP { return [] }
                throw .fileSystem(FileSystemError(errno: errno, syscall: "llistxattr", path: path))
            }
            if size == 0 { return [] }
            var list = [CChar](repeating: 0, count: Int(size))
            let got = cfs_llistxattr(path, &list, list.count)
            if got < 0 {
                if errno == ERANGE { continue }  // it grew in between
                throw .fileSystem(FileSystemError(errno: errno, syscall: "llistxattr", path: path))
            }
            return list[0..<got].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        }
    }

    /// The directory's default ACL (the `system.posix_acl_default` attribute), if it has one.
    private static func defaultACL(of directory: String) throws(SaveError) -> [UInt8]? {
        let name = "system.posix_acl_default"
        let size = cfs_lgetxattr(directory, name, nil, 0)
        if size < 0 {
            if errno == ENODATA || errno == ENOTSUP { return nil }
            throw .fileSystem(FileSystemError(errno: errno, syscall: "lgetxattr", path: directory))
        }
        var value = [UInt8](repeating: 0, count: Int(size))
        let got = cfs_lgetxattr(directory, name, &value, value.count)
        guard got >= 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "lgetxattr", path: directory)) }
        return got > 4 ? Array(value[0..<got]) : nil
    }

    /// The access ACL the kernel gives a file created with `mode` in a directory whose default ACL
    /// is `inherited` (posix_acl_create_masq): the owner, the mask (or the owning group when there
    /// is no mask) and others limited by the mode; named entries unchanged. Linux's xattr format:
    /// a 4-byte version, then 8-byte entries (tag, permissions, id), little-endian.
    static func aclForNewFile(_ inherited: [UInt8], mode: mode_t) -> [UInt8] {
        var acl = inherited
        let hasMask = stride(from: 4, to: acl.count - 7, by: 8).contains { acl[$0] == 0x10 }
        for offset in stride(from: 4, to: acl.count - 7, by: 8) {
            let tag = UInt16(acl[offset]) | UInt16(acl[offset + 1]) << 8
            let limit: UInt8
            switch tag {
            case 0x01: limit = UInt8((mode >> 6) & 7)  // ACL_USER_OBJ
            case 0x04 where !hasMask, 0x10: limit = UInt8((mode >> 3) & 7)  // ACL_GROUP_OBJ, ACL_MASK
            case 0x20: limit = UInt8(mode & 7)  // ACL_OTHER
            default: continue
            }
            acl[offset + 2] &= limit
        }
        return acl
    }

    /// The process's umask, read without changing it (umask(2) would, for every thread).
    public static let processUmask: mode_t = {
        if let status = try? readSmallFile("/proc/self/status"),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
           let value = mode_t(line.dropFirst(6).trimmingCharacters(), radix: 8) {
            return value
        }
        return 0o022
    }()

    private static func readSmallFile(_ path: String) throws -> String {
        guard let file = try? Descriptor.open(path, .readOnly) else { return "" }
        return String(decoding: (try? readToEnd(from: file.unowned, path: path)) ?? [], as: UTF8.self)
    }

    // MARK: - Sweeping

    /// Removes our temp files left next to `path` by a save that was killed (SIGKILL runs no exit
    /// hooks). Taken under the directory lock every save holds, so no running save's temp file is
    /// touched. Backups of in-place writes are left alone: one may hold the only whole copy.
    /// Answers the names removed.
    ///
    /// With `directoryGuard` (a save's, under sandbox roots), the directory as opened is swept only
    /// if the guard accepts it: a save as sweeps only where it may write.
    @discardableResult
    public static func sweepStaleTempFiles(
        nextTo path: String, directoryGuard: (@Sendable (Int32) -> Bool)? = nil
    ) -> [String] {
        let (directory, _) = split(path)
        guard let directoryDescriptor = try? Descriptor.open(directory, .readOnly, options: .directory) else { return [] }
        let directoryFD = directoryDescriptor.rawValue
        if let directoryGuard, !directoryGuard(directoryFD) { return [] }
        // Only if no save holds the directory right now; otherwise the next open sweeps.
        guard flock(directoryFD, LOCK_EX | LOCK_NB) == 0 else { return [] }
        defer { flock(directoryFD, LOCK_UN) }
        let listFD = dup(directoryFD)
        guard listFD >= 0 else { return [] }
        let duplicate = Descriptor(owningRawValue: listFD)
        guard let stream = fdopendir(duplicate.rawValue) else { return [] }  // dropped: closed
        _ = duplicate.take()  // the stream owns it now
        defer { closedir(stream) }
        var removed: [String] = []
        while let entry = readdir(stream) {
            // The name is read up to its NUL through a pointer: loading the `d_name` member would
            // copy all 256 bytes of the declared array, past the end of a short record, and a
            // record at the end of readdir's buffer then reads past its mapping (SIGSEGV).
            let name = String(cString: UnsafeRawPointer(entry).advanced(by: direntNameOffset).assumingMemoryBound(to: CChar.self))
            guard name.hasPrefix(tempPrefix) else { continue }
            var status = stat()
            guard fstatat(directoryFD, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            if unlinkat(directoryFD, name, 0) == 0 { removed.append(name) }
        }
        return removed
    }
}

/// Where a directory entry's name starts in its record.
private let direntNameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!

extension String {
    /// `self` joined with a relative path by a slash.
    fileprivate func appendingPathComponent(_ component: String) -> String {
        hasSuffix("/") ? self + component : self + "/" + component
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
