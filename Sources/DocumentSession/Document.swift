import FileStore
import TextBuffer

/// One open document: its text, history and what is known about its file. A value owned by the
/// ``DocumentStore`` actor.
public struct Document: Sendable {
    /// The server-issued handle (`d1`, `d2`, ...); it stays the same when the file moves.
    public let handle: String
    /// The absolute path of the file.
    public var path: String
    /// The text.
    public var buffer: TextBuffer
    /// Undo and redo, and the clean point.
    public var history: UndoHistory
    /// Goes up by one with every change of the text, whoever makes it.
    public var version: Int64 = 1
    /// How the file is encoded, and whether it has a byte order mark (both kept for saving).
    public var encoding: TextEncoding
    public var hasByteOrderMark: Bool
    /// How the file's lines ended when it was read.
    public var lineEnding: LineEndingStyle
    /// The file's identity when it was last read or written.
    public var identity: FileIdentity
    /// The state flags.
    public var state: DocumentState = []
    /// The text as last synced with the file (read, saved, reverted or reloaded): the base of a
    /// three-way merge when the file changes while there are unsaved edits. An O(1) snapshot that
    /// shares the rope's unchanged chunks with `buffer`.
    public internal(set) var syncedText: TextBuffer
    /// The file was deleted (or moved where it could not be followed) while open: the text is
    /// kept, and the next save writes the file again.
    public internal(set) var deletedOnDisk = false {
        didSet { if !deletedOnDisk { unwritten = false } }
    }
    /// The file was never written: an editor's new buffer (the LSP mode's `didOpen` of a file
    /// that does not exist yet, ``DocumentStore/openUnwritten(path:)``). `deletedOnDisk` too, so
    /// that the next save writes the file and a file appearing at the path is compared as for a
    /// deleted one; unlike a deleted file's, the text is not unsaved for the file's absence (an
    /// empty new buffer has nothing to keep). Ends with `deletedOnDisk`.
    public internal(set) var unwritten = false
    /// How many times the text was taken from the file by a reload or a conflict's resolution: a
    /// save of a text taken before one would overwrite what the file gained, so it is refused.
    var reloadCount = 0
    /// The file's attributes (permissions, owner, group, extended attributes, writability) when
    /// the server last looked at them: at the open, after a save or a revert, at every check of the
    /// watcher. nil when there is no file.
    public internal(set) var attributes: FileAttributes? = nil
    /// The conflict copies sync tools wrote beside the file and nobody resolved yet, newest
    /// first (the state has `syncConflict` while there are any).
    public internal(set) var syncCopies: [SyncCopyFile] = []

    /// Whether the server can no longer write the file: a save would be refused for the file
    /// itself (``FileAttributes/readOnly``). false when there is no file (a save creates one).
    public var readOnly: Bool { attributes?.readOnly ?? false }

    /// Whether the text differs from the file's, by the history's account.
    public var hasUnsavedChanges: Bool { history.hasUnsavedChanges }

    /// The file name, shown to the user.
    public var displayName: String { Self.displayName(forPath: path) }

    /// The file name of a path.
    public static func displayName(forPath path: String) -> String {
        // The last component, trailing slashes ignored ("/a/b/" is "b"; "/" is "/"), found from
        // the end: a query names 10,000 files this way.
        let utf8 = path.utf8
        var end = utf8.endIndex
        while end > utf8.startIndex, utf8[utf8.index(before: end)] == UInt8(ascii: "/") { end = utf8.index(before: end) }
        guard end > utf8.startIndex else { return path }
        let start = utf8[..<end].lastIndex(of: UInt8(ascii: "/")).map { utf8.index(after: $0) } ?? utf8.startIndex
        return String(path[start..<end])
    }

    /// The kind of document, from the file name's extension (LSP's language identifiers).
    public var fileType: String { FileType.identifier(forPath: path) }
}

/// Document kinds by file-name extension.
public enum FileType {
    static let byExtension: [String: String] = [
        "txt": "plaintext", "text": "plaintext", "md": "markdown", "markdown": "markdown", "swift": "swift",
        "c": "c", "h": "c", "cpp": "cpp", "cc": "cpp", "hpp": "cpp", "rs": "rust", "go": "go", "py": "python",
        "js": "javascript", "ts": "typescript", "json": "json", "yaml": "yaml", "yml": "yaml", "toml": "toml",
        "html": "html", "css": "css", "xml": "xml", "sh": "shellscript", "el": "emacs-lisp", "lua": "lua",
        "rb": "ruby", "java": "java", "tex": "latex", "org": "org", "csv": "csv",
    ]

    /// The identifier for a path: `markdown` for `notes.md`, `plaintext` when unknown.
    public static func identifier(forPath path: String) -> String {
        let name = Document.displayName(forPath: path)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "plaintext" }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? "plaintext"
    }
}
