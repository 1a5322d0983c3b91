// Issue 16, point 3: our line-based three-way merge (`ThreeWayMerge`, what `document/resolveConflict`
// with `resolution: "merge"` runs) against libgit2's `git_merge_file` (the xdiff merge git uses), on
// merge cases cut from the real editing histories, each with a known right answer.
//
// How a case is made (see Benchmarks/README.md, "ThreeWayMerge against libgit2's git_merge_file"):
//
//   base      the trace's text after transaction t (t random, fixed seed)
//   window    the next k transactions (k random in 1...50), replayed on a piece table over the base,
//             which gives their net effect as "hunks" in base coordinates: base range [s, e) replaced
//             by a text, hunks disjoint and separated by at least one base character the window kept
//             (each trimmed of what it shares with the base; a hunk that changes nothing is dropped)
//   mine      the base with a random subset of the hunks applied
//   theirs    the base with the other hunks applied (both subsets non-empty)
//   expected  the base with every hunk applied, which is the trace's own text after t + k: the
//             merge is known, since each side's hunks apply to the base on their own
//
// Categories, from the base lines each side changes (a line is changed by a side when it is not
// there intact in that side's text; a side that only inserts whole lines at a line start changes
// none, but sits at the boundary between two lines):
//
//   far          the two sides' changes are 4 or more unchanged lines apart: clean merge expected
//   near         1 to 3 unchanged lines apart: clean merge expected
//   adjacent     0 lines apart (changed lines touch, or one side inserts lines at the edge of the
//                other's changed lines): clean merge expected (the right text is known)
//   delete-near  one side deletes at least one whole line and the other changes a line within 3
//                lines of its changes (none shared): clean merge expected
//   same line    both sides change one same base line (at different columns, since the hunks are
//                disjoint): a line-based merge is expected to report a conflict; a clean merge
//                counts as right only if it is the expected text
//   same place   made from one hunk that inserts 2 or more characters: its text is cut in two, mine
//                inserts the first part and theirs the second at the same place (parts differ): the
//                order is not defined, a conflict is expected, and a clean merge is reported apart
//   large        a case of the first five kinds with the base, mine, theirs and expected text
//                placed between 500 KB of generated lines before and after (BufferWorkloads'
//                GeneratedLines, a third of the words not ASCII): about 1 MB each
//
// Outcomes of each merge: clean and right, clean and WRONG (a silent bad merge), clean on a "same
// place" case (an order chosen silently), missed (a conflict where a clean merge was expected), and
// conflict (where one was expected). Both merges run on every case, alternately first; each call is
// timed, and the medians per size of base are compared in the same run.
//
//   swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build MergeCompare
//       [--cases N]      cases per category and trace at most (default 500; large: 300)
//       [--seed N]       the seed (default 163)
//       [--trace NAME]   one trace
//       [--points N]     points of the trace sampled for candidates (default 20000)
//       [--examples DIR] write the first wrong or disputed cases of each merge there
//       [--files BASE MINE THEIRS]  only merge three files both ways and print the results

import BufferWorkloads
import EditingTraces
import Foundation
import GitMergeFile
import TextBuffer

let options = CommandLineOptions()
let quota = options.option("--cases").flatMap { Int($0) } ?? 500
let seed = options.option("--seed").flatMap { UInt64($0) } ?? 163
let onlyTrace = options.option("--trace")
let pointCount = options.option("--points").flatMap { Int($0) } ?? 20000
let examplesDirectory = options.option("--examples")

// MARK: - Random numbers

/// SplitMix64: a fixed seed gives the same cases on every machine.
struct SplitMix {
    var state: UInt64
    init(_ seeds: UInt64...) {
        state = 0x9E37_79B9_7F4A_7C15
        for value in seeds { state = (state ^ value) &* 0xBF58_476D_1CE4_E5B9; _ = next() }
    }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

// MARK: - Net effect of a window: a piece table over the base

typealias Scalars = [UInt32]
let newline: UInt32 = 0x0A

/// Base scalars [start, end) replaced by `text`.
struct Hunk {
    var start: Int
    var end: Int
    var text: Scalars
}

/// The window's patches (scalar positions, each on the text the one before left) replayed on a
/// piece table over a base of `count` scalars; answers the net hunks in base coordinates.
func netHunks(baseCount: Int, patches: [(position: Int, deleteCount: Int, text: Scalars)], base: Scalars) -> [Hunk] {
    // A piece: a base range (text nil) or an inserted text.
    struct Piece { var start: Int; var end: Int; var text: Scalars? ; var count: Int { text?.count ?? end - start } }
    var pieces = baseCount > 0 ? [Piece(start: 0, end: baseCount, text: nil)] : []
    /// Splits so that a piece starts at `position`; answers its index.
    func split(_ pieces: inout [Piece], at position: Int) -> Int {
        var offset = 0
        for index in pieces.indices {
            if offset == position { return index }
            let count = pieces[index].count
            if position < offset + count {
                let cut = position - offset
                var left = pieces[index], right = pieces[index]
                if let text = left.text {
                    left.text = Array(text[..<cut]); right.text = Array(text[cut...])
                } else {
                    left.end = left.start + cut; right.start = left.end
                }
                pieces[index] = left
                pieces.insert(right, at: index + 1)
                return index + 1
            }
            offset += count
        }
        precondition(offset == position, "patch position \(position) past the end \(offset)")
        return pieces.count
    }
    for patch in patches {
        let first = split(&pieces, at: patch.position)
        let last = split(&pieces, at: patch.position + patch.deleteCount)
        pieces.removeSubrange(first..<last)
        if !patch.text.isEmpty { pieces.insert(Piece(start: 0, end: 0, text: patch.text), at: first) }
    }
    var hunks: [Hunk] = []
    var kept = 0
    var pending: Scalars = []
    func flush(upTo start: Int) {
        guard start > kept || !pending.isEmpty else { return }
        // Trim what the hunk shares with the base it replaces.
        var s = kept, e = start, text = pending[...]
        while s < e, let first = text.first, first == base[s] { s += 1; text = text.dropFirst() }
        while s < e, let last = text.last, last == base[e - 1] { e -= 1; text = text.dropLast() }
        if s < e || !text.isEmpty { hunks.append(Hunk(start: s, end: e, text: Array(text))) }
    }
    for piece in pieces {
        if let text = piece.text { pending += text; continue }
        precondition(piece.start >= kept)
        flush(upTo: piece.start)
        kept = piece.end
        pending = []
    }
    flush(upTo: baseCount)
    return hunks
}

/// The base with `hunks` (ascending, disjoint) applied.
func applying(_ hunks: [Hunk], to base: Scalars) -> Scalars {
    var result: Scalars = []
    result.reserveCapacity(base.count + 64)
    var copied = 0
    for hunk in hunks {
        result += base[copied..<hunk.start]
        result += hunk.text
        copied = hunk.end
    }
    result += base[copied...]
    return result
}

/// Scalars to UTF-8.
func utf8(_ scalars: Scalars) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(scalars.count + scalars.count / 8)
    for value in scalars {
        switch value {
        case 0..<0x80: bytes.append(UInt8(value))
        case 0x80..<0x800:
            bytes.append(UInt8(0xC0 | (value >> 6))); bytes.append(UInt8(0x80 | (value & 0x3F)))
        case 0x800..<0x10000:
            bytes.append(UInt8(0xE0 | (value >> 12))); bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            bytes.append(UInt8(0x80 | (value & 0x3F)))
        default:
            bytes.append(UInt8(0xF0 | (value >> 18))); bytes.append(UInt8(0x80 | ((value >> 12) & 0x3F)))
            bytes.append(UInt8(0x80 | ((value >> 6) & 0x3F))); bytes.append(UInt8(0x80 | (value & 0x3F)))
        }
    }
    return bytes
}

// MARK: - Categories

enum Category: Int, CaseIterable {
    case far, near, adjacent, deleteNear, sameLine, samePlace, large
    var name: String {
        ["far", "near", "adjacent", "delete-near", "same line", "same place", "large (~1 MB)"][rawValue]
    }
    /// Whether a line-based merge is expected to report a conflict.
    var conflictExpected: Bool { self == .sameLine || self == .samePlace }
}

/// The base's line starts (after each "\n"), for the line of an offset.
struct Lines {
    var starts: [Int]  // starts[0] = 0
    let count: Int      // scalars in the base
    init(_ base: Scalars) {
        starts = [0]
        for (index, value) in base.enumerated() where value == newline { starts.append(index + 1) }
        count = base.count
        if starts.last == count && count > 0 { starts.removeLast() }  // no line after a final "\n"
        if count == 0 { starts = [] }
    }
    var lineCount: Int { starts.count }
    /// The line holding offset `p` (< count).
    func line(_ p: Int) -> Int {
        var low = 0, high = starts.count  // last start <= p
        while high - low > 1 { let mid = (low + high) / 2; if starts[mid] <= p { low = mid } else { high = mid } }
        return low
    }
    func isLineStart(_ p: Int, _ base: Scalars) -> Bool { p == 0 || base[p - 1] == newline }
}

/// The base lines a hunk changes, in half-line units: line L is 2L+1, the boundary before line L
/// (where whole lines are inserted) is 2L. Also whether it deletes a whole line.
func units(_ hunk: Hunk, _ base: Scalars, _ lines: Lines) -> (low: Int, high: Int, deletesLine: Bool) {
    let s = hunk.start, e = hunk.end, text = hunk.text
    if s == e {
        let atStart = lines.isLineStart(s, base)
        if atStart && (text.last == newline || s == base.count) {
            let boundary = s == base.count ? lines.lineCount : lines.line(s)
            return (2 * boundary, 2 * boundary, false)
        }
        let line = s == base.count ? lines.lineCount - 1 : lines.line(s)
        return (2 * line + 1, 2 * line + 1, false)
    }
    let first = lines.line(s), last = lines.line(e - 1)
    var high = 2 * last + 1
    // The line starting at e stays intact only if what now comes before it ends a line.
    if e < base.count && lines.isLineStart(e, base) {
        let endsLine = text.isEmpty ? lines.isLineStart(s, base) : text.last == newline
        if !endsLine { high = 2 * (last + 1) + 1 }
    }
    // A whole line deleted: some line [a, b) with s <= a and b <= e, its "\n" included.
    var deletesLine = false
    for line in first...last {
        let a = lines.starts[line]
        let b = line + 1 < lines.lineCount ? lines.starts[line + 1] : base.count
        if s <= a && b <= e && base[b - 1] == newline { deletesLine = true; break }
    }
    return (2 * first + 1, high, deletesLine)
}

/// Odd numbers (lines) in [low, high].
func oddCount(_ low: Int, _ high: Int) -> Int { high < low ? 0 : (high + 1) / 2 - low / 2 }

/// The category of a split of real hunks (not same place, not large).
func categorize(mine: [Hunk], theirs: [Hunk], base: Scalars, lines: Lines) -> Category {
    let m = mine.map { units($0, base, lines) }, t = theirs.map { units($0, base, lines) }
    var gap = Int.max, shared = false
    for x in m {
        for y in t {
            if x.low <= y.high && y.low <= x.high {
                // Overlap: a line in common, unless both are the same boundary.
                if !(x.low == x.high && y.low == y.high && x.low % 2 == 0) { shared = true }
                gap = 0
            } else if x.high < y.low {
                gap = min(gap, oddCount(x.high + 1, y.low - 1))
            } else {
                gap = min(gap, oddCount(y.high + 1, x.low - 1))
            }
        }
    }
    if shared { return .sameLine }
    if gap <= 3 && (m.contains { $0.deletesLine } || t.contains { $0.deletesLine }) { return .deleteNear }
    return gap == 0 ? .adjacent : gap <= 3 ? .near : .far
}

// MARK: - Candidates

/// One case as made at a point of the trace: which hunks go to which side.
struct Candidate {
    var point: Int      // index into the sampled points
    var variant: Int    // 0..<3: a random split; 3: same place
    var large: Bool
    var category: Category
    /// For a large case, the category of its split (which decides whether a conflict is expected).
    var underlying: Category
}

/// The hunks of each side for a variant at a point; nil when the variant does not apply.
func sides(_ hunks: [Hunk], variant: Int, rng: inout SplitMix) -> (mine: [Hunk], theirs: [Hunk])? {
    if variant < 3 {
        guard hunks.count >= 2 else { return nil }
        var mine: [Hunk] = [], theirs: [Hunk] = []
        for hunk in hunks { if rng.int(2) == 0 { mine.append(hunk) } else { theirs.append(hunk) } }
        if mine.isEmpty { mine.append(theirs.removeFirst()) }
        if theirs.isEmpty { theirs.append(mine.removeLast()) }
        return (mine, theirs)
    }
    let inserts = hunks.filter { $0.start == $0.end && $0.text.count >= 2 }
    guard !inserts.isEmpty else { return nil }
    let hunk = inserts[rng.int(inserts.count)]
    let cut = 1 + rng.int(hunk.text.count - 1)
    let first = Array(hunk.text[..<cut]), second = Array(hunk.text[cut...])
    guard first != second else { return nil }
    return ([Hunk(start: hunk.start, end: hunk.end, text: first)], [Hunk(start: hunk.start, end: hunk.end, text: second)])
}

// MARK: - The merges

enum Outcome: Int, CaseIterable {
    case right, wrong, cleanUndefined, missed, conflict
    var name: String { ["clean right", "clean WRONG", "clean, order chosen", "missed", "conflict (expected)"][rawValue] }
}

func classify(clean: Bool, merged: UnsafeRawBufferPointer?, expected: [UInt8]?, conflictExpected: Bool) -> Outcome {
    if clean {
        guard let expected else { return .cleanUndefined }
        return merged.map { $0.elementsEqual(expected) } == true ? .right : .wrong
    }
    return conflictExpected ? .conflict : .missed
}

/// Whether `a` and `b` hold the same lines (split after each "\n"), in any order.
func sameLines(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
    func lines<C: Collection>(_ bytes: C) -> [ArraySlice<UInt8>] where C.Element == UInt8 {
        var result: [ArraySlice<UInt8>] = [], current: [UInt8] = []
        for byte in bytes { current.append(byte); if byte == 0x0A { result.append(current[...]); current = [] } }
        if !current.isEmpty { result.append(current[...]) }
        return result.sorted { $0.lexicographicallyPrecedes($1) }
    }
    return lines(a) == lines(b)
}

/// Writes `bytes` to `path` (examples only).
func write(_ bytes: [UInt8], to path: String) {
    guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { fatalError("cannot write \(path)") }
}

/// The texts cut to the lines where any differs from the first, with `context` equal lines kept
/// on each side.
func crop(_ texts: [[UInt8]], context: Int) -> [[UInt8]] {
    func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var result: [ArraySlice<UInt8>] = [], start = 0
        for (index, byte) in bytes.enumerated() where byte == 0x0A { result.append(bytes[start...index]); start = index + 1 }
        if start < bytes.count { result.append(bytes[start...]) }
        return result
    }
    let split = texts.map(lines)
    let shortest = split.map(\.count).min()!
    var prefix = 0
    while prefix < shortest && split.allSatisfy({ $0[prefix] == split[0][prefix] }) { prefix += 1 }
    var suffix = 0
    while suffix < shortest - prefix && split.allSatisfy({ $0[$0.count - 1 - suffix] == split[0][split[0].count - 1 - suffix] }) { suffix += 1 }
    let drop = max(0, prefix - context), dropEnd = max(0, suffix - context)
    return split.map { Array($0[drop ..< $0.count - dropEnd].joined()) }
}

/// Both merges on one case, untimed: their outcomes and clean texts.
func mergeBoth(_ b: [UInt8], _ m: [UInt8], _ t: [UInt8], _ expected: [UInt8]?, conflictExpected: Bool)
    -> (Outcome, Outcome, [UInt8]?, [UInt8]?) {
    var ourText: [UInt8]? = nil
    let ourOutcome: Outcome
    switch ThreeWayMerge.merge(base: b, mine: m, theirs: t) {
    case .merged(let bytes):
        ourText = bytes
        ourOutcome = bytes.withUnsafeBytes { classify(clean: true, merged: $0, expected: expected, conflictExpected: conflictExpected) }
    case .conflicts:
        ourOutcome = classify(clean: false, merged: nil, expected: expected, conflictExpected: conflictExpected)
    }
    var result = b.withUnsafeBytes { bp in m.withUnsafeBytes { mp in t.withUnsafeBytes { tp in
        gitmerge_merge(bp.baseAddress, bp.count, mp.baseAddress, mp.count, tp.baseAddress, tp.count, 0)
    } } }
    defer { gitmerge_free(&result) }
    let buffer = UnsafeRawBufferPointer(start: result.text, count: result.length)
    let gitOutcome = classify(clean: result.clean != 0, merged: buffer, expected: expected, conflictExpected: conflictExpected)
    return (ourOutcome, gitOutcome, ourText, result.clean != 0 ? Array(buffer) : nil)
}

final class Tally {
    var counts = [[Int]](repeating: [Int](repeating: 0, count: Outcome.allCases.count), count: Category.allCases.count)
    /// Clean and wrong results holding the same lines as the expected text, in another order.
    var reordered = [Int](repeating: 0, count: Category.allCases.count)
    func add(_ category: Category, _ outcome: Outcome) { counts[category.rawValue][outcome.rawValue] += 1 }
    func total(_ outcome: Outcome) -> Int { counts.reduce(0) { $0 + $1[outcome.rawValue] } }
    func merge(_ other: Tally) {
        for c in counts.indices { for o in counts[c].indices { counts[c][o] += other.counts[c][o] } }
        for c in reordered.indices { reordered[c] += other.reordered[c] }
    }
}

/// Sizes of base for the timing medians.
let sizeBuckets: [(name: String, limit: Int)] = [("< 10 KB", 10_000), ("10-50 KB", 50_000), ("50-200 KB", 200_000), ("~1 MB", Int.max)]
func bucket(_ size: Int) -> Int { sizeBuckets.firstIndex { size < $0.limit }! }

final class Timings {
    var ours = [[Double]](repeating: [], count: sizeBuckets.count)
    var git = [[Double]](repeating: [], count: sizeBuckets.count)
    func merge(_ other: Timings) { for b in ours.indices { ours[b] += other.ours[b]; git[b] += other.git[b] } }
}

guard gitmerge_init() > 0 else { fatalError("git_libgit2_init failed") }
// `--files BASE MINE THEIRS`: both merges on three files, their results printed (for examples).
if let basePath = options.option("--files") {
    let paths = [basePath] + options.remaining.prefix(2)
    let texts = paths.map { [UInt8](FileManager.default.contents(atPath: $0) ?? Data()) }
    let (_, _, ours, git) = mergeBoth(texts[0], texts[1], texts[2], nil, conflictExpected: false)
    print("ours: " + (ours.map { String(decoding: $0, as: UTF8.self).debugDescription } ?? "conflict"))
    print("git_merge_file: " + (git.map { String(decoding: $0, as: UTF8.self).debugDescription } ?? "conflict"))
    exit(0)
}


// Large cases: generated lines, once.
var generatedBefore: Scalars = [], generatedAfter: Scalars = []
do {
    var generator = GeneratedLines()
    var bytes: [UInt8] = []
    while bytes.count < 500_000 { generator.appendLine(to: &bytes) }
    generatedBefore = String(decoding: bytes, as: UTF8.self).unicodeScalars.map(\.value)
    bytes = []
    while bytes.count < 500_000 { generator.appendLine(to: &bytes) }
    generatedAfter = String(decoding: bytes, as: UTF8.self).unicodeScalars.map(\.value)
}

/// Replays `trace`, calling `body` with the text after each sampled transaction (ascending).
func replay(_ transactions: [[(position: Int, deleteCount: Int, text: Scalars)]], start: Scalars, points: [Int],
            _ body: (Int, Scalars) -> Void) {
    var text = start
    var next = 0
    for (index, transaction) in transactions.enumerated() {
        while next < points.count && points[next] == index { body(next, text); next += 1 }
        for patch in transaction {
            text.replaceSubrange(patch.position ..< patch.position + patch.deleteCount, with: patch.text)
        }
    }
}

func printTable(ours: Tally, git: Tally, diff3: Tally) {
    print("| category | cases | ours: clean right | ours: clean WRONG | ours: missed | ours: conflict (expected) | git: clean right | git: clean WRONG | git: missed | git: conflict (expected) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    func cells(_ tally: Tally, _ row: [Int], _ reordered: Int) -> String {
        var wrong = "\(row[Outcome.wrong.rawValue])"
        if reordered > 0 { wrong += " (\(reordered) reordered)" }
        if row[Outcome.cleanUndefined.rawValue] > 0 { wrong += " (+\(row[Outcome.cleanUndefined.rawValue]) order chosen)" }
        return "\(row[Outcome.right.rawValue]) | \(wrong) | \(row[Outcome.missed.rawValue]) | \(row[Outcome.conflict.rawValue])"
    }
    var sumOurs = [Int](repeating: 0, count: Outcome.allCases.count), sumGit = sumOurs
    let reorderedOurs = ours.reordered.reduce(0, +), reorderedGit = git.reordered.reduce(0, +)
    for category in Category.allCases {
        let o = ours.counts[category.rawValue], g = git.counts[category.rawValue]
        let cases = o.reduce(0, +)
        guard cases > 0 else { continue }
        print("| \(category.name) | \(cases) | \(cells(ours, o, ours.reordered[category.rawValue])) | \(cells(git, g, git.reordered[category.rawValue])) |")
        for i in sumOurs.indices { sumOurs[i] += o[i]; sumGit[i] += g[i] }
    }
    print("| **all** | \(sumOurs.reduce(0, +)) | \(cells(ours, sumOurs, reorderedOurs)) | \(cells(git, sumGit, reorderedGit)) |")
    let d = Outcome.allCases.map { diff3.total($0) }
    print("git with GIT_MERGE_FILE_STYLE_DIFF3: " + Outcome.allCases.map { "\($0.name) \(d[$0.rawValue])" }.joined(separator: ", "))
}

func printTimings(_ timings: Timings) {
    for b in sizeBuckets.indices where !timings.ours[b].isEmpty {
        let o = median(timings.ours[b]), g = median(timings.git[b])
        print(String(format: "time, base %@: %d cases, ours %.1f µs, git_merge_file %.1f µs (medians), ours / git %.3f",
                     sizeBuckets[b].name, timings.ours[b].count, o * 1e6, g * 1e6, o / g))
    }
}

print("MergeCompare: seed \(seed), at most \(quota) cases per category and trace; libgit2 \(String(cString: gitmerge_version())); load average \(loadAverage())")
let traces = EditingTrace.available.filter { onlyTrace == nil || $0 == onlyTrace }
var totals = (ours: Tally(), git: Tally(), diff3: Tally(), timings: Timings())
var rows: [String] = []
var examplesWritten = [String: Int]()
var disagreements = 0, diff3Differs = 0
/// Pairwise: cases only one merge got clean and right; cases both got wrong.
var onlyOursRight = 0, onlyGitRight = 0, bothWrong = 0

for name in traces {
    let trace = try EditingTrace.load(name)
    let transactions = trace.transactions.map { $0.map { (position: $0.position, deleteCount: $0.deleteCount, text: $0.text.unicodeScalars.map(\.value)) } }
    let start = trace.startContent.unicodeScalars.map(\.value)
    var rng = SplitMix(seed, UInt64(name.utf8.reduce(5381) { ($0 &* 33) &+ UInt64($1) }))
    // Sampled points: transaction t (the base is the text before it), and the window length k.
    var sampled: [(t: Int, k: Int)] = (0..<pointCount).map { _ in
        let t = rng.int(transactions.count - 1)
        return (t, min(1 + rng.int(50), transactions.count - t))
    }
    sampled.sort { $0.t < $1.t }
    let points = sampled.map(\.t)
    func window(_ point: Int) -> [(position: Int, deleteCount: Int, text: Scalars)] {
        Array(transactions[sampled[point].t ..< sampled[point].t + sampled[point].k].joined())
    }
    func variantRNG(_ point: Int, _ variant: Int) -> SplitMix {
        SplitMix(seed, UInt64(sampled[point].t), UInt64(sampled[point].k), UInt64(variant))
    }

    // Pass 1: every candidate's category.
    var candidates: [Candidate] = []
    var hunkCounts = [Int](repeating: 0, count: 4)
    replay(transactions, start: start, points: points) { point, base in
        let hunks = netHunks(baseCount: base.count, patches: window(point), base: base)
        hunkCounts[min(hunks.count, 3)] += 1
        guard !hunks.isEmpty else { return }
        let lines = Lines(base)
        for variant in 0..<4 {
            var vr = variantRNG(point, variant)
            guard let (mine, theirs) = sides(hunks, variant: variant, rng: &vr) else { continue }
            let category = variant == 3 ? .samePlace : categorize(mine: mine, theirs: theirs, base: base, lines: lines)
            candidates.append(Candidate(point: point, variant: variant, large: false, category: category, underlying: category))
            if variant < 3 {
                candidates.append(Candidate(point: point, variant: variant, large: true, category: .large, underlying: category))
            }
        }
    }
    // At most `quota` per category (large: 300), drawn with the seed.
    var chosen: [Candidate] = []
    var available = [Int](repeating: 0, count: Category.allCases.count)
    for category in Category.allCases {
        var pool = candidates.filter { $0.category == category }
        available[category.rawValue] = pool.count
        for i in pool.indices.reversed() where i > 0 { pool.swapAt(i, rng.int(i + 1)) }
        chosen += pool.prefix(category == .large ? min(quota, 300) : quota)
    }
    var byPoint = [Int: [Candidate]]()
    for candidate in chosen { byPoint[candidate.point, default: []].append(candidate) }

    // Pass 2: build and merge the chosen cases.
    let ours = Tally(), git = Tally(), diff3 = Tally(), timings = Timings()
    var verified = 0, caseIndex = 0
    replay(transactions, start: start, points: points) { point, base in
        guard let list = byPoint[point] else { return }
        let hunks = netHunks(baseCount: base.count, patches: window(point), base: base)
        for candidate in list {
            var vr = variantRNG(point, candidate.variant)
            let (mine, theirs) = sides(hunks, variant: candidate.variant, rng: &vr)!
            var baseText = base, mineText = applying(mine, to: base), theirsText = applying(theirs, to: base)
            var expectedText: Scalars? = candidate.variant == 3 ? nil : applying(hunks, to: base)
            caseIndex += 1
            if caseIndex % 10 == 0, let expectedText, !candidate.large {
                // The expected text is the trace's own text after the window.
                var replayed = base
                for patch in window(point) { replayed.replaceSubrange(patch.position ..< patch.position + patch.deleteCount, with: patch.text) }
                precondition(replayed == expectedText, "\(name): the hunks of point \(point) do not give the trace's text")
                verified += 1
            }
            if candidate.large {
                baseText = generatedBefore + baseText + generatedAfter
                mineText = generatedBefore + mineText + generatedAfter
                theirsText = generatedBefore + theirsText + generatedAfter
                expectedText = expectedText.map { generatedBefore + $0 + generatedAfter }
            }
            let b = utf8(baseText), m = utf8(mineText), th = utf8(theirsText), expected = expectedText.map(utf8)
            let category = candidate.category

            var ourResult: ThreeWayMerge.Result? = nil
            var gitResult = gitmerge_result(), diff3Result = gitmerge_result()
            var ourTime = 0.0, gitTime = 0.0
            func runOurs() {
                let start = nanoseconds()
                ourResult = ThreeWayMerge.merge(base: b, mine: m, theirs: th)
                ourTime = Double(nanoseconds() - start) * 1e-9
            }
            func runGit() {
                let start = nanoseconds()
                gitResult = b.withUnsafeBytes { bp in m.withUnsafeBytes { mp in th.withUnsafeBytes { tp in
                    gitmerge_merge(bp.baseAddress, bp.count, mp.baseAddress, mp.count, tp.baseAddress, tp.count, 0)
                } } }
                gitTime = Double(nanoseconds() - start) * 1e-9
            }
            if caseIndex % 2 == 0 { runOurs(); runGit() } else { runGit(); runOurs() }
            diff3Result = b.withUnsafeBytes { bp in m.withUnsafeBytes { mp in th.withUnsafeBytes { tp in
                gitmerge_merge(bp.baseAddress, bp.count, mp.baseAddress, mp.count, tp.baseAddress, tp.count, 1)
            } } }
            precondition(gitResult.error == 0 && diff3Result.error == 0, "git_merge_file failed")
            let bucketIndex = bucket(b.count)
            timings.ours[bucketIndex].append(ourTime)
            timings.git[bucketIndex].append(gitTime)

            let ourOutcome: Outcome
            var ourMerged: [UInt8]? = nil
            switch ourResult! {
            case .merged(let bytes):
                ourMerged = bytes
                ourOutcome = bytes.withUnsafeBytes { classify(clean: true, merged: $0, expected: expected, conflictExpected: candidate.underlying.conflictExpected) }
            case .conflicts:
                ourOutcome = classify(clean: false, merged: nil, expected: expected, conflictExpected: candidate.underlying.conflictExpected)
            }
            func outcome(_ result: gitmerge_result) -> Outcome {
                classify(clean: result.clean != 0, merged: UnsafeRawBufferPointer(start: result.text, count: result.length),
                         expected: expected, conflictExpected: candidate.underlying.conflictExpected)
            }
            let gitOutcome = outcome(gitResult), diff3Outcome = outcome(diff3Result)
            ours.add(category, ourOutcome)
            git.add(category, gitOutcome)
            diff3.add(category, diff3Outcome)
            if ourOutcome == .wrong, let ourMerged, ourMerged.withUnsafeBytes({ sameLines($0, expected!) }) {
                ours.reordered[category.rawValue] += 1
            }
            if gitOutcome == .wrong, sameLines(UnsafeRawBufferPointer(start: gitResult.text, count: gitResult.length), expected!) {
                git.reordered[category.rawValue] += 1
            }
            if diff3Outcome != gitOutcome { diff3Differs += 1 }
            if ourOutcome == .right && gitOutcome != .right { onlyOursRight += 1 }
            if gitOutcome == .right && ourOutcome != .right { onlyGitRight += 1 }
            if ourOutcome == .wrong && gitOutcome == .wrong { bothWrong += 1 }
            let gitMerged = gitResult.clean != 0 ? Array(UnsafeRawBufferPointer(start: gitResult.text, count: gitResult.length)) : nil
            if let ourMerged, let gitMerged, ourMerged != gitMerged { disagreements += 1 }

            // Examples: the wrong merges of either, the cases only git merged right, and a few
            // chosen orders; each also cropped to the fewest context lines that still give the
            // same two outcomes (min-*).
            if let directory = examplesDirectory {
                var labels: [String] = []
                if ourOutcome == .wrong { labels.append(gitOutcome == .wrong ? "both-wrong" : "ours-wrong") }
                if gitOutcome == .wrong && ourOutcome != .wrong { labels.append("git-wrong") }
                if gitOutcome == .right && ourOutcome != .right { labels.append("git-only-right") }
                if ourOutcome == .cleanUndefined || gitOutcome == .cleanUndefined { labels.append("order") }
                for label in labels where examplesWritten[label, default: 0] < (label == "order" ? 3 : 12) {
                    examplesWritten[label, default: 0] += 1
                    let folder = "\(directory)/\(label)-\(examplesWritten[label]!)-\(name)"
                    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                    write(b, to: folder + "/base")
                    write(m, to: folder + "/mine")
                    write(th, to: folder + "/theirs")
                    if let expected { write(expected, to: folder + "/expected") }
                    if let ourMerged { write(ourMerged, to: folder + "/ours") }
                    if let gitMerged { write(gitMerged, to: folder + "/git") }
                    var info = "\(name) t=\(sampled[point].t) k=\(sampled[point].k) variant=\(candidate.variant) category=\(category.name) ours=\(ourOutcome.name) git=\(gitOutcome.name)\n"
                    if let expected, !candidate.large {
                        for context in [0, 1, 2, 3, 5, 10, 20, 50] {
                            let small = crop([b, m, th, expected], context: context)
                            let (o, g, om, gm) = mergeBoth(small[0], small[1], small[2], small[3],
                                                           conflictExpected: candidate.underlying.conflictExpected)
                            guard o == ourOutcome && g == gitOutcome else { continue }
                            for (text, file) in zip(small, ["base", "mine", "theirs", "expected"]) { write(text, to: folder + "/min-" + file) }
                            if let om { write(om, to: folder + "/min-ours") }
                            if let gm { write(gm, to: folder + "/min-git") }
                            info += "cropped to \(context) context lines: \(small[0].count) bytes of base\n"
                            break
                        }
                    }
                    write(Array(info.utf8), to: folder + "/info")
                }
            }
            gitmerge_free(&gitResult)
            gitmerge_free(&diff3Result)
        }
    }

    print("\n## \(name): \(transactions.count) transactions; \(pointCount) points sampled, net hunks 0/1/2/3+: \(hunkCounts.map(String.init).joined(separator: "/")); \(verified) expected texts checked against a replay of the trace")
    print("candidates per category: " + Category.allCases.map { "\($0.name) \(available[$0.rawValue])" }.joined(separator: ", "))
    printTable(ours: ours, git: git, diff3: diff3)
    printTimings(timings)
    totals.ours.merge(ours); totals.git.merge(git); totals.diff3.merge(diff3); totals.timings.merge(timings)
}

print("\n## all traces")
printTable(ours: totals.ours, git: totals.git, diff3: totals.diff3)
printTimings(totals.timings)
print("cases where the DIFF3 style changed git's outcome: \(diff3Differs); cases both merged cleanly to different texts: \(disagreements)")
print("clean and right by ours only: \(onlyOursRight); by git only: \(onlyGitRight); wrong by both: \(bothWrong)")
