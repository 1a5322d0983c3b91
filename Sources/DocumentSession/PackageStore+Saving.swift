import FileStore
import SystemCalls

// Saving, reverting, resolving and closing packages (PackageStore.swift).

extension PackageStore {
    /// What a package save did.
    public struct PackageSaveOutcome: Sendable {
        public var version: Int64
        public var path: String
        public var result: PackageSaveResult
    }

    /// Waits for the saves asked for before (the line of ``enqueueSave(_:force:to:reserved:)``: a
    /// revert, close or store call asked for after a save comes after it) and the save in progress
    /// of `handle`, if any (the managed store is not touched while a save publishes it; saves run
    /// one at a time). Never called from a save of the line (it would wait for itself).
    func waitForSave(_ handle: String) async throws(DocumentError) {
        if PackageStore.turnOf == handle {
            // Run in the document's line (``inLineIfBusy(_:afterSaves:_:)``), which waited for the
            // saves and calls asked before; the later ones wait for it.
            while let running = saving[handle] {
                await running.value
            }
            _ = try document(handle)
            return
        }
        await storeLine[handle]?.value
        await saveLine[handle]?.value
        while let running = saving[handle] {
            await running.value
        }
        _ = try document(handle)
    }

    /// `document/save` of a package asked for now, in request order: the save starts once the
    /// document's saves asked for before it have ended (``save(_:force:to:reserved:)``), whatever
    /// order the requests' tasks reach the store in. Answers its outcome when it ends.
    public func enqueueSave(
        _ handle: String, force: Bool, to newPath: String? = nil, reserved: Bool = false
    ) -> Task<Result<PackageSaveOutcome, DocumentError>, Never> {
        let previous = saveLine[handle]
        // What it writes is taken now, in request order: a write asked for after it stays unsaved
        // even when it reaches the store before this save begins. With store calls asked before it
        // still in line, it is taken when the last of them ends, as a step of the line: the
        // requests asked for after the save wait for that step (``inLineIfBusy(_:afterSaves:_:)``).
        let snapshot: Task<SaveSnapshot?, Never>
        if let calls = storeLine[handle] {
            snapshot = Task {
                await calls.value
                return self.saveSnapshot(handle)
            }
            let end = Task { _ = await snapshot.value }
            storeLine[handle] = end
            Task { await end.value; self.endOfStoreLine(handle, end) }
        } else {
            let taken = saveSnapshot(handle)
            snapshot = Task { taken }
        }
        let task = Task { () -> Result<PackageSaveOutcome, DocumentError> in
            await previous?.value
            let taken = await snapshot.value
            do throws(DocumentError) {
                return .success(try await self.save(handle, force: force, to: newPath, reserved: reserved, taken: taken))
            } catch {
                return .failure(error)
            }
        }
        let end = Task { _ = await task.value }
        saveLine[handle] = end
        Task { await end.value; self.endOfLine(handle, end) }
        return task
    }

    /// The document whose line the current task runs in (``inLineIfBusy(_:afterSaves:_:)``).
    @TaskLocal static var turnOf: String?

    /// Runs `body` in the document's line, after the saves and calls asked for before it (and the
    /// save in progress), whatever order the requests' tasks reach the store in; the requests that
    /// wait for saves (``waitForSave(_:)``) wait for it too. Answers its outcome when it ends.
    func inLine<T: Sendable>(
        _ handle: String, afterSaves: Bool = true, _ body: @escaping @Sendable () async -> T
    ) -> Task<T, Never> {
        let previousSave = afterSaves ? saveLine[handle] : nil
        let previousCall = storeLine[handle]
        let task = Task { () -> T in
            await previousSave?.value
            await previousCall?.value
            while afterSaves, let running = self.saving[handle] {
                await running.value
            }
            return await body()
        }
        let end = Task { _ = await task.value }
        storeLine[handle] = end
        Task { await end.value; self.endOfStoreLine(handle, end) }
        return task
    }

    /// Runs `body` in the document's store line when a store call of it is waiting or running (a
    /// write of an entry, a read, the state asked for after a long statement come after it, and
    /// do not wait for saves); nil when the line is idle (the caller answers at once).
    public func inLineIfBusy<T: Sendable>(
        _ handle: String, afterSaves: Bool = false, _ body: @escaping @Sendable () async -> T
    ) -> Task<T, Never>? {
        guard storeLine[handle] != nil else { return nil }
        return inLine(handle, afterSaves: afterSaves) {
            // Its turn in the line: its own wait for saves (``waitForSave(_:)``) must not wait for
            // the line, which holds it.
            await PackageStore.$turnOf.withValue(handle) { await body() }
        }
    }

    /// The line's last store call ended: the line goes (unless a later one joined it).
    private func endOfStoreLine(_ handle: String, _ end: Task<Void, Never>) {
        if storeLine[handle] == end { storeLine[handle] = nil }
    }

    /// What a save of `handle` taken now writes (nil once the document is closed).
    private func saveSnapshot(_ handle: String) -> SaveSnapshot? {
        documents[handle].map {
            SaveSnapshot(entries: $0.entries, emptyDirectories: $0.emptyDirectories, position: $0.position, version: $0.version)
        }
    }

    /// What a save asked for writes: the entries, empty directories and history position as of
    /// its request.
    public struct SaveSnapshot: Sendable {
        var entries: [String: EntryContent]
        var emptyDirectories: Set<String>
        var position: Int
        /// The version written (the save's answer).
        var version: Int64
    }

    /// The line's last save ended: the line goes (unless a later one joined it).
    private func endOfLine(_ handle: String, _ end: Task<Void, Never>) {
        if saveLine[handle] == end { saveLine[handle] = nil }
    }

    /// Waits for the save in progress of `handle`, if any, and makes the caller's the one in
    /// progress (`saving`) in the same step: the check and the claim have no suspension between
    /// them, so two saves of the document never run at once. (Awaiting ``waitForSave(_:)`` and then
    /// claiming did not hold: the call can suspend after its last check, and two pipelined saves
    /// of one package staged at once.) The caller finishes the answer and clears `saving` when it
    /// ends.
    func claimSave(_ handle: String) async throws(DocumentError) -> AsyncStream<Void>.Continuation {
        while let running = saving[handle] {
            await running.value
        }
        _ = try document(handle)
        let (done, finished) = AsyncStream.makeStream(of: Void.self)
        saving[handle] = Task { for await _ in done {} }
        return finished
    }

    /// `document/save` of a package: builds the new tree beside it and swaps it in (``PackageSave``).
    /// Refused when another program changed the package since it was read or saved (unless
    /// `force`), or while the document is in conflict (unless `force`). Entries written during the
    /// save stay unsaved.
    ///
    /// `newPath` (a save as): the tree is built beside `newPath` instead, its unchanged entries
    /// cloned from the package, and the document lives at `newPath` from then on; the package is
    /// left as it is. Refused when something is at `newPath` (unless `force`: a directory there is
    /// replaced; anything else is never). ``reserveSaveAs(_:to:isHeldElsewhere:)`` checks and
    /// holds `newPath` first: the caller's, in request order (`reserved`), else done here; this
    /// save lets that hold go when it ends. Leftovers of an earlier save as to `newPath` that was
    /// killed are removed first.
    public func save(
        _ handle: String, force: Bool, to newPath: String? = nil, reserved: Bool = false, taken: SaveSnapshot? = nil
    ) async throws(DocumentError) -> PackageSaveOutcome {
        if let newPath, !reserved { try await reserveSaveAs(handle, to: newPath) }
        // Each hold is let go once, whatever the save does (one left would make opens of the
        // path wait for ever).
        defer { if let newPath { releaseSaveAs(newPath, handle: handle) } }
        let finished = try await claimSave(handle)
        defer {
            finished.finish()
            saving[handle] = nil
            // A change seen while the save ran is looked at now (against the tree it recorded).
            if checkAgain.remove(handle) != nil { Task { await self.check(handle) } }
        }
        let document = try document(handle)
        let source = document.path
        // An earlier save as of this document, waited for above, may have moved it there already.
        let saveAs = newPath == source ? nil : newPath
        let path = saveAs ?? source
        let expected = document.signature
        let deleted = document.deletedOnDisk
        if document.state.contains(.inConflict) && !force {
            throw .packageChangedOnDisk(path: source, expected: expected.etag, found: document.theirSignature?.etag ?? expected.etag)
        }
        // What the save writes: every entry as the session held it when the save was asked for
        // (`taken`, in request order), else now.
        let snapshot = taken?.entries ?? document.entries
        let position = taken?.position ?? document.position
        let savedVersion = taken?.version ?? document.version
        var writes: [PackageEntryWrite] = snapshot.keys.sorted().map { path in
            switch snapshot[path]! {
            case .onDisk: return PackageEntryWrite(path: path, source: .unchanged)
            case .bytes(let bytes): return PackageEntryWrite(path: path, source: .bytes(bytes))
            }
        }
        writes += (taken?.emptyDirectories ?? document.emptyDirectories).sorted().map { PackageEntryWrite(path: $0, source: .directory) }
        if let database = databases[handle] {
            writes.append(PackageEntryWrite(path: DatabaseLayout.storePath, source: .produce({ (destination) throws(FileSystemError) in
                try database.publish(to: destination)
            })))
        }
        let exchangeUnsupported = exchangeUnsupported
        let kind = document.kind
        // The history's steps refer to the disk's content of entries the save replaces or removes:
        // that content is read into memory first, so an undo past the save still finds it.
        var materialize: Set<String> = []
        for step in document.steps {
            guard case .entry(let entryPath, let before, let after) = step.change else { continue }
            let onDisk = { (content: EntryContent?) -> Bool in if case .onDisk(.file, _, _)? = content { return true } else { return false } }
            if (onDisk(before) || onDisk(after)), !onDisk(snapshot[entryPath]) { materialize.insert(entryPath) }
        }
        let toRead = materialize
        let allWrites = writes
        let result = await runOnOwnThread { () -> Result<(PackageSaveResult, DiskTree, [String: [UInt8]]), DocumentError> in
            do throws(FileSystemError) {
                var kept: [String: [UInt8]] = [:]
                for entryPath in toRead.sorted() {
                    kept[entryPath] = try EntryReading.read(packagePath: source, relativePath: entryPath, limit: Self.maximumEntrySize)
                }
                // Another program's change since the last read or save is not overwritten unasked
                // (nor, for a save as, copied unasked: the unchanged entries come from the package).
                if !force && !deleted {
                    let now = try? PackageSave.signature(of: source)
                    if now != expected { return .failure(.packageChangedOnDisk(path: source, expected: expected.etag, found: now?.etag)) }
                }
                if saveAs != nil {
                    // A save as killed midway left its staged tree beside `path`: removed first.
                    _ = try? PackageSave.recoverInterruptedSave(packageAt: path)
                    if !force, (try? fileStatus(path, followingSymlinks: false)) != nil {
                        return .failure(.save(.alreadyExists(path: path)))
                    }
                }
                let saved = try PackageSave.save(
                    packageAt: path, entries: allWrites, exchangeUnsupported: exchangeUnsupported, removeOldTree: false,
                    source: saveAs == nil ? nil : source)
                return .success((saved, try Self.listTree(path, kind: kind), kept))
            } catch {
                if saveAs != nil && error.errno == 17 /* EEXIST: it appeared meanwhile */ { return .failure(.save(.alreadyExists(path: path))) }
                return .failure(.fileSystem(error))
            }
        }
        guard var document = documents[handle] else { throw .unknownDocument(handle) }
        let previous = document.state
        switch result {
        case .failure(let error):
            if case .packageChangedOnDisk = error {
                document.state.insert(.inConflict)
                documents[handle] = document
                emit(document, previous: previous, reason: .externalChange, error: error)
            } else if case .save(.alreadyExists) = error {
                // Refused before anything was attempted: no savingError (as for text).
            } else {
                document.state.insert(.savingError)
                documents[handle] = document
                emit(document, previous: previous, reason: .saveFailed, error: error)
            }
            throw error
        case .success(let (saved, tree, kept)):
            if saveAs != nil {
                // The document lives at its new path from now on; the package it was saved from
                // is left as it is (no longer watched).
                stopWatching(handle)
                if handleByPath[source] == handle { handleByPath[source] = nil }
                handleByPath[path] = handle
                document.path = path
            }
            document.signature = tree.signature
            for index in document.steps.indices {
                guard case .entry(let entryPath, let before, let after) = document.steps[index].change, let bytes = kept[entryPath] else { continue }
                let keep = { (content: EntryContent?) -> EntryContent? in
                    if case .onDisk(.file, _, _)? = content { return .bytes(bytes) } else { return content }
                }
                document.steps[index].change = .entry(path: entryPath, before: keep(before), after: keep(after))
            }
            document.theirSignature = nil
            document.deletedOnDisk = false
            // Entries still as the save wrote them are on disk now; later writes stay unsaved.
            for (entryPath, content) in snapshot where document.entries[entryPath] == content {
                if let onDisk = tree.entries[entryPath] { document.entries[entryPath] = onDisk }
            }
            // The history's entries that held those bytes now match the disk too: a later undo
            // back to them is a change like any other, so nothing else moves.
            document.cleanPosition = position
            document.state.remove([.inConflict, .savingError])
            documents[handle] = document
            journalBaseChanged(handle)
            emit(document, previous: previous, reason: .saved)
            // After the answer: the old tree's removal (the new tree is in place and flushed), and
            // a watch of the new tree, then a look at what may have changed since it was listed.
            if let left = saved.oldTree {
                let removal = Task.detached { _ = await runOnOwnThread { try? PackageSave.removeLeftover(left) } }
                leftoverRemovals.append(removal)
                Task { await removal.value; self.leftoverRemovals.removeAll { $0 == removal } }
            }
            Task { self.restartWatching(handle); await self.check(handle) }
            var answered = saved
            answered.oldTree = nil
            return PackageSaveOutcome(version: savedVersion, path: path, result: answered)
        }
    }

    /// A save as to `path`, asked for in request order: refused when an open document holds it or
    /// a file or package under it (`openElsewhere`, naming the first such document): this store's
    /// packages, another save as writing it, and (`isHeldElsewhere`) the documents of other stores.
    /// Else `path` is held for the document until its ``save(_:force:to:)`` ends.
    public func reserveSaveAs(
        _ handle: String, to path: String, isHeldElsewhere: @Sendable (String) async -> (path: String, handle: String)? = { _ in nil }
    ) async throws(DocumentError) {
        func check() throws(DocumentError) {
            let source = try document(handle).path
            // As rename(2): a directory does not go into itself, nor replace one that holds it.
            if path.hasPrefix(source + "/") || source.hasPrefix(path + "/") {
                throw .fileSystem(FileSystemError(
                    errno: 22 /* EINVAL */, syscall: "save", path: path,
                    reason: path.hasPrefix(source + "/") ? "a package cannot be saved as a package inside itself"
                        : "a package cannot be saved as a directory that holds it"))
            }
            if let other = saveAsTargets[path]?.handle ?? handleByPath[path], other != handle { throw .openElsewhere(path: path, handle: other) }
            let inside = path.hasSuffix("/") ? path : path + "/"
            if let (otherPath, other) = handleByPath.filter({ $0.key.hasPrefix(inside) }).min(by: { $0.key < $1.key }) {
                throw .openElsewhere(path: otherPath, handle: other)
            }
        }
        try check()
        if let other = await isHeldElsewhere(path) { throw .openElsewhere(path: other.path, handle: other.handle) }
        try check()  // again: the actor may have run something else meanwhile
        if let held = saveAsTargets[path] {
            held.count += 1  // the document's own saves as to one path, one after the other
        } else {
            saveAsTargets[path] = SaveAsReservation(handle: handle)
        }
    }

    /// Waits until no save as holds `path` (an open of it, asked for after the save as).
    public func waitForSaveAs(to path: String) async {
        while let held = saveAsTargets[path] { await held.done.value }
    }

    /// Lets `path` go once each of the document's saves as to it has ended (or was never run).
    public func releaseSaveAs(_ path: String, handle: String) {
        guard let held = saveAsTargets[path], held.handle == handle else { return }
        held.count -= 1
        if held.count == 0 {
            saveAsTargets[path] = nil
            held.end.finish()
        }
    }

    /// `document/revert` of a package: drops the unsaved changes and the history, takes the
    /// package as it is on disk (and its store), one new version.
    public func revert(_ handle: String) async throws(DocumentError) -> PackageDocument {
        try await waitForSave(handle)
        let document = try document(handle)
        try await takeDisk(handle, reason: .reverted, tree: Self.readTree(document.path, kind: document.kind, recover: false))
        return try self.document(handle)
    }

    /// Makes the document hold the disk's tree (a reload, a revert, `theirs`): entries and store
    /// from disk, the history dropped, the version raised, `document/didChange` with what changed.
    func takeDisk(_ handle: String, reason: DocumentEvent.Reason, tree: DiskTree) async throws(DocumentError) {
        guard var document = documents[handle] else { throw .unknownDocument(handle) }
        let changes = EntryChange.between(document.entries, tree.entries)
        var storeChanged = false
        if let database = databases[handle] {
            try await reloadDatabase(database, packagePath: document.path)
            storeChanged = true
            document.storeSummary = database.summary
        }
        let previous = document.state
        let wasDirty = document.hasUnsavedChanges
        document.entries = tree.entries
        document.emptyDirectories = tree.emptyDirectories
        document.signature = tree.signature
        document.theirSignature = nil
        document.deletedOnDisk = false
        document.steps = []
        document.position = 0
        document.cleanPosition = 0
        document.state.remove([.inConflict, .savingError])
        document.version += 1
        documents[handle] = document
        dropJournal(handle)
        // Another program's change reaches the clients as document/didChange; a revert or a
        // resolution is answered with the document's info instead.
        if reason == .reloaded { emit(document, previous: previous, reason: reason, kind: .entriesChanged(entries: changes, store: storeChanged)) }
        if wasDirty || previous != document.state { emit(document, previous: previous, reason: reason) }
    }

    /// `document/resolveConflict` of a package: `mine` keeps the session's entries (the next save
    /// replaces the disk's tree without `force`); `theirs` takes the disk's tree, as a revert.
    public func resolveConflict(_ handle: String, takeTheirs: Bool, version: Int64?) async throws(DocumentError) -> PackageDocument {
        try await waitForSave(handle)
        var document = try document(handle)
        try checkVersion(document, version)
        guard document.state.contains(.inConflict) else { throw .notInConflict(handle: handle) }
        if takeTheirs {
            try await takeDisk(handle, reason: .conflictResolved, tree: Self.readTree(document.path, kind: document.kind, recover: false))
            return try self.document(handle)
        }
        let previous = document.state
        if let theirs = document.theirSignature { document.signature = theirs }
        document.theirSignature = nil
        document.state.remove(.inConflict)
        documents[handle] = document
        // The base is their tree now: the journal starts again from the entries kept.
        journalBaseChanged(handle)
        emit(document, previous: previous, reason: .conflictResolved)
        return document
    }

    /// `document/close` of a package: saves first when there are unsaved changes (unless
    /// `discard`); a failed save keeps it open. Answers whether it saved.
    public func close(_ handle: String, discard: Bool) async throws(DocumentError) -> Bool {
        try await waitForSave(handle)
        var document = try document(handle)
        var saved = false
        if document.hasUnsavedChanges && !discard {
            _ = try await save(handle, force: false)
            saved = true
            document = try self.document(handle)
        }
        stopWatching(handle)
        if let database = databases.removeValue(forKey: handle) { database.close() }
        // Closed: nothing unsaved is kept (a close saves, or drops the changes), and an offer is
        // let go (the dead journal stays, offered at the next open).
        dropJournal(handle)
        recoveries[handle] = nil
        heldElsewhere[handle] = nil
        journalRetry[handle] = nil
        documents[handle] = nil
        handleByPath[document.path] = nil
        let previous = document.state
        document.state = [.closed]
        emit(document, previous: previous, reason: .closed)
        return saved
    }

    /// Closes a package without saving and without deleting its journal: the journal is let go,
    /// a dead server's from then on, offered at the package's next open (a daemon's last client
    /// holding it vanished).
    public func abandon(_ handle: String) async {
        guard (try? await waitForSave(handle)) != nil, let document = documents[handle] else { return }
        stopWatching(handle)
        if let database = databases.removeValue(forKey: handle) { database.close() }
        if journals.removeValue(forKey: handle) != nil { journal?.submit(.release(handle: handle)) }
        recoveries[handle] = nil
        heldElsewhere[handle] = nil
        journalRetry[handle] = nil
        documents[handle] = nil
        handleByPath[document.path] = nil
        var closed = document
        closed.state = [.closed]
        emit(closed, previous: document.state, reason: .closed)
    }

    /// Closes every document without saving (the server's shutdown): the managed stores' working
    /// copies and their directory are removed. Answers the paths that had unsaved changes no
    /// journal keeps (a managed document's; a package's whose journal could not be written).
    @discardableResult
    public func closeAll() async -> [String] {
        // Saves in progress end first (their stores are published from the working copies), and
        // the old trees they left are removed.
        while let running = saving.values.first { await running.value }
        for removal in leftoverRemovals { await removal.value }
        let unsaved = documents.values.filter { $0.hasUnsavedChanges && journals[$0.handle] == nil }.map(\.path).sorted()
        for handle in Array(documents.keys) {
            stopWatching(handle)
            databases.removeValue(forKey: handle)?.close()
        }
        // The journals stay (hot exit: the text store's ``DocumentStore/finishJournals(keep:)``
        // flushes them, or deletes every one without hot exit); offers are let go.
        journals = [:]
        recoveries = [:]
        documents = [:]
        handleByPath = [:]
        workingDirectory?.remove()
        return unsaved
    }
}
