import DocumentSession
import FileStore
import JSON
import JSONRPC

// Issue 34.9: in the daemon, a shared document can be taken outside a holder's roots by another
// holder (its save as, move or rename, to a path only its own roots allow) or followed there by
// the watcher. Nothing from outside a client's roots may reach it: that holder's hold ends there,
// as if it had closed the document. It hears `document/stateChanged` with reason `outsideRoots`
// (the uri it knew, state `closed`) and nothing about the document after that; its requests naming
// the handle are -32011 saying why. The document stays open for the other holders; when none is
// left, it closes as when its last holder's connection ends (its unsaved changes kept in the
// journal).

extension Hub {
    /// Ends the holds of `handle` whose connection's roots do not enclose `path`, the document's
    /// file now; answers who was dropped, with the notification each gets. `previousState`: the
    /// document's flags before the change that took it there. Called under the registry's lock,
    /// before the change is passed on (so the dropped holders do not get it). `knownPath`: the
    /// file the holders knew, when the registry has been told of the new one already (a move).
    static func dropHoldersOutsideRoots(
        _ handle: String, path: String, previousState: DocumentState, knownPath: String?, in registry: inout Registry
    ) -> (writers: [(MessageWriter, JSONValue)], orphaned: Bool) {
        guard var shared = registry.documents[handle] else { return ([], false) }
        let outside = shared.holders.filter { id in
            guard let roots = registry.members[id]?.roots else { return false }
            return !roots.encloses(path)
        }
        guard !outside.isEmpty else { return ([], false) }
        let params: JSONValue = [
            "document": .string(handle), "uri": .string(FileURI.uri(from: knownPath ?? shared.path)), "version": .integer(shared.version),
            "state": ["closed"], "previousState": Server.stateJSON(previousState), "reason": "outsideRoots",
            "hasUnsavedChanges": false,
        ]
        var writers: [(MessageWriter, JSONValue)] = []
        for id in outside {
            registry.members[id]?.held.remove(handle)
            registry.members[id]?.leftOutsideRoots.insert(handle)
            if let writer = registry.members[id]?.writer { writers.append((writer, params)) }
        }
        shared.holders.removeAll { outside.contains($0) }
        registry.documents[handle] = shared.holders.isEmpty ? nil : shared
        return (writers, shared.holders.isEmpty)
    }

    /// Sends the notifications of ``dropHoldersOutsideRoots(_:path:previousState:knownPath:in:)``, and closes
    /// a document left without holders (its journal kept, as when a client vanishes).
    func finishDropping(_ handle: String, _ dropped: (writers: [(MessageWriter, JSONValue)], orphaned: Bool)) {
        for (writer, params) in dropped.writers {
            writer.send(Notification(method: "document/stateChanged", params: params))
        }
        guard dropped.orphaned else { return }
        let stores = stores
        Task {
            if PackageStore.isPackageHandle(handle) { await stores.packages.abandon(handle) } else { await stores.store.abandon(handle) }
        }
    }
}

extension Server {
    /// The refusal of a handle whose hold ended when the document went outside this connection's
    /// roots (``Hub/dropHoldersOutsideRoots(_:path:previousState:in:)``); else ``notHeld(_:)``.
    static func notHeld(_ handle: String, membership: Membership) -> ResponseError {
        guard membership.hub.leftOutsideRoots(membership.id, handle) else { return notHeld(handle) }
        return ResponseError(
            .unknownDocument,
            "Unknown document \(handle): this connection no longer holds it, since another client or program took its file outside this connection's roots",
            data: ["document": .string(handle), "reason": "outsideRoots"])
    }
}
