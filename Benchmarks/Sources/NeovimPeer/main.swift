// Figure 3 of shared/design/performance.md: "our edits per second / Neovim 0.7.2's, same trace, same
// client style: at least 3 times synchronous, at least 1 times pipelined; final texts identical";
// and Neovim's `:write` with 'fsync' against our document/save.
//
// One process, one thread, drives two children over pipes: `nvim --embed --headless -u NONE -i NONE
// -n` through a minimal msgpack-RPC client (MsgPack.swift), and the built server (`docsession
// serve`) through JSON-RPC with LSP framing, initialized with utf-8 positions. The client keeps its
// own model of the text (ClientText.swift) and converts each patch of the trace (scalar offsets)
// into (0-based line, UTF-8 byte column): Neovim's (row, col) for `nvim_buf_set_text`, and our
// (line, character) in utf-8 positions for `document/edit`, the same numbers for both. Those
// conversions are made once per trace, before any timing, for both peers alike; what is timed is
// encoding each request (msgpack / JSON text), one write(2) per request, read(2) of the answers into
// one reused buffer, decoding them (msgpack / framing and json-c) and checking each (no error; for
// us, the expected version).
//   - synchronous: each request is sent after the previous answer arrived;
//   - pipelined: up to --window requests in flight (a sliding window).
// Each replay starts from a fresh buffer holding the trace's startContent (Neovim: a scratch buffer
// from nvim_create_buf and nvim_buf_set_lines; we: document/create of a new file in --dir), and ends
// with a check of the final text (nvim_buf_get_lines joined with '\n'; document/read) against the
// client's model, itself checked against the trace's endContent when the whole trace is replayed.
// The four replays of a round run back to back, their order reversed every other round; the ratio
// of a round is Neovim's time / ours (= our edits per second / Neovim's), and the figures are the
// medians over rounds.
//
// Save: the same text in Neovim's buffer (a listed, normal one, 'fsync' set) and in our document
// (document/create), on the same file system (--dir); timed: `nvim_command("write! path")` over the
// RPC against `document/save` (durable: it fsyncs the file and its directory), alternately.
//
// Build the server first (from the repository root): `swift build -c release`; then
//
//     swift build -c release --package-path Benchmarks --scratch-path Benchmarks/.build --product NeovimPeer
//     Benchmarks/.build/release/NeovimPeer [--rounds N] [--trace NAME]... [--edits N] [--window N]
//         --rounds N        rounds of the four replays per trace (default 5)
//         --trace NAME      a trace of shared/data/editing-traces; repeat for more (default:
//                           automerge-paper, ASCII, and rustcode, with non-ASCII text)
//         --edits N         only the first N patches of each trace (a quick run)
//         --window N        requests in flight when pipelined (default 256)
//         --save-rounds N   saves of each size per peer (default 9); 0 skips the save figure
//         --no-edits        the save figure only
//         --only ours|nvim  replay on one peer alone (for a profiler; no ratios)
//         --server PATH     the docsession binary (default: the root package's .build/release/docsession)
//         --nvim PATH       default: nvim on PATH
//         --dir PATH        where the files go (default /var/tmp: disk-backed)
//         --placement P     same (the default: client and peers on processor 0), split (client on 0,
//                           each peer on 1) or free (unpinned): as ProtocolRatios
//         --verify-each N   a diagnostic: the first N edits of each trace sent to Neovim one call at a
//                           time, its text compared with the client's model every CHECK_EVERY edits
//                           (environment, default 1); reports the first difference
//
// Neovim 0.7.2's nvim_buf_set_text corrupts the buffer after an edit whose range spans lines (a
// join): automerge-paper's edit 1321 deletes from (27, 17) to (28, 0), and line 27 then reads as
// garbage ("start_col out of bounds" at edit 1322) unless another API call came in between. The
// edits whose range spans lines (their count is printed) are sent to Neovim as nvim_buf_set_lines
// of the whole lines the client's model holds after the edit; inserts of '\n' into a line stay
// nvim_buf_set_text (checked: --verify-each over the three traces, and every replay's final text).

import BufferWorkloads
import EditingTraces
import Foundation
import JSON
import PipeFloor

/// Prints a line at once (the output may go to a pipe, as through tee).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

let options = CommandLineOptions()
let rounds = Int(options.option("--rounds") ?? "5") ?? 5
var traceNames: [String] = []
while let name = options.option("--trace") { traceNames.append(name) }
if traceNames.isEmpty { traceNames = ["automerge-paper", "rustcode"] }
let editLimit = options.option("--edits").flatMap { Int($0) } ?? Int.max
let window = max(1, Int(options.option("--window") ?? "256") ?? 256)
let saveRounds = Int(options.option("--save-rounds") ?? "9") ?? 9
let noEdits = options.flag("--no-edits")
let only = options.option("--only")
let givenServer = options.option("--server")
let givenNvim = options.option("--nvim")
let parent = options.option("--dir") ?? "/var/tmp"
let verify = options.option("--verify-each").flatMap { Int($0) }
let placement = options.option("--placement") ?? "same"
guard ["same", "split", "free"].contains(placement) else { fatalError("--placement takes same, split or free") }
if !options.remaining.isEmpty { fatalError("unknown arguments: \(options.remaining)") }


func nvimPath() -> String {
    if let givenNvim { return givenNvim }
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
        let candidate = String(directory) + "/nvim"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    fatalError("no nvim on PATH: pass --nvim PATH")
}


func commandOutput(_ executable: String, _ arguments: [String]) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    guard (try? process.run()) != nil else { return "?" }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

func spread(_ values: [Double], _ format: String) -> String {
    let sorted = values.sorted()
    return String(format: format, median(values)) + " (" + String(format: format, sorted.first ?? 0) + "-" + String(format: format, sorted.last ?? 0) + ")"
}

// MARK: - Setup

let server = releaseServerPath(given: givenServer)
let nvim = nvimPath()
var template = Array((parent + "/NeovimPeer.XXXXXX").utf8CString)
guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    fatalError("mkdtemp in \(parent) failed: errno \(errno)")
}
let directory = String(cString: made)
var fileCounter = 0
@MainActor func newPath(_ stem: String) -> String {
    fileCounter += 1
    return "\(directory)/\(stem)-\(fileCounter).txt"
}

say("server \(server)")
say("neovim \(nvim): \(commandOutput(nvim, ["--version"]).split(separator: "\n").first ?? "?")")
say("files in \(directory); \(ProcessInfo.processInfo.activeProcessorCount) processors; load average \(loadAverage())")

let neovim: Neovim? = only == "ours" ? nil : try Neovim(executable: nvim)
let ours: DocSession? = only == "nvim" ? nil : try DocSession(executable: server)

/// Pins this client and both peers as `--placement` says (as ProtocolRatios does): `same`, all on
/// processor 0; `split`, the client on 0 and each peer on 1; `free`, where the kernel puts them.
/// Each peer is pinned alike, so neither gains from where its first wake-up happened to land.
@MainActor func place() {
    guard placement != "free" else { return }
    let peerProcessor: Int32 = placement == "same" ? 0 : 1
    var ok = pipefloor_pin_process(0, 0) == 0
    if let neovim { ok = ok && pipefloor_pin_process(neovim.channel.process.processIdentifier, peerProcessor) == 0 }
    if let ours { ok = ok && pipefloor_pin_process(ours.channel.process.processIdentifier, peerProcessor) == 0 }
    guard ok else { fatalError("cannot pin the processes (sched_setaffinity: errno \(errno))") }
}
place()
say("placement \(placement)")

// MARK: - Replays

struct Timing { var nvimSync = [Double](), oursSync = [Double](), nvimPipe = [Double](), oursPipe = [Double]() }

/// A child's processor time (user + system, all threads, in ns; 10 ms resolution) and its threads'
/// context switches (voluntary + involuntary), from /proc.
func usage(_ pid: Int32) -> (cpu: Double, switches: Int) {
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
    // After the command's ')': state is field 3, utime 14 and stime 15 (1-based in the whole line).
    let ticks = fields.count > 13 ? (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0) : 0
    var switches = 0
    for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.contains("ctxt_switches") {
            switches += Int(line.split(separator: "\t").last ?? "0") ?? 0
        }
    }
    return (ticks * 1e9 / Double(sysconf(Int32(_SC_CLK_TCK))), switches)
}

/// Per replay kind ("Neovim sync", ...): the child's processor time and context switches per edit.
var costs: [String: (cpu: [Double], switches: [Double])] = [:]
@MainActor func measured(_ key: String, _ pid: Int32?, edits: Int, _ body: () -> Double) -> Double {
    guard let pid else { return body() }
    let before = usage(pid)
    let result = body()
    let after = usage(pid)
    costs[key, default: ([], [])].cpu.append((after.cpu - before.cpu) / Double(edits))
    costs[key, default: ([], [])].switches.append(Double(after.switches - before.switches) / Double(edits))
    return result
}

/// One replay on Neovim: a fresh scratch buffer, the edits, the check; answers ns per edit.
@MainActor func replayNeovim(_ trace: EditingTrace, _ edits: [PeerEdit], _ expected: [UInt8], window: Int) -> Double {
    guard let neovim else { return .nan }
    _ = neovim.beginReplay(Array(trace.startContent.utf8), edits: edits.count)
    let pid = neovim.channel.process.processIdentifier
    var ns: Int64 = 0
    _ = measured("\(trace.name) Neovim \(window == 1 ? "sync" : "pipelined")", edits.count >= 20000 ? pid : nil, edits: edits.count) {
        ns = replay(neovim, edits, window: window); return 0
    }
    let text = neovim.text()
    guard text == expected else {
        fatalError("Neovim's final text differs from the client's (\(text.count) bytes, expected \(expected.count))")
    }
    neovim.endReplay()
    return Double(ns) / Double(edits.count)
}

@MainActor func replayOurs(_ trace: EditingTrace, _ edits: [PeerEdit], _ expected: [UInt8], window: Int) -> Double {
    guard let ours else { return .nan }
    let path = newPath(trace.name)
    ours.beginReplay(path: path, trace.startContent, edits: edits)
    let pid = ours.channel.process.processIdentifier
    var ns: Int64 = 0
    _ = measured("\(trace.name) ours \(window == 1 ? "sync" : "pipelined")", edits.count >= 20000 ? pid : nil, edits: edits.count) {
        ns = replay(ours, edits, window: window); return 0
    }
    let text = ours.text()
    guard text == expected else {
        fatalError("our final text differs from the client's (\(text.count) bytes, expected \(expected.count))")
    }
    ours.endReplay()
    unlink(path)
    return Double(ns) / Double(edits.count)
}

var summaries: [String] = []
if let verify {
    for name in traceNames { verifyEach(try EditingTrace.load(name), count: verify) }
    neovim?.close()
    ours?.close()
    rmdir(directory)
    exit(0)
}
if !noEdits {
    if let neovim {
        let buffer = neovim.call("nvim_create_buf", [.bool(false), .bool(true)])
        let undolevels = neovim.call("nvim_buf_get_option", [buffer, .str("undolevels")])
        let globalUndo = neovim.call("nvim_get_option", [.str("undolevels")])
        say("Neovim scratch buffer: 'undolevels' \(undolevels.description) (global \(globalUndo.description)); pipelined window \(window)")
        neovim.call("nvim_buf_delete", [buffer, .map([(.str("force"), .bool(true))])])
    }
    for name in traceNames {
        let trace: EditingTrace
        do { trace = try EditingTrace.load(name) } catch { fatalError("cannot load trace \(name): \(error)") }
        let prepared = nanoseconds()
        let (edits, expected) = ClientText.edits(of: trace, limit: editLimit)
        let preparation = Double(nanoseconds() - prepared) / 1e6
        let whole = edits.count == trace.patches.count
        if whole && expected != Array(trace.endContent.utf8) { fatalError("\(name): the client's replay does not give endContent") }
        let nonASCII = edits.filter { $0.text.contains { $0 >= 0x80 } }.count
        let multiLine = edits.filter { $0.startLine != $0.endLine || $0.text.contains(0x0A) }.count
        let spanning = edits.filter { $0.neovimLines != nil }.count
        say("\n\(name): \(edits.count) edits\(whole ? " (the whole trace; final text checked against endContent)" : " (a prefix)"), "
            + "\(nonASCII) inserting non-ASCII text, \(multiLine) spanning or making lines (\(spanning) spanning, sent to Neovim as set_lines); final text \(expected.count) bytes; "
            + String(format: "positions computed in %.0f ms, before timing", preparation))

        // Warm-up: a short replay of each kind on each peer.
        let warm = Array(edits.prefix(5000))
        var warmModel = ClientText(trace.startContent)
        for edit in warm {
            _ = warmModel.replace((Int(edit.startLine), Int(edit.startColumn)), (Int(edit.endLine), Int(edit.endColumn)), with: edit.text)
        }
        let warmText = warmModel.bytes
        for w in [1, window] {
            _ = replayNeovim(trace, warm, warmText, window: w)
            _ = replayOurs(trace, warm, warmText, window: w)
        }

        var timing = Timing()
        say("round   Neovim sync  ours sync  ratio    Neovim pipelined  ours pipelined  ratio   (µs per edit; ratio = our edits/s / Neovim's)   load")
        for round in 0..<rounds {
            let reversed = round % 2 == 1
            var nvimSync = 0.0, oursSync = 0.0, nvimPipe = 0.0, oursPipe = 0.0
            if reversed {
                oursSync = replayOurs(trace, edits, expected, window: 1)
                nvimSync = replayNeovim(trace, edits, expected, window: 1)
                oursPipe = replayOurs(trace, edits, expected, window: window)
                nvimPipe = replayNeovim(trace, edits, expected, window: window)
            } else {
                nvimSync = replayNeovim(trace, edits, expected, window: 1)
                oursSync = replayOurs(trace, edits, expected, window: 1)
                nvimPipe = replayNeovim(trace, edits, expected, window: window)
                oursPipe = replayOurs(trace, edits, expected, window: window)
            }
            timing.nvimSync.append(nvimSync); timing.oursSync.append(oursSync)
            timing.nvimPipe.append(nvimPipe); timing.oursPipe.append(oursPipe)
            say(String(format: "%5d   %11.2f  %9.2f  %5.2f    %16.2f  %14.2f  %5.2f   %@", round + 1,
                         nvimSync / 1000, oursSync / 1000, nvimSync / oursSync, nvimPipe / 1000, oursPipe / 1000, nvimPipe / oursPipe,
                         loadAverage()))
        }
        let syncRatios = zip(timing.nvimSync, timing.oursSync).map { $0 / $1 }
        let pipeRatios = zip(timing.nvimPipe, timing.oursPipe).map { $0 / $1 }
        let mNS = median(timing.nvimSync), mOS = median(timing.oursSync), mNP = median(timing.nvimPipe), mOP = median(timing.oursPipe)
        var lines: [String] = []
        lines.append("\(name), \(edits.count) edits, medians of \(rounds) rounds (min-max):")
        lines.append(String(format: "  synchronous: Neovim %.2f µs/edit (%.0f edits/s), ours %.2f µs/edit (%.0f edits/s); ratio ",
                            mNS / 1000, 1e9 / mNS, mOS / 1000, 1e9 / mOS)
            + spread(syncRatios, "%.2f") + " (goal >= 3): " + (median(syncRatios) >= 3 ? "met" : "MISSED"))
        lines.append(String(format: "  pipelined (window %d): Neovim %.2f µs/edit (%.0f edits/s), ours %.2f µs/edit (%.0f edits/s); ratio ",
                            window, mNP / 1000, 1e9 / mNP, mOP / 1000, 1e9 / mOP)
            + spread(pipeRatios, "%.2f") + " (goal >= 1): " + (median(pipeRatios) >= 1 ? "met" : "MISSED"))
        tableRow("our edits/s / Neovim's, synchronous, \(name), \(placement) processor(s)", syncRatios, goal: ">= 3", format: "%.2f")
        tableRow("our edits/s / Neovim's, pipelined, \(name), \(placement) processor(s)", pipeRatios, goal: ">= 1", format: "%.2f")
        for kind in ["Neovim sync", "ours sync", "Neovim pipelined", "ours pipelined"] {
            if let cost = costs["\(name) \(kind)"] {
                lines.append(String(format: "  %@: the peer's processor time %.1f µs/edit, %.2f context switches/edit (medians)",
                                    kind, median(cost.cpu) / 1000, median(cost.switches)))
            }
        }
        // On one processor a round trip is the client's work, the server's and the kernel's, one
        // after the other. Take away the server's processor time (its kernel time included) and
        // what remains is the client's share, which no server can remove: Neovim's time over that
        // share is the most any server could reach with this client here.
        if placement == "same" {
            for (kind, neovimTime, ourTime) in [("synchronous", mNS, mOS), ("pipelined", mNP, mOP)] {
                let key = kind == "synchronous" ? "sync" : "pipelined"
                guard let cost = costs["\(name) ours \(key)"] else { continue }
                // Times and processor times are in ns per edit.
                let clientShare = ourTime - median(cost.cpu)
                guard clientShare > 0 else { continue }
                let ceiling = neovimTime / clientShare
                lines.append(String(format: "  %@: the client's share of our round trip %.1f µs/edit (ours %.1f minus the server's %.1f); "
                    + "a server costing nothing would reach %.2f times Neovim here", kind, clientShare / 1000, ourTime / 1000,
                    median(cost.cpu) / 1000, ceiling))
                say("table| ceiling of ours / Neovim, \(kind), \(name), same processor: a server costing nothing (Neovim / the client's share) | "
                    + String(format: "%.2f", ceiling) + " |  | - | -")
            }
        }
        lines.append("  final texts identical: yes (checked after every replay, \(expected.count) bytes)")
        for line in lines { say(line) }
        summaries += lines
    }
}

// MARK: - Save

if saveRounds > 0, let neovim, let ours {
    say("\nsave: Neovim `write!` with 'fsync' / our document/save (durable), \(saveRounds) rounds each, alternately")
    neovim.call("nvim_command", [.str("set fsync")])
    let settings = ["fsync", "writebackup", "backup", "backupcopy", "backupdir", "swapfile"].map { option in
        "\(option)=\(neovim.call("nvim_get_option", [.str(option)]).description)"
    }
    say("Neovim options: " + settings.joined(separator: " "))
    var hundredKB: [UInt8]
    if let trace = try? EditingTrace.load("automerge-paper") { hundredKB = Array(trace.endContent.utf8) } else {
        hundredKB = []
        var generator = GeneratedLines()
        while hundredKB.count < 100_000 { generator.appendLine(to: &hundredKB) }
    }
    if hundredKB.last != 0x0A { hundredKB.append(0x0A) }  // so that Neovim's 'eol' writes the same bytes
    var tenMB: [UInt8] = []
    tenMB.reserveCapacity(10_000_200)
    var generator = GeneratedLines()
    while tenMB.count < 10_000_000 { generator.appendLine(to: &tenMB) }

    for (label, text) in [("100 KB", hundredKB), ("10 MB", tenMB)] {
        // Neovim: a listed, normal buffer made current, named by its first write.
        let nvimFile = newPath("nvim-save")
        let buffer = neovim.call("nvim_create_buf", [.bool(true), .bool(false)])
        neovim.buffer = buffer.intValue!
        neovim.call("nvim_set_current_buf", [buffer])
        neovim.setLines(text, forFile: true)
        let write = "write! " + nvimFile
        neovim.call("nvim_command", [.str(write)])
        // Ours: a new document holding the text.
        let ourFile = newPath("ours-save")
        let created = ours.call("document/create", ["uri": .string("file://" + ourFile), "text": .string(String(decoding: text, as: UTF8.self))])
        let handle = created["document"]!.stringValue!
        _ = ours.call("document/save", ["document": .string(handle)])
        var version = created["version"]!.integerValue!
        guard text[0] < 0x80 else { fatalError("the text should start with an ASCII character") }
        let firstCharacter = String(UnicodeScalar(text[0]))
        let mark = firstCharacter == "#" ? "%" : "#"

        var nvimTimes: [Double] = [], ourTimes: [Double] = []
        for round in 0..<saveRounds {
            func nvimSave() {
                let start = nanoseconds()
                neovim.call("nvim_command", [.str(write)])
                nvimTimes.append(Double(nanoseconds() - start) / 1e6)
            }
            func ourSave() {
                // The first character changed first (to a mark, and back the next round; untimed):
                // a save of the text the file holds already writes nothing (`method: "unchanged"`,
                // protocol §8.14), while Neovim's `write!` writes whatever the buffer holds.
                let edited = ours.call("document/edit", [
                    "document": .string(handle), "version": .integer(version),
                    "edits": [["range": ["start": ["line": 0, "character": 0], "end": ["line": 0, "character": 1]],
                               "text": .string(round % 2 == 0 ? mark : firstCharacter)]],
                ])
                guard let next = edited["version"]?.integerValue else { fatalError("our edit failed: \(edited.jsonText)") }
                version = next
                let start = nanoseconds()
                let saved = ours.call("document/save", ["document": .string(handle)])
                ourTimes.append(Double(nanoseconds() - start) / 1e6)
                guard saved["durable"]?.boolValue == true else { fatalError("our save was not durable: \(saved.jsonText)") }
                guard saved["method"]?.stringValue != "unchanged" else { fatalError("our save wrote nothing: \(saved.jsonText)") }
            }
            if round % 2 == 0 { nvimSave(); ourSave() } else { ourSave(); nvimSave() }
        }
        var a = stat(), b = stat()
        stat(nvimFile, &a)
        stat(ourFile, &b)
        guard a.st_size == text.count, b.st_size == text.count else {
            fatalError("file sizes: Neovim's \(a.st_size), ours \(b.st_size), text \(text.count)")
        }
        let ratios = zip(ourTimes, nvimTimes).map { $0 / $1 }
        tableRow("save \(label): ours / Neovim's :write with fsync", ratios, goal: "-", format: "%.2f")
        let line = "save \(label) (\(text.count) bytes): Neovim :write " + spread(nvimTimes, "%.2f") + " ms, ours "
            + spread(ourTimes, "%.2f") + " ms; ours / Neovim " + spread(ratios, "%.2f")
        say(line)
        summaries.append(line)
        neovim.call("nvim_buf_delete", [buffer, .map([(.str("force"), .bool(true))])])
        ours.call("document/close", ["document": .string(handle), "save": "never"])
        unlink(nvimFile)
        unlink(ourFile)
    }
}

neovim?.close()
ours?.close()
if let dirEntries = try? FileManager.default.contentsOfDirectory(atPath: directory) {
    for entry in dirEntries { unlink(directory + "/" + entry) }
}
rmdir(directory)
say("\nsummary (load average at the end \(loadAverage())):")
for line in summaries { say(line) }

/// A diagnostic: replays the first `count` edits of `trace` on Neovim one call at a time, comparing
/// its text with the client's model after each; reports the first difference.
@MainActor func verifyEach(_ trace: EditingTrace, count: Int, checkEvery: Int = Int(ProcessInfo.processInfo.environment["CHECK_EVERY"] ?? "1")!) {
    guard let neovim else { return }
    let (edits, _) = ClientText.edits(of: trace, limit: count)
    var model = ClientText(trace.startContent)
    _ = neovim.beginReplay(Array(trace.startContent.utf8), edits: 0)
    for (index, edit) in edits.enumerated() {
        var lines: [MsgPack] = edit.text.split(separator: 0x0A, omittingEmptySubsequences: false).map { .string(Array($0)) }
        if lines.isEmpty { lines = [.string([])] }
        let (error, _) = edit.neovimLines.map { whole in
            neovim.callAnswering("nvim_buf_set_lines", [.int(neovim.buffer), .int(Int64(edit.startLine)), .int(Int64(edit.endLine) + 1),
                                                        .bool(true), .array(whole.map { .string($0) })])
        } ?? neovim.callAnswering("nvim_buf_set_text", [.int(neovim.buffer), .int(Int64(edit.startLine)), .int(Int64(edit.startColumn)),
                                          .int(Int64(edit.endLine)), .int(Int64(edit.endColumn)), .array(lines)])
        if !error.isNil {
            say("edit \(index): \(edit) failed: \(error.description); model line \(edit.startLine): \(String(reflecting: String(decoding: model.lines[Int(edit.startLine)], as: UTF8.self)))")
            let row = neovim.call("nvim_buf_get_lines", [.int(neovim.buffer), .int(Int64(edit.startLine)), .int(Int64(edit.startLine) + 1), .bool(true)])
            say("Neovim's line: \(row.description)")
            for back in max(0, index - 8)..<index { say("  before: \(back): \(edits[back])") }
            return
        }
        _ = model.replace((Int(edit.startLine), Int(edit.startColumn)), (Int(edit.endLine), Int(edit.endColumn)), with: edit.text)
        if index % checkEvery != 0 && index != edits.count - 1 { continue }
        let text = neovim.text()
        if text != model.bytes {
            say("edit \(index): \(edit) — Neovim's text differs from the model: \(text.count) vs \(model.bytes.count) bytes")
            let a = String(decoding: text, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            let b = String(decoding: model.bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            for i in 0..<max(a.count, b.count) where i >= a.count || i >= b.count || a[i] != b[i] {
                say("line \(i): nvim \(i < a.count ? String(reflecting: a[i]) : "-") model \(i < b.count ? String(reflecting: b[i]) : "-")")
                break
            }
            say("lines: nvim \(a.count), model \(b.count)")
            return
        }
    }
    say("verified \(edits.count) edits")
}
