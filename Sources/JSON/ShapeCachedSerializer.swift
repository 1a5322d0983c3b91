import CJSONC

/// Serialises small JSON values through json-c, keeping the json-c tree of the last one: when the
/// next value has the same shape (the same members in the same order, the same strings, booleans
/// and nulls, integers where it had integers), only the integers are set in the kept tree before
/// json-c writes it. A typing client's stream of answers, `{"jsonrpc": "2.0", "id": 7, "result":
/// {"version": 8}}` and the next, then costs no allocation of json-c objects and tables.
///
/// The text is exactly what ``JSONValue/serialized()`` writes. Values with more than
/// ``maxNodes`` nodes, or with a double, are serialised the ordinary way and not kept. Not
/// thread-safe: its owner serialises calls.
public final class ShapeCachedSerializer {
    /// The largest value (counted in nodes: objects, arrays and leaves) whose tree is kept.
    public static let maxNodes = 16
    private var root: OpaquePointer?
    private var shape: JSONValue?
    /// The kept tree's integer leaves, depth first.
    private var integers: [OpaquePointer?] = []

    public init() {}

    deinit {
        json_object_put(root)
    }

    /// `value` as compact JSON text (see ``JSONValue/serialized()``).
    public func serialized(_ value: JSONValue) -> [UInt8] {
        if let shape {
            var leaf = 0
            if Self.setIntegers(of: value, like: shape, in: integers, leaf: &leaf) {
                return JSONValue.text(of: root)
            }
        }
        var nodes = 0
        guard Self.isCacheable(value, nodes: &nodes) else { return value.serialized() }
        json_object_put(root)
        root = value.makeJSONCObject()
        shape = value
        integers.removeAll(keepingCapacity: true)
        Self.collectIntegers(root, into: &integers)
        return JSONValue.text(of: root)
    }

    /// Walks `value` beside `shape`, setting each integer in the kept tree; answers whether the
    /// shapes agree (on `false` the tree is rebuilt, so leaves set before the mismatch do no harm).
    private static func setIntegers(of value: JSONValue, like shape: JSONValue, in leaves: [OpaquePointer?], leaf: inout Int) -> Bool {
        switch (value, shape) {
        case (.integer(let number), .integer):
            json_object_set_int64(leaves[leaf], number)
            leaf += 1
            return true
        case (.string(let a), .string(let b)):
            return a == b
        case (.bool(let a), .bool(let b)):
            return a == b
        case (.null, .null):
            return true
        case (.array(let a), .array(let b)):
            guard a.count == b.count else { return false }
            for index in a.indices where !setIntegers(of: a[index], like: b[index], in: leaves, leaf: &leaf) { return false }
            return true
        case (.object(let a), .object(let b)):
            guard a.members.count == b.members.count else { return false }
            for index in a.members.indices {
                guard a.members[index].0 == b.members[index].0,
                    setIntegers(of: a.members[index].1, like: b.members[index].1, in: leaves, leaf: &leaf)
                else { return false }
            }
            return true
        default:
            return false
        }
    }

    /// The longest string (in UTF-8 bytes) a kept tree may hold.
    public static let maxStringLength = 64

    /// Whether `value` is small enough for its tree to be kept: at most ``maxNodes`` nodes, no
    /// string longer than ``maxStringLength``, no double.
    public static func accepts(_ value: JSONValue) -> Bool {
        var nodes = 0
        return isCacheable(value, nodes: &nodes)
    }

    private static func isCacheable(_ value: JSONValue, nodes: inout Int) -> Bool {
        nodes += 1
        guard nodes <= maxNodes else { return false }
        switch value {
        case .double: return false
        case .string(let string): return string.utf8.count <= maxStringLength
        case .null, .bool, .integer: return true
        case .array(let elements): return elements.allSatisfy { isCacheable($0, nodes: &nodes) }
        case .object(let object): return object.members.allSatisfy { isCacheable($0.1, nodes: &nodes) }
        }
    }

    /// The integer leaves of a json-c tree, depth first, members in order (json-c keeps an
    /// object's insertion order, which is the `JSONObject`'s).
    private static func collectIntegers(_ object: OpaquePointer?, into leaves: inout [OpaquePointer?]) {
        switch json_object_get_type(object) {
        case json_type_int:
            leaves.append(object)
        case json_type_array:
            for index in 0..<json_object_array_length(object) {
                collectIntegers(json_object_array_get_idx(object, index), into: &leaves)
            }
        case json_type_object:
            var iterator = json_object_iter_begin(object)
            var end = json_object_iter_end(object)
            while json_object_iter_equal(&iterator, &end) == 0 {
                collectIntegers(json_object_iter_peek_value(&iterator), into: &leaves)
                json_object_iter_next(&iterator)
            }
        default:
            break
        }
    }
}
