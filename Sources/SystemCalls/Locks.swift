import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Advisory locks, data flushes and sizes for files the server keeps open while it writes them (the
// journal's: FileStore/JournalFile.swift).

extension Descriptor {
    /// Takes an exclusive `flock` on the open file without waiting: true when taken, false when
    /// another open file description holds a lock on it (`EWOULDBLOCK`). The lock lasts until this
    /// descriptor (and every duplicate of it) is closed: a process that dies, however it dies,
    /// releases it. `path` names the file in an error.
    public func tryLockExclusive(path: String? = nil) throws(SystemCallError) -> Bool {
        while true {
            if flock(rawValue, LOCK_EX | LOCK_NB) == 0 { return true }
            let number = Glibc.errno
            if number == EINTR { continue }
            if number == EWOULDBLOCK { return false }
            throw SystemCallError(errno: Errno(rawValue: number), call: "flock", path: path)
        }
    }

    /// Flushes the file's data (and the metadata needed to read it back: its size), not its times
    /// (`fdatasync`), retrying `EINTR`.
    public func syncData(path: String? = nil) throws(SystemCallError) {
        _ = try retryingInterrupts("fdatasync", path: path) { fdatasync(rawValue) }
    }

    /// Cuts the file to `length` bytes (`ftruncate`), retrying `EINTR`.
    public func truncate(to length: Int, path: String? = nil) throws(SystemCallError) {
        _ = try retryingInterrupts("ftruncate", path: path) { ftruncate(rawValue, off_t(length)) }
    }

    /// The file's size now (`fstat`).
    public func size(path: String? = nil) throws(SystemCallError) -> Int {
        var status = stat()
        _ = try retryingInterrupts("fstat", path: path) { fstat(rawValue, &status) }
        return Int(status.st_size)
    }

    /// Moves the file offset to the end (`lseek`); answers it.
    @discardableResult
    public func seekToEnd(path: String? = nil) throws(SystemCallError) -> Int {
        Int(try retryingInterrupts("lseek", path: path) { lseek(rawValue, 0, SEEK_END) })
    }
}
