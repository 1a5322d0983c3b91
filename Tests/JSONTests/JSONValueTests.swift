import Testing

@testable import JSON

@Suite("JSONValue")
struct JSONValueTests {
    @Test("object equality ignores member order")
    func equalityIgnoresOrder() {
        let a: JSONValue = ["x": 1, "y": [true]]
        let b: JSONValue = ["y": [true], "x": 1]
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != ["x": 1])
    }

    @Test("getters are type-checked: nothing is coerced")
    func typeChecked() {
        let value: JSONValue = ["n": "123abc", "d": 1.5, "i": 7, "b": true]
        #expect(value["n"]?.integerValue == nil)
        #expect(value["d"]?.integerValue == nil)
        #expect(value["i"]?.integerValue == 7)
        #expect(value["i"]?.stringValue == nil)
        #expect(value["b"]?.integerValue == nil)
        #expect(value["missing"] == nil)
        #expect(value[0] == nil)
    }

    @Test("setting a member to nil removes it; setting a new one appends it")
    func mutation() {
        var object: JSONObject = ["a": 1, "b": 2]
        object["a"] = nil
        object["c"] = 3
        object["b"] = 4
        #expect(object.keys == ["b", "c"])
        #expect(object["b"] == 4)
    }
}
