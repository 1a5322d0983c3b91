/// The edits that turn one text into another, for a document whose file changed on disk.
///
/// Replacing the whole text would move every cursor, selection and diagnostic in the editor to
/// the start of the document; a short list of small edits leaves everything outside them where it
/// was. So the diff aims for edits that are few and tight rather than for an optimal script:
///
/// 1. The common prefix and suffix are trimmed byte by byte, eight bytes at a time, so a 100 MB
///    file changed in a few lines costs one pass over memory before any line is looked at; then
///    back to line starts, so that the middle is whole lines.
/// 2. The differing middle is split into lines (each with its terminator: `\n`, `\r\n` or a lone
///    `\r`, as ``TextBuffer`` counts them) and compared with Myers' O(ND) algorithm, in its
///    linear-space form. Lines compare by a 64-bit hash first and by their bytes only when the
///    hashes agree. Adjacent changed lines form one hunk, and each hunk becomes one edit.
/// 3. Each hunk is trimmed again byte by byte, so a one-character change in a line is a
///    one-character edit and the cursor on that line stays put.
///
/// Every edit boundary falls on a Unicode scalar boundary and never between the `\r` and `\n` of
/// a CRLF, in the text before and after the edit: a trim that would split one backs off.
///
/// The line diff has a bound on its work (``maxEditDistance`` lines, and a budget of steps linear
/// in the input): past it, the whole differing middle becomes one edit. Two unrelated large
/// texts therefore cost about as much as reading them, never a quadratic search.
public enum TextDiff {
    /// The largest edit distance, in lines (inserted plus deleted), that the line diff searches
    /// for. Beyond it the texts are treated as unrelated in their differing middle, which is
    /// replaced in one edit: an editor gains little from thousands of tiny edits, and the search
    /// would cost O(N·D).
    public static let maxEditDistance = 4_000

    /// The edits that turn `old` into `new`, both valid UTF-8.
    ///
    /// - Returns: edits in ascending order, each against the result of the ones before it (as
    ///   ``TextBuffer/apply(_:)`` and ``UndoHistory`` take them), none overlapping or touching
    ///   another; an empty array when the texts are equal.
    public static func edits(from old: [UInt8], to new: [UInt8]) -> [AppliedEdit] {
        old.withUnsafeBufferPointer { old in
            new.withUnsafeBufferPointer { new in edits(old, new) }
        }
    }

    /// The edits that turn the text of `old` into that of `new`, as the byte version gives them
    /// for their bytes. Two snapshots of the same buffer not changed since cost O(1).
    public static func edits(from old: TextBuffer, to new: TextBuffer) -> [AppliedEdit] {
        if old.isIdentical(to: new) { return [] }
        return edits(from: old.utf8Bytes(), to: new.utf8Bytes())
    }

    /// The edits that turn `old` into `new`.
    static func edits(_ old: UnsafeBufferPointer<UInt8>, _ new: UnsafeBufferPointer<UInt8>) -> [AppliedEdit] {
        let (oldMiddle, newMiddle) = trimCommon(old, 0..<old.count, new, 0..<new.count, toLines: true)
        if oldMiddle.isEmpty && newMiddle.isEmpty { return [] }
        if oldMiddle.isEmpty || newMiddle.isEmpty {
            return [edit(old, oldMiddle, new, newMiddle)]
        }
        let oldLines = LineTable(old, oldMiddle)
        let newLines = LineTable(new, newMiddle)
        let hunks = lineHunks(old, oldLines, new, newLines)
        var edits: [AppliedEdit] = []
        edits.reserveCapacity(hunks.count)
        for hunk in hunks {
            let (oldRange, newRange) = trimCommon(
                old, oldLines.starts[hunk.old.lowerBound] ..< oldLines.starts[hunk.old.upperBound],
                new, newLines.starts[hunk.new.lowerBound] ..< newLines.starts[hunk.new.upperBound])
            // Lines that differ differ in some byte, so a hunk never trims to nothing; but should
            // it, an empty edit would only be noise.
            if oldRange.isEmpty && newRange.isEmpty { continue }
            edits.append(edit(old, oldRange, new, newRange))
        }
        return edits
    }

    /// The edit replacing `oldRange` of `old` with `newRange` of `new`, given that everything
    /// before them is equal once the earlier edits are applied: the edit starts where the new
    /// text does.
    private static func edit(
        _ old: UnsafeBufferPointer<UInt8>, _ oldRange: Range<Int>,
        _ new: UnsafeBufferPointer<UInt8>, _ newRange: Range<Int>
    ) -> AppliedEdit {
        AppliedEdit(
            utf8Range: newRange.lowerBound ..< newRange.lowerBound + oldRange.count,
            removedText: string(old, oldRange),
            insertedText: string(new, newRange))
    }

    /// The text of `range` of `bytes`, whose bounds are scalar boundaries.
    static func string(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    // MARK: Byte trimming

    /// How far the trim of the whole texts looks for a line start before settling for a byte
    /// boundary: a minified file of one huge line must not be scanned twice more.
    static let maxLineAlignment = 1 << 16

    /// `oldRange` and `newRange` without their common prefix and suffix, each end backed off as
    /// far as needed to fall on a scalar boundary and outside any CRLF in both texts.
    ///
    /// With `toLines`, the ends back off further, to line starts in both texts (when one is
    /// within ``maxLineAlignment``), so that the middle is whole lines: then a line inserted
    /// after another that ends like it is found as that line, at a line start, rather than as
    /// the same bytes shifted by the line's length ("\nnew" after "old" instead of "new\n"
    /// before the next line), and the line diff compares whole lines.
    ///
    /// The ranges' own bounds must already be such boundaries (the whole text's ends, line starts).
    static func trimCommon(
        _ old: UnsafeBufferPointer<UInt8>, _ oldRange: Range<Int>,
        _ new: UnsafeBufferPointer<UInt8>, _ newRange: Range<Int>, toLines: Bool = false
    ) -> (old: Range<Int>, new: Range<Int>) {
        let limit = min(oldRange.count, newRange.count)
        var prefix = commonPrefix(old, oldRange.lowerBound, new, newRange.lowerBound, limit)
        while prefix > 0 && !(isSafeBoundary(old, oldRange.lowerBound + prefix)
                              && isSafeBoundary(new, newRange.lowerBound + prefix)) {
            prefix -= 1
        }
        if toLines {
            var aligned = prefix
            while aligned > 0 && prefix - aligned < maxLineAlignment
                    && !(isLineStart(old, oldRange.lowerBound + aligned) && isLineStart(new, newRange.lowerBound + aligned)) {
                aligned -= 1
            }
            if aligned == 0 || prefix - aligned < maxLineAlignment { prefix = aligned }
        }
        var suffix = commonSuffix(old, oldRange.upperBound, new, newRange.upperBound, limit - prefix)
        while suffix > 0 && !(isSafeBoundary(old, oldRange.upperBound - suffix)
                              && isSafeBoundary(new, newRange.upperBound - suffix)) {
            suffix -= 1
        }
        if toLines {
            var aligned = suffix
            while aligned > 0 && suffix - aligned < maxLineAlignment
                    && !(isLineStart(old, oldRange.upperBound - aligned) && isLineStart(new, newRange.upperBound - aligned)) {
                aligned -= 1
            }
            if aligned == 0 || suffix - aligned < maxLineAlignment { suffix = aligned }
        }
        return (oldRange.lowerBound + prefix ..< oldRange.upperBound - suffix,
                newRange.lowerBound + prefix ..< newRange.upperBound - suffix)
    }

    /// Whether a line starts at `offset` of `bytes` (as ``LineTable`` splits them): the start,
    /// or just after a `\n`, or after a `\r` that no `\n` follows.
    @inline(__always)
    static func isLineStart(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int) -> Bool {
        guard offset > 0 else { return true }
        let before = bytes[offset - 1]
        if before == UTF8Scanning.lineFeed { return true }
        return before == UTF8Scanning.carriageReturn && (offset == bytes.count || bytes[offset] != UTF8Scanning.lineFeed)
    }

    /// Whether an edit may start or end at `offset` of `bytes`: a scalar boundary that does not
    /// split a CRLF (an LSP position there would be inside a line break).
    @inline(__always)
    static func isSafeBoundary(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int) -> Bool {
        guard offset > 0 && offset < bytes.count else { return true }
        let byte = bytes[offset]
        return !UTF8Scanning.isContinuation(byte)
            && !(byte == UTF8Scanning.lineFeed && bytes[offset - 1] == UTF8Scanning.carriageReturn)
    }

    /// The length of the common prefix of `a` from `aStart` and `b` from `bStart`, at most
    /// `limit`, compared a word at a time.
    static func commonPrefix(
        _ a: UnsafeBufferPointer<UInt8>, _ aStart: Int,
        _ b: UnsafeBufferPointer<UInt8>, _ bStart: Int, _ limit: Int
    ) -> Int {
        var count = 0
        while count + 8 <= limit {
            let difference = UTF8Scanning.word(a, aStart + count) ^ UTF8Scanning.word(b, bStart + count)
            // Little-endian words: the first byte in memory is the lowest.
            if difference != 0 { return count + difference.trailingZeroBitCount / 8 }
            count += 8
        }
        while count < limit && a[aStart + count] == b[bStart + count] { count += 1 }
        return count
    }

    /// The length of the common suffix of `a` up to `aEnd` and `b` up to `bEnd`, at most
    /// `limit`, compared a word at a time.
    static func commonSuffix(
        _ a: UnsafeBufferPointer<UInt8>, _ aEnd: Int,
        _ b: UnsafeBufferPointer<UInt8>, _ bEnd: Int, _ limit: Int
    ) -> Int {
        var count = 0
        while count + 8 <= limit {
            let difference = UTF8Scanning.word(a, aEnd - count - 8) ^ UTF8Scanning.word(b, bEnd - count - 8)
            // The last byte in memory is the highest.
            if difference != 0 { return count + difference.leadingZeroBitCount / 8 }
            count += 8
        }
        while count < limit && a[aEnd - count - 1] == b[bEnd - count - 1] { count += 1 }
        return count
    }

    // MARK: Line diff

    /// A run of changed lines: `old` lines of the first text replaced by `new` lines of the
    /// second (either may be empty, not both).
    struct LineHunk: Equatable {
        /// The lines removed, as indices into the first text's ``LineTable``.
        var old: Range<Int>
        /// The lines inserted, as indices into the second text's ``LineTable``.
        var new: Range<Int>
    }

    /// The changed runs of lines from `aLines` (of `a`) to `bLines` (of `b`), ascending,
    /// separated by at least one equal line. When the search exceeds its bound, one hunk covering
    /// everything between the common leading and trailing lines.
    static func lineHunks(
        _ a: UnsafeBufferPointer<UInt8>, _ aLines: LineTable,
        _ b: UnsafeBufferPointer<UInt8>, _ bLines: LineTable
    ) -> [LineHunk] {
        aLines.starts.withUnsafeBufferPointer { aStarts in
            aLines.hashes.withUnsafeBufferPointer { aHashes in
                bLines.starts.withUnsafeBufferPointer { bStarts in
                    bLines.hashes.withUnsafeBufferPointer { bHashes in
                        var differ = LineDiffer(
                            a: a, aStarts: aStarts, aHashes: aHashes,
                            b: b, bStarts: bStarts, bHashes: bHashes)
                        let n = aHashes.count, m = bHashes.count
                        if differ.diff(0, n, 0, m) { return differ.hunks }
                        // Bounded out: the whole middle, between the lines that agree at both ends.
                        var low = 0, aHigh = n, bHigh = m
                        while low < aHigh && low < bHigh && differ.equal(low, low) { low += 1 }
                        while aHigh > low && bHigh > low && differ.equal(aHigh - 1, bHigh - 1) {
                            aHigh -= 1
                            bHigh -= 1
                        }
                        if low == aHigh && low == bHigh { return [] }
                        return [LineHunk(old: low..<aHigh, new: low..<bHigh)]
                    }
                }
            }
        }
    }
}

/// The lines of a range of UTF-8 bytes: where each starts, and a hash of each for quick
/// comparison. A line includes its terminator (`\n`, `\r\n` or a lone `\r`); a last line without
/// one is a line too, and an empty range has no lines.
struct LineTable {
    /// The offset where each line starts, followed by the end of the range: `count + 1` entries,
    /// so line `i` is `starts[i] ..< starts[i + 1]`.
    var starts: [Int]
    /// A 64-bit hash of each line's bytes. Equal lines have equal hashes; the bytes decide when
    /// hashes agree.
    var hashes: [UInt64]

    /// The number of lines.
    var count: Int { hashes.count }

    /// The lines of `range` of `bytes`. A `\r` at the end of the range ends a line even if a
    /// `\n` follows outside it: callers cut ranges outside CRLFs.
    init(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        var starts = [range.lowerBound]
        let end = range.upperBound
        var offset = range.lowerBound
        while offset < end {
            // Skip words holding no line break byte: most of a text.
            while offset + 8 <= end {
                let word = UTF8Scanning.word(bytes, offset)
                if UTF8Scanning.lineFeedBytes(word) != 0 || UTF8Scanning.hasCarriageReturn(word) { break }
                offset += 8
            }
            guard offset < end else { break }
            let byte = bytes[offset]
            offset += 1
            if byte == UTF8Scanning.lineFeed {
                starts.append(offset)
            } else if byte == UTF8Scanning.carriageReturn {
                if offset < end && bytes[offset] == UTF8Scanning.lineFeed { offset += 1 }
                starts.append(offset)
            }
        }
        if starts.last! != end { starts.append(end) }
        var hashes: [UInt64] = []
        hashes.reserveCapacity(starts.count - 1)
        for line in 0 ..< starts.count - 1 {
            hashes.append(LineTable.hash(bytes, starts[line], starts[line + 1]))
        }
        self.starts = starts
        self.hashes = hashes
    }

    /// A hash of the bytes `start ..< end`, a word at a time, mixing in the length.
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> UInt64 {
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: end - start)
        var offset = start
        while offset + 8 <= end {
            hash = (hash ^ UTF8Scanning.word(bytes, offset)) &* 0xFF51_AFD7_ED55_8CCD
            hash ^= hash >> 32
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < end {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        hash = (hash ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return hash ^ (hash >> 29)
    }
}

/// Myers' O(ND) diff on lines, in linear space: find the middle snake of an optimal path by
/// searching from both ends at once, then recurse on the two halves (Myers 1986, section 4b;
/// the loop follows diff-match-patch's `bisect`).
///
/// The search is bounded twice: the edit distance of a top-level problem by
/// ``TextDiff/maxEditDistance`` and the total steps (diagonals visited plus lines compared) by a
/// budget linear in the input. Either failing makes ``diff(_:_:_:_:)`` return `false` so that
/// the caller falls back to one hunk.
struct LineDiffer {
    let a: UnsafeBufferPointer<UInt8>
    let aStarts: UnsafeBufferPointer<Int>
    let aHashes: UnsafeBufferPointer<UInt64>
    let b: UnsafeBufferPointer<UInt8>
    let bStarts: UnsafeBufferPointer<Int>
    let bHashes: UnsafeBufferPointer<UInt64>
    /// Steps left before the search gives up.
    var budget: Int
    /// The changed runs found so far, ascending, adjacent ones merged.
    var hunks: [TextDiff.LineHunk] = []

    init(a: UnsafeBufferPointer<UInt8>, aStarts: UnsafeBufferPointer<Int>, aHashes: UnsafeBufferPointer<UInt64>,
         b: UnsafeBufferPointer<UInt8>, bStarts: UnsafeBufferPointer<Int>, bHashes: UnsafeBufferPointer<UInt64>) {
        self.a = a
        self.aStarts = aStarts
        self.aHashes = aHashes
        self.b = b
        self.bStarts = bStarts
        self.bHashes = bHashes
        // Enough for a few passes over both texts per edit at the largest distance searched; a
        // fixed floor so that small inputs always get their optimal diff.
        budget = max(20_000_000, 64 * (aHashes.count + bHashes.count))
    }

    /// Whether line `i` of `a` equals line `j` of `b`: hashes first, bytes when they agree.
    @inline(__always)
    func equal(_ i: Int, _ j: Int) -> Bool {
        guard aHashes[i] == bHashes[j] else { return false }
        let aStart = aStarts[i], bStart = bStarts[j]
        let length = aStarts[i + 1] - aStart
        guard bStarts[j + 1] - bStart == length else { return false }
        return TextDiff.commonPrefix(a, aStart, b, bStart, length) == length
    }

    /// Records that lines `old` of `a` became lines `new` of `b`, merged with the previous run
    /// when they touch.
    mutating func record(_ old: Range<Int>, _ new: Range<Int>) {
        if old.isEmpty && new.isEmpty { return }
        if let last = hunks.last, last.old.upperBound == old.lowerBound, last.new.upperBound == new.lowerBound {
            hunks[hunks.count - 1] = TextDiff.LineHunk(
                old: last.old.lowerBound ..< old.upperBound, new: last.new.lowerBound ..< new.upperBound)
        } else {
            hunks.append(TextDiff.LineHunk(old: old, new: new))
        }
    }

    /// Diffs lines `aLow ..< aHigh` of `a` against `bLow ..< bHigh` of `b`, appending the changed
    /// runs to ``hunks``.
    ///
    /// - Returns: `false` if the search ran out of its bounds (``hunks`` is then incomplete).
    mutating func diff(_ aLow: Int, _ aHigh: Int, _ bLow: Int, _ bHigh: Int) -> Bool {
        var aLow = aLow, aHigh = aHigh, bLow = bLow, bHigh = bHigh
        while aLow < aHigh && bLow < bHigh && equal(aLow, bLow) {
            aLow += 1
            bLow += 1
        }
        while aLow < aHigh && bLow < bHigh && equal(aHigh - 1, bHigh - 1) {
            aHigh -= 1
            bHigh -= 1
        }
        if aLow == aHigh || bLow == bHigh {
            record(aLow..<aHigh, bLow..<bHigh)
            return true
        }
        budget -= (aHigh - aLow) + (bHigh - bLow)
        if budget < 0 { return false }
        switch bisect(aLow, aHigh, bLow, bHigh) {
        case .exhausted:
            return false
        case .split(let x, let y) where (x > 0 || y > 0) && (x < aHigh - aLow || y < bHigh - bLow):
            return diff(aLow, aLow + x, bLow, bLow + y) && diff(aLow + x, aHigh, bLow + y, bHigh)
        case .split, .disjoint:
            // No common line (or a split that would not shrink the problem): all changed.
            record(aLow..<aHigh, bLow..<bHigh)
            return true
        }
    }

    /// What the search for a middle snake found.
    enum Bisection {
        /// An optimal path passes through `(x, y)` (relative to the problem's start).
        case split(Int, Int)
        /// The lines have nothing in common.
        case disjoint
        /// The search ran out of its bounds.
        case exhausted
    }

    /// Finds a point on an optimal path through the middle of the edit graph of lines
    /// `aLow ..< aHigh` against `bLow ..< bHigh`, searching forward from the start and backward
    /// from the end, `d` edits at a time, until the two frontiers overlap. Both ranges are
    /// non-empty and their first and last lines differ.
    mutating func bisect(_ aLow: Int, _ aHigh: Int, _ bLow: Int, _ bHigh: Int) -> Bisection {
        let n = aHigh - aLow, m = bHigh - bLow
        let natural = (n + m + 1) / 2
        // Each frontier covers about half the distance, so a bound of D edits needs D/2 here.
        let cap = TextDiff.maxEditDistance / 2 + 1
        let maxD = min(natural, cap)
        let offset = maxD
        let length = 2 * maxD + 2
        var forward = [Int](repeating: -1, count: length)
        var backward = [Int](repeating: -1, count: length)
        forward[offset + 1] = 0
        backward[offset + 1] = 0
        let delta = n - m
        // With an odd delta the forward frontier meets the backward one; with an even one, the
        // backward meets the forward.
        let front = delta & 1 != 0
        var forwardStart = 0, forwardEnd = 0, backwardStart = 0, backwardEnd = 0
        for d in 0 ..< maxD {
            budget -= 2 * d + 2
            if budget < 0 { return .exhausted }
            var k1 = -d + forwardStart
            while k1 <= d - forwardEnd {
                let k1Offset = offset + k1
                var x1 = k1 == -d || (k1 != d && forward[k1Offset - 1] < forward[k1Offset + 1])
                    ? forward[k1Offset + 1] : forward[k1Offset - 1] + 1
                var y1 = x1 - k1
                let snakeStart = x1
                while x1 < n && y1 < m && equal(aLow + x1, bLow + y1) {
                    x1 += 1
                    y1 += 1
                }
                budget -= x1 - snakeStart
                forward[k1Offset] = x1
                if x1 > n {
                    forwardEnd += 2  // ran off the right of the graph
                } else if y1 > m {
                    forwardStart += 2  // ran off the bottom
                } else if front {
                    let k2Offset = offset + delta - k1
                    if k2Offset >= 0 && k2Offset < length && backward[k2Offset] != -1 {
                        let x2 = n - backward[k2Offset]
                        if x1 >= x2 { return .split(x1, y1) }
                    }
                }
                k1 += 2
            }
            var k2 = -d + backwardStart
            while k2 <= d - backwardEnd {
                let k2Offset = offset + k2
                var x2 = k2 == -d || (k2 != d && backward[k2Offset - 1] < backward[k2Offset + 1])
                    ? backward[k2Offset + 1] : backward[k2Offset - 1] + 1
                var y2 = x2 - k2
                let snakeStart = x2
                while x2 < n && y2 < m && equal(aHigh - x2 - 1, bHigh - y2 - 1) {
                    x2 += 1
                    y2 += 1
                }
                budget -= x2 - snakeStart
                backward[k2Offset] = x2
                if x2 > n {
                    backwardEnd += 2
                } else if y2 > m {
                    backwardStart += 2
                } else if !front {
                    let k1Offset = offset + delta - k2
                    if k1Offset >= 0 && k1Offset < length && forward[k1Offset] != -1 {
                        let x1 = forward[k1Offset]
                        let y1 = x1 - (k1Offset - offset)
                        if x1 >= n - x2 { return .split(x1, y1) }
                    }
                }
                k2 += 2
            }
            if budget < 0 { return .exhausted }
        }
        return maxD < natural ? .exhausted : .disjoint
    }
}
