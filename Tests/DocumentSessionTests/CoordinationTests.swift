import Foundation
import Testing

@testable import DocumentSession
import FileStore
import TextBuffer

/// The store's side of coordination (DocumentStore+Coordination.swift); the wire and the timing of
/// the watcher are tested end to end in Tests/faults/test_coordination.py.
@Suite("DocumentStore: coordination")
struct CoordinationTests {
    @Test("a read lease saves unsaved changes first and disables nothing")
    func readSaves() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("world\n".utf8))
        _ = try await typeAtStart(store, handle, "hello ")
        let path = directory.path + "/doc.txt"
        let grant = try await store.coordinate(path: path, intent: .read, label: "l1")
        #expect(grant.documents == [handle] && grant.saved == [handle])
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "hello world\n")
        #expect(try await store.document(handle).state.isEmpty)
        let ended = await store.endCoordination(grant.lease)
        #expect(ended?.map(\.outcome) == [.unchanged])
        #expect(await store.endCoordination(grant.lease) == nil)
    }

    @Test("a write lease refuses edits, undo and saves naming the lease, and gives them back at its end")
    func writeDisables() async throws {
        let (store, handle, directory, log) = try await storeWithEvents(Array("world\n".utf8))
        let version = try await typeAtStart(store, handle, "hello ")
        let grant = try await store.coordinate(path: directory.path + "/doc.txt", intent: .write, label: "l7")
        #expect(log.reasons.last == .coordinated)
        #expect(try await store.document(handle).state.contains(.editingDisabled))
        let refusal = DocumentError.coordinated(handle: handle, lease: "l7", intent: "write")
        await #expect(throws: refusal) { try await typeAtStart(store, handle, "x") }
        await #expect(throws: refusal) { try await store.undo(handle, version: nil, encoding: .utf16) }
        await #expect(throws: refusal) { try await store.save(handle) }
        await #expect(throws: refusal) { try await store.beginSave(handle) }
        let ended = await store.endCoordination(grant.lease)
        #expect(ended?.map(\.outcome) == [.unchanged])
        #expect(log.reasons.last == .coordinationEnded)
        #expect(try await store.document(handle).state.isEmpty)
        #expect(try await store.document(handle).version == version)
        _ = try await typeAtStart(store, handle, "again ")
    }

    @Test("a document held by two leases is disabled until the last ends, and then checked")
    func twoLeases() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("world\n".utf8))
        let path = directory.path + "/doc.txt"
        let first = try await store.coordinate(path: path, intent: .write, label: "l1")
        let second = try await store.coordinate(path: path, intent: .delete, label: "l2")
        #expect(await store.endCoordination(first.lease)?.map(\.outcome) == [.held])
        await #expect(throws: DocumentError.coordinated(handle: handle, lease: "l2", intent: "delete")) {
            try await typeAtStart(store, handle, "x")
        }
        try "changed\n".write(toFile: path, atomically: false, encoding: .utf8)
        #expect(await store.endCoordination(second.lease)?.map(\.outcome) == [.reloaded])
        #expect(try await store.read(handle, range: nil, encoding: .utf16).text == "changed\n")
    }

    @Test("a delete lease closes a clean document whose file is gone; a move lease's document follows its file")
    func deleteAndMove() async throws {
        let (store, handle, directory, _) = try await storeWithEvents(Array("world\n".utf8))
        let path = directory.path + "/doc.txt"
        let lease = try await store.coordinate(path: path, intent: .delete, label: "l1")
        try FileManager.default.removeItem(atPath: path)
        #expect(await store.endCoordination(lease.lease)?.map(\.outcome) == [.closed])
        await #expect(throws: DocumentError.unknownDocument(handle)) { try await store.document(handle) }

        let other = try directory.write("other.txt", Array("text\n".utf8))
        let document = try await store.open(path: other, encoding: nil)
        let destination = directory.path + "/moved.txt"
        let move = try await store.coordinate(path: other, intent: .move, destination: destination, label: "l2")
        try FileManager.default.moveItem(atPath: other, toPath: destination)
        #expect(await store.endCoordination(move.lease)?.map(\.outcome) == [.moved])
        #expect(try await store.document(document.handle).path == destination)
    }
}
