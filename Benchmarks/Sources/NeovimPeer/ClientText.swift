import EditingTraces

/// One patch of a trace as both peers receive it: a range in (0-based line, UTF-8 byte column), the
/// same numbers for Neovim's `nvim_buf_set_text` (row, byte column) and for our `document/edit` in
/// utf-8 positions (line, character), and the text put there.
struct PeerEdit {
    var startLine: Int32
    var startColumn: Int32
    var endLine: Int32
    var endColumn: Int32
    var text: [UInt8]
    /// Our server's version after this edit (it does not count an edit that changes nothing).
    var version: Int64
    /// For an edit whose range spans lines: the whole lines that replace lines startLine...endLine,
    /// sent to Neovim with `nvim_buf_set_lines` instead of `nvim_buf_set_text`, which in 0.7.2
    /// corrupts the buffer after such an edit (see README.md: the first line joined is read through
    /// a dangling pointer; the text diverges and a later edit fails with "start_col out of bounds").
    var neovimLines: [[UInt8]]? = nil
}

/// The client's own model of the text, as an editor client keeps one: lines of UTF-8 bytes (without
/// their `\n`) with their scalar counts, and a cursor (line and the scalar offset of its start)
/// that follows the edits, which are local. It converts the trace's scalar offsets to
/// (line, byte column), the conversion a client makes for LSP positions.
struct ClientText {
    var lines: [[UInt8]]
    var scalars: [Int]
    var cursorLine = 0
    var cursorStart = 0  // scalar offset of the start of `cursorLine`
    /// The lines the last replace put in place of its range's lines.
    var lastPieces: [[UInt8]] = []

    init(_ text: String) {
        lines = Self.split(Array(text.utf8))
        scalars = lines.map(Self.scalarCount)
    }

    static func split(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    }

    static func scalarCount(_ line: [UInt8]) -> Int {
        var count = 0
        for byte in line where byte & 0xC0 != 0x80 { count += 1 }
        return count
    }

    var bytes: [UInt8] {
        var out: [UInt8] = []
        for (index, line) in lines.enumerated() {
            if index > 0 { out.append(0x0A) }
            out += line
        }
        return out
    }

    /// (line, byte column) of a scalar offset (the end of the text included).
    mutating func position(ofScalarOffset offset: Int) -> (line: Int, column: Int) {
        while offset < cursorStart {
            cursorLine -= 1
            cursorStart -= scalars[cursorLine] + 1
        }
        while offset > cursorStart + scalars[cursorLine] {
            precondition(cursorLine + 1 < lines.count, "offset \(offset) past the end of the text")
            cursorStart += scalars[cursorLine] + 1
            cursorLine += 1
        }
        let inLine = offset - cursorStart
        let line = lines[cursorLine]
        if line.count == scalars[cursorLine] { return (cursorLine, inLine) }  // ASCII line
        // The byte after the inLine-th scalar.
        var column = 0
        var seen = 0
        while seen < inLine {
            column += 1
            while column < line.count && line[column] & 0xC0 == 0x80 { column += 1 }
            seen += 1
        }
        return (cursorLine, column)
    }

    /// Replaces the range with `text`; answers whether the text changed (the removed bytes differ).
    mutating func replace(_ start: (line: Int, column: Int), _ end: (line: Int, column: Int), with text: [UInt8]) -> Bool {
        var removed: [UInt8] = []
        if start.line == end.line {
            removed = Array(lines[start.line][start.column..<end.column])
        } else {
            removed = Array(lines[start.line][start.column...])
            for line in start.line + 1..<end.line { removed.append(0x0A); removed += lines[line] }
            removed.append(0x0A)
            removed += lines[end.line][..<end.column]
        }
        if removed == text { return false }
        var middle = Array(lines[start.line][..<start.column])
        middle += text
        middle += lines[end.line][end.column...]
        let pieces = Self.split(middle)
        lastPieces = pieces
        lines.replaceSubrange(start.line...end.line, with: pieces)
        scalars.replaceSubrange(start.line...end.line, with: pieces.map(Self.scalarCount))
        // The cursor's line start is unchanged if it is at or before the edit's first line.
        if cursorLine > start.line {
            cursorLine = 0
            cursorStart = 0
        }
        return true
    }

    /// The trace's first `limit` patches (every patch of its transactions, in order) converted into
    /// ranges of this model; answers the edits and the text after them.
    static func edits(of trace: EditingTrace, limit: Int) -> (edits: [PeerEdit], final: [UInt8]) {
        var model = ClientText(trace.startContent)
        var edits: [PeerEdit] = []
        var version: Int64 = 1
        outer: for transaction in trace.transactions {
            for patch in transaction {
                if edits.count >= limit { break outer }
                let start = model.position(ofScalarOffset: patch.position)
                let end = model.position(ofScalarOffset: patch.position + patch.deleteCount)
                let changed = model.replace(start, end, with: patch.bytes)
                if changed { version += 1 }
                edits.append(PeerEdit(
                    startLine: Int32(start.line), startColumn: Int32(start.column), endLine: Int32(end.line),
                    endColumn: Int32(end.column), text: patch.bytes, version: version,
                    neovimLines: start.line != end.line ? (changed ? model.lastPieces : Array(model.lines[start.line...end.line])) : nil))
            }
        }
        return (edits, model.bytes)
    }
}
