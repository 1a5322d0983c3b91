import DocumentSession
import FileStore
import JSON
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// The storage locations (protocol §11.8): a local and a synced root named at `initialize`
/// (`initializationOptions.storage`), and the moves of documents between them, the document/move
/// machinery underneath (open documents follow their files).
extension Server {
    /// Checks `initializationOptions.storage`: each an existing directory (its real path is kept),
    /// inside `roots` when there are roots, the two neither the same nor one inside the other.
    /// Every refusal is -32602 naming the member and why.
    func checkStorage(_ given: (local: String, synced: String), roots: SandboxRoots?) async throws(ResponseError) -> StorageRoots {
        let base = InitializeRequest.storageField
        var real: [StorageName: String] = [:]
        for name in StorageName.allCases {
            let field = "\(base).\(name.rawValue)"
            let path = name == .local ? given.local : given.synced
            var resolvedPath = path
            if let roots {
                do throws(SandboxError) {
                    let resolved = try await Workspace.resolve(path, in: roots, mustExist: true)
                    resolvedPath = resolved.realPath
                    withExtendedLifetime(resolved) {}
                } catch {
                    switch error.kind {
                    case .outsideRoots:
                        throw .invalidParams(
                            field: field,
                            "\(path) lies outside the server's roots (\(roots.paths.joined(separator: ", "))): \(error.reason)")
                    case .invalidPath: throw .invalidParams(field: field, error.reason)
                    case .fileSystem(let detail): throw .invalidParams(field: field, Self.storageProblem(detail, path))
                    }
                }
            }
            switch await Workspace.storageDirectory(resolvedPath) {
            case .success(let directory): real[name] = directory
            case .failure(let detail): throw .invalidParams(field: field, Self.storageProblem(detail, path))
            }
        }
        let (local, synced) = (real[.local]!, real[.synced]!)
        if local == synced {
            throw .invalidParams(field: "\(base).synced", "\(synced) is the same directory as storage.local; the two locations must differ")
        }
        if synced.hasPrefix(local == "/" ? "/" : local + "/") {
            throw .invalidParams(field: "\(base).synced", "\(synced) lies inside storage.local (\(local)); neither location may hold the other")
        }
        if local.hasPrefix(synced == "/" ? "/" : synced + "/") {
            throw .invalidParams(field: "\(base).local", "\(local) lies inside storage.synced (\(synced)); neither location may hold the other")
        }
        return StorageRoots(local: local, synced: synced)
    }

    private static func storageProblem(_ detail: FileSystemError, _ path: String) -> String {
        switch detail.errno {
        case ENOENT: return "\(path) does not exist (a storage location is an existing directory)"
        case ENOTDIR: return "\(path) is not a directory (a storage location is an existing directory)"
        default: return detail.message
        }
    }

    /// The storage locations, or -32602 naming `field` when none were given at `initialize`.
    private func requireStorage(field: String) throws(ResponseError) -> StorageRoots {
        guard let storage else {
            throw .invalidParams(field: field, "the server has no storage locations: initializationOptions.storage was not given at initialize")
        }
        return storage
    }

    /// `document/moveToStorage`: `{document | uri, storage}` → as `document/move`: the file goes to
    /// the same relative path under the named storage (its missing directories made), through
    /// `document/move`'s machinery. A file already there is answered as it is.
    func moveToStorage(_ params: MoveToStorageRequest, _ context: RequestContext) async throws(ResponseError) -> Answer<MoveDocumentResult> {
        let storage = try requireStorage(field: "params.storage")
        if case .document(let handle) = params.source, PackageStore.isPackageHandle(handle) {
            // Checked like any handle first: an unknown one is -32011.
            do throws(DocumentError) {
                _ = try await packages.info(handle)
            } catch {
                throw Self.responseError(error, id: context.id)
            }
            throw .invalidParams(
                field: "params.document",
                "\(handle) is an open package document, and package documents do not follow a move yet: close it, then move the package by its uri")
        }
        let field: String
        let path: String
        switch params.source {
        case .uri(let given):
            field = "params.uri"
            path = try await checkPath(given, field: field, mustExist: true).path
        case .document(let handle):
            field = "params.document"
            do throws(DocumentError) {
                path = try await store.document(handle).path
            } catch {
                throw Self.responseError(error, id: context.id)
            }
        }
        guard let (current, relative) = storage.locate(path) else {
            throw .invalidParams(
                field: field,
                "\(path) is in neither storage location (local \(storage.local), synced \(storage.synced)); only a file beneath one of them moves to the other")
        }
        if current == params.storage {
            return .now(MoveDocumentResult(path: path, handle: await store.openDocument(atPath: path)))
        }
        let target = storage[params.storage]
        let destinationPath = target == "/" ? "/" + relative : target + "/" + relative
        if !(await Workspace.existing([destinationPath])).isEmpty {
            throw ResponseError(
                .alreadyExists,
                "A file already exists at \(destinationPath); nothing was moved (move or rename it first)",
                data: ["uri": .string(FileURI.uri(from: destinationPath))])
        }
        let made = try await makeDirectories(for: relative, under: target)
        do throws(ResponseError) {
            if (try? await Workspace.kind(of: path, followingLinks: false)) == .directory {
                // A package moves whole; any other directory is not a document.
                guard await Workspace.isPackageDirectory(path) else { throw Self.notRegularFile(path, kind: "directory") }
                return .now(try await movePackage(path, to: destinationPath, field: field))
            }
            let source = try await sourceFile(params.source)
            let destination = try await checkPath(destinationPath, field: field, mustExist: false)
            switch try await move(source, to: destination, replace: false, context) {
            case .now(let result): return .now(result)
            case .later(let work, let answered):
                // A move refused off the queue takes back the directories made for it.
                return .later(
                    {
                        let outcome = await work()
                        if case .failure = outcome { await Workspace.removeEmptyDirectories(made) }
                        return outcome
                    }, answered: answered)
            }
        } catch {
            await Workspace.removeEmptyDirectories(made)
            throw error
        }
    }

    /// `workspace/moveAllToStorage`: `{storage}` → `{moved}`: every document under the other
    /// storage moves to the same relative path under this one, all or nothing. Runs in request
    /// order (requests sent after it wait for it).
    func moveAllToStorage(_ params: MoveAllToStorageRequest, _ context: RequestContext) async throws(ResponseError) -> MoveAllToStorageResult {
        let storage = try requireStorage(field: "params.storage")
        let sourceRoot = storage[params.storage.other], targetRoot = storage[params.storage]
        let items: [StorageLocations.Item]
        switch await Workspace.storageDocuments(under: sourceRoot) {
        case .success(let found): items = found
        case .failure(let error): throw Self.fileSystemError(error)
        }
        func join(_ root: String, _ relative: String) -> String { root == "/" ? "/" + relative : root + "/" + relative }
        // Everything is checked before anything moves.
        var openPackages: [StorageLocations.Item] = []
        for item in items where item.kind == .package {
            if await packages.handle(forPath: join(sourceRoot, item.relativePath)) != nil { openPackages.append(item) }
        }
        if !openPackages.isEmpty {
            let uris = openPackages.map { FileURI.uri(from: join(sourceRoot, $0.relativePath)) }
            throw .invalidParams(
                field: "params.storage",
                "package documents are open under the \(params.storage.other.rawValue) storage (\(uris.joined(separator: ", "))), and package documents do not follow a move yet: close them first; nothing was moved")
        }
        let taken = await Workspace.existing(items.map { join(targetRoot, $0.relativePath) })
        if !taken.isEmpty {
            throw ResponseError(
                .alreadyExists,
                "\(taken.count == 1 ? "A name is" : "\(taken.count) names are") taken in the \(params.storage.rawValue) storage (\(taken.joined(separator: ", "))); nothing was moved",
                data: ["uri": .string(FileURI.uri(from: taken[0])), "taken": .array(taken.map { .string(FileURI.uri(from: $0)) })])
        }

        var moved: [(item: StorageLocations.Item, result: MoveAllToStorageResult.Moved)] = []
        var made: [String] = []
        // Not cancellable: a move of everything is all or nothing, and the way back is a move too.
        let progress = ProgressReporter(
            token: params.workDoneToken, title: "Moving to the \(params.storage.rawValue) storage", writer: writer,
            unit: "documents", cancellable: false)
        defer { progress.end() }
        if !items.isEmpty { progress.report(done: 0, total: items.count) }
        do throws(ResponseError) {
            for item in items {
                let from = join(sourceRoot, item.relativePath), to = join(targetRoot, item.relativePath)
                made += try await makeDirectories(for: item.relativePath, under: targetRoot)
                let handle: String?
                switch item.kind {
                case .package:
                    _ = try await movePackage(from, to: to, field: "params.storage")
                    handle = nil
                case .file:
                    handle = try await moveFile(from, to: to, context)
                }
                moved.append((item, MoveAllToStorageResult.Moved(from: from, to: to, handle: handle)))
                progress.report(done: moved.count, total: items.count)
            }
        } catch {
            // Back where they were, last first; then the directories made go again.
            for (item, done) in moved.reversed() {
                do throws(ResponseError) {
                    switch item.kind {
                    case .package: _ = try await movePackage(done.to, to: done.from, field: "params.storage")
                    case .file: _ = try await moveFile(done.to, to: done.from, context)
                    }
                } catch {
                    logger.error("workspace/moveAllToStorage: \(done.to) could not be moved back to \(done.from): \(error.message)")
                }
            }
            await Workspace.removeEmptyDirectories(made)
            throw error
        }
        // The source's directories the moves emptied go (the root stays).
        var emptied: Set<String> = []
        for item in items {
            var directory = SyncToolFinder.parent(join(sourceRoot, item.relativePath))
            while directory.count > sourceRoot.count && directory.hasPrefix(sourceRoot + "/") {
                emptied.insert(directory)
                directory = SyncToolFinder.parent(directory)
            }
        }
        await Workspace.removeEmptyDirectories(Array(emptied))
        return MoveAllToStorageResult(moved: moved.map { $0.result })
    }

    // MARK: - Pieces

    /// Makes the missing directories of `relativePath`'s directory under `root`.
    private func makeDirectories(for relativePath: String, under root: String) async throws(ResponseError) -> [String] {
        guard let slash = relativePath.lastIndex(of: "/") else { return [] }
        switch await Workspace.makeDirectories(String(relativePath[..<slash]), under: root) {
        case .success(let made): return made
        case .failure(let error): throw Self.fileSystemError(error)
        }
    }

    /// Moves one regular file with `document/move`'s machinery, at once (its open document, if
    /// any, follows); answers that document's handle.
    private func moveFile(_ from: String, to: String, _ context: RequestContext) async throws(ResponseError) -> String? {
        let source = try await checkPath(from, field: "params.storage", mustExist: true)
        let destination = try await checkPath(to, field: "params.storage", mustExist: false)
        let operand = FileOperand(path: source.path, entry: source.entryPath)
        let target = FileOperand(path: destination.path, entry: destination.entryPath)
        do throws(FileOperationError) {
            let ticket = try await store.beginMove(operand, to: target)
            let result = try await store.finishMove(ticket, from: operand, to: target, replace: false)
            withExtendedLifetime((source, destination)) {}
            return result.handle
        } catch {
            throw Self.responseError(error, id: context.id)
        }
    }

    /// Renames a package directory that is not open.
    private func movePackage(_ from: String, to: String, field: String) async throws(ResponseError) -> MoveDocumentResult {
        if let handle = await packages.handle(forPath: from) {
            throw .invalidParams(
                field: field,
                "\(from) is open as package document \(handle), and package documents do not follow a move yet: close it first")
        }
        let source = try await checkPath(from, field: field, mustExist: true)
        let destination = try await checkPath(to, field: field, mustExist: false)
        if let error = await Workspace.moveDirectory(from: source.entryPath, to: destination.entryPath) {
            throw Self.responseError(
                FileOperationError.document(.fileSystem(error.naming(source.entryPath, as: from).naming(destination.entryPath, as: to))),
                id: .null)
        }
        withExtendedLifetime((source, destination)) {}
        return MoveDocumentResult(path: to, handle: nil)
    }
}
