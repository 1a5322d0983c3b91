import EditingTraces
import Foundation
import JSON
import Testing

extension DocumentTests {
    /// Real editing histories (shared/data/editing-traces, josephg/editing-traces, CC BY 4.0) replayed
    /// over stdio: every transaction becomes one `document/edit`, its patches (counted in code points)
    /// converted to line/character positions on the client side; then undo everything and redo
    /// everything, the client applying the answered edits to its own copy.
    @Suite("Editing traces over stdio")
    struct Traces {
        static func isPresent(_ name: String) -> Bool { EditingTrace.isPresent(name) }

        static func load(_ name: String) throws -> EditingTrace { try EditingTrace.load(name) }

        /// Sends `requests` pipelined, a window at a time, and hands each response to `check` in order.
        static func pipeline(
            _ session: Session, _ requests: [(method: String, params: JSONValue)], window: Int = 256,
            check: (Int, JSONValue) throws -> Bool
        ) throws {
            var next = 0
            while next < requests.count {
                let batch = requests[next..<min(next + window, requests.count)]
                var ids: [Int64] = []
                for request in batch {
                    let id = session.server.makeID()
                    ids.append(id)
                    try session.send(["jsonrpc": "2.0", "id": .integer(id), "method": .string(request.method), "params": request.params])
                }
                for (offset, id) in ids.enumerated() {
                    let response = try session.server.waitForResponse(id: .integer(id), timeout: e2eTimeout)
                    guard try check(next + offset, response) else {
                        // Take the rest of the window's answers, so the session ends clean.
                        for rest in ids[(offset + 1)...] { _ = try session.server.waitForResponse(id: .integer(rest), timeout: e2eTimeout) }
                        return
                    }
                }
                next += batch.count
            }
        }

        /// Replays `transactions` of `trace` in `encoding`, then undoes and redoes everything, checking
        /// the server's text and the client's copy at every step that can be checked.
        static func replay(_ trace: EditingTrace, transactions: Int, encoding: String, name: String) throws {
            let directory = try TemporaryDirectory(prefix: "docsession-e2e")
            let path = try directory.write(name, trace.startContent)
            let session = try Session.documents(encoding: encoding)
            try session.open(path, ["includeText": false])

            // The client replays the trace on its copy, making the requests as it goes.
            var client = ClientText(trace.startContent, encoding: encoding)
            var requests: [(method: String, params: JSONValue)] = []
            var expectedVersions: [Int64] = []
            var version: Int64 = 1
            var steps = 0
            for transaction in trace.transactions.prefix(transactions) {
                var edits: [JSONValue] = []
                var changes = false
                for patch in transaction {
                    let start = client.position(ofScalarOffset: patch.position)
                    let end = client.position(ofScalarOffset: patch.position + patch.deleteCount)
                    let removed = try client.scalars(start, end)
                    if !removed.elementsEqual(patch.text.unicodeScalars) { changes = true }
                    let edit = Edit(start, end, patch.text)
                    try client.apply(edit)
                    edits.append(edit.json)
                }
                requests.append(("document/edit", ["document": "d1", "version": .integer(version), "edits": .array(edits)]))
                // Every accepted edit raises the version by one, a transaction that replaces text by
                // the same text too (the traces hold some); only those that change it are steps.
                version += 1
                if changes { steps += 1 }
                expectedVersions.append(version)
            }
            let finalText = client.text
            if transactions >= trace.transactions.count {
                #expect(utf8(finalText) == utf8(trace.endContent), "\(name): the client's own replay")
            }
            try pipeline(session, requests) { index, response in
                let answered = response["result"]?["version"]?.integerValue
                guard answered == expectedVersions[index] else {
                    Issue.record("\(name): transaction \(index) answered \(response.jsonText), expected version \(expectedVersions[index])")
                    return false
                }
                return true
            }
            let (serverText, serverVersion) = try session.read("d1")
            #expect(utf8(serverText) == utf8(finalText), "\(name): the server's text after the replay")
            #expect(serverVersion == version)
            let edited = version

            // Undo everything, pipelined, with a read every so often to compare with the client's copy.
            var undoRequests: [(method: String, params: JSONValue)] = []
            for step in 0..<steps {
                undoRequests.append(("document/undo", ["document": "d1"]))
                if step % 2000 == 1999 { undoRequests.append(("document/read", ["document": "d1"])) }
            }
            try Self.applyAnswers(session, undoRequests, to: &client, version: &version, name: "\(name) undo")
            #expect(utf8(client.text) == utf8(trace.startContent), "\(name): the client's copy after undoing everything")
            #expect(try session.read("d1") == (trace.startContent, version))
            let (lastVersion, noEdits) = try session.step("document/undo", "d1")
            #expect(lastVersion == version)
            #expect(noEdits.isEmpty)
            let state = try session.state("d1")
            #expect(state["hasUnsavedChanges"] == false)
            #expect(state["canUndo"] == false)

            // Redo everything.
            var redoRequests: [(method: String, params: JSONValue)] = []
            for step in 0..<steps {
                redoRequests.append(("document/redo", ["document": "d1"]))
                if step % 2000 == 1999 { redoRequests.append(("document/read", ["document": "d1"])) }
            }
            try Self.applyAnswers(session, redoRequests, to: &client, version: &version, name: "\(name) redo")
            #expect(utf8(client.text) == utf8(finalText), "\(name): the client's copy after redoing everything")
            let (redone, redoneVersion) = try session.read("d1")
            #expect(utf8(redone) == utf8(finalText), "\(name): the server's text after redoing everything")
            #expect(redoneVersion == edited + Int64(2 * steps))
            #expect(try session.state("d1")["canRedo"] == false)
            try session.shutdownAndExit()
        }

        /// Sends undo or redo requests (and reads) pipelined, applying each answer's edits to `client`.
        static func applyAnswers(
            _ session: Session, _ requests: [(method: String, params: JSONValue)], to client: inout ClientText, version: inout Int64, name: String
        ) throws {
            var copy = client
            var current = version
            try pipeline(session, requests) { index, response in
                guard let result = response["result"] else {
                    Issue.record("\(name): request \(index) failed: \(response.jsonText)")
                    return false
                }
                if requests[index].method == "document/read" {
                    guard utf8(result["text"]?.stringValue) == utf8(copy.text) else {
                        Issue.record("\(name): at request \(index) the server's text and the client's copy differ")
                        return false
                    }
                    return true
                }
                current += 1
                guard result["version"]?.integerValue == current else {
                    Issue.record("\(name): request \(index) answered \(response.jsonText), expected version \(current)")
                    return false
                }
                do {
                    try copy.apply((result["edits"]?.arrayValue ?? []).map(Edit.init(json:)))
                } catch {
                    Issue.record("\(name): request \(index)'s edits do not apply to the client's copy: \(error)")
                    return false
                }
                return true
            }
            client = copy
            version = current
        }

        @Test("sveltecomponent: every transaction as document/edit (utf-32), then undo all and redo all", .enabled(if: isPresent("sveltecomponent")))
        func sveltecomponent() throws {
            let trace = try Self.load("sveltecomponent")
            try Self.replay(trace, transactions: trace.transactions.count, encoding: "utf-32", name: "sveltecomponent.svelte")
        }

        @Test("rustcode: the first 4000 transactions in utf-8 and utf-16 positions", .enabled(if: isPresent("rustcode")), arguments: ["utf-8", "utf-16"])
        func rustcode(encoding: String) throws {
            let trace = try Self.load("rustcode")
            try Self.replay(trace, transactions: 4000, encoding: encoding, name: "rustcode.rs")
        }
    }
}
