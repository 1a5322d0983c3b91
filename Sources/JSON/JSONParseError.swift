/// Why a JSON text was refused, and where: every refusal names the byte offset when one is known.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Equatable {
        /// The text is empty or only whitespace.
        case empty
        /// The bytes are not well-formed UTF-8 (overlong forms, encoded surrogates, bytes F5..FF...).
        case invalidUTF8
        /// A raw control character (below U+0020) inside a string; JSON requires it escaped.
        case controlCharacterInString(UInt8)
        /// A backslash escape that JSON does not define.
        case invalidEscape
        /// A `\uD800`-style escape of half a surrogate pair with no matching other half.
        case loneSurrogateEscape(String)
        /// A character that cannot start a JSON token here (`NaN`, `Infinity`, `'`, ...).
        case unexpectedCharacter(String)
        /// A number that does not follow JSON's grammar (`01`, `1.`, `-`, `1e`).
        case invalidNumber(String)
        /// An integer literal outside the 64-bit signed range; json-c would saturate it silently.
        case integerOutOfRange(String)
        /// A number whose value is not finite (`1e400`).
        case nonFiniteNumber(String)
        /// Arrays and objects nested deeper than the limit.
        case nestingTooDeep(limit: Int)
        /// An object names the same member twice (json-c would keep the last silently).
        case duplicateMemberName(String?)
        /// An object member name containing `\u0000`, which json-c cannot keep.
        case nulInMemberName
        /// A string that is never closed.
        case unterminatedString
        /// Anything else json-c refused, with its own description.
        case syntax(String)
        /// More text after the first complete value.
        case trailingData
        /// A top-level array with more elements than the parser accepts
        /// (``JSONParser/maxRootArrayElements``); refused before any of it was built.
        case tooManyElements(count: Int, limit: Int)
    }

    /// What was wrong.
    public let reason: Reason
    /// The byte offset in the text where the problem was found, when known.
    public let offset: Int?

    public init(_ reason: Reason, at offset: Int?) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch reason {
        case .empty: what = "the message body is empty"
        case .invalidUTF8: what = "invalid UTF-8"
        case .controlCharacterInString(let byte):
            what = "unescaped control character 0x\(String(byte, radix: 16, uppercase: true)) in a string"
        case .invalidEscape: what = "invalid escape sequence in a string"
        case .loneSurrogateEscape(let escape): what = "lone surrogate escape \(escape) in a string"
        case .unexpectedCharacter(let text): what = "unexpected character \(text)"
        case .invalidNumber(let text): what = "invalid number \(text)"
        case .integerOutOfRange(let text): what = "integer \(text) is outside the 64-bit signed range"
        case .nonFiniteNumber(let text): what = "number \(text) is not finite"
        case .nestingTooDeep(let limit): what = "arrays and objects nested deeper than \(limit) levels"
        case .duplicateMemberName(let name?): what = "duplicate member name \"\(name)\" in an object"
        case .duplicateMemberName(nil): what = "duplicate member name in an object"
        case .nulInMemberName: what = "member name contains \\u0000"
        case .unterminatedString: what = "unterminated string"
        case .syntax(let text): what = "syntax error: \(text)"
        case .trailingData: what = "unexpected data after the JSON value"
        case .tooManyElements(let count, let limit): what = "an array of \(count) elements; at most \(limit) are accepted"
        }
        if let offset { return "\(what) at byte \(offset)" }
        return what
    }
}
