import FileStore
import TextBuffer

/// What a document tells its clients without being asked: produced by the ``DocumentStore`` as
/// values, turned into notifications by the server.
public struct DocumentEvent: Sendable, Equatable {
    /// Why the state changed.
    public enum Reason: String, Sendable {
        /// An edit made the document differ from its file.
        case edited
        /// An undo or redo made it differ, or match again.
        case undone, redone
        /// A long save started (`progressAvailable`).
        case saving
        /// A save succeeded.
        case saved
        /// A save failed: `error` says why; the edits are kept.
        case saveFailed
        /// A save found the file changed on disk since it was read (`inConflict`).
        case externalChange
        /// A revert started (`editingDisabled`), ended, or failed.
        case reverting, reverted, revertFailed
        /// A close started saving (`editingDisabled`), or the document was closed.
        case closing, closed
        /// A save was cancelled before it replaced the file.
        case saveCancelled
        /// The file was deleted, or moved where it could not be followed: the text is kept and the
        /// next save writes the file again.
        case deletedOnDisk
        /// The file changed on disk and the document, which had no unsaved edits, took its text
        /// (sent with `kind` `.textChanged`); or the file now holds exactly the document's text.
        case reloaded
        /// A conflict was resolved (`document/resolveConflict`).
        case conflictResolved
        /// An earlier version was restored as an edit.
        case restored
        /// The file's attributes changed, its content did not (a chmod, chown, an extended
        /// attribute or ACL, an immutable flag), or whether the server can write it did
        /// (`readOnly`, which the event carries).
        case attributesChanged
        /// A dead server's journal was recovered (`document/recover`): the unsaved text is back,
        /// in conflict when the file changed since.
        case recovered
        /// The document's journal could not be written (`error` says why): its unsaved changes
        /// would not survive the process's death until a journal is written again. Editing goes on.
        case journalFailed
        /// Another party coordinates the file to write, delete or move it (`workspace/coordinate`):
        /// editing, saving and autosave stop until the lease ends.
        case coordinated
        /// The last lease holding the document ended (`workspace/endCoordination`), and its file
        /// was checked: editing is back.
        case coordinationEnded
        /// A sync tool's conflict copy appeared beside the file (`inConflict`), or the last
        /// unresolved one went (the tool removed it, or another program did).
        case syncConflict
        /// The document's kept versions changed (only with ``Kind/versionsChanged(added:removed:resolved:)``).
        case versionsChanged
    }

    /// What the event reports.
    public enum Kind: Sendable, Equatable {
        /// The state or `hasUnsavedChanges` changed (`document/stateChanged`).
        case stateChanged
        /// The text changed without a client's request (the file changed on disk): the edits, in
        /// order, each against the result of the one before, in the store's position encoding
        /// (`document/didChange`).
        case textChanged(edits: [TextEdit])
        /// The file was moved or renamed from `oldPath` to `path` (`document/didMove`).
        case moved(oldPath: String)
        /// For a document an editor owns (``DocumentStore/setMirrored(_:)``): the file changed on
        /// disk and the document, which had no unsaved edits, should take its text; the edits, all
        /// against the document's text (LSP's `TextEdit[]`), in the store's position encoding, turn
        /// it into the file's. The
        /// document is unchanged: the editor applies them, and its changes bring it there.
        case reloadProposed(edits: [TextEdit])
        /// A package's entries changed without a client's request (another program changed the
        /// package and the document took its tree, or a revert or resolution did): the entries
        /// written or deleted, and whether the managed store changed (`document/didChange`).
        case entriesChanged(entries: [EntryChange], store: Bool)
        /// Versions of the document were kept (`added`), dropped (`removed`: deleted, thinned,
        /// evicted; ids) or resolved (`resolved`: ids) by this process (`document/didChangeVersions`).
        case versionsChanged(added: [VersionStore.Version], removed: [String], resolved: [String])
    }

    public var handle: String
    /// The file's path (after a save-as, the new one).
    public var path: String
    public var version: Int64
    public var state: DocumentState
    public var previousState: DocumentState
    public var hasUnsavedChanges: Bool
    public var reason: Reason
    /// The failure that caused the change, if one did.
    public var error: DocumentError?
    /// Whether an autosave (rather than a client's request) caused it.
    public var autosave: Bool
    public var kind: Kind = .stateChanged
    /// For `.attributesChanged`: whether the server can no longer write the file, now.
    public var readOnly: Bool? = nil
}

/// When the store saves documents by itself.
public enum AutosavePolicy: Sendable, Equatable {
    /// Never: clients save (the default; an editor over stdio owns its save command).
    case off
    /// After this many milliseconds without a change, if there are unsaved changes and the
    /// document is not in conflict.
    case afterDelay(milliseconds: Int)
}
