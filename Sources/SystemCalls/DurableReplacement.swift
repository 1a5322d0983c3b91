import CFileSystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The durable replace: a new file written beside its destination under a private temp name, then
/// flushed, renamed into place and its directory flushed, so that a crash at any moment leaves the
/// old file or the new one, never a part. Dropped before ``commit(as:replace:)``, the temp file is
/// closed and unlinked.
///
/// Meant to be shared by the save, the version store and the transfers (issue 16.1); none uses it
/// yet. What it does not do, and they do around it: copying owner, mode and extended attributes
/// onto the temp file (through ``descriptor``), locking the directory, the link-and-unlink
/// fallback where `RENAME_NOREPLACE` is not supported.
public struct DurableReplacement: ~Copyable {
    /// The directory the file is written in and placed in.
    public let directoryPath: String
    /// The temp file's name in the directory.
    public let tempName: String
    private let directory: Descriptor
    /// Owns the temp file until `commit` closes it.
    private var file: Descriptor?
    /// The temp file's descriptor (owned by `file`).
    private let fileDescriptor: FileDescriptor
    private var committed = false

    /// Creates a temp file named `tempPrefix` and random hex digits in the directory at
    /// `directoryPath` (`O_EXCL`, `O_NOFOLLOW`), with exactly `permissions` whatever the umask.
    public init(
        in directoryPath: String, tempPrefix: String, permissions: FilePermissions = [.ownerReadWrite]
    ) throws(SystemCallError) {
        let directory = try Descriptor.open(directoryPath, .readOnly, options: .directory)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let name = tempPrefix + String(generator.next() as UInt64, radix: 16)
            let path = Self.join(directoryPath, name)
            guard let file = try Self.openExclusive(name, in: directory, permissions: permissions) else { continue }
            do {
                _ = try retryingInterrupts("fchmod", path: path) { fchmod(file.rawValue, permissions.rawValue) }
            } catch {
                unlinkat(directory.rawValue, name, 0)
                throw error
            }
            self.directoryPath = directoryPath
            self.tempName = name
            self.fileDescriptor = file.unowned
            self.directory = directory
            self.file = consume file
            return
        }
        throw SystemCallError(errno: .fileExists, call: "openat", path: Self.join(directoryPath, tempPrefix + "*"))
    }

    /// The new file `name` in `directory`, or nil when the name is taken.
    private static func openExclusive(
        _ name: String, in directory: borrowing Descriptor, permissions: FilePermissions
    ) throws(SystemCallError) -> Descriptor? {
        do {
            return try Descriptor.open(name, .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                       permissions: permissions, relativeTo: directory.unowned)
        } catch {
            if error.errno == .fileExists { return nil }
            throw error
        }
    }

    deinit {
        // The file and the directory close themselves; a temp file not placed goes.
        if !committed { unlinkat(directory.rawValue, tempName, 0) }
    }

    /// The temp file's path, for errors and messages.
    public var tempPath: String { Self.join(directoryPath, tempName) }

    /// The temp file, for writes and for copying attributes onto it. Do not close it.
    public var descriptor: FileDescriptor { fileDescriptor }

    /// Writes all of `bytes` at the file's offset (swift-system's `writeAll`, which retries `EINTR`
    /// and short writes).
    public func write(_ bytes: some Sequence<UInt8>) throws(SystemCallError) {
        do {
            _ = try descriptor.writeAll(bytes)
        } catch {
            throw SystemCallError(errno: (error as? Errno) ?? .ioError, call: "write", path: tempPath)
        }
    }

    /// Flushes the file (`fsync`; a failure is never retried), closes it (checked), renames it to
    /// `name` in the directory (over an existing file with `replace`, or failing with `EEXIST`
    /// without it: `RENAME_NOREPLACE`), then flushes the directory. Answers whether the directory
    /// flush succeeded: if it did not, the file is in place but the rename may not survive a power
    /// loss (the save's `durable: false`). On a thrown error, the temp file is removed and nothing
    /// was replaced.
    public consuming func commit(as name: String, replace: Bool = true) throws(SystemCallError) -> Bool {
        let destination = Self.join(directoryPath, name)
        _ = try retryingInterrupts("fsync", path: tempPath) { fsync(fileDescriptor.rawValue) }
        do {
            try file.take()!.close()
        } catch {
            throw SystemCallError(errno: error.errno, call: "close", path: tempPath)
        }
        if replace {
            _ = try retryingInterrupts("renameat", path: destination) {
                renameat(directory.rawValue, tempName, directory.rawValue, name)
            }
        } else {
            _ = try retryingInterrupts("renameat2", path: destination) {
                cfs_renameat2(directory.rawValue, tempName, directory.rawValue, name, 1 /* RENAME_NOREPLACE */)
            }
        }
        committed = true
        return (try? flushDirectory(directory, path: directoryPath)) != nil
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
