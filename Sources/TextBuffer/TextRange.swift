/// A range in a document between two LSP positions; `end` is exclusive.
public struct TextRange: Hashable, Sendable, CustomStringConvertible {
    /// The first position in the range.
    public var start: TextPosition
    /// The position just past the range.
    public var end: TextPosition

    /// Creates a range from its two ends.
    public init(start: TextPosition, end: TextPosition) {
        self.start = start
        self.end = end
    }

    /// Creates a range from lines and characters: `(startLine, startCharacter)` to
    /// `(endLine, endCharacter)`.
    public init(_ startLine: Int, _ startCharacter: Int, _ endLine: Int, _ endCharacter: Int) {
        self.start = TextPosition(line: startLine, character: startCharacter)
        self.end = TextPosition(line: endLine, character: endCharacter)
    }

    /// Whether the range holds no text (its ends are the same position).
    public var isEmpty: Bool { start == end }

    /// The range as `start-end`.
    public var description: String { "\(start)-\(end)" }
}
