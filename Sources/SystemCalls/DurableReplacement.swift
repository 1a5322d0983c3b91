import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The durable replace: a new file written beside its destination under a private temp name, then
/// flushed, closed, renamed into place and its directory flushed, so that a crash at any moment
/// leaves the old file or the new one, never a part. Dropped before it is placed, the temp file is
/// closed and unlinked; a failure at any step throws and leaves the destination untouched.
///
/// Shared by the save, the version store and the transfers. The steps can be taken one at a time
/// (``finish(flushing:)``, then ``place(as:replace:checkThenRename:flushing:)``), so that a caller
/// can act in between (the save checks for a cancel and an external change after the flush, the
/// version store takes its lock before the rename), or at once with ``commit(as:replace:)``. What
/// it does not do, and they do around it: writing in pieces (through ``descriptor``), copying
/// owner, mode and extended attributes onto the temp file (through ``descriptor``), locking the
/// directory.
public struct DurableReplacement: ~Copyable {
    /// The directory the file is written in and placed in.
    public let directoryPath: String
    /// The temp file's name in the directory.
    public let tempName: String
    /// The directory when this value opened it (nil when it was given open: ``directory``).
    private let ownedDirectory: Descriptor?
    /// The directory, open (owned by `ownedDirectory`, or by the caller).
    public let directory: FileDescriptor
    /// Owns the temp file until `finish` closes it.
    private var file: Descriptor?
    /// The temp file's descriptor (owned by `file`).
    private let fileDescriptor: FileDescriptor
    /// The name the file took in the directory, once placed.
    public private(set) var placedName: String?

    /// Creates a temp file named `tempPrefix` and random hex digits in the directory at
    /// `directoryPath` (`O_EXCL`, `O_NOFOLLOW`, `O_CLOEXEC`, opened for `access`), created with
    /// `permissions` and, with `exactPermissions`, set to exactly those whatever the umask
    /// (`fchmod`).
    ///
    /// Throws what `open` answers for the directory; `openat` (naming the temp file) for the temp
    /// file, and `EEXIST` after 16 names taken; `fchmod` (the temp file is removed).
    public init(
        in directoryPath: String, tempPrefix: String, permissions: FilePermissions = [.ownerReadWrite],
        access: FileDescriptor.AccessMode = .writeOnly, exactPermissions: Bool = true
    ) throws(SystemCallError) {
        let directory = try Descriptor.open(directoryPath, .readOnly, options: .directory)
        try self.init(owningDirectory: directory, path: directoryPath, tempPrefix: tempPrefix,
                      permissions: permissions, access: access, exactPermissions: exactPermissions)
    }

    /// The same in the open directory `directory` (at `directoryPath`, which names it in errors),
    /// which this value owns from here (a lock taken on it lasts as long as this value).
    public init(
        owningDirectory directory: consuming Descriptor, path directoryPath: String, tempPrefix: String,
        permissions: FilePermissions = [.ownerReadWrite], access: FileDescriptor.AccessMode = .writeOnly,
        exactPermissions: Bool = true
    ) throws(SystemCallError) {
        let descriptor = directory.unowned
        var name = ""
        let file = try Self.createTemp(
            in: descriptor, path: directoryPath, tempPrefix: tempPrefix, permissions: permissions, access: access,
            exactPermissions: exactPermissions, name: &name)
        tempName = name
        fileDescriptor = file.unowned
        self.file = consume file
        self.directoryPath = directoryPath
        self.directory = descriptor
        ownedDirectory = consume directory
    }

    /// The same in the open directory `directory`, which the caller owns and keeps open for as long
    /// as this value lives (the save's directory, opened, guarded and locked before).
    public init(
        inOpenDirectory directory: FileDescriptor, path directoryPath: String, tempPrefix: String,
        permissions: FilePermissions = [.ownerReadWrite], access: FileDescriptor.AccessMode = .writeOnly,
        exactPermissions: Bool = true
    ) throws(SystemCallError) {
        var name = ""
        let file = try Self.createTemp(
            in: directory, path: directoryPath, tempPrefix: tempPrefix, permissions: permissions, access: access,
            exactPermissions: exactPermissions, name: &name)
        tempName = name
        fileDescriptor = file.unowned
        self.file = consume file
        self.directoryPath = directoryPath
        self.directory = directory
        ownedDirectory = nil
    }

    private static func createTemp(
        in directory: FileDescriptor, path directoryPath: String, tempPrefix: String, permissions: FilePermissions,
        access: FileDescriptor.AccessMode, exactPermissions: Bool, name chosen: inout String
    ) throws(SystemCallError) -> Descriptor {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let name = tempPrefix + String(generator.next() as UInt64, radix: 16)
            let path = join(directoryPath, name)
            guard let file = try openExclusive(name, in: directory, path: path, permissions: permissions, access: access) else {
                continue
            }
            if exactPermissions {
                do {
                    _ = try retryingInterrupts("fchmod", path: path) { fchmod(file.rawValue, permissions.rawValue) }
                } catch {
                    unlinkat(directory.rawValue, name, 0)
                    throw error
                }
            }
            chosen = name
            return file
        }
        throw SystemCallError(errno: .fileExists, call: "openat", path: join(directoryPath, tempPrefix + "*"))
    }

    /// The new file `name` in `directory`, or nil when the name is taken.
    private static func openExclusive(
        _ name: String, in directory: FileDescriptor, path: String, permissions: FilePermissions,
        access: FileDescriptor.AccessMode
    ) throws(SystemCallError) -> Descriptor? {
        do {
            return try Descriptor.open(name, access, options: [.create, .exclusiveCreate, .noFollow],
                                       permissions: permissions, relativeTo: directory)
        } catch {
            if error.errno == .fileExists { return nil }
            throw SystemCallError(errno: error.errno, call: error.call, path: path)
        }
    }

    deinit {
        // The file and the directory close themselves (in that order: members go after this body);
        // a temp file not placed goes.
        if placedName == nil { unlinkat(directory.rawValue, tempName, 0) }
    }

    /// The temp file's path, for errors and messages.
    public var tempPath: String { Self.join(directoryPath, tempName) }

    /// The temp file, for writes and for copying attributes onto it, until ``finish(flushing:)``.
    /// Do not close it.
    public var descriptor: FileDescriptor { fileDescriptor }

    /// Writes all of `bytes` at the file's offset (``writeAll(_:to:path:)-(Collection<UInt8>,_,_)``:
    /// `EINTR` and short writes retried).
    public func write(_ bytes: some Collection<UInt8>) throws(SystemCallError) {
        try writeAll(bytes, to: fileDescriptor, path: tempPath)
    }

    /// Flushes the file (`fsync`, when `flushing`; a failure is never retried: Linux may have
    /// dropped the dirty pages) and closes it, checking the close. Errors name the temp file; the
    /// temp file stays until this value is dropped or placed.
    public mutating func finish(flushing: Bool = true) throws(SystemCallError) {
        precondition(file != nil, "the temp file is finished once")
        if flushing {
            _ = try retryingInterrupts("fsync", path: tempPath) { fsync(fileDescriptor.rawValue) }
        }
        do {
            try file.take()!.close()
        } catch {
            throw SystemCallError(errno: error.errno, call: "close", path: tempPath)
        }
    }

    /// Renames the finished file to `name` (relative to the directory: `slot/name` places it in a
    /// subdirectory), over an existing file with `replace` (`renameat`), or never replacing one
    /// without it (``renameNoReplace(_:in:to:in:fromPath:toPath:checkThenRename:)``: `EEXIST` with
    /// the call `renameat2`). Then, when `flushing`, flushes the directory the name is in.
    ///
    /// Answers whether that flush succeeded: if it did not (or was not asked for), the file is in
    /// place but the rename may not survive a power loss (the save's `durable: false`). On a thrown
    /// error nothing was replaced and the temp file is still there (to be placed under another
    /// name, or removed when this value is dropped).
    @discardableResult
    public mutating func place(
        as name: String, replace: Bool, checkThenRename: Bool = false, flushing: Bool = true
    ) throws(SystemCallError) -> Bool {
        precondition(file == nil && placedName == nil, "the temp file is finished, then placed once")
        let destination = Self.join(directoryPath, name)
        if replace {
            _ = try retryingInterrupts("renameat", path: destination) {
                renameat(directory.rawValue, tempName, directory.rawValue, name)
            }
        } else {
            try renameNoReplace(tempName, in: directory, to: name, in: directory, fromPath: tempPath, toPath: destination,
                                checkThenRename: checkThenRename)
        }
        placedName = name
        guard flushing else { return false }
        if let slash = name.lastIndex(of: "/") {
            let parent = String(name[..<slash])
            return (try? flushDirectory(at: parent.isEmpty ? "/" : parent, relativeTo: directory)) != nil
        }
        return (try? flushDirectory(directory, path: directoryPath)) != nil
    }

    /// ``finish(flushing:)`` and ``place(as:replace:checkThenRename:flushing:)`` at once; on a
    /// thrown error the temp file is removed and nothing was replaced.
    public consuming func commit(as name: String, replace: Bool = true) throws(SystemCallError) -> Bool {
        try finish()
        return try place(as: name, replace: replace)
    }

    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
