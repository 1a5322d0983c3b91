@testable import TextBuffer

/// ThreeWayMerge as it was before it trimmed (commit 1734f73): every text split into lines whole,
/// both sides line-diffed against the base's one line table, the diff3 walk in line numbers. The
/// reference the trimmed merge must agree with (ThreeWayMergeTests' property tests).
enum UntrimmedMerge {
    static func merge(base: [UInt8], mine: [UInt8], theirs: [UInt8]) -> ThreeWayMerge.Result {
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

    struct Side {
        let bytes: UnsafeBufferPointer<UInt8>
        let lines: LineTable

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            lines = LineTable(bytes, 0..<bytes.count)
        }

        func utf8Range(_ lines: Range<Int>) -> Range<Int> {
            self.lines.starts[lines.lowerBound] ..< self.lines.starts[lines.upperBound]
        }

        func slice(_ lines: Range<Int>) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: bytes[utf8Range(lines)])
        }

        func text(_ lines: Range<Int>) -> String { TextDiff.string(bytes, utf8Range(lines)) }
    }

    static func interfere(_ x: Range<Int>, _ y: Range<Int>) -> Bool {
        if x.isEmpty || y.isEmpty {
            return y.lowerBound <= x.upperBound && x.lowerBound <= y.upperBound
        }
        return x.lowerBound < y.upperBound && y.lowerBound < x.upperBound
    }

    static func merge(_ base: Side, _ mine: Side, _ theirs: Side) -> ThreeWayMerge.Result {
        let mineHunks = TextDiff.lineHunks(base.bytes, base.lines, mine.bytes, mine.lines)
        let theirsHunks = TextDiff.lineHunks(base.bytes, base.lines, theirs.bytes, theirs.lines)
        var merged: [UInt8] = []
        var conflicts: [ThreeWayMerge.Conflict] = []
        var copied = 0
        var mineShift = 0, theirsShift = 0
        var i = 0, j = 0
        while i < mineHunks.count || j < theirsHunks.count {
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
                    take = mineText
                } else {
                    conflicts.append(ThreeWayMerge.Conflict(
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
