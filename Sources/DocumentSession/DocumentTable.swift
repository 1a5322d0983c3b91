import FileStore

/// The open documents by handle, with an index by file (device and inode) kept up to date by every
/// change made through it, so that an open asks "is this file open already?" in O(1) rather than
/// by a scan of every open document (the load soak's finding 3: with 10,000 documents open the
/// scan made each open take 6 ms, and opening them all 33 to 46 s).
///
/// Every change of a document goes through the subscript's modify accessor or
/// ``mutate(_:_:)``, which compare the file's device and inode before and after: a save that
/// replaced the file, a reload, a move or a restore that changed them moves the entry.
struct DocumentTable {
    private var byHandle: [String: Document] = [:]
    private var byFile: [FileKey: Set<String>] = [:]

    /// A file as the kernel names it.
    struct FileKey: Hashable {
        let device: UInt64
        let inode: UInt64

        init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }

        init(_ document: borrowing Document) {
            self.init(device: document.identity.device, inode: document.identity.inode)
        }
    }

    subscript(handle: String) -> Document? {
        get { byHandle[handle] }
        _modify {
            let before = key(of: handle)
            // Also when the access ends by a throw.
            defer { reindex(handle, from: before, to: key(of: handle)) }
            yield &byHandle[handle]
        }
    }

    var count: Int { byHandle.count }
    var values: Dictionary<String, Document>.Values { byHandle.values }

    @discardableResult
    mutating func removeValue(forKey handle: String) -> Document? {
        guard let removed = byHandle.removeValue(forKey: handle) else { return nil }
        reindex(handle, from: FileKey(removed), to: nil)
        return removed
    }

    /// Reads the stored document in place (no copy of it, which would retain and release each of its
    /// parts); nil when there is none.
    func peek<T>(_ handle: String, _ body: (borrowing Document) -> T) -> T? {
        guard let index = byHandle.index(forKey: handle) else { return nil }
        return body(byHandle.values[index])
    }

    /// Runs `body` on the stored document in place: no copy of its text or history, and no move
    /// out into an optional and back (the edit path's hot spot).
    mutating func mutate<T>(
        _ handle: String, _ body: (inout Document) throws(DocumentError) -> T
    ) throws(DocumentError) -> T {
        guard let index = byHandle.index(forKey: handle) else { throw .unknownDocument(handle) }
        let before = key(at: index)
        defer { reindex(handle, from: before, to: key(at: index)) }
        return try Self.mutate(&byHandle.values[index], body)
    }

    private static func mutate<T>(
        _ document: inout Document, _ body: (inout Document) throws(DocumentError) -> T
    ) throws(DocumentError) -> T {
        try body(&document)
    }

    /// The file of the document at `index`, read in place (a copy of the document, even a
    /// temporary one, would retain and release each of its parts: the edit path's cost).
    private func key(at index: Dictionary<String, Document>.Index) -> FileKey {
        FileKey(device: byHandle.values[index].identity.device, inode: byHandle.values[index].identity.inode)
    }

    private func key(of handle: String) -> FileKey? {
        byHandle.index(forKey: handle).map { key(at: $0) }
    }

    /// The handles of the open documents whose file has this device and inode (usually one; a
    /// file deleted on disk whose inode was reused, and a document not yet saved, share theirs).
    func handles(device: UInt64, inode: UInt64) -> Set<String> {
        byFile[FileKey(device: device, inode: inode)] ?? []
    }

    private mutating func reindex(_ handle: String, from before: FileKey?, to after: FileKey?) {
        guard before != after else { return }
        if let before {
            byFile[before]?.remove(handle)
            if byFile[before]?.isEmpty == true { byFile[before] = nil }
        }
        if let after { byFile[after, default: []].insert(handle) }
    }

    /// Checks that the index says what a scan says (tests).
    func indexIsConsistent() -> Bool {
        var scanned: [FileKey: Set<String>] = [:]
        for (handle, document) in byHandle { scanned[FileKey(document), default: []].insert(handle) }
        return scanned == byFile
    }
}
