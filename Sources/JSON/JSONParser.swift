import CJSONC

/// Parses JSON text through json-c under the hardening rules of the project's safe-save design.
///
/// The rules, each tested: an explicit nesting limit (64 by default); json-c's strict mode with UTF-8
/// validation; the whole body parsed at once and the parse end required to equal its length; a
/// Swift-side lexical check first (see `JSONScanner`) for what json-c lets through; non-finite
/// numbers refused; integers kept exactly (the 64-bit signed range, nothing saturated); strings read
/// with their length, so `\u0000` survives.
///
/// A parser owns one json-c tokener and reuses it; it is not thread-safe. Give each thread its own.
public final class JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    public let maxDepth: Int
    /// The most elements a top-level array may have: a text that is a longer array is refused
    /// (``JSONParseError/Reason/tooManyElements(count:limit:)``) after the scanner's pass, before
    /// json-c builds anything of it. Unlimited by default; JSON-RPC bounds its batches with it.
    public var maxRootArrayElements = Int.max
    private let tokener: UnsafeMutablePointer<json_tokener>
    /// The text with its terminating NUL, as json-c is given it; reused from one parse to the next
    /// for texts shorter than ``keptBufferLimit``.
    private var scratch: [CChar] = []
    static let keptBufferLimit = 1 << 16

    /// A parser accepting at most `maxDepth` nested arrays and objects (1 to 64).
    public init(maxDepth: Int = 64) {
        precondition((1...64).contains(maxDepth), "maxDepth must be between 1 and 64")
        self.maxDepth = maxDepth
        // json-c counts the top-level value as one level of its stack; the Swift scanner enforces
        // the real limit first, so json-c's is one deeper and never the one that refuses.
        guard let tokener = json_tokener_new_ex(Int32(maxDepth + 1)) else {
            fatalError("json-c could not allocate a tokener (out of memory)")
        }
        self.tokener = tokener
        json_tokener_set_flags(tokener, Int32(JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8))
    }

    deinit {
        json_tokener_free(tokener)
    }

    /// Parses one complete JSON text.
    public func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in try parse(buffer) }
    }

    /// Parses one complete JSON text given as a string.
    public func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses one complete JSON text.
    public func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONValue {
        let (root, summary) = try parseTree(bytes)
        defer { json_object_put(root) }
        var convertedMembers = 0
        let value = try Self.convert(root, members: &convertedMembers)
        if convertedMembers != summary.memberCount { try reportDuplicate(bytes) }
        return value
    }

    /// Parses one complete JSON text under the same rules as ``parse(_:)-(UnsafeBufferPointer<UInt8>)``
    /// and hands `body` a view of json-c's tree, valid only during the call: a reader that knows
    /// the shape it expects (an edit request, say) takes its values straight from the tree
    /// instead of building a `JSONValue` first; ``JSONCView/jsonValue()`` converts the rest.
    public func withParsed<R, E: Error>(
        _ bytes: UnsafeBufferPointer<UInt8>, _ body: (JSONCView) throws(E) -> R
    ) throws(JSONParseError) -> Result<R, E> {
        let (root, summary) = try parseTree(bytes)
        defer { json_object_put(root) }
        if JSONCView(root).memberCount() != summary.memberCount { try reportDuplicate(bytes) }
        do throws(E) {
            return .success(try body(JSONCView(root)))
        } catch {
            return .failure(error)
        }
    }

    /// The scanner's check, then json-c's parse of the whole text; the caller releases the tree.
    private func parseTree(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> (OpaquePointer?, JSONScanner.Summary) {
        let summary = try JSONScanner(maxDepth: maxDepth).scan(bytes)
        if summary.rootElementCount > maxRootArrayElements {
            throw JSONParseError(.tooManyElements(count: summary.rootElementCount, limit: maxRootArrayElements), at: nil)
        }
        let count = bytes.count
        guard count < Int(Int32.max) else { throw JSONParseError(.syntax("text longer than 2 GiB"), at: nil) }

        // json-c finishes a top-level number only when it sees the terminating NUL, so the body is
        // passed with one (the scanner has refused any NUL inside it). The buffer is kept for
        // small texts (a typing client's requests); a large one gets its own, freed at once, so
        // that one big message does not leave its size allocated for the parser's life.
        let parse = { (terminated: UnsafeMutableBufferPointer<CChar>) -> OpaquePointer? in
            if let base = bytes.baseAddress {
                UnsafeMutableRawPointer(terminated.baseAddress!).copyMemory(from: base, byteCount: count)
            }
            terminated[count] = 0
            json_tokener_reset(self.tokener)
            return json_tokener_parse_ex(self.tokener, terminated.baseAddress, Int32(count + 1))
        }
        let root: OpaquePointer?
        if count < Self.keptBufferLimit {
            if scratch.count < count + 1 { scratch = [CChar](repeating: 0, count: Self.keptBufferLimit) }
            root = scratch.withUnsafeMutableBufferPointer { parse($0) }
        } else {
            let terminated = UnsafeMutableBufferPointer<CChar>.allocate(capacity: count + 1)
            defer { terminated.deallocate() }
            root = parse(terminated)
        }
        let error = json_tokener_get_error(tokener)
        let end = json_tokener_get_parse_end(tokener)
        guard error == json_tokener_success else {
            json_object_put(root)
            var description = String(cString: json_tokener_error_desc(error))
            let offset = min(end, count)
            if offset < count, bytes[offset] >= 0x21, bytes[offset] < 0x7F {
                description += " '\(Character(Unicode.Scalar(bytes[offset])))'"
            }
            throw JSONParseError(.syntax(description), at: offset)
        }
        guard end == count else {
            json_object_put(root)
            throw JSONParseError(.trailingData, at: end)
        }
        return (root, summary)
    }

    /// json-c kept only the last of two members with the same name: finds the name for the message
    /// (if its two spellings differ only by escapes, it reports it without one) and throws.
    private func reportDuplicate(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> Never {
        _ = try JSONScanner(maxDepth: maxDepth).scan(bytes, trackMemberNames: true)
        throw JSONParseError(.duplicateMemberName(nil), at: nil)
    }

    /// Turns json-c's tree into `JSONValue`, refusing non-finite numbers and counting members.
    static func convert(_ object: OpaquePointer?, members: inout Int) throws(JSONParseError) -> JSONValue {
        switch json_object_get_type(object) {
        case json_type_null:
            return .null
        case json_type_boolean:
            return .bool(json_object_get_boolean(object) != 0)
        case json_type_int:
            // The scanner has range-checked every integer literal, so this read is exact.
            return .integer(json_object_get_int64(object))
        case json_type_double:
            let value = json_object_get_double(object)
            guard value.isFinite else {
                // json-c keeps the literal of a parsed double; show it.
                let literal = String(cString: json_object_to_json_string_ext(object, Int32(JSON_C_TO_STRING_PLAIN)))
                throw JSONParseError(.nonFiniteNumber(literal), at: nil)
            }
            return .double(value)
        case json_type_string:
            let length = Int(json_object_get_string_len(object))
            guard let pointer = json_object_get_string(object) else { return .string("") }
            let buffer = UnsafeRawBufferPointer(start: pointer, count: length)
            return .string(String(decoding: buffer, as: UTF8.self))
        case json_type_array:
            let length = json_object_array_length(object)
            var elements: [JSONValue] = []
            elements.reserveCapacity(length)
            for index in 0..<length {
                elements.append(try convert(json_object_array_get_idx(object, index), members: &members))
            }
            return .array(elements)
        case json_type_object:
            var result = JSONObject()
            var iterator = json_object_iter_begin(object)
            var end = json_object_iter_end(object)
            while json_object_iter_equal(&iterator, &end) == 0 {
                let name = String(cString: json_object_iter_peek_name(&iterator))
                let value = try convert(json_object_iter_peek_value(&iterator), members: &members)
                result.appendUnchecked(name, value)
                members += 1
                json_object_iter_next(&iterator)
            }
            return .object(result)
        default:
            throw JSONParseError(.syntax("unknown json-c value type"), at: nil)
        }
    }
}

extension JSONObject {
    /// Appends a member known to be new (json-c's objects have unique names).
    mutating func appendUnchecked(_ key: String, _ value: JSONValue) {
        members.append((key, value))
    }
}
