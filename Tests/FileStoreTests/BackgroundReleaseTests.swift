import Foundation
import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Releases kept off the thread that lets go (the server's loop): the close of a locator's
/// descriptor when it may free the file, and ``releaseInBackground(_:)``.
@Suite struct BackgroundReleaseTests {
    /// A fresh directory under the temporary directory, by its real path (as the kernel names
    /// the files in it).
    private func makeDirectory() -> String {
        try! makeTemporaryDirectory(prefix: "background-release")
    }

    private func writeFile(_ path: String, _ text: String) {
        FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
    }

    /// What this process's descriptor `fd` points at now (nil when it is closed; after a close the
    /// number may already be another test's).
    private func target(of fd: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")
    }

    /// Waits up to TestSupport's deadline (60 s: a busy machine) for `condition`.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        await waitUntil(condition)
    }

    @Test func aLocatorOfAFileWithANameClosesItsDescriptorAtOnce() throws {
        let directory = makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/named.txt"
        writeFile(path, "text\n")
        var locator: FileLocator? = try #require(FileLocator(path: path))
        let descriptor = locator!.descriptor
        #expect(!locator!.closeMayFreeFile)
        #expect(target(of: descriptor) == path)
        locator = nil
        #expect(target(of: descriptor) != path)
    }

    /// A save's rename leaves the locator holding a file without a name: its descriptor may be the
    /// file's last reference, and its close (the kernel dropping the file's pages and blocks) is
    /// left to a pooled thread. It still happens.
    @Test(arguments: ["replaced", "deleted"])
    func aLocatorOfAFileWithoutANameIsClosedInTheBackground(_ how: String) async throws {
        let directory = makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/saved.txt"
        writeFile(path, String(repeating: "line of text\n", count: 10_000))
        var locator: FileLocator? = try #require(FileLocator(path: path))
        let descriptor = locator!.descriptor
        if how == "replaced" {
            writeFile(path + ".tmp", "new text\n")
            #expect(rename(path + ".tmp", path) == 0)
        } else {
            #expect(unlink(path) == 0)
        }
        #expect(locator!.closeMayFreeFile)
        let held = path + " (deleted)"
        #expect(target(of: descriptor) == held)
        locator = nil
        #expect(await eventually { target(of: descriptor) != held })
    }

    @Test func releaseInBackgroundDropsTheLastReferenceOnAnotherThread() throws {
        let recorder = ReleaseRecorder()
        for _ in 0..<20 {
            releaseInBackground(ReleaseProbe(recorder))
        }
        for _ in 0..<20 {
            #expect(recorder.released.wait(timeout: .now() + 10) == .success)
        }
        let threads = recorder.threads.withLock { $0 }
        #expect(threads.count == 20)
        #expect(threads.allSatisfy { pthread_equal($0, pthread_self()) == 0 })
    }
}

extension BackgroundReleaseTests {
    /// A box handed to another thread keeps nothing once its value is taken: the value is freed
    /// where the taker lets go of it, not where the box goes.
    @Test func aHandOverKeepsNothingOnceTaken() {
        let recorder = ReleaseRecorder()
        let box = HandOver(ReleaseProbe(recorder))
        let taker = Thread { _ = box.take() }
        taker.start()
        #expect(recorder.released.wait(timeout: .now() + 10) == .success)
        let threads = recorder.threads.withLock { $0 }
        #expect(threads.count == 1)
        #expect(threads.allSatisfy { pthread_equal($0, pthread_self()) == 0 })
        _ = box
    }
}

/// Where the probes were freed.
private final class ReleaseRecorder: Sendable {
    let threads = Mutex<[pthread_t]>([])
    let released = DispatchSemaphore(value: 0)
}

/// Records the thread that frees it.
private final class ReleaseProbe: Sendable {
    let recorder: ReleaseRecorder
    init(_ recorder: ReleaseRecorder) { self.recorder = recorder }
    deinit {
        recorder.threads.withLock { $0.append(pthread_self()) }
        recorder.released.signal()
    }
}
