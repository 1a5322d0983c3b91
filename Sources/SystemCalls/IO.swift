import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

// Reading and writing descriptors: the one write-all loop, the one read loop, and `poll`, each
// retrying EINTR and throwing a SystemCallError that names the call and, when given, the path.

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
