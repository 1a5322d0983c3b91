#if canImport(Glibc)
    import Glibc
#endif

/// What identifies one state of a file on disk: the inode it lives in, its size, its modification
/// and status-change times to the nanosecond, and (once known) a hash of its bytes, which catches a
/// same-size write with the times restored and tells a rewrite of the same bytes from a change.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification time, nanoseconds since the epoch.
    public var modificationTime: Int64
    /// Status-change time, nanoseconds since the epoch.
    public var changeTime: Int64
    /// XXH64 of the file's bytes (``ContentHasher``), when known.
    public var contentHash: UInt64?

    /// An identity from its parts (read back from the journal).
    public init(device: UInt64, inode: UInt64, size: Int64, modificationTime: Int64, changeTime: Int64, contentHash: UInt64? = nil) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationTime = modificationTime
        self.changeTime = changeTime
        self.contentHash = contentHash
    }

    /// The identity recorded in a `stat` result.
    public init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modificationTime = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        changeTime = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
    }

    /// The identity of the file at `path` now (symlinks followed); nil when there is none.
    public static func current(path: String) -> FileIdentity? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileIdentity(status)
    }

    /// Whether `other` describes the same file in the same state by its status alone (device,
    /// inode, size and both times; the content hash is not compared).
    public func sameState(as other: FileIdentity) -> Bool {
        device == other.device && inode == other.inode && size == other.size
            && modificationTime == other.modificationTime && changeTime == other.changeTime
    }

    /// The modification time in milliseconds since the epoch, as the protocol reports dates.
    public var modificationMilliseconds: Int64 { modificationTime / 1_000_000 }
}
