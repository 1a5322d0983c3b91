import FileStore
import TextBuffer

/// A change of an open document's version, as the daemon's hub hears of it to pass it on to every
/// client holding the document (``DocumentStore/setTextObserver(_:)``).
public struct TextChange: Sendable {
    public let handle: String
    /// The document's file.
    public let path: String
    /// The version it produced.
    public let version: Int64
    /// The text after it (an O(1) snapshot).
    public let text: TextBuffer
    /// What turned the text before into `text`, in order, each against the result of the one
    /// before, when the store knows it (an edit, an undo, a redo); nil: compare the texts.
    public let steps: [AppliedEdit]?
}

/// Told of every change of an open document's version, on the store's thread, right after it.
public typealias TextObserver = @Sendable (TextChange) -> Void

extension DocumentStore {
    /// Tells `observer` of every change of a document's version (an edit that changes nothing
    /// included: it raises the version), whatever caused it: a client's edit, undo or redo, a
    /// reload, a revert, a conflict's resolution, a restored version, a recovery.
    public func setTextObserver(_ observer: TextObserver?) {
        textObserver = observer
    }

    /// After a change of `handle`'s version: tells the observer.
    func observeText(_ handle: String) {
        let steps = pendingTextSteps
        pendingTextSteps = nil
        guard let observer = textObserver, let (path, version, text) = documents.peek(handle, { ($0.path, $0.version, $0.buffer) }) else { return }
        observer(TextChange(handle: handle, path: path, version: version, text: text, steps: steps))
    }

    /// The version and text of an open document (an O(1) snapshot of the text), or nil.
    public func textSnapshot(_ handle: String) -> (version: Int64, text: TextBuffer)? {
        documents.peek(handle) { ($0.version, $0.buffer) }
    }

    /// Closes a document without saving and without deleting its journal: the journal is flushed
    /// and let go, a dead server's from then on, so the unsaved text is offered at the file's next
    /// open, in this process or another (a daemon's last client holding it vanished). Waits for a
    /// save or revert already running on it.
    public func abandon(_ handle: String) async {
        guard documents[handle] != nil else { return }
        let turn = reserve(handle)
        disableEditing(handle, reason: .closing)
        await waitForTurn(turn)
        defer { release(handle) }
        remove(handle, releasingJournal: true)
    }
}

extension DocumentStore {
    /// Every save takes its file's lock across processes under `locks` from now on (``FileLocks``;
    /// nil: only the directory's).
    public func setFileLocks(_ locks: FileLocks?) {
        fileLocks = locks
    }

    /// When documents save by themselves now.
    public var autosavePolicy: AutosavePolicy { autosave }
}
