import Testing
@testable import TextBuffer

/// diff3 on lines: changes on one side, on both sides alike or apart merge; changes on both sides
/// that differ in the same place are conflicts, located in all three texts.
@Suite struct ThreeWayMergeTests {
    /// Merges three strings.
    static func merge(_ base: String, _ mine: String, _ theirs: String) -> ThreeWayMerge.Result {
        ThreeWayMerge.merge(base: Array(base.utf8), mine: Array(mine.utf8), theirs: Array(theirs.utf8))
    }

    /// A successful merge's text.
    static func merged(_ text: String) -> ThreeWayMerge.Result { .merged(Array(text.utf8)) }

    @Test func oneSideUnchangedTakesTheOther() {
        #expect(Self.merge("a\nb\n", "a\nb\n", "a\nB\nc\n") == Self.merged("a\nB\nc\n"))
        #expect(Self.merge("a\nb\n", "x\nb\n", "a\nb\n") == Self.merged("x\nb\n"))
        #expect(Self.merge("", "", "new\n") == Self.merged("new\n"))
        #expect(Self.merge("old\n", "", "old\n") == Self.merged(""))
    }

    @Test func disjointEditsMerge() {
        let base = "a\nb\nc\nd\ne\n"
        #expect(Self.merge(base, "a\nB\nc\nd\ne\n", "a\nb\nc\nD\ne\n") == Self.merged("a\nB\nc\nD\ne\n"))
        // An insertion on one side, a deletion on the other.
        #expect(Self.merge(base, "new\na\nb\nc\nd\ne\n", "a\nb\nc\nd\n") == Self.merged("new\na\nb\nc\nd\n"))
        // Adjacent changes (neither an insertion) are not in each other's way.
        #expect(Self.merge(base, "A\nb\nc\nd\ne\n", "a\nB\nc\nd\ne\n") == Self.merged("A\nB\nc\nd\ne\n"))
    }

    @Test func theSameEditOnBothSidesIsTakenOnce() {
        let base = "a\nb\nc\nd\ne\n"
        #expect(Self.merge(base, "a\nB\nc\nd\ne\n", "a\nB\nc\nD\ne\n") == Self.merged("a\nB\nc\nD\ne\n"))
        #expect(Self.merge(base, "a\nb\nnew\nc\nd\ne\n", "a\nb\nnew\nc\nd\ne\n") == Self.merged("a\nb\nnew\nc\nd\ne\n"))
        // Both delete the first line; theirs also appends one.
        #expect(Self.merge("a\nb\n", "b\n", "b\nc\n") == Self.merged("b\nc\n"))
    }

    @Test func overlappingDifferentEditsConflict() {
        // Mine replaces line 2 by two lines; theirs replaces lines 1 and 2 by one.
        let mine = "1\n2\nX\nY\n4\n5\n"
        let result = Self.merge("1\n2\n3\n4\n5\n", mine, "1\nZ\n4\n5\n")
        #expect(result == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<3, mineLines: 1..<4, theirsLines: 1..<2, mineUTF8Range: 2..<8,
            base: "2\n3\n", mine: "2\nX\nY\n", theirs: "Z\n")]))
        if case .conflicts(let conflicts) = result {
            let range = conflicts[0].mineUTF8Range
            #expect(String(decoding: Array(mine.utf8)[range], as: UTF8.self) == conflicts[0].mine)
        }
    }

    @Test func twoConflicts() {
        let result = Self.merge(
            "a\nb\nc\nd\ne\nf\ng\n",
            "a\nmine b\nc\nd\ne\nmine f\nmine f2\ng\n",
            "a\ntheirs b\nc\nD\ne\ntheirs f\ng\n")
        #expect(result == .conflicts([
            ThreeWayMerge.Conflict(
                baseLines: 1..<2, mineLines: 1..<2, theirsLines: 1..<2, mineUTF8Range: 2..<9,
                base: "b\n", mine: "mine b\n", theirs: "theirs b\n"),
            ThreeWayMerge.Conflict(
                baseLines: 5..<6, mineLines: 5..<7, theirsLines: 5..<6, mineUTF8Range: 15..<30,
                base: "f\n", mine: "mine f\nmine f2\n", theirs: "theirs f\n"),
        ]))
    }

    @Test func differentInsertionsAtTheSamePointConflict() {
        #expect(Self.merge("a\nb\n", "a\nX\nb\n", "a\nY\nb\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<1, mineLines: 1..<2, theirsLines: 1..<2, mineUTF8Range: 2..<4,
            base: "", mine: "X\n", theirs: "Y\n")]))
        // At the end of a text too.
        #expect(Self.merge("a\n", "a\nX\n", "a\nY\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<1, mineLines: 1..<2, theirsLines: 1..<2, mineUTF8Range: 2..<4,
            base: "", mine: "X\n", theirs: "Y\n")]))
        // An insertion where the other side changes a line: which goes first is in doubt.
        #expect(Self.merge("a\nb\n", "A\nb\n", "a\nY\nb\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<1, mineLines: 0..<1, theirsLines: 0..<2, mineUTF8Range: 0..<2,
            base: "a\n", mine: "A\n", theirs: "a\nY\n")]))
    }

    @Test func deletingWhatTheOtherSideEditsConflicts() {
        #expect(Self.merge("a\nb\nc\nd\n", "a\nd\n", "a\nb\nC\nd\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<3, mineLines: 1..<1, theirsLines: 1..<3, mineUTF8Range: 2..<2,
            base: "b\nc\n", mine: "", theirs: "b\nC\n")]))
    }

    @Test func aLastLineWithoutNewline() {
        // Appending to a text without a final newline changes its last line.
        #expect(Self.merge("a\nb\nc", "A\nb\nc", "a\nb\nc\nd") == Self.merged("A\nb\nc\nd"))
        #expect(Self.merge("a\nb", "a\nB", "A\nb") == Self.merged("A\nB"))
        #expect(Self.merge("a\nb\nc", "a\nb", "A\nb\nc") == Self.merged("A\nb"))
        #expect(Self.merge("a\nb", "a\nB", "a\nC") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<2, mineLines: 1..<2, theirsLines: 1..<2, mineUTF8Range: 2..<3,
            base: "b", mine: "B", theirs: "C")]))
        // Adding the newline on one side and changing the first line on the other.
        #expect(Self.merge("a\nb", "a\nb\n", "x\nb") == Self.merged("x\nb\n"))
    }

    @Test func crlfText() {
        let base = "a\r\nb\r\nc\r\nd\r\n"
        #expect(Self.merge(base, "A\r\nb\r\nc\r\nd\r\n", "a\r\nb\r\nc\r\nD\r\n") == Self.merged("A\r\nb\r\nc\r\nD\r\n"))
        // A change of line break alone is a change of that line.
        #expect(Self.merge(base, "a\nb\r\nc\r\nd\r\n", "a\r\nb\r\nC\r\nd\r\n") == Self.merged("a\nb\r\nC\r\nd\r\n"))
        #expect(Self.merge(base, "a\r\nB\r\nc\r\nd\r\n", "a\r\nb\nc\r\nd\r\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 1..<2, mineLines: 1..<2, theirsLines: 1..<2, mineUTF8Range: 3..<6,
            base: "b\r\n", mine: "B\r\n", theirs: "b\n")]))
        // Lone carriage returns are line breaks too.
        #expect(Self.merge("a\rb\rc\r", "A\rb\rc\r", "a\rb\rC\r") == Self.merged("A\rb\rC\r"))
    }

    @Test func multiByteText() {
        #expect(Self.merge("日本\né\n😀\n", "日本語\né\n😀\n", "日本\né\n😃\n") == Self.merged("日本語\né\n😃\n"))
    }

    /// A random base of distinct lines, mine and theirs each changing one region far from the
    /// other's: the merge equals both changes applied, whichever side is which.
    @Test func randomDisjointEditsMerge() {
        let terminators = ["\n", "\r\n"]
        let pieces = ["a", "é", "😀", "日本", " ", "x"]
        for seed in UInt64(1)...300 {
            var random = SeededGenerator(seed: seed)
            func line(_ tag: String) -> String {
                var text = tag
                for _ in 0 ..< Int.random(in: 0...3, using: &random) { text += pieces.randomElement(using: &random)! }
                return text + terminators.randomElement(using: &random)!
            }
            func lines(_ tag: String) -> [String] {
                (0 ..< Int.random(in: 0...4, using: &random)).map { line("\(tag) \($0) ") }
            }
            let count = Int.random(in: 6...60, using: &random)
            var base = (0 ..< count).map { line("base \($0) ") }
            if Bool.random(using: &random) { base[count - 1] = String(base[count - 1].dropLast()) }
            // Mine changes lines p..<q, theirs r..<s, with at least two untouched lines between.
            let p = Int.random(in: 0...(count - 3) / 2, using: &random)
            let q = Int.random(in: p...min(p + 3, count - 3), using: &random)
            let r = Int.random(in: (q + 2)...count, using: &random)
            let s = Int.random(in: r...min(r + 3, count), using: &random)
            var mineLines = lines("mine"), theirsLines = lines("theirs")
            if p == q && mineLines.isEmpty { mineLines = [line("mine ")] }
            if r == s && theirsLines.isEmpty { theirsLines = [line("theirs ")] }
            let mine = (base[0..<p] + mineLines + base[q...]).joined()
            let theirs = (base[0..<r] + theirsLines + base[s...]).joined()
            let expected = (base[0..<p] + mineLines + base[q..<r] + theirsLines + base[s...]).joined()
            let baseText = base.joined()
            #expect(Self.merge(baseText, mine, theirs) == Self.merged(expected), "seed \(seed)")
            #expect(Self.merge(baseText, theirs, mine) == Self.merged(expected), "seed \(seed)")
        }
    }

    // MARK: Trimming (issue 15): the same result as the untrimmed merge

    /// The merge of three strings by the untrimmed algorithm (Support/UntrimmedMerge.swift).
    static func untrimmed(_ base: String, _ mine: String, _ theirs: String) -> ThreeWayMerge.Result {
        UntrimmedMerge.merge(base: Array(base.utf8), mine: Array(mine.utf8), theirs: Array(theirs.utf8))
    }

    @Test func changesAtTheVeryStartAndEnd() {
        let base = "a\nb\nc\nd\n"
        // One side at the first byte, the other at the last line: nothing in common at either end
        // of the three texts, everything per side.
        #expect(Self.merge(base, "A\nb\nc\nd\n", "a\nb\nc\nD\n") == Self.merged("A\nb\nc\nD\n"))
        #expect(Self.merge(base, "new\na\nb\nc\nd\n", "a\nb\nc\nd\nnew\n") == Self.merged("new\na\nb\nc\nd\nnew\n"))
        #expect(Self.merge(base, "b\nc\nd\n", "a\nb\nc\n") == Self.merged("b\nc\n"))
        // Both at the very start, or at the very end: a conflict located at line 0, or at the end.
        #expect(Self.merge(base, "X\na\nb\nc\nd\n", "Y\na\nb\nc\nd\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<0, mineLines: 0..<1, theirsLines: 0..<1, mineUTF8Range: 0..<2, base: "", mine: "X\n", theirs: "Y\n")]))
        #expect(Self.merge(base, "a\nb\nc\nd\nX", "a\nb\nc\nd\nYY") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 4..<4, mineLines: 4..<5, theirsLines: 4..<5, mineUTF8Range: 8..<9, base: "", mine: "X", theirs: "YY")]))
        // A change of the last byte only (the last line loses its newline) against one at the start.
        #expect(Self.merge(base, "a\nb\nc\nd", "Z\nb\nc\nd\n") == Self.merged("Z\nb\nc\nd"))
    }

    @Test func aPrefixSharedWithOneSideOnlyDoesNotMoveTheOtherSidesChange() {
        // Mine repeats the base's only line after it, theirs inserts before it. The bytes mine shares
        // with the base at the end ("a\n") are its first line for the line diff (the leading equal
        // lines are found first), so mine's change is an insertion after line 0 and does not touch
        // theirs' insertion before it: no conflict. (Trimming a suffix common to all three texts
        // first would have made both insertions at line 0, a conflict.)
        #expect(Self.merge("a\n", "a\na\n", "b\na\n") == Self.merged("b\na\na\n"))
        #expect(Self.merge("a\n", "a\na\n", "b\na\n") == Self.untrimmed("a\n", "a\na\n", "b\na\n"))
        #expect(Self.merge("x\na\n", "x\na\na\n", "x\nb\na\n") == Self.untrimmed("x\na\n", "x\na\na\n", "x\nb\na\n"))
    }

    @Test func trimmingNeverCutsALineOrACRLF() {
        // The texts agree up to inside a line, or up to between the \r and the \n of a CRLF: the
        // lines compared are still whole, so a changed terminator is a changed line.
        #expect(Self.merge("ab\ncd\n", "abX\ncd\n", "ab\ncdY\n") == Self.merged("abX\ncdY\n"))
        #expect(Self.merge("a\r\nb\r\n", "a\rX\nb\r\n", "a\r\nB\r\n") == Self.untrimmed("a\r\nb\r\n", "a\rX\nb\r\n", "a\r\nB\r\n"))
        #expect(Self.merge("a\r\nb\r\n", "a\r\nb\r\n", "a\rb\r\n") == Self.merged("a\rb\r\n"))
        #expect(Self.merge("a\r\nb\r\n", "a\nb\r\n", "a\rb\r\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<1, mineLines: 0..<1, theirsLines: 0..<1, mineUTF8Range: 0..<2, base: "a\r\n", mine: "a\n", theirs: "a\r")]))
        // A lone \r that a side turns into a CRLF: the line changes (and the one after starts later).
        #expect(Self.merge("a\rb\rc\r", "a\r\nb\rc\r", "a\rb\rC\r") == Self.merged("a\r\nb\rC\r"))
        // Multi-byte characters that differ in their last byte only: the lines differ whole.
        #expect(Self.merge("é\nà\n", "è\nà\n", "é\ná\n") == Self.merged("è\ná\n"))
        #expect(Self.merge("😀\n", "😁\n", "😂\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<1, mineLines: 0..<1, theirsLines: 0..<1, mineUTF8Range: 0..<5, base: "😀\n", mine: "😁\n", theirs: "😂\n")]))
    }

    @Test func emptyTexts() {
        #expect(Self.merge("", "", "") == Self.merged(""))
        #expect(Self.merge("", "a", "") == Self.merged("a"))
        #expect(Self.merge("a\n", "", "") == Self.merged(""))
        #expect(Self.merge("", "a\n", "a\n") == Self.merged("a\n"))
        #expect(Self.merge("", "a\n", "b\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<0, mineLines: 0..<1, theirsLines: 0..<1, mineUTF8Range: 0..<2, base: "", mine: "a\n", theirs: "b\n")]))
        #expect(Self.merge("a\nb\n", "", "a\nB\n") == .conflicts([ThreeWayMerge.Conflict(
            baseLines: 0..<2, mineLines: 0..<0, theirsLines: 0..<2, mineUTF8Range: 0..<0, base: "a\nb\n", mine: "", theirs: "a\nB\n")]))
        #expect(Self.merge("a\nb\n", "", "a\nb\nc\n") == Self.untrimmed("a\nb\n", "", "a\nb\nc\n"))
    }

    @Test func conflictsAfterALongCommonPrefixHaveTheirLineNumbers() {
        // Line numbers are counted only for conflicts, across the trimmed prefix: with CRLF and
        // lone CR breaks before them, and two conflicts, the second counted on from the first.
        let head = String(repeating: "line\r\n", count: 1000) + String(repeating: "cr\r", count: 500) + "é\n"
        let base = head + "b\nc\nd\ne\n", mine = head + "B1\nc\nd\nE1\n", theirs = head + "B2\nc\nd\nE2\n"
        let result = Self.merge(base, mine, theirs)
        #expect(result == Self.untrimmed(base, mine, theirs))
        guard case .conflicts(let conflicts) = result else { Issue.record("\(result)"); return }
        #expect(conflicts.map(\.baseLines) == [1501..<1502, 1504..<1505])
        #expect(conflicts.map(\.mineUTF8Range.lowerBound) == [head.utf8.count, head.utf8.count + 7])
    }

    /// Random base texts of few distinct lines (so that lines repeat and a change's place is
    /// ambiguous), every kind of line break, multi-byte characters and a last line with or without
    /// its break; each side edited by lines and by bytes (a break inserted or removed inside a line,
    /// a CRLF split): the merge equals the untrimmed algorithm's, both ways round, texts and
    /// conflicts alike.
    @Test func randomTextsMergeAsUntrimmed() {
        let pieces = ["a", "b", "é", "😀", "日本", "", "x y"]
        let breaks = ["\n", "\n", "\r\n", "\r"]
        let oddBytes = ["\r", "\n", "\r\n", "z", "é", ""]
        var conflicting = 0, merged = 0
        for seed in UInt64(1)...4000 {
            var random = SeededGenerator(seed: seed)
            func line() -> String {
                pieces.randomElement(using: &random)! + breaks.randomElement(using: &random)!
            }
            var base = (0 ..< Int.random(in: 0...12, using: &random)).map { _ in line() }
            if !base.isEmpty && Int.random(in: 0..<3, using: &random) == 0 {
                base[base.count - 1] = pieces.randomElement(using: &random)!  // no break at the end
            }
            func edited() -> String {
                var lines = base
                for _ in 0 ..< Int.random(in: 0...3, using: &random) {
                    let at = Int.random(in: 0...lines.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: lines.insert(line(), at: at)
                    case 1 where at < lines.count: lines.remove(at: at)
                    case 2 where at < lines.count: lines[at] = line()
                    default: break
                    }
                }
                var text = Array(lines.joined().unicodeScalars)
                if Int.random(in: 0..<2, using: &random) == 0 {
                    // A byte-level edit at a scalar boundary: may split a CRLF or a line.
                    let at = Int.random(in: 0...text.count, using: &random)
                    let removed = Int.random(in: 0...min(2, text.count - at), using: &random)
                    text.replaceSubrange(at ..< at + removed, with: oddBytes.randomElement(using: &random)!.unicodeScalars)
                }
                var string = ""
                string.unicodeScalars.append(contentsOf: text)
                return string
            }
            let baseText = base.joined(), mine = edited(), theirs = edited()
            for (a, b) in [(mine, theirs), (theirs, mine)] {
                let result = Self.merge(baseText, a, b)
                #expect(result == Self.untrimmed(baseText, a, b), "seed \(seed): base \(baseText.debugDescription), mine \(a.debugDescription), theirs \(b.debugDescription)")
                if case .conflicts = result { conflicting += 1 } else { merged += 1 }
            }
        }
        // Both outcomes are well represented.
        #expect(conflicting > 1000 && merged > 1000, "\(conflicting) conflicting, \(merged) merged")
    }
}
