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
        // The common cases of a reload: nothing changed on one side, or the same on both.
        if mine == base || mine == theirs { return .merged(theirs) }
        if theirs == base { return .merged(mine) }
        return base.withUnsafeBufferPointer { base in
            mine.withUnsafeBufferPointer { mine in
                theirs.withUnsafeBufferPointer { theirs in
                    merge(Side(base), Side(mine), Side(theirs))
                }
            }
        }
    }

    /// One of the three texts with its lines.
    struct Side {
        let bytes: UnsafeBufferPointer<UInt8>
        let lines: LineTable

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            lines = LineTable(bytes, 0..<bytes.count)
        }

        /// The UTF-8 range of `lines`.
        func utf8Range(_ lines: Range<Int>) -> Range<Int> {
            self.lines.starts[lines.lowerBound] ..< self.lines.starts[lines.upperBound]
        }

        /// The bytes of `lines`.
        func slice(_ lines: Range<Int>) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: bytes[utf8Range(lines)])
        }

        /// The text of `lines`.
        func text(_ lines: Range<Int>) -> String { TextDiff.string(bytes, utf8Range(lines)) }
    }

    /// Whether changes of the two sides to base lines `x` and `y` must be resolved together:
    /// they overlap, or one is an insertion at a line where the other starts, ends or lies.
    static func interfere(_ x: Range<Int>, _ y: Range<Int>) -> Bool {
        if x.isEmpty || y.isEmpty {
            return y.lowerBound <= x.upperBound && x.lowerBound <= y.upperBound
        }
        return x.lowerBound < y.upperBound && y.lowerBound < x.upperBound
    }

    /// The diff3 walk over both sides' hunks.
    static func merge(_ base: Side, _ mine: Side, _ theirs: Side) -> Result {
        let mineHunks = TextDiff.lineHunks(base.bytes, base.lines, mine.bytes, mine.lines)
        let theirsHunks = TextDiff.lineHunks(base.bytes, base.lines, theirs.bytes, theirs.lines)
        var merged: [UInt8] = []
        merged.reserveCapacity(max(mine.bytes.count, theirs.bytes.count))
        var conflicts: [Conflict] = []
        var copied = 0  // base lines before this one are in `merged` (or in a region)
        // Lines inserted minus lines removed by each side's hunks so far: a base line `l` outside
        // them is line `l + shift` of that side.
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
            let mineLines = mineLow ..< high + mineShift
            let theirsLines = theirsLow ..< high + theirsShift
            let baseLines = low..<high

            let take: UnsafeBufferPointer<UInt8>
            if j == theirsFirst {
                take = mine.slice(mineLines)
            } else if i == mineFirst {
                take = theirs.slice(theirsLines)
            } else {
                let mineText = mine.slice(mineLines), theirsText = theirs.slice(theirsLines)
                let baseText = base.slice(baseLines)
                if mineText.elementsEqual(theirsText) || mineText.elementsEqual(baseText) {
                    take = theirsText
                } else if theirsText.elementsEqual(baseText) {
                    // Only when a bounded-out diff made a hunk of lines it did not change.
                    take = mineText
                } else {
                    conflicts.append(Conflict(
                        baseLines: baseLines, mineLines: mineLines, theirsLines: theirsLines,
                        mineUTF8Range: mine.utf8Range(mineLines),
                        base: base.text(baseLines), mine: mine.text(mineLines), theirs: theirs.text(theirsLines)))
                    copied = high
                    continue
                }
            }
            if conflicts.isEmpty {
                merged.append(contentsOf: base.slice(copied..<low))
                merged.append(contentsOf: take)
            }
            copied = high
        }
        guard conflicts.isEmpty else { return .conflicts(conflicts) }
        merged.append(contentsOf: base.slice(copied ..< base.lines.count))
        return .merged(merged)
    }
}
