import JSON

/// Reads the named fields of a request's params, so that every complaint names the field by its
/// full path (`params.capabilities.positionEncodings[1]`) and says what was wrong.
///
/// Type checks are exact: an integer field refuses `1.5` and `"1"`, a string field refuses `1`.
/// Unknown fields are ignored, as LSP servers do, so that newer clients can talk to older servers.
public struct Params: Sendable {
    /// The object being read.
    public let object: JSONObject
    /// The path of that object, for messages.
    public let path: String

    public init(object: JSONObject, path: String) {
        self.object = object
        self.path = path
    }

    /// The params of a method that takes named params: absent and `null` read as `{}`; an array is
    /// refused.
    public init(byName params: JSONValue?, method: String) throws(ResponseError) {
        switch params {
        case nil, .null?:
            self.init(object: [:], path: "params")
        case .object(let object)?:
            self.init(object: object, path: "params")
        case let other?:
            throw ResponseError.invalidParams(
                field: "params", "\(method) takes its params by name (an object), not \(other.kindDescription)")
        }
    }

    /// Checks that a method that takes no params got none (absent, `null`, `{}` or `[]`). Anything
    /// else is refused naming the first param given, `params.name` or `params[0]`, and why.
    public static func expectNone(_ params: JSONValue?, method: String) throws(ResponseError) {
        let field: String, count: Int
        switch params {
        case nil, .null?: return
        case .object(let object)?:
            guard let first = object.keys.first else { return }
            (field, count) = (Params(object: object, path: "params").fieldPath(first), object.count)
        case .array(let array)?:
            guard !array.isEmpty else { return }
            (field, count) = ("params[0]", array.count)
        case _?:
            // The message layer refuses params that are neither an object nor an array already.
            (field, count) = ("params", 1)
        }
        let given = count > 1 ? " (the first of \(count) given)" : ""
        throw ResponseError.invalidParams(
            field: field, "not a param of \(method), which takes none\(given): send no params, or null, {} or []")
    }

    /// The full path of a member.
    public func fieldPath(_ key: String) -> String { "\(path).\(key)" }

    /// The raw value of a member, `nil` when absent or `null`.
    public func value(_ key: String) -> JSONValue? {
        switch object[key] {
        case nil, .null?: return nil
        case let value?: return value
        }
    }

    private func mismatch(_ key: String, expected: String, got value: JSONValue) -> ResponseError {
        .invalidParams(field: fieldPath(key), "expected \(expected), got \(value.kindDescription)")
    }

    /// A required string member.
    public func string(_ key: String) throws(ResponseError) -> String {
        guard let value = try optionalString(key) else {
            throw .invalidParams(field: fieldPath(key), "missing (a string is required)")
        }
        return value
    }

    /// An optional string member.
    public func optionalString(_ key: String) throws(ResponseError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let string) = value else { throw mismatch(key, expected: "a string", got: value) }
        return string
    }

    /// A required integer member within `range`.
    public func integer(_ key: String, in range: ClosedRange<Int64> = Int64.min...Int64.max) throws(ResponseError) -> Int64 {
        guard let value = try optionalInteger(key, in: range) else {
            throw .invalidParams(field: fieldPath(key), "missing (an integer is required)")
        }
        return value
    }

    /// An optional integer member within `range`.
    public func optionalInteger(_ key: String, in range: ClosedRange<Int64> = Int64.min...Int64.max) throws(ResponseError) -> Int64? {
        guard let value = value(key) else { return nil }
        guard case .integer(let integer) = value else { throw mismatch(key, expected: "an integer", got: value) }
        guard range.contains(integer) else {
            throw .invalidParams(field: fieldPath(key), "\(integer) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return integer
    }

    /// An optional boolean member.
    public func optionalBool(_ key: String) throws(ResponseError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let bool) = value else { throw mismatch(key, expected: "a boolean", got: value) }
        return bool
    }

    /// An optional object member, as params of its own.
    public func optionalObject(_ key: String) throws(ResponseError) -> Params? {
        guard let value = value(key) else { return nil }
        guard case .object(let object) = value else { throw mismatch(key, expected: "an object", got: value) }
        return Params(object: object, path: fieldPath(key))
    }

    /// An optional array of strings.
    public func optionalStringArray(_ key: String) throws(ResponseError) -> [String]? {
        guard let value = value(key) else { return nil }
        guard case .array(let elements) = value else { throw mismatch(key, expected: "an array of strings", got: value) }
        var strings: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let string) = element else {
                throw .invalidParams(field: "\(fieldPath(key))[\(index)]", "expected a string, got \(element.kindDescription)")
            }
            strings.append(string)
        }
        return strings
    }

    /// An optional string member that must be one of `allowed`.
    public func optionalEnumeration(_ key: String, _ allowed: [String]) throws(ResponseError) -> String? {
        guard let string = try optionalString(key) else { return nil }
        guard allowed.contains(string) else {
            let list = allowed.map { "\"\($0)\"" }.joined(separator: ", ")
            throw .invalidParams(field: fieldPath(key), "\"\(string)\" is not one of \(list)")
        }
        return string
    }
}
