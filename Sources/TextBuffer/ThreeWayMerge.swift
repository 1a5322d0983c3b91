/// A line-based three-way merge (diff3), for a document edited in the editor while its file was
/// changed on disk: `base` is the text both started from (the last one read or saved), `mine` the
/// document's current text, `theirs` the file's new text.
///
/// Both sides are diffed against the base with ``TextDiff``'s line diff (under the same bound on
/// its work: past it, a side's whole differing middle counts as one change). Their changes are
/// then walked in base order, and changes of the two sides that overlap, or that touch at the same
/// base line when one of them is an insertion, are gathered into one region:
///
/// - a region changed on one side only takes that side's lines;
/// - a region both sides changed to the same lines takes them once;
/// - any other region changed on both sides is a conflict.
///
/// Two changes of different sides that are merely adjacent (one ends on the line where the other
/// starts, neither an insertion) do not conflict: their order is not in doubt. That is also what
/// makes a file whose last line lacks a newline merge like one that has it, since appending a
/// line there changes the last line (it gains the newline) instead of inserting after it.
///
/// Lines end with `\n`, `\r\n` or a lone `\r`, as ``TextBuffer`` counts them, and keep their
/// terminators, so CRLF text merges unchanged. The merge is all or nothing: it succeeds only when
/// no region conflicts, and the conflicts say where to ask the user.
///
/// **Trimming.** A conflict's texts are usually large and their changes small, so no line is split
/// or hashed outside the part of a side that differs from the base: before its line diff, each
/// side's common prefix and suffix with the base are found byte by byte (eight bytes at a time,
/// as ``TextDiff`` trims), each backed off to the nearest offset that starts a line in both texts
/// (never inside a CRLF, never inside a line), so that they are exactly the leading and trailing
/// lines the line diff would have found equal first, the suffix never reaching into the prefix.
/// Only the middle is split into lines and diffed, and the walk below then works on byte offsets
/// in the base instead of line numbers (the order of the offsets of line starts is the order of
/// the lines, so the regions are the same); line numbers are counted only for the conflicts. The
/// result is the one the untrimmed algorithm gives, with one difference by design: the line
/// diff's bound on its work grows with the lines of the middles only, as in ``TextDiff/edits(from:to:)``
/// (it makes a difference only for middles of hundreds of thousands of lines).
public enum ThreeWayMerge {
    /// The outcome of a merge: the merged text, or every conflict that prevented it.
    public enum Result: Sendable, Equatable {
        /// The merged text, valid UTF-8 when the inputs are.
        case merged([UInt8])
        /// The regions both sides changed differently, in ascending order (at least one).
        case conflicts([Conflict])
    }

    /// A region that both sides changed differently, located in all three texts so that a
    /// caller can show it, or replace it in the document once the user chose.
    public struct Conflict: Sendable, Equatable {
        /// The conflicting region as line ranges (0-based, half-open) in each text.
        public var baseLines: Range<Int>
        /// The region's lines in mine.
        public var mineLines: Range<Int>
        /// The region's lines in theirs.
        public var theirsLines: Range<Int>
        /// The UTF-8 byte range of the region in mine (the document's current text): what an
        /// edit resolving the conflict replaces.
        public var mineUTF8Range: Range<Int>
        /// The region's text in base.
        public var base: String
        /// The region's text in mine.
        public var mine: String
        /// The region's text in theirs.
        public var theirs: String

        /// A conflict with the given ranges and texts (for callers and tests that build the
        /// expected ones).
        public init(baseLines: Range<Int>, mineLines: Range<Int>, theirsLines: Range<Int>,
                    mineUTF8Range: Range<Int>, base: String, mine: String, theirs: String) {
            self.baseLines = baseLines
            self.mineLines = mineLines
            self.theirsLines = theirsLines
            self.mineUTF8Range = mineUTF8Range
            self.base = base
            self.mine = mine
            self.theirs = theirs
        }
    }

    /// Merges the changes from `base` to `mine` and from `base` to `theirs` (all valid UTF-8).
    ///
    /// - Returns: ``Result/merged(_:)`` with the text holding both sides' changes, or
    ///   ``Result/conflicts(_:)`` listing every region both changed differently.
    public static func merge(base: [UInt8], mine: [UInt8], theirs: [UInt8]) -> Result {
        base.withUnsafeBufferPointer { baseBytes in
            mine.withUnsafeBufferPointer { mineBytes in
                theirs.withUnsafeBufferPointer { theirsBytes in
                    // The common cases of a reload: nothing changed on one side (the other is
                    // taken as it is, not copied).
                    let mineHunks = hunks(baseBytes, mineBytes)
                    if mineHunks.isEmpty { return .merged(theirs) }
                    let theirsHunks = hunks(baseBytes, theirsBytes)
                    if theirsHunks.isEmpty { return .merged(mine) }
                    return merge(baseBytes, mineBytes, mineHunks, theirsBytes, theirsHunks)
                }
            }
        }
    }

    /// A run of changed lines of one side, as byte ranges: `old` of the base replaced by `new` of
    /// the side (either may be empty, not both); both start and end at line starts, or at the end.
    struct Hunk: Equatable {
        var old: Range<Int>
        var new: Range<Int>
    }

    /// The changed runs of lines from `base` to `side`, ascending, separated by at least one equal
    /// line: the line diff of the texts' differing middles (see "Trimming" above).
    static func hunks(_ base: UnsafeBufferPointer<UInt8>, _ side: UnsafeBufferPointer<UInt8>) -> [Hunk] {
        let n = base.count, m = side.count
        var prefix = TextDiff.commonPrefix(base, 0, side, 0, min(n, m))
        if prefix == n && n == m { return [] }
        while prefix > 0 && !(TextDiff.isLineStart(base, prefix) && TextDiff.isLineStart(side, prefix)) { prefix -= 1 }
        var suffix = TextDiff.commonSuffix(base, n, side, m, min(n, m) - prefix)
        while suffix > 0 && !(TextDiff.isLineStart(base, n - suffix) && TextDiff.isLineStart(side, m - suffix)) { suffix -= 1 }
        let baseLines = LineTable(base, prefix ..< n - suffix)
        let sideLines = LineTable(side, prefix ..< m - suffix)
        return TextDiff.lineHunks(base, baseLines, side, sideLines).map { hunk in
            Hunk(old: baseLines.starts[hunk.old.lowerBound] ..< baseLines.starts[hunk.old.upperBound],
                 new: sideLines.starts[hunk.new.lowerBound] ..< sideLines.starts[hunk.new.upperBound])
        }
    }

    /// Whether changes of the two sides to base ranges `x` and `y` (of lines, or of the bytes of
    /// whole lines) must be resolved together: they overlap, or one is an insertion at a line where
    /// the other starts, ends or lies.
    static func interfere(_ x: Range<Int>, _ y: Range<Int>) -> Bool {
        if x.isEmpty || y.isEmpty {
            return y.lowerBound <= x.upperBound && x.lowerBound <= y.upperBound
        }
        return x.lowerBound < y.upperBound && y.lowerBound < x.upperBound
    }

    /// Line numbers of line starts met in ascending order in one text, counted from the last one
    /// asked for: all the conflicts of a merge cost one pass over the text.
    struct LineCounter {
        let bytes: UnsafeBufferPointer<UInt8>
        private var offset = 0
        private var breaks = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        /// The line that starts at `target` (a line start, or the end of the text: then the count
        /// of lines), at or after the offset asked for last.
        mutating func line(at target: Int) -> Int {
            breaks += UTF8Scanning.lineBreaks(bytes, offset ..< target)
            offset = target
            let unterminated = target == bytes.count && target > 0 && !UTF8Scanning.isLineBreakByte(bytes[target - 1])
            return unterminated ? breaks + 1 : breaks
        }
    }

    /// The diff3 walk over both sides' hunks, in base byte offsets.
    static func merge(
        _ base: UnsafeBufferPointer<UInt8>, _ mine: UnsafeBufferPointer<UInt8>, _ mineHunks: [Hunk],
        _ theirs: UnsafeBufferPointer<UInt8>, _ theirsHunks: [Hunk]
    ) -> Result {
        func slice(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: bytes[range])
        }
        var merged: [UInt8] = []
        merged.reserveCapacity(max(mine.count, theirs.count))
        var conflicts: [Conflict] = []
        var baseCounter = LineCounter(base), mineCounter = LineCounter(mine), theirsCounter = LineCounter(theirs)
        var copied = 0  // base bytes before this offset are in `merged` (or in a region)
        // Bytes inserted minus bytes removed by each side's hunks so far: a base offset `o` outside
        // them is offset `o + shift` of that side (the bytes between hunks are equal lines).
        var mineShift = 0, theirsShift = 0
        var i = 0, j = 0
        while i < mineHunks.count || j < theirsHunks.count {
            // A region starts with the hunk that starts first in base...
            let mineFirst = i, theirsFirst = j
            var low: Int, high: Int
            if j == theirsHunks.count
                || (i < mineHunks.count && mineHunks[i].old.lowerBound <= theirsHunks[j].old.lowerBound) {
                (low, high) = (mineHunks[i].old.lowerBound, mineHunks[i].old.upperBound)
                i += 1
            } else {
                (low, high) = (theirsHunks[j].old.lowerBound, theirsHunks[j].old.upperBound)
                j += 1
            }
            // ...and takes every hunk that interferes with one of the other side already in it.
            // A side's hunks are apart from each other, so only the other side's last can.
            var grew = true
            while grew {
                grew = false
                if i < mineHunks.count, j > theirsFirst, interfere(mineHunks[i].old, theirsHunks[j - 1].old) {
                    high = max(high, mineHunks[i].old.upperBound)
                    i += 1
                    grew = true
                }
                if j < theirsHunks.count, i > mineFirst, interfere(theirsHunks[j].old, mineHunks[i - 1].old) {
                    high = max(high, theirsHunks[j].old.upperBound)
                    j += 1
                    grew = true
                }
            }
            let mineLow = low + mineShift, theirsLow = low + theirsShift
            for hunk in mineHunks[mineFirst..<i] { mineShift += hunk.new.count - hunk.old.count }
            for hunk in theirsHunks[theirsFirst..<j] { theirsShift += hunk.new.count - hunk.old.count }
            let mineRange = mineLow ..< high + mineShift
            let theirsRange = theirsLow ..< high + theirsShift
            let baseRange = low..<high

            let take: UnsafeBufferPointer<UInt8>
            if j == theirsFirst {
                take = slice(mine, mineRange)
            } else if i == mineFirst {
                take = slice(theirs, theirsRange)
            } else {
                let mineText = slice(mine, mineRange), theirsText = slice(theirs, theirsRange)
                let baseText = slice(base, baseRange)
                if mineText.elementsEqual(theirsText) || mineText.elementsEqual(baseText) {
                    take = theirsText
                } else if theirsText.elementsEqual(baseText) {
                    // Only when a bounded-out diff made a hunk of lines it did not change.
                    take = mineText
                } else {
                    conflicts.append(Conflict(
                        baseLines: baseCounter.line(at: low) ..< baseCounter.line(at: high),
                        mineLines: mineCounter.line(at: mineRange.lowerBound) ..< mineCounter.line(at: mineRange.upperBound),
                        theirsLines: theirsCounter.line(at: theirsRange.lowerBound) ..< theirsCounter.line(at: theirsRange.upperBound),
                        mineUTF8Range: mineRange,
                        base: TextDiff.string(base, baseRange), mine: TextDiff.string(mine, mineRange),
                        theirs: TextDiff.string(theirs, theirsRange)))
                    copied = high
                    continue
                }
            }
            if conflicts.isEmpty {
                merged.append(contentsOf: slice(base, copied..<low))
                merged.append(contentsOf: take)
            }
            copied = high
        }
        guard conflicts.isEmpty else { return .conflicts(conflicts) }
        merged.append(contentsOf: slice(base, copied ..< base.count))
        return .merged(merged)
    }
}

extension ThreeWayMerge {
    /// The regions where `mine` and `theirs` differ, as conflicts without a base (`base` empty,
    /// `baseLines` empty at the region's start in mine): what a merge answers when no common
    /// ancestor of the two is known, so that a user resolves each region by hand.
    public static func twoWayRegions(mine: [UInt8], theirs: [UInt8]) -> [Conflict] {
        mine.withUnsafeBufferPointer { mineBytes in
            theirs.withUnsafeBufferPointer { theirsBytes in
                var mineLines = LineCounter(mineBytes), theirsLines = LineCounter(theirsBytes)
                return hunks(mineBytes, theirsBytes).map { hunk in
                    let mineStart = mineLines.line(at: hunk.old.lowerBound), mineEnd = mineLines.line(at: hunk.old.upperBound)
                    let theirsStart = theirsLines.line(at: hunk.new.lowerBound), theirsEnd = theirsLines.line(at: hunk.new.upperBound)
                    return Conflict(
                        baseLines: mineStart..<mineStart, mineLines: mineStart..<mineEnd, theirsLines: theirsStart..<theirsEnd,
                        mineUTF8Range: hunk.old, base: "",
                        mine: String(decoding: UnsafeBufferPointer(rebasing: mineBytes[hunk.old]), as: UTF8.self),
                        theirs: String(decoding: UnsafeBufferPointer(rebasing: theirsBytes[hunk.new]), as: UTF8.self))
                }
            }
        }
    }
}
