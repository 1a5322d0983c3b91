/// A position in a document as LSP writes it: a zero-based line and a zero-based character offset
/// within that line, counted in a ``PositionEncoding``.
///
/// Lines end at `\n`, `\r\n` or `\r`. Positions order by line, then by character.
public struct TextPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The zero-based line.
    public var line: Int
    /// The zero-based offset within the line, in code units of the position encoding in use.
    public var character: Int

    /// Creates a position from a zero-based line and character.
    public init(line: Int, character: Int) {
        self.line = line
        self.character = character
    }

    /// Orders positions by line, then by character.
    public static func < (lhs: TextPosition, rhs: TextPosition) -> Bool {
        (lhs.line, lhs.character) < (rhs.line, rhs.character)
    }

    /// The position as `line:character`, both zero-based.
    public var description: String { "\(line):\(character)" }
}
