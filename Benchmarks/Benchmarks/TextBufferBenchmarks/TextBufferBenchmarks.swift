// The buffer benchmarks of shared/design/performance.md under ordo-one/benchmark: absolute times,
// percentiles and allocation counts. The ratios that the goals are stated in come from the
// BufferRatios command, which runs each pair side by side (see README.md beside Package.swift).

import Benchmark
import BufferWorkloads
import TextBuffer

/// The automerge-paper trace and what the benchmarks derive from it, built once.
struct Fixture: Sendable {
    let patches: [EditingTrace.Patch]
    let start: TextBuffer
    let startBytes: [UInt8]
    let large: TextBuffer
    let shift: Int
    let requests: [[TextEdit]]
    let applied: TextBuffer
    let history: UndoHistory

    init() {
        let trace = try! EditingTrace.load("automerge-paper")
        patches = trace.patches
        start = TextBuffer(trace.startContent)
        startBytes = Array(trace.startContent.utf8)
        let half = Workloads.generatedDocument(bytes: 5_000_000)
        large = TextBuffer(half + trace.startContent + half)
        shift = half.unicodeScalars.count
        requests = Workloads.editRequests(trace, encoding: .utf16)
        (applied, history) = Workloads.applyRequests(requests, to: start, encoding: .utf16)
    }
}

let fixture = Fixture()

let benchmarks: @Sendable () -> Void = {
    let timing = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident],
        warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 15)

    Benchmark("automerge-paper replay: rope", configuration: timing) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Workloads.replayRope(fixture.patches, from: fixture.start))
        }
    }

    Benchmark("automerge-paper replay: flat byte array", configuration: timing) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Workloads.replayFlat(fixture.patches, from: fixture.startBytes))
        }
    }

    Benchmark("automerge-paper replay: rope, inside a 10 MB document", configuration: timing) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Workloads.replayRope(fixture.patches, from: fixture.large, scalarShift: fixture.shift))
        }
    }

    Benchmark("automerge-paper: apply edit requests and record undo steps", configuration: timing) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Workloads.applyRequests(fixture.requests, to: fixture.start, encoding: .utf16))
        }
    }

    Benchmark("automerge-paper: undo all, then redo all", configuration: timing) { benchmark in
        for _ in benchmark.scaledIterations {
            var buffer = fixture.applied
            var history = fixture.history
            blackHole(Workloads.undoAllRedoAll(&buffer, &history, encoding: .utf16))
        }
    }
}
