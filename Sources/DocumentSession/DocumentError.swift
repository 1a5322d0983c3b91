import FileStore
import ManagedStore
import TextBuffer

/// Why a document operation was refused. Nothing changed when one is thrown.
public enum DocumentError: Error, Sendable, Equatable {
    /// No open document has this handle.
    case unknownDocument(String)
    /// The request was made against `given`, but the document is at `current`.
    case staleVersion(current: Int64, given: Int64)
    /// A position, range or edit was refused.
    case invalidText(TextBufferError)
    /// The file could not be read as text.
    case load(LoadError)
    /// A file-system call failed.
    case fileSystem(FileSystemError)
    /// `create` found a file already at the path.
    case alreadyExists(path: String)
    /// Edits are refused for now.
    case editingDisabled(handle: String, reason: String)
    /// A save did not happen (the file is as it was).
    case save(SaveError)
    /// Save-as named a file another open document holds.
    case openElsewhere(path: String, handle: String)
    /// The file was deleted on disk (a state change's detail, not a refusal).
    case deletedOnDisk(path: String)
    /// `resolveConflict` on a document that is not in conflict.
    case notInConflict(handle: String)
    /// `resolveConflict` taking `theirs` or `merge` from a sync tool's conflict copy, when the
    /// document has several and none was named: their ids.
    case conflictCopyNotNamed(handle: String, ids: [String])
    /// A three-way merge found changes on both sides to the same lines: the regions, with line
    /// ranges in the document's current text.
    case mergeConflicts([ThreeWayMerge.Conflict])
    /// The disk's side of a conflict could not be read as text (`theirs` and `merge` need it).
    case theirsUnreadable(LoadError)
    /// No version of the document has this id.
    case unknownVersion(String)
    /// Earlier versions are not kept (no state directory could be made).
    case versionsUnavailable(reason: String)
    /// The file read is not the one the path named when it was checked against the sandbox roots:
    /// something was renamed or swapped in between, so nothing was opened.
    case pathChanged(path: String)
    /// `recover` or `discardRecovery` on a document with no dead server's journal offered.
    case noRecovery(handle: String)
    /// `recover` on a document with unsaved changes of its own (or in conflict), which recovering
    /// would replace.
    case unsavedChanges(handle: String, path: String, reason: String)
    /// An entry of a package could not be read, written or deleted as asked.
    case entry(EntryError)
    /// A package's directory changed on disk (another program wrote inside it) since it was read
    /// or last saved: saving would overwrite that change. Save with `force`, resolve, or revert.
    /// `expected` is the etag of the tree as the server last read or saved it, `found` now's (nil:
    /// the package is gone).
    case packageChangedOnDisk(path: String, expected: String, found: String?)
    /// A request for one kind of document named another: `operation` is what was asked,
    /// `kind` what the document is (`text`, `package`, `managed`).
    case wrongKind(handle: String, kind: String, operation: String)
    /// SQLite refused or failed a statement of a managed document's store (or a migration), or
    /// the store's policy refused it before it ran. Nothing changed.
    case store(StoreError)
    /// Edits, saves, reverts and resolutions are refused while another party holds a lease to
    /// write, delete or move the file (`workspace/coordinate`): `lease` names the first one.
    case coordinated(handle: String, lease: String, intent: String)
}

/// Why an entry of a package was refused. Nothing changed.
public enum EntryError: Error, Sendable, Equatable {
    /// The path cannot name an entry (absolute, `..`, empty component, ...).
    case invalidPath(path: String, reason: String)
    /// No entry has this path.
    case noSuchEntry(path: String)
    /// The path is a directory of the package.
    case isDirectory(path: String)
    /// A component of the path is a file or symbolic link of the package.
    case underFile(path: String, file: String)
    /// The entry is a symbolic link: never followed, so not read.
    case symbolicLink(path: String)
    /// The path is the managed store's own (written only through `store/execute`).
    case reserved(path: String, reason: String)
}
