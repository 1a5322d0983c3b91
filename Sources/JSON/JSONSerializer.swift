import CJSONC

extension JSONValue {
    /// This value as compact JSON text, serialised by json-c with `JSON_C_TO_STRING_PLAIN` and
    /// `JSON_C_TO_STRING_NOSLASHESCAPE` (no spaces, `/` written as is).
    ///
    /// Doubles are written in their shortest round-trip form (`0.1`, not `0.10000000000000001`);
    /// a non-finite double, which JSON cannot express, is written as `null`, as JavaScript does.
    /// Strings keep every character, `\u0000` included.
    public func serialized() -> [UInt8] {
        let root = makeJSONCObject()
        defer { json_object_put(root) }
        return Self.text(of: root)
    }

    /// A json-c tree's compact text, copied out of the buffer json-c owns (which the tree's
    /// release or its next serialisation reuses).
    static func text(of root: OpaquePointer?) -> [UInt8] {
        var length = 0
        guard
            let text = json_object_to_json_string_length(
                root, Int32(JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), &length)
        else { return Array("null".utf8) }
        return Array(UnsafeRawBufferPointer(start: text, count: length))
    }

    /// This value as compact JSON text (see `serialized()`).
    public var jsonText: String {
        String(decoding: serialized(), as: UTF8.self)
    }

    /// Builds a json-c tree; the caller releases it with `json_object_put`.
    func makeJSONCObject() -> OpaquePointer? {
        switch self {
        case .null:
            return nil
        case .bool(let value):
            return json_object_new_boolean(value ? 1 : 0)
        case .integer(let value):
            return json_object_new_int64(value)
        case .double(let value):
            guard value.isFinite else { return nil }
            return json_object_new_double_s(value, value.description)
        case .string(let value):
            var copy = value
            return copy.withUTF8 { buffer in
                buffer.withMemoryRebound(to: CChar.self) { chars in
                    // An empty Swift string may have no storage; json-c needs a valid pointer.
                    guard let base = chars.baseAddress else { return json_object_new_string("") }
                    return json_object_new_string_len(base, Int32(chars.count))
                }
            }
        case .array(let elements):
            let array = json_object_new_array_ext(Int32(max(elements.count, 1)))
            for element in elements {
                json_object_array_add(array, element.makeJSONCObject())
            }
            return array
        case .object(let object):
            let result = json_object_new_object()
            for (key, value) in object.members {
                // Member names in a JSONObject are unique, which lets json-c skip its lookup. The
                // name goes through `withCString`, which points at a small string's bytes in place
                // (the implicit conversion copies every name to the heap and frees it again: 12 to
                // 15% of building a small response, by callgrind's count).
                let child = value.makeJSONCObject()
                _ = key.withCString { json_object_object_add_ex(result, $0, child, UInt32(JSON_C_OBJECT_ADD_KEY_IS_NEW)) }
            }
            return result
        }
    }
}
