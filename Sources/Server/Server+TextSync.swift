import DocumentSession
import FileStore
import JSON
import JSONRPC
import Synchronization
import TextBuffer

// The LSP mode (issue 21; protocol/README.md §12): an editor's own LSP client synchronises its
// buffers with LSP's notifications, the server mirrors each in a document session (journaled,
// its file watched) and gives back what it finds with LSP's own requests: `workspace/applyEdit`
// (a reload, a resolution, a recovery, a restored version), `window/showMessageRequest` (a choice
// to make), `textDocument/publishDiagnostics` (a conflict, a file deleted on disk).
//
// The editor owns the text and its versions: the session's text changes only by the editor's
// `didChange`. What the server would change is proposed by `workspace/applyEdit`; the editor's
// changes then bring the session there, and what waited for that text (a reload taken as synced,
// a conflict resolved, a dead server's journal let go) happens then.

/// What the server knows of one mirrored buffer.
struct Mirror: Sendable {
    /// The session mirroring it.
    let handle: String
    /// The editor's version of the buffer (the session's own versions are internal).
    var editorVersion: Int64
    /// A text the server proposed to the editor, and what to do when the session reaches it.
    var expectation: Expectation?
    /// The message of the diagnostic published for the buffer (nil: none).
    var diagnostic: String?
    /// Whether the user is being asked about a conflict now.
    var askingAboutConflict = false
    /// How many reloads were proposed by the store: a proposal is sent only when no newer one
    /// came within ``Server/reloadSettling``.
    var reloadProposals = 0
    /// A `workspace/applyEdit` was applied and the editor's change that follows has not come yet
    /// (editors hold their changes back a while): its text is not known, and an edit worked out
    /// against the session's would be against a version the editor has left (and skips).
    var echoAwaited = false
    /// The file's text the last reload sent aimed at: a buffer that holds it took that reload and
    /// nothing else, even when the file changed again since (then the session, synced with the
    /// file before, counts it as unsaved).
    var lastReloadSent: TextBuffer?
    /// A change of the editor's was refused (bad params): the session no longer holds the editor's
    /// text, and later changes, made against that text, are not applied until the editor sends its
    /// whole text (a change without a range) or writes the file (`didSave`: the file is its text).
    var diverged = false
    /// The editor answered the last `workspace/applyEdit` without applying it (`applied: false`,
    /// or an error), rather than not at all.
    var refusedLastEdit = false
    /// The buffer differed from its file at didOpen, and nothing has settled it yet: the file's
    /// identity then (see ``Server/settleOpen(_:)``).
    var unsettledOpen: FileIdentity?
}

/// A text proposed to the editor (`workspace/applyEdit`), and what its arrival completes.
struct Expectation: Sendable {
    enum Action: Sendable {
        /// A conflict's resolution: the session keeps the text it reached (`theirs` or a merge).
        case resolveConflict
        /// A recovery: the dead server's journal goes (the session's own journal has the text).
        case discardRecovery
        /// A sync tool's conflict copy taken or merged: the copy is settled (removed, kept as a
        /// version) once the buffer holds the text.
        case settleSyncCopy(id: String)
    }
    var text: TextBuffer
    var action: Action
}

/// The LSP mode's state, isolated to the server.
struct EditorSync {
    /// Set by `initialize` when the client's capabilities carry `textDocument`.
    var enabled = false
    /// The mirrored buffers, by URI, and their URIs by session handle.
    var mirrors: [String: Mirror] = [:]
    var uriByHandle: [String: String] = [:]
    /// The requests sent to the client and not answered yet.
    var outgoing = OutgoingRequests()
}

/// Routes the store's events of mirrored documents to the server's LSP handling, in order,
/// instead of the `document/*` notifications (which an LSP client does not know).
final class MirrorEventRoute: Sendable {
    let handles = Mutex<Set<String>>([])
    let stream: AsyncStream<DocumentEvent>
    let continuation: AsyncStream<DocumentEvent>.Continuation

    init() {
        (stream, continuation) = AsyncStream<DocumentEvent>.makeStream()
    }

    /// Whether the event is a mirrored document's, handed on (then it is not sent as `document/*`).
    func take(_ event: DocumentEvent) -> Bool {
        guard handles.withLock({ $0.contains(event.handle) }) else { return false }
        continuation.yield(event)
        return true
    }
}

/// LSP's `MessageType`.
enum MessageType: Int64 {
    case error = 1, warning = 2, info = 3, log = 4
}

extension Server {
    /// The server-to-client requests of the LSP mode.
    public static let serverRequests: Set<String> = ["workspace/applyEdit", "window/showMessageRequest", "window/showDocument"]

    /// Starts the LSP mode (`initialize` found `capabilities.textDocument`): the mirrored
    /// documents' events are handled in order from now on.
    func startEditorSync() {
        editorSync.enabled = true
        let route = mirrorEvents
        Task { [weak self] in
            for await event in route.stream {
                guard let self else { return }
                await self.mirrorEvent(event)
            }
        }
    }

    // MARK: - The editor's notifications

    /// `textDocument/didOpen`: opens the file's session (its journal offered if a dead server left
    /// one); when the editor's text differs from the file's, the session takes it as unsaved
    /// changes (journaled).
    func didOpen(_ params: DidOpenTextDocumentNotification) async {
        let uri = params.document.uri
        guard editorSync.enabled else { return ignore(params, "the client did not ask for the LSP mode (no capabilities.textDocument in initialize)") }
        guard editorSync.mirrors[uri] == nil else { return ignore(params, "\(uri) is open already (didClose it first)") }
        let document: Document
        do throws(ResponseError) {
            // A buffer of a file not written yet is mirrored too (its changes journaled): the path
            // need not exist (nor, without roots, its directory).
            let target = try await checkPath(params.document.path, field: "params.textDocument.uri", mustExist: false)
            defer { withExtendedLifetime(target) {} }
            do throws(DocumentError) {
                if let pinned = target.resolved?.fileIdentity {
                    document = try await store.open(path: target.path, encoding: nil, pinned: pinned)
                } else if target.resolved != nil {
                    // Under roots, a name found empty is never opened by path afterwards: a link
                    // planted there since could lead outside them.
                    document = try await store.openUnwritten(path: target.path, openingAFileThere: false)
                } else {
                    do throws(DocumentError) {
                        document = try await store.open(path: target.path, encoding: nil)
                    } catch .load(.fileSystem(let error)) where error.code == "ENOENT" && error.path == target.path {
                        document = try await store.openUnwritten(path: target.path)
                    }
                }
            } catch {
                throw Self.responseError(error, id: .null, field: "params.textDocument.uri")
            }
        } catch {
            return ignore(params, "not mirrored: \(error.message)")
        }
        let handle = document.handle
        await noteFileWatching()
        guard editorSync.uriByHandle[handle] == nil else {
            return ignore(params, "not mirrored: its file is open already as \(editorSync.uriByHandle[handle]!)")
        }
        await store.setMirrored(handle)
        mirrorEvents.handles.withLock { _ = $0.insert(handle) }
        editorSync.mirrors[uri] = Mirror(handle: handle, editorVersion: params.version)
        editorSync.uriByHandle[handle] = uri
        // Compared off the dispatcher (a whole text), and only when the lengths are equal.
        let buffer = document.buffer, text = params.text
        var differs = buffer.utf8Count != text.utf8.count
        if !differs { differs = await runOnOwnThread { buffer.text != text } }
        if differs {
            do throws(DocumentError) {
                _ = try await store.edit(
                    handle, version: document.version, edits: [TextEdit(range: nil, text: params.text)], encoding: positionEncoding,
                    label: "Editor's text", merge: false)
            } catch {
                editorSync.mirrors[uri]?.diverged = true
                logger.warning("\(DidOpenTextDocumentNotification.method): the editor's text of \(uri) was not taken (not mirrored exactly until the editor sends its whole text or saves): \(error)")
            }
            // Vim's empty buffer of an empty (or new) file is the file's text as the editor shows it.
            await store.settleIfSynced(handle)
            // Otherwise the session cannot tell the user's edits from a file changed after the
            // editor read it (the editor read the old text, the session the new): a save would
            // write the editor's text over the other program's. It is a conflict, unless the
            // editor's own write explains it: Neovim writes a buffer it has just attached and
            // sends didSave at once, and the session, reading the file after the write, sees the
            // editor's new text against the old one of didOpen. Settled after a short while (or
            // at once by docsession.save), unless a didSave came first.
            if let opened = try? await store.document(handle), opened.hasUnsavedChanges, !opened.deletedOnDisk {
                editorSync.mirrors[uri]?.unsettledOpen = opened.identity
                Task {
                    try? await Task.sleep(for: Self.openSettling)
                    await self.settleOpen(uri)
                }
            }
        }
        if await store.recoveryOffer(handle) != nil {
            Task { await self.offerRecovery(uri) }
        }
    }

    /// `textDocument/didChange`: the changes, all or nothing, against the session's text (which
    /// is the editor's previous one).
    func didChange(_ params: DidChangeTextDocumentNotification) async {
        let uri = params.document.uri
        guard let mirror = editorSync.mirrors[uri] else { return ignore(params, "\(uri) is not open (no didOpen)") }
        var changes: [TextEdit]
        switch params.changes {
        case .success(let read): changes = read
        case .failure(let error):
            editorSync.mirrors[uri]?.diverged = true
            return ignore(params, error.message + " (the buffer is not mirrored exactly until the editor sends its whole text or saves)")
        }
        if mirror.diverged {
            // Only the editor's whole text brings the session back: the changes from the last one
            // without a range on.
            guard let whole = changes.lastIndex(where: { $0.range == nil }) else {
                editorSync.mirrors[uri]?.editorVersion = params.version
                return ignore(params, "\(uri) is not mirrored exactly since a change was refused: waiting for the whole text or didSave")
            }
            changes = Array(changes[whole...])
        }
        let reached: Bool
        do throws(DocumentError) {
            reached = try await store.applyEditorChanges(
                mirror.handle, changes, encoding: positionEncoding, watching: mirror.expectation?.text)
        } catch {
            editorSync.mirrors[uri]?.diverged = true
            return ignore(
                params, Self.responseError(error, id: .null, field: "params.contentChanges").message
                    + " (the buffer is not mirrored exactly until the editor sends its whole text or saves)")
        }
        editorSync.mirrors[uri]?.diverged = false
        editorSync.mirrors[uri]?.echoAwaited = false
        editorSync.mirrors[uri]?.editorVersion = params.version
        if reached { await expectationReached(uri) }
    }

    /// `textDocument/willSave`: nothing to do before the editor writes (its `didSave` follows).
    func willSave(_ params: WillSaveTextDocumentNotification) {
        guard editorSync.mirrors[params.document.uri] != nil else { return ignore(params, "\(params.document.uri) is not open (no didOpen)") }
        logger.debug("the editor will save \(params.document.uri) (reason \(params.reason))")
    }

    /// `textDocument/didSave`: the session takes the file the editor wrote as synced (see
    /// ``DocumentStore/editorSaved(_:)``).
    func didSave(_ params: DidSaveTextDocumentNotification) async {
        guard let mirror = editorSync.mirrors[params.document.uri] else { return ignore(params, "\(params.document.uri) is not open (no didOpen)") }
        do throws(DocumentError) {
            // After a refused change the file is the editor's text: the session takes it.
            // A difference at didOpen not settled yet: the file the editor wrote over is kept as
            // a conflict version if its text is not the editor's.
            try await store.editorSaved(mirror.handle, takingItsText: mirror.diverged, overOpenedFile: mirror.unsettledOpen)
            editorSync.mirrors[params.document.uri]?.diverged = false
            editorSync.mirrors[params.document.uri]?.unsettledOpen = nil
        } catch {
            logger.warning("\(DidSaveTextDocumentNotification.method): \(params.document.uri): the file written could not be read back: \(error)")
        }
    }

    /// `textDocument/didClose`: the mirror ends; unsaved edits were discarded by the editor, so the
    /// journal goes.
    func didClose(_ params: DidCloseTextDocumentNotification) async {
        let uri = params.document.uri
        guard let mirror = editorSync.mirrors.removeValue(forKey: uri) else { return ignore(params, "\(uri) is not open (no didOpen)") }
        editorSync.uriByHandle[mirror.handle] = nil
        if mirror.diagnostic != nil { publishDiagnostics(uri, version: nil, []) }
        do throws(DocumentError) {
            _ = try await store.close(mirror.handle, save: .never)
        } catch {
            logger.warning("\(DidCloseTextDocumentNotification.method): \(uri): \(error)")
        }
        // After the close: its events (`closed`) are the mirror's too, not sent as `document/*`.
        mirrorEvents.handles.withLock { _ = $0.remove(mirror.handle) }
    }

    /// `shutdown` in the LSP mode: every mirror ends as at `didClose` (the sessions close without
    /// saving, their journals go).
    func endAllMirrors() async {
        let mirrors = editorSync.mirrors
        guard !mirrors.isEmpty else { return }
        editorSync.mirrors = [:]
        editorSync.uriByHandle = [:]
        for (uri, mirror) in mirrors {
            do throws(DocumentError) {
                _ = try await store.close(mirror.handle, save: .never)
            } catch {
                logger.warning("shutdown: \(uri): \(error)")
            }
            mirrorEvents.handles.withLock { _ = $0.remove(mirror.handle) }
        }
        // Their journals are deleted at once, not after the flush delay: an editor that quits
        // waits only so long for its server (Neovim 0.7.2: 500 ms, then SIGTERM, which keeps
        // journals).
        await store.flushJournals()
    }

    /// A notification that changes nothing: logged with the reason.
    private func ignore<N: NotificationType>(_ notification: N, _ reason: String) {
        logger.warning("ignored \(N.method): \(reason)")
    }

    // MARK: - What the server proposes

    /// The store's event of a mirrored document.
    func mirrorEvent(_ event: DocumentEvent) async {
        guard let uri = editorSync.uriByHandle[event.handle] else { return }
        switch event.kind {
        case .reloadProposed:
            // A program that writes a file in place may truncate it first: the watcher can see the
            // empty file, then the text. Proposals are let settle, and only the last is sent, worked
            // out against the buffer then (an editor skips edits of a version it has left behind, so
            // two in flight would leave it with the first).
            guard editorSync.mirrors[uri] != nil else { return }
            editorSync.mirrors[uri]!.reloadProposals += 1
            let serial = editorSync.mirrors[uri]!.reloadProposals
            Task {
                try? await Task.sleep(for: Self.reloadSettling)
                await self.sendReload(uri, serial: serial)
            }
        case .stateChanged:
            await refreshDiagnostic(uri)
            if event.reason == .externalChange, event.state.contains(.inConflict) {
                Task { await self.offerResolution(uri) }
            }
            if event.reason == .syncConflict, event.state.contains(.syncConflict) {
                Task { await self.offerSyncResolution(uri) }
            }
            if let message = Self.logMessage(event) { logMessage(.warning, message) }
        case .textChanged, .moved, .entriesChanged, .versionsChanged:
            // A mirrored document does not follow moves (a move is a deletion for it).
            logger.debug("\(uri): \(event.reason) (not sent: the editor owns the buffer)")
        }
    }

    /// The rest of what the session has to say about a mirrored buffer, for `window/logMessage`:
    /// failures and changes of the file that are not the buffer's text.
    static func logMessage(_ event: DocumentEvent) -> String? {
        let name = Document.displayName(forPath: event.path)
        let why = event.error.map { ": \(responseError($0, id: .null).message)" } ?? ""
        switch event.reason {
        case .journalFailed: return "\(name): unsaved changes are not journaled for now\(why)"
        case .saveFailed: return "\(name): the save failed\(why)"
        case .attributesChanged:
            return event.readOnly == true ? "\(name): the file can no longer be written" : "\(name): the file's permissions or attributes changed"
        default: return nil
        }
    }

    /// `window/logMessage`.
    func logMessage(_ type: MessageType, _ message: String) {
        writer.send(Notification(method: "window/logMessage", params: ["type": .integer(type.rawValue), "message": .string(message)]))
    }

    /// How long a buffer that differed from its file at didOpen waits for the editor's didSave that
    /// would explain it before it is a conflict.
    static let openSettling: Duration = .milliseconds(300)

    /// The buffer differed from its file at didOpen and no didSave explained it: the session is in
    /// conflict with the file it read then (diagnostic, question, the file's text kept), unless it
    /// synced with another file since.
    func settleOpen(_ uri: String) async {
        guard let mirror = editorSync.mirrors[uri], let identity = mirror.unsettledOpen else { return }
        editorSync.mirrors[uri]?.unsettledOpen = nil
        if await store.editorOpenedWithOtherText(mirror.handle, readAs: identity) {
            logger.info("\(uri): the editor's text differed from the file's at didOpen: a conflict")
        }
    }

    /// How long a reload proposed by the store waits for a newer one before it goes to the editor.
    static let reloadSettling: Duration = .milliseconds(100)

    /// Sends the reload the store proposes now, unless a newer proposal came, the buffer has
    /// unsaved changes since (the editor's text is not proposed away), or none waits any more. While
    /// the change that follows an edit applied before has not come, it waits for it (up to 3 s:
    /// an editor that skipped the edit sends none).
    private func sendReload(_ uri: String, serial: Int, tries: Int = 0) async {
        guard let mirror = editorSync.mirrors[uri], mirror.reloadProposals == serial else { return }
        if mirror.echoAwaited, tries < 30 {
            Task {
                try? await Task.sleep(for: Self.reloadSettling)
                await self.sendReload(uri, serial: serial, tries: tries + 1)
            }
            return
        }
        guard let target = await store.pendingReloadText(mirror.handle),
              let document = try? await store.document(mirror.handle) else { return }
        guard !document.hasUnsavedChanges || mirror.lastReloadSent.map({ document.buffer == $0 }) == true else {
            // The user typed before the reload could be proposed: the buffer and the changed file
            // are in conflict now, not a reload waiting for nobody.
            if await store.reloadNotTaken(mirror.handle) { logger.info("\(uri): typed over before the reload was proposed: a conflict") }
            return
        }
        do throws(DocumentError) {
            let edits = try await store.edits(mirror.handle, toward: target, encoding: positionEncoding)
            guard editorSync.mirrors[uri]?.reloadProposals == serial else { return }
            editorSync.mirrors[uri]?.lastReloadSent = target
            if await applyEdit(uri, edits, label: "Reloaded from disk") == false, editorSync.mirrors[uri]?.reloadProposals == serial,
               editorSync.mirrors[uri]?.refusedLastEdit == true {
                // Refused (as VS Code refuses an edit of a version the user has typed past): a
                // conflict at once, with its diagnostic and question, rather than a silent
                // refusal found only when a save fails, or lost when the editor writes the file.
                if await store.reloadNotTaken(mirror.handle) { logger.info("\(uri): the reload was not applied: a conflict") }
            }
        } catch {
            logger.info("\(uri): the reload was not proposed: \(error)")
        }
    }

    /// The session reached a text proposed to the editor: what waited for it is done (the text may
    /// have gone on since, within the same batch of the editor's changes: the resolution keeps the
    /// text it has, the changes after the one proposed are unsaved edits like any).
    private func expectationReached(_ uri: String) async {
        guard let mirror = editorSync.mirrors[uri], let expectation = mirror.expectation else { return }
        editorSync.mirrors[uri]?.expectation = nil
        do throws(DocumentError) {
            switch expectation.action {
            case .resolveConflict:
                _ = try await store.resolveConflict(mirror.handle, .mine, version: nil, encoding: positionEncoding)
            case .discardRecovery:
                try await store.discardRecovery(mirror.handle)
            case .settleSyncCopy(let id):
                _ = try await store.resolveConflict(mirror.handle, .mine, version: nil, encoding: positionEncoding, id: id)
            }
        } catch {
            logger.warning("\(uri): \(expectation.action) after the editor's change: \(error)")
        }
    }

    /// Proposes `target` to the editor: `expectation`'s action runs when the session reaches it.
    /// Answers whether the editor applied the edits.
    private func propose(_ uri: String, _ target: TextBuffer, _ action: Expectation.Action, label: String) async -> Bool {
        await waitForEcho(uri)
        guard let handle = editorSync.mirrors[uri]?.handle else { return false }
        do throws(DocumentError) {
            let edits = try await store.edits(handle, toward: target, encoding: positionEncoding)
            editorSync.mirrors[uri]?.expectation = Expectation(text: target, action: action)
            if edits.isEmpty {
                await expectationReached(uri)
                return true
            }
            let applied = await applyEdit(uri, edits, label: label)
            if !applied, editorSync.mirrors[uri]?.expectation?.text.isIdentical(to: target) ?? false {
                editorSync.mirrors[uri]?.expectation = nil
            }
            return applied
        } catch {
            logger.warning("\(uri): \(label) not proposed: \(error)")
            return false
        }
    }

    /// A dead server's journal of the file: the user is asked, and on "Recover" the editor's text
    /// becomes the recovered text (one `workspace/applyEdit`).
    private func offerRecovery(_ uri: String) async {
        guard let handle = editorSync.mirrors[uri]?.handle, let offer = await store.recoveryOffer(handle),
              let text = await store.recoveryText(handle) else { return }
        let name = Document.displayName(forPath: (try? FileURI.path(from: uri)) ?? uri)
        let edits = offer.edits == 1 ? "1 edit" : "\(offer.edits) edits"
        let answer = await showMessageRequest(
            .warning, "\(name): recover unsaved edits from \(Timestamp.iso8601(nanoseconds: offer.date)) (\(edits))?",
            actions: ["Recover", "Discard", "Not now"])
        guard editorSync.mirrors[uri]?.handle == handle else { return }
        switch answer {
        case "Recover":
            _ = await propose(uri, text, .discardRecovery, label: "Recovered unsaved edits")
        case "Discard":
            do throws(DocumentError) { try await store.discardRecovery(handle) } catch { logger.warning("\(uri): discard: \(error)") }
        default:
            // "Not now", or no answer: the journal stays, offered again at the next open.
            break
        }
    }

    /// The file changed on disk while the buffer has unsaved edits: the user chooses; "Keep mine"
    /// keeps the buffer (the next save overwrites the file), "Take theirs" and "Merge" propose the
    /// text by `workspace/applyEdit`. A merge whose sides changed the same lines changes nothing and
    /// says so.
    private func offerResolution(_ uri: String) async {
        guard let mirror = editorSync.mirrors[uri], !mirror.askingAboutConflict else { return }
        editorSync.mirrors[uri]?.askingAboutConflict = true
        defer { editorSync.mirrors[uri]?.askingAboutConflict = false }
        let name = Document.displayName(forPath: (try? FileURI.path(from: uri)) ?? uri)
        let answer = await showMessageRequest(
            .warning, "\(name) changed on disk while the buffer has unsaved edits.", actions: ["Keep mine", "Take theirs", "Merge"])
        guard editorSync.mirrors[uri]?.handle == mirror.handle,
              (try? await store.document(mirror.handle).state.contains(.inConflict)) == true else { return }
        do throws(DocumentError) {
            switch answer {
            case "Keep mine":
                _ = try await store.resolveConflict(mirror.handle, .mine, version: nil, encoding: positionEncoding)
            case "Take theirs":
                let target = try await store.resolutionText(mirror.handle, .theirs)
                _ = await propose(uri, target, .resolveConflict, label: "Took the file's text")
            case "Merge":
                let target = try await store.resolutionText(mirror.handle, .merge(text: nil))
                _ = await propose(uri, target, .resolveConflict, label: "Merged with the file's text")
            default:
                break
            }
        } catch .mergeConflicts(let regions) {
            let count = regions.count == 1 ? "1 region" : "\(regions.count) regions"
            showMessage(.warning, "\(name): not merged: both sides changed the same lines (\(count)); nothing was changed.")
        } catch {
            showMessage(.error, "\(name): the conflict was not resolved: \(Self.responseError(error, id: .null).message)")
        }
    }

    /// A sync tool left a conflict copy beside the file: the user chooses for the newest copy;
    /// "Keep mine" settles it (removed, kept as a version), "Take theirs" and "Merge" propose the
    /// text by `workspace/applyEdit` and settle the copy once the buffer holds it.
    private func offerSyncResolution(_ uri: String) async {
        guard let mirror = editorSync.mirrors[uri], !mirror.askingAboutConflict,
              let copy = (try? await store.syncCopies(mirror.handle))?.first else { return }
        editorSync.mirrors[uri]?.askingAboutConflict = true
        defer { editorSync.mirrors[uri]?.askingAboutConflict = false }
        let name = Document.displayName(forPath: (try? FileURI.path(from: uri)) ?? uri)
        let id = DocumentStore.versionID(of: copy)
        let from = copy.copy.device.map { " (\($0))" } ?? ""
        let answer = await showMessageRequest(
            .warning, "\(name): \(copy.copy.tool.rawValue)\(from) left a conflict copy, \(copy.copy.name).",
            actions: ["Keep mine", "Take theirs", "Merge", "Not now"])
        guard editorSync.mirrors[uri]?.handle == mirror.handle,
              (try? await store.syncCopies(mirror.handle))?.contains(where: { DocumentStore.versionID(of: $0) == id }) == true else { return }
        do throws(DocumentError) {
            switch answer {
            case "Keep mine":
                _ = try await store.resolveConflict(mirror.handle, .mine, version: nil, encoding: positionEncoding, id: id)
            case "Take theirs":
                let target = try await store.syncResolutionText(mirror.handle, id: id, .theirs)
                _ = await propose(uri, target, .settleSyncCopy(id: id), label: "Took the conflict copy")
            case "Merge":
                let target = try await store.syncResolutionText(mirror.handle, id: id, .merge(text: nil))
                _ = await propose(uri, target, .settleSyncCopy(id: id), label: "Merged the conflict copy")
            default:
                break
            }
        } catch .mergeConflicts(let regions) {
            let count = regions.count == 1 ? "1 region" : "\(regions.count) regions"
            showMessage(.warning, "\(name): not merged: the two texts differ in \(count) that cannot be merged; nothing was changed.")
        } catch {
            showMessage(.error, "\(name): the conflict copy was not resolved: \(Self.responseError(error, id: .null).message)")
        }
    }

    /// Publishes the buffer's diagnostic when its state calls for another: a conflict, a file
    /// deleted on disk, sync tools' conflict copies, or none.
    private func refreshDiagnostic(_ uri: String) async {
        guard let mirror = editorSync.mirrors[uri], let document = try? await store.document(mirror.handle) else { return }
        let message: String? =
            if document.state.contains(.inConflict) {
                "The file changed on disk while this buffer has unsaved edits: keep yours, take the file's or merge."
            } else if document.deletedOnDisk && !document.unwritten {
                "The file was deleted on disk (or moved where it could not be followed): the buffer is kept, and saving writes the file again."
            } else if !document.syncCopies.isEmpty {
                "A sync tool left \(document.syncCopies.count == 1 ? "a conflict copy" : "\(document.syncCopies.count) conflict copies") of this file: "
                    + document.syncCopies.map { copy in
                        copy.copy.name + " (" + copy.copy.tool.rawValue + (copy.copy.device.map { ", " + $0 } ?? "") + ")"
                    }.joined(separator: "; ") + ". Keep yours, take theirs or merge (docsession.versions lists them)."
            } else { nil }
        guard editorSync.mirrors[uri]?.diagnostic != message else { return }
        editorSync.mirrors[uri]?.diagnostic = message
        let diagnostics: [JSONValue] = message.map { message in
            [[
                "range": ["start": ["line": 0, "character": 0], "end": ["line": 0, "character": 0]],
                "severity": .integer(MessageType.warning.rawValue), "source": "docsession", "message": .string(message),
            ]]
        } ?? []
        publishDiagnostics(uri, version: editorSync.mirrors[uri]?.editorVersion, diagnostics)
    }

    private func publishDiagnostics(_ uri: String, version: Int64?, _ diagnostics: [JSONValue]) {
        var params: JSONObject = ["uri": .string(uri)]
        if let version { params["version"] = .integer(version) }
        params["diagnostics"] = .array(diagnostics)
        writer.send(Notification(method: "textDocument/publishDiagnostics", params: .object(params)))
    }

    // MARK: - Requests to the client

    /// Sends a request to the client and waits (in the caller's task, never the dispatcher's) for
    /// its answer: nil when none came before the input ended.
    func sendRequest(_ method: String, _ params: JSONValue) async -> Result<JSONValue, ResponseError>? {
        let (id, answer) = editorSync.outgoing.start()
        writer.send(Request(id: .string(id), method: method, params: params).json)
        return await answer.value()
    }

    /// `workspace/applyEdit` of `edits` to the buffer at its editor's version now; answers whether
    /// the editor applied them.
    func applyEdit(_ uri: String, _ edits: [TextEdit], label: String) async -> Bool {
        guard !edits.isEmpty, let version = editorSync.mirrors[uri]?.editorVersion else { return edits.isEmpty }
        let change: JSONValue = ["textDocument": ["uri": .string(uri), "version": .integer(version)], "edits": .array(edits.map(Self.lspJSON))]
        editorSync.mirrors[uri]?.echoAwaited = true
        let answer = await sendRequest("workspace/applyEdit", ["label": .string(label), "edit": ["documentChanges": [change]]])
        editorSync.mirrors[uri]?.refusedLastEdit = false
        switch answer {
        case .success(let result)?:
            if result["applied"] == .bool(true) { return true }
            editorSync.mirrors[uri]?.refusedLastEdit = true
            editorSync.mirrors[uri]?.echoAwaited = false
            logger.warning("workspace/applyEdit (\(label)) of \(uri) not applied: \(result["failureReason"]?.stringValue ?? "no reason given")")
        case .failure(let error)?:
            editorSync.mirrors[uri]?.refusedLastEdit = true
            editorSync.mirrors[uri]?.echoAwaited = false
            logger.warning("workspace/applyEdit (\(label)) of \(uri) failed: \(error.message)")
        case nil:
            logger.info("workspace/applyEdit (\(label)) of \(uri) not answered")
        }
        return false
    }

    /// An edit as LSP's `TextEdit` (`newText`, not the `text` of this protocol's edits).
    static func lspJSON(_ edit: TextEdit) -> JSONValue {
        ["range": edit.range.map(json) ?? ["start": ["line": 0, "character": 0], "end": ["line": 0, "character": 0]], "newText": .string(edit.text)]
    }

    /// `window/showMessageRequest`: answers the title of the action chosen, nil when none was.
    func showMessageRequest(_ type: MessageType, _ message: String, actions: [String]) async -> String? {
        let answer = await sendRequest("window/showMessageRequest", [
            "type": .integer(type.rawValue), "message": .string(message), "actions": .array(actions.map { ["title": .string($0)] }),
        ])
        guard case .success(let result)? = answer else {
            if case .failure(let error)? = answer { logger.warning("window/showMessageRequest failed: \(error.message)") }
            return nil
        }
        return result["title"]?.stringValue
    }

    /// `window/showDocument` of `uri` (taking the focus): answers whether the editor showed it.
    func showDocument(_ uri: String) async -> Bool {
        let answer = await sendRequest("window/showDocument", ["uri": .string(uri), "takeFocus": true])
        guard case .success(let result)? = answer else {
            if case .failure(let error)? = answer { logger.warning("window/showDocument failed: \(error.message)") }
            return false
        }
        return result["success"] == .bool(true)
    }

    /// The file name of a version's read-only copy: the document's stem, the version, its extension
    /// (`notes (version 1795327913305622549-14578-1.saved).md`); a sync copy's id keeps the copy's name.
    static func shownName(path: String, id: String) -> String {
        let name = Document.displayName(forPath: path)
        let bare = id.hasPrefix(DocumentStore.syncCopyPrefix) ? String(id.dropFirst(DocumentStore.syncCopyPrefix.count)) : id
        let safe = String(bare.map { $0 == "/" ? "_" : $0 })
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "\(name) (version \(safe))" }
        return "\(name[..<dot]) (version \(safe))\(name[dot...])"
    }

    /// `window/showMessage`.
    func showMessage(_ type: MessageType, _ message: String) {
        writer.send(Notification(method: "window/showMessage", params: ["type": .integer(type.rawValue), "message": .string(message)]))
    }

    /// A response from the client: to one of the server's requests, or logged.
    func received(_ response: Response) {
        guard editorSync.outgoing.finish(response) else {
            logger.warning("ignored a response to a request the server never sent (id \(response.id))")
            return
        }
    }

    // MARK: - workspace/executeCommand

    /// `workspace/executeCommand`: the document's session does the command; changes of the text go
    /// to the editor by `workspace/applyEdit` (answered after the editor's answer, off the queue).
    func executeCommand(_ params: ExecuteCommandRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<CommandResult> {
        let document = params.command.document
        guard let mirror = editorSync.mirrors[document.uri] else {
            throw .invalidParams(field: "params.arguments[0]", "\(document.uri) is not open in the editor (no didOpen)")
        }
        let handle = mirror.handle, uri = document.uri
        let store = store
        switch params.command {
        case .save:
            // A difference at didOpen is settled first: a conflict refuses the save.
            await settleOpen(uri)
            // The text is taken now, in request order: the editor's version now is the one saved.
            let ticket: SaveTicket
            do throws(DocumentError) {
                ticket = try await store.beginSave(handle)
            } catch {
                throw Self.responseError(error, id: .null)
            }
            let version = mirror.editorVersion
            return .later(
                {
                    do throws(DocumentError) {
                        var saved = try await store.finishSave(ticket, keepingTurn: true)
                        saved.version = version
                        return .success(CommandResult(json: SaveDocumentResult(saved: saved).json))
                    } catch {
                        return .failure(Self.responseError(error, id: context.id))
                    }
                }, answered: Self.releasingTurn(of: ticket.handle, store))
        case .versions:
            do throws(DocumentError) {
                return .now(CommandResult(json: VersionsResult(versions: try await store.versions(handle), copies: try await store.syncCopies(handle)).json))
            } catch {
                throw Self.responseError(error, id: .null)
            }
        case .revert:
            let encoding = positionEncoding
            return .later { [weak self] in
                do throws(DocumentError) {
                    await self?.waitForEcho(uri)
                    let edits = try await store.proposeRevert(handle, encoding: encoding)
                    let applied = await self?.applyEdit(uri, edits, label: "Reverted to the file's text") ?? false
                    return .success(CommandResult(json: ["applied": .bool(applied)]))
                } catch {
                    return .failure(Self.responseError(error, id: context.id))
                }
            }
        case .restoreVersion(_, let id):
            return .later { [weak self] in
                do throws(DocumentError) {
                    let text = try await store.readVersion(handle, id: id)
                    guard let self else { return .success(CommandResult(json: ["applied": false])) }
                    let applied = await self.proposeVersion(uri, text)
                    return .success(CommandResult(json: ["applied": .bool(applied)]))
                } catch {
                    return .failure(Self.responseError(error, id: context.id, field: "params.arguments[1]"))
                }
            }
        case .showVersion(_, let id):
            let stateDirectory = configuration.stateDirectory
            return .later { [weak self] in
                do throws(DocumentError) {
                    let text = try await store.readVersion(handle, id: id)
                    guard let stateDirectory else { throw .versionsUnavailable(reason: "no state directory to write a copy in") }
                    let name = Self.shownName(path: (try? FileURI.path(from: uri)) ?? uri, id: id)
                    let written = await runOnOwnThread { () -> Result<String, FileSystemError> in
                        do throws(FileSystemError) {
                            return .success(try ShownVersion.write(text.utf8Bytes(), name: name, stateDirectory: stateDirectory))
                        } catch {
                            return .failure(error)
                        }
                    }
                    let path: String
                    switch written {
                    case .success(let written): path = written
                    case .failure(let error): throw .fileSystem(error)
                    }
                    let copyURI = FileURI.uri(from: path)
                    let shown = await self?.showDocument(copyURI) ?? false
                    return .success(CommandResult(json: ["shown": .bool(shown), "uri": .string(copyURI)]))
                } catch {
                    return .failure(Self.responseError(error, id: context.id, field: "params.arguments[1]"))
                }
            }
        }
    }

    /// Waits (up to 3 s) until the editor's change that follows an edit it applied has come, so
    /// that the next edit is worked out against the buffer as the editor has it.
    private func waitForEcho(_ uri: String) async {
        for _ in 0..<30 {
            guard editorSync.mirrors[uri]?.echoAwaited == true else { return }
            try? await Task.sleep(for: Self.reloadSettling)
        }
    }

    /// Proposes a version's text to the editor (a restore, as an edit of the buffer).
    private func proposeVersion(_ uri: String, _ text: TextBuffer) async -> Bool {
        await waitForEcho(uri)
        guard let handle = editorSync.mirrors[uri]?.handle else { return false }
        do throws(DocumentError) {
            let edits = try await store.edits(handle, toward: text, encoding: positionEncoding)
            return await applyEdit(uri, edits, label: "Restored a version")
        } catch {
            logger.warning("\(uri): the version was not proposed: \(error)")
            return false
        }
    }
}
