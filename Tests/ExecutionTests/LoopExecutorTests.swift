import Execution
import Foundation
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// An actor isolated to a given loop, counting the jobs it ran and whether each ran on the loop.
private actor Counter {
    nonisolated let loop: LoopExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    var order: [Int: [Int]] = [:]
    var offLoop = 0

    init(loop: LoopExecutor) { self.loop = loop }

    func record(sender: Int, value: Int) {
        if !loop.isCurrent { offLoop += 1 }
        order[sender, default: []].append(value)
    }
}

/// Waits for `condition`, up to TestSupport's deadline (by the clock).
private func eventually(_ condition: () -> Bool) async -> Bool {
    await waitUntil(condition)
}

@Suite("LoopExecutor: one thread for jobs and descriptors")
struct LoopExecutorTests {
    @Test("jobs from 8 concurrent senders all run, on the loop's thread, each sender's in its order")
    func jobsFromManyThreads() async {
        let loop = LoopExecutor(name: "test-jobs")
        let counter = Counter(loop: loop)
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<8 {
                group.addTask {
                    for value in 0..<500 { await counter.record(sender: sender, value: value) }
                }
            }
        }
        let order = await counter.order
        #expect(order.count == 8)
        for sender in 0..<8 { #expect(order[sender] == Array(0..<500), "sender \(sender)") }
        #expect(await counter.offLoop == 0)
    }

    @Test("a task preferring the loop runs its nonisolated code on the loop's thread")
    func taskExecutorPreference() async {
        let loop = LoopExecutor(name: "test-pref")
        let onLoop = await withTaskExecutorPreference(loop) { () async -> Bool in
            await Task.yield()
            return loop.isCurrent
        }
        #expect(onLoop)
        #expect(!loop.isCurrent)
    }

    @Test("an idle loop is woken by a job enqueued from another thread")
    func wakesWhenIdle() async throws {
        let loop = LoopExecutor(name: "test-wake")
        let counter = Counter(loop: loop)
        for round in 0..<50 {
            // Give the loop time to go to sleep in poll, then enqueue from this (another) thread.
            try await Task.sleep(for: .milliseconds(1))
            await counter.record(sender: 0, value: round)
        }
        #expect(await counter.order[0] == Array(0..<50))
    }

    @Test("a readable descriptor calls its handler on the loop until it answers false or is removed")
    func readableDescriptor() async throws {
        let loop = LoopExecutor(name: "test-fd")
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        let seen = Mutex<(bytes: [UInt8], offLoop: Int, calls: Int)>(([], 0, 0))
        loop.addReadable(ends[0]) {
            var byte: UInt8 = 0
            let count = read(ends[0], &byte, 1)
            return seen.withLock { state in
                state.calls += 1
                if !loop.isCurrent { state.offLoop += 1 }
                if count == 1 { state.bytes.append(byte) }
                return byte != UInt8(ascii: "!")  // "!" ends the registration
            }
        }
        for byte in Array("abc!".utf8) {
            var value = byte
            #expect(write(ends[1], &value, 1) == 1)
        }
        #expect(await eventually { seen.withLock { $0.bytes } == Array("abc!".utf8) })
        // After "!" the handler is no longer called, even with more bytes waiting.
        var more = UInt8(ascii: "x")
        #expect(write(ends[1], &more, 1) == 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(seen.withLock { $0.bytes } == Array("abc!".utf8))
        #expect(seen.withLock { $0.offLoop } == 0)

        // A new registration reads the waiting byte; removing it stops the calls.
        loop.addReadable(ends[0]) {
            var byte: UInt8 = 0
            _ = read(ends[0], &byte, 1)
            seen.withLock { $0.bytes.append(byte) }
            return true
        }
        #expect(await eventually { seen.withLock { $0.bytes.last } == UInt8(ascii: "x") })
        loop.removeReadable(ends[0])
        var late = UInt8(ascii: "y")
        #expect(write(ends[1], &late, 1) == 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(seen.withLock { $0.bytes.last } == UInt8(ascii: "x"))
    }

    @Test("an inactive source is not polled; waking the loop makes it look again")
    func inactiveSource() async throws {
        let loop = LoopExecutor(name: "test-active")
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        let active = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        loop.addReadable(ends[0], isActive: { active.load(ordering: .acquiring) }) {
            var byte: UInt8 = 0
            _ = read(ends[0], &byte, 1)
            reads.add(1, ordering: .relaxed)
            return true
        }
        var byte = UInt8(ascii: "a")
        #expect(write(ends[1], &byte, 1) == 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(reads.load(ordering: .relaxed) == 0)
        active.store(true, ordering: .releasing)
        loop.wake()
        #expect(await eventually { reads.load(ordering: .relaxed) == 1 })
        loop.removeReadable(ends[0])
    }
}
