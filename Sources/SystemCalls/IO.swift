import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Reading and writing descriptors: the one write-all loop, the one read loop, their positional
// forms (`pread`, `pwrite`, `pwritev`), and `poll`, each retrying EINTR and throwing a
// SystemCallError that names the call and, when given, the path.

/// Writes all of `bytes` to `descriptor`, retrying `EINTR` and short writes. A descriptor in
/// non-blocking mode that would block throws `EAGAIN`, some of the bytes written (a caller that
/// waits and goes on loops over ``writeSome(_:to:path:)`` and ``pollDescriptor(_:events:timeoutMilliseconds:)``
/// itself, as JSONRPC's `FileDescriptorIO` does).
public func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: FileDescriptor, path: String? = nil) throws(SystemCallError) {
    var offset = 0
    while offset < bytes.count {
        offset += try writeSome(UnsafeRawBufferPointer(rebasing: bytes[offset...]), to: descriptor, path: path)
    }
}

/// Writes all of `bytes` (an array or other contiguous collection) to `descriptor`; see
/// ``writeAll(_:to:path:)-(UnsafeRawBufferPointer,_,_)``.
public func writeAll(_ bytes: some Collection<UInt8>, to descriptor: FileDescriptor, path: String? = nil) throws(SystemCallError) {
    let result: Result<Void, SystemCallError>? = bytes.withContiguousStorageIfAvailable { buffer in
        Result { () throws(SystemCallError) in try writeAll(UnsafeRawBufferPointer(buffer), to: descriptor, path: path) }
    }
    if let result { return try result.get() }
    try Array(bytes).withUnsafeBytes { buffer in
        Result { () throws(SystemCallError) in try writeAll(buffer, to: descriptor, path: path) }
    }.get()
}

/// One `write` of as much of `bytes` as the descriptor takes, retrying `EINTR`: the count written
/// (at least 1 for a non-empty buffer). `EAGAIN` on a non-blocking descriptor is thrown.
public func writeSome(_ bytes: UnsafeRawBufferPointer, to descriptor: FileDescriptor, path: String? = nil) throws(SystemCallError) -> Int {
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
    return try retryingInterrupts("write", path: path) { Glibc.write(descriptor.rawValue, base, bytes.count) }
}

/// One `read` into `buffer`, retrying `EINTR`: the count read, 0 at the end of the file. `EAGAIN`
/// on a non-blocking descriptor is thrown.
public func readSome(into buffer: UnsafeMutableRawBufferPointer, from descriptor: FileDescriptor, path: String? = nil) throws(SystemCallError) -> Int {
    guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
    return try retryingInterrupts("read", path: path) { Glibc.read(descriptor.rawValue, base, buffer.count) }
}

/// Reads `descriptor` to its end (a pipe until every writer has closed it), retrying `EINTR`.
public func readToEnd(from descriptor: FileDescriptor, path: String? = nil) throws(SystemCallError) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = try chunk.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in try readSome(into: buffer, from: descriptor, path: path) }
        }.get()
        if count == 0 { return bytes }
        bytes.append(contentsOf: chunk[0..<count])
    }
}

/// `poll` on `descriptors` for at most `timeoutMilliseconds` (-1: without a limit): the number of
/// entries with events in `revents`, 0 on the timeout. An `EINTR` is retried with the whole timeout
/// again (the callers wait for readiness in a loop that re-checks its own deadline).
public func pollDescriptors(_ descriptors: inout [pollfd], timeoutMilliseconds: Int32) throws(SystemCallError) -> Int {
    let count = nfds_t(descriptors.count)
    return Int(try descriptors.withUnsafeMutableBufferPointer { (entries) throws(SystemCallError) in
        try retryingInterrupts("poll") { poll(entries.baseAddress, count, timeoutMilliseconds) }
    })
}

/// `poll` on the one descriptor `descriptor` for `events` (`POLLIN`, `POLLOUT`) for at most
/// `timeoutMilliseconds` (-1: without a limit, 0: a look without waiting): the events that occurred
/// (`revents`, which may hold `POLLHUP`, `POLLERR` or `POLLNVAL` too), 0 on the timeout. An `EINTR`
/// is retried with the whole timeout again. Allocates nothing.
public func pollDescriptor(_ descriptor: FileDescriptor, events: Int16, timeoutMilliseconds: Int32) throws(SystemCallError) -> Int16 {
    var entry = pollfd(fd: descriptor.rawValue, events: events, revents: 0)
    _ = try retryingInterrupts("poll") { poll(&entry, 1, timeoutMilliseconds) }
    return entry.revents
}

// Positional reads and writes (`pread`, `pwrite`, `pwritev`): at an offset, leaving the file
// offset alone, so that two threads may read one descriptor at once (the parallel load).

/// One `pread` into `buffer` at `offset`, retrying `EINTR`: the count read (fewer than asked near
/// the end of the file), 0 at or past its end.
public func readSome(into buffer: UnsafeMutableRawBufferPointer, from descriptor: FileDescriptor, at offset: Int64, path: String? = nil) throws(SystemCallError) -> Int {
    guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
    return try retryingInterrupts("pread", path: path) { pread(descriptor.rawValue, base, buffer.count, off_t(offset)) }
}

/// Fills `buffer` from `offset` with `pread`, retrying `EINTR` and short reads: the count read,
/// which is less than `buffer.count` only when the end of the file came first.
public func readFully(into buffer: UnsafeMutableRawBufferPointer, from descriptor: FileDescriptor, at offset: Int64, path: String? = nil) throws(SystemCallError) -> Int {
    var count = 0
    while count < buffer.count {
        let got = try readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]), from: descriptor, at: offset + Int64(count), path: path)
        if got == 0 { break }
        count += got
    }
    return count
}

/// Writes all of `bytes` at `offset` with `pwrite`, retrying `EINTR` and short writes.
public func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: FileDescriptor, at offset: Int64, path: String? = nil) throws(SystemCallError) {
    guard let base = bytes.baseAddress else { return }
    var done = 0
    while done < bytes.count {
        done += try retryingInterrupts("pwrite", path: path) {
            pwrite(descriptor.rawValue, base + done, bytes.count - done, off_t(offset + Int64(done)))
        }
    }
}

/// Writes `pieces`, in order and without copying them, at `offset` with `pwritev` (at most
/// `IOV_MAX`, 1,024, pieces a call), retrying `EINTR` and short writes: the bytes written, their
/// total. Empty pieces are skipped.
public func writeAll(_ pieces: [[UInt8]], to descriptor: FileDescriptor, at offset: Int64, path: String? = nil) throws(SystemCallError) -> Int {
    let total = pieces.reduce(0) { $0 + $1.count }
    try withExtendedLifetime(pieces) { () throws(SystemCallError) in
        var vectors: [iovec] = []
        vectors.reserveCapacity(pieces.count)
        for piece in pieces where !piece.isEmpty {
            // The storage of an array that `pieces` keeps alive and unchanged meanwhile.
            let base = piece.withUnsafeBufferPointer { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
            vectors.append(iovec(iov_base: base, iov_len: piece.count))
        }
        var first = 0
        var written = 0
        while first < vectors.count {
            let wrote = try vectors.withUnsafeBufferPointer { (all) throws(SystemCallError) in
                let count = Int32(min(all.count - first, maximumVectorCount))
                return try retryingInterrupts("pwritev", path: path) {
                    pwritev(descriptor.rawValue, all.baseAddress! + first, count, off_t(offset + Int64(written)))
                }
            }
            written += wrote
            // Skip the pieces written whole; trim the one written in part.
            var left = wrote
            while first < vectors.count && left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base += left
                vectors[first].iov_len -= left
            }
        }
    }
    return total
}

/// The most pieces one `pwritev` takes (Linux's `IOV_MAX`, which Glibc's module does not export).
private let maximumVectorCount = 1024
