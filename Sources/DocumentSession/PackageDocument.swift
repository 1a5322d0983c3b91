import FileStore

/// What kind of directory document a ``PackageDocument`` is.
public enum PackageKind: String, Sendable {
    /// A directory that is one document (NSFileWrapper's directory wrapper): its entries are read
    /// and changed one by one and saved together.
    case package
    /// A package holding a SQLite store at `StoreContent/persistentStore` and additional content
    /// under `StoreContent/AdditionalContent/` (UIManagedDocument's layout).
    case managed
}

/// The kind of an entry of a package.
public enum EntryKind: String, Sendable {
    case file, directory, symlink
}

/// One entry of a package as a client sees it: a relative path, its kind and size (0 for a
/// directory, the target's length for a symbolic link).
public struct EntrySummary: Sendable, Equatable {
    public var path: String
    public var kind: EntryKind
    public var size: Int64
}

/// What a reload, undo or redo did to one entry.
public struct EntryChange: Sendable, Equatable {
    public enum Change: String, Sendable {
        /// The entry holds other bytes than before (created or rewritten).
        case written
        /// The entry is gone.
        case deleted
    }

    public var path: String
    public var change: Change

    public init(path: String, change: Change) {
        self.path = path
        self.change = change
    }

    /// What changed from entries `old` to `new`, sorted by path.
    static func between(_ old: [String: EntryContent], _ new: [String: EntryContent]) -> [EntryChange] {
        var changes: [EntryChange] = []
        for (path, content) in new where old[path] != content {
            changes.append(EntryChange(path: path, change: .written))
        }
        for path in old.keys where new[path] == nil {
            changes.append(EntryChange(path: path, change: .deleted))
        }
        return changes.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
    }
}

/// What one entry holds in a session.
enum EntryContent: Sendable, Equatable {
    /// As in the package on disk at its last read or save (a regular file or a symbolic link,
    /// with its size and modification time then): read from there when asked, carried over by the
    /// save (cloned, linked or copied).
    case onDisk(kind: EntryKind, size: Int64, modified: Int64)
    /// Written by a client and not saved yet.
    case bytes([UInt8])

    var kind: EntryKind {
        if case .onDisk(let kind, _, _) = self { return kind }
        return .file
    }

    var size: Int64 {
        switch self {
        case .onDisk(_, let size, _): return size
        case .bytes(let bytes): return Int64(bytes.count)
        }
    }
}

/// One undoable change of a package document.
struct PackageStep: Sendable {
    enum Change: Sendable {
        /// An entry written or deleted: what it held before and after (nil: absent).
        case entry(path: String, before: EntryContent?, after: EntryContent?)
        /// One write transaction of the managed store (undone and redone by the store itself,
        /// whose own history moves in step with this one).
        case store
    }

    var change: Change
    var label: String?
}

/// An open package or managed document: its entries (as on disk, or written and not saved), its
/// history, version and state. A value owned by the ``PackageStore`` actor.
public struct PackageDocument: Sendable {
    /// The server-issued handle (`p1`, `p2`, ...).
    public let handle: String
    /// The absolute path of the package's directory.
    public internal(set) var path: String
    public let kind: PackageKind
    /// Goes up by one with every change: an entry written or deleted, a store write, an undo, a
    /// redo, a reload.
    public internal(set) var version: Int64 = 1
    public internal(set) var state: DocumentState = []
    /// Regular files and symbolic links by relative path (the managed store's own files are not
    /// among them: the store is reached through `store/*`).
    var entries: [String: EntryContent]
    /// Directories found on disk with no entry below them (kept by the save, listed).
    var emptyDirectories: Set<String>
    var steps: [PackageStep] = []
    /// How many of `steps` are applied (the rest can be redone).
    var position = 0
    /// The position at which the document matched its package on disk (nil: no position does,
    /// after a reload dropped the history's base).
    var cleanPosition: Int? = 0
    /// The package's tree when last read or saved: a change by another program is a difference.
    var signature: PackageSignature
    /// The disk's tree when a change found the document with unsaved changes (`inConflict`).
    var theirSignature: PackageSignature? = nil
    /// The package was deleted, or moved where it could not be followed, while open.
    public internal(set) var deletedOnDisk = false
    /// A managed document's store: its schema version and the migrations this open applied.
    public internal(set) var storeSummary: StoreSummary? = nil
    /// The disk's sides of conflicts, kept (newest last).
    public internal(set) var conflictVersions: [PackageConflictVersion] = []

    public var hasUnsavedChanges: Bool { cleanPosition != position }
    public var canUndo: Bool { position > 0 }
    public var canRedo: Bool { position < steps.count }
    public var undoLabel: String? { position > 0 ? steps[position - 1].label : nil }
    public var redoLabel: String? { position < steps.count ? steps[position].label : nil }

    /// The package's name, shown to the user.
    public var displayName: String { Document.displayName(forPath: path) }

    /// Every entry, sorted by path: files and symbolic links, the directories they are in, and
    /// the empty directories.
    public var entryList: [EntrySummary] {
        var list: [EntrySummary] = []
        var directories = emptyDirectories
        for (path, content) in entries {
            list.append(EntrySummary(path: path, kind: content.kind, size: content.size))
            var parent = path
            while let slash = parent.lastIndex(of: "/") {
                parent = String(parent[..<slash])
                directories.insert(parent)
            }
        }
        list += directories.map { EntrySummary(path: $0, kind: .directory, size: 0) }
        return list.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
    }

    /// Whether `path` is a directory of the package now (holding entries, or empty).
    func isDirectory(_ path: String) -> Bool {
        if emptyDirectories.contains(path) { return true }
        let prefix = path + "/"
        return entries.keys.contains { $0.hasPrefix(prefix) }
    }

    /// The first ancestor of `path` that is a file or symbolic link of the package, if any.
    func fileAncestor(of path: String) -> String? {
        var parent = path
        while let slash = parent.lastIndex(of: "/") {
            parent = String(parent[..<slash])
            if entries[parent] != nil { return parent }
        }
        return nil
    }
}

/// The disk's side of a conflict of a package, kept: a copy of the package's tree as another
/// program left it (for a managed document, its store), under the server's working directory.
public struct PackageConflictVersion: Sendable, Equatable {
    public var id: String
    /// Where the copy is (a directory holding the package's entries).
    public var path: String
    /// When the change was found, in nanoseconds since the epoch.
    public var date: Int64
    /// The copy's size in bytes.
    public var size: Int64
    /// The store on disk the copy was taken from (its size, inode and times), so that one state of
    /// their store is copied once.
    var store: PackageSignature.Item?
}

extension PackageSignature {
    /// The tree's etag (protocol/README.md §8.4's opaque etag, for a package): FNV-1a 64 of every
    /// item's path, kind, size, inode and times, in hexadecimal. Two trees with one etag are the
    /// same tree as far as the presenter can tell.
    public var etag: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
        }
        for item in items {
            mix(item.path.utf8)
            mix([0])
            mix(item.kind.rawValue.utf8)
            for number in [UInt64(bitPattern: item.size), item.inode, UInt64(bitPattern: item.modificationNanoseconds), UInt64(bitPattern: item.changeNanoseconds)] {
                withUnsafeBytes(of: number.littleEndian) { mix($0) }
            }
        }
        return String(hash, radix: 16)
    }
}

/// An entry read (`document/readEntry`).
public struct EntryRead: Sendable {
    public var path: String
    public var bytes: [UInt8]
    /// Whether the bytes are the unsaved ones of the session (else the package's on disk).
    public var unsaved: Bool
}
