extension TextBuffer {
    /// Applies `edit` (an ``AppliedEdit`` recorded earlier, or its ``AppliedEdit/inverse``) to
    /// the text it was recorded against.
    ///
    /// - Precondition: the text in `edit.utf8Range` is `edit.removedText`'s length.
    public mutating func apply(_ edit: AppliedEdit) {
        precondition(edit.utf8Range.count == edit.removedText.utf8.count, "edit does not fit the text")
        replace(utf8Range: edit.utf8Range, with: edit.insertedText)
    }

    /// Applies `edits` in order, each to the result of the one before (LSP `didChange`
    /// semantics); an edit without a range replaces the whole document. All or nothing: if one is
    /// invalid, the text is left as it was and the error says which.
    ///
    /// - Returns: what each edit did, in order, for ``UndoHistory/record(_:label:merge:)``.
    /// - Throws: ``TextBufferError/invalidEdit(index:field:reason:)`` naming the first invalid
    ///   edit, the end of its range at fault, and why.
    @discardableResult
    public mutating func apply(
        edits: [TextEdit], encoding: PositionEncoding
    ) throws(TextBufferError) -> [AppliedEdit] {
        var applied: [AppliedEdit] = []
        applied.reserveCapacity(edits.count)
        for (number, edit) in edits.enumerated() {
            let range: Range<Int>
            let startIsExact: Bool
            do {
                (range, startIsExact) = try utf8Range(of: edit, encoding: encoding)
            } catch {
                // Undo what this request already did, newest first, so nothing changes.
                for done in applied.reversed() { apply(done.inverse) }
                throw .invalidEdit(index: number, field: error.field, reason: error.reason)
            }
            let removed = text(in: range)
            replace(utf8Range: range, with: edit.text)
            var done = AppliedEdit(utf8Range: range, removedText: removed, insertedText: edit.text)
            if startIsExact {
                done.startHint = edit.range?.start ?? TextPosition(line: 0, character: 0)
                done.hintEncoding = encoding
            }
            applied.append(done)
        }
        return applied
    }

    /// An error in one end of an edit's range.
    private struct FieldError: Error {
        var field: TextBufferError.EditField
        var reason: TextBufferError
    }

    /// The UTF-8 range an edit replaces and whether its start position was exact (not clamped),
    /// or which end of it is at fault.
    private func utf8Range(
        of edit: TextEdit, encoding: PositionEncoding
    ) throws(FieldError) -> (range: Range<Int>, startIsExact: Bool) {
        guard let range = edit.range else { return (0..<utf8Count, true) }
        let start: Int
        let startIsExact: Bool
        do {
            (start, startIsExact) = try resolve(range.start, encoding: encoding)
        } catch {
            throw FieldError(field: .start, reason: error)
        }
        if range.isEmpty { return (start..<start, startIsExact) }
        let end: Int
        do {
            end = try utf8Offset(of: range.end, encoding: encoding)
        } catch {
            throw FieldError(field: .end, reason: error)
        }
        guard range.start <= range.end else {
            throw FieldError(field: .range, reason: .rangeEndBeforeStart(start: range.start, end: range.end))
        }
        return (start..<end, startIsExact)
    }
}
