import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The per-user daemon's directory (issue 19): `daemon.sock`, the socket its clients connect to,
/// and `daemon.lock`, whose `flock` says whether a daemon is alive (so a stale socket left by a
/// killed daemon is replaced without a prompt).
///
/// Its path: `--runtime-dir`, else `$XDG_RUNTIME_DIR/docsession` when that variable holds an
/// absolute path, else `/tmp/docsession-<euid>`. It is made with mode 0700 when missing (its parent
/// must exist), and before anything in it is used it must be a real directory (`lstat`: not a
/// symbolic link), owned by this process's effective user, with no permission for group or others
/// (`mode & 0o077 == 0`). A directory that fails is refused, never repaired (no `chmod`, no `chown`:
/// emacs's `server-ensure-safe-dir` does the same): whoever made it so may be waiting for us to use
/// it.
public struct RuntimeDirectory: Sendable, Equatable {
    public let path: String

    public init(path: String) { self.path = path }

    /// The socket's path.
    public var socketPath: String { path + "/daemon.sock" }
    /// The liveness lock's path.
    public var lockPath: String { path + "/daemon.lock" }

    /// The default directory for `environment` (`XDG_RUNTIME_DIR`) and the effective user `user`.
    public static func defaultPath(
        runtimeDirectory: String? = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) },
        user: uid_t = geteuid()
    ) -> String {
        if let runtimeDirectory, runtimeDirectory.hasPrefix("/") {
            return (runtimeDirectory.hasSuffix("/") ? String(runtimeDirectory.dropLast()) : runtimeDirectory) + "/docsession"
        }
        return "/tmp/docsession-\(user)"
    }

    /// Makes the directory (mode 0700) when it is missing, then checks it (``check()``).
    public func prepare() throws(FileSystemError) {
        if mkdir(path, 0o700) != 0 {
            let number = errno
            if number != EEXIST { throw FileSystemError(errno: number, syscall: "mkdir", path: path) }
        }
        try check()
    }

    /// A directory of its own under this one (`locks`, `servers`): the runtime directory is made
    /// when missing and checked (``prepare()``) before anything is made in it, then `name` is made
    /// 0700 when missing and checked the same way. Every use of the runtime directory goes through
    /// here or ``prepare()``: one made by another user (`/tmp/docsession-<uid>` squatted, mode 0777)
    /// or that others can write is refused, and nothing is made in it. Answers the subdirectory's
    /// path.
    public func privateSubdirectory(_ name: String) throws(FileSystemError) -> String {
        try prepare()
        let subdirectory = path + "/" + name
        if let error = FileLocks.makePrivateDirectory(subdirectory) { throw error }
        return subdirectory
    }

    /// Checks the directory when it exists: answers false when it does not (`ENOENT`), true when it
    /// passes, and throws what is wrong otherwise.
    public func checkIfPresent() throws(FileSystemError) -> Bool {
        do {
            try check()
            return true
        } catch where error.errno == ENOENT && error.syscall == "lstat" {
            return false
        }
    }

    /// Checks that the directory is one this user alone can enter: `lstat` (a symbolic link is
    /// refused, not followed), a directory, owned by `geteuid()`, `mode & 0o077 == 0`. The error's
    /// message names the path and the fault.
    public func check() throws(FileSystemError) {
        let status: stat
        do {
            status = try fileStatus(path, followingSymlinks: false)
        } catch {
            throw FileSystemError(error)
        }
        let kind = status.st_mode & S_IFMT
        if kind == S_IFLNK {
            throw Self.refusal(ELOOP, path, "the runtime directory \(path) is a symbolic link; it must be a directory of its own, not a link to one")
        }
        guard kind == S_IFDIR else {
            throw Self.refusal(ENOTDIR, path, "the runtime directory \(path) is not a directory")
        }
        let user = geteuid()
        guard status.st_uid == user else {
            throw Self.refusal(EPERM, path, "the runtime directory \(path) is owned by uid \(status.st_uid), not \(user)")
        }
        let mode = status.st_mode & 0o7777
        guard mode & 0o077 == 0 else {
            throw Self.refusal(EACCES, path, "the runtime directory \(path) has mode \(Self.octal(mode)): group or others can enter it; it must be 0700")
        }
    }

    /// Takes the daemon's liveness lock: `daemon.lock` opened `O_RDWR | O_CREAT | O_CLOEXEC |
    /// O_NOFOLLOW`, 0600, and `flock(LOCK_EX | LOCK_NB)`. Taken: the file then holds this process's
    /// id and a line feed, and the lock lasts as long as the answer. Held by another open file
    /// (another daemon, or another acquisition in this process): answers the id the holder wrote,
    /// when it has written one (it writes it right after taking the lock, so a reader retries for a
    /// moment).
    public func acquireLock() throws(FileSystemError) -> DaemonLock.Acquisition {
        do throws(SystemCallError) {
            let descriptor = try Descriptor.open(
                lockPath, .readWrite, options: [.create, .noFollow], permissions: FilePermissions(rawValue: 0o600))
            guard try descriptor.tryLockExclusive(path: lockPath) else {
                var holder: Int32? = nil
                for attempt in 0..<100 {
                    holder = Self.readProcessID(descriptor)
                    if holder != nil { break }
                    if attempt < 99 { usleep(10_000) }
                }
                return .held(by: holder)
            }
            try descriptor.truncate(to: 0, path: lockPath)
            let file = descriptor.unowned
            let path = lockPath
            try Array("\(getpid())\n".utf8).withUnsafeBytes { bytes in
                Result { () throws(SystemCallError) in try writeAll(bytes, to: file, at: 0, path: path) }
            }.get()
            return .acquired(DaemonLock(path: lockPath, descriptor: descriptor))
        } catch {
            throw FileSystemError(error)
        }
    }

    /// The process id written in the lock file, if it holds a whole one.
    static func readProcessID(_ descriptor: borrowing Descriptor) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { bytes in
            (try? readSome(into: bytes, from: descriptor.unowned, at: 0)) ?? 0
        }
        let text = buffer[..<count]
        guard let end = text.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        return Int32(String(decoding: text[..<end], as: UTF8.self)).flatMap { $0 > 0 ? $0 : nil }
    }

    private static func refusal(_ number: Int32, _ path: String, _ message: String) -> FileSystemError {
        var error = FileSystemError(errno: number, syscall: "lstat", path: path)
        error.message = message
        return error
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// The daemon's liveness lock, held for as long as this value lives (the process's life: a daemon
/// that dies, however it dies, releases it).
public final class DaemonLock: Sendable {
    /// What ``RuntimeDirectory/acquireLock()`` found.
    public enum Acquisition: Sendable {
        /// This process is the daemon.
        case acquired(DaemonLock)
        /// Another daemon is alive: its process id, when it had written it.
        case held(by: Int32?)
    }

    public let path: String
    private let descriptor: Descriptor

    init(path: String, descriptor: consuming Descriptor) {
        self.path = path
        self.descriptor = descriptor
    }
}
