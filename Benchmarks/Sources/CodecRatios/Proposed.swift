// The change proposed to the JSON module's serialiser (JSONSerializer.swift), measured here beside
// the module's own (`--proposed`): the module passes each member name to json-c as a Swift `String`
// where a `const char *` is expected, and for a small string (15 UTF-8 bytes or fewer: every member
// name of the protocol) that implicit conversion goes through `String.utf8CString`, a heap-allocated
// copy released right after the call (about 460 instructions a name). `withCString` copies a small
// string to the stack instead. Everything else is the module's code as it is.

import CJSONC
import JSON

extension JSONValue {
    /// `serialized()` with the member names passed through `withCString`.
    func serializedProposed() -> [UInt8] {
        let root = makeJSONCObjectProposed()
        defer { json_object_put(root) }
        var length = 0
        guard
            let text = json_object_to_json_string_length(
                root, Int32(JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), &length)
        else { return Array("null".utf8) }
        return Array(UnsafeRawBufferPointer(start: text, count: length))
    }

    private func makeJSONCObjectProposed() -> OpaquePointer? {
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
                    guard let base = chars.baseAddress else { return json_object_new_string("") }
                    return json_object_new_string_len(base, Int32(chars.count))
                }
            }
        case .array(let elements):
            let array = json_object_new_array_ext(Int32(max(elements.count, 1)))
            for element in elements {
                json_object_array_add(array, element.makeJSONCObjectProposed())
            }
            return array
        case .object(let object):
            let result = json_object_new_object()
            for (key, value) in object.members {
                let child = value.makeJSONCObjectProposed()
                key.withCString { name in
                    _ = json_object_object_add_ex(result, name, child, UInt32(JSON_C_OBJECT_ADD_KEY_IS_NEW))
                }
            }
            return result
        }
    }
}
