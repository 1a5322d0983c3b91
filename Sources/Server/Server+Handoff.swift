import DocumentSession
import FileStore
import JSON
import JSONRPC
import ManagedStore

// A handoff to another server (NSUserActivity's role): `document/setClientState` keeps what a
// client wants back per document; `session/snapshot` writes the open documents, their client states
// and a copy of each unsaved document's journal under `<state dir>/sessions/<token>/`;
// `session/restore` in another server (or this one) opens each file again, recovers the unsaved
// work from its journal copy (a conflict when the file changed since), and answers each document's
// client state. The snapshot's files: FileStore/SessionSnapshot.swift; the store's part:
// DocumentStore+Handoff.swift.

extension Server {
    /// `document/setClientState`.
    func setClientState(_ params: SetClientStateRequest) async throws(ResponseError) -> NullResult {
        do throws(DocumentError) {
            if isPackage(params.handle) { _ = try await packages.info(params.handle) } else { _ = try await store.document(params.handle) }
        } catch {
            throw Self.responseError(error, id: .null)
        }
        await forgetClosedClientStates()
        clientStates[params.handle] = params.state == .null ? nil : params.state
        return NullResult()
    }

    /// Lets go of the client states of documents no longer open.
    private func forgetClosedClientStates() async {
        guard !clientStates.isEmpty else { return }
        let open = Set(await store.handles).union(await packages.handles)
        clientStates = clientStates.filter { open.contains($0.key) }
    }

    /// `session/snapshot`: flushes each unsaved document's journal and copies it, with the open
    /// documents and their client states, into a new snapshot; answers its token.
    func snapshotSession(_ params: SnapshotSessionRequest) async throws(ResponseError) -> SnapshotSessionResult {
        guard let snapshots else {
            throw ResponseError(.handoffUnavailable, "Sessions cannot be snapshotted: \(snapshotsUnavailable)")
        }
        await forgetClosedClientStates()
        var entries: [SnapshotEntry] = []
        var copies: [(name: String, bytes: [UInt8])] = []
        // A daemon's client snapshots the documents it holds, not every client's.
        let held = membership.map { $0.hub.held($0.id) }
        for handle in await store.handles where held?.contains(handle) ?? true {
            do throws(DocumentError) {
                let document = try await store.document(handle)
                var entry = SnapshotEntry(
                    path: document.path, version: document.version, hasUnsavedChanges: document.hasUnsavedChanges, journal: nil,
                    clientState: clientStates[handle] ?? .null)
                if let bytes = try await store.journalCopy(handle) {
                    let name = "\(copies.count + 1).journal"
                    copies.append((name, bytes))
                    entry.journal = name
                }
                entries.append(entry)
            } catch {
                // Closed while the snapshot waited for a journal: not in it.
                continue
            }
        }
        // Packages and managed documents, after the text documents (protocol §13.7).
        for handle in await packages.handles where held?.contains(handle) ?? true {
            do throws(DocumentError) {
                let document = try await packages.info(handle)
                var entry = SnapshotEntry(
                    path: document.path, version: document.version, hasUnsavedChanges: document.hasUnsavedChanges, journal: nil,
                    clientState: clientStates[handle] ?? .null, kind: document.kind,
                    migrations: await packages.storeOptions(handle)?.migrations)
                if let bytes = try await packages.journalCopy(handle) {
                    let name = "\(copies.count + 1).pjournal"
                    copies.append((name, bytes))
                    entry.journal = name
                }
                entries.append(entry)
            } catch {
                continue
            }
        }
        let token = SnapshotDirectory.newToken()
        let manifest: JSONValue = [
            "format": 1, "created": .string(Timestamp.iso8601(nanoseconds: Timestamp.now())),
            "server": .string(Server.version), "documents": .array(entries.map(\.manifestJSON)),
        ]
        do throws(FileSystemError) {
            try await Workspace.writeSnapshot(snapshots, token: token, manifest: manifest.serialized(), journals: copies)
        } catch {
            throw Self.fileSystemError(error)
        }
        logger.info("session snapshot \(token): \(entries.count) document(s), \(copies.count) with unsaved work")
        return SnapshotSessionResult(token: token, entries: entries)
    }

    /// `session/restore`: opens each document of the snapshot again (in its order), recovers the
    /// unsaved work its journal copy holds, keeps each client state again for this server's
    /// documents, and removes the snapshot. A document that cannot be opened is answered with its
    /// error, the others are restored; its journal copy waits in the journal directory
    /// (`workspace/recoverable`), offered at the next open of its file.
    func restoreSession(_ params: RestoreSessionRequest) async throws(ResponseError) -> RestoreSessionResult {
        guard let snapshots else {
            throw ResponseError(.handoffUnavailable, "Sessions cannot be restored: \(snapshotsUnavailable)")
        }
        let token = params.token
        let read: [UInt8]?
        do throws(FileSystemError) {
            read = try await Workspace.readSnapshot(snapshots, token: token)
        } catch {
            throw Self.fileSystemError(error)
        }
        guard let bytes = read else { throw Self.noSnapshot(token) }
        let manifest = try Self.readManifest(bytes, token: token)
        if manifest.contains(where: { $0.journal != nil }), !(await store.canPlaceJournals) {
            throw ResponseError(
                .handoffUnavailable,
                "The snapshot holds unsaved work and this server journals nothing (\(await store.journalUnavailableReason ?? "no journal")): it was left as it is",
                data: ["snapshot": .string(token)])
        }
        var results: [RestoredEntry] = []
        var keepSnapshot = false
        for entry in manifest {
            if let kind = entry.kind {
                let (result, keep) = await restorePackage(entry, kind: kind, token: token, snapshots: snapshots)
                keepSnapshot = keepSnapshot || keep
                results.append(result)
                continue
            }
            var result = RestoredEntry(uri: FileURI.uri(from: entry.path), info: nil, clientState: entry.clientState, recovered: nil, error: nil)
            // The journal copy goes into the journal directory first: whatever happens to the open,
            // the unsaved work is then where recovery finds it.
            var placed: String? = nil
            if let journal = entry.journal {
                do throws(FileSystemError) {
                    placed = try await store.placeSnapshotJournal(snapshots, token: token, name: journal, forPath: entry.path)
                } catch {
                    keepSnapshot = true
                    result.error = Self.fileSystemError(error)
                    results.append(result)
                    continue
                }
            }
            do throws(ResponseError) {
                let target = try await checkPath(entry.path, field: "uri", mustExist: true)
                defer { withExtendedLifetime(target) {} }
                let openBefore = Set(await store.handles)
                let document: Document
                do throws(DocumentError) {
                    document = try await store.open(path: target.path, encoding: nil, pinned: target.resolved?.fileIdentity)
                } catch {
                    throw Self.responseError(error, id: .null, field: "uri")
                }
                let handle = document.handle
                _ = await holdOpened(document)
                if let placed, !openBefore.contains(handle), await store.recoveryOfferName(handle) == placed {
                    do throws(DocumentError) {
                        let (version, edits, inConflict) = try await store.recover(handle, encoding: positionEncoding)
                        let unsaved = (try? await store.document(handle).hasUnsavedChanges) ?? true
                        result.recovered = RecoverResult(version: version, edits: edits, inConflict: inConflict, hasUnsavedChanges: unsaved).json
                    } catch {
                        throw Self.responseError(error, id: .null)
                    }
                }
                if entry.clientState != .null { clientStates[handle] = entry.clientState }
                do throws(DocumentError) {
                    var info = DocumentInfo(try await store.document(handle), includeText: params.includeText)
                    info.recovery = await store.recoveryOffer(handle)
                    info.editedElsewhere = await store.journalsHeldElsewhere(handle) > 0
                    result.info = info.json
                } catch {
                    throw Self.responseError(error, id: .null)
                }
            } catch {
                result.error = error
            }
            results.append(result)
        }
        if !keepSnapshot { await Workspace.removeSnapshot(snapshots, token: token) }
        return RestoreSessionResult(entries: results)
    }

    /// Restores one package of a snapshot: its journal copy placed as a dead server's, the package
    /// opened with its kind (a managed document with its migrations), its unsaved work recovered.
    /// Answers the entry, and whether the snapshot must stay (its journal copy could not be moved).
    private func restorePackage(
        _ entry: SnapshotEntry, kind: PackageKind, token: String, snapshots: SnapshotDirectory
    ) async -> (RestoredEntry, keep: Bool) {
        var result = RestoredEntry(uri: FileURI.uri(from: entry.path), info: nil, clientState: entry.clientState, recovered: nil, error: nil)
        var placed: String? = nil
        if let journal = entry.journal {
            do throws(FileSystemError) {
                placed = try await packages.placeSnapshotJournal(snapshots, token: token, name: journal, forPath: entry.path)
            } catch {
                result.error = Self.fileSystemError(error)
                return (result, true)
            }
        }
        do throws(ResponseError) {
            let target = try await checkPath(entry.path, field: "uri", mustExist: true)
            defer { withExtendedLifetime(target) {} }
            let openBefore = Set(await packages.handles)
            let options = StoreOptions(migrations: entry.migrations ?? [])
            let (document, _) = try await packageCall { () throws(DocumentError) in
                try await packages.open(path: target.path, kind: kind, storeOptions: options)
            }
            holdPackage(document)
            let handle = document.handle
            if let placed, !openBefore.contains(handle), await packages.recoveryOfferName(handle) == placed {
                result.recovered = try await recoverPackage(handle).json
            }
            if entry.clientState != .null { clientStates[handle] = entry.clientState }
            let info = try await packageCall { () throws(DocumentError) in try await packages.info(handle) }
            result.info = PackageInfo(
                document: info, recovery: await packages.recoveryOffer(handle),
                editedElsewhere: await packages.journalsHeldElsewhere(handle) > 0).json
        } catch {
            result.error = error
        }
        return (result, false)
    }

    /// `session/discardSnapshot`: removes the snapshot and the journal copies it holds.
    func discardSnapshot(_ params: DiscardSnapshotRequest) async throws(ResponseError) -> NullResult {
        guard let snapshots else {
            throw ResponseError(.handoffUnavailable, "Sessions cannot be handed off: \(snapshotsUnavailable)")
        }
        guard await Workspace.removeSnapshot(snapshots, token: params.token) else { throw Self.noSnapshot(params.token) }
        return NullResult()
    }

    static func noSnapshot(_ token: String) -> ResponseError {
        ResponseError(
            .noSnapshot, "No snapshot has the token \(token): restored already, discarded, or taken with another state directory",
            data: ["snapshot": .string(token)])
    }

    /// The documents of a snapshot's manifest; a manifest that cannot be read is -32026 (no
    /// snapshot to restore), naming what is wrong in it.
    private static func readManifest(_ bytes: [UInt8], token: String) throws(ResponseError) -> [SnapshotEntry] {
        func unreadable(_ reason: String) -> ResponseError {
            ResponseError(.noSnapshot, "The snapshot \(token) cannot be restored: \(reason)", data: ["snapshot": .string(token)])
        }
        let value: JSONValue
        do throws(JSONParseError) { value = try JSONParser().parse(bytes) } catch { throw unreadable("its manifest is not JSON (\(error))") }
        guard case .object(let object) = value, case .integer(1)? = object["format"], case .array(let documents)? = object["documents"] else {
            throw unreadable("its manifest is not a format 1 manifest")
        }
        var entries: [SnapshotEntry] = []
        for (index, document) in documents.enumerated() {
            guard case .object(let fields) = document, case .string(let uri)? = fields["uri"],
                  let path = try? FileURI.path(from: uri)
            else { throw unreadable("documents[\(index)] has no file uri") }
            var journal: String? = nil
            if case .string(let name)? = fields["journal"] {
                guard SnapshotDirectory.isJournalName(name) else { throw unreadable("documents[\(index)].journal is not a journal copy's name") }
                journal = name
            }
            var version: Int64 = 0
            if case .integer(let number)? = fields["version"] { version = number }
            var unsaved = false
            if case .bool(let flag)? = fields["hasUnsavedChanges"] { unsaved = flag }
            var kind: PackageKind? = nil
            if let value = fields["kind"], value != .null {
                guard case .string(let name) = value, let known = PackageKind(rawValue: name) else {
                    throw unreadable("documents[\(index)].kind is not \"package\" or \"managed\"")
                }
                kind = known
            }
            var migrations: [String]? = nil
            if case .array(let scripts)? = fields["migrations"] {
                migrations = []
                for script in scripts {
                    guard case .string(let text) = script else { throw unreadable("documents[\(index)].migrations holds a non-string") }
                    migrations!.append(text)
                }
            }
            entries.append(SnapshotEntry(
                path: path, version: version, hasUnsavedChanges: unsaved, journal: journal, clientState: fields["clientState"] ?? .null,
                kind: kind, migrations: migrations))
        }
        return entries
    }
}
