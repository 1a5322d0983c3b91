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
}
