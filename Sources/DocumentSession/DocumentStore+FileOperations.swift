import FileStore
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// Why a coordinated file operation (delete, move, export) was refused. Nothing changed when one is
/// thrown.
public enum FileOperationError: Error, Sendable, Equatable {
    /// A document error (an unknown handle, a file-system failure, a file another document holds...).
    case document(DocumentError)
    /// The file is open as `handle`, which has unsaved changes: deleting it would drop them.
    case unsavedChanges(handle: String, path: String)
}

/// A delete or move begun in request order: the open document of the file, if any, and whether the
/// operation holds that document's lock already (else it waits for the save, revert or close
/// running on it).
public struct FileOperationTicket: Sendable {
    /// The open document of the file, when there is one.
    public let handle: String?
    /// Its place in line for the document's lock; nil: it took the lock when it began (or there
    /// is no document).
    let turn: LockTurn?
    var acquired: Bool { turn == nil }
    /// Whether the operation can run at once, in request order (no document, or its lock was free).
    public var runsAtOnce: Bool { handle == nil || acquired }
}

/// The file a delete or move acts on: the path recorded and reported, and the path to act on (with
/// sandbox roots, a name in a pinned directory: `/proc/self/fd/D/name`).
public struct FileOperand: Sendable {
    public var path: String
    public var entry: String
    public init(path: String, entry: String) {
        self.path = path
        self.entry = entry
    }
}

/// What a move did.
public struct MoveResult: Sendable {
    /// The file's new path (the old one when source and destination were the same file).
    public var path: String
    /// The open document that followed the file, if any.
    public var handle: String?
}

extension DocumentStore {
    // MARK: - Finding the document of a file

    /// The open document whose file is `path`: by its path, or a document opened through a symbolic
    /// link leading there. (Another hard link of the file is another name: not the document's.)
    public func openDocument(atPath path: String) -> String? {
        if let handle = handleByPath[path], documents[handle] != nil { return handle }
        guard let found = FileIdentity.current(path: path) else { return nil }
        return documents.handles(device: found.device, inode: found.inode).sorted().first(where: { handle in
            guard let document = documents[handle] else { return false }
            return ((try? SafeSave.resolveSymlinks(document.path)) ?? document.path) == path
        })
    }

    /// The open document whose file is `path` or lies under the directory `path` (a package's save
    /// as replacing that directory would take the file away), the first by path, with its path.
    public func openDocument(atOrUnder path: String) -> (path: String, handle: String)? {
        if let handle = openDocument(atPath: path) { return (path, handle) }
        let inside = path.hasSuffix("/") ? path : path + "/"
        return documents.values.filter { $0.path.hasPrefix(inside) }.min(by: { $0.path < $1.path }).map { ($0.path, $0.handle) }
    }

    /// Refuses `path` when it is the file of an open document (by path, or by device and inode
    /// through a link): an export or a move onto it would change the document's file under it.
    /// `except`: the document that may own it (a move's own document).
    public func checkNotOpen(_ path: String, except handle: String? = nil) throws(DocumentError) {
        try checkNotOpenElsewhere(path, handle: handle ?? "")
    }

    // MARK: - Deleting

    /// Starts a delete in request order. An open document with unsaved changes is refused unless
    /// `discard` (nothing changes). Otherwise the document's lock is taken; when a save, revert or
    /// close is running, edits are refused from now on (`closing`, as a close does) and
    /// ``finishDelete(_:_:discard:)`` waits for it.
    public func beginDelete(_ file: FileOperand, discard: Bool) throws(FileOperationError) -> FileOperationTicket {
        guard let handle = openDocument(atPath: file.path), let document = documents[handle] else {
            return FileOperationTicket(handle: nil, turn: nil)
        }
        if !discard && document.hasUnsavedChanges { throw .unsavedChanges(handle: handle, path: document.path) }
        let turn = reserve(handle)
        if turn != nil { disableEditing(handle, reason: .closing) }
        return FileOperationTicket(handle: handle, turn: turn)
    }

    /// Deletes the file: its document (if open) stops being watched, the file is unlinked and its
    /// directory flushed (on a thread of its own), then the document is closed without saving
    /// (`closed`). If the unlink fails, the document stays open and watched, and the error is
    /// thrown. Answers the handle closed.
    /// `keepingTurn` as for ``finishSave(_:progress:isCancelled:keepingTurn:)``, when there is a
    /// document.
    public func finishDelete(
        _ ticket: FileOperationTicket, _ file: FileOperand, discard: Bool, keepingTurn: Bool = false
    ) async throws(FileOperationError) -> String? {
        var handle = ticket.handle
        if handle != nil { await waitForTurn(ticket.turn) }
        defer { if !keepingTurn, let locked = ticket.handle { release(locked) } }
        if let open = handle, documents[open] == nil { handle = nil }
        func giveBackEditing(_ error: DocumentError?) {
            guard let handle, !ticket.acquired else { return }
            let released = releaseEditing(handle)
            change(handle, reason: .closing, error: error, always: error != nil) { $0.state.subtract(released) }
        }
        if let handle, !discard, let document = documents[handle], document.hasUnsavedChanges {
            giveBackEditing(nil)
            throw .unsavedChanges(handle: handle, path: document.path)
        }
        // Not watched from here on: the presenter must not report our own deletion.
        if let handle { stopPresenting(handle) }
        let entry = file.entry, path = file.path
        let outcome = await runOnOwnThread { () -> FileSystemError? in
            do throws(FileSystemError) {
                try FileRemoval.unlinkRegularFile(entry, reportedAs: path)
                return nil
            } catch {
                return error
            }
        }
        if let error = outcome {
            if let handle, documents[handle] != nil { startPresenting(handle) }
            giveBackEditing(.fileSystem(error))
            throw .document(.fileSystem(error))
        }
        if let handle { remove(handle, keepingUndo: false) }
        dropKeptUndo(forPath: path)
        return handle
    }

    // MARK: - Moving

    /// Starts a move in request order: refuses a destination that is the file of another open
    /// document (even to replace it), and takes the lock of the file's own document, if open (or
    /// ``finishMove(_:from:to:replace:)`` waits for the save, revert or close running on it). Edits
    /// stay allowed: they are unsaved edits of the document wherever its file goes.
    public func beginMove(_ source: FileOperand, to destination: FileOperand) throws(FileOperationError) -> FileOperationTicket {
        let handle = openDocument(atPath: source.path)
        do throws(DocumentError) {
            try checkNotOpen(destination.path, except: handle)
        } catch {
            throw .document(error)
        }
        guard let handle else { return FileOperationTicket(handle: nil, turn: nil) }
        return FileOperationTicket(handle: handle, turn: reserve(handle))
    }

    /// Moves the file (``FileTransfer/move(from:to:replace:)``, on a thread of its own: across file
    /// systems a copy, a flush, then the unlink), under the lock of its document, which then follows
    /// it as it follows a move by another program: its path, watch, locator and versions, with
    /// `document/didMove` (the `.moved` event). Its text and unsaved edits stay as they are.
    /// `keepingTurn` as for ``finishSave(_:progress:isCancelled:keepingTurn:)``, when there is a
    /// document.
    public func finishMove(
        _ ticket: FileOperationTicket, from source: FileOperand, to destination: FileOperand, replace: Bool,
        keepingTurn: Bool = false
    ) async throws(FileOperationError) -> MoveResult {
        var handle = ticket.handle
        if handle != nil { await waitForTurn(ticket.turn) }
        defer { if !keepingTurn, let locked = ticket.handle { release(locked) } }
        if let open = handle, documents[open] == nil { handle = nil }
        do throws(DocumentError) {
            // Opened meanwhile (the lock was waited for)?
            try checkNotOpen(destination.path, except: handle)
        } catch {
            throw .document(error)
        }
        let (from, to) = (source.entry, destination.entry)
        let outcome = await runOnOwnThread { () -> Result<(before: FileIdentity?, after: FileIdentity, moved: Bool), FileSystemError> in
            do throws(FileSystemError) {
                // Source and destination the same file: nothing happened, both names stay (moved false).
                return .success(try FileTransfer.moveReporting(from: from, to: to, replace: replace))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .failure(var error):
            // Errors name the paths the client gave, not the pinned descriptors.
            error = error.naming(from, as: source.path).naming(to, as: destination.path)
            throw .document(.fileSystem(error))
        case .success(let (before, after, moved)):
            guard moved else { return MoveResult(path: source.path, handle: handle) }
            if let handle, documents[handle] != nil { follow(handle, to: destination.path, before: before, after: after) }
            return MoveResult(path: destination.path, handle: handle)
        }
    }

    /// The document follows its file, moved by the server itself to `path`: as a move by another
    /// program is followed (``move(_:to:)``: path, watch, versions, `.moved`), and the identity the
    /// move answered is the document's when the file was, before the move, as the document last
    /// saw it (else the pending change is found by the next check, at the new place).
    private func follow(_ handle: String, to path: String, before: FileIdentity?, after: FileIdentity) {
        guard let document = documents[handle], document.path != path else { return }
        move(handle, to: path)
        if let before, before.sameState(as: document.identity), !document.deletedOnDisk {
            var identity = after
            identity.contentHash = document.identity.contentHash
            documents[handle]!.identity = identity
        }
        refreshLocator(handle)
    }

    // MARK: - Exporting

    /// Starts an export in request order: the document's current text (saved or not), as an O(1)
    /// snapshot, with its encoding and byte order mark. The file of an open document (this one's
    /// included) is not a destination: `.openElsewhere`.
    public func beginExport(_ handle: String, to destination: FileOperand) throws(DocumentError) -> ExportTicket {
        guard let document = documents[handle] else { throw .unknownDocument(handle) }
        try checkNotOpen(destination.path)
        return ExportTicket(text: document.buffer, encoding: document.encoding, byteOrderMark: document.hasByteOrderMark, destination: destination)
    }

    /// Writes an export begun by ``beginExport(_:to:)`` on a thread of its own: the text encoded as
    /// a save encodes it (encoding, byte order mark, the text's own line endings), written with
    /// ``FileTransfer/write(_:to:replace:)``. The document does not change: not its file, path or
    /// unsaved state. Answers the written file's identity.
    public nonisolated static func finishExport(_ ticket: ExportTicket, replace: Bool) async throws(DocumentError) -> FileIdentity {
        let outcome = await runOnOwnThread { () -> Result<FileIdentity, DocumentError> in
            let (text, encoding, byteOrderMark) = (ticket.text, ticket.encoding, ticket.byteOrderMark)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(encodedSize(text, encoding: encoding, byteOrderMark: byteOrderMark))
            do throws(SaveError) {
                try text.encode(encoding, byteOrderMark: byteOrderMark) { piece in bytes.append(contentsOf: piece) }
            } catch {
                return .failure(.save(error))
            }
            let destination = ticket.destination
            do throws(FileSystemError) {
                return .success(try FileTransfer.write(bytes, to: destination.entry, replace: replace))
            } catch {
                return .failure(.fileSystem(error.naming(destination.entry, as: destination.path)))
            }
        }
        return try outcome.get()
    }
}

/// An export begun in request order: the text as it was then, and where it goes.
public struct ExportTicket: Sendable {
    let text: TextBuffer
    let encoding: TextEncoding
    let byteOrderMark: Bool
    let destination: FileOperand
}

extension FileSystemError {
    /// The error with `entry` (a path acted on, such as a name in a pinned directory,
    /// `/proc/self/fd/D/name`) spelt as `path` (the path the client gave), in `path` and `message`.
    public func naming(_ entry: String, as path: String) -> FileSystemError {
        guard entry != path else { return self }
        var renamed = self
        if renamed.path == entry { renamed.path = path }
        renamed.message = renamed.message.replacing(entry, with: path)
        return renamed
    }
}
