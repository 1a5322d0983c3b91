// Latency of an edit while a large save runs (shared/design/performance.md, figure 7): "p99 of a
// single edit while a 100 MB save runs: under 1 ms" (saves run on a snapshot, off the request path).
//
// Starts the built server (`docsession serve`) over pipes, opens a generated 100 MB file, then in
// rounds:
//   - quiet: single-character edits (document/edit inserting "x" at the start of a line spread over
//     the document), sent one at a time, each round trip timed from the write of the request to the
//     parse of its response, with no save running;
//   - during a save: document/save is sent (the server answers it later, when the file is durable),
//     and while its response has not arrived the same edits are sent one after another, each round
//     trip timed; the edit in flight when the save's response arrives counts as during the save.
// It reports p50, p99, p99.9 and the maximum of both sets, the median over saves of each save's
// p99 and of each save's maximum (the worst wait: the goal is no edit over 5 ms during a save), the
// edits over 1 ms per save (and when in the save they were sent), each save's time and how many
// edits fit in one save, and the machine's load averages before and after.
//
// The client is one thread: it writes each request with write(2) and reads the server's output
// with read(2) until the response arrives (no reader thread, no condition variable between the
// pipe and the clock, as Client's ServerProcess has), so the round trip is the server's time plus
// two pipe hops.
//
// Build the server first (from the repository root): `swift build -c release`; then
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build EditLatency [saves]
//         [--server PATH]   the docsession binary (default: the root package's .build/release/docsession)
//         [--mb N]          size of the generated file in MB (default 100)
//         [--dir PATH]      where to make the working directory (default /var/tmp: disk-backed)
//         [--file PATH]     edit and save this existing file instead of generating one (it is modified)
//         [--quiet N]       edits per quiet round (default 1000)
//         [--renice-saves N]  a diagnostic, not the figure: a thread of this process watches the
//                         server's threads and sets the nice value of each thread started after the
//                         warm-up (the save threads: the cooperative pool is up by then) to N as
//                         soon as it appears (within about 0.2 ms), to see whether a save thread at
//                         a lower priority keeps the edits' tail short
//         [--no-floor]      skip the floor
//
// The floor, in the same run, after the server's rounds: the same number of rounds of C round trips
// over pipes with a child process (PipeFloor: framed messages of an edit's sizes, no JSON), one at
// a time, with no save and while a thread of this process at nice 10 (as the server's save thread)
// saves the same 100 MB with SaveFloor (the safe save's system calls in C, 1 MiB pieces). Its
// maximum per save is what this machine does to any round trip while 100 MB is written and flushed:
// on a virtual machine the host may stop a virtual processor for a while (steal time, printed).

import Foundation
import BufferWorkloads
import JSON
import JSONRPC
import PipeFloor
import SaveFloor
import Synchronization

// MARK: - Arguments

let options = CommandLineOptions()

let megabytes = Int(options.option("--mb") ?? "100") ?? 100
let parent = options.option("--dir") ?? "/var/tmp"
let givenFile = options.option("--file")
let quietPerRound = Int(options.option("--quiet") ?? "1000") ?? 1000
let givenServer = options.option("--server")
let reniceSaves = options.option("--renice-saves").flatMap { Int32($0) }
let saves = options.remaining.first.flatMap { Int($0) } ?? 9


// MARK: - Clock and statistics

/// The value below which `fraction` of `sorted` lies (nearest rank).
func percentile(_ sorted: [Int64], _ fraction: Double) -> Int64 {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

func micro(_ ns: Int64) -> String { String(format: "%.1f", Double(ns) / 1000) }

func summary(_ values: [Int64]) -> String {
    let sorted = values.sorted()
    return "p50 \(micro(percentile(sorted, 0.5))) µs, p99 \(micro(percentile(sorted, 0.99))) µs, "
        + "p99.9 \(micro(percentile(sorted, 0.999))) µs, max \(micro(sorted.last ?? 0)) µs (\(sorted.count) edits)"
}

// MARK: - The file

func countLines(_ path: String) -> Int {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    precondition(fd >= 0, "cannot read \(path)")
    defer { close(fd) }
    var lines = 0
    while let chunk = FileDescriptorIO.read(fd, capacity: 1 << 20), !chunk.isEmpty {
        for byte in chunk where byte == 0x0A { lines += 1 }
    }
    return lines
}


// MARK: - The client

/// The server as a child process, driven from this thread alone.
final class Session {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let inputFD: Int32
    let outputFD: Int32
    var framer = FrameParser(maxMessageSize: 1 << 30)
    let parser = JSONParser()
    var queued: [JSONValue] = []
    var nextID: Int64 = 1
    var notifications = 0
    /// The pending save's id, and when its response arrived (0 until then).
    var saveID: Int64 = -1
    var saveResponse: JSONValue?
    var saveArrival: Int64 = 0

    init(server: String) throws {
        process.executableURL = URL(fileURLWithPath: server)
        process.arguments = ["serve"]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        inputFD = input.fileHandleForWriting.fileDescriptor
        outputFD = output.fileHandleForReading.fileDescriptor
    }

    func makeID() -> Int64 {
        defer { nextID += 1 }
        return nextID
    }

    /// Sends a framed body.
    func send(_ body: [UInt8]) {
        var frame = Array("Content-Length: \(body.count)\r\n\r\n".utf8)
        frame += body
        precondition(FileDescriptorIO.writeAll(inputFD, frame), "the server's input closed")
    }

    func request(_ method: String, _ params: JSONValue) -> Int64 {
        let id = makeID()
        send(JSONValue.object(["jsonrpc": "2.0", "id": .integer(id), "method": .string(method), "params": params]).serialized())
        return id
    }

    /// Reads until the response to `id` arrives; other messages are counted (notifications) or
    /// kept (the save's response, with its arrival time).
    func waitForResponse(_ id: Int64) -> JSONValue {
        while true {
            if let index = queued.firstIndex(where: { $0["id"]?.integerValue == id && $0["method"] == nil }) {
                return queued.remove(at: index)
            }
            guard let chunk = FileDescriptorIO.read(outputFD), !chunk.isEmpty else {
                fatalError("the server closed its output")
            }
            let now = nanoseconds()
            for event in framer.feed(chunk) {
                guard case .message(let body) = event, let message = try? parser.parse(body) else {
                    fatalError("bad output from the server: \(event)")
                }
                if message["method"] != nil {
                    notifications += 1
                } else if message["id"]?.integerValue == saveID {
                    saveResponse = message
                    saveArrival = now
                } else {
                    queued.append(message)
                }
            }
        }
    }

    func call(_ method: String, _ params: JSONValue) -> JSONValue {
        let response = waitForResponse(request(method, params))
        guard let result = response["result"] else { fatalError("\(method) failed: \(response.jsonText)") }
        return result
    }

    func shutDown() {
        _ = call("shutdown", .null)
        send(JSONValue.object(["jsonrpc": "2.0", "method": "exit"]).serialized())
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

// MARK: - Setup

let server = releaseServerPath(given: givenServer)
var directory: String? = nil
let path: String
let lineCount: Int
if let givenFile {
    path = givenFile
    lineCount = countLines(path)
} else {
    var template = Array((parent + "/EditLatency.XXXXXX").utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        fatalError("mkdtemp in \(parent) failed: errno \(errno)")
    }
    directory = String(cString: made)
    path = directory! + "/generated.txt"
    lineCount = GeneratedLines.writeFile(at: path, bytes: megabytes * 1_000_000, sync: true)
}
var size = stat()
stat(path, &size)
print("server \(server)")
print(String(format: "file %@: %.1f MB, %d lines, on %@; %d saves; %d processors", path, Double(size.st_size) / 1e6, lineCount,
             String(cString: save_floor_filesystem_name(path)), saves, ProcessInfo.processInfo.activeProcessorCount))
let loadBefore = loadAverage()

let session: Session
do { session = try Session(server: server) } catch { fatalError("cannot start \(server): \(error)") }
_ = session.call("initialize", ["processId": .integer(Int64(getpid())), "capabilities": [:]])
session.send(JSONValue.object(["jsonrpc": "2.0", "method": "initialized", "params": [:]]).serialized())
let opened = session.call("document/open", ["uri": .string("file://" + path), "includeText": false])
let handle = opened["document"]!.stringValue!
var version = opened["version"]!.integerValue!

// MARK: - Edits

var editCount = 0
/// One edit: "x" inserted at the start of a line spread over the document; answers the round trip.
@MainActor func edit() -> Int64 {
    let line = (editCount &* 7919) % lineCount
    editCount += 1
    let id = session.makeID()
    // Built as text: the client's own JSON work stays out of the round trip as far as it can.
    let body = "{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"document/edit\",\"params\":{\"document\":\"\(handle)\",\"version\":\(version),"
        + "\"edits\":[{\"range\":{\"start\":{\"line\":\(line),\"character\":0},\"end\":{\"line\":\(line),\"character\":0}},\"text\":\"x\"}]}}"
    let start = nanoseconds()
    session.send(Array(body.utf8))
    let response = session.waitForResponse(id)
    let elapsed = nanoseconds() - start
    guard let newVersion = response["result"]?["version"]?.integerValue else { fatalError("edit failed: \(response.jsonText)") }
    version = newVersion
    return elapsed
}

// Warm-up: edits, and one save (the open's background hash has finished by then).
for _ in 0..<2000 { _ = edit() }
_ = session.call("document/save", ["document": .string(handle)])

// MARK: - The diagnostic: save threads at a lower priority

/// The ids of the server's threads.
func threads(of pid: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [] }
    return entries.compactMap { Int32($0) }
}

if let reniceSaves {
    let pid = session.process.processIdentifier
    let existing = Set(threads(of: pid))
    print("diagnostic: server threads started after the warm-up get nice \(reniceSaves) (threads there before: \(existing.sorted()))")
    Thread.detachNewThread {
        var seen = existing
        while true {
            for tid in threads(of: pid) where !seen.contains(tid) {
                seen.insert(tid)
                let status = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid), reniceSaves)
                let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)) ?? "?"
                FileHandle.standardError.write(Data("diagnostic: thread \(tid) (\(name.dropLast())) nice \(reniceSaves): \(status == 0 ? "set" : "failed")\n".utf8))
            }
            usleep(200)
        }
    }
}

let stealAtStart = stealTicks()
var quiet: [Int64] = []
var during: [Int64] = []
var saveTimes: [Double] = []
var editsPerSave: [Int] = []
var perSaveP99: [Int64] = []
var perSaveMax: [Int64] = []
var slowPerSave: [Int] = []
print("\nsave  time (ms)  edits during it  edits during it: p50 / p99 / max (µs)   quiet round: p50 / p99 / max (µs)")
for round in 0..<saves {
    // Quiet: no save running.
    var quietRound: [Int64] = []
    for _ in 0..<quietPerRound { quietRound.append(edit()) }
    quiet += quietRound

    // A save, and edits one after another until its response arrives.
    session.saveResponse = nil
    session.saveArrival = 0
    session.saveID = session.makeID()
    let saveStart = nanoseconds()
    session.send(JSONValue.object([
        "jsonrpc": "2.0", "id": .integer(session.saveID), "method": "document/save",
        "params": ["document": .string(handle)],
    ]).serialized())
    var duringRound: [Int64] = []
    var slow: [(at: Int64, took: Int64)] = []
    while session.saveResponse == nil {
        let at = nanoseconds() - saveStart
        let took = edit()
        duringRound.append(took)
        if took >= 1_000_000 { slow.append((at, took)) }
    }
    guard let result = session.saveResponse?["result"], result["durable"]?.boolValue == true else {
        fatalError("save failed: \(session.saveResponse!.jsonText)")
    }
    let saveTime = Double(session.saveArrival - saveStart) / 1e6
    saveTimes.append(saveTime)
    editsPerSave.append(duringRound.count)
    during += duringRound
    let d = duringRound.sorted(), q = quietRound.sorted()
    print(String(format: "%4d  %9.1f  %15d  %8@ / %8@ / %8@           %6@ / %6@ / %8@", round + 1, saveTime, duringRound.count,
                 micro(percentile(d, 0.5)), micro(percentile(d, 0.99)), micro(d.last ?? 0),
                 micro(percentile(q, 0.5)), micro(percentile(q, 0.99)), micro(q.last ?? 0)))
    perSaveP99.append(percentile(d, 0.99))
    perSaveMax.append(d.last ?? 0)
    slowPerSave.append(slow.count)
    if !slow.isEmpty {
        // When the slow edits were sent, in ms after the save's request: the save's phases are
        // roughly the copy and hash (about the first half), then fsync, rename, fsync of the directory.
        print("      edits over 1 ms (sent at ms into the save: took ms): "
            + slow.prefix(12).map { String(format: "%.1f: %.1f", Double($0.at) / 1e6, Double($0.took) / 1e6) }.joined(separator: ", ")
            + (slow.count > 12 ? ", ..." : ""))
    }
}
session.shutDown()

// MARK: - The floor

/// Steal time so far, in clock ticks: the time the host ran something else on this machine's
/// virtual processors (the eighth number of /proc/stat's first line).
func stealTicks() -> Int {
    guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
          let line = stat.split(separator: "\n").first else { return 0 }
    let fields = line.split(separator: " ")
    return fields.count > 8 ? Int(fields[8]) ?? 0 : 0
}

let stealAfterServer = stealTicks()
var floorQuiet: [Int64] = []
var floorDuring: [Int64] = []
var floorPerSaveMax: [Int64] = []
var floorSaveTimes: [Double] = []
var floorSteal = 0
if !options.flag("--no-floor") {
    // The bytes to save: the file as the server last saved it, in a page-aligned buffer.
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    precondition(fd >= 0, "cannot read \(path)")
    var status = stat()
    fstat(fd, &status)
    let count = Int(status.st_size)
    let bytes = save_floor_alloc(count)!
    var done = 0
    while done < count {
        let got = read(fd, bytes + done, count - done)
        precondition(got > 0, "short read of \(path)")
        done += got
    }
    close(fd)
    let floorDirectory = (path as NSString).deletingLastPathComponent
    let floorName = "floor.txt"
    precondition(FileManager.default.createFile(atPath: floorDirectory + "/" + floorName, contents: Data("x".utf8)))
    var floor = pipefloor()
    // An edit's request body is about 250 bytes, its response about 60.
    precondition(pipefloor_start(&floor, 250, 60) == 0, "pipefloor_start failed: errno \(errno)")
    let stealBefore = stealTicks()
    for _ in 0..<saves {
        for _ in 0..<quietPerRound { floorQuiet.append(pipefloor_sync(&floor, 1)) }
        let finished = Atomic<Bool>(false)
        let saveStart = nanoseconds()
        let saveEnd = Atomic<Int64>(0)
        let bytesAddress = UInt(bitPattern: bytes)
        Thread.detachNewThread {
            // Linux: who 0 with PRIO_PROCESS is the calling thread only.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
            var durable: Int32 = 0
            let result = save_floor(floorDirectory, floorName, UnsafePointer(bitPattern: bytesAddress), count, 1 << 20, &durable, nil)
            precondition(result == 0, "the floor's save failed: errno \(errno)")
            saveEnd.store(nanoseconds(), ordering: .releasing)
            finished.store(true, ordering: .releasing)
        }
        var round: [Int64] = []
        while !finished.load(ordering: .acquiring) { round.append(pipefloor_sync(&floor, 1)) }
        floorDuring += round
        floorPerSaveMax.append(round.max() ?? 0)
        floorSaveTimes.append(Double(saveEnd.load(ordering: .acquiring) - saveStart) / 1e6)
    }
    floorSteal = stealTicks() - stealBefore
    pipefloor_stop(&floor)
    save_floor_free(bytes)
    unlink(floorDirectory + "/" + floorName)
}

if let directory {
    unlink(path)
    rmdir(directory)
}

let sortedDuring = during.sorted()
let p99 = percentile(sortedDuring, 0.99)
print("\nedits during a save:   " + summary(during))
print("edits with no save:    " + summary(quiet))
let sortedTimes = saveTimes.sorted()
let sortedCounts = editsPerSave.sorted()
let sortedP99 = perSaveP99.sorted()
print("p99 of each save's edits: median \(micro(sortedP99[sortedP99.count / 2])) µs, worst \(micro(sortedP99.last!)) µs")
let sortedMax = perSaveMax.sorted()
print("maximum of each save's edits: median \(micro(sortedMax[sortedMax.count / 2])) µs, worst \(micro(sortedMax.last!)) µs; "
    + "saves with an edit over 5 ms: \(perSaveMax.filter { $0 > 5_000_000 }.count) of \(saves)")
print("load average (1, 5, 15 min): \(loadBefore) before, \(loadAverage()) after")
// The stalls themselves: whether the p99 crosses 1 ms depends on how many edits a save holds (at 1%
// of 700 edits, seven stalls are enough), so their count per save is printed too.
let sortedSlow = slowPerSave.sorted()
print("edits over 1 ms per save: median \(sortedSlow[sortedSlow.count / 2]) (\(sortedSlow.first!)-\(sortedSlow.last!)); "
    + "with no save: \(quiet.filter { $0 >= 1_000_000 }.count) in \(quiet.count) edits")
print(String(format: "saves: median %.1f ms (%.1f-%.1f); edits during one save: median %d (%d-%d)",
             sortedTimes[sortedTimes.count / 2], sortedTimes.first!, sortedTimes.last!,
             sortedCounts[sortedCounts.count / 2], sortedCounts.first!, sortedCounts.last!))
tableRow(String(format: "p99 of an edit during a %.0f MB save, µs (each save's p99)", Double(size.st_size) / 1e6),
         perSaveP99.map { Double($0) / 1000 }, goal: "< 1000", format: "%.0f")
// The worst wait beside it: one stalled edit per save leaves the p99 untouched.
tableRow(String(format: "maximum of an edit during a %.0f MB save, µs (each save's maximum)", Double(size.st_size) / 1e6),
         perSaveMax.map { Double($0) / 1000 }, goal: "< 5000", format: "%.0f")
if !floorPerSaveMax.isEmpty {
    let sortedFloorMax = floorPerSaveMax.sorted()
    let floorTimes = floorSaveTimes.sorted()
    print("\nthe floor (C round trips while a C thread at nice 10 saves the same bytes):")
    print("round trips during a save: " + summary(floorDuring))
    print("round trips with no save:  " + summary(floorQuiet))
    print("maximum of each save's round trips: median \(micro(sortedFloorMax[sortedFloorMax.count / 2])) µs, worst \(micro(sortedFloorMax.last!)) µs; "
        + "saves with a round trip over 5 ms: \(floorPerSaveMax.filter { $0 > 5_000_000 }.count) of \(floorPerSaveMax.count)")
    print(String(format: "floor saves: median %.1f ms (%.1f-%.1f)", floorTimes[floorTimes.count / 2], floorTimes.first!, floorTimes.last!))
    print("steal time (the host running something else on this machine's processors): "
        + "\(stealAfterServer - stealAtStart) ticks during the server's rounds, \(floorSteal) during the floor's (1 tick = 10 ms of one processor)")
    tableRow(String(format: "the floor: maximum of a C round trip while C saves the same %.0f MB, µs (each save's maximum)", Double(size.st_size) / 1e6),
             floorPerSaveMax.map { Double($0) / 1000 }, goal: "-", format: "%.0f")
    tableRow("maximum of an edit during a save / the floor's maximum (each save's, in order)",
             zip(perSaveMax, floorPerSaveMax).map { Double($0) / Double(max($1, 1)) }, goal: "-", format: "%.2f")
}
print(String(format: "figure 7: p99 of an edit during a %.0f MB save %@ µs (goal < 1000 µs): %@; p99 during / p99 quiet %.2f",
             Double(size.st_size) / 1e6, micro(p99), p99 < 1_000_000 ? "met" : "MISSED",
             Double(p99) / Double(max(percentile(quiet.sorted(), 0.99), 1))))
