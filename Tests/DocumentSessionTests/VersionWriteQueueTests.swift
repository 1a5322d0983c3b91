import Foundation
import Synchronization
import Testing

@testable import DocumentSession
import FileStore
import TextBuffer

@Suite("VersionWriteQueue: versions written in order, the backlog bounded")
struct VersionWriteQueueTests {
    func waitUntilIdle(_ queue: VersionWriteQueue) async throws {
        guard await queue.finish(within: defaultDeadline) else { throw TestFailure("the queue did not drain") }
    }

    /// A version store in `directory` and a queue over it, held behind a gate until it opens.
    func heldQueue(in directory: TemporaryDirectory) throws -> (VersionStore, VersionWriteQueue, Gate) {
        let store = try VersionStore(directory: directory.file("versions"))
        let queue = VersionWriteQueue(store: store)
        let gate = Gate()
        // Held until the test opens it: a deadline of ten minutes, not the suite's minute. The
        // tests assert what waits behind it, and under load the whole suite's tasks share two
        // cooperative threads: a test's 5 ms sleep was seen to end more than a minute later, after
        // a gate of one minute had let the writes through (finishDrains, whole suite with two busy
        // loops, 3 of 4 runs).
        queue.run { _ in gate.wait(deadline: .seconds(600)) }
        // Counted from here, `pending` is what waits behind the gate (stop 30's CI run: the gate
        // itself was still pending on a busy machine, one more than the bound).
        guard gate.waitUntilArrived() else { throw TestFailure("the queue did not start the gate") }
        return (store, queue, gate)
    }

    func texts(_ store: VersionStore, _ path: String) throws -> [String] {
        try store.versions(of: path).map { String(decoding: try store.read($0.id), as: UTF8.self) }
    }

    @Test("saves faster than their writes: each file keeps its newest version, and the backlog one per file and kind")
    func newestReplacesPending() async throws {
        let directory = try TemporaryDirectory()
        let (store, queue, gate) = try heldQueue(in: directory)
        for n in 1...50 {
            queue.keep(TextBuffer("a\(n)\n"), of: "/docs/a.txt", kind: .saved)
            queue.keep(TextBuffer("b\(n)\n"), of: "/docs/b.txt", kind: .saved)
        }
        queue.keep(TextBuffer("theirs\n"), of: "/docs/a.txt", kind: .conflict)
        // Waiting behind the gate (once it has started): one write per file and kind.
        #expect(queue.pending <= 4)
        #expect(queue.replaced == 98)
        gate.open()
        try await waitUntilIdle(queue)
        #expect(try texts(store, "/docs/a.txt").sorted() == ["a50\n", "theirs\n"])
        #expect(try texts(store, "/docs/b.txt") == ["b50\n"])
    }

    @Test("an open's thinning is no barrier: versions queued around many opens still give way to newer ones")
    func thinningKeepsTheBacklogBounded() async throws {
        let directory = try TemporaryDirectory()
        let (store, queue, gate) = try heldQueue(in: directory)
        let thinned = Mutex(0)
        for n in 1...50 {
            queue.keep(TextBuffer("a\(n)\n"), of: "/docs/a.txt", kind: .saved)
            // Another file opened between two saves, and the saved one opened again.
            queue.thin("/docs/b\(n % 5).txt") { _ in thinned.withLock { $0 += 1 } }
            queue.thin("/docs/a.txt") { _ in thinned.withLock { $0 += 1 } }
        }
        // One version of a, one thinning of a and one of each b: 7 (the thinnings as barriers: 150).
        #expect(queue.pending <= 7)
        gate.open()
        try await waitUntilIdle(queue)
        #expect(try texts(store, "/docs/a.txt") == ["a50\n"])
        #expect(thinned.withLock { $0 } == 6)
    }

    @Test("finish waits for every queued write (shutdown's drain), and says when its time is up first")
    func finishDrains() async throws {
        let directory = try TemporaryDirectory()
        let (store, queue, gate) = try heldQueue(in: directory)
        for n in 1...5 { queue.keep(TextBuffer("f\(n)\n"), of: "/docs/f\(n).txt", kind: .saved) }
        // Held behind the gate: the time is up, and the writes are still there.
        #expect(await queue.finish(within: .milliseconds(50)) == false)
        #expect(queue.pending == 5)
        gate.open()
        #expect(await queue.finish(within: .seconds(60)))
        #expect(queue.pending == 0 && !queue.running)
        for n in 1...5 { #expect(try texts(store, "/docs/f\(n).txt") == ["f\(n)\n"]) }
    }

    @Test("nothing before a move gives way to what comes after it: each version is kept under its path of the time")
    func movesAreBarriers() async throws {
        let directory = try TemporaryDirectory()
        let (store, queue, gate) = try heldQueue(in: directory)
        queue.keep(TextBuffer("one\n"), of: "/docs/a.txt", kind: .saved)
        queue.run { versions in _ = try? versions.moveDocument(from: "/docs/a.txt", to: "/docs/c.txt") }
        queue.keep(TextBuffer("two\n"), of: "/docs/a.txt", kind: .saved)
        queue.keep(TextBuffer("three\n"), of: "/docs/a.txt", kind: .saved)
        #expect(queue.replaced == 1)
        gate.open()
        try await waitUntilIdle(queue)
        #expect(try texts(store, "/docs/c.txt") == ["one\n"])
        #expect(try texts(store, "/docs/a.txt") == ["three\n"])
    }
}
