import Testing
import EditingTraces
@testable import TextBuffer

/// Replays the real editing traces in shared/data/editing-traces through the same calls a session
/// makes: each patch (counted in code points) becomes an LSP edit, each transaction an undo step.
@Suite struct TraceReplayTests {
    @Test func tracesArePresent() {
        #expect(EditingTrace.available.count >= 4, "no traces in \(EditingTrace.directory.path)")
    }

    @Test(arguments: EditingTrace.available)
    func replayUndoAllRedoAll(name: String) throws {
        let trace = try EditingTrace.load(name)
        var buffer = TextBuffer(trace.startContent)
        var history = UndoHistory(byteLimit: .max)
        var patchNumber = 0
        for transaction in trace.transactions {
            var applied: [AppliedEdit] = []
            for patch in transaction {
                // Alternate the encodings, so that every conversion path sees real text.
                let encoding = PositionEncoding.allCases[patchNumber % 3]
                patchNumber += 1
                let lower = try buffer.utf8Offset(ofUnitOffset: patch.position, encoding: .utf32)
                let upper = try buffer.utf8Offset(ofUnitOffset: patch.position + patch.deleteCount, encoding: .utf32)
                let range = buffer.range(ofUTF8Range: lower..<upper, encoding: encoding)
                let edit = TextEdit(range: range, text: patch.text)
                applied += try buffer.apply(edits: [edit], encoding: encoding)
            }
            history.record(applied, label: nil)
        }
        buffer.checkInvariants()
        #expect(buffer.utf8Bytes() == Array(trace.endContent.utf8), "\(name): replay")
        #expect(buffer.lineCount == ReferenceText(trace.endContent).lines.count)

        // Undo everything, applying the answered edits to a client's copy as an editor would.
        var client = buffer
        let recorded = history.undoCount
        var steps = 0
        while let edits = history.undo(&buffer, encoding: .utf16) {
            try client.apply(edits: edits, encoding: .utf16)
            steps += 1
        }
        #expect(steps == recorded)
        #expect(buffer.utf8Bytes() == Array(trace.startContent.utf8), "\(name): undo all")
        #expect(client.utf8Bytes() == Array(trace.startContent.utf8), "\(name): client after undo all")
        #expect(!history.hasUnsavedChanges)

        while let edits = history.redo(&buffer, encoding: .utf32) {
            try client.apply(edits: edits, encoding: .utf32)
        }
        buffer.checkInvariants()
        #expect(buffer.utf8Bytes() == Array(trace.endContent.utf8), "\(name): redo all")
        #expect(client.utf8Bytes() == Array(trace.endContent.utf8), "\(name): client after redo all")
    }
}
