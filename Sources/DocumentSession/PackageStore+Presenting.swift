import FileStore
import SystemCalls

// The file presenter of packages (NSFilePresenter's rule for packages: a change anywhere inside
// is one change of the document). Each open package's tree is watched with a ``DirectoryWatch``;
// a batch of changes only says "look": the tree's signature is compared with the one recorded at
// the last read or save, so the server's own saves (which record theirs) are never reported.

extension PackageStore {
    func startWatching(_ handle: String) {
        guard watchFiles, let document = documents[handle], watches[handle] == nil else { return }
        let pattern = try! GlobPattern("**")
        do throws(FileSystemError) {
            watches[handle] = try DirectoryWatch(root: document.path, pattern: pattern, recursive: true) { [weak self] _ in
                guard let self else { return }
                Task { await self.check(handle) }
            }
        } catch {
            // Not watched (the kernel's limit on inotify instances, say): saves still compare the
            // tree's signature first, so another program's change is never overwritten unasked.
        }
    }

    func stopWatching(_ handle: String) {
        watches.removeValue(forKey: handle)?.stop()
    }

    /// After a save swapped the tree (the watch followed the old directory away): a new watch on
    /// the new tree, and a check of what may have happened between.
    func restartWatching(_ handle: String) {
        stopWatching(handle)
        startWatching(handle)
    }

    /// Test-visible: compares the package's tree with the recorded one now, as a watch's event does.
    public func checkNow(_ handle: String) async {
        await check(handle)
    }

    /// Looks at the package's tree: unchanged, nothing; changed with no unsaved changes, the
    /// document takes it (`document/didChange`, reason `reloaded`); with unsaved changes, a
    /// conflict (`inConflict`, reason `externalChange`; a managed store's disk side kept as a
    /// conflict version); gone, `deletedOnDisk` (the entries written are kept; the next save writes
    /// the package again).
    func check(_ handle: String) async {
        guard let document = documents[handle] else { return }
        if saving[handle] != nil || checking.contains(handle) {
            checkAgain.insert(handle)
            return
        }
        checking.insert(handle)
        defer { checking.remove(handle) }
        let path = document.path
        let kind = document.kind
        let tree = await runOnOwnThread { () -> Result<DiskTree, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try Self.listTree(path, kind: kind))
            } catch {
                return .failure(error)
            }
        }
        guard var document = documents[handle] else { return }
        let previous = document.state
        switch tree {
        case .failure(let error):
            if error.errno == 2 /* ENOENT */ && !document.deletedOnDisk {
                document.deletedOnDisk = true
                documents[handle] = document
                stopWatching(handle)
                emit(document, previous: previous, reason: .deletedOnDisk, error: .deletedOnDisk(path: path))
            }
        case .success(let tree):
            if tree.signature == document.signature || tree.signature == document.theirSignature {
                break
            }
            if document.deletedOnDisk {
                // A package back at the path: a new tree to compare with from here on.
                document.deletedOnDisk = false
                documents[handle] = document
                startWatching(handle)
            }
            if !document.hasUnsavedChanges && !document.state.contains(.inConflict) {
                try? await takeDisk(handle, reason: .reloaded, tree: tree)
            } else {
                document.theirSignature = tree.signature
                document.state.insert(.inConflict)
                // A copy of their store only when the store itself changed (not for another
                // entry, or a temporary file a program writes before it renames its store in),
                // and once per state of it: the copy must hold what `theirs` would take.
                let store = tree.signature.item(DatabaseLayout.storePath)
                if let database = databases[handle], let store,
                   store != document.signature.item(DatabaseLayout.storePath),
                   store != document.conflictVersions.last?.store,
                   var version = keepConflictVersion(database, packagePath: path, handle: handle) {
                    version.store = store
                    document.conflictVersions.append(version)
                }
                documents[handle] = document
                emit(document, previous: previous, reason: .externalChange,
                     error: .packageChangedOnDisk(path: path, expected: document.signature.etag, found: tree.signature.etag))
            }
        }
        if checkAgain.remove(handle) != nil { await check(handle) }
    }
}
