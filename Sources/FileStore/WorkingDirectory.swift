import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A server's private directory for the working copies of managed documents' stores (issue 18.2),
/// made when its first managed document is opened:
/// `<state dir>/managed/server-XXXXXX/` (or `$TMPDIR/docsession-managed-XXXXXX/` without a state
/// directory), mode 0700, flat (files only). The server holds an `flock` on its `lock` file for its
/// whole life, so a directory whose lock can be taken is a dead server's: opening sweeps those
/// (the working copies of a server that died are copies of published stores plus unsaved changes
/// that die with it; the journal does not cover managed documents yet).
public final class ManagedWorkingDirectory: Sendable {
    public let path: String
    private let lock: Descriptor

    private init(path: String, lock: consuming Descriptor) {
        self.path = path
        self.lock = lock
    }

    /// Makes this server's directory (sweeping dead servers' first).
    public static func open(stateDirectory: String?) throws(FileSystemError) -> ManagedWorkingDirectory {
        let parent: String
        let prefix: String
        if let stateDirectory {
            parent = stateDirectory + "/managed"
            if mkdir(parent, 0o700) != 0 && errno != EEXIST {
                throw FileSystemError(errno: errno, syscall: "mkdir", path: parent)
            }
            prefix = "server-"
            sweep(parent, prefix: prefix)
        } else {
            let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
            parent = temporary.isEmpty ? "/tmp" : temporary
            prefix = "docsession-managed-"
            sweep(parent, prefix: prefix)
        }
        do throws(SystemCallError) {
            let path = try makeTemporaryDirectory(prefix: parent + "/" + prefix)
            let lock = try Descriptor.open(path + "/lock", .readWrite, options: [.create, .exclusiveCreate, .noFollow], permissions: [.ownerReadWrite])
            _ = try lock.tryLockExclusive(path: path + "/lock")
            return ManagedWorkingDirectory(path: path, lock: lock)
        } catch {
            throw FileSystemError(error)
        }
    }

    /// Removes the directory (the server's exit; its documents are closed).
    public func remove() {
        Self.removeFlat(path)
    }

    /// Removes the directories under `parent` named `prefix…` whose lock no live server holds.
    static func sweep(_ parent: String, prefix: String) {
        for name in list(parent) where name.hasPrefix(prefix) {
            let directory = parent + "/" + name
            guard let lock = try? Descriptor.open(directory + "/lock", .readWrite, options: [.noFollow]) else {
                // No lock file: a directory made but never locked (killed in between), or not ours.
                if list(directory).isEmpty { rmdir(directory) }
                continue
            }
            if (try? lock.tryLockExclusive()) == true { removeFlat(directory) }
        }
    }

    /// The names in a directory (not `.` and `..`).
    static func list(_ directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes a directory of files (no subdirectories are made in it).
    static func removeFlat(_ directory: String) {
        for name in list(directory) { unlink(directory + "/" + name) }
        rmdir(directory)
    }
}
