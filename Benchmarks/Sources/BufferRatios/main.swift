// Runs each benchmark pair of shared/design/performance.md side by side in one process, several
// rounds, and prints each round's ratio and the median: ratios measured in the same run, not
// absolute times, because these machines are noisy.
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build BufferRatios [rounds]

import BufferWorkloads
import Foundation
import TextBuffer

let rounds = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 7 : 7
/// `BufferRatios <rounds> <title prefix>[:denominator]` runs one side of one pair alone, `rounds`
/// times, for a profiler.
let only = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : nil

/// Seconds taken by `body`.
func time(_ body: () -> Void) -> Double {
    let start = ContinuousClock.now
    body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
}


/// Times `numerator` and `denominator` alternately for `rounds` rounds and prints the ratios.
func measure(_ title: String, goal: String, _ numerator: () -> Void, _ denominator: () -> Void) {
    if let only {
        // Profiling: run the named side of the pair whose title starts with `only`'s first word.
        let parts = only.split(separator: ":")
        guard title.hasPrefix(parts[0]) else { return }
        let work = parts.count > 1 && parts[1] == "denominator" ? denominator : numerator
        for _ in 0..<rounds { work() }
        exit(0)
    }
    numerator()
    denominator()  // warm up
    var ratios: [Double] = []
    var tops: [Double] = []
    var bottoms: [Double] = []
    for _ in 0..<rounds {
        let top = time(numerator)
        let bottom = time(denominator)
        tops.append(top)
        bottoms.append(bottom)
        ratios.append(top / bottom)
    }
    let list = ratios.map { String(format: "%.3f", $0) }.joined(separator: " ")
    let padded = title.padding(toLength: max(title.count, 48), withPad: " ", startingAt: 0)
    print(padded + String(format: "  median %.3f  (goal %@)  times %.1f ms / %.1f ms  rounds [%@]",
                          median(ratios), goal, median(tops) * 1000, median(bottoms) * 1000, list))
    tableRow(title, ratios, goal: goal)
}

let trace = try EditingTrace.load("automerge-paper")
let patches = trace.patches
let endBytes = Array(trace.endContent.utf8)
precondition(Workloads.replayRope(patches, from: TextBuffer(trace.startContent)).utf8Bytes() == endBytes)
precondition(Workloads.replayFlat(patches, from: Array(trace.startContent.utf8)) == endBytes)
print("automerge-paper: \(patches.count) patches, \(trace.endContent.utf8.count) bytes at the end; \(rounds) rounds\n")

// 1. Rope replay / flat [UInt8] replay.
let start = TextBuffer(trace.startContent)
let startBytes = Array(trace.startContent.utf8)
measure("replay: rope / flat byte array", goal: "<= 0.5", {
    _ = Workloads.replayRope(patches, from: start)
}, {
    _ = Workloads.replayFlat(patches, from: startBytes)
})

// 2. The same trace in the middle of a 10 MB document / bare.
let half = Workloads.generatedDocument(bytes: 5_000_000)
let large = TextBuffer(half + trace.startContent + half)
let shift = half.unicodeScalars.count
let largeResult = Workloads.replayRope(patches, from: large, scalarShift: shift)
precondition(largeResult.text(in: half.utf8.count ..< half.utf8.count + endBytes.count) == trace.endContent)
print("10 MB document: \(large.utf8Count) bytes, \(large.lineCount) lines")
measure("replay in a 10 MB document / bare", goal: "<= 3", {
    _ = Workloads.replayRope(patches, from: large, scalarShift: shift)
}, {
    _ = Workloads.replayRope(patches, from: start)
})

// 3. Undo all then redo all / applying, as a session does (utf-16 positions, a step per request).
let requests = Workloads.editRequests(trace, encoding: .utf16)
let (applied, history) = Workloads.applyRequests(requests, to: start, encoding: .utf16)
precondition(applied.utf8Bytes() == endBytes)
measure("undo all + redo all / apply requests", goal: "<= 1.0", {
    var buffer = applied
    var copy = history
    _ = Workloads.undoAllRedoAll(&buffer, &copy, encoding: .utf16)
}, {
    _ = Workloads.applyRequests(requests, to: start, encoding: .utf16)
})
