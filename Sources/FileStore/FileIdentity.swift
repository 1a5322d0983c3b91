#if canImport(Glibc)
    import Glibc
#endif

/// What identifies one state of a file on disk: the inode it lives in, its size, and its
/// modification and status-change times to the nanosecond. (A content hash joins these with safe
/// saving, to catch a same-size write with the times restored.)
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification time, nanoseconds since the epoch.
    public var modificationTime: Int64
    /// Status-change time, nanoseconds since the epoch.
    public var changeTime: Int64

    /// The identity recorded in a `stat` result.
    public init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modificationTime = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        changeTime = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
    }

    /// The modification time in milliseconds since the epoch, as the protocol reports dates.
    public var modificationMilliseconds: Int64 { modificationTime / 1_000_000 }
}
