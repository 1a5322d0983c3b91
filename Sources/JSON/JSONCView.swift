import CJSONC

#if canImport(Glibc)
    import Glibc
#endif

/// A read-only view of one value in a tree json-c has parsed, handed out by
/// ``JSONParser/withParsed(_:_:)`` and valid only during that call.
///
/// It lets a reader that knows the shape it expects take values straight from json-c's tree,
/// without building a ``JSONValue`` first (the hot path of a typing client: an edit request). Every
/// accessor answers `nil` for a value of another kind, so such a reader can give up and convert
/// the whole value with ``jsonValue()``, which applies every rule of ``JSONParser/parse(_:)-(UnsafeBufferPointer<UInt8>)``.
/// Integers read here are exact: the parser's scanner has range-checked every literal.
public struct JSONCView {
    let object: OpaquePointer?

    init(_ object: OpaquePointer?) {
        self.object = object
    }

    private var type: json_type { json_object_get_type(object) }

    /// Whether the value is `null`.
    public var isNull: Bool { type == json_type_null }

    /// The value as an integer literal; `nil` for anything else (a number with a fraction or an
    /// exponent included).
    public var integer: Int64? {
        type == json_type_int ? json_object_get_int64(object) : nil
    }

    /// The value as a boolean; `nil` for anything else.
    public var bool: Bool? {
        type == json_type_boolean ? json_object_get_boolean(object) != 0 : nil
    }

    /// The value as a string (its length read, so `\u0000` survives); `nil` for anything else.
    public var string: String? {
        guard type == json_type_string else { return nil }
        let length = Int(json_object_get_string_len(object))
        guard let pointer = json_object_get_string(object) else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
    }

    /// Whether the value is the string `expected`, compared without making a `String`.
    public func isString(_ expected: StaticString) -> Bool {
        guard type == json_type_string else { return false }
        let length = Int(json_object_get_string_len(object))
        guard length == expected.utf8CodeUnitCount, let pointer = json_object_get_string(object) else {
            return length == 0 && expected.utf8CodeUnitCount == 0
        }
        return memcmp(pointer, expected.utf8Start, length) == 0
    }

    /// The number of members, when the value is an object.
    public var objectCount: Int? {
        type == json_type_object ? Int(json_object_object_length(object)) : nil
    }

    /// The member named `name` of an object; `nil` when absent or when the value is not an object.
    public func member(_ name: StaticString) -> JSONCView? {
        guard type == json_type_object else { return nil }
        var value: OpaquePointer? = nil
        let found = name.withUTF8Buffer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { json_object_object_get_ex(object, $0.baseAddress, &value) }
        }
        return found != 0 ? JSONCView(value) : nil
    }

    /// Calls `body` with each member of an object, in order: its name (NUL-terminated, as json-c
    /// keeps it) and its value, until `body` answers false. Answers false when the value is not an
    /// object or `body` stopped early. Reads json-c's table in place: no lookup, no hashing.
    public func forEachMember(_ body: (_ name: UnsafePointer<CChar>, _ value: JSONCView) -> Bool) -> Bool {
        guard type == json_type_object, let table = json_object_get_object(object) else { return false }
        var entry = lh_table_head(table)
        while let current = entry {
            let name = lh_entry_k(current).assumingMemoryBound(to: CChar.self)
            let value = JSONCView(OpaquePointer(lh_entry_v(current)))
            guard body(name, value) else { return false }
            entry = lh_entry_next(current)
        }
        return true
    }

    /// Whether a member name handed out by ``forEachMember(_:)`` is `expected`.
    @inline(__always)
    public static func name(_ name: UnsafePointer<CChar>, is expected: StaticString) -> Bool {
        strcmp(name, UnsafeRawPointer(expected.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
    }

    /// The number of elements, when the value is an array.
    public var arrayCount: Int? {
        type == json_type_array ? Int(json_object_array_length(object)) : nil
    }

    /// The element at `index` of an array (`0..<arrayCount`).
    public func element(_ index: Int) -> JSONCView {
        JSONCView(json_object_array_get_idx(object, index))
    }

    /// The value as a ``JSONValue``, refusing non-finite numbers as ``JSONParser`` does.
    public func jsonValue() throws(JSONParseError) -> JSONValue {
        var members = 0
        return try JSONParser.convert(object, members: &members)
    }

    /// The number of object members in the whole tree (json-c keeps one of two members with the
    /// same name, so a count below the scanner's reveals a duplicate).
    func memberCount() -> Int {
        switch type {
        case json_type_object:
            var count = 0
            _ = forEachMember { _, value in
                count += 1 + value.memberCount()
                return true
            }
            return count
        case json_type_array:
            var count = 0
            for index in 0..<json_object_array_length(object) {
                count += JSONCView(json_object_array_get_idx(object, index)).memberCount()
            }
            return count
        default:
            return 0
        }
    }
}
