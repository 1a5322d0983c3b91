// The three-way merge of `document/resolveConflict` on a 100 MB document (issue 15), measured
// against its floor side by side in one process:
//
//   ThreeWayMerge.merge(base:mine:theirs:) on three flat byte arrays (what resolveConflict hands it)
//   / the floor: memcmp of every byte each side shares with the base (the prefix before its change
//   and the suffix after it, which any merge has to look at to know they are equal) plus, when the
//   merge succeeds, malloc + memcpy of the merged text's size (the result is a new array).
//
// The base is BufferWorkloads' generated text (lines of 0 to 160 characters, about one word in three
// not ASCII), about 100 MB. The workloads:
//
//   apart      mine replaces a line a third of the way in, theirs one two thirds of the way in: merged
//   near       mine and theirs replace two lines ten apart in the middle: merged
//   conflict   both replace the same line in the middle, differently: one conflict
//   crlf       `apart` on the same text with CRLF line breaks
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build MergeRatios [rounds, default 7]
//         [--mb N]             size of the base in MB (default 100)
//         [--only NAME]        one workload
//
// Each round runs the floor, then the merge, of one workload; the medians of the rounds are printed,
// and a table row per workload for scripts/bench.

import BufferWorkloads
import Foundation
import TextBuffer

let options = CommandLineOptions()
let megabytes = options.option("--mb").flatMap { Int($0) } ?? 100
let only = options.option("--only")
let rounds = options.remaining.first.flatMap { Int($0) } ?? 7

/// Seconds since `start` (nanoseconds()).
func seconds(since start: Int64) -> Double { Double(nanoseconds() - start) * 1e-9 }

/// The generated base: whole lines until it holds `megabytes` MB; answers it with its line starts.
func generatedBase(crlf: Bool) -> (bytes: [UInt8], lineStarts: [Int]) {
    var lines = GeneratedLines()
    var bytes: [UInt8] = []
    let target = megabytes * 1_000_000
    bytes.reserveCapacity(target + 512)
    var starts: [Int] = []
    while bytes.count < target {
        starts.append(bytes.count)
        lines.appendLine(to: &bytes, crlf: crlf)
    }
    starts.append(bytes.count)
    return (bytes, starts)
}

/// `base` with line `line` replaced by `text` (its break added).
func replacingLine(_ base: [UInt8], _ starts: [Int], _ line: Int, with text: String, crlf: Bool) -> [UInt8] {
    var result: [UInt8] = []
    result.reserveCapacity(base.count + 64)
    result.append(contentsOf: base[0..<starts[line]])
    result.append(contentsOf: Array((text + (crlf ? "\r\n" : "\n")).utf8))
    result.append(contentsOf: base[starts[line + 1]...])
    return result
}

/// One workload: the three texts, what each side shares with the base (for the floor), and the
/// expected outcome.
struct Workload {
    var name: String
    var base: [UInt8]
    var mine: [UInt8]
    var theirs: [UInt8]
    /// For each side, the byte counts of its prefix and suffix equal to the base's.
    var shared: [(side: [UInt8], prefix: Int, suffix: Int)]
    var expected: ThreeWayMerge.Result?
    var conflicts: Int
}

func workload(_ name: String) -> Workload {
    let crlf = name == "crlf"
    let (base, starts) = generatedBase(crlf: crlf)
    let lineCount = starts.count - 1
    let (mineLine, theirsLine): (Int, Int)
    switch name {
    case "apart", "crlf": (mineLine, theirsLine) = (lineCount / 3, 2 * lineCount / 3)
    case "near": (mineLine, theirsLine) = (lineCount / 2, lineCount / 2 + 10)
    case "conflict": (mineLine, theirsLine) = (lineCount / 2, lineCount / 2)
    default: fatalError("unknown workload \(name): apart, near, conflict or crlf")
    }
    let mine = replacingLine(base, starts, mineLine, with: "mine's line", crlf: crlf)
    let theirs = replacingLine(base, starts, theirsLine, with: "theirs' line", crlf: crlf)
    func shared(_ side: [UInt8], _ line: Int) -> (side: [UInt8], prefix: Int, suffix: Int) {
        (side, starts[line], base.count - starts[line + 1])
    }
    var expected: ThreeWayMerge.Result? = nil
    if mineLine != theirsLine {
        var merged = replacingLine(base, starts, theirsLine, with: "theirs' line", crlf: crlf)
        merged = replacingLine(merged, starts, mineLine, with: "mine's line", crlf: crlf)
        expected = .merged(merged)
    }
    return Workload(name: name, base: base, mine: mine, theirs: theirs,
                    shared: [shared(mine, mineLine), shared(theirs, theirsLine)], expected: expected,
                    conflicts: mineLine == theirsLine ? 1 : 0)
}

/// The floor: memcmp of what each side shares with the base, then a new array of the merged size
/// filled with memcpy (when the merge succeeds).
@inline(never) func floorRun(_ work: Workload) -> Int {
    var sink = 0
    work.base.withUnsafeBytes { base in
        for (side, prefix, suffix) in work.shared {
            side.withUnsafeBytes { side in
                sink &+= Int(memcmp(base.baseAddress!, side.baseAddress!, prefix))
                sink &+= Int(memcmp(base.baseAddress! + base.count - suffix, side.baseAddress! + side.count - suffix, suffix))
            }
        }
    }
    if work.conflicts == 0 {
        let size = max(work.mine.count, work.theirs.count)
        let copy = malloc(size)!
        work.mine.withUnsafeBytes { _ = memcpy(copy, $0.baseAddress!, min(size, $0.count)) }
        sink &+= Int(copy.load(fromByteOffset: size / 2, as: UInt8.self))
        free(copy)
    }
    return sink
}

print("MergeRatios: \(megabytes) MB base, \(rounds) rounds; load average \(loadAverage())")
var sink = 0
for name in ["apart", "near", "conflict", "crlf"] where only == nil || only == name {
    let work = workload(name)
    // Checked once, untimed: the workload is what it says.
    let result = ThreeWayMerge.merge(base: work.base, mine: work.mine, theirs: work.theirs)
    if let expected = work.expected {
        precondition(result == expected, "\(name): the merge did not give the expected text")
    } else if case .conflicts(let regions) = result {
        precondition(regions.count == work.conflicts, "\(name): \(regions.count) conflicts")
    } else {
        preconditionFailure("\(name): merged where a conflict was expected")
    }
    var floors: [Double] = [], merges: [Double] = [], ratios: [Double] = []
    for _ in 0..<rounds {
        var start = nanoseconds()
        sink &+= floorRun(work)
        let floor = seconds(since: start)
        start = nanoseconds()
        let merged = ThreeWayMerge.merge(base: work.base, mine: work.mine, theirs: work.theirs)
        let merge = seconds(since: start)
        if case .merged(let bytes) = merged { sink &+= bytes.count }
        floors.append(floor)
        merges.append(merge)
        ratios.append(merge / floor)
    }
    print(String(format: "%@ (%.1f MB, %d conflicts): merge %.1f ms, floor %.1f ms, merge / floor %.2f (rounds %@)",
                 name, Double(work.base.count) / 1e6, work.conflicts, median(merges) * 1000, median(floors) * 1000,
                 median(ratios), ratios.map { String(format: "%.2f", $0) }.joined(separator: " ")))
    tableRow("three-way merge \(megabytes) MB, \(name): merge (s)", merges, goal: "< 0.5")
    tableRow("three-way merge \(megabytes) MB, \(name): merge / memcmp + copy", ratios, goal: "-", format: "%.2f")
}
if sink == 42 { print("") }
