/// What one edit did to a ``TextBuffer``, in UTF-8 offsets: enough to invert it exactly.
///
/// Equality compares the texts byte for byte, not by Swift's canonical equivalence (under which
/// "é" and "e\u{301}" are equal although their lengths differ).
public struct AppliedEdit: Hashable, Sendable, CustomStringConvertible {
    /// The UTF-8 range that was replaced, in the text before the edit.
    public var utf8Range: Range<Int>
    /// The text that was in `utf8Range` before the edit.
    public var removedText: String
    /// The text that took its place.
    public var insertedText: String

    /// Where the edit starts as an LSP position in `hintEncoding`, when the request gave it
    /// exactly. The start is the same position before and after the edit (unless it falls inside
    /// a CRLF in one of them, which ``TextBuffer/textEdit(for:encoding:)`` checks), so undoing and
    /// redoing the edit need no conversion for it. Not part of the edit's identity.
    var startHint: TextPosition?
    /// The encoding of `startHint`.
    var hintEncoding = PositionEncoding.utf16

    /// Describes a replacement of `utf8Range` (in the text before it) holding `removedText` by
    /// `insertedText`.
    public init(utf8Range: Range<Int>, removedText: String, insertedText: String) {
        self.utf8Range = utf8Range
        self.removedText = removedText
        self.insertedText = insertedText
    }

    /// The UTF-8 range the inserted text occupies after the edit.
    public var insertedUTF8Range: Range<Int> {
        utf8Range.lowerBound ..< utf8Range.lowerBound + insertedText.utf8.count
    }

    /// The edit that undoes this one, applied to the text after it.
    public var inverse: AppliedEdit {
        var inverse = AppliedEdit(utf8Range: insertedUTF8Range, removedText: insertedText, insertedText: removedText)
        inverse.startHint = startHint
        inverse.hintEncoding = hintEncoding
        return inverse
    }

    /// Whether the edit left the text as it was (byte for byte).
    public var isNoOp: Bool { removedText.utf8.elementsEqual(insertedText.utf8) }

    /// Whether two edits replaced the same range, byte for byte the same text by the same.
    public static func == (lhs: AppliedEdit, rhs: AppliedEdit) -> Bool {
        lhs.utf8Range == rhs.utf8Range && lhs.removedText.utf8.elementsEqual(rhs.removedText.utf8)
            && lhs.insertedText.utf8.elementsEqual(rhs.insertedText.utf8)
    }

    /// Hashes the range and the bytes of both texts.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(utf8Range)
        hasher.combine(removedText.utf8.count)
        for byte in removedText.utf8 { hasher.combine(byte) }
        for byte in insertedText.utf8 { hasher.combine(byte) }
    }

    /// The edit as `lower..<upper "removed" -> "inserted"`.
    public var description: String {
        "\(utf8Range) \(String(reflecting: removedText)) -> \(String(reflecting: insertedText))"
    }
}
