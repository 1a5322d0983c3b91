import UTF8Validation

/// A lexical check of a JSON text in Swift, run before json-c sees it.
///
/// json-c 0.16 in strict mode still lets through things a hardened server must refuse: overlong UTF-8
/// forms, encoded surrogates and lead bytes F5..FF; `NaN` and `Infinity`; single-quoted strings; raw
/// control characters in strings; lone surrogate escapes (which it turns into U+FFFD); numbers such
/// as `1.`; integer literals beyond 64 bits (which it saturates); and duplicate member names (last
/// wins). This scanner refuses all of those with a byte offset, counts nesting depth, and counts the
/// object members (the colons outside strings) so that the parser can detect a duplicate member name
/// that json-c collapsed. Structure (brackets matching, commas) is json-c's job.
struct JSONScanner {
    /// What a successful scan learned.
    struct Summary {
        /// The number of object members in the whole text.
        var memberCount = 0
        /// The number of elements of the top-level array (0 when the text is not an array), counted
        /// as the values that start directly inside it.
        var rootElementCount = 0
    }

    let maxDepth: Int

    /// Scans `bytes`; with `trackMemberNames` it also reports the first duplicate member name it
    /// can see byte for byte (the slow path, taken only after a count mismatch).
    func scan(_ bytes: UnsafeBufferPointer<UInt8>, trackMemberNames: Bool = false) throws(JSONParseError)
        -> Summary
    {
        var summary = Summary()
        var depth = 0
        var index = 0
        let count = bytes.count
        // Whether the last string ended with a \u0000 escape and no token has followed it yet.
        var lastStringHadNul = false
        // Slow-path state: the member names seen per open container (nil for arrays).
        var nameStack: [Set<[UInt8]>?] = []
        var lastString: Range<Int>? = nil
        var sawValue = false
        // Whether the text is an array: then every value starting at depth 1 is one of its elements.
        var rootIsArray = false

        while index < count {
            let byte = bytes[index]
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                index += 1
                continue
            default:
                break
            }
            if byte != UInt8(ascii: ":") { lastStringHadNul = false }
            if !sawValue {
                rootIsArray = byte == UInt8(ascii: "[")
            } else if rootIsArray, depth == 1, byte != UInt8(ascii: ","), byte != UInt8(ascii: "]") {
                summary.rootElementCount += 1
            }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maxDepth { throw JSONParseError(.nestingTooDeep(limit: maxDepth), at: index) }
                if trackMemberNames { nameStack.append(byte == UInt8(ascii: "{") ? [] : nil) }
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth > 0 { depth -= 1 }
                if trackMemberNames, !nameStack.isEmpty { nameStack.removeLast() }
                index += 1
            case UInt8(ascii: ":"):
                if lastStringHadNul { throw JSONParseError(.nulInMemberName, at: index) }
                summary.memberCount += 1
                if trackMemberNames, let name = lastString, let top = nameStack.last, var names = top {
                    let key = Array(bytes[name])
                    if names.contains(key) {
                        throw JSONParseError(
                            .duplicateMemberName(String(decoding: key, as: UTF8.self)), at: name.lowerBound - 1)
                    }
                    names.insert(key)
                    nameStack[nameStack.count - 1] = names
                }
                index += 1
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "\""):
                let start = index + 1
                let (end, hadNul) = try scanString(bytes, from: start)
                lastString = start..<end
                lastStringHadNul = hadNul
                index = end + 1
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                index = try scanNumber(bytes, from: index)
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                index = try scanLiteral(bytes, from: index)
            default:
                if byte >= 0x80 {
                    // Report broken UTF-8 as such; well-formed non-ASCII is still not a JSON token.
                    let length = try utf8SequenceLength(bytes, at: index)
                    let text = String(decoding: bytes[index..<index + length], as: UTF8.self)
                    throw JSONParseError(.unexpectedCharacter("'\(text)'"), at: index)
                }
                if Self.isLetter(byte) {
                    // Show a word such as NaN or Infinity whole.
                    var end = index
                    while end < count, end - index < 20, Self.isLetter(bytes[end]) { end += 1 }
                    let word = String(decoding: bytes[index..<end], as: UTF8.self)
                    throw JSONParseError(.unexpectedCharacter("'\(word)'"), at: index)
                }
                throw JSONParseError(.unexpectedCharacter(Self.describe(byte)), at: index)
            }
            sawValue = true
        }
        if !sawValue { throw JSONParseError(.empty, at: nil) }
        return summary
    }

    /// Scans a string body from just after its opening quote; answers the index of the closing
    /// quote and whether it contained a `\u0000` escape.
    private func scanString(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) throws(JSONParseError)
        -> (end: Int, hadNul: Bool)
    {
        var index = start
        var hadNul = false
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { return (index, hadNul) }
            if byte == UInt8(ascii: "\\") {
                guard index + 1 < count else { break }
                switch bytes[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 2
                case UInt8(ascii: "u"):
                    let unit = try hexUnit(bytes, at: index)
                    if unit == 0 { hadNul = true }
                    if (0xD800...0xDBFF).contains(unit) {
                        // A high surrogate must be followed at once by an escaped low surrogate.
                        let next = index + 6
                        if next + 1 < count, bytes[next] == UInt8(ascii: "\\"), bytes[next + 1] == UInt8(ascii: "u"),
                            let low = try? hexUnit(bytes, at: next), (0xDC00...0xDFFF).contains(low)
                        {
                            index = next + 6
                        } else {
                            throw JSONParseError(.loneSurrogateEscape(Self.escapeText(unit)), at: index)
                        }
                    } else if (0xDC00...0xDFFF).contains(unit) {
                        throw JSONParseError(.loneSurrogateEscape(Self.escapeText(unit)), at: index)
                    } else {
                        index += 6
                    }
                default:
                    throw JSONParseError(.invalidEscape, at: index)
                }
            } else if byte < 0x20 {
                throw JSONParseError(.controlCharacterInString(byte), at: index)
            } else if byte < 0x80 {
                index += 1
            } else {
                index += try utf8SequenceLength(bytes, at: index)
            }
        }
        throw JSONParseError(.unterminatedString, at: start - 1)
    }

    /// Reads the four hex digits of a `\uXXXX` escape starting at the backslash.
    private func hexUnit(_ bytes: UnsafeBufferPointer<UInt8>, at backslash: Int) throws(JSONParseError) -> UInt32 {
        guard backslash + 6 <= bytes.count else { throw JSONParseError(.invalidEscape, at: backslash) }
        var unit: UInt32 = 0
        for offset in 2..<6 {
            let byte = bytes[backslash + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONParseError(.invalidEscape, at: backslash)
            }
            unit = unit << 4 | UInt32(digit)
        }
        return unit
    }

    /// The length of the well-formed UTF-8 sequence at `index`, or an error (`UTF8Validation`'s
    /// rules: RFC 3629 and table 3-7 of the Unicode standard).
    @inline(__always)
    private func utf8SequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) throws(JSONParseError) -> Int {
        guard case .valid(let length) = UTF8Validation.checkSequence(at: index, in: bytes) else {
            throw JSONParseError(.invalidUTF8, at: index)
        }
        return length
    }

    /// Checks a number against JSON's grammar and, for integer literals, the 64-bit signed range.
    private func scanNumber(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) throws(JSONParseError) -> Int {
        var index = start
        let count = bytes.count
        func isDigit(_ i: Int) -> Bool { i < count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") }
        func text(_ end: Int) -> String {
            // Show the whole token, but not a megabyte of digits.
            var stop = end
            while stop < count, stop - start < 40, Self.isNumberByte(bytes[stop]) { stop += 1 }
            let shown = String(decoding: bytes[start..<min(stop, start + 40)], as: UTF8.self)
            return stop - start >= 40 ? shown + "..." : shown
        }
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard isDigit(index) else { throw JSONParseError(.invalidNumber(text(index)), at: start) }
        let integerStart = index
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { throw JSONParseError(.invalidNumber(text(index)), at: start) }
        } else {
            while isDigit(index) { index += 1 }
        }
        let integerEnd = index
        var isInteger = true
        if index < count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard isDigit(index) else { throw JSONParseError(.invalidNumber(text(index)), at: start) }
            while isDigit(index) { index += 1 }
        }
        if index < count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw JSONParseError(.invalidNumber(text(index)), at: start) }
            while isDigit(index) { index += 1 }
        }
        if index < count, Self.isNumberByte(bytes[index]) || Self.isLetter(bytes[index]) {
            throw JSONParseError(.invalidNumber(text(index)), at: start)
        }
        if !isInteger {
            // A number json-c would read as infinite (1e400) is refused here, where its offset is
            // known. Swift parses the token the way strtod does.
            let token = String(decoding: bytes[start..<index], as: UTF8.self)
            if let value = Double(token), !value.isFinite {
                throw JSONParseError(.nonFiniteNumber(text(index)), at: start)
            }
        }
        if isInteger {
            // Int64 spans -9223372036854775808...9223372036854775807: at most 19 digits.
            let digits = integerEnd - integerStart
            var magnitude: UInt64 = 0
            var overflow = digits > 19
            if !overflow {
                for i in integerStart..<integerEnd {
                    magnitude = magnitude * 10 + UInt64(bytes[i] - UInt8(ascii: "0"))
                }
                overflow = magnitude > (negative ? UInt64(Int64.max) + 1 : UInt64(Int64.max))
            }
            if overflow { throw JSONParseError(.integerOutOfRange(text(index)), at: start) }
        }
        return index
    }

    /// Checks that `true`, `false` or `null` is spelled out exactly.
    private func scanLiteral(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) throws(JSONParseError) -> Int {
        let literal: StaticString
        switch bytes[start] {
        case UInt8(ascii: "t"): literal = "true"
        case UInt8(ascii: "f"): literal = "false"
        default: literal = "null"
        }
        let length = literal.utf8CodeUnitCount
        var matches = start + length <= bytes.count
        if matches {
            for offset in 0..<length where bytes[start + offset] != literal.utf8Start[offset] {
                matches = false
                break
            }
        }
        if matches, start + length < bytes.count, Self.isLetter(bytes[start + length]) { matches = false }
        guard matches else {
            var end = start
            while end < bytes.count, end - start < 20, Self.isLetter(bytes[end]) { end += 1 }
            throw JSONParseError(
                .unexpectedCharacter("'\(String(decoding: bytes[start..<end], as: UTF8.self))'"), at: start)
        }
        return start + length
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"),
            UInt8(ascii: "+"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || byte == UInt8(ascii: "_")
    }

    private static func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F {
            return "'\(Character(Unicode.Scalar(byte)))'"
        }
        return "0x" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
    }

    private static func escapeText(_ unit: UInt32) -> String {
        let hex = String(unit, radix: 16, uppercase: false)
        return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
