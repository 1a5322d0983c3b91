import _RopeModule

extension TextBuffer {
    /// The edit a client applies to its copy of this text to perform `edit`: its range in LSP
    /// positions of `encoding`, computed against this text (the text before `edit`).
    ///
    /// A range end that falls between the `\r` and `\n` of a CRLF has no LSP position, so such an
    /// end is widened over the `\r` (or the `\n`) and the text gets the same byte back; applying
    /// the result gives the same text as applying `edit`.
    public func textEdit(for edit: AppliedEdit, encoding: PositionEncoding) -> TextEdit {
        var lower = edit.utf8Range.lowerBound
        var upper = edit.utf8Range.upperBound
        var text = edit.insertedText
        var removed = edit.removedText
        if lower == upper {
            if isInsideCRLF(lower) {
                lower -= 1
                upper += 1
                text = "\r" + text + "\n"
                removed = "\r\n"
            }
        } else {
            // The byte at `lower` is the first removed one, so only a removal that starts with
            // "\n" can start inside a CRLF; likewise only one that ends with "\r" can end inside.
            if removed.utf8.first == UTF8Scanning.lineFeed, isInsideCRLF(lower) {
                lower -= 1
                text = "\r" + text
                removed = "\r" + removed
            }
            if removed.utf8.last == UTF8Scanning.carriageReturn, isInsideCRLF(upper) {
                upper += 1
                text += "\n"
                removed += "\n"
            }
        }
        let start: TextPosition
        if let hint = edit.startHint, edit.hintEncoding == encoding, lower == edit.utf8Range.lowerBound {
            start = hint
        } else {
            start = position(ofUTF8Offset: lower, encoding: encoding)
        }
        // Text without a line break ends on the same line, its length further on.
        let end: TextPosition
        if lower == upper {
            end = start
        } else if let width = TextBuffer.widthWithoutLineBreaks(removed, encoding) {
            end = TextPosition(line: start.line, character: start.character + width)
        } else {
            end = position(ofUTF8Offset: upper, encoding: encoding)
        }
        return TextEdit(range: TextRange(start: start, end: end), text: text)
    }

    /// Whether `offset` falls between the `\r` and the `\n` of a CRLF.
    public func isInsideCRLF(_ offset: Int) -> Bool {
        guard offset > 0 && offset < utf8Count else { return false }
        // A CRLF never spans two chunks, so an offset at a chunk's start is never inside one.
        let location = locate(utf8: offset, preferEnd: false)
        guard location.local > 0 else { return false }
        return rope[location.index].bytes.withUnsafeBufferPointer {
            $0[location.local - 1] == UTF8Scanning.carriageReturn && $0[location.local] == UTF8Scanning.lineFeed
        }
    }

    /// The length of `text` in `encoding`'s code units, or `nil` if it holds a line break.
    static func widthWithoutLineBreaks(_ text: String, _ encoding: PositionEncoding) -> Int? {
        var text = text
        return text.withUTF8 { bytes in
            if UTF8Scanning.lineContentEnd(from: 0, in: bytes) != bytes.count { return nil }
            return UTF8Scanning.units(encoding, bytes, 0..<bytes.count)
        }
    }
}
