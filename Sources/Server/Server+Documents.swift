import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

extension Server {
    /// After an open: when the store could not make its file watcher (inotify's limits), a warning
    /// on stderr, and in the LSP mode `window/logMessage`, once per failure: changes by other
    /// programs are not seen until a watcher can be made (tried again at a later open; saves still
    /// refuse to overwrite a changed file).
    func noteFileWatching() async {
        guard let error = await store.fileWatchingError else {
            fileWatchingReported = nil
            return
        }
        guard fileWatchingReported != error.message else { return }
        fileWatchingReported = error.message
        let message = "files are not watched for changes by other programs: \(error.message)"
            + (error.code == "EMFILE" ? " (inotify instances exhausted: raise fs.inotify.max_user_instances)" : "")
            + "; tried again at the next open, and saves still refuse to overwrite a changed file"
        logger.warning("\(message)")
        if editorSync.enabled { logMessage(.warning, message) }
    }

    /// `document/open`: reads the file off the ordered queue (a large file does not stall other
    /// requests), reporting `$/progress` under the client's `workDoneToken`; cancellable.
    func openDocument(_ params: OpenDocumentRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<DocumentInfo> {
        let target = try await checkPath(params.path, field: "params.uri", mustExist: true)
        let path = target.path
        let pinned = target.resolved?.fileIdentity
        let encoding = params.encoding
        let includeText = params.includeText
        let progress = ProgressReporter(token: params.workDoneToken, title: "Opening \(path)", writer: writer)
        let store = store
        return .later {
            defer { progress.end() }
            do throws(DocumentError) {
                // The target (and its pinned descriptor) lives until the file has been read.
                defer { withExtendedLifetime(target) {} }
                var document = try await store.open(
                    path: path, encoding: encoding, pinned: pinned,
                    progress: { done, total in progress.report(done: done, total: total) },
                    isCancelled: { context.cancellation.isCancelled })
                document = await self.holdOpened(document)
                await self.noteFileWatching()
                var info = DocumentInfo(document, includeText: includeText)
                info.recovery = await store.recoveryOffer(document.handle)
                info.editedElsewhere = await store.journalsHeldElsewhere(document.handle) > 0
                info.restoredSave = await store.restoredSave(document.handle)
                return .success(info)
            } catch {
                return .failure(Self.responseError(error, id: context.id, field: "params.uri", encodingWasNamed: encoding != nil))
            }
        }
    }

    /// `document/create`: a new file (never overwriting one), opened: at `uri`, or in `directory`
    /// under a name its `naming` rule makes. The params are all checked before the directory is
    /// looked at.
    func createDocument(_ params: CreateDocumentRequest) async throws(ResponseError) -> DocumentInfo {
        switch params.location {
        case .file(let path):
            let target = try await creationPath(path, field: "params.uri")
            defer { withExtendedLifetime(target) {} }
            do throws(DocumentError) {
                let document = try await store.create(
                    path: target.path, text: params.text, createAt: target.resolved == nil ? nil : target.operationPath)
                return DocumentInfo(await holdOpened(document), includeText: true)
            } catch {
                throw Self.responseError(error, id: .null)
            }
        case .directory(let path, let rule, let nameFromFirstLine):
            let directory = try await checkPath(path, field: "params.directory", mustExist: true)
            defer { withExtendedLifetime(directory) {} }
            do throws(DocumentError) {
                let document = try await store.create(
                    inDirectory: directory.path, rule: rule, nameFromFirstLine: nameFromFirstLine, text: params.text,
                    createIn: directory.resolved == nil ? nil : directory.operationPath)
                return DocumentInfo(await holdOpened(document), includeText: true)
            } catch {
                throw Self.responseError(error, id: .null)
            }
        }
    }

    /// A whole text at least this large (UTF-8 bytes) is copied out of its buffer off the loop.
    static let offLoopReadSize = 1 << 16

    /// `document/read`: the text, whole or of a range.
    ///
    /// A large whole text is copied into its `String` off the loop, at nice 10, from a snapshot of
    /// the buffer taken in the request's turn: the copy of a 2 MB text (allocating, faulting in
    /// and validating it) took the loop 0.8 ms a read in a debug build, time every other client of
    /// a daemon waited; on two cores, the lower priority lets their requests go first.
    func readDocument(_ params: ReadDocumentRequest) async throws(ResponseError) -> ReadDocumentResult {
        if params.range == nil, let (version, buffer) = await store.textSnapshot(params.handle),
            buffer.utf8Count >= Self.offLoopReadSize
        {
            let text = await runOnOwnThread(niceness: 10) { buffer.text }
            return ReadDocumentResult(text: text, version: version)
        }
        do throws(DocumentError) {
            let (text, version) = try await store.read(params.handle, range: params.range, encoding: positionEncoding)
            return ReadDocumentResult(text: text, version: version)
        } catch {
            throw Self.responseError(error, id: .null, field: "params.range")
        }
    }

    /// `document/edit`: edits in order, all or nothing, against a version. A large change (its
    /// journal record over ``DocumentStore/largeChange``) is answered once it is on disk.
    func editDocument(_ edit: EditDocumentRequest, id: RequestID) async throws(ResponseError) -> EditDocumentResult {
        // Applied at its turn by the immediate path, which left the answer for after the flush.
        if let applied = editsAwaitingFlush.removeValue(forKey: id) {
            await store.flushJournal()
            return applied
        }
        if store.isOnItsThread {
            let result = try editNow(edit)
            if store.takeJournalBytesOnItsThread() > DocumentStore.largeChange { await store.flushJournal() }
            return result
        }
        do throws(DocumentError) {
            let encoding = positionEncoding
            let newVersion = try await attributed { () throws(DocumentError) in
                try await store.edit(edit.handle, version: edit.version, edits: edit.edits, encoding: encoding, label: edit.label, merge: edit.merge)
            }
            if await store.takeJournalBytes() > DocumentStore.largeChange { await store.flushJournal() }
            return EditDocumentResult(version: newVersion)
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/edit` run here and now, on the store's thread (the loop): the hot path of a
    /// typing client, without an actor hop's enqueue and dequeue.
    func editNow(_ edit: EditDocumentRequest) throws(ResponseError) -> EditDocumentResult {
        let result: Result<Int64, DocumentError>
        if let membership {
            // The edit's own way (predecoded, answered at once) passes no request entry.
            guard membership.hub.holds(membership.id, edit.handle) else { throw Self.notHeld(edit.handle, membership: membership) }
            let encoding = positionEncoding
            result = Hub.$origin.withValue(membership.id) {
                store.editOnItsThread(edit.handle, version: edit.version, edits: edit.edits, encoding: encoding, label: edit.label, merge: edit.merge)
            }
        } else {
            result = store.editOnItsThread(
                edit.handle, version: edit.version, edits: edit.edits, encoding: positionEncoding, label: edit.label,
                merge: edit.merge)
        }
        switch result {
        case .success(let newVersion): return EditDocumentResult(version: newVersion)
        case .failure(.unknownDocument(let handle)) where PackageStore.isPackageHandle(handle):
            // The edit's own way (predecoded, answered at once) passes no request entry.
            // On the loop, where the package store runs too.
            let kind = packages.assumeIsolated { packages in packages.kind(of: handle)?.rawValue } ?? "package"
            throw ResponseError(
                .wrongKind, "\(handle) is a \(kind) document's handle, and document/edit is for text documents",
                data: ["document": .string(handle), "kind": .string(kind)])
        case .failure(let error): throw Self.responseError(error, id: .null)
        }
    }

    /// `document/undo` and `document/redo`: the new version and the edits that turn the previous
    /// text into the new one (none when there was nothing to undo or redo).
    func undoOrRedo(_ handle: String, version: Int64?, undo: Bool) async throws(ResponseError) -> EditsResult {
        do throws(DocumentError) {
            let encoding = positionEncoding
            let (newVersion, edits) = try await attributed { () throws(DocumentError) in
                undo
                    ? try await store.undo(handle, version: version, encoding: encoding)
                    : try await store.redo(handle, version: version, encoding: encoding)
            }
            return EditsResult(version: newVersion, edits: edits)
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/state`: the state flags and the undo and change-tracking summary.
    func documentState(_ params: DocumentStateRequest) async throws(ResponseError) -> DocumentStateResult {
        do throws(DocumentError) {
            return DocumentStateResult(handle: params.handle, document: try await store.document(params.handle))
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    // MARK: - Encoding results

    /// The document info (``DocumentInfo``) as JSON, for results that hold it as a member.
    static func info(_ document: Document, includeText: Bool) -> JSONValue {
        DocumentInfo(document, includeText: includeText).json
    }

    static func stateJSON(_ state: DocumentState) -> JSONValue {
        .array(state.flagNames.map { .string($0) })
    }

    /// An opaque tag of the file's identity (inode, size, modification and change times).
    static func etag(_ identity: FileIdentity) -> String {
        [identity.inode, UInt64(bitPattern: identity.size), UInt64(bitPattern: identity.modificationTime), UInt64(bitPattern: identity.changeTime)]
            .map { String($0, radix: 16) }.joined(separator: "-")
    }

    static func json(_ edit: TextEdit) -> JSONValue {
        var object: JSONObject = [:]
        if let range = edit.range { object["range"] = json(range) }
        object["text"] = .string(edit.text)
        return .object(object)
    }

    static func json(_ range: TextRange) -> JSONValue {
        ["start": json(range.start), "end": json(range.end)]
    }

    static func json(_ position: TextPosition) -> JSONValue {
        ["line": .integer(Int64(position.line)), "character": .integer(Int64(position.character))]
    }
}
