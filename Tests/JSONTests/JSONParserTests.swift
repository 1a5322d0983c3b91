import Testing

@testable import JSON

/// Parses `text` and answers the error, failing the test if it parses.
private func refusal(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> JSONParseError? {
    do {
        let value = try JSONParser().parse(bytes)
        Issue.record("expected a refusal, got \(value.jsonText)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

private func refusal(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONParseError? {
    refusal(Array(text.utf8), sourceLocation: sourceLocation)
}

private func parse(_ text: String) throws -> JSONValue {
    try JSONParser().parse(text)
}

@Suite("Nesting depth")
struct NestingDepthTests {
    @Test("64 nested arrays are accepted")
    func sixtyFourLevels() throws {
        let text = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        var value = try parse(text)
        var depth = 0
        while case .array(let elements) = value {
            depth += 1
            value = elements.first ?? .null
        }
        #expect(depth == 64)
    }

    @Test("65 nested levels are refused at the 65th bracket")
    func sixtyFiveLevels() {
        let text = String(repeating: "{\"a\":", count: 32) + String(repeating: "[", count: 33) + "1"
            + String(repeating: "]", count: 33) + String(repeating: "}", count: 32)
        let error = refusal(text)
        #expect(error?.reason == .nestingTooDeep(limit: 64))
        #expect(error?.offset == 32 * 5 + 32)
    }

    @Test("a million nested arrays are refused without recursion trouble")
    func millionLevels() {
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000) + [UInt8](repeating: UInt8(ascii: "]"), count: 1_000_000)
        #expect(refusal(bytes)?.reason == .nestingTooDeep(limit: 64))
    }

    @Test("a smaller limit is honoured")
    func smallerLimit() throws {
        let parser = JSONParser(maxDepth: 2)
        #expect(try parser.parse("[[1]]") == [[1]])
        #expect(throws: JSONParseError(.nestingTooDeep(limit: 2), at: 2)) { try parser.parse("[[[1]]]") }
    }
}

@Suite("Strict syntax")
struct StrictSyntaxTests {
    @Test("json-c's strict mode refusals", arguments: ["[1,]", "{\"a\":1,}", "{a:1}", "[1 2]", "/* c */ 1", "{\"a\" 1}", "", "   "])
    func strictRefusals(text: String) {
        #expect(refusal(text) != nil)
    }

    @Test("single-quoted strings are refused at the quote")
    func singleQuotes() {
        #expect(refusal("{'a': 1}") == JSONParseError(.unexpectedCharacter("'''"), at: 1))
    }

    @Test("NaN and Infinity are refused as words", arguments: [("NaN", "'NaN'"), ("Infinity", "'Infinity'"), ("-Infinity", nil), ("[nan]", "'nan'")])
    func nonNumbers(text: String, shown: String?) {
        let error = refusal(text)
        #expect(error != nil)
        if let shown { #expect(error?.reason == .unexpectedCharacter(shown)) }
    }

    @Test("the whole body must be one value: data after it is refused", arguments: ["{} x", "1 2", "[1]]", "{}{}", "null null", "\"a\" \"b\""])
    func trailingData(text: String) {
        #expect(refusal(text) != nil)
    }

    @Test("whitespace around the value is fine")
    func surroundingWhitespace() throws {
        #expect(try parse(" \t\r\n{\"a\":[true,false,null]}\n ") == ["a": [true, false, nil]])
    }

    @Test("literals must be spelled out exactly", arguments: ["tru", "nul", "falsey", "trueish", "nullx"])
    func literals(text: String) {
        #expect(refusal(text) != nil)
    }
}

@Suite("Numbers")
struct NumberTests {
    @Test("JSON's number grammar", arguments: ["01", "-01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "1.5.2", "--1", "1-"])
    func grammar(text: String) {
        #expect(refusal(text) != nil)
    }

    @Test("integers at both ends of the 64-bit range are exact")
    func int64Bounds() throws {
        #expect(try parse("9223372036854775807") == .integer(.max))
        #expect(try parse("-9223372036854775808") == .integer(.min))
        #expect(try parse("-0") == .integer(0))
    }

    @Test("integers outside the 64-bit range are refused, never saturated",
        arguments: ["9223372036854775808", "-9223372036854775809", "18446744073709551616", "18446744073709551615", "123456789012345678901234567890"])
    func int64Overflow(text: String) {
        guard case .integerOutOfRange(let shown)? = refusal("[\(text)]")?.reason else {
            Issue.record("expected integerOutOfRange")
            return
        }
        #expect(shown == text)
    }

    @Test("non-finite numbers are refused at their offset", arguments: [("1e400", 0), ("-1e400", 0), ("[1,2e999]", 3), ("[1.5E+309]", 1)])
    func nonFinite(text: String, offset: Int) {
        let error = refusal(text)
        guard case .nonFiniteNumber? = error?.reason else {
            Issue.record("expected nonFiniteNumber")
            return
        }
        #expect(error?.offset == offset)
    }

    @Test("fractions and exponents are doubles; integers stay integers")
    func kinds() throws {
        #expect(try parse("1") == .integer(1))
        #expect(try parse("1.0") == .double(1))
        #expect(try parse("1e2") == .double(100))
        #expect(try parse("-2.5E-3") == .double(-0.0025))
        #expect(try parse("2.5e-400") == .double(0))
        #expect(try parse("1.7976931348623157e308") == .double(.greatestFiniteMagnitude))
    }
}

@Suite("UTF-8 validation in Swift")
struct UTF8Tests {
    @Test("malformed UTF-8 is refused at the offending byte",
        arguments: [
            ([0xC0, 0xAF], "overlong /"),
            ([0xE0, 0x80, 0xAF], "overlong 3-byte"),
            ([0xF0, 0x80, 0x80, 0xAF], "overlong 4-byte"),
            ([0xED, 0xA0, 0x80], "encoded high surrogate"),
            ([0xED, 0xBF, 0xBF], "encoded low surrogate"),
            ([0xF5, 0x80, 0x80, 0x80], "lead F5"),
            ([0xFF], "byte FF"),
            ([0x80], "lone continuation"),
            ([0xE2, 0x82], "truncated"),
            ([0xF4, 0x90, 0x80, 0x80], "above U+10FFFF"),
            ([0xC2, 0x41], "bad continuation"),
        ] as [([UInt8], String)])
    func malformed(bytes: [UInt8], what: String) {
        let body = Array("{\"k\":\"ab".utf8) + bytes + Array("\"}".utf8)
        #expect(refusal(body) == JSONParseError(.invalidUTF8, at: 8), "\(what)")
    }

    @Test("malformed UTF-8 outside strings is refused as UTF-8")
    func outsideStrings() {
        #expect(refusal([0x5B, 0xC0, 0xAF, 0x5D]) == JSONParseError(.invalidUTF8, at: 1))
    }

    @Test("well-formed multi-byte text survives", arguments: ["é", "中文", "😀", "\u{10FFFF}", "e\u{301}"])
    func wellFormed(text: String) throws {
        #expect(try parse("\"\(text)\"") == .string(text))
    }
}

@Suite("Strings")
struct StringTests {
    @Test("\\u0000 inside a string is kept, and written back escaped")
    func nulKept() throws {
        let value = try parse(#""a\u0000b""#)
        #expect(value == .string("a\u{0}b"))
        #expect(value.stringValue?.utf8.count == 3)
        #expect(value.jsonText == #""a\u0000b""#)
    }

    @Test("raw control characters in strings are refused", arguments: [0x00, 0x01, 0x09, 0x0A, 0x1F] as [UInt8])
    func rawControl(byte: UInt8) {
        let body = Array("[\"a".utf8) + [byte] + Array("\"]".utf8)
        #expect(refusal(body) == JSONParseError(.controlCharacterInString(byte), at: 3))
    }

    @Test("lone surrogate escapes are refused, not turned into U+FFFD",
        arguments: [#""\ud800""#, #""\udc00""#, #""\ud800x""#, #""\ud800\u0041""#, #""\uDBFF\uDBFF""#])
    func loneSurrogates(text: String) {
        guard case .loneSurrogateEscape? = refusal(text)?.reason else {
            Issue.record("expected loneSurrogateEscape for \(text)")
            return
        }
    }

    @Test("an escaped surrogate pair decodes to one scalar")
    func surrogatePair() throws {
        #expect(try parse(#""\ud83d\ude00""#) == "😀")
    }

    @Test("every JSON escape decodes")
    func escapes() throws {
        #expect(try parse(#""\"\\\/\b\f\n\r\t\u00e9""#) == .string("\"\\/\u{8}\u{C}\n\r\té"))
    }

    @Test("escapes JSON does not define are refused", arguments: [#""\x41""#, #""\u12""#, #""\u12G4""#, #""\a""#, #""\"#])
    func badEscapes(text: String) {
        #expect(refusal(text) != nil)
    }

    @Test("an unterminated string is refused at its opening quote")
    func unterminated() {
        #expect(refusal(#"{"a":"bc"#) == JSONParseError(.unterminatedString, at: 5))
    }
}

@Suite("Objects")
struct ObjectTests {
    @Test("duplicate member names are refused and named")
    func duplicates() {
        #expect(refusal(#"{"a":1,"b":2,"a":3}"#)?.reason == .duplicateMemberName("a"))
        #expect(refusal(#"{"x":{"v":1,"v":{"deep":[1,2]}}}"#)?.reason == .duplicateMemberName("v"))
    }

    @Test("the same name in different objects is fine")
    func sameNameElsewhere() throws {
        #expect(try parse(#"[{"a":1},{"a":2}]"#) == [["a": 1], ["a": 2]])
    }

    @Test("duplicates spelled with different escapes are still refused")
    func escapedDuplicates() {
        #expect(refusal(#"{"a":1,"\u0061":2}"#)?.reason == .duplicateMemberName(nil))
    }

    @Test("a member name containing \\u0000 is refused")
    func nulInName() {
        #expect(refusal(#"{"a\u0000b":1}"#) == JSONParseError(.nulInMemberName, at: 11))
    }

    @Test("members keep their order")
    func order() throws {
        let value = try parse(#"{"z":1,"a":2,"m":3}"#)
        #expect(value.objectValue?.keys == ["z", "a", "m"])
        #expect(value.jsonText == #"{"z":1,"a":2,"m":3}"#)
    }
}

@Suite("Elements of a top-level array (JSONParser.maxRootArrayElements)")
struct RootArrayElementsTests {
    private func parse(_ text: String, limit: Int) throws(JSONParseError) -> JSONValue {
        let parser = JSONParser()
        parser.maxRootArrayElements = limit
        return try parser.parse(text)
    }

    @Test("only the top-level array's own elements count: nested arrays, objects and strings are one each")
    func countsTopLevelElements() throws {
        let text = #"[1, [2, 3, 4], {"a": [5, 6], "b": 7}, "x,y", -8.5e1, true, null, []]"#
        #expect(try parse(text, limit: 8).arrayValue?.count == 8)
        do {
            _ = try parse(text, limit: 7)
            Issue.record("an array of 8 elements was accepted under a limit of 7")
        } catch {
            #expect(error.reason == .tooManyElements(count: 8, limit: 7))
        }
    }

    @Test("an object, a scalar and an empty array are not limited")
    func otherTexts() throws {
        #expect(try parse(#"{"a": [1, 2, 3]}"#, limit: 1)["a"]?.arrayValue?.count == 3)
        #expect(try parse("42", limit: 0) == .integer(42))
        #expect(try parse("[ ]", limit: 0) == .array([]))
    }

    @Test("a million elements are refused after the scan, before json-c builds them")
    func refusedBeforeBuilding() {
        let text = "[" + Array(repeating: "{}", count: 1_000_000).joined(separator: ",") + "]"
        do {
            _ = try parse(text, limit: 10_000)
            Issue.record("accepted")
        } catch {
            #expect(error.reason == .tooManyElements(count: 1_000_000, limit: 10_000))
        }
    }
}
