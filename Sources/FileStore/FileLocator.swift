import CFileSystem
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Finds a file again after it was renamed or moved, wherever it went on its file system: an
/// `O_PATH` descriptor holds the file (not its name), and the kernel answers its current path
/// through `/proc/self/fd`. inotify on the parent directories pairs a rename only when both
/// directories are watched; a move into any other directory (or a rename of a parent directory)
/// is found this way.
///
/// An `O_PATH` descriptor neither reads nor writes, takes no lock and does not keep the file
/// system busy for anything but an unmount; it keeps a deleted file's inode until it is closed
/// (so the locator is replaced whenever the document's file is).
public final class FileLocator: @unchecked Sendable {
    // @unchecked: `file` is set in init and changed only in `deinit`, which has the object to itself.

    /// The `O_PATH` descriptor, owned by the locator: closed when the locator goes, by `deinit`'s
    /// end, or handed to a pooled thread that closes it when that may free the file.
    private var file: Descriptor?
    /// Its number, for the calls made while the locator lives.
    let descriptor: Int32
    /// The device and inode the descriptor holds.
    public let device: UInt64
    public let inode: UInt64

    /// Holds the file at `path` (symlinks followed); nil when there is none.
    public init?(path: String) {
        let fd = cfs_open_path_only(path)
        guard fd >= 0 else { return nil }
        let file = Descriptor(owningRawValue: fd)
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        self.file = consume file
        descriptor = fd
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }

    /// Closes the descriptor; on a pooled thread when the file has no name any more
    /// (``closeMayFreeFile``), not on the thread dropping the locator.
    deinit {
        // Otherwise the descriptor is closed here, as `file` goes with the locator.
        if closeMayFreeFile, let file = file.take() { closeInBackground(file) }
    }

    /// Whether closing the descriptor may free the file: it has no name left (a save's rename
    /// replaced it, or it was deleted), so this descriptor may be its last reference, and the
    /// kernel then drops its page cache and frees its blocks inside `close(2)`. For the 100 MB
    /// file a save had just replaced, that close held the server's loop 20 to 30 ms (ext4 mounted
    /// with `discard` waits for the device's discard of every block).
    var closeMayFreeFile: Bool {
        var status = stat()
        return fstat(descriptor, &status) == 0 && status.st_nlink == 0
    }

    /// Where the file is now: its current absolute path, or nil when it has no name any more
    /// (deleted, or replaced by a rename onto its name) or the path does not lead back to it.
    public var currentPath: String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBufferPointer { bytes in
            bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                readlink("/proc/self/fd/\(descriptor)", $0, bytes.count - 1)
            }
        }
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[..<count], as: UTF8.self)
        // A file without a name reads as "/old/path (deleted)"; a name that merely ends so is
        // told apart by checking the path leads back to this inode.
        guard path.hasPrefix("/"), let found = FileIdentity.current(path: path),
              found.device == device, found.inode == inode else { return nil }
        return path
    }

    /// Whether `identity` is the file this locator holds.
    public func holds(_ identity: FileIdentity) -> Bool {
        identity.device == device && identity.inode == inode
    }
}
