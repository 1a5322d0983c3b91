import Testing

@testable import JSON

@Suite("Serialisation through a kept json-c tree; reading json-c's tree in place")
struct ShapeCachedSerializerTests {
    @Test("a run of values, some of one shape and some not: each written exactly as serialized() writes it")
    func sameTextAsOrdinary() {
        let serializer = ShapeCachedSerializer()
        var values: [JSONValue] = []
        for id in [0, 1, 7, -3, Int64.max, Int64.min, 42] {
            values.append(["jsonrpc": "2.0", "id": .integer(id), "result": ["version": .integer(id &* 3)]])
        }
        values += [
            ["jsonrpc": "2.0", "id": "x", "result": ["version": 3]],  // a string where an integer was
            ["jsonrpc": "2.0", "id": 5, "result": ["version": 4]],
            ["jsonrpc": "2.0", "id": 5, "result": ["version": 4, "extra": true]],  // one more member
            ["jsonrpc": "2.0", "id": 5, "result": ["extra": true, "version": 4]],  // the same, reordered
            ["jsonrpc": "2.0", "id": 6, "result": ["extra": false, "version": 5]],  // a boolean changed
            ["jsonrpc": "2.0", "id": 6, "result": ["extra": nil, "version": 5]],
            ["jsonrpc": "1.0", "id": 6, "result": ["extra": nil, "version": 5]],  // a string changed
            [1, 2, [3, ["a": 4]]], [5, 6, [7, ["a": 8]]], [5, 6, [7, ["b": 8]]], [5, 6, [7]],
            ["d": 1.5], ["d": 2.5],  // doubles: not kept
            .string(String(repeating: "é", count: 100)), .integer(3), .integer(4), .null, .bool(true),
        ]
        for value in values {
            #expect(serializer.serialized(value) == value.serialized(), "\(value.jsonText)")
        }
    }

    @Test("what is kept: at most 16 nodes, strings up to 64 bytes, no doubles")
    func limits() {
        #expect(ShapeCachedSerializer.accepts(["jsonrpc": "2.0", "id": 1, "result": ["version": 2]]))
        #expect(!ShapeCachedSerializer.accepts(.array((1...16).map { .integer(Int64($0)) })))
        #expect(ShapeCachedSerializer.accepts(.array((1...15).map { .integer(Int64($0)) })))
        #expect(ShapeCachedSerializer.accepts(.string(String(repeating: "a", count: 64))))
        #expect(!ShapeCachedSerializer.accepts(.string(String(repeating: "a", count: 65))))
        #expect(!ShapeCachedSerializer.accepts(["n": 0.5]))
    }

    @Test("JSONCView reads members, integers, strings (with NUL), booleans and arrays in place")
    func view() throws {
        let text = #"{"a":1,"b":"x\u0000y","c":[true,null,-9223372036854775808],"d":{"e":2.5}}"#
        let result = try Array(text.utf8).withUnsafeBufferPointer { bytes in
            try JSONParser().withParsed(bytes) { (root) -> [String] in
                var seen: [String] = []
                seen.append("\(root.objectCount!)")
                seen.append("\(root.member("a")!.integer!)")
                seen.append(root.member("b")!.string!)
                seen.append("\(root.member("b")!.isString("x\u{0}y"))\(root.member("b")!.isString("xy"))")
                let list = root.member("c")!
                seen.append("\(list.arrayCount!) \(list.element(0).bool!) \(list.element(1).isNull) \(list.element(2).integer!)")
                seen.append("\(root.member("d")!.member("e")!.integer == nil)")
                seen.append("\(root.member("zz") == nil) \(root.member("a")!.string == nil) \(root.arrayCount == nil)")
                seen.append(try root.member("d")!.jsonValue().jsonText)
                return seen
            }.get()
        }
        #expect(result == ["4", "1", "x\u{0}y", "truefalse", "3 true true -9223372036854775808", "true", "true true true", #"{"e":2.5}"#])
    }

    @Test("withParsed applies the parser's rules: duplicate members, trailing data, syntax")
    func viewRules() {
        for text in [#"{"a":1,"a":2}"#, #"{"a":{"b":1,"b":1}}"#, #"[{"x":1,"y":2,"x":3}]"#, "{} x", "{", #"{"a":1e999}"#] {
            let outcome = Array(text.utf8).withUnsafeBufferPointer { bytes in
                Result { () throws(JSONParseError) in
                    try JSONParser().withParsed(bytes) { (root) throws(JSONParseError) -> JSONValue in try root.jsonValue() }.get()
                }
            }
            #expect(throws: JSONParseError.self, "\(text)") { try outcome.get() }
        }
    }
}
