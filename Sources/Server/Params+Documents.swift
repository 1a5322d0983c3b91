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

/// `document/edit` → ``EditDocumentResult``: its params read and checked from a `JSONValue` (every
/// refusal worded), or straight from the parsed text by the connection's predecoder
/// (``init(view:)``).
struct EditDocumentRequest: RequestType, PredecodedParams {
    static let method = "document/edit"
    typealias Result = EditDocumentResult
    var handle: String
    var version: Int64
    var edits: [TextEdit]
    /// `undo` as sent: whether present, and its members.
    var hasUndo = false
    var undoMerge: Bool?
    var label: String?
    var merge: Bool { undoMerge ?? false }

    init(_ rawParams: JSONValue?) throws(ResponseError) {
        try self.init(params: Params(byName: rawParams, method: Self.method))
    }

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
        version = try params.integer("version", in: 0...Int64.max)
        edits = try params.textEdits("edits")
        let undo = try params.optionalObject("undo")
        hasUndo = undo != nil
        undoMerge = try undo?.optionalBool("merge")
        label = try undo?.optionalString("label")
    }

    /// The params read from json-c's tree when they are exactly what ``init(params:)`` accepts, with
    /// no member it does not know and no `null`; `nil` otherwise (the request then goes the
    /// ordinary way, which words the refusal or ignores the unknown member).
    init?(view params: JSONCView) {
        var handle: String?, version: Int64?, list: JSONCView?
        var hasUndo = false, undoMerge: Bool?, label: String?
        // Each member once, by name; anything else (or a value of another kind) declines.
        guard params.forEachMember({ name, value in
            if JSONCView.name(name, is: "document") {
                handle = value.string
                return handle != nil
            } else if JSONCView.name(name, is: "version") {
                version = value.integer
                return version.map { $0 >= 0 } ?? false
            } else if JSONCView.name(name, is: "edits") {
                list = value
                return value.arrayCount != nil
            } else if JSONCView.name(name, is: "undo") {
                hasUndo = true
                return value.forEachMember { name, value in
                    if JSONCView.name(name, is: "merge") {
                        undoMerge = value.bool
                        return undoMerge != nil
                    } else if JSONCView.name(name, is: "label") {
                        label = value.string
                        return label != nil
                    }
                    return false
                }
            }
            return false
        }), let handle, let version, let list, let editCount = list.arrayCount else { return nil }
        var edits: [TextEdit] = []
        edits.reserveCapacity(editCount)
        for index in 0..<editCount {
            var text: String?, range: TextRange?
            guard list.element(index).forEachMember({ name, value in
                if JSONCView.name(name, is: "text") {
                    text = value.string
                    return text != nil
                } else if JSONCView.name(name, is: "range") {
                    range = Self.range(value)
                    return range != nil
                }
                return false
            }), let text else { return nil }
            edits.append(TextEdit(range: range, text: text))
        }
        self.handle = handle
        self.version = version
        self.edits = edits
        self.hasUndo = hasUndo
        self.undoMerge = undoMerge
        self.label = label
    }

    /// `{start, end}`, two positions, and nothing else.
    private static func range(_ view: JSONCView) -> TextRange? {
        var start: TextPosition?, end: TextPosition?
        guard view.forEachMember({ name, value in
            if JSONCView.name(name, is: "start") {
                start = position(value)
                return start != nil
            } else if JSONCView.name(name, is: "end") {
                end = position(value)
                return end != nil
            }
            return false
        }), let start, let end else { return nil }
        return TextRange(start: start, end: end)
    }

    /// `{line, character}`, both within LSP's `uinteger`, and nothing else.
    private static func position(_ view: JSONCView) -> TextPosition? {
        var line: Int64?, character: Int64?
        guard view.forEachMember({ name, value in
            if JSONCView.name(name, is: "line") {
                line = value.integer
            } else if JSONCView.name(name, is: "character") {
                character = value.integer
            } else {
                return false
            }
            return true
        }), let line, Params.positionRange.contains(line), let character, Params.positionRange.contains(character)
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
        method == Self.method ? EditDocumentRequest(view: params) : nil
    }

    /// The request's params, predecoded or read now.
    static func decode(_ request: Request) throws(ResponseError) -> EditDocumentRequest {
        if let predecoded = request.predecoded as? EditDocumentRequest { return predecoded }
        return try EditDocumentRequest(request.params)
    }
}
