import FileStore
import SystemCalls

/// The workspace's file work that belongs to no open document: copies of files (`workspace/import`,
/// and `workspace/export` of a file), scans and live watches of directories (`workspace/query`),
/// and checking a path against the sandbox roots. Each call runs its file work on a pooled thread
/// (`runOnOwnThread`) and suspends meanwhile, so that the caller (the protocol layer, on the loop)
/// does no file work of its own and never blocks on the disk.
///
/// A file is named twice where sandbox roots are set: by the path the session reports (`path`) and
/// by the path the work acts on (`entry`, a name in a pinned directory, `/proc/self/fd/D/name`).
/// Errors name the reported path.
public enum Workspace {
    /// Copies the file `source` into `directory` under `preferredName`, or the next free name
    /// (`report 2.txt`), never replacing anything; answers the copy's path (in `directory.entry`'s
    /// spelling) and identity.
    public static func copy(
        from source: FileOperand, intoDirectory directory: FileOperand, preferredName: String
    ) async -> Result<(path: String, identity: FileIdentity), FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try FileTransfer.copy(from: source.entry, intoDirectory: directory.entry, preferredName: preferredName))
            } catch {
                return .failure(error.naming(source.entry, as: source.path).naming(directory.entry, as: directory.path))
            }
        }
    }

    /// Copies the file `source` to `destination`, over an existing file only with `replace`;
    /// answers the copy's identity.
    public static func copy(from source: FileOperand, to destination: FileOperand, replace: Bool) async -> Result<FileIdentity, FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try FileTransfer.copy(from: source.entry, to: destination.entry, replace: replace))
            } catch {
                return .failure(error.naming(source.entry, as: source.path).naming(destination.entry, as: destination.path))
            }
        }
    }

    /// The files under `root` matching `pattern` (one level, or every level with `recursive`).
    public static func scan(root: String, pattern: GlobPattern, recursive: Bool) async -> Result<[DirectoryEntry], FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try DirectoryQuery.scan(root: root, pattern: pattern, recursive: recursive))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Starts a live watch of the files under `root` matching `pattern` (its first scan and its
    /// inotify watches are made on a pooled thread); `handler` receives each batch of changes on
    /// the watch's own thread, possibly before this call returns.
    public static func watch(
        root: String, pattern: GlobPattern, recursive: Bool, handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) async -> Result<DirectoryWatch, FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try DirectoryWatch(root: root, pattern: pattern, recursive: recursive, handler: handler))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Stops `watch` and waits for its thread to end (a join, made on a pooled thread): nothing is
    /// delivered after this returns.
    public static func stop(_ watch: DirectoryWatch) async {
        await runOnOwnThread { watch.stop() }
    }

    /// Stops every watch in `watches`, each as ``stop(_:)`` does, on one pooled thread.
    public static func stop(_ watches: [DirectoryWatch]) async {
        guard !watches.isEmpty else { return }
        await runOnOwnThread { for watch in watches { watch.stop() } }
    }

    /// What kind of file is at `path` (`lstat`, or `stat` with `followingLinks`), asked on a pooled
    /// thread; an error names `reportedAs` when given.
    public static func kind(of path: String, followingLinks: Bool, reportedAs: String? = nil) async throws(FileSystemError) -> FileKind {
        try await runOnOwnThread { () -> Result<FileKind, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try FileKind.of(path, followingLinks: followingLinks, reportedAs: reportedAs))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// The version store of the state directory `directory` (its `versions` folder, made if
    /// missing). Called once, at start, before the server serves: on the caller's thread.
    public static func openVersionStore(inStateDirectory directory: String) throws(FileSystemError) -> VersionStore {
        try VersionStore(directory: directory.hasSuffix("/") ? directory + "versions" : directory + "/versions")
    }

    /// Opens (creating it, mode 0700) the journal directory `<directory>/journal` and checks that it
    /// can be written.
    public static func openJournal(inStateDirectory directory: String) throws(FileSystemError) -> JournalDirectory {
        try JournalDirectory.open(stateDirectory: directory)
    }

    /// Opens (creating it, mode 0700) the directory of kept undo histories `<directory>/undo` and
    /// checks that it can be written, on a pooled thread.
    public static func openUndoDirectory(inStateDirectory directory: String) async throws(FileSystemError) -> UndoDirectory {
        try await runOnOwnThread { () -> Result<UndoDirectory, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try UndoDirectory.open(stateDirectory: directory))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Runs `onExit` on a thread of its own when the process `pid` ends, provided it is an ancestor
    /// of this one (the client that started the server, directly or through a shell: any other
    /// number may name an unrelated process, or none). Answers whether it is watched, or throws what
    /// kept it from being watched (no pidfd on this kernel, no thread). Reads `/proc` on a pooled
    /// thread.
    public static func watchClientProcess(_ pid: Int32, onExit: @escaping @Sendable () -> Void) async throws(SystemCallError) -> Bool {
        try await runOnOwnThread { () -> Result<Bool, SystemCallError> in
            guard isAncestor(pid) else { return .success(false) }
            do throws(SystemCallError) {
                try onProcessExit(pid, onExit)
                return .success(true)
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Opens `paths` as sandbox roots (``SandboxRoots/init(_:)``), on a pooled thread.
    public static func openRoots(_ paths: [String]) async throws(FileSystemError) -> SandboxRoots {
        try await runOnOwnThread { () -> Result<SandboxRoots, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try SandboxRoots(paths))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Narrows `roots` to `paths` (``SandboxRoots/narrowed(to:)``), on a pooled thread.
    public static func narrow(_ roots: SandboxRoots, to paths: [String]) async throws(SandboxError) -> SandboxRoots {
        try await runOnOwnThread { () -> Result<SandboxRoots, SandboxError> in
            do throws(SandboxError) {
                return .success(try roots.narrowed(to: paths))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Resolves `path` beneath `roots` (`openat2` with `RESOLVE_BENEATH`, or a walk with
    /// `O_NOFOLLOW`, then `fstat`) on a pooled thread; see ``SandboxRoots/resolve(_:mustExist:)``.
    public static func resolve(_ path: String, in roots: SandboxRoots, mustExist: Bool) async throws(SandboxError) -> ResolvedPath {
        try await runOnOwnThread { () -> Result<ResolvedPath, SandboxError> in
            do throws(SandboxError) {
                return .success(try roots.resolve(path, mustExist: mustExist))
            } catch {
                return .failure(error)
            }
        }.get()
    }
}
