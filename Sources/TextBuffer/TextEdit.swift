/// One change to a document as a client sends it (LSP's `TextDocumentContentChangeEvent`): replace
/// the text in `range` with `text`, or the whole document when `range` is `nil`.
///
/// Equality compares `text` byte for byte, not by Swift's canonical equivalence.
public struct TextEdit: Hashable, Sendable, CustomStringConvertible {
    /// The range to replace, in the position encoding in use; `nil` replaces the whole document.
    public var range: TextRange?
    /// The text that takes the range's place.
    public var text: String

    /// Creates an edit that replaces `range` (the whole document when `nil`) with `text`.
    public init(range: TextRange?, text: String) {
        self.range = range
        self.text = text
    }

    /// Whether two edits have the same range and byte for byte the same text.
    public static func == (lhs: TextEdit, rhs: TextEdit) -> Bool {
        lhs.range == rhs.range && lhs.text.utf8.elementsEqual(rhs.text.utf8)
    }

    /// Hashes the range and the bytes of the text.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(range)
        for byte in text.utf8 { hasher.combine(byte) }
    }

    /// The edit as `[range] "text"`, for test failures and logs.
    public var description: String {
        "[\(range.map(\.description) ?? "all")] \(String(reflecting: text))"
    }
}
