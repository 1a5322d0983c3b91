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

    @Test("a burst of jobs while every thread is busy: at most maximumThreads threads start, the other jobs wait for one and all run (the load soak's server had 150 threads)")
    func burstIsBounded() async throws {
        let pool = BlockingThreadPool(niceness: 0, maximumThreads: 3)
        let gate = Gate()
        let running = Mutex(0), most = Mutex(0), done = Mutex(0)
        for _ in 0..<40 {
            pool.run {
                running.withLock { count in
                    count += 1
                    most.withLock { $0 = max($0, count) }
                }
                gate.wait()
                running.withLock { $0 -= 1 }
                done.withLock { $0 += 1 }
            }
        }
        // Threads are counted when started: without the bound, 40 here.
        #expect(pool.threadCount == 3)
        #expect(await waitUntil { running.withLock { $0 } == 3 })
        gate.open()
        #expect(await waitUntil { done.withLock { $0 } == 40 })
        #expect(pool.mostThreads == 3)
        #expect(most.withLock { $0 } <= 3)
    }

    @Test("jobs waiting for a thread run in the order they came")
    func waitingJobsKeepTheirOrder() async throws {
        let pool = BlockingThreadPool(niceness: 0, maximumThreads: 1)
        let gate = Gate()
        let order = Mutex<[Int]>([])
        pool.run { gate.wait() }
        for n in 0..<50 { pool.run { order.withLock { $0.append(n) } } }
        gate.open()
        #expect(await waitUntil { order.withLock { $0.count } == 50 })
        #expect(order.withLock { $0 } == Array(0..<50))
    }

    @Test("the bounds: the idle-priority pool runs as many threads as there are processors, the others four per processor and at least eight")
    func defaultBounds() {
        let processors = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect(BlockingThreadPool.idlePriority.maximumThreads == processors)
        #expect(BlockingThreadPool.pool(niceness: 0).maximumThreads == max(8, 4 * processors))
        #expect(BlockingThreadPool.pool(niceness: 10).maximumThreads == max(8, 4 * processors))
    }
}
