@_exported import EditingTraces
import TextBuffer

/// The buffer workloads of shared/design/performance.md, each a function that does the work and
/// returns something derived from the result, so that nothing is optimised away.
public enum Workloads {
    /// Replays `patches` on a rope, converting each code-point offset to a UTF-8 offset as a
    /// session does.
    public static func replayRope(_ patches: [EditingTrace.Patch], from start: TextBuffer,
                                  scalarShift: Int = 0) -> TextBuffer {
        var buffer = start
        for patch in patches {
            let position = patch.position + scalarShift
            let lower = try! buffer.utf8Offset(ofUnitOffset: position, encoding: .utf32)
            let upper = patch.deleteCount == 0
                ? lower : try! buffer.utf8Offset(ofUnitOffset: position + patch.deleteCount, encoding: .utf32)
            buffer.replace(utf8Range: lower..<upper, with: patch.text)
        }
        return buffer
    }

    /// Replays `patches` on a flat array of bytes: the floor a rope is measured against. Each edit
    /// moves the tail with one memmove, as a C program would; offsets are used as byte offsets,
    /// which is right for an ASCII trace such as automerge-paper.
    public static func replayFlat(_ patches: [EditingTrace.Patch], from start: [UInt8]) -> [UInt8] {
        var capacity = max(start.count * 2, 4096)
        var storage = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { storage.deallocate() }
        start.withUnsafeBufferPointer { storage.initialize(from: $0.baseAddress!, count: $0.count) }
        var count = start.count
        for patch in patches {
            let lower = patch.position
            let upper = lower + patch.deleteCount
            let inserted = patch.bytes.count
            if count - patch.deleteCount + inserted > capacity {
                capacity *= 2
                let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
                larger.initialize(from: storage, count: count)
                storage.deallocate()
                storage = larger
            }
            (storage + lower + inserted).update(from: storage + upper, count: count - upper)
            patch.bytes.withUnsafeBufferPointer { source in
                if let base = source.baseAddress { (storage + lower).update(from: base, count: inserted) }
            }
            count += inserted - patch.deleteCount
        }
        return Array(UnsafeBufferPointer(start: storage, count: count))
    }

    /// The trace's transactions as the edit requests a client sends (utf-16 positions, one
    /// request per transaction), computed by replaying once.
    public static func editRequests(_ trace: EditingTrace, encoding: PositionEncoding) -> [[TextEdit]] {
        var buffer = TextBuffer(trace.startContent)
        return trace.transactions.map { transaction in
            transaction.map { patch in
                let lower = try! buffer.utf8Offset(ofUnitOffset: patch.position, encoding: .utf32)
                let upper = try! buffer.utf8Offset(ofUnitOffset: patch.position + patch.deleteCount, encoding: .utf32)
                let edit = TextEdit(range: buffer.range(ofUTF8Range: lower..<upper, encoding: encoding), text: patch.text)
                buffer.replace(utf8Range: lower..<upper, with: patch.text)
                return edit
            }
        }
    }

    /// Applies edit requests as a session does: positions to offsets, the edits, one undo step
    /// per request.
    public static func applyRequests(_ requests: [[TextEdit]], to start: TextBuffer,
                                     encoding: PositionEncoding) -> (TextBuffer, UndoHistory) {
        var buffer = start
        var history = UndoHistory(byteLimit: .max)
        for request in requests {
            let applied = try! buffer.apply(edits: request, encoding: encoding)
            history.record(applied)
        }
        return (buffer, history)
    }

    /// Undoes every step, then redoes every step, answering the edits in `encoding` as a session
    /// does. Returns the number of edits answered.
    public static func undoAllRedoAll(_ buffer: inout TextBuffer, _ history: inout UndoHistory,
                                      encoding: PositionEncoding) -> Int {
        var answered = 0
        while let edits = history.undo(&buffer, encoding: encoding) { answered += edits.count }
        while let edits = history.redo(&buffer, encoding: encoding) { answered += edits.count }
        return answered
    }

    /// A generated document of about `bytes` bytes: lines of mixed lengths (0 to 160 characters),
    /// some of them with non-ASCII text, deterministic.
    public static func generatedDocument(bytes target: Int) -> String {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        let words = ["buffer", "rope", "chunk", "line", "the", "of", "a", "edit", "undo", "save",
                     "naïve", "café", "Grüße", "日本語", "emoji 😀", "x"]
        var text = ""
        text.reserveCapacity(target + 200)
        while text.utf8.count < target {
            let length = Int(next() % 161)
            var line = ""
            while line.utf8.count < length {
                line += words[Int(next() % UInt64(words.count))]
                line += " "
            }
            text += line
            text += "\n"
        }
        return text
    }
}
