import _RopeModule

extension TextBuffer {
    /// Appends `bytes`, which must be well-formed UTF-8 on their own (no sequence cut off at
    /// either end), at the end of the text: for building a document from a file read in pieces.
    ///
    /// The bytes go straight into chunks of the rope's usual size (no `String` in between), cut
    /// neither inside a UTF-8 sequence nor inside a `\r\n`; a `\r` that ends one piece and the `\n`
    /// that starts the next end up in one chunk and count as one line break. In O(log n) plus the
    /// length of `bytes`.
    ///
    /// - Precondition: `bytes` is well-formed UTF-8. It is not checked here (the file loader has
    ///   validated it already, and a second pass would cost more than the rest of the append);
    ///   text of unknown origin goes through ``init(utf8:)`` or ``replace(utf8Range:with:)``.
    public mutating func append(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        guard !bytes.isEmpty else { return }
        cursor = nil
        // The last chunk takes part: the new bytes join it when they fit, or it is taken off
        // and cut again together with them.
        var carry: [UInt8] = []
        if !rope.isEmpty {
            var last = rope.index(before: rope.endIndex)
            let lastCount = rope[last].summary.utf8
            if lastCount + bytes.count <= Chunk.maxBytes {
                rope.update(at: &last) { $0.replaceSubrange(lastCount..<lastCount, with: bytes) }
                return
            }
            carry = rope.remove(at: last).bytes
        }
        rope.append(Rope(Chunk.chunks(of: bytes, after: carry)))
    }
}

extension Chunk {
    /// Cuts `prefix + bytes` into chunks as ``chunks(of:)`` does (about `fillBytes` each, never
    /// inside a UTF-8 sequence or a `\r\n`), without copying the two into one buffer first.
    /// `prefix` (at most `maxBytes`, as a chunk's bytes are) is never cut except before a final
    /// `\r` whose `\n` starts `bytes`; both must be well-formed UTF-8.
    static func chunks(of bytes: UnsafeBufferPointer<UInt8>, after prefix: [UInt8]) -> [Chunk] {
        var chunks: [Chunk] = []
        chunks.reserveCapacity((prefix.count + bytes.count) / fillBytes + 2)
        var start = 0  // in `bytes`
        var head = prefix
        if !head.isEmpty && head.count + bytes.count > maxBytes {
            let splitsCRLF = head.last == UTF8Scanning.carriageReturn && bytes.first == UTF8Scanning.lineFeed
            if head.count >= fillBytes {
                // Long enough to stand alone: a chunk of its own, less a `\r` that pairs with
                // the `\n` starting `bytes` (the `\r` goes on with the rest).
                if splitsCRLF {
                    chunks.append(Chunk(Array(head.dropLast())))
                    head = [UTF8Scanning.carriageReturn]
                } else {
                    chunks.append(Chunk(head))
                    head = []
                }
            }
            if !head.isEmpty {
                // Fill the head up to about `fillBytes` from `bytes`, cutting where `bytes` may
                // be cut (at 1 or later: a cut at 0 would leave a short head or split a CRLF).
                let end = bytes.count + head.count <= maxBytes
                    ? bytes.count
                    : UTF8Scanning.cutPoint(near: fillBytes - head.count, in: bytes, 0..<bytes.count)
                head.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<end]))
                chunks.append(Chunk(head))
                head = []
                start = end
            }
        }
        if !head.isEmpty {
            // Everything fits in one chunk.
            head.append(contentsOf: bytes)
            chunks.append(Chunk(head))
            return chunks
        }
        while start < bytes.count {
            var end = bytes.count
            if end - start > maxBytes {
                end = UTF8Scanning.cutPoint(near: start + fillBytes, in: bytes, start..<bytes.count)
            }
            chunks.append(Chunk(Array(UnsafeBufferPointer(rebasing: bytes[start..<end]))))
            start = end
        }
        return chunks
    }
}
