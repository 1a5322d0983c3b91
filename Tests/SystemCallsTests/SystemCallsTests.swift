import Synchronization
import SystemCalls
import SystemPackage
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether `raw` is an open descriptor of this process (`fcntl(F_GETFD)` answers EBADF otherwise).
private func isOpen(_ raw: Int32) -> Bool {
    if fcntl(raw, F_GETFD) != -1 { return true }
    #expect(errno == EBADF)
    return false
}

/// A value shared with another thread's closure (which cannot capture an `Atomic` or a `Mutex`).
private final class Cell<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func set(_ value: Value) { mutex.withLock { $0 = value } }
    func add(_ amount: Int) where Value == Int { mutex.withLock { $0 += amount } }
}

/// The text of a /proc file of the calling thread (`/proc/thread-self/<name>`), without its newline.
private func threadProcFile(_ name: String) -> String {
    let fd = open("/proc/thread-self/\(name)", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: 4096)
    let count = read(fd, &bytes, bytes.count)
    guard count > 0 else { return "" }
    var text = String(decoding: bytes[..<count], as: UTF8.self)
    if text.hasSuffix("\n") { text.removeLast() }
    return text
}

/// Descriptor tests reuse descriptor numbers on purpose, so they run one at a time.
@Suite(.serialized) struct DescriptorTests {
    @Test func closeReleasesTheNumber() throws {
        let descriptor = try Descriptor.open("/dev/null", .readOnly)
        let raw = descriptor.rawValue
        #expect(isOpen(raw))
        try descriptor.close()
        #expect(!isOpen(raw))
    }

    @Test func deinitClosesTheNumber() throws {
        var raw: Int32 = -1
        do {
            let descriptor = try Descriptor.open("/dev/null", .readOnly)
            raw = descriptor.rawValue
            #expect(isOpen(raw))
        }
        #expect(!isOpen(raw))
    }

    /// After `close()`, no deinit runs: a number reused by someone else stays open.
    @Test func closedDescriptorDoesNotCloseAReusedNumber() throws {
        let other = open("/dev/null", O_RDONLY | O_CLOEXEC)
        #expect(other >= 0)
        defer { close(other) }
        var raw: Int32 = -1
        do {
            let descriptor = try Descriptor.open("/dev/null", .readOnly)
            raw = descriptor.rawValue
            try descriptor.close()
            // The same number, given to another owner (as the next open of any thread could).
            #expect(dup2(other, raw) == raw)
        }
        #expect(isOpen(raw))
        close(raw)
    }

    /// `take()` hands the number out without closing it; the caller owns it then.
    @Test func takeHandsTheNumberOut() throws {
        var raw: Int32 = -1
        do {
            let descriptor = try Descriptor.open("/dev/null", .readOnly)
            raw = descriptor.take()
        }
        #expect(isOpen(raw))
        #expect(close(raw) == 0)
    }

    @Test func openErrorNamesErrnoCallAndPath() {
        #expect {
            _ = try Descriptor.open("/nonexistent-systemcalls-test/x", .readOnly)
        } throws: { error in
            guard let error = error as? SystemCallError else { return false }
            return error.errno == .noSuchFileOrDirectory && error.call == "open"
                && error.path == "/nonexistent-systemcalls-test/x"
                && error.description == #"open("/nonexistent-systemcalls-test/x"): No such file or directory (ENOENT)"#
        }
    }

    @Test func errorWithoutPath() {
        let error = SystemCallError(errno: .resourceTemporarilyUnavailable, call: "pthread_create")
        #expect(error.description == "pthread_create: Resource temporarily unavailable (EAGAIN)")
        #expect(SystemCallError(errno: Errno(rawValue: 4095), call: "x").errnoName == "E4095")
    }

    @Test func openRelativeToADirectory() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let base = try Descriptor.open(directory.path, .readOnly, options: .directory)
        let file = try Descriptor.open("f", .writeOnly, options: [.create, .exclusiveCreate],
                                       permissions: [.ownerReadWrite], relativeTo: base.unowned)
        try file.sync(path: "f")
        try file.close()
        #expect(unlinkat(base.rawValue, "f", 0) == 0)
        #expect(fcntl(base.rawValue, F_GETFD) & FD_CLOEXEC != 0)
    }
}

/// A signal handler that does nothing, installed without SA_RESTART, so that a blocking call the
/// signal interrupts fails with EINTR.
private func installInterruptingHandler(_ signal: Int32) {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in }
    action.sa_flags = 0
    sigemptyset(&action.sa_mask)
    precondition(sigaction(signal, &action, nil) == 0)
}

@Suite struct InterruptTests {
    /// A read blocked on an empty pipe is interrupted by signals (EINTR, seen by the counter) and
    /// retried until the byte comes.
    @Test func retryingInterruptsRetriesEINTR() throws {
        installInterruptingHandler(SIGUSR2)
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        let reading = Descriptor(owning: readEnd)
        let writing = Descriptor(owning: writeEnd)
        let readFD = reading.rawValue
        let interruptions = Cell(0)
        let thread = Cell<UInt>(0)
        let result = Cell(-2)
        let reader = try startJoinableThread(name: "sc-eintr") {
            // A new thread inherits its creator's signal mask, and the test runs on a Dispatch
            // worker thread, which blocks most signals.
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
            thread.set(UInt(pthread_self()))
            var byte: UInt8 = 0
            let count = try? retryingInterrupts("read") { () -> Int in
                let count = read(readFD, &byte, 1)
                if count == -1 && errno == EINTR { interruptions.add(1) }
                return count
            }
            result.set(count ?? -1)
        }
        let running = waitUntilSync { thread.value != 0 }
        #expect(running)
        let interrupted = waitUntilSync {
            // Signalled again at each look (every 2 ms) until a read has been interrupted.
            pthread_kill(pthread_t(thread.value), SIGUSR2)
            return interruptions.value > 0
        }
        #expect(interrupted, "the read was never interrupted")
        var byte: UInt8 = 7
        #expect(write(writing.rawValue, &byte, 1) == 1)
        reader.join()
        #expect(result.value == 1)
    }
}

@Suite struct ThreadTests {
    @Test func startThreadNamesTheThreadAndSetsItsNiceValue() throws {
        let name = Cell("")
        let nice = Cell("")
        let policy = Cell<Int32>(-1)
        let thread = try startJoinableThread(name: "sc-named-thread-long", niceness: 7) {
            name.set(threadProcFile("comm"))
            // Field 19 of /proc/thread-self/stat: the 17th after the parenthesised name.
            let stat = threadProcFile("stat")
            let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
            nice.set(String(fields[16]))
            policy.set(sched_getscheduler(0))
        }
        thread.join()
        #expect(name.value == "sc-named-thread")  // Linux keeps 15 bytes
        #expect(nice.value == "7")
        #expect(policy.value == SCHED_OTHER)
    }

    @Test func idleThreadRunsAtSchedIdle() throws {
        let policy = Cell<Int32>(-1)
        let thread = try startJoinableThread(name: "sc-idle", idle: true) {
            policy.set(sched_getscheduler(0))
        }
        thread.join()
        #expect(policy.value == 5)  // SCHED_IDLE
    }

    @Test func detachedThreadRuns() throws {
        let ran = Cell(false)
        try startThread(name: "sc-detached") { ran.set(true) }
        let done = waitUntilSync { ran.value }
        #expect(done)
    }

    @Test func isCurrentOnlyOnTheThread() throws {
        let inside = Cell(false)
        let box = Cell<JoinableThread?>(nil)
        let thread = try startJoinableThread(name: "sc-current") {
            _ = waitUntilSync { box.value != nil }
            inside.set(box.value!.isCurrent)
        }
        box.set(thread)
        #expect(!thread.isCurrent)
        thread.join()
        #expect(inside.value)
    }
}

@Suite struct DirectoryFlushTests {
    @Test func flushesADirectory() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try flushDirectory(at: directory.path)
        let opened = try Descriptor.open(directory.path, .readOnly, options: .directory)
        try flushDirectory(opened, path: directory.path)
        let slash = directory.path.lastIndex(of: "/")!
        let parent = try Descriptor.open(String(directory.path[..<slash]), .readOnly, options: .directory)
        try flushDirectory(at: String(directory.path[directory.path.index(after: slash)...]), relativeTo: parent.unowned)
    }

    @Test func aFileIsNotADirectory() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let file = try directory.write("file", [])
        #expect(throws: SystemCallError(errno: .notDirectory, call: "open", path: file)) {
            try flushDirectory(at: file)
        }
    }

    @Test func aMissingPath() {
        #expect(throws: SystemCallError(errno: .noSuchFileOrDirectory, call: "open", path: "/nonexistent-systemcalls-test")) {
            try flushDirectory(at: "/nonexistent-systemcalls-test")
        }
    }
}

@Suite struct DurableReplacementTests {
    @Test func replacesAFileAndLeavesNoTemp() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("f", "old")
        let staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-", permissions: [.ownerReadWrite, .groupRead])
        let tempPath = staged.tempPath
        #expect(tempPath.hasPrefix(directory.path + "/.test-save-"))
        try staged.write(Array("new".utf8))
        let durable = try staged.commit(as: "f")
        #expect(durable)
        #expect(try directory.contents("f") == Array("new".utf8))
        #expect(access(tempPath, F_OK) != 0)
        let status = try fileStatus(directory.file("f"))
        #expect(status.st_mode & 0o777 == 0o640)
    }

    @Test func withoutReplaceAnExistingFileStays() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("f", [])
        let staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
        let tempPath = staged.tempPath
        try staged.write(Array("new".utf8))
        // (Not #expect(throws:): its closure would have to consume the non-copyable value.)
        var thrown: SystemCallError?
        do {
            _ = try staged.commit(as: "f", replace: false)
        } catch {
            thrown = error
        }
        #expect(thrown == SystemCallError(errno: .fileExists, call: "renameat2", path: directory.file("f")))
        #expect(try directory.contents("f") == [])
        #expect(access(tempPath, F_OK) != 0)
    }

    @Test func droppedBeforeCommitTheTempGoes() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        var tempPath = ""
        do {
            let staged = try DurableReplacement(in: directory.path, tempPrefix: ".test-save-")
            tempPath = staged.tempPath
            #expect(access(tempPath, F_OK) == 0)
        }
        #expect(access(tempPath, F_OK) != 0)
    }

    @Test func aMissingDirectory() {
        #expect(throws: SystemCallError(errno: .noSuchFileOrDirectory, call: "open", path: "/nonexistent-systemcalls-test")) {
            _ = try DurableReplacement(in: "/nonexistent-systemcalls-test", tempPrefix: ".x-")
        }
    }
}

@Suite struct ReadWriteTests {
    /// A pipe's two raw ends (read, write), each wrapped in a Descriptor by the test at once.
    private func makePipe() throws -> (reader: Int32, writer: Int32) {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        return (ends[0], ends[1])
    }

    @Test("writeAll writes past the pipe's buffer and readToEnd reads it all back, in order")
    func writeAllAndReadToEnd() throws {
        let ends = try makePipe()
        let reader = Descriptor(owningRawValue: ends.reader)
        // Four times the default pipe buffer (64 KiB): the write blocks until the reader drains.
        let bytes = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let failure = Cell<String?>(nil)
        try startThread(name: "test-writer") {
            let writer = Descriptor(owningRawValue: ends.writer)
            do throws(SystemCallError) { try writeAll(bytes, to: writer.unowned) } catch { failure.set("\(error)") }
        }
        let read = try readToEnd(from: reader.unowned)
        #expect(failure.value == nil)
        #expect(read == bytes)
    }

    @Test("a write to a pipe with no reader is EPIPE, naming write and the path given")
    func writeToAClosedPipe() throws {
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        let ends = try makePipe()
        try Descriptor(owningRawValue: ends.reader).close()
        let writer = Descriptor(owningRawValue: ends.writer)
        #expect(throws: SystemCallError(errno: .brokenPipe, call: "write", path: "the pipe")) {
            try writeAll([1, 2, 3], to: writer.unowned, path: "the pipe")
        }
    }

    @Test("pollDescriptors answers 0 on the timeout and 1 once the pipe is readable")
    func pollTimesOutThenSeesData() throws {
        let ends = try makePipe()
        let reader = Descriptor(owningRawValue: ends.reader)
        let writer = Descriptor(owningRawValue: ends.writer)
        var entries = [pollfd(fd: reader.rawValue, events: Int16(POLLIN), revents: 0)]
        #expect(try pollDescriptors(&entries, timeoutMilliseconds: 0) == 0)
        try writeAll([42], to: writer.unowned)
        #expect(try pollDescriptors(&entries, timeoutMilliseconds: -1) == 1)
        #expect(entries[0].revents & Int16(POLLIN) != 0)
        var byte: [UInt8] = [0]
        let count = try byte.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in try readSome(into: buffer, from: reader.unowned) }
        }.get()
        #expect(count == 1 && byte == [42])
    }
}
