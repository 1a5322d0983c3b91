import SystemCalls

/// The server's one setting of glibc's allocator.
///
/// Every message costs json-c some fifty small allocations of a handful of sizes (a json-c object
/// and a 16-entry hash table per JSON object, a copy of every member name), all freed when the
/// message is done. glibc's per-thread cache keeps 7 freed blocks per size by default; the rest
/// go back through the arena, where allocating and freeing cost several times more (a third of
/// the server's processor time per edit went to malloc and free). With more blocks per size the
/// cache holds a whole message's worth: measured with 128, 21.9 → 21.1 µs per synchronous edit and
/// 11.8 → 10.2 µs pipelined (Benchmarks/README.md).
///
/// 32, not 128: each thread keeps a cache of its own, full at up to `count` blocks of each of 64
/// sizes (24 to 1,032 bytes): 4.2 MiB a thread at 128, 1.1 MiB at 32. Under the load soak the
/// caches filled one by one and the server's RSS rose through the whole run (Tests/soak/README.md,
/// finding 7). Measured again on 28 November (`ProtocolRatios --trace automerge-paper`, five runs
/// each, medians): 7 blocks 17.4 µs synchronous, 9.5 µs pipelined; 32 blocks 17.4 and 8.8; 128
/// blocks 17.6 and 8.9. A message's allocations need more than 7 per size, not more than 32.
///
/// The cache's size can only be set from the environment before the process starts
/// (`GLIBC_TUNABLES=glibc.malloc.tcache_count=N`), so `serve` re-executes itself once with it.
public enum MallocTuning {
    /// Blocks per size kept in each thread's cache.
    public static let threadCacheCount: Int32 = 32

    /// Re-executes the process (the same arguments, the same descriptors, the same process id)
    /// with the larger thread cache, unless `GLIBC_TUNABLES` already sets one (the user's choice,
    /// or this process after its re-execution). Call it first, before anything is read or opened.
    /// Answers only when it did not re-execute: when the setting was already there, or when the
    /// exec failed (no /proc, say), and the server then runs with glibc's default.
    public static func reexecWithLargerThreadCache() {
        try? reexecutingWithMallocThreadCache(threadCacheCount)
    }
}
