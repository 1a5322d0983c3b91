import EditingTraces
import JSON

/// One edit request's content, in LSP positions (utf-32: characters are Unicode scalars), made by
/// replaying the trace on the client's own copy of the text.
struct PlannedEdit {
    var startLine: Int, startCharacter: Int
    var endLine: Int, endCharacter: Int
    /// The inserted text as a JSON string literal, quotes included.
    var textJSON: [UInt8]
}

/// The client's copy of the text: lines of Unicode scalars (lines end at "\n"; the traces have no
/// "\r"), with a Fenwick tree of their lengths (each with its "\n") to find the line of a scalar
/// offset in O(log lines).
struct ClientText {
    private(set) var lines: [[Unicode.Scalar]]
    private var tree: [Int] = []

    init(_ text: String) {
        lines = ClientText.split(Array(text.unicodeScalars))
        rebuild()
    }

    static func split(_ scalars: [Unicode.Scalar]) -> [[Unicode.Scalar]] {
        var result: [[Unicode.Scalar]] = []
        var current: [Unicode.Scalar] = []
        for scalar in scalars {
            if scalar == "\n" {
                result.append(current)
                current = []
            } else {
                current.append(scalar)
            }
        }
        result.append(current)
        return result
    }

    private func length(_ line: Int) -> Int { lines[line].count + (line + 1 < lines.count ? 1 : 0) }

    private mutating func rebuild() {
        tree = [Int](repeating: 0, count: lines.count + 1)
        for i in 0..<lines.count {
            var j = i + 1
            let value = length(i)
            while j <= lines.count { tree[j] += value; j += j & -j }
        }
    }

    private mutating func add(_ line: Int, _ delta: Int) {
        var j = line + 1
        while j < tree.count { tree[j] += delta; j += j & -j }
    }

    /// The line and character of a scalar offset.
    func position(ofScalarOffset offset: Int) -> (line: Int, character: Int) {
        // The largest k with (sum of the first k lines' lengths) <= offset.
        var k = 0, remaining = offset
        var step = 1
        while step * 2 <= lines.count { step *= 2 }
        while step > 0 {
            if k + step <= lines.count && tree[k + step] <= remaining {
                k += step
                remaining -= tree[k]
            }
            step /= 2
        }
        if k >= lines.count {  // the very end of the text
            let last = lines.count - 1
            return (last, remaining + length(last))
        }
        precondition(remaining <= lines[k].count, "offset \(offset) is past the text")
        return (k, remaining)
    }

    /// Applies a patch; answers the edit request for it, or nil when it changes nothing (the server
    /// does not count a new version for it).
    mutating func apply(_ patch: EditingTrace.Patch) -> PlannedEdit? {
        let start = position(ofScalarOffset: patch.position)
        let end = patch.deleteCount == 0 ? start : position(ofScalarOffset: patch.position + patch.deleteCount)
        let inserted = Array(patch.text.unicodeScalars)
        precondition(!inserted.contains("\r"), "the client's copy counts lines at \\n only")
        var replacement = Array(lines[start.line][..<start.character])
        replacement += inserted
        replacement += lines[end.line][end.character...]
        // What was there, to tell a no-op.
        if patch.deleteCount == inserted.count {
            var removed: [Unicode.Scalar] = []
            if start.line == end.line {
                removed = Array(lines[start.line][start.character..<end.character])
            } else {
                removed = Array(lines[start.line][start.character...])
                for line in start.line + 1..<end.line { removed.append("\n"); removed += lines[line] }
                removed.append("\n")
                removed += lines[end.line][..<end.character]
            }
            if removed == inserted { return nil }
        }
        let edit = PlannedEdit(
            startLine: start.line, startCharacter: start.character, endLine: end.line, endCharacter: end.character,
            textJSON: JSONValue.string(patch.text).serialized())
        if start.line == end.line && !inserted.contains("\n") {
            let delta = replacement.count - lines[start.line].count
            lines[start.line] = replacement
            add(start.line, delta)
        } else {
            lines.replaceSubrange(start.line...end.line, with: ClientText.split(replacement))
            rebuild()
        }
        return edit
    }

    var text: String {
        var scalars = String.UnicodeScalarView()
        for (index, line) in lines.enumerated() {
            if index > 0 { scalars.append("\n") }
            scalars.append(contentsOf: line)
        }
        return String(scalars)
    }
}

/// A trace made ready to send: its edits (no-ops left out), the text after them, and the version
/// each edit is sent against (the document's version plus the edits before it).
struct PlannedTrace {
    var name: String
    var startContent: String
    var expectedText: String
    var edits: [PlannedEdit]
    var patches: Int
    var noOps: Int
    var nonASCII: Bool

    init(_ trace: EditingTrace, limit: Int?) {
        name = trace.name
        startContent = trace.startContent
        var copy = ClientText(trace.startContent)
        var edits: [PlannedEdit] = []
        var patches = 0, noOps = 0
        var nonASCII = trace.startContent.utf8.contains { $0 >= 0x80 }
        outer: for transaction in trace.transactions {
            for patch in transaction {
                if let limit, edits.count >= limit { break outer }
                patches += 1
                if patch.bytes.contains(where: { $0 >= 0x80 }) { nonASCII = true }
                if let edit = copy.apply(patch) { edits.append(edit) } else { noOps += 1 }
            }
        }
        self.edits = edits
        self.patches = patches
        self.noOps = noOps
        self.nonASCII = nonASCII
        expectedText = copy.text
        if limit == nil || patches == trace.patches.count {
            precondition(Array(expectedText.utf8) == Array(trace.endContent.utf8), "\(trace.name): the client's own replay differs from endContent")
        }
    }

    /// Every edit as a framed document/edit request for document `handle`, ids from `firstID`,
    /// versions from `firstVersion`: one buffer and the offsets of the frames in it.
    func frames(handle: String, firstID: Int64, firstVersion: Int64) -> (bytes: [UInt8], offsets: [Int]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(edits.count * 240 + edits.reduce(0) { $0 + $1.textJSON.count })
        var offsets: [Int] = [0]
        offsets.reserveCapacity(edits.count + 1)
        var body: [UInt8] = []
        for (index, edit) in edits.enumerated() {
            body.removeAll(keepingCapacity: true)
            body += Array("{\"jsonrpc\":\"2.0\",\"id\":\(firstID + Int64(index)),\"method\":\"document/edit\",\"params\":{\"document\":\"\(handle)\",\"version\":\(firstVersion + Int64(index)),\"edits\":[{\"range\":{\"start\":{\"line\":\(edit.startLine),\"character\":\(edit.startCharacter)},\"end\":{\"line\":\(edit.endLine),\"character\":\(edit.endCharacter)}},\"text\":".utf8)
            body += edit.textJSON
            body += Array("}]}}".utf8)
            bytes += Array("Content-Length: \(body.count)\r\n\r\n".utf8)
            bytes += body
            offsets.append(bytes.count)
        }
        return (bytes, offsets)
    }
}
