@testable import TextBuffer
// The shared test support (SeededGenerator), for every file of this target.
@_exported import TestSupport

/// A plain model of a document, as an array of Unicode scalars with the line rules written out
/// the obvious way: what the rope is checked against.
struct ReferenceText: Equatable {
    var scalars: [Unicode.Scalar]

    init(_ text: String) {
        scalars = Array(text.unicodeScalars)
    }

    var string: String {
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars)
        return String(result)
    }

    /// The width of a scalar in code units of `encoding`.
    static func width(_ scalar: Unicode.Scalar, _ encoding: PositionEncoding) -> Int {
        switch encoding {
        case .utf8: return UTF8.width(scalar)
        case .utf16: return UTF16.width(scalar)
        case .utf32: return 1
        }
    }

    /// For each line, the scalar index where it starts and where its content ends.
    var lines: [(start: Int, end: Int)] {
        var result: [(start: Int, end: Int)] = []
        var start = 0
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\n" {
                result.append((start, index))
                index += 1
                start = index
            } else if scalar == "\r" {
                result.append((start, index))
                index += (index + 1 < scalars.count && scalars[index + 1] == "\n") ? 2 : 1
                start = index
            } else {
                index += 1
            }
        }
        result.append((start, scalars.count))
        return result
    }

    /// The scalar index of an LSP position, with LSP's clamping, or the error the buffer should
    /// throw.
    func scalarIndex(of position: TextPosition, _ encoding: PositionEncoding) -> Result<Int, TextBufferError> {
        guard position.line >= 0 && position.character >= 0 else {
            return .failure(.negativePosition(line: position.line, character: position.character))
        }
        let lines = self.lines
        guard position.line < lines.count else { return .success(scalars.count) }
        let line = lines[position.line]
        var units = 0
        var index = line.start
        while index < line.end && units < position.character {
            let width = ReferenceText.width(scalars[index], encoding)
            if units + width > position.character {
                return .failure(TextBuffer.insideError(
                    line: position.line, character: position.character, encoding: encoding))
            }
            units += width
            index += 1
        }
        return .success(index)
    }

    /// The LSP position of a scalar index (which must not fall inside a CRLF).
    func position(ofScalarIndex target: Int, _ encoding: PositionEncoding) -> TextPosition {
        let lines = self.lines
        var lineNumber = 0
        while lineNumber + 1 < lines.count && lines[lineNumber + 1].start <= target { lineNumber += 1 }
        let start = lines[lineNumber].start
        let character = scalars[start..<target].reduce(0) { $0 + ReferenceText.width($1, encoding) }
        return TextPosition(line: lineNumber, character: character)
    }

    /// The UTF-8 offset of a scalar index.
    func utf8Offset(ofScalarIndex index: Int) -> Int {
        scalars[..<index].reduce(0) { $0 + UTF8.width($1) }
    }

    /// The length in `encoding`'s code units.
    func count(_ encoding: PositionEncoding) -> Int {
        scalars.reduce(0) { $0 + ReferenceText.width($1, encoding) }
    }

    /// Applies a client edit as an editor would; the positions must be valid.
    mutating func apply(_ edit: TextEdit, _ encoding: PositionEncoding) throws {
        guard let range = edit.range else {
            scalars = Array(edit.text.unicodeScalars)
            return
        }
        let start = try scalarIndex(of: range.start, encoding).get()
        let end = try scalarIndex(of: range.end, encoding).get()
        scalars.replaceSubrange(start..<end, with: Array(edit.text.unicodeScalars))
    }
}
