import Foundation
import JSON
import Testing
// The shared test support (TemporaryDirectory, SeededGenerator, waitUntilSync), for every file of this target.
@_exported import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

// Shared machinery of the document tests over stdio: temporary files, URIs, a client's copy of a
// document with LSP positions in each encoding, and helpers that call the document methods.

/// The position encodings a client can negotiate, by their wire names.
let positionEncodings = ["utf-8", "utf-16", "utf-32"]

/// The `file://` URI of an absolute path, every byte outside RFC 3986's unreserved set and `/`
/// percent-encoded (the form the server writes).
func fileURI(_ path: String) -> String {
    var result = "file://"
    for byte in path.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
            result.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            result += String(format: "%%%02X", byte)
        }
    }
    return result
}

/// Byte-exact text (Swift's `==` on strings is canonical equivalence: "é" equals "e\u{301}").
func utf8(_ text: String?) -> [UInt8]? { text.map { Array($0.utf8) } }

// MARK: - A client's copy of a document

/// An LSP position.
struct Position: Equatable, CustomStringConvertible {
    var line: Int
    var character: Int
    init(_ line: Int, _ character: Int) {
        self.line = line
        self.character = character
    }
    var json: JSONValue { ["line": .integer(Int64(line)), "character": .integer(Int64(character))] }
    var description: String { "\(line):\(character)" }
}

/// An LSP edit: a range (nil: the whole document) and its new text.
struct Edit: CustomStringConvertible {
    var start: Position?
    var end: Position?
    var text: String

    init(_ start: Position, _ end: Position, _ text: String) {
        self.start = start
        self.end = end
        self.text = text
    }

    init(whole text: String) { self.text = text }

    /// An edit as the server answers it in `document/undo` and `document/redo`.
    init(json: JSONValue) throws {
        guard let text = json["text"]?.stringValue else { throw E2EError("edit without text: \(json.jsonText)") }
        self.text = text
        if let range = json["range"] {
            guard let startLine = range["start"]?["line"]?.integerValue, let startCharacter = range["start"]?["character"]?.integerValue,
                let endLine = range["end"]?["line"]?.integerValue, let endCharacter = range["end"]?["character"]?.integerValue
            else { throw E2EError("malformed range: \(range.jsonText)") }
            start = Position(Int(startLine), Int(startCharacter))
            end = Position(Int(endLine), Int(endCharacter))
        }
    }

    var json: JSONValue {
        guard let start, let end else { return ["text": .string(text)] }
        return ["range": ["start": start.json, "end": end.json], "text": .string(text)]
    }

    var description: String { "[\(start.map(\.description) ?? "all")-\(end.map(\.description) ?? "")] \(String(reflecting: text))" }
}

/// A client's copy of a document, kept as an editor keeps it: lines of Unicode scalars (each with
/// its line break: `\n`, `\r\n` or `\r`), with LSP positions counted in the negotiated encoding and
/// LSP's clamping (a character past a line's end is its end; a line past the last is the end).
struct ClientText {
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// The lines; the last has no line break (and may be empty).
    private(set) var lines: [[Unicode.Scalar]]
    let encoding: String

    init(_ text: String, encoding: String) {
        lines = Self.split(Array(text.unicodeScalars))
        self.encoding = encoding
    }

    var text: String {
        var view = String.UnicodeScalarView()
        for line in lines { view.append(contentsOf: line) }
        return String(view)
    }

    var lineCount: Int { lines.count }

    /// Splits scalars into lines, each keeping its break; the remainder (maybe empty) comes last.
    static func split(_ scalars: [Unicode.Scalar]) -> [[Unicode.Scalar]] {
        var result: [[Unicode.Scalar]] = []
        var current: [Unicode.Scalar] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            current.append(scalar)
            index += 1
            if scalar == "\n" {
                result.append(current)
                current = []
            } else if scalar == "\r" {
                if index < scalars.count && scalars[index] == "\n" {
                    current.append("\n")
                    index += 1
                }
                result.append(current)
                current = []
            }
        }
        result.append(current)
        return result
    }

    func width(_ scalar: Unicode.Scalar) -> Int {
        switch encoding {
        case "utf-8": return UTF8.width(scalar)
        case "utf-16": return UTF16.width(scalar)
        default: return 1
        }
    }

    /// The number of scalars of a line without its break.
    func contentCount(_ line: Int) -> Int {
        let scalars = lines[line]
        if scalars.last == "\n" { return scalars.count >= 2 && scalars[scalars.count - 2] == "\r" ? scalars.count - 2 : scalars.count - 1 }
        if scalars.last == "\r" { return scalars.count - 1 }
        return scalars.count
    }

    /// The length of a line's content in the encoding's units.
    func lineLength(_ line: Int) -> Int { lines[line][0..<contentCount(line)].reduce(0) { $0 + width($1) } }

    /// The (line, scalar index) an LSP position names, clamped as LSP says; throws for a position
    /// inside a character's encoding or a negative one.
    func resolve(_ position: Position) throws(Invalid) -> (line: Int, index: Int) {
        guard position.line >= 0, position.character >= 0 else { throw Invalid(description: "negative position \(position)") }
        guard position.line < lines.count else { return (lines.count - 1, lines[lines.count - 1].count) }
        let content = contentCount(position.line)
        var units = 0
        for index in 0..<content {
            if units == position.character { return (position.line, index) }
            units += width(lines[position.line][index])
            if units > position.character { throw Invalid(description: "\(position) is inside a character") }
        }
        return (position.line, content)
    }

    /// The LSP position of (line, scalar index).
    func position(line: Int, index: Int) -> Position {
        Position(line, lines[line][0..<index].reduce(0) { $0 + width($1) })
    }

    /// The LSP position of a document-wide scalar offset (not between a CR and its LF).
    func position(ofScalarOffset offset: Int) -> Position {
        var remaining = offset
        for (line, scalars) in lines.enumerated() {
            if remaining < scalars.count || line == lines.count - 1 { return position(line: line, index: min(remaining, scalars.count)) }
            remaining -= scalars.count
        }
        fatalError("unreachable")
    }

    /// The scalars of a range, taken from the lines it spans only.
    func scalars(_ start: Position, _ end: Position) throws(Invalid) -> [Unicode.Scalar] {
        let (startLine, startIndex) = try resolve(start)
        let (endLine, endIndex) = try resolve(end)
        if startLine == endLine { return Array(lines[startLine][startIndex..<max(startIndex, endIndex)]) }
        var result = Array(lines[startLine][startIndex...])
        for line in (startLine + 1)..<endLine { result += lines[line] }
        return result + lines[endLine][0..<endIndex]
    }

    /// The text of a range.
    func text(_ start: Position, _ end: Position) throws(Invalid) -> String {
        let (lower, upper) = try offsets(start, end)
        var view = String.UnicodeScalarView()
        let flat = lines.flatMap { $0 }
        view.append(contentsOf: flat[lower..<upper])
        return String(view)
    }

    /// The document-wide scalar offset of a position.
    func offset(_ position: Position) throws(Invalid) -> Int {
        let (line, index) = try resolve(position)
        return lines[0..<line].reduce(0) { $0 + $1.count } + index
    }

    /// Document-wide scalar offsets of a range.
    func offsets(_ start: Position, _ end: Position) throws(Invalid) -> (Int, Int) {
        let (startLine, startIndex) = try resolve(start)
        let (endLine, endIndex) = try resolve(end)
        let lower = lines[0..<startLine].reduce(0) { $0 + $1.count } + startIndex
        let upper = lines[0..<endLine].reduce(0) { $0 + $1.count } + endIndex
        guard lower <= upper else { throw Invalid(description: "range end \(end) before start \(start)") }
        return (lower, upper)
    }

    /// Applies one LSP edit, rebuilding only the lines around it.
    mutating func apply(_ edit: Edit) throws(Invalid) {
        guard let start = edit.start, let end = edit.end else {
            lines = Self.split(Array(edit.text.unicodeScalars))
            return
        }
        guard (start.line, start.character) <= (end.line, end.character) else { throw Invalid(description: "range end \(end) before start \(start)") }
        let (startLine, startIndex) = try resolve(start)
        let (endLine, endIndex) = try resolve(end)
        // A line on each side, so that a CR and a LF meeting (or parting) are split again correctly.
        let low = max(startLine - 1, 0)
        let high = min(endLine + 1, lines.count - 1)
        var segment = lines[low...high].flatMap { $0 }
        let lower = lines[low..<startLine].reduce(0) { $0 + $1.count } + startIndex
        let upper = lines[low..<endLine].reduce(0) { $0 + $1.count } + endIndex
        segment.replaceSubrange(lower..<upper, with: Array(edit.text.unicodeScalars))
        var replacement = Self.split(segment)
        // Unless the segment reaches the end of the document, it ends with a line break, and the
        // empty remainder after it is not a line of its own.
        if high < lines.count - 1 { replacement.removeLast() }
        lines.replaceSubrange(low...high, with: replacement)
    }

    mutating func apply(_ edits: [Edit]) throws(Invalid) {
        for edit in edits { try apply(edit) }
    }
}

// MARK: - Calling the document methods

extension Session {
    /// Starts a session whose position encoding is `encoding` (checked).
    static func documents(
        encoding: String = "utf-16", arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Session {
        let session = try Session(arguments)
        let result = try session.initialize(["capabilities": ["general": ["positionEncodings": [.string(encoding)]]]])
        #expect(result["capabilities"]?["positionEncoding"] == .string(encoding), sourceLocation: sourceLocation)
        return session
    }

    /// A request that must succeed; answers its result.
    @discardableResult
    func call(_ method: String, _ params: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        let response = try request(method, params)
        guard let result = response["result"] else {
            Issue.record("\(method) \(params.jsonText) failed: \(response.jsonText)", sourceLocation: sourceLocation)
            throw E2EError("\(method) failed")
        }
        return result
    }

    /// A request that must fail with `code`; answers its `error`.
    @discardableResult
    func callFailing(
        _ method: String, _ params: JSONValue?, code: Int64, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let response = try request(method, params)
        let error = response["error"]
        #expect(error?["code"] == .integer(code), "\(method) \(params?.jsonText ?? "-"): expected \(code), got \(response.jsonText)",
            sourceLocation: sourceLocation)
        #expect(response["result"] == nil, sourceLocation: sourceLocation)
        #expect(error?["message"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        return error ?? .null
    }

    /// A request that must fail with -32602 naming `field` (in `data.field` and at the start of the
    /// message); answers its `error`.
    @discardableResult
    func callInvalid(
        _ method: String, _ params: JSONValue?, field: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let error = try callFailing(method, params, code: -32602, sourceLocation: sourceLocation)
        #expect(error["data"]?["field"] == .string(field), "\(method) \(params?.jsonText ?? "-"): \(error.jsonText)",
            sourceLocation: sourceLocation)
        #expect(error["message"]?.stringValue?.hasPrefix(field + ": ") == true, "\(error.jsonText)", sourceLocation: sourceLocation)
        return error
    }

    /// `document/open` of a path; answers the document info.
    @discardableResult
    func open(_ path: String, _ extra: JSONObject = [:], sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        var params: JSONObject = ["uri": .string(fileURI(path))]
        for (key, value) in extra { params[key] = value }
        return try call("document/open", .object(params), sourceLocation: sourceLocation)
    }

    /// `document/read`: the whole text (or a range) and the version.
    func read(_ document: String, _ range: (Position, Position)? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> (String, Int64) {
        var params: JSONObject = ["document": .string(document)]
        if let range { params["range"] = ["start": range.0.json, "end": range.1.json] }
        let result = try call("document/read", .object(params), sourceLocation: sourceLocation)
        return (result["text"]?.stringValue ?? "<no text>", result["version"]?.integerValue ?? -1)
    }

    /// `document/edit`; answers the new version.
    @discardableResult
    func edit(
        _ document: String, version: Int64, _ edits: [Edit], undo: JSONValue? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Int64 {
        var params: JSONObject = ["document": .string(document), "version": .integer(version), "edits": .array(edits.map(\.json))]
        if let undo { params["undo"] = undo }
        let result = try call("document/edit", .object(params), sourceLocation: sourceLocation)
        return result["version"]?.integerValue ?? -1
    }

    /// `document/undo` or `document/redo`; answers the new version and the edits.
    func step(_ method: String, _ document: String, version: Int64? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> (Int64, [Edit]) {
        var params: JSONObject = ["document": .string(document)]
        if let version { params["version"] = .integer(version) }
        let result = try call(method, .object(params), sourceLocation: sourceLocation)
        let edits = try (result["edits"]?.arrayValue ?? []).map(Edit.init(json:))
        return (result["version"]?.integerValue ?? -1, edits)
    }

    /// `document/state`.
    func state(_ document: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        try call("document/state", ["document": .string(document)], sourceLocation: sourceLocation)
    }
}
