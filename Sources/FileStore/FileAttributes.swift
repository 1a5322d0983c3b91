import CFileSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What a file is apart from its content: its permission bits, owner, group and extended
/// attributes (ACLs included), and whether this process may write it. A change of these alone
/// (`chmod`, `chown`, `setfattr`, `setfacl`, `chattr`) changes only the file's status-change time,
/// which ``FileIdentity`` cannot tell from a same-size write with the modification time put back.
public struct FileAttributes: Sendable, Hashable {
    /// The file these are the attributes of.
    public var device: UInt64
    public var inode: UInt64
    /// The permission bits, with set-user-ID, set-group-ID and sticky (`st_mode & 0o7777`).
    public var permissions: UInt32
    public var owner: UInt32
    public var group: UInt32
    /// XXH64 of the extended attributes' names and values, in the order the kernel lists them; 0
    /// when the file has none (or its file system keeps none).
    public var extendedAttributes: UInt64
    /// Whether a save would be refused for the file itself (``isReadOnly(path:permissions:)``).
    public var readOnly: Bool

    /// The attributes of the file at `path` now (symlinks followed); nil when there is none.
    public static func current(path: String) -> FileAttributes? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let permissions = UInt32(status.st_mode) & 0o7777
        // The extended attributes of the file itself, not of a symlink that leads to it.
        let real = (try? SafeSave.resolveSymlinks(path)) ?? path
        return FileAttributes(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), permissions: permissions,
            owner: UInt32(status.st_uid), group: UInt32(status.st_gid),
            extendedAttributes: extendedAttributesHash(real),
            readOnly: isReadOnly(path: path, permissions: permissions))
    }

    /// Whether a save of the file at `path` would be refused for the file itself, by the test
    /// ``SafeSave`` makes before writing: this process (by its effective ids) may not write it —
    /// `faccessat(W_OK, AT_EACCESS)`: its permission bits and ACL, an immutable flag (`chattr +i`),
    /// a read-only mount — or nobody may (no write bit at all), which stops even root, for whom
    /// the permission bits alone grant everything.
    public static func isReadOnly(path: String, permissions: UInt32) -> Bool {
        permissions & 0o222 == 0 || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0
    }

    /// Whether `other` has the same permissions, owner, group, extended attributes and writability
    /// (whichever file it is of).
    public func sameAttributes(as other: FileAttributes) -> Bool {
        permissions == other.permissions && owner == other.owner && group == other.group
            && extendedAttributes == other.extendedAttributes && readOnly == other.readOnly
    }

    /// Whether these are the attributes of the file `identity` describes.
    public func isOf(_ identity: FileIdentity) -> Bool {
        device == identity.device && inode == identity.inode
    }

    /// XXH64 over each extended attribute's name and value (0 for none; an attribute that cannot
    /// be read counts by its name alone).
    static func extendedAttributesHash(_ path: String) -> UInt64 {
        var list: [CChar] = []
        for _ in 0..<4 {
            let size = cfs_llistxattr(path, nil, 0)
            guard size > 0 else { return 0 }
            list = [CChar](repeating: 0, count: Int(size))
            let got = cfs_llistxattr(path, &list, list.count)
            if got >= 0 {
                list.removeLast(list.count - got)
                break
            }
            guard errno == ERANGE else { return 0 }  // ERANGE: the list grew in between
            list = []
        }
        guard !list.isEmpty else { return 0 }
        var hasher = ContentHasher()
        var value = [UInt8](repeating: 0, count: 256)
        for name in list.split(separator: 0) {
            // The name with its terminating zero, so that names and values cannot run together.
            let terminated = Array(name) + [0]
            terminated.map { UInt8(bitPattern: $0) }.withUnsafeBufferPointer { hasher.update($0) }
            let size = cfs_lgetxattr(path, terminated, nil, 0)
            guard size >= 0 else { continue }
            if size > value.count { value = [UInt8](repeating: 0, count: size) }
            let got = cfs_lgetxattr(path, terminated, &value, value.count)
            guard got >= 0 else { continue }
            withUnsafeBytes(of: UInt64(got).littleEndian) { hasher.update($0) }
            value.withUnsafeBufferPointer { hasher.update(UnsafeBufferPointer(rebasing: $0[..<got])) }
        }
        let hash = hasher.finalize()
        return hash == 0 ? 1 : hash
    }
}
