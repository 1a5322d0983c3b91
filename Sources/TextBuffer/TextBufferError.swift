/// Why a position, an offset or an edit was refused. Nothing is changed when one is thrown.
///
/// The cases carry the values as the caller gave them, so a server can name the offending field
/// (for an edit, ``invalidEdit(index:field:reason:)`` says which one and which end of its range).
public indirect enum TextBufferError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which part of an edit was refused.
    public enum EditField: String, Hashable, Sendable {
        /// The start of the edit's range.
        case start = "range.start"
        /// The end of the edit's range.
        case end = "range.end"
        /// The range as a whole (its end comes before its start).
        case range = "range"
    }

    /// A negative line or character.
    case negativePosition(line: Int, character: Int)
    /// A utf-16 character offset that falls between the two halves of a surrogate pair.
    case characterInsideSurrogatePair(line: Int, character: Int)
    /// A utf-8 character offset that falls inside a multi-byte sequence.
    case characterInsideUTF8Sequence(line: Int, character: Int)
    /// A range whose end comes before its start.
    case rangeEndBeforeStart(start: TextPosition, end: TextPosition)
    /// A document-wide offset below zero or past the end; `count` is the document's length in the
    /// same unit.
    case offsetOutOfBounds(offset: Int, count: Int)
    /// A document-wide offset that falls inside one character's encoding (a surrogate pair or a
    /// multi-byte UTF-8 sequence).
    case offsetInsideCharacter(offset: Int, encoding: PositionEncoding)
    /// Edit number `index` (zero-based) of a list was refused; no edit of the list was applied.
    case invalidEdit(index: Int, field: EditField, reason: TextBufferError)

    /// A sentence saying what was wrong, for an error message.
    public var description: String {
        switch self {
        case .negativePosition(let line, let character):
            return "position \(line):\(character) is negative"
        case .characterInsideSurrogatePair(let line, let character):
            return "character \(character) of line \(line) falls inside a surrogate pair"
        case .characterInsideUTF8Sequence(let line, let character):
            return "character \(character) of line \(line) falls inside a UTF-8 sequence"
        case .rangeEndBeforeStart(let start, let end):
            return "range end \(end) comes before its start \(start)"
        case .offsetOutOfBounds(let offset, let count):
            return "offset \(offset) is outside the document (0...\(count))"
        case .offsetInsideCharacter(let offset, let encoding):
            return "\(encoding.rawValue) offset \(offset) falls inside a character"
        case .invalidEdit(let index, let field, let reason):
            return "edit \(index), \(field.rawValue): \(reason)"
        }
    }
}
