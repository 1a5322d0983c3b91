import FileStore
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
}
