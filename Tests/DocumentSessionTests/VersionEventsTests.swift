import Foundation
import Testing

@testable import DocumentSession
import FileStore
import TestSupport
import TextBuffer

/// The store's `versionsChanged` events (issue 20 part 3): what this process kept, dropped and
/// resolved, reported on the actor after the background write.
@Suite("DocumentStore: the versions kept are reported (versionsChanged)")
struct VersionEventsTests {
    /// A store keeping versions, with one document open, and its events.
    private func open(_ text: String) async throws -> (DocumentStore, String, String, EventLog, [TemporaryDirectory]) {
        let directory = try TemporaryDirectory()
        let state = try TemporaryDirectory()
        let path = try directory.write("notes.md", text)
        let log = EventLog()
        let versions = try VersionStore(directory: state.file("versions"))
        let store = DocumentStore(events: { log.record($0) }, watchFiles: false, versions: versions)
        let handle = try await store.open(path: path, encoding: nil).handle
        return (store, handle, path, log, [directory, state])
    }

    private static func changes(_ event: DocumentEvent) -> (added: [VersionStore.Version], removed: [String], resolved: [String])? {
        guard case .versionsChanged(let added, let removed, let resolved) = event.kind else { return nil }
        return (added, removed, resolved)
    }

    @Test("a sync copy kept resolved: added with its kind, origin and mark; the same text again adds nothing")
    func syncCopyKeptResolved() async throws {
        let (store, handle, path, log, directories) = try await open("mine\n")
        defer { withExtendedLifetime(directories) {} }
        let origin = "notes.sync-conflict-20261128-101500-ABCDEFG.md"
        await store.keepResolvedVersion(of: path, kind: .syncConflict, text: TextBuffer("theirs\n"), origin: origin)
        let event = try await log.wait { Self.changes($0)?.added.isEmpty == false }
        #expect(event.handle == handle && event.reason == .versionsChanged)
        let added = try #require(Self.changes(event)?.added.first)
        #expect(added.kind == .syncConflict && added.resolved && added.origin == origin && added.documentPath == path)
        #expect(try await store.versions(handle) == [added])
        #expect(try await store.readVersion(handle, id: added.id).text == "theirs\n")
        // The same copy again: nothing kept, nothing reported.
        await store.keepResolvedVersion(of: path, kind: .syncConflict, text: TextBuffer("theirs\n"), origin: origin)
        #expect(await store.finishVersionWrites() == 0)
        #expect(log.all.filter { Self.changes($0) != nil }.count == 1)
        #expect(try await store.versions(handle).count == 1)
    }

    @Test("a version kept by a session that closed before it was written is listed, not reported, to the file's next session")
    func notReportedToALaterSession() async throws {
        let (store, first, path, log, directories) = try await open("one\n")
        defer { withExtendedLifetime(directories) {} }
        // The queue held until the file is open again: the save's version is written after that.
        let gate = DispatchSemaphore(value: 0)
        await store.versionWrites?.run { _ in gate.wait() }
        await store.keepVersion(of: path, kind: .saved, text: TextBuffer("one, saved at the close\n"))
        _ = try await store.close(first, save: .never)
        let second = try await store.open(path: path, encoding: nil).handle
        #expect(second != first)
        gate.signal()
        // Written (before the next keep: a newer version of the file would replace it in the queue).
        #expect(await store.finishVersionWrites() == 0)
        // A version of the second session's own, written after: reported to it (the reports come
        // in the order of the writes, so the first one's would have come before).
        await store.keepVersion(of: path, kind: .conflict, text: TextBuffer("two\n"))
        _ = try await log.wait { $0.handle == second && Self.changes($0)?.added.first?.kind == .conflict }
        let reported = log.all.filter { $0.handle == second }.compactMap(Self.changes)
        #expect(reported.map { $0.added.map(\.kind) } == [[.conflict]])
        // Both are listed to it.
        #expect(try await store.versions(second).count == 2)
    }

    @Test("markConflictVersionsResolved resolves a conflict version still queued, after its write, and reports it")
    func resolvesQueuedConflict() async throws {
        let (store, handle, path, log, directories) = try await open("mine\n")
        defer { withExtendedLifetime(directories) {} }
        await store.keepVersion(of: path, kind: .conflict, text: TextBuffer("theirs\n"))
        await store.markConflictVersionsResolved(handle)  // queued behind the conflict's write
        let resolvedEvent = try await log.wait { Self.changes($0)?.resolved.isEmpty == false }
        let added = log.all.compactMap { Self.changes($0)?.added.first }
        let kept = try #require(added.first)
        #expect(kept.kind == .conflict && !kept.resolved)
        #expect(Self.changes(resolvedEvent)?.resolved == [kept.id])
        // Reported in the order of the writes: kept, then resolved.
        #expect(log.all.compactMap(Self.changes).map { $0.added.isEmpty ? "resolved" : "added" } == ["added", "resolved"])
        #expect(try await store.versions(handle).map(\.resolved) == [true])
        // Nothing left to resolve: nothing reported.
        await store.markConflictVersionsResolved(handle)
        #expect(await store.finishVersionWrites() == 0)
        #expect(log.all.compactMap(Self.changes).count == 2)
    }

    @Test("deleteVersion removes one and reports it; an unknown id is unknownVersion and changes nothing")
    func deleteReported() async throws {
        let (store, handle, path, log, directories) = try await open("one\n")
        defer { withExtendedLifetime(directories) {} }
        await store.keepVersion(of: path, kind: .saved, text: TextBuffer("one\n"))
        #expect(await store.finishVersionWrites() == 0)
        let listed = try await store.versions(handle)
        let kept = try #require(listed.first)
        await #expect(throws: DocumentError.unknownVersion("nope")) { try await store.deleteVersion(handle, id: "nope") }
        #expect(try await store.versions(handle) == [kept])
        try await store.deleteVersion(handle, id: kept.id)
        let event = try await log.wait { Self.changes($0)?.removed.isEmpty == false }
        #expect(Self.changes(event)?.removed == [kept.id])
        #expect(try await store.versions(handle).isEmpty)
    }
}
