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
