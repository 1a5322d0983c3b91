import CFileSystem
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Locks per file across processes (issue 19.3): every save of a file takes an exclusive lock on a
/// lock file of its own under the user's runtime directory (`<runtime>/locks/<hash of the path>`),
/// and `docsession coordinate` takes one for as long as its command runs (exclusive to write,
/// delete or move the file; shared to read it). So two servers that are not the daemon (two
/// editors, each with its own stdio server) never interleave saves of one file, and none writes
/// while a coordinated command works on it.
///
/// They are open file description locks (`F_OFD_SETLK`): they belong to a descriptor, not to the
/// process, so two saves on two threads of one server exclude each other too, and a process that
/// dies lets go of its locks with its descriptors. The lock files are never removed (removing one
/// while another process waits on its descriptor would let a third lock a new file of the same
/// name); they are empty, one per file ever saved, on the runtime directory's tmpfs, which the
/// system empties at logout.
public struct FileLocks: Sendable {
    /// The directory of lock files (`<runtime directory>/locks`), made 0700 when missing.
    public let directory: String

    /// Locks under `runtimeDirectory/locks` (both made 0700 if missing; the runtime directory's
    /// parent must exist). The failure, with why, when either cannot be made or is not a directory
    /// of this user's that only they may enter (``RuntimeDirectory/privateSubdirectory(_:)``).
    public static func open(runtimeDirectory: String) -> Result<FileLocks, FileSystemError> {
        do throws(FileSystemError) {
            return .success(FileLocks(directory: try RuntimeDirectory(path: runtimeDirectory).privateSubdirectory("locks")))
        } catch {
            return .failure(error)
        }
    }

    /// Makes `path` with mode 0700 when missing (its parent must exist) and checks that it is a
    /// directory (not a link) of this user that only they may enter; nil, or what is wrong.
    public static func makePrivateDirectory(_ path: String) -> FileSystemError? {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            return FileSystemError(errno: errno, syscall: "mkdir", path: path)
        }
        var status = stat()
        guard lstat(path, &status) == 0 else { return FileSystemError(errno: errno, syscall: "lstat", path: path) }
        guard status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid(), status.st_mode & 0o077 == 0 else {
            return FileSystemError(
                errno: EPERM, syscall: "lstat", path: path,
                reason: "not a directory of uid \(geteuid()) with mode 0700 (found mode \(String(status.st_mode & 0o7777, radix: 8)), uid \(status.st_uid))")
        }
        return nil
    }

    /// The lock file of the file at `path` (an absolute path, symlinks resolved): its name is the
    /// hash of the path's bytes, so every process finds the same one.
    public func lockPath(for path: String) -> String {
        directory + "/" + String(ContentHasher.hash(Array(path.utf8)), radix: 16) + ".lock"
    }

    /// A lock held: released when released or dropped (its descriptor closed).
    public final class Held: @unchecked Sendable {
        // @unchecked: the descriptor is set once and closed once, under the release's check.
        private var descriptor: Int32
        /// The file it is the lock of (the path it was asked for).
        public let path: String
        init(descriptor: Int32, path: String) { (self.descriptor, self.path) = (descriptor, path) }
        public func release() {
            guard descriptor >= 0 else { return }
            Glibc.close(descriptor)
            descriptor = -1
        }
        deinit { release() }
    }

    /// A lock asked for and found held by another: its lock file stays open for the next try, which
    /// never blocks (``tryAgain()``), so that a wait needs no thread of its own (``wait(interval:longest:isCancelled:)``).
    public final class Pending: @unchecked Sendable {
        // @unchecked: one waiter tries at a time; the descriptor goes to the lock once taken.
        private var descriptor: Int32
        public let path: String
        let exclusive: Bool
        let file: String
        init(descriptor: Int32, path: String, exclusive: Bool, file: String) {
            (self.descriptor, self.path, self.exclusive, self.file) = (descriptor, path, exclusive, file)
        }
        deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

        /// Tries once more (`F_OFD_SETLK`, which never waits): the lock, or nil while it is held.
        /// Once it answered a lock it answers no other.
        public func tryAgain() throws(FileSystemError) -> Held? {
            guard descriptor >= 0 else { return nil }
            if cfs_ofd_lock(descriptor, exclusive ? 1 : 0) == 0 {
                defer { descriptor = -1 }
                return Held(descriptor: descriptor, path: path)
            }
            let number = errno
            guard number == EAGAIN else {
                Glibc.close(descriptor)
                descriptor = -1
                throw FileSystemError(errno: number, syscall: "fcntl(F_OFD_SETLK)", path: file)
            }
            return nil
        }

        /// Waits for the lock without holding a thread: tries, and sleeps as a task between tries,
        /// so that saves waiting for other processes' locks leave the pooled threads to other work.
        /// The pause starts at `interval` and doubles up to `longest`: a lock held for a moment
        /// (another server's save) is taken within milliseconds, one held for a long command costs
        /// 20 wake-ups a second, not 200. nil once `isCancelled` answers true (or the task is
        /// cancelled).
        public func wait(
            interval: Duration = .milliseconds(5), longest: Duration = .milliseconds(50),
            isCancelled: @Sendable () -> Bool = { false }
        ) async throws(FileSystemError) -> Held? {
            var pause = interval
            while true {
                if let held = try tryAgain() { return held }
                if isCancelled() || Task.isCancelled { return nil }
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, max(interval, longest))
            }
        }
    }

    /// What one try at a lock found.
    public enum Attempt: Sendable {
        case held(Held)
        /// Another holds a conflicting lock; wait on this for it.
        case busy(Pending)
    }

    /// Tries once to take the lock of `path`'s file, without waiting (blocks only to open the
    /// lock file).
    public func attempt(_ path: String, exclusive: Bool) throws(FileSystemError) -> Attempt {
        let file = lockPath(for: path)
        let descriptor = Glibc.open(file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw FileSystemError(errno: errno, syscall: "open", path: file) }
        let pending = Pending(descriptor: descriptor, path: path, exclusive: exclusive, file: file)
        if let held = try pending.tryAgain() { return .held(held) }
        return .busy(pending)
    }

    /// Takes the lock of `path`'s file on the calling thread: waits (polling every `interval`, so
    /// that `isCancelled` is heard) while another process or thread holds a conflicting one;
    /// answers nil once `isCancelled` answers true. `waited` is told once, the first time it had
    /// to wait. (A save waits with ``Pending/wait(interval:longest:isCancelled:)`` instead, holding no
    /// thread.)
    public func lock(
        _ path: String, exclusive: Bool, interval: Duration = .milliseconds(5), isCancelled: () -> Bool = { false },
        waited: () -> Void = {}
    ) throws(FileSystemError) -> Held? {
        let pending: Pending
        switch try attempt(path, exclusive: exclusive) {
        case .held(let held): return held
        case .busy(let busy): pending = busy
        }
        let (seconds, attoseconds) = interval.components
        var toldOfWait = false
        while true {
            if isCancelled() { return nil }
            if !toldOfWait {
                toldOfWait = true
                waited()
            }
            var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            nanosleep(&pause, nil)
            if let held = try pending.tryAgain() { return held }
        }
    }
}
