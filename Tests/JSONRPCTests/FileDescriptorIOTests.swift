import Synchronization
import SystemCalls
import SystemPackage
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// A value shared with another thread's closure.
private final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func set(_ value: Value) { mutex.withLock { $0 = value } }
}

/// A pipe's two raw ends (read, write), each wrapped in a Descriptor by the test at once;
/// O_NONBLOCK set on the ones asked for.
private func makePipe(nonBlockingReader: Bool = false, nonBlockingWriter: Bool = false) throws -> (reader: Int32, writer: Int32) {
    var ends: [Int32] = [0, 0]
    try #require(pipe(&ends) == 0)
    if nonBlockingReader { try #require(fcntl(ends[0], F_SETFL, O_NONBLOCK) == 0) }
    if nonBlockingWriter { try #require(fcntl(ends[1], F_SETFL, O_NONBLOCK) == 0) }
    return (ends[0], ends[1])
}

/// fcntl's F_GETPIPE_SZ (linux/fcntl.h), which Glibc's module declares only under _GNU_SOURCE.
private let getPipeSize: Int32 = 1024 + 8

/// The state letter of thread `tid` of this process (`R`, `S`, ...), from /proc.
private func threadState(_ tid: Int32) -> Character? {
    guard let file = try? Descriptor.open("/proc/self/task/\(tid)/stat", .readOnly),
        let bytes = try? readToEnd(from: file.unowned)
    else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    guard let close = text.lastIndex(of: ")") else { return nil }
    return text[text.index(after: close)...].first { $0 != " " }
}

/// The protocol's pipes as a parent may hand them over: left non-blocking (`EAGAIN` is waited on,
/// not an error), or closed by the peer (`EPIPE` answers false).
@Suite struct FileDescriptorIOTests {
    @Test("writeAll to a non-blocking pipe that fills waits until the reader drains it, and writes every byte in order")
    func writeAllWaitsOnAFullNonBlockingPipe() throws {
        let ends = try makePipe(nonBlockingWriter: true)
        let reader = Descriptor(owningRawValue: ends.reader)
        let writer = Descriptor(owningRawValue: ends.writer)
        let capacity = Int(fcntl(reader.rawValue, getPipeSize))
        try #require(capacity > 0)
        let bytes = (0..<(capacity * 8)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let readerFD = reader.rawValue
        let received = Shared<[UInt8]?>(nil)
        let drainer = try startJoinableThread(name: "test-drain") {
            // Only once the pipe is full: the writer has then met EAGAIN, whatever the timing.
            var queued: Int32 = 0
            while ioctl(readerFD, UInt(FIONREAD), &queued) == 0, Int(queued) < capacity { sched_yield() }
            received.set(try? readToEnd(from: FileDescriptor(rawValue: readerFD)))
        }
        let written = FileDescriptorIO.writeAll(writer.rawValue, bytes)
        try writer.close()
        drainer.join()
        #expect(written)
        // (Compared first, so that a failure does not print half a megabyte.)
        let whole = received.value == bytes
        #expect(received.value?.count == bytes.count)
        #expect(whole, "the bytes read differ from those written")
    }

    @Test("read on a non-blocking pipe with nothing in it waits for the bytes instead of failing")
    func readWaitsOnAnEmptyNonBlockingPipe() throws {
        let ends = try makePipe(nonBlockingReader: true)
        let reader = Descriptor(owningRawValue: ends.reader)
        let writer = Descriptor(owningRawValue: ends.writer)
        let readerFD = reader.rawValue
        let tid = Shared<Int32>(0)
        let result = Shared<[UInt8]?>(nil)
        let finished = Shared(false)
        let readerThread = try startJoinableThread(name: "test-read") {
            // "PID/task/TID": the thread's own id, which Glibc's module does not declare gettid for.
            tid.set((try? readLink("/proc/thread-self")).flatMap { $0.split(separator: "/").last.flatMap { Int32($0) } } ?? -1)
            var buffer = [UInt8](repeating: 0, count: 16)
            let count = FileDescriptorIO.read(readerFD, into: &buffer)
            result.set(count.map { Array(buffer[..<$0]) })
            finished.set(true)
        }
        // Written once the reader sleeps (in poll, after its read met EAGAIN), unless its read
        // has already given up (then the result is nil and the test fails, without hanging).
        while !finished.value, tid.value == 0 || (tid.value > 0 && threadState(tid.value) != "S") { sched_yield() }
        try writeAll([1, 2, 3], to: writer.unowned)
        readerThread.join()
        #expect(result.value == [1, 2, 3])
    }

    @Test("at the end of input, read answers 0 (into a buffer) and an empty array (by capacity)")
    func endOfInput() throws {
        let ends = try makePipe()
        let reader = Descriptor(owningRawValue: ends.reader)
        let writer = Descriptor(owningRawValue: ends.writer)
        try writeAll([7], to: writer.unowned)
        try writer.close()
        #expect(FileDescriptorIO.read(reader.rawValue, capacity: 16) == [7])
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(FileDescriptorIO.read(reader.rawValue, into: &buffer) == 0)
        #expect(FileDescriptorIO.read(reader.rawValue, capacity: 16) == [])
    }

    @Test("writeAll answers false once the reader is gone (EPIPE), and read answers nil on a descriptor it cannot read")
    func errors() throws {
        try ignoreSignal(SIGPIPE)  // as the server and the end-to-end tests do
        let ends = try makePipe()
        let reader = Descriptor(owningRawValue: ends.reader)
        let writer = Descriptor(owningRawValue: ends.writer)
        try reader.close()
        #expect(!FileDescriptorIO.writeAll(writer.rawValue, [1, 2, 3]))
        // The write end of a pipe cannot be read: EBADF.
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(FileDescriptorIO.read(writer.rawValue, into: &buffer) == nil)
        #expect(FileDescriptorIO.read(writer.rawValue) == nil)
    }
}
