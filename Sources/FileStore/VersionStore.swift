import CFileSystem
import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The earlier versions of documents, kept on disk under a state directory so that they survive the
/// process (NSFileVersion's role): conflict versions, the disk's content when it changed while the
/// user had unsaved edits, which would otherwise be lost when the user's text is saved over it; and
/// the last few saved versions of each document, so that a save can be undone after the fact.
///
/// Content is stored once: a text equal (by XXH64 and size) to the document's newest version of the
/// same kind adds nothing (``add(documentPath:kind:chunks:resolved:origin:)`` answers that version);
/// equal to another of the document's versions, the new version is a hard link to its file, so the
/// bytes are on disk once (the byte budget counts each inode once).
///
/// The store is bounded. Thinned by age at each add, per document, over its saved versions and its
/// resolved conflict versions (``thinningRules``): every version of the last hour, the newest of
/// each hour for a day, the newest of each day for 30 days, none older; the document's newest
/// version is always kept, unresolved conflict versions are never thinned. Per document a safety
/// cap of `savedLimit` saved and `conflictLimit` conflict (and sync-conflict) versions (1,000 by
/// default: thinning is what bounds them; the cap only stops a runaway, it does not cut the last
/// hour of frequent autosaves). Store-wide, at most `byteLimit` bytes (the oldest saved versions go
/// first, then the oldest conflict versions, which are rarer and hold text nobody saved). Every
/// add, move and removal answers the versions it dropped, so that the caller can tell clients.
///
/// Layout, under ``directory`` (every directory 0700, every file 0600: versions hold users' text):
///
///     <16 hex digits of XXH64(document path)>[-<n>]/   one per document ("slot")
///         path                                        the document's path (UTF-8, no newline)
///         <date>-<pid>-<counter>-<hash>.saved          one file per version: the bytes of its text
///         <date>-<pid>-<counter>-<hash>.conflict       (a hard link when another has the same text)
///         <date>-<pid>-<counter>-<hash>.syncConflict   a sync tool's conflict copy
///         <id>.resolved                               empty: the conflict version `id` is resolved
///         <id>.origin                                 the sync copy's file name (UTF-8)
///         <date>-<pid>-<counter>.saved                 the names of older stores (no hash): still read
///     .tmp-<random>                                    a version being written, or a slot being made
///
/// `date` is nanoseconds since the epoch by the store's clock (strictly increasing within a store),
/// `pid` and `counter` make the name unique across processes, `hash` is the 16 lowercase hex digits
/// of the text's XXH64 (a listing gets it without reading the text; a version named without one is
/// hashed when listed). A version's id is its file name: it stays the same across processes, when
/// it is resolved and when its document moves. Lookups compare the `path` file with the document's
/// path, so two paths with the same hash get different slots (`-1`, `-2`, ...).
///
/// There is no index file to go stale: listing reads the directory entries (names give date,
/// kind and hash, `fstatat` the size, the sidecar files the mark and the origin). Every change (adding, evicting, removing, moving) happens under an
/// exclusive `flock` of ``directory``, so several server processes can share it; readers take no
/// lock and skip files that vanish under them. A version is written to a temp file beside the slots,
/// flushed, and renamed into its slot: a crash never leaves half a version under a final name, and
/// temp files left by a crash are removed by the next store opened on the directory once they are
/// a minute old.
///
/// The calls block on the file system (a large version's write, `fsync`): run them off the
/// cooperative threads (``runOnOwnThread(niceness:_:)``).
public final class VersionStore: Sendable {
    /// Why a version was kept.
    public enum Kind: String, Sendable, CaseIterable {
        /// The text as the user saved it.
        case saved
        /// The disk's content when it changed under unsaved edits (someone else's change).
        case conflict
        /// A sync tool's conflict copy of the document (`notes.sync-conflict-<date>-<id>.md`),
        /// kept when it is resolved.
        case syncConflict
    }

    /// What an add did: the version holding the text, whether it is new, and what was dropped.
    public struct Addition: Sendable, Equatable {
        /// The new version, or (``added`` false) the document's newest version of the same kind,
        /// which has the same text.
        public var version: Version
        /// False when the text equals the document's newest version of the kind: nothing stored.
        public var added: Bool
        /// The versions dropped by this add (thinning, the per-document cap, the byte budget), of
        /// any document, oldest reasons first.
        public var removed: [Version]
        /// Whether the add, keeping nothing new, marked that version resolved (it was not).
        public var markedResolved: Bool

        public init(version: Version, added: Bool, removed: [Version], markedResolved: Bool = false) {
            self.version = version
            self.added = added
            self.removed = removed
            self.markedResolved = markedResolved
        }
    }

    /// A stored version (what a listing shows; the text itself is read with ``read(_:)``).
    public struct Version: Sendable, Equatable {
        /// Opaque and unique; safe as a file name; the same in every process and after a move.
        public var id: String
        /// Why it was kept (its eviction order and per-document limit follow from it).
        public var kind: Kind
        /// The document it is a version of (its path now, after any ``moveDocument(from:to:)``).
        public var documentPath: String
        /// Nanoseconds since the epoch (CLOCK_REALTIME) when it was added.
        public var date: Int64
        /// Bytes of text (UTF-8).
        public var size: Int
        /// Whether it is resolved (NSFileVersion's `isResolved`): saved versions always are;
        /// conflict and sync-conflict versions once ``markResolved(_:)`` (or an add) said so.
        public var resolved: Bool
        /// For a sync-conflict version: the copy's file name. Nil otherwise.
        public var origin: String?
        /// XXH64 of the text.
        public var contentHash: UInt64

        /// A version as a listing shows it (the store makes them; public for callers' tests).
        public init(
            id: String, kind: Kind, documentPath: String, date: Int64, size: Int, resolved: Bool? = nil,
            origin: String? = nil, contentHash: UInt64 = 0
        ) {
            self.id = id
            self.kind = kind
            self.documentPath = documentPath
            self.date = date
            self.size = size
            self.resolved = resolved ?? (kind == .saved)
            self.origin = origin
            self.contentHash = contentHash
        }
    }

    /// Where the versions are kept.
    public let directory: String
    /// Saved versions kept per document at most (a safety cap: thinning bounds them first).
    public let savedLimit: Int
    /// Conflict and sync-conflict versions (each kind) kept per document at most.
    public let conflictLimit: Int
    /// Bytes kept store-wide (exceeded only by a newest version alone, which is never evicted by
    /// the add that stored it; it is at most `maxVersionSize` and `byteLimit` bytes).
    public let byteLimit: Int
    /// A larger text is not stored (``add(documentPath:kind:chunks:)`` answers nil).
    public let maxVersionSize: Int

    /// Whether files and directories are flushed (`fsync`) before and after their rename; tests of
    /// many adds turn it off to stay fast.
    let durable: Bool
    /// The hash naming a document's slot (XXH64 of its path; tests inject collisions).
    let pathHash: @Sendable (String) -> UInt64
    /// Applied to a text's XXH64 before it names the version (the identity; tests make texts collide).
    let contentHash: @Sendable (UInt64) -> UInt64
    /// Now, in nanoseconds since the epoch: the dates of new versions and the ages thinning goes
    /// by (CLOCK_REALTIME unless a test gives its own).
    let now: @Sendable () -> Int64

    /// Names starting with this are temp files and temp slots (never a slot or a version).
    static let tempPrefix = ".tmp-"
    /// The file in a slot holding the document's path.
    static let pathFileName = "path"
    /// Slots tried for one hash: the first plus this many minus one for colliding paths.
    static let slotsPerHash = 8
    /// Suffix of the empty file marking a conflict version resolved.
    static let resolvedSuffix = ".resolved"
    /// Suffix of the file holding a sync-conflict version's origin.
    static let originSuffix = ".origin"
    /// The longest origin kept (a file name is at most 255 bytes).
    static let maximumOriginSize = 4096
    /// Temp files older than this are leftovers of a crash (nanoseconds).
    static let staleTempAge: Int64 = 60 * 1_000_000_000
    /// The longest `path` file read (a path is at most PATH_MAX bytes; anything longer is not ours).
    static let maximumPathFileSize = 1 << 16

    /// Where each id was last seen in this process (id to slot name): spares a search of every
    /// slot in ``read(_:)``. Only a hint: checked on use, and other processes may move or evict.
    private let slotHints = Mutex<[String: String]>([:])
    /// Hints are dropped all at once past this count (ids evicted by other processes leave some).
    static let maximumHints = 1 << 14

    /// The last date given to a version by this store: dates are strictly increasing, so that the
    /// order of its versions is the order of its adds even when the clock steps back.
    private let lastDate = Atomic<Int64>(0)
    /// The unique part of version names within this process (the pid makes it unique across).
    private static let counter = Atomic<UInt64>(0)

    /// Opens the store in `directory`, creating it (and missing parents) with mode 0700. Removes
    /// temp files older than a minute left there by a process that crashed while adding.
    ///
    /// - Parameters:
    ///   - savedLimit, conflictLimit: versions of each kind kept per document at most (at least 1;
    ///     a safety cap beyond the thinning, which is what bounds them).
    ///   - byteLimit: bytes kept store-wide.
    ///   - maxVersionSize: a larger text is not kept (nor one larger than `byteLimit`).
    ///   - now: the clock (nanoseconds since the epoch; CLOCK_REALTIME unless given).
    public convenience init(
        directory: String, savedLimit: Int = 1000, conflictLimit: Int = 1000, byteLimit: Int = 512 << 20,
        maxVersionSize: Int = 64 << 20, now: (@Sendable () -> Int64)? = nil
    ) throws(FileSystemError) {
        try self.init(
            directory: directory, savedLimit: savedLimit, conflictLimit: conflictLimit, byteLimit: byteLimit,
            maxVersionSize: maxVersionSize, durable: true, pathHash: { ContentHasher.hash($0.utf8) }, now: now)
    }

    /// The same, with the flushing and the slot hash chosen (for tests).
    init(
        directory: String, savedLimit: Int, conflictLimit: Int, byteLimit: Int, maxVersionSize: Int,
        durable: Bool, pathHash: @escaping @Sendable (String) -> UInt64, now: (@Sendable () -> Int64)? = nil,
        contentHash: @escaping @Sendable (UInt64) -> UInt64 = { $0 }
    ) throws(FileSystemError) {
        precondition(savedLimit >= 1 && conflictLimit >= 1, "a version store keeps at least one version of each kind")
        precondition(byteLimit >= 0 && maxVersionSize >= 0)
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.directory = path
        self.savedLimit = savedLimit
        self.conflictLimit = conflictLimit
        self.byteLimit = byteLimit
        self.maxVersionSize = maxVersionSize
        self.durable = durable
        self.pathHash = pathHash
        self.contentHash = contentHash
        self.now = now ?? { VersionStore.realtimeNanoseconds() }
        try Self.makeDirectories(path)
        sweepStaleTempFiles()
    }

    // MARK: - Adding

    /// Stores `text` (UTF-8) as a version of the document at `documentPath`, as
    /// ``add(documentPath:kind:chunks:resolved:origin:)`` does. Answers nil for a text over
    /// `maxVersionSize` bytes.
    @discardableResult
    public func add(
        documentPath: String, kind: Kind, text: some Collection<UInt8>, resolved: Bool = false, origin: String? = nil
    ) throws(FileSystemError) -> Addition? {
        guard text.count <= min(maxVersionSize, byteLimit) else { return nil }
        if let array = text as? [UInt8] {
            return try add(documentPath: documentPath, kind: kind, chunks: CollectionOfOne(array), resolved: resolved, origin: origin)
        }
        return try add(documentPath: documentPath, kind: kind, chunks: CollectionOfOne(Array(text)), resolved: resolved, origin: origin)
    }

    /// Stores the concatenated `chunks` (UTF-8: a text buffer's `utf8Chunks`, written as they are,
    /// without gathering them into one array) as a version of the document at `documentPath`.
    ///
    /// Stored once per content: a text equal to the document's newest version of `kind` adds
    /// nothing (the answer is that version, `added` false; `resolved` marks it resolved if it was
    /// not); equal to an older version of the document, the new version is a hard link to its file.
    /// A conflict or sync-conflict version starts unresolved unless `resolved`; `origin` is kept
    /// with a sync-conflict version (ignored for other kinds). Then the document's versions are
    /// thinned by age (``thinningRules``), the oldest of `kind` beyond the per-document cap go, and
    /// while the store holds more than `byteLimit` bytes the oldest saved versions store-wide, then
    /// the oldest conflict versions (never the one just added). The answer lists what went.
    ///
    /// Answers nil, storing nothing, when the text is over `maxVersionSize` (or `byteLimit`) bytes:
    /// a version that large is not worth the disk (the writing stops at the limit).
    @discardableResult
    public func add(
        documentPath: String, kind: Kind, chunks: some Sequence<[UInt8]>, resolved: Bool = false, origin: String? = nil
    ) throws(FileSystemError) -> Addition? {
        let topDescriptor = try openTop()
        let top = topDescriptor.rawValue
        let limit = min(maxVersionSize, byteLimit)
        let origin = kind == .syncConflict ? origin : nil
        let resolved = kind == .saved || resolved

        // The text goes to a temp file beside the slots (the same file system, so the rename into
        // a slot is atomic), written and flushed before the lock: a slow write holds no one up.
        // Dropped before it is placed (any error, a text over the limit, the same text kept
        // already), it is removed.
        var replacement: DurableReplacement
        do {
            replacement = try DurableReplacement(
                inOpenDirectory: topDescriptor.unowned, path: directory, tempPrefix: Self.tempPrefix, permissions: [.ownerReadWrite])
        } catch {
            if error.call == "openat" {
                if error.errno == .fileExists { throw FileSystemError(errno: EEXIST, syscall: "openat", path: directory) }
                throw FileSystemError(error, reason: "creating a temp file for a version")
            }
            throw FileSystemError(error)
        }
        var writer = GatheringWriter(fd: replacement.descriptor.rawValue, path: replacement.tempPath)
        var hasher = ContentHasher()
        for chunk in chunks {
            if writer.count + chunk.count > limit { return nil }
            chunk.withUnsafeBufferPointer { hasher.update($0) }
            try writer.append(chunk)
        }
        try writer.flush()
        do {
            try replacement.finish(flushing: durable)
        } catch {
            throw FileSystemError(error)
        }
        let size = writer.count
        let hash = contentHash(hasher.finalize())

        try lock(top)
        defer { flock(top, LOCK_UN) }
        let slot = try findOrCreateSlot(top, documentPath)
        let existing = listSlot(top, slot)
        // The same hash and size, and (a hash is no proof: XXH64 is not a cryptographic hash) the
        // same bytes, compared only then.
        let tempName = replacement.tempName
        let sameText = existing.filter { $0.hash == hash && $0.size == size && Self.sameBytes(top, tempName, slot + "/" + $0.name) }
        if let newest = existing.filter({ $0.kind == kind }).min(by: Entry.newerFirst), sameText.contains(where: { $0.name == newest.name }) {
            var version = newest.version(documentPath)
            let marking = resolved && !newest.resolved
            if marking {
                try writeSidecar(top, slot + "/" + newest.name + Self.resolvedSuffix, [])
                version.resolved = true
            }
            remember(newest.name, in: slot)
            return Addition(version: version, added: false, removed: [], markedResolved: marking)
        }
        let date = nextDate()
        var name = ""
        // Unique by construction; RENAME_NOREPLACE (or `linkat`, which never replaces) makes sure
        // (another clock, a reused pid). Where the file system lacks it, a link and an unlink, or
        // (no hard links either) a check and a rename: under the lock, and with a name unique by
        // construction, as good. The slot is flushed after. The sidecars come first: a version is
        // never seen without its mark or origin (ones left by a failure are swept with the slot).
        for attempt in 0... {
            name = Self.fileName(date: date, kind: kind, hash: hash)
            // Taken (by another process's version, with its sidecars): another name, before any
            // sidecar of this one is written over theirs. Every writer holds the lock.
            var taken = stat()
            if fstatat(top, slot + "/" + name, &taken, AT_SYMLINK_NOFOLLOW) == 0 && attempt < 16 { continue }
            if let origin { try writeSidecar(top, slot + "/" + name + Self.originSuffix, Array(origin.utf8)) }
            if resolved && kind != .saved { try writeSidecar(top, slot + "/" + name + Self.resolvedSuffix, []) }
            if let twin = sameText.first {
                if linkat(top, slot + "/" + twin.name, top, slot + "/" + name, 0) == 0 {
                    if durable { flushDirectory(top, slot) }
                    break
                }
                // Taken (EEXIST): another name. No hard links here (EPERM, EMLINK, ENOTSUP...):
                // the bytes are stored again.
                if errno == EEXIST && attempt < 16 { continue }
            }
            do {
                try replacement.place(as: slot + "/" + name, replace: false, checkThenRename: true, flushing: durable)
                break
            } catch {
                if error.errno == .fileExists && attempt < 16 { continue }
                unlinkSidecars(top, slot, name)
                throw FileSystemError(error)
            }
        }
        remember(name, in: slot)
        var removed = thin(top, slot: slot, documentPath: documentPath, keeping: name)
        removed += evictBeyondLimit(top, slot: slot, documentPath: documentPath, kind: kind, keeping: name)
        removed += evictBeyondByteLimit(top, keeping: name)
        let version = Version(
            id: name, kind: kind, documentPath: documentPath, date: date, size: size, resolved: resolved, origin: origin,
            contentHash: hash)
        return Addition(version: version, added: true, removed: removed)
    }

    /// Marks the conflict or sync-conflict version `id` resolved (a saved version is already);
    /// answers whether there is such a version. Its id stays the same.
    @discardableResult
    public func markResolved(_ id: String) -> Bool {
        guard let parsed = Entry.parse(id), let topDescriptor = try? openTop() else { return false }
        let top = topDescriptor.rawValue
        return (try? locked(top) { () throws(FileSystemError) -> Bool in
            guard let (slot, _) = locate(top, id) else { return false }
            if parsed.kind != .saved { try writeSidecar(top, slot + "/" + id + Self.resolvedSuffix, []) }
            return true
        }) ?? false
    }

    /// Thins the document's versions by age now (``thinningRules``), as a version kept does: for a
    /// file opened again long after its last save, whose last hour of versions would otherwise
    /// stay until its next one. Answers what went (nothing when the store cannot be read).
    public func thin(documentPath: String) -> [Version] {
        guard let topDescriptor = try? openTop() else { return [] }
        let top = topDescriptor.rawValue
        return (try? locked(top) { () throws(FileSystemError) -> [Version] in
            guard let slot = findSlot(top, documentPath) else { return [] }
            return thin(top, slot: slot, documentPath: documentPath, keeping: nil)
        }) ?? []
    }

    // MARK: - Reading

    /// The versions of the document at `documentPath`, newest first (empty when it has none or the
    /// store cannot be read: versions are a convenience, never a reason to fail).
    public func versions(of documentPath: String) -> [Version] {
        guard let topDescriptor = try? openTop() else { return [] }
        let top = topDescriptor.rawValue
        guard let slot = findSlot(top, documentPath) else { return [] }
        let entries = listSlot(top, slot).sorted(by: Entry.newerFirst)
        for entry in entries { remember(entry.name, in: slot) }
        return entries.map { $0.version(documentPath) }
    }

    /// The versions of each of `paths` that has any (newest first): for many documents at once
    /// (`workspace/query`'s conflict counts). The store's slots are listed once, and only a path
    /// whose hash names a slot there is looked at further; asking ``versions(of:)`` of each path
    /// tried each of its slot names with an open (a query of 10,000 files: a sixth of its time).
    public func versions(ofPaths paths: [String]) -> [String: [Version]] {
        guard let topDescriptor = try? openTop() else { return [:] }
        let top = topDescriptor.rawValue
        // The slots' hashes: a slot `H-n` (a colliding path's) counts under `H`.
        let hashes = Set(allSlots(top).map { $0.utf8.count > 16 ? String($0.utf8.prefix(16))! : $0 })
        guard !hashes.isEmpty else { return [:] }
        var found: [String: [Version]] = [:]
        for path in paths where hashes.contains(Self.hexName(pathHash(path))) {
            let bytes = Array(path.utf8)
            guard let slot = slotNames(for: path).first(where: { readPathBytes(top, $0) == bytes }) else { continue }
            let entries = listSlot(top, slot).sorted(by: Entry.newerFirst)
            for entry in entries { remember(entry.name, in: slot) }
            if !entries.isEmpty { found[path] = entries.map { $0.version(path) } }
        }
        return found
    }

    /// The version with this id, or nil when there is none (evicted, removed, never stored).
    public func version(_ id: String) -> Version? {
        guard Entry.parse(id) != nil, let topDescriptor = try? openTop() else { return nil }
        let top = topDescriptor.rawValue
        guard let (slot, _) = locate(top, id), let path = readPathFile(top, slot),
              let entry = listSlot(top, slot, only: id).first else { return nil }
        return entry.version(path)
    }

    /// The text of the version with this id. An unknown id (evicted, removed, never stored, or not
    /// an id at all) fails with ENOENT.
    public func read(_ id: String) throws(FileSystemError) -> [UInt8] {
        let notFound = FileSystemError(errno: ENOENT, syscall: "openat", path: directory + "/" + id,
            reason: "no stored version has this id (it was evicted or removed, or never stored)")
        guard Entry.parse(id) != nil else { throw notFound }
        let topDescriptor = try openTop()
        let top = topDescriptor.rawValue
        guard let (slot, _) = locate(top, id) else { throw notFound }
        let file: Descriptor
        do {
            file = try Descriptor.open(slot + "/" + id, .readOnly, options: .noFollow, relativeTo: topDescriptor.unowned)
        } catch {
            if error.errno == .noSuchFileOrDirectory { throw notFound }  // removed since it was found
            throw FileSystemError(error, path: directory + "/" + slot + "/" + id)
        }
        return try Self.readAll(file.rawValue, path: directory + "/" + slot + "/" + id, limit: FileSizeLimit.bytes)
    }

    // MARK: - Removing and moving

    /// Removes the version with this id; answers whether there was one. A document left without
    /// versions loses its slot.
    @discardableResult
    public func remove(_ id: String) -> Bool {
        guard Entry.parse(id) != nil, let topDescriptor = try? openTop() else { return false }
        let top = topDescriptor.rawValue
        return (try? locked(top) { () throws(FileSystemError) -> Bool in
            guard let (slot, _) = locate(top, id), unlinkat(top, slot + "/" + id, 0) == 0 else { return false }
            unlinkSidecars(top, slot, id)
            forget(id)
            removeSlotIfEmpty(top, slot)
            return true
        }) ?? false
    }

    /// The document at `oldPath` now lives at `newPath` (renamed, moved, saved as): its versions
    /// follow it, keeping their ids, and are listed under `newPath` only. Versions already kept for
    /// `newPath` (a document moved over another) stay, and the per-document limits apply to all.
    /// A failure leaves each version under one of the two paths. Answers the versions the cap
    /// dropped.
    @discardableResult
    public func moveDocument(from oldPath: String, to newPath: String) throws(FileSystemError) -> [Version] {
        guard oldPath != newPath else { return [] }
        let topDescriptor = try openTop()
        let top = topDescriptor.rawValue
        return try locked(top) { () throws(FileSystemError) -> [Version] in
            guard let oldSlot = findSlot(top, oldPath), let oldSlotDescriptor = openSlot(top, oldSlot) else { return [] }
            let newSlot = try findOrCreateSlot(top, newPath)
            defer { removeSlotIfEmpty(top, newSlot) }
            // The versions with their sidecars, sidecars first (a version never lacks its own).
            let names = Self.entryNames(oldSlotDescriptor.rawValue).filter { Entry.parse($0) != nil || Self.isSidecarName($0) }
            for name in names.sorted(by: { Self.isSidecarName($0) && !Self.isSidecarName($1) }) {
                let from = oldSlot + "/" + name
                let to = newSlot + "/" + name
                if cfs_renameat2(top, from, top, to, 1) != 0 {
                    let number = errno
                    if number == ENOENT { continue }  // evicted meanwhile
                    if number == EINVAL || number == ENOSYS {
                        if renameat(top, from, top, to) != 0 && errno != ENOENT {
                            throw FileSystemError(errno: errno, syscall: "renameat", path: directory + "/" + to)
                        }
                    } else {
                        throw FileSystemError(errno: number, syscall: "renameat2", path: directory + "/" + to)
                    }
                }
                if Entry.parse(name) != nil { remember(name, in: newSlot) }
            }
            if durable {
                flushDirectory(top, newSlot)
                flushDirectory(top, oldSlot)
            }
            removeSlotIfEmpty(top, oldSlot)
            return Kind.allCases.flatMap { evictBeyondLimit(top, slot: newSlot, documentPath: newPath, kind: $0, keeping: nil) }
        }
    }

    // MARK: - Slots

    /// The slot of the document at `path`: the first of its hash's slots whose `path` file holds it.
    private func findSlot(_ top: Int32, _ path: String) -> String? {
        let bytes = Array(path.utf8)
        for slot in slotNames(for: path) where readPathBytes(top, slot) == bytes { return slot }
        return nil
    }

    /// The names of the slots tried for `path`: its hash in hex, then the same with `-1`, `-2`, ...
    private func slotNames(for path: String) -> [String] {
        let base = Self.hexName(pathHash(path))
        return (0..<Self.slotsPerHash).map { $0 == 0 ? base : base + "-\($0)" }
    }

    /// Whether the files `a` and `b` (relative to the store's directory `top`) hold the same bytes,
    /// read in 64 KiB pieces (false when either cannot be read).
    static func sameBytes(_ top: Int32, _ a: String, _ b: String) -> Bool {
        let directory = FileDescriptor(rawValue: top)
        guard let first = try? Descriptor.open(a, .readOnly, options: .noFollow, relativeTo: directory),
              let second = try? Descriptor.open(b, .readOnly, options: .noFollow, relativeTo: directory) else { return false }
        let firstFD = first.unowned, secondFD = second.unowned
        let size = 1 << 16
        var one = [UInt8](repeating: 0, count: size), two = [UInt8](repeating: 0, count: size)
        var offset: Int64 = 0
        while true {
            guard let read1 = try? one.withUnsafeMutableBytes({ (buffer) throws(SystemCallError) in
                      try readFully(into: buffer, from: firstFD, at: offset) }),
                  let read2 = try? two.withUnsafeMutableBytes({ (buffer) throws(SystemCallError) in
                      try readFully(into: buffer, from: secondFD, at: offset) }),
                  read1 == read2 else { return false }
            if read1 == 0 { return true }
            if memcmp(one, two, read1) != 0 { return false }
            offset += Int64(read1)
        }
    }

    /// A hash as a slot's name: 16 lowercase hex digits.
    private static func hexName(_ hash: UInt64) -> String {
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The slot of the document at `path`, made if it has none (under the lock). A new slot is a
    /// temp directory with its `path` file, renamed into place: a slot never lacks its path.
    private func findOrCreateSlot(_ top: Int32, _ path: String) throws(FileSystemError) -> String {
        if let slot = findSlot(top, path) { return slot }
        let temp = Self.tempPrefix + Self.randomHex()
        let tempPath = directory + "/" + temp
        guard mkdirat(top, temp, 0o700) == 0 else { throw FileSystemError(errno: errno, syscall: "mkdirat", path: tempPath) }
        var renamed = false
        defer {
            if !renamed {
                unlinkat(top, temp + "/" + Self.pathFileName, 0)
                unlinkat(top, temp, AT_REMOVEDIR)
            }
        }
        // The mode exactly (a umask could have taken bits from 0700; none may be added).
        guard fchmodat(top, temp, 0o700, 0) == 0 else { throw FileSystemError(errno: errno, syscall: "fchmodat", path: tempPath) }
        let pathFile = temp + "/" + Self.pathFileName
        let pathFilePath = directory + "/" + pathFile
        do {
            let file = try Descriptor.open(pathFile, .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                           permissions: [.ownerReadWrite], relativeTo: FileDescriptor(rawValue: top))
            _ = try retryingInterrupts("fchmod", path: pathFilePath) { fchmod(file.rawValue, 0o600) }
            try writeAll(Array(path.utf8), to: file.unowned, path: pathFilePath)
            if durable { try file.sync(path: pathFilePath) }
            try file.close()
        } catch {
            throw FileSystemError(error, path: pathFilePath)
        }
        for slot in slotNames(for: path) {
            // A slot taken by another path (a hash collision) is not empty: ENOTEMPTY. An empty
            // directory there (a removal cut short by a crash) is replaced.
            if renameat(top, temp, top, slot) == 0 {
                renamed = true
                if durable { flushDirectory(top, ".") }
                return slot
            }
            let number = errno
            guard number == ENOTEMPTY || number == EEXIST || number == ENOTDIR || number == EISDIR else {
                throw FileSystemError(errno: number, syscall: "renameat", path: directory + "/" + slot)
            }
        }
        throw FileSystemError(errno: EEXIST, syscall: "renameat", path: directory + "/" + slotNames(for: path)[0],
            reason: "\(Self.slotsPerHash) other documents' paths have the same hash")
    }

    /// Removes `slot` when it holds no version (its sidecars left by a failure, its `path` file,
    /// then the directory); anything unexpected in it keeps it. Under the lock.
    private func removeSlotIfEmpty(_ top: Int32, _ slot: String) {
        guard let slotDescriptor = openSlot(top, slot) else { return }
        let slotFD = slotDescriptor.rawValue
        let names = Self.entryNames(slotFD)
        guard names.allSatisfy({ $0 == Self.pathFileName || Self.isSidecarName($0) }) else { return }
        for name in names where name != Self.pathFileName { unlinkat(slotFD, name, 0) }
        unlinkat(slotFD, Self.pathFileName, 0)
        unlinkat(top, slot, AT_REMOVEDIR)
    }

    /// Every slot in the store (directories named as slots; temp names are skipped).
    private func allSlots(_ top: Int32) -> [String] {
        Self.entryNames(top).filter(Self.isSlotName)
    }

    /// The slot holding the version `id` (a regular file there), and its status: the slot where
    /// this process last saw it, else the first slot that has it.
    private func locate(_ top: Int32, _ id: String) -> (slot: String, status: stat)? {
        func find(_ slot: String) -> stat? {
            var status = stat()
            guard fstatat(top, slot + "/" + id, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
            return status
        }
        let hint = slotHints.withLock { $0[id] }
        if let hint, let status = find(hint) { return (hint, status) }
        for slot in allSlots(top) where slot != hint {
            if let status = find(slot) {
                remember(id, in: slot)
                return (slot, status)
            }
        }
        return nil
    }

    /// Whether `name` is a slot's: 16 lowercase hex digits, optionally `-` and a number.
    static func isSlotName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count >= 16 else { return false }
        guard bytes[0..<16].allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else { return false }
        if bytes.count == 16 { return true }
        return bytes.count > 17 && bytes[16] == 0x2D && bytes[17...].allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// The path stored in `slot`, decoded.
    private func readPathFile(_ top: Int32, _ slot: String) -> String? {
        readPathBytes(top, slot).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes of `slot`'s `path` file; nil when there is none or it cannot be read.
    private func readPathBytes(_ top: Int32, _ slot: String) -> [UInt8]? {
        guard let file = try? Descriptor.open(slot + "/" + Self.pathFileName, .readOnly, options: .noFollow,
                                              relativeTo: FileDescriptor(rawValue: top)),
              let bytes = try? Self.readAll(file.rawValue, path: "", limit: Self.maximumPathFileSize) else { return nil }
        return bytes
    }

    // MARK: - Versions in a slot

    /// A version file's name, parsed, with its size, file, mark and origin.
    struct Entry {
        var name: String
        var date: Int64
        var pid: Int64
        var counter: UInt64
        var kind: Kind
        /// From the name; nil for a name of an older store (listings hash the file).
        var hash: UInt64?
        var size: Int = 0
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var resolved = false
        var origin: String? = nil

        /// `<date>-<pid>-<counter>-<16 hex>.<kind>`, or an older store's `<date>-<pid>-<counter>.<kind>`
        /// (decimal numbers, lowercase hex); nil for any other name, which keeps a path (`/`, `..`)
        /// or a sidecar from ever passing for an id.
        static func parse(_ name: String) -> Entry? {
            guard name.utf8.count <= 96, let dot = name.lastIndex(of: "."),
                  let kind = Kind(rawValue: String(name[name.index(after: dot)...])) else { return nil }
            let parts = name[..<dot].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3 || parts.count == 4,
                  parts.prefix(3).allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
                  let date = Int64(parts[0]), let pid = Int64(parts[1]), let counter = UInt64(parts[2]) else { return nil }
            var hash: UInt64? = nil
            if parts.count == 4 {
                guard parts[3].utf8.count == 16,
                      parts[3].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
                      let value = UInt64(parts[3], radix: 16) else { return nil }
                hash = value
            }
            return Entry(name: name, date: date, pid: pid, counter: counter, kind: kind, hash: hash, resolved: kind == .saved)
        }

        /// Newest first: by date, then (the same nanosecond in two processes) by pid and counter.
        static func newerFirst(_ a: Entry, _ b: Entry) -> Bool {
            (a.date, a.pid, a.counter) > (b.date, b.pid, b.counter)
        }

        func version(_ documentPath: String) -> Version {
            Version(
                id: name, kind: kind, documentPath: documentPath, date: date, size: size, resolved: resolved,
                origin: origin, contentHash: hash ?? 0)
        }
    }

    /// Whether `name` is a version's sidecar (`<id>.resolved`, `<id>.origin`).
    static func isSidecarName(_ name: String) -> Bool {
        for suffix in [resolvedSuffix, originSuffix] where name.hasSuffix(suffix) {
            if Entry.parse(String(name.dropLast(suffix.count))) != nil { return true }
        }
        return false
    }

    /// The versions in `slot` (or only the one named `only`) with their sizes, files, marks and
    /// origins; files that vanish meanwhile are skipped. A version named without its hash (an older
    /// store's) is read and hashed.
    private func listSlot(_ top: Int32, _ slot: String, only: String? = nil) -> [Entry] {
        guard let slotDescriptor = openSlot(top, slot) else { return [] }
        let slotFD = slotDescriptor.rawValue
        let names = only.map { [$0, $0 + Self.resolvedSuffix] } ?? Self.entryNames(slotFD)
        var present = Set<String>()
        for name in names where name.hasSuffix(Self.resolvedSuffix) {
            var status = stat()
            if only == nil || fstatat(slotFD, name, &status, AT_SYMLINK_NOFOLLOW) == 0 { present.insert(name) }
        }
        var entries: [Entry] = []
        for name in names {
            guard var entry = Entry.parse(name) else { continue }
            var status = stat()
            guard fstatat(slotFD, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            entry.size = Int(status.st_size)
            entry.device = UInt64(status.st_dev)
            entry.inode = UInt64(status.st_ino)
            entry.resolved = entry.kind == .saved || present.contains(name + Self.resolvedSuffix)
            if entry.kind == .syncConflict, let file = try? Descriptor.open(name + Self.originSuffix, .readOnly, options: .noFollow,
                                                                             relativeTo: slotDescriptor.unowned),
               let bytes = try? Self.readAll(file.rawValue, path: "", limit: Self.maximumOriginSize) {
                entry.origin = String(decoding: bytes, as: UTF8.self)
            }
            if entry.hash == nil {
                guard let file = try? Descriptor.open(name, .readOnly, options: .noFollow, relativeTo: slotDescriptor.unowned),
                      let bytes = try? Self.readAll(file.rawValue, path: "") else { continue }
                entry.hash = contentHash(ContentHasher.hash(bytes))
            }
            entries.append(entry)
        }
        return entries
    }

    /// The version file name for a new version of `kind` added at `date` with text hashing to `hash`.
    private static func fileName(date: Int64, kind: Kind, hash: UInt64) -> String {
        let unique = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let hex = String(hash, radix: 16)
        return "\(date)-\(getpid())-\(unique)-\(String(repeating: "0", count: 16 - hex.count) + hex).\(kind.rawValue)"
    }

    /// Writes the sidecar file `path` (relative to `top`; 0600, replacing one there).
    private func writeSidecar(_ top: Int32, _ path: String, _ bytes: [UInt8]) throws(FileSystemError) {
        let fullPath = directory + "/" + path
        do {
            let file = try Descriptor.open(path, .writeOnly, options: [.create, .truncate, .noFollow],
                                           permissions: [.ownerReadWrite], relativeTo: FileDescriptor(rawValue: top))
            _ = try retryingInterrupts("fchmod", path: fullPath) { fchmod(file.rawValue, 0o600) }
            if !bytes.isEmpty { try writeAll(bytes, to: file.unowned, path: fullPath) }
            if durable { try file.sync(path: fullPath) }
            try file.close()
        } catch {
            throw FileSystemError(error, path: fullPath)
        }
    }

    /// Removes the sidecars of the version `id` in `slot` (there or not).
    private func unlinkSidecars(_ top: Int32, _ slot: String, _ id: String) {
        unlinkat(top, slot + "/" + id + Self.resolvedSuffix, 0)
        unlinkat(top, slot + "/" + id + Self.originSuffix, 0)
    }

    /// Removes the version `entry` of `slot` with its sidecars; answers whether it is gone (removed
    /// now, or by another process before).
    private func unlinkVersion(_ top: Int32, _ slot: String, _ name: String) -> Bool {
        let gone = unlinkat(top, slot + "/" + name, 0) == 0 || errno == ENOENT
        if gone { unlinkSidecars(top, slot, name) }
        forget(name)
        return gone
    }

    // MARK: - Thinning and eviction (under the lock)

    /// The ages thinning goes by (nanoseconds): every version younger than `everyVersion`, the
    /// newest of each clock hour (UTC) younger than `hourly`, the newest of each day (UTC) younger
    /// than `daily`, none older.
    public static let thinningRules = (everyVersion: hour, hourly: 24 * hour, daily: 30 * 24 * hour)
    static let hour: Int64 = 3600 * 1_000_000_000

    /// Thins the document's saved versions and resolved conflict versions by age (see
    /// ``thinningRules``): its newest version and `keeping` stay; unresolved conflict versions are
    /// not looked at. Answers what went.
    private func thin(_ top: Int32, slot: String, documentPath: String, keeping: String?) -> [Version] {
        let now = self.now()
        let rules = Self.thinningRules
        let candidates = listSlot(top, slot).filter { $0.kind == .saved || $0.resolved }.sorted(by: Entry.newerFirst)
        var hours = Set<Int64>(), days = Set<Int64>()
        var removed: [Version] = []
        for (index, entry) in candidates.enumerated() {
            let age = now - entry.date
            let hour = entry.date / Self.hour, day = entry.date / (24 * Self.hour)
            let keep: Bool
            if index == 0 || entry.name == keeping || age < rules.everyVersion {
                keep = true
            } else if age < rules.hourly {
                keep = !hours.contains(hour)
            } else if age < rules.daily {
                keep = !days.contains(day)
            } else {
                keep = false
            }
            hours.insert(hour)
            days.insert(day)
            if !keep && unlinkVersion(top, slot, entry.name) { removed.append(entry.version(documentPath)) }
        }
        if !removed.isEmpty && durable { flushDirectory(top, slot) }
        return removed
    }

    /// Removes the oldest versions of `kind` in `slot` beyond the per-document cap (not `keeping`).
    private func evictBeyondLimit(_ top: Int32, slot: String, documentPath: String, kind: Kind, keeping: String?) -> [Version] {
        let limit = kind == .saved ? savedLimit : conflictLimit
        let ofKind = listSlot(top, slot).filter { $0.kind == kind }
        guard ofKind.count > limit else { return [] }
        let oldestFirst = ofKind.filter { $0.name != keeping }.sorted(by: Entry.newerFirst).reversed()
        var removed: [Version] = []
        for entry in oldestFirst.prefix(ofKind.count - limit) where unlinkVersion(top, slot, entry.name) {
            removed.append(entry.version(documentPath))
        }
        return removed
    }

    /// While the store holds more than `byteLimit` bytes (each file once however many versions
    /// link to it), removes the oldest saved version of any document, then the oldest conflict
    /// version (never `keeping`). Slots emptied go too.
    private func evictBeyondByteLimit(_ top: Int32, keeping: String) -> [Version] {
        struct FileKey: Hashable { var device: UInt64, inode: UInt64 }
        var all: [(slot: String, entry: Entry)] = []
        var links: [FileKey: Int] = [:]
        var total = 0
        for slot in allSlots(top) {
            for entry in listSlot(top, slot) {
                all.append((slot, entry))
                let key = FileKey(device: entry.device, inode: entry.inode)
                if links[key, default: 0] == 0 { total += entry.size }
                links[key, default: 0] += 1
            }
        }
        guard total > byteLimit else { return [] }
        let order = all.filter { $0.entry.name != keeping }.sorted { a, b in
            if (a.entry.kind == .saved) != (b.entry.kind == .saved) { return a.entry.kind == .saved }
            return Entry.newerFirst(b.entry, a.entry)
        }
        var emptied: Set<String> = []
        var paths: [String: String] = [:]
        var removed: [Version] = []
        for (slot, entry) in order {
            guard total > byteLimit else { break }
            if unlinkVersion(top, slot, entry.name) {
                let key = FileKey(device: entry.device, inode: entry.inode)
                links[key, default: 1] -= 1
                if links[key] == 0 { total -= entry.size }
                emptied.insert(slot)
                if paths[slot] == nil { paths[slot] = readPathFile(top, slot) ?? "" }
                removed.append(entry.version(paths[slot]!))
            }
        }
        for slot in emptied { removeSlotIfEmpty(top, slot) }
        return removed
    }

    // MARK: - Hints

    private func remember(_ id: String, in slot: String) {
        slotHints.withLock { hints in
            if hints.count >= Self.maximumHints { hints.removeAll(keepingCapacity: true) }
            hints[id] = slot
        }
    }

    private func forget(_ id: String) {
        _ = slotHints.withLock { $0.removeValue(forKey: id) }
    }

    // MARK: - System calls

    /// The store's directory, opened for one operation (each holds its own descriptor, so that its
    /// `flock` excludes the other threads of this process as well as other processes).
    private func openTop() throws(FileSystemError) -> Descriptor {
        do {
            return try Descriptor.open(directory, .readOnly, options: .directory)
        } catch {
            throw FileSystemError(error)
        }
    }

    /// The directory `name` (a slot, or a temp slot) relative to `top`, opened without following a
    /// symlink; nil when it cannot be.
    private func openSlot(_ top: Int32, _ name: String) -> Descriptor? {
        try? Descriptor.open(name, .readOnly, options: [.directory, .noFollow], relativeTo: FileDescriptor(rawValue: top))
    }

    /// Runs `body` holding the exclusive lock of the store's directory.
    private func locked<T>(_ top: Int32, _ body: () throws(FileSystemError) -> T) throws(FileSystemError) -> T {
        try lock(top)
        defer { flock(top, LOCK_UN) }
        return try body()
    }

    /// Takes the exclusive lock of the store's directory (`flock`, retrying EINTR); the caller
    /// unlocks it.
    private func lock(_ top: Int32) throws(FileSystemError) {
        while flock(top, LOCK_EX) != 0 {
            guard errno == EINTR else { throw FileSystemError(errno: errno, syscall: "flock", path: directory) }
        }
    }

    /// Flushes the directory `name` (relative to `top`) so a rename in it survives a power loss.
    /// Best effort: the version is there either way.
    private func flushDirectory(_ top: Int32, _ name: String) {
        try? SystemCalls.flushDirectory(at: name, relativeTo: FileDescriptor(rawValue: top))
    }

    /// Removes the temp files and temp slots older than a minute: leftovers of a process killed
    /// while adding. Fresher ones may belong to a live process. Removes empty slots without a
    /// `path` file too (a removal cut short). Best effort.
    private func sweepStaleTempFiles() {
        guard let topDescriptor = try? openTop() else { return }
        let top = topDescriptor.rawValue
        _ = try? locked(top) { () throws(FileSystemError) in
            let now = Self.realtimeNanoseconds()
            for name in Self.entryNames(top) where name.hasPrefix(Self.tempPrefix) {
                var status = stat()
                guard fstatat(top, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
                guard now - modified > Self.staleTempAge else { continue }
                if status.st_mode & S_IFMT == S_IFDIR {
                    if let inside = openSlot(top, name) {
                        for inner in Self.entryNames(inside.rawValue) { unlinkat(inside.rawValue, inner, 0) }
                    }
                    unlinkat(top, name, AT_REMOVEDIR)
                } else {
                    unlinkat(top, name, 0)
                }
            }
            for slot in allSlots(top) where readPathBytes(top, slot) == nil {
                unlinkat(top, slot, AT_REMOVEDIR)  // ENOTEMPTY: not ours to judge, kept
            }
        }
    }

    /// Creates `path` and its missing parents with mode 0700; fails unless it ends up a directory.
    private static func makeDirectories(_ path: String) throws(FileSystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) == 0 {
                _ = chmod(prefix, 0o700)  // exactly, whatever the umask
            } else if errno != EEXIST {
                throw FileSystemError(errno: errno, syscall: "mkdir", path: prefix, reason: "creating the version store's directory \(path)")
            }
        }
        var status = stat()
        guard stat(path, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "stat", path: path) }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw FileSystemError(errno: ENOTDIR, syscall: "stat", path: path, reason: "the version store's directory is not a directory")
        }
    }

    /// The names in the open directory `fd` (without `.` and `..`); read through a duplicate, so
    /// `fd` stays open and usable.
    static func entryNames(_ fd: Int32) -> [String] {
        let listFD = dup(fd)
        guard listFD >= 0 else { return [] }
        let duplicate = Descriptor(owningRawValue: listFD)
        guard let stream = fdopendir(duplicate.rawValue) else { return [] }
        _ = duplicate.take()  // the stream owns it now
        defer { closedir(stream) }
        rewinddir(stream)  // the duplicate shares the offset with `fd`, which an earlier listing moved
        var names: [String] = []
        while let entry = readdir(stream) {
            // Read up to the NUL through a pointer (loading `d_name` copies 256 bytes, past the end
            // of a short record: see SafeSave's sweep).
            let name = String(cString: UnsafeRawPointer(entry).advanced(by: versionDirentNameOffset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// All of the open file `fd`, read from its start; more than `limit` bytes fails with EFBIG.
    static func readAll(_ fd: Int32, path: String, limit: Int = .max) throws(FileSystemError) -> [UInt8] {
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw FileSystemError(errno: errno, syscall: "fstat", path: path) }
        if let refusal = FileSizeLimit.refusal(size: Int(status.st_size), path: path, limit: limit) { throw refusal }
        // One byte more than the size: reading it (or EOF) says whether the file grew meanwhile.
        var bytes = [UInt8](repeating: 0, count: min(Int(status.st_size), limit) + 1)
        var done = 0
        while true {
            if done == bytes.count {
                guard bytes.count <= limit else { throw FileSystemError(errno: EFBIG, syscall: "pread", path: path) }
                bytes.append(contentsOf: repeatElement(0, count: max(4096, bytes.count)))
            }
            let wanted = bytes.count - done
            let got = try bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(SystemCallError) in
                    try readFully(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), from: FileDescriptor(rawValue: fd), at: Int64(done), path: path)
                }
            }.mapError { FileSystemError($0) }.get()
            done += got
            if got < wanted { break }  // the end of the file
        }
        bytes.removeSubrange(done...)
        return bytes
    }

    /// Now, in nanoseconds since the epoch.
    static func realtimeNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Now, or just after the last date given by this store if its clock is not past it.
    private func nextDate() -> Int64 {
        let now = max(self.now(), 0)
        var last = lastDate.load(ordering: .relaxed)
        while true {
            let next = max(now, last + 1)
            let (exchanged, original) = lastDate.compareExchange(expected: last, desired: next, ordering: .relaxed)
            if exchanged { return next }
            last = original
        }
    }

    private static func randomHex() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() as UInt64, radix: 16)
    }
}

/// Writes pieces to a file in order with `pwritev` (up to 1 MiB or 1,024 pieces a call), keeping
/// the arrays, not copying them, until they are written; loops over short writes and EINTR.
private struct GatheringWriter {
    let fd: Int32
    let path: String
    private var pending: [[UInt8]] = []
    private var pendingBytes = 0
    private var offset: off_t = 0

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Bytes taken so far (written or pending).
    var count: Int { Int(offset) + pendingBytes }

    mutating func append(_ bytes: [UInt8]) throws(FileSystemError) {
        guard !bytes.isEmpty else { return }
        pending.append(bytes)
        pendingBytes += bytes.count
        if pendingBytes >= 1 << 20 || pending.count == 1024 { try flush() }
    }

    mutating func flush() throws(FileSystemError) {
        guard !pending.isEmpty else { return }
        let written: Int
        do {
            written = try writeAll(pending, to: FileDescriptor(rawValue: fd), at: Int64(offset), path: path)
        } catch {
            throw FileSystemError(error)
        }
        pending.removeAll(keepingCapacity: true)
        pendingBytes = 0
        offset += off_t(written)
    }
}

/// Where a directory entry's name starts in its record.
private let versionDirentNameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
