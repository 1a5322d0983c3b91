import Foundation
import Synchronization
import SystemCalls
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// The calling thread's name, as `startThread` set it (`/proc/thread-self/comm`).
private func threadName() -> String {
    let fd = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "?" }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 32)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return "?" }
    return String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .newlines)
}

/// The pool of threads blocking work runs on, when no thread can be had.
@Suite struct BlockingThreadPoolTests {
    /// A pool whose every thread start fails as at a resource limit (`EAGAIN`).
    private func poolWithoutThreads() -> BlockingThreadPool {
        BlockingThreadPool(niceness: 0) { _, _, _, _ throws(SystemCallError) in
            throw SystemCallError(errno: .resourceTemporarilyUnavailable, call: "pthread_create")
        }
    }

    @Test("without a thread to be had, a job runs on its caller, which then goes on: it does not stay to serve the pool's later jobs (the caller may be the server's loop)")
    func callerRunsOneJobAndGoesOn() async throws {
        let pool = poolWithoutThreads()
        let firstRanOn = Mutex<String?>(nil)
        // The first caller, on a thread of its own.
        let caller = try startJoinableThread(name: "test-caller") {
            pool.run { firstRanOn.withLock { $0 = threadName() } }
        }
        #expect(await waitUntil { firstRanOn.withLock { $0 } != nil })
        #expect(firstRanOn.withLock { $0 } == "test-caller")
        // A second job, from another thread: it runs on that thread. (Before, the first caller
        // stayed in the pool for five seconds waiting for more work, and took it.)
        let secondRanOn = Mutex<String?>(nil)
        let submitter = try startJoinableThread(name: "test-submitter") {
            pool.run { secondRanOn.withLock { $0 = threadName() } }
        }
        submitter.join()
        #expect(secondRanOn.withLock { $0 } == "test-submitter")
        caller.join()
    }
}
