import _RopeModule

/// The text of a document: a rope of UTF-8 chunks that counts bytes, UTF-16 code units, Unicode
/// scalars and line breaks (`\n`, `\r\n`, `\r`), so that edits and conversions between LSP
/// positions and byte offsets take O(log n).
///
/// `TextBuffer` is a value: a copy is an O(1) snapshot that shares the rope's nodes, and a change
/// to one copy copies only the nodes it touches. A snapshot can be handed to another task (to
/// save it, say) while the original goes on changing.
///
/// Offsets are UTF-8 byte offsets from the start of the document, and must fall on scalar
/// boundaries (a precondition: they come from this type's own conversions). Positions are LSP
/// positions in a chosen ``PositionEncoding``; invalid ones are refused with a
/// ``TextBufferError``.
public struct TextBuffer: Sendable {
    /// The chunks of text.
    var rope: Rope<Chunk>
    /// The chunk changed last, to skip descents while typing (see `Cursor`).
    var cursor: Cursor?

    /// An empty document.
    public init() {
        rope = Rope()
    }

    /// A document holding `text`.
    public init(_ text: String) {
        var text = text
        rope = text.withUTF8 { TextBuffer.makeRope($0) }
    }

    /// A document holding `bytes`, or `nil` if they are not well-formed UTF-8 (overlong forms,
    /// encoded surrogates, values above U+10FFFF or truncated sequences are refused).
    public init?(utf8 bytes: some Collection<UInt8>) {
        let rope: Rope<Chunk>? = bytes.withContiguousStorageIfAvailable { buffer in
            UTF8Scanning.isValid(buffer) ? TextBuffer.makeRope(buffer) : nil
        } ?? Array(bytes).withUnsafeBufferPointer { buffer in
            UTF8Scanning.isValid(buffer) ? TextBuffer.makeRope(buffer) : nil
        }
        guard let rope else { return nil }
        self.rope = rope
    }

    static func makeRope(_ bytes: UnsafeBufferPointer<UInt8>) -> Rope<Chunk> {
        Rope(Chunk.chunks(of: bytes))
    }

    var summary: TextSummary { rope.summary }

    /// The length in UTF-8 code units (bytes).
    public var utf8Count: Int { rope.summary.utf8 }

    /// The length in UTF-16 code units.
    public var utf16Count: Int { rope.summary.utf16 }

    /// The length in Unicode scalars.
    public var scalarCount: Int { rope.summary.scalars }

    /// The number of line breaks (`\n`, `\r\n` and `\r` each count one).
    public var lineBreakCount: Int { rope.summary.lineBreaks }

    /// The number of lines: one more than the line breaks (an empty document has one empty line,
    /// and text ending in a break has an empty last line).
    public var lineCount: Int { rope.summary.lineBreaks + 1 }

    /// Whether the document is empty.
    public var isEmpty: Bool { rope.summary.utf8 == 0 }

    /// The length in `encoding`'s code units.
    public func count(in encoding: PositionEncoding) -> Int { rope.summary.units(encoding) }

    /// The whole text.
    public var text: String { text(in: 0..<utf8Count) }

    /// The text of the UTF-8 range `range`, whose bounds must be scalar boundaries.
    public func text(in range: Range<Int>) -> String {
        precondition(range.lowerBound >= 0 && range.upperBound <= utf8Count, "range out of bounds")
        guard !range.isEmpty else { return "" }
        return String(unsafeUninitializedCapacity: range.count) { output in
            copyBytes(range, into: output)
            return range.count
        }
    }

    /// The whole text as UTF-8 bytes.
    public func utf8Bytes() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: utf8Count) { output, count in
            copyBytes(0..<utf8Count, into: output)
            count = utf8Count
        }
    }

    /// Copies the bytes of `range` into `output`, which holds at least `range.count`.
    func copyBytes(_ range: Range<Int>, into output: UnsafeMutableBufferPointer<UInt8>) {
        guard !range.isEmpty else { return }
        let location = locate(utf8: range.lowerBound, preferEnd: false)
        var index = location.index
        var offset = location.local
        var written = 0
        while written < range.count {
            let bytes = rope[index].bytes
            let take = min(bytes.count - offset, range.count - written)
            bytes.withUnsafeBufferPointer { source in
                UnsafeMutableRawPointer(output.baseAddress! + written)
                    .copyMemory(from: source.baseAddress! + offset, byteCount: take)
            }
            written += take
            offset = 0
            rope.formIndex(after: &index)
        }
    }

    /// The text's chunks in order, each a valid UTF-8 array of about a kilobyte: for writing the
    /// document out without copying it whole. The arrays are shared with the buffer, not copied.
    public var utf8Chunks: UTF8Chunks { UTF8Chunks(rope: rope) }

    /// The UTF-8 chunks of a ``TextBuffer``'s text, in order.
    public struct UTF8Chunks: Sequence, Sendable {
        let rope: Rope<Chunk>

        /// Iterates over the chunks.
        public func makeIterator() -> Iterator { Iterator(base: rope.makeIterator()) }

        /// An iterator over the chunks.
        public struct Iterator: IteratorProtocol {
            var base: Rope<Chunk>.Iterator

            /// The next chunk, or `nil` after the last.
            public mutating func next() -> [UInt8]? { base.next()?.bytes }
        }
    }

    /// Whether `self` and `other` share their storage: a copy not changed since (an O(1) check
    /// that can say `false` for equal texts).
    public func isIdentical(to other: TextBuffer) -> Bool { rope.isIdentical(to: other.rope) }
}

extension TextBuffer: Equatable {
    /// Whether two buffers hold the same text.
    public static func == (lhs: TextBuffer, rhs: TextBuffer) -> Bool {
        if lhs.isIdentical(to: rhs) { return true }
        guard lhs.summary == rhs.summary else { return false }
        return lhs.utf8Bytes() == rhs.utf8Bytes()
    }
}

extension TextBuffer: CustomStringConvertible {
    /// The text, quoted, for test failures and logs.
    public var description: String { String(reflecting: text) }
}
