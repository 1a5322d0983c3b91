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

@Suite struct PollTests {
    @Test("pollDescriptor answers 0 on the timeout, then POLLIN once the pipe has data, then POLLHUP once the writer is gone")
    func pollOneDescriptor() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let reader = Descriptor(owningRawValue: ends[0])
        let writer = Descriptor(owningRawValue: ends[1])
        #expect(try pollDescriptor(reader.unowned, events: Int16(POLLIN), timeoutMilliseconds: 0) == 0)
        #expect(try pollDescriptor(writer.unowned, events: Int16(POLLOUT), timeoutMilliseconds: 0) == Int16(POLLOUT))
        try writeAll([9], to: writer.unowned)
        #expect(try pollDescriptor(reader.unowned, events: Int16(POLLIN), timeoutMilliseconds: -1) == Int16(POLLIN))
        try writer.close()
        let events = try pollDescriptor(reader.unowned, events: Int16(POLLIN), timeoutMilliseconds: -1)
        #expect(events & Int16(POLLHUP) != 0)
    }
}

@Suite struct EventDescriptorTests {
    @Test("notify makes the eventfd readable; reset answers the count and makes it unreadable again")
    func notifyAndReset() throws {
        let event = try EventDescriptor()
        #expect(fcntl(event.descriptor.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(event.descriptor.rawValue, F_GETFL) & O_NONBLOCK != 0)
        #expect(try pollDescriptor(event.descriptor.unowned, events: Int16(POLLIN), timeoutMilliseconds: 0) == 0)
        #expect(try event.reset() == 0)
        try event.notify()
        try event.notify()
        #expect(try pollDescriptor(event.descriptor.unowned, events: Int16(POLLIN), timeoutMilliseconds: 0) == Int16(POLLIN))
        #expect(try event.reset() == 2)
        #expect(try pollDescriptor(event.descriptor.unowned, events: Int16(POLLIN), timeoutMilliseconds: 0) == 0)
    }

    @Test("a notify from another thread wakes a poll that waits without a limit")
    func wakesAWaitingPoll() throws {
        let event = try EventDescriptor()
        let raw = event.descriptor.rawValue
        let woken = Cell<Int16>(0)
        let waiter = try startJoinableThread(name: "sc-event-wait") {
            woken.set((try? pollDescriptor(FileDescriptor(rawValue: raw), events: Int16(POLLIN), timeoutMilliseconds: -1)) ?? -1)
        }
        try event.notify()
        waiter.join()
        #expect(woken.value == Int16(POLLIN))
        #expect(try event.reset() == 1)
    }
}

/// Duplicating descriptors and re-pointing one.
@Suite struct DuplicateTests {
    @Test("Descriptor.duplicate gives a close-on-exec number at or above the minimum, for the same pipe")
    func duplicateAtLeast() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let reader = Descriptor(owningRawValue: ends[0])
        let writer = Descriptor(owningRawValue: ends[1])
        let copy = try Descriptor.duplicate(writer.unowned, atLeast: 100)
        #expect(copy.rawValue >= 100)
        #expect(fcntl(copy.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        try writeAll([5, 6], to: copy.unowned)
        try copy.close()
        try writer.close()
        #expect(try readToEnd(from: reader.unowned) == [5, 6])
    }

    @Test("Descriptor.duplicate of no descriptor is EBADF, naming fcntl")
    func duplicateNoDescriptor() throws {
        // (-1 rather than a closed number, which another test's open may take meanwhile.)
        #expect(throws: SystemCallError(errno: .badFileDescriptor, call: "fcntl")) {
            _ = try Descriptor.duplicate(FileDescriptor(rawValue: -1), atLeast: 3)
        }
    }

    @Test("duplicate(_:onto:) makes the target write into the source's pipe, keeping the target's number")
    func duplicateOnto() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let reader = Descriptor(owningRawValue: ends[0])
        let writer = Descriptor(owningRawValue: ends[1])
        let target = try Descriptor.open("/dev/null", .writeOnly)
        let number = target.rawValue
        try duplicate(writer.unowned, onto: target.unowned)
        #expect(target.rawValue == number)
        try writeAll([1, 2, 3], to: target.unowned)
        try target.close()
        try writer.close()
        #expect(try readToEnd(from: reader.unowned) == [1, 2, 3])
    }

    @Test("duplicate(_:onto:) from no descriptor is EBADF, naming dup2, and the target stays open")
    func duplicateOntoFromNoDescriptor() throws {
        let target = try Descriptor.open("/dev/null", .readOnly)
        #expect(throws: SystemCallError(errno: .badFileDescriptor, call: "dup2")) {
            try duplicate(FileDescriptor(rawValue: -1), onto: target.unowned)
        }
        #expect(isOpen(target.rawValue))
    }
}

@Suite(.serialized) struct SignalTests {
    /// The disposition of `signal` now, as a number (SIG_DFL 0, SIG_IGN 1, else a handler).
    private func disposition(_ signal: Int32) -> Int {
        var current = sigaction()
        precondition(sigaction(signal, nil, &current) == 0)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
    }

    @Test("ignoreSignal sets SIG_IGN, and a raised signal then does nothing")
    func ignores() throws {
        var previous = sigaction()
        #expect(sigaction(SIGURG, nil, &previous) == 0)
        defer { sigaction(SIGURG, &previous, nil) }
        var handled = sigaction()
        handled.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&handled.sa_mask)
        #expect(sigaction(SIGURG, &handled, nil) == 0)
        #expect(disposition(SIGURG) != unsafeBitCast(SIG_IGN, to: Int.self))
        try ignoreSignal(SIGURG)
        #expect(disposition(SIGURG) == unsafeBitCast(SIG_IGN, to: Int.self))
        #expect(raise(SIGURG) == 0)
    }

    @Test("SIGKILL cannot be ignored: EINVAL, naming sigaction")
    func sigkill() {
        #expect(throws: SystemCallError(errno: .invalidArgument, call: "sigaction")) {
            try ignoreSignal(SIGKILL)
        }
    }
}

@Suite struct PathCallTests {
    @Test("makeTemporaryDirectory makes a new 0700 directory under the prefix each time")
    func temporaryDirectories() throws {
        let parent = try TemporaryDirectory(prefix: "systemcalls-test")
        let first = try makeTemporaryDirectory(prefix: parent.path + "/t-")
        let second = try makeTemporaryDirectory(prefix: parent.path + "/t-")
        #expect(first != second)
        #expect(first.hasPrefix(parent.path + "/t-") && first.count == parent.path.count + 3 + 6)
        let status = try fileStatus(first)
        #expect(status.st_mode & S_IFMT == S_IFDIR)
        #expect(status.st_mode & 0o777 == 0o700)
        #expect(rmdir(first) == 0 && rmdir(second) == 0)
    }

    @Test("makeTemporaryDirectory in a missing directory: ENOENT, naming mkdtemp and the template")
    func temporaryDirectoryInAMissingParent() {
        #expect(throws: SystemCallError(errno: .noSuchFileOrDirectory, call: "mkdtemp", path: "/nonexistent-systemcalls-test/t-XXXXXX")) {
            _ = try makeTemporaryDirectory(prefix: "/nonexistent-systemcalls-test/t-")
        }
    }

    @Test("renameFile replaces the destination; a missing source is ENOENT naming rename and the source")
    func rename() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        try directory.write("a", "new")
        try directory.write("b", "old")
        try renameFile(directory.file("a"), to: directory.file("b"))
        #expect(try directory.contents("b") == Array("new".utf8))
        #expect(access(directory.file("a"), F_OK) != 0)
        #expect(throws: SystemCallError(errno: .noSuchFileOrDirectory, call: "rename", path: directory.file("a"))) {
            try renameFile(directory.file("a"), to: directory.file("c"))
        }
    }

    @Test("readLink answers a link's target, the longest Linux allows too; a file that is no link is EINVAL")
    func readLinks() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        // 4,095 bytes: a symlink's target is at most PATH_MAX - 1.
        let long = String(repeating: "d/", count: 2047) + "e"
        #expect(symlink("target", directory.file("short")) == 0)
        #expect(symlink(long, directory.file("long")) == 0)
        #expect(try readLink(directory.file("short")) == "target")
        #expect(try readLink(directory.file("long")) == long)
        try directory.write("file", "x")
        #expect(throws: SystemCallError(errno: .invalidArgument, call: "readlink", path: directory.file("file"))) {
            _ = try readLink(directory.file("file"))
        }
    }

    @Test("currentDirectory is the process's working directory")
    func workingDirectory() throws {
        let path = try currentDirectory()
        #expect(path.hasPrefix("/"))
        let here = try fileStatus(".")
        let there = try fileStatus(path)
        #expect(here.st_dev == there.st_dev && here.st_ino == there.st_ino)
    }
}

@Suite struct PositionalReadWriteTests {
    /// Reads into a new array of `count` bytes with `body`, answering the bytes read.
    private func read(_ count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in try body(buffer) }
        }.get()
        return Array(bytes[..<got])
    }

    @Test("writeAll at an offset and reads at offsets: a hole reads as zeros, a read at the end is short, past it empty; the file offset stays put")
    func atOffsets() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let file = try Descriptor.open(directory.file("f"), .readWrite, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
        try Array("hello".utf8).withUnsafeBytes { bytes in
            Result { () throws(SystemCallError) in try writeAll(bytes, to: file.unowned, at: 10) }
        }.get()
        try Array("HE".utf8).withUnsafeBytes { bytes in
            Result { () throws(SystemCallError) in try writeAll(bytes, to: file.unowned, at: 10) }
        }.get()
        #expect(lseek(file.rawValue, 0, SEEK_CUR) == 0)
        #expect(try directory.contents("f") == [UInt8](repeating: 0, count: 10) + Array("HEllo".utf8))

        #expect(try read(5) { (b) throws(SystemCallError) in try readSome(into: b, from: file.unowned, at: 10) } == Array("HEllo".utf8))
        #expect(try read(10) { (b) throws(SystemCallError) in try readSome(into: b, from: file.unowned, at: 12) } == Array("llo".utf8))
        #expect(try read(10) { (b) throws(SystemCallError) in try readSome(into: b, from: file.unowned, at: 15) } == [])
        #expect(try read(10) { (b) throws(SystemCallError) in try readSome(into: b, from: file.unowned, at: 1000) } == [])
        #expect(try read(4) { (b) throws(SystemCallError) in try readFully(into: b, from: file.unowned, at: 8) } == [0, 0] + Array("HE".utf8))
        #expect(try read(64) { (b) throws(SystemCallError) in try readFully(into: b, from: file.unowned, at: 0) }.count == 15)
        #expect(try read(64) { (b) throws(SystemCallError) in try readFully(into: b, from: file.unowned, at: 15) } == [])
        #expect(lseek(file.rawValue, 0, SEEK_CUR) == 0)
    }

    @Test("on a pipe, which has no offsets, pread and pwrite fail with ESPIPE, naming the call and the path given")
    func notSeekable() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let reader = Descriptor(owningRawValue: ends[0])
        let writer = Descriptor(owningRawValue: ends[1])
        try writeAll([1, 2, 3], to: writer.unowned)
        #expect(throws: SystemCallError(errno: .illegalSeek, call: "pread", path: "the pipe")) {
            _ = try read(3) { (b) throws(SystemCallError) in try readFully(into: b, from: reader.unowned, at: 0, path: "the pipe") }
        }
        #expect(throws: SystemCallError(errno: .illegalSeek, call: "pwrite", path: nil)) {
            try [UInt8](repeating: 1, count: 3).withUnsafeBytes { bytes in
                Result { () throws(SystemCallError) in try writeAll(bytes, to: writer.unowned, at: 0) }
            }.get()
        }
    }

    @Test("a file read in pieces of a prime size: readFully answers full pieces, then the short last one")
    func readFullyInPieces() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let content = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let path = try directory.write("f", content)
        let file = try Descriptor.open(path, .readOnly)
        var back: [UInt8] = []
        var counts: [Int] = []
        while true {
            let piece = try read(4099) { (b) throws(SystemCallError) in try readFully(into: b, from: file.unowned, at: Int64(back.count)) }
            counts.append(piece.count)
            back += piece
            if piece.count < 4099 { break }
        }
        #expect(back == content)
        #expect(counts.dropLast().allSatisfy { $0 == 4099 } && counts.last == 100_000 % 4099)
    }

    @Test("the gathered writeAll writes more pieces than one pwritev takes, empty ones skipped, in order at the offset")
    func gathered() throws {
        let directory = try TemporaryDirectory(prefix: "systemcalls-test")
        let file = try Descriptor.open(directory.file("f"), .readWrite, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
        var generator = SeededGenerator(seed: 16)
        let pieces: [[UInt8]] = (0..<3000).map { index in
            index % 7 == 0 ? [] : [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: Int.random(in: 1...300, using: &generator))
        }
        let total = pieces.reduce(0) { $0 + $1.count }
        #expect(try writeAll(pieces, to: file.unowned, at: 3) == total)
        #expect(try directory.contents("f") == [0, 0, 0] + pieces.flatMap { $0 })
        #expect(try writeAll([], to: file.unowned, at: 0) == 0)
        #expect(lseek(file.rawValue, 0, SEEK_CUR) == 0)

        let reader = try Descriptor.open(directory.file("f"), .readOnly)
        #expect(throws: SystemCallError(errno: .badFileDescriptor, call: "pwritev", path: "f")) {
            _ = try writeAll([[1]], to: reader.unowned, at: 0, path: "f")
        }
    }
}
