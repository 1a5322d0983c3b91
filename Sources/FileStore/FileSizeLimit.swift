import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The largest file the server reads whole (issue 34.8): a document's file at its open, the
/// watcher's reload, a revert, a kept version (`document/readVersion`), a package's entry. A file
/// over it is refused after `fstat`, before a byte is read, with EFBIG naming its size and the
/// limit (``refusal(size:path:syscall:limit:)``), instead of the allocation failing (an 8 GB
/// sparse file under a 3 GB address-space limit aborted the server).
///
/// One value per process: `--max-file-size` sets it, and `initializationOptions.maxFileSize` of
/// the client that owns the store's settings (a daemon's first); by default it is derived from the
/// memory the process may use (``defaultBytes``).
public enum FileSizeLimit {
    private static let current = Atomic<Int>(defaultBytes)

    /// A quarter of the least of: the memory available when the process started (`MemAvailable`
    /// of /proc/meminfo, else the physical memory) and its address-space and data-segment limits
    /// (`RLIMIT_AS`, `RLIMIT_DATA`); at least 16 MiB. A quarter: a file's text is held once as the
    /// document's, and a load, a reload compared with the text it replaces, or a save's encoding
    /// briefly hold it twice more.
    public static let defaultBytes: Int = {
        var memory = availableMemory() ?? physicalMemory() ?? Int.max
        for resource in [RLIMIT_AS, RLIMIT_DATA] {
            var limit = rlimit()
            // `__rlimit_resource_t` on glibc.
            if getrlimit(__rlimit_resource_t(resource.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
                memory = min(memory, Int(clamping: limit.rlim_cur))
            }
        }
        return max(memory / 4, 16 << 20)
    }()

    /// The limit in force, in bytes.
    public static var bytes: Int { current.load(ordering: .relaxed) }

    /// Sets the limit (at least 1 byte).
    public static func set(_ bytes: Int) {
        current.store(max(bytes, 1), ordering: .relaxed)
    }

    /// Refuses a file of `size` bytes over `limit` (by default the limit in force): nil when it fits.
    public static func refusal(size: Int, path: String, syscall: String = "fstat", limit: Int = bytes) -> FileSystemError? {
        guard size > limit else { return nil }
        var error = FileSystemError(
            errno: EFBIG, syscall: syscall, path: path,
            reason: "the file is \(size) bytes (\(describe(size))), more than the server's limit of \(limit) bytes (\(describe(limit)); --max-file-size, initializationOptions.maxFileSize)")
        error.size = Int64(size)
        error.limit = Int64(limit)
        return error
    }

    /// `size` in the largest binary unit that keeps it at 1 or more, one decimal.
    static func describe(_ size: Int) -> String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(size), unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(size) bytes" }
        return "\((value * 10).rounded() / 10) \(units[unit])"
    }

    private static func availableMemory() -> Int? {
        guard let file = fopen("/proc/meminfo", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(cString: line)
            guard text.hasPrefix("MemAvailable:") else { continue }
            let digits = text.dropFirst("MemAvailable:".count).filter { $0.isNumber }
            return Int(digits).map { $0 * 1024 }
        }
        return nil
    }

    private static func physicalMemory() -> Int? {
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), size = sysconf(Int32(_SC_PAGESIZE))
        return pages > 0 && size > 0 ? pages * size : nil
    }
}
