import FileStore
import JSON
import JSONRPC
import TextBuffer

/// Reading the document methods' params into core types, naming the field on every refusal.
extension Params {
    /// LSP's `uinteger`: positions and lines are at most 2^31 - 1.
    static let positionRange: ClosedRange<Int64> = 0...Int64(Int32.max)

    /// A required `file://` URI, as an absolute path.
    func filePath(_ key: String) throws(ResponseError) -> String {
        let uri = try string(key)
        do throws(FileURI.Invalid) {
            return try FileURI.path(from: uri)
        } catch {
            throw .invalidParams(field: fieldPath(key), error.reason)
        }
    }

    /// An optional encoding name; `auto` (the default) means detect.
    func textEncoding(_ key: String) throws(ResponseError) -> TextEncoding? {
        let names = ["auto"] + TextEncoding.allCases.map(\.rawValue)
        guard let name = try optionalEnumeration(key, names), name != "auto" else { return nil }
        return TextEncoding(rawValue: name)
    }

    /// An optional LSP progress token (a string or an integer).
    func progressToken(_ key: String) throws(ResponseError) -> JSONValue? {
        guard let value = value(key) else { return nil }
        switch value {
        case .string, .integer: return value
        default: throw .invalidParams(field: fieldPath(key), "expected a string or an integer, got \(value.kindDescription)")
        }
    }

    /// This object as an LSP position `{line, character}`.
    func textPosition() throws(ResponseError) -> TextPosition {
        let line = try integer("line", in: Self.positionRange)
        let character = try integer("character", in: Self.positionRange)
        return TextPosition(line: Int(line), character: Int(character))
    }

    /// This object as an LSP range `{start, end}`.
    func textRange() throws(ResponseError) -> TextRange {
        guard let start = try optionalObject("start") else { throw .invalidParams(field: fieldPath("start"), "missing (a position is required)") }
        guard let end = try optionalObject("end") else { throw .invalidParams(field: fieldPath("end"), "missing (a position is required)") }
        return TextRange(start: try start.textPosition(), end: try end.textPosition())
    }

    /// A required list of edits `{range?, text}`; an edit without a range replaces everything.
    func textEdits(_ key: String) throws(ResponseError) -> [TextEdit] {
        guard let value = value(key) else { throw .invalidParams(field: fieldPath(key), "missing (an array of edits is required)") }
        guard case .array(let elements) = value else {
            throw .invalidParams(field: fieldPath(key), "expected an array of edits, got \(value.kindDescription)")
        }
        var edits: [TextEdit] = []
        edits.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            let path = "\(fieldPath(key))[\(index)]"
            guard case .object(let object) = element else {
                throw .invalidParams(field: path, "expected an edit object, got \(element.kindDescription)")
            }
            let edit = Params(object: object, path: path)
            let range = try edit.optionalObject("range").map { (range) throws(ResponseError) in try range.textRange() }
            edits.append(TextEdit(range: range, text: try edit.string("text")))
        }
        return edits
    }

    /// This object as a naming rule `{prefix, style, extension}` for `document/create`.
    func namingRule(defaultPrefix: String = "") throws(ResponseError) -> NamingRule {
        let prefix = try optionalString("prefix") ?? defaultPrefix
        let style = try optionalEnumeration("style", ["sequence", "uuid", "timestamp"]) ?? "sequence"
        let fileExtension = try optionalString("extension")
        do throws(NamingError) {
            return try NamingRule(prefix: prefix, style: NamingStyle(rawValue: style) ?? .sequence, fileExtension: fileExtension)
        } catch {
            // The rule's `fileExtension` is the wire's `extension`.
            throw .invalidParams(field: fieldPath(error.field == "fileExtension" ? "extension" : error.field), error.message)
        }
    }
}

/// The params of `document/edit`, read and checked: from a `JSONValue` (every refusal worded), or
/// straight from the parsed text by the connection's predecoder (``init(view:)``).
struct EditParams: PredecodedParams {
    var handle: String
    var version: Int64
    var edits: [TextEdit]
    /// `undo` as sent: whether present, and its members.
    var hasUndo = false
    var undoMerge: Bool?
    var label: String?
    var merge: Bool { undoMerge ?? false }

    init(_ rawParams: JSONValue?) throws(ResponseError) {
        let params = try Params(byName: rawParams, method: "document/edit")
        handle = try params.string("document")
        version = try params.integer("version", in: 0...Int64.max)
        edits = try params.textEdits("edits")
        let undo = try params.optionalObject("undo")
        hasUndo = undo != nil
        undoMerge = try undo?.optionalBool("merge")
        label = try undo?.optionalString("label")
    }

    /// The params read from json-c's tree when they are exactly what ``init(_:)`` accepts, with
    /// no member it does not know and no `null`; `nil` otherwise (the request then goes the
    /// ordinary way, which words the refusal or ignores the unknown member).
    init?(view params: JSONCView) {
        guard let memberCount = params.objectCount, let handle = params.member("document")?.string,
            let version = params.member("version")?.integer, version >= 0,
            let list = params.member("edits"), let editCount = list.arrayCount
        else { return nil }
        var known = 3
        if let undo = params.member("undo") {
            guard let undoCount = undo.objectCount else { return nil }
            var undoKnown = 0
            if let merge = undo.member("merge") {
                guard let value = merge.bool else { return nil }
                undoMerge = value
                undoKnown += 1
            }
            if let label = undo.member("label") {
                guard let value = label.string else { return nil }
                self.label = value
                undoKnown += 1
            }
            guard undoKnown == undoCount else { return nil }
            hasUndo = true
            known += 1
        }
        guard known == memberCount else { return nil }
        var edits: [TextEdit] = []
        edits.reserveCapacity(editCount)
        for index in 0..<editCount {
            let edit = list.element(index)
            guard let count = edit.objectCount, let text = edit.member("text")?.string else { return nil }
            var range: TextRange? = nil
            if let rangeView = edit.member("range") {
                guard rangeView.objectCount == 2, let start = rangeView.member("start").flatMap(Self.position),
                    let end = rangeView.member("end").flatMap(Self.position)
                else { return nil }
                range = TextRange(start: start, end: end)
            }
            guard count == (range == nil ? 1 : 2) else { return nil }
            edits.append(TextEdit(range: range, text: text))
        }
        self.handle = handle
        self.version = version
        self.edits = edits
    }

    /// `{line, character}`, both within LSP's `uinteger`, and nothing else.
    private static func position(_ view: JSONCView) -> TextPosition? {
        guard view.objectCount == 2, let line = view.member("line")?.integer, Params.positionRange.contains(line),
            let character = view.member("character")?.integer, Params.positionRange.contains(character)
        else { return nil }
        return TextPosition(line: Int(line), character: Int(character))
    }

    var json: JSONValue {
        var object: JSONObject = [
            "document": .string(handle), "version": .integer(version), "edits": .array(edits.map(Server.json)),
        ]
        if hasUndo {
            var undo: JSONObject = [:]
            if let undoMerge { undo["merge"] = .bool(undoMerge) }
            if let label { undo["label"] = .string(label) }
            object["undo"] = .object(undo)
        }
        return .object(object)
    }

    /// The connection's predecoder: `document/edit` only.
    static func predecode(_ method: String, _ params: JSONCView) -> (any PredecodedParams)? {
        method == "document/edit" ? EditParams(view: params) : nil
    }

    /// The request's params, predecoded or read now.
    static func of(_ request: Request) throws(ResponseError) -> EditParams {
        if let predecoded = request.predecoded as? EditParams { return predecoded }
        return try EditParams(request.params)
    }
}
