import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

extension Server {
    /// `document/open`: reads the file off the ordered queue (a large file does not stall other
    /// requests), reporting `$/progress` under the client's `workDoneToken`; cancellable.
    func openDocument(_ rawParams: JSONValue?, _ context: RequestContext) throws(ResponseError) -> Reply {
        let params = try Params(byName: rawParams, method: "document/open")
        let target = try requestPath(params, "uri", mustExist: true)
        let path = target.path
        let pinned = target.resolved?.fileIdentity
        let encoding = try params.textEncoding("encoding")
        let includeText = try params.optionalBool("includeText") ?? true
        let progress = ProgressReporter(token: try params.progressToken("workDoneToken"), title: "Opening \(path)", writer: writer)
        let store = store
        return .later {
            defer { progress.end() }
            do throws(DocumentError) {
                // The target (and its pinned descriptor) lives until the file has been read.
                defer { withExtendedLifetime(target) {} }
                let document = try await store.open(
                    path: path, encoding: encoding, pinned: pinned,
                    progress: { done, total in progress.report(done: done, total: total) },
                    isCancelled: { context.cancellation.isCancelled })
                return .success(Self.info(document, includeText: includeText))
            } catch {
                return .failure(Self.responseError(error, id: context.id, field: "params.uri", encodingWasNamed: encoding != nil))
            }
        }
    }

    /// `document/create`: a new file (never overwriting one), opened: at `uri`, or in `directory`
    /// under a name its `naming` rule makes.
    func createDocument(_ rawParams: JSONValue?) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: "document/create")
        let hasURI = params.value("uri") != nil
        let hasDirectory = params.value("directory") != nil
        guard hasURI != hasDirectory else {
            // Neither: the uri is what is missing (as before directories could be named).
            if !hasURI { throw .invalidParams(field: "params.uri", "missing (give uri, or directory with naming)") }
            throw .invalidParams(field: "params", "give either uri or directory (with naming), not both")
        }
        let text = try params.optionalString("text") ?? ""
        if hasURI {
            if params.value("naming") != nil {
                throw .invalidParams(field: "params.naming", "naming goes with directory, not with uri")
            }
            let target = try creationPath(params, "uri")
            defer { withExtendedLifetime(target) {} }
            do throws(DocumentError) {
                let document = try await store.create(
                    path: target.path, text: text, createAt: target.resolved == nil ? nil : target.operationPath)
                return Self.info(document, includeText: true)
            } catch {
                throw Self.responseError(error, id: .null)
            }
        }
        // The params are all checked before the directory is looked at.
        guard let naming = try params.optionalObject("naming") else {
            throw .invalidParams(field: "params.naming", "missing: a directory needs a naming rule ({prefix, style, extension})")
        }
        let nameFrom = try naming.optionalEnumeration("nameFrom", ["rule", "firstLine"]) ?? "rule"
        // Named after the text, the rule is only the fallback for a blank text: "Untitled 1.txt"
        // unless the client gives a prefix.
        let rule = try naming.namingRule(defaultPrefix: nameFrom == "firstLine" ? "Untitled" : "")
        let directory = try requestPath(params, "directory", mustExist: true)
        defer { withExtendedLifetime(directory) {} }
        do throws(DocumentError) {
            let document = try await store.create(
                inDirectory: directory.path, rule: rule, nameFromFirstLine: nameFrom == "firstLine", text: text,
                createIn: directory.resolved == nil ? nil : directory.operationPath)
            return Self.info(document, includeText: true)
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/read`: the text, whole or of a range.
    func readDocument(_ rawParams: JSONValue?) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: "document/read")
        let handle = try params.string("document")
        let range = try params.optionalObject("range").map { (range) throws(ResponseError) in try range.textRange() }
        do throws(DocumentError) {
            let (text, version) = try await store.read(handle, range: range, encoding: positionEncoding)
            return ["text": .string(text), "version": .integer(version)]
        } catch {
            throw Self.responseError(error, id: .null, field: "params.range")
        }
    }

    /// `document/edit`: edits in order, all or nothing, against a version.
    func editDocument(_ request: Request) async throws(ResponseError) -> JSONValue {
        let edit = try EditParams.of(request)
        if store.isOnItsThread { return try editNow(edit) }
        do throws(DocumentError) {
            let newVersion = try await store.edit(
                edit.handle, version: edit.version, edits: edit.edits, encoding: positionEncoding, label: edit.label,
                merge: edit.merge)
            return ["version": .integer(newVersion)]
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/edit` run here and now, on the store's thread (the loop): the hot path of a
    /// typing client, without an actor hop's enqueue and dequeue.
    func editNow(_ edit: EditParams) throws(ResponseError) -> JSONValue {
        let result = store.editOnItsThread(
            edit.handle, version: edit.version, edits: edit.edits, encoding: positionEncoding, label: edit.label,
            merge: edit.merge)
        switch result {
        case .success(let newVersion): return ["version": .integer(newVersion)]
        case .failure(let error): throw Self.responseError(error, id: .null)
        }
    }

    /// `document/undo` and `document/redo`: the new version and the edits that turn the previous
    /// text into the new one (none when there was nothing to undo or redo).
    func undoOrRedo(_ rawParams: JSONValue?, undo: Bool) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: undo ? "document/undo" : "document/redo")
        let handle = try params.string("document")
        let version = try params.optionalInteger("version", in: 0...Int64.max)
        do throws(DocumentError) {
            let (newVersion, edits) = undo
                ? try await store.undo(handle, version: version, encoding: positionEncoding)
                : try await store.redo(handle, version: version, encoding: positionEncoding)
            return ["version": .integer(newVersion), "edits": .array(edits.map(Self.json))]
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/state`: the state flags and the undo and change-tracking summary.
    func documentState(_ rawParams: JSONValue?) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: "document/state")
        let handle = try params.string("document")
        do throws(DocumentError) {
            let document = try await store.document(handle)
            var result: JSONObject = [
                "document": .string(handle), "uri": .string(FileURI.uri(from: document.path)),
                "version": .integer(document.version), "state": Self.stateJSON(document.state),
                "hasUnsavedChanges": .bool(document.hasUnsavedChanges),
                "canUndo": .bool(document.history.canUndo), "canRedo": .bool(document.history.canRedo),
                "etag": .string(Self.etag(document.identity)),
            ]
            if let label = document.history.undoLabel { result["undoLabel"] = .string(label) }
            if let label = document.history.redoLabel { result["redoLabel"] = .string(label) }
            if document.readOnly { result["readOnly"] = true }
            return .object(result)
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    // MARK: - Encoding results

    /// The document info `document/open` and `document/create` answer.
    static func info(_ document: Document, includeText: Bool) -> JSONValue {
        var info: JSONObject = [
            "document": .string(document.handle),
            "uri": .string(FileURI.uri(from: document.path)),
            "version": .integer(document.version),
        ]
        if includeText { info["text"] = .string(document.buffer.text) }
        info["state"] = stateJSON(document.state)
        info["fileType"] = .string(document.fileType)
        info["displayName"] = .string(document.displayName)
        info["modificationDate"] = .string(Timestamp.iso8601(nanoseconds: document.identity.modificationTime))
        info["encoding"] = .string(document.encoding.rawValue)
        info["byteOrderMark"] = .bool(document.hasByteOrderMark)
        info["lineEnding"] = .string(document.lineEnding.rawValue)
        info["hasUnsavedChanges"] = .bool(document.hasUnsavedChanges)
        if document.readOnly { info["readOnly"] = true }
        return .object(info)
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
