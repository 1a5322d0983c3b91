// Figure 2 of shared/design/performance.md: "synchronous edit round trips over stdio per second / a
// C pipe ping-pong with the same message sizes: at least 0.3".
//
// Starts the built server (`docsession serve --state-dir DIR`) over pipes, initializes it with
// utf-32 positions (characters are Unicode scalars, as the traces count), and for each editing
// trace, in rounds:
//   - ours, synchronous: a new document (document/create with the trace's startContent), then each
//     patch of the trace as one document/edit request (one edit per request, in line/character
//     positions the client computes on its own copy of the text; patches that change nothing are
//     left out, since the server gives them no new version), each sent against the version it will
//     apply to; write the request, read(2) until its response is complete, next. Then
//     document/read checks the text (endContent for a whole trace) and the document is closed.
//   - ours, pipelined: the same, with up to --window requests in flight: fill the window (one
//     write(2) per request), then after each read(2) take every complete response and top the
//     window up again. Every response's id and version are checked.
//   - the floor (PipeFloor, C): a forked child that reads requests framed as ours and answers each
//     with one response frame, of the median request and response sizes of the synchronous run;
//     the same number of round trips, synchronous and with the same window.
// The floor runs between blocks of --block edits of ours (the window drained first), as many round
// trips as the block had edits, timed apart: both sides see the same moments of a noisy machine.
// Request frames are built before the clock starts; the client scans responses byte-wise for the
// id and the version (no JSON parse), one thread, no reader thread.
//
// Build the server first (from the repository root): `swift build -c release`; then
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build ProtocolRatios
//         [--rounds N]      rounds per trace (default 5)
//         [--trace NAMES]   a trace, a comma-separated list, or `all` (the default: every trace present)
//         [--edits N]       only the first N edits of each trace (a quick run)
//         [--window N]      requests in flight when pipelined (default 64)
//         [--block N]       edits between the floor's turns (default 2000)
//         [--server PATH]   the docsession binary (default: the root package's .build/release/docsession)
//         [--server-arg A]  an argument for `serve` (repeatable), e.g. `--no-journal` to measure without the journal
//         [--label TEXT]    appended to the table's figures, e.g. `journal off`
//         [--dir PATH]      where to make the working directory (default /var/tmp)
//         [--only MODE]     `sync` or `pipelined`: ours alone, no floor (for perf or callgrind on the server)
//         [--placement P]   `same` (the default): this client, the server and the floor's two processes
//                           all on processor 0; `split`: the client and the floor's parent on 0, the
//                           server and the floor's child on 1; `free`: where the kernel puts them.
//
// Placement decides most of a synchronous round trip on a virtual machine: a wake-up of a process
// on the other processor costs an interprocessor interrupt (a VM exit), one on the same processor
// does not, and the kernel keeps a waker and its wakee wherever they first met. Unpinned, the floor
// (forked) and ours (spawned) can land differently from run to run, so both sides are pinned alike.

import BufferWorkloads
import Foundation
import JSON
import JSONRPC
import PipeFloor

// MARK: - Arguments

pipefloor_line_buffered_stdout()  // each line as it is printed, also into a file

let options = CommandLineOptions()
let rounds = max(1, Int(options.option("--rounds") ?? "5") ?? 5)
let traceOption = options.option("--trace") ?? "all"
let editLimit = options.option("--edits").flatMap { Int($0) }
let window = max(1, Int(options.option("--window") ?? "64") ?? 64)
let block = max(1, Int(options.option("--block") ?? "2000") ?? 2000)
let givenServer = options.option("--server")
var serverArguments: [String] = []
while let argument = options.option("--server-arg") { serverArguments.append(argument) }
/// Appended to the table's figures (` (LABEL)`), to tell runs of one binary with other arguments apart.
let label = options.option("--label").map { " (\($0))" } ?? ""
let parent = options.option("--dir") ?? "/var/tmp"
let only = options.option("--only")
let placement = options.option("--placement") ?? "same"
guard ["same", "split", "free"].contains(placement) else { fatalError("--placement takes same, split or free") }
if let only, only != "sync", only != "pipelined" { fatalError("--only takes sync or pipelined") }
guard options.remaining.isEmpty else { fatalError("unknown arguments: \(options.remaining)") }



func medianInt(_ values: [Int]) -> Int { values.sorted()[values.count / 2] }

// MARK: - Setup

let names = traceOption == "all" ? EditingTrace.available : traceOption.split(separator: ",").map(String.init)
guard !names.isEmpty else { fatalError("no editing traces in \(EditingTrace.directory.path)") }
for name in names where !EditingTrace.isPresent(name) { fatalError("no trace \(name) in \(EditingTrace.directory.path)") }

var template = Array((parent + "/ProtocolRatios.XXXXXX").utf8CString)
guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    fatalError("mkdtemp in \(parent) failed: errno \(errno)")
}
let directory = String(cString: made)
let stateDirectory = directory + "/state"
mkdir(stateDirectory, 0o700)

let server = releaseServerPath(given: givenServer)
let session: ServerSession
do { session = try ServerSession(server: server, stateDirectory: stateDirectory, arguments: serverArguments) } catch { fatalError("cannot start \(server): \(error)") }

/// Pins this client and `child` (the server, or the floor's child) as `--placement` says.
func place(child: Int32) {
    guard placement != "free" else { return }
    guard pipefloor_pin_process(0, 0) == 0, pipefloor_pin_process(child, placement == "same" ? 0 : 1) == 0 else {
        fatalError("cannot pin the processes (sched_setaffinity: errno \(errno))")
    }
}
let initialized = session.call("initialize", [
    "processId": .integer(Int64(getpid())),
    "capabilities": ["general": ["positionEncodings": ["utf-32"]]],
])
guard initialized["capabilities"]?["positionEncoding"]?.stringValue == "utf-32" else {
    fatalError("the server did not take utf-32 positions: \(initialized.jsonText)")
}
session.notify("initialized", [:])
// After initialize: the server's threads have started by now (later ones inherit the mask).
place(child: session.process.processIdentifier)

print("server \(server) (pid \(session.process.processIdentifier)); working directory \(directory)")
print("\(ProcessInfo.processInfo.activeProcessorCount) processors; placement \(placement); load average \(loadAverage()); rounds \(rounds); window \(window)"
    + (editLimit.map { "; first \($0) edits of each trace" } ?? ""))

// MARK: - One replay

/// A new document holding the trace's start text; answers its handle and version.
var documentCount = 0
@MainActor func createDocument(_ trace: PlannedTrace) -> (handle: String, version: Int64) {
    documentCount += 1
    let path = directory + "/\(documentCount)-\(trace.name).txt"
    let created = session.call("document/create", ["uri": .string("file://" + path), "text": .string(trace.startContent)])
    guard let handle = created["document"]?.stringValue, let version = created["version"]?.integerValue else {
        fatalError("document/create answered \(created.jsonText)")
    }
    return (handle, version)
}

/// Checks the server's text against the client's, then closes the document (without saving).
@MainActor func finish(_ handle: String, _ trace: PlannedTrace, version: Int64) {
    let read = session.call("document/read", ["document": .string(handle)])
    guard read["version"]?.integerValue == version else { fatalError("\(trace.name): version \(read["version"]?.jsonText ?? "?") after the replay, expected \(version)") }
    guard let text = read["text"]?.stringValue, Array(text.utf8) == Array(trace.expectedText.utf8) else {
        fatalError("\(trace.name): the server's text after the replay differs from the client's")
    }
    _ = session.call("document/close", ["document": .string(handle), "save": "never"])
}

@inline(__always) func check(_ response: ScannedResponse, firstID: Int64, firstVersion: Int64, count: Int) -> Int {
    guard let id = response.id, let version = response.version else {
        fatalError("a response that is not an edit's result: \(response.text ?? "?")")
    }
    let index = Int(id - firstID)
    guard index >= 0, index < count, version == firstVersion + Int64(index) + 1 else {
        fatalError("edit \(index) answered version \(version), expected \(firstVersion + Int64(index) + 1)")
    }
    return index
}

struct Replay {
    var nanoseconds: Int64
    /// The floor's round trips made between the blocks, as many as the edits, the same way.
    var floorNanoseconds: Int64
    var responseBodies: [Int]
}

/// Replays the trace as document/edit requests, `window` in flight (1: synchronous); times the
/// requests only (not the document's creation, the frames' making, the check or the close). With a
/// floor, after every `block` edits (the window drained) the floor makes as many round trips the
/// same way, timed apart: both sides see the same moments of a noisy machine.
@MainActor func replay(_ trace: PlannedTrace, window: Int, floor: UnsafeMutablePointer<pipefloor>?) -> Replay {
    let (handle, version) = createDocument(trace)
    let firstID = session.nextID
    let count = trace.edits.count
    session.nextID += Int64(count)
    let (bytes, offsets) = trace.frames(handle: handle, firstID: firstID, firstVersion: version)
    var bodies = [Int](repeating: 0, count: window == 1 ? count : 0)
    var floorTotal: Int64 = 0
    let elapsed: Int64 = bytes.withUnsafeBytes { raw in
        let base = raw.baseAddress!
        var total: Int64 = 0
        var blockStart = 0
        while blockStart < count {
            let blockEnd = floor == nil ? count : min(count, blockStart + block)
            let begin = nanoseconds()
            if window == 1 {
                for i in blockStart..<blockEnd {
                    session.write(base + offsets[i], offsets[i + 1] - offsets[i])
                    while true {
                        guard let response = session.takeScanned() else { session.fill(); continue }
                        if response.id == nil { continue }  // a notification
                        let index = check(response, firstID: firstID, firstVersion: version, count: count)
                        precondition(index == i, "the response to \(i) was expected, \(index) came")
                        bodies[i] = response.bodySize
                        break
                    }
                }
            } else {
                var sent = blockStart, received = blockStart
                while received < blockEnd {
                    while sent < blockEnd && sent - received < window {
                        session.write(base + offsets[sent], offsets[sent + 1] - offsets[sent])
                        sent += 1
                    }
                    session.fill()
                    while let response = session.takeScanned() {
                        if response.id == nil { continue }
                        _ = check(response, firstID: firstID, firstVersion: version, count: count)
                        received += 1
                    }
                }
            }
            total += nanoseconds() - begin
            if let floor {
                let trips = blockEnd - blockStart
                let ns = window == 1 ? pipefloor_sync(floor, trips) : pipefloor_pipelined(floor, trips, Int32(window))
                if ns <= 0 { fatalError("the floor failed") }
                floorTotal += ns
            }
            blockStart = blockEnd
        }
        return total
    }
    finish(handle, trace, version: version + Int64(count))
    return Replay(nanoseconds: elapsed, floorNanoseconds: floorTotal, responseBodies: bodies)
}

// MARK: - The rounds

func rate(_ count: Int, _ ns: Int64) -> Double { Double(count) / (Double(ns) / 1e9) }
func micro(_ count: Int, _ ns: Int64) -> Double { Double(ns) / 1000 / Double(count) }
func spread(_ values: [Double], _ format: String) -> String {
    let sorted = values.sorted()
    return String(format: format, median(values)) + " (" + String(format: format, sorted.first!) + "-" + String(format: format, sorted.last!) + ")"
}

struct TraceResult {
    var name: String
    var edits: Int
    var ratioSync: [Double] = []
    var ratioPipelined: [Double] = []
    var oursSync: [Double] = []
    var floorSync: [Double] = []
    var oursPipelined: [Double] = []
    var floorPipelined: [Double] = []
}
var results: [TraceResult] = []

for name in names {
    let loaded: EditingTrace
    do { loaded = try EditingTrace.load(name) } catch { fatalError("cannot load \(name): \(error)") }
    let trace = PlannedTrace(loaded, limit: editLimit)
    let count = trace.edits.count
    // The request frames' sizes do not depend on the handle's and ids' digits much: measure them once.
    let sample = trace.frames(handle: "d1", firstID: session.nextID + Int64(count), firstVersion: 1)
    let requestBodies = (0..<count).map { sample.offsets[$0 + 1] - sample.offsets[$0] - "Content-Length: \(0)\r\n\r\n".utf8.count }
    print("\n\(name): \(count) edits (of \(trace.patches) patches; \(trace.noOps) no-ops left out), "
        + "\(trace.nonASCII ? "some non-ASCII text" : "ASCII only"), final text \(trace.expectedText.utf8.count) bytes")

    // Warm-up: the first edits of the trace, both ways (untimed); the responses' size for the floor.
    let warm = PlannedTrace(loaded, limit: min(count, 5000))
    let warmRun = replay(warm, window: 1, floor: nil)
    _ = replay(warm, window: window, floor: nil)

    var result = TraceResult(name: name, edits: count)
    let requestBody = medianInt(requestBodies)
    let responseBody = medianInt(warmRun.responseBodies)
    let floor: UnsafeMutablePointer<pipefloor>? = only == nil ? .allocate(capacity: 1) : nil
    if let floor {
        let started = pipefloor_start(floor, requestBody, responseBody)
        if started != 0 { fatalError("cannot start the floor's child: errno \(errno)") }
        place(child: floor.pointee.pid)
        _ = pipefloor_sync(floor, min(count, 5000))
        _ = pipefloor_pipelined(floor, min(count, 5000), Int32(window))
    }
    print("round   ours sync: edits/s (µs/edit)   floor sync: trips/s (µs)   ratio   ours pipelined: edits/s (µs/edit)   floor pipelined: trips/s (µs)   ratio")
    for round in 0..<rounds {
        var oursSync: Int64 = 0, oursPipelined: Int64 = 0, floorSync: Int64 = 0, floorPipelined: Int64 = 0
        if only != "pipelined" {
            let run = replay(trace, window: 1, floor: floor)
            oursSync = run.nanoseconds
            floorSync = run.floorNanoseconds
            if round == 0 {
                print(String(format: "        message sizes (median bodies, frames add %d bytes of header): request %d bytes (%d-%d), "
                             + "response %d bytes (%d-%d; the floor's: %d, from the warm-up)",
                             "Content-Length: 000\r\n\r\n".utf8.count, requestBody, requestBodies.min()!, requestBodies.max()!,
                             medianInt(run.responseBodies), run.responseBodies.min()!, run.responseBodies.max()!, responseBody))
            }
        }
        if only != "sync" {
            let run = replay(trace, window: window, floor: floor)
            oursPipelined = run.nanoseconds
            floorPipelined = run.floorNanoseconds
        }

        func cell(_ ns: Int64) -> String { ns == 0 ? "-" : String(format: "%9.0f (%6.2f)", rate(count, ns), micro(count, ns)) }
        var ratioSyncText = "-", ratioPipelinedText = "-"
        if oursSync > 0 { result.oursSync.append(rate(count, oursSync)) }
        if oursPipelined > 0 { result.oursPipelined.append(rate(count, oursPipelined)) }
        if floorSync > 0 { result.floorSync.append(rate(count, floorSync)) }
        if floorPipelined > 0 { result.floorPipelined.append(rate(count, floorPipelined)) }
        if oursSync > 0 && floorSync > 0 {
            let ratio = Double(floorSync) / Double(oursSync)
            result.ratioSync.append(ratio)
            ratioSyncText = String(format: "%.3f", ratio)
        }
        if oursPipelined > 0 && floorPipelined > 0 {
            let ratio = Double(floorPipelined) / Double(oursPipelined)
            result.ratioPipelined.append(ratio)
            ratioPipelinedText = String(format: "%.3f", ratio)
        }
        print(String(format: "%5d   %@         %@      %@   %@             %@      %@", round + 1, cell(oursSync), cell(floorSync), ratioSyncText,
                     cell(oursPipelined), cell(floorPipelined), ratioPipelinedText))
    }
    if let floor {
        pipefloor_stop(floor)
        floor.deallocate()
    }
    results.append(result)
}

session.shutDown()
try? FileManager.default.removeItem(atPath: directory)

// MARK: - Summary

print("\nload average at the end \(loadAverage()); notifications received \(session.notifications)")
print("medians of \(rounds) rounds (range), placement \(placement):")
for result in results {
    print("\(result.name) (\(result.edits) edits):")
    if !result.oursSync.isEmpty {
        let us = result.oursSync.map { 1e6 / $0 }
        print("  ours sync        " + spread(result.oursSync, "%.0f") + " edits/s, " + spread(us, "%.2f") + " µs/edit")
    }
    if !result.floorSync.isEmpty {
        print("  floor sync       " + spread(result.floorSync, "%.0f") + " round trips/s, " + spread(result.floorSync.map { 1e6 / $0 }, "%.2f") + " µs")
    }
    if !result.ratioSync.isEmpty {
        let m = median(result.ratioSync)
        print("  figure 2: ours / floor, synchronous   " + spread(result.ratioSync, "%.3f") + " (goal >= 0.3): " + (m >= 0.3 ? "met" : "MISSED"))
        tableRow("synchronous edits / C pipe ping-pong, \(result.name), \(placement) processor(s)\(label)", result.ratioSync, goal: label.isEmpty ? ">= 0.3" : "-")
    }
    if !result.oursPipelined.isEmpty {
        print("  ours pipelined   " + spread(result.oursPipelined, "%.0f") + " edits/s, " + spread(result.oursPipelined.map { 1e6 / $0 }, "%.2f") + " µs/edit")
    }
    if !result.floorPipelined.isEmpty {
        print("  floor pipelined  " + spread(result.floorPipelined, "%.0f") + " round trips/s, " + spread(result.floorPipelined.map { 1e6 / $0 }, "%.2f") + " µs")
    }
    if !result.ratioPipelined.isEmpty {
        print("  ours / floor, pipelined (window \(window))   " + spread(result.ratioPipelined, "%.3f"))
        tableRow("pipelined edits / C pipe ping-pong, \(result.name), \(placement) processor(s)\(label)", result.ratioPipelined, goal: "-")
    }
}
