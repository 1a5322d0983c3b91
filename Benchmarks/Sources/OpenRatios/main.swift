// Opening a large file into a document (shared/design/performance.md, figure 6), measured against
// its floor side by side in one process:
//
//   time:     DocumentStore().open(path:encoding:) (TextFileLoader.load and building the TextBuffer,
//             exactly what document/open does) / a C read(2) of the file in 1 MiB pieces plus a
//             vectorised count of its '\n' bytes. Goal: at most 2.
//   peak RSS: VmHWM at the end of an open minus VmHWM before it, in a child process of its own (this
//             executable run again with `--child open`), / the file's size. Goal: at most 1.3.
//   The children's times are printed too: the first open in a fresh process, against the floor in
//   another, pays for every new page, where the rounds in one process reuse what the allocator kept.
//
// For context it also times a C reference (OpenFloor's `open_reference_read`): the work an open
// cannot skip (the read, UTF-8 validation, the copy into chunk-sized blocks) and nothing else.
//
// The file is generated in a temporary directory: about 100 MB of lines of 0 to 160 characters made
// of words of which about one in three is not ASCII (two-, three- and four-byte UTF-8), the word
// list of BufferWorkloads' generated document, from a fixed seed.
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build OpenRatios [rounds]
//         [--mb N]        size of the generated file in MB (default 100)
//         [--crlf]        end the generated lines with CRLF instead of LF
//         [--file PATH]   use an existing file instead of generating one
//         [--generate PATH]  write the generated file to PATH and stop
//         [--phases [--piece BYTES]]  time each stage of the open alone (needs --file; --piece
//                         sets the loader's piece size in the loader-only stages)
//         [--only open|parts|floor|build|load]  run one side alone, `rounds` times, for a profiler
//                         (needs --file; `build` is the open's work on the calling thread, for
//                         callgrind; `load` times TextFileLoader.load alone, pieces dropped)
//         [--cpu]         time `rounds` opens through DocumentStore.open and print the medians of
//                         their wall and processor (getrusage) times (needs --file)
//         [--child open|parts|floor PATH]  one open (or floor) in this process; prints VmHWM before and
//                         after, VmRSS after, the bytes read and the nanoseconds taken

import BufferWorkloads
import DocumentSession
import FileStore
import Foundation
import OpenFloor
import TextBuffer

// MARK: - Arguments

let options = CommandLineOptions()

let pieceSize = 1 << 20

// MARK: - Measuring

/// Seconds taken by `body`.
func time(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
}


/// A field of /proc/self/status in bytes (`VmHWM`, `VmRSS`), read with plain syscalls so that the
/// reading itself allocates next to nothing.
func statusBytes(_ field: String) -> Int {
    let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
    precondition(fd >= 0, "cannot read /proc/self/status")
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 8192)
    var count = 0
    while true {
        let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if got <= 0 { break }
        count += got
    }
    let text = String(decoding: buffer[..<count], as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let kilobytes = line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
        return kilobytes * 1024
    }
    preconditionFailure("no \(field) in /proc/self/status")
}

/// The floor: read(2) in 1 MiB pieces and count the '\n' bytes, in C.
func floorRead(_ path: String) -> (lines: Int, bytes: Int) {
    var bytes: Int64 = 0
    let lines = open_floor_read_count(path, pieceSize, &bytes)
    precondition(lines >= 0, "floor: cannot read \(path): errno \(errno)")
    return (Int(lines), Int(bytes))
}

/// The C reference: the read, the validation and the copy into chunk-sized blocks, on the calling
/// thread. Returns the seconds the reading took; frees the blocks afterwards, untimed.
func referenceRead(_ path: String) -> Double {
    var bytes: Int64 = 0, lines: Int64 = 0
    var valid: Int32 = 0
    let start = ContinuousClock.now
    let blocks = open_reference_read(path, pieceSize, &bytes, &lines, &valid)
    let elapsed = ContinuousClock.now - start
    precondition(blocks != nil && valid == 1, "reference: cannot read \(path)")
    open_reference_free(blocks)
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
}

/// Our open: what document/open does, through the real DocumentStore.
func openDocument(_ path: String, store: DocumentStore = DocumentStore()) async -> Document {
    do {
        return try await store.open(path: path, encoding: nil)
    } catch {
        fatalError("open \(path): \(error)")
    }
}

/// Waits until the store has recorded the content hash it computes after an open.
func waitForContentHash(_ store: DocumentStore, _ handle: String) async {
    for _ in 0..<10_000 {
        if (try? await store.document(handle).identity.contentHash) != nil { return }
        try? await Task.sleep(for: .milliseconds(1))
    }
    fatalError("the content hash never arrived")
}

/// The open in two parts, as `DocumentStore.open` does it with the patch of issue 3 (the same code:
/// a detached task, a thread of its own, `TextFileLoader.loadInParts` building one `TextBuffer` per
/// part on two threads, `TextBuffer(concatenating:)`), without the actor's bookkeeping.
func openInParts(_ path: String) async -> TextBuffer {
    let load = Task.detached { await runOnOwnThread { () -> Result<(TextBuffer, LoadedText), LoadError> in
        do throws(LoadError) {
            let (parts, loaded) = try TextFileLoader.loadInParts(
                path: path, encoding: nil, progress: { _, _ in }, isCancelled: { false }, startingWith: TextBuffer()
            ) { buffer, piece in
                buffer.append(utf8: piece)
            }
            return .success((TextBuffer(concatenating: parts), loaded))
        } catch {
            return .failure(error)
        }
    } }
    switch await load.value {
    case .success(let (buffer, _)): return buffer
    case .failure(let error): fatalError("open in parts \(path): \(error)")
    }
}

// MARK: - A child: one open, peak RSS

if let side = options.option("--child") {
    guard let path = options.remaining.first else { fatalError("--child needs a path") }
    let before = statusBytes("VmHWM")
    var size = 0
    let store = DocumentStore()
    let elapsed = await time {
        if side == "floor" {
            size = floorRead(path).bytes
        } else if side == "parts" {
            let buffer = await openInParts(path)
            size = buffer.utf8Count
            withExtendedLifetime(buffer) {}
        } else {
            size = await openDocument(path, store: store).buffer.utf8Count
        }
    }
    let after = statusBytes("VmHWM")
    let resident = statusBytes("VmRSS")
    print(before, after, resident, size, Int(elapsed * 1e9))
    withExtendedLifetime(store) {}
    exit(0)
}

// MARK: - The parent

let megabytes = Int(options.option("--mb") ?? "100") ?? 100
let crlf = options.flag("--crlf")
let given = options.option("--file")
let only = options.option("--only")
let rounds = options.remaining.first.flatMap { Int($0) } ?? 7

if let target = options.option("--generate") {
    // Writes the generated file to `target` and stops (for profiling with --file).
    GeneratedLines.writeFile(at: target, bytes: megabytes * 1_000_000, crlf: crlf)
    exit(0)
}

if options.flag("--phases") {
    // Where the time goes: each stage of the open on its own, medians of `rounds` runs.
    guard let path = given else { fatalError("--phases needs --file PATH") }
    let loaderPiece = Int(options.option("--piece") ?? "") ?? (1 << 20)
    let phaseRounds = options.remaining.first.flatMap { Int($0) } ?? 7
    func load(_ consume: (UnsafeBufferPointer<UInt8>) -> Void) {
        do { _ = try TextFileLoader.load(path: path, pieceSize: loaderPiece, consume: consume) } catch { fatalError("\(error)") }
    }
    func loadInParts(_ consume: @escaping @Sendable (inout TextBuffer, UnsafeBufferPointer<UInt8>) -> Void) -> [TextBuffer] {
        do {
            return try TextFileLoader.loadInParts(path: path, pieceSize: loaderPiece, startingWith: TextBuffer(), consume: consume).parts
        } catch { fatalError("\(error)") }
    }
    var phases: [(String, [Double])] = [("floor: read + count", []), ("TextFileLoader.load, pieces dropped", []),
                                         ("load + TextBuffer.append(utf8:)", []), ("DocumentStore.open", []),
                                         ("loadInParts, pieces dropped", []), ("loadInParts + append(utf8:)", []),
                                         ("  + TextBuffer(concatenating:)", []), ("open in parts (the patch)", [])]
    for _ in 0..<phaseRounds {
        phases[0].1.append(await time { _ = floorRead(path) })
        phases[1].1.append(await time { load { _ in } })
        var buffer = TextBuffer()
        phases[2].1.append(await time { load { buffer.append(utf8: $0) } })
        buffer = TextBuffer()
        var document: Document? = nil
        phases[3].1.append(await time { document = await openDocument(path) })
        document = nil
        _ = document
        phases[4].1.append(await time { _ = loadInParts { _, _ in } })
        var parts: [TextBuffer] = []
        phases[5].1.append(await time { parts = loadInParts { $0.append(utf8: $1) } })
        phases[6].1.append(await time { buffer = TextBuffer(concatenating: parts) })
        parts = []
        buffer = TextBuffer()
        phases[7].1.append(await time { buffer = await openInParts(path) })
        buffer = TextBuffer()
    }
    for (name, times) in phases {
        print(name.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%7.1f ms", median(times) * 1000))
    }
    exit(0)
}

if options.flag("--cpu") {
    // The open's processor time (both loading threads, from getrusage) besides its wall time,
    // medians of `rounds`: a figure other processes on the machine disturb less than the time.
    guard let path = given else { fatalError("--cpu needs --file PATH") }
    func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6
    }
    _ = await openDocument(path)
    var walls: [Double] = [], cpus: [Double] = []
    for _ in 0..<rounds {
        let store = DocumentStore()
        var document: Document? = nil
        let before = cpuSeconds()
        walls.append(await time { document = await openDocument(path, store: store) })
        cpus.append(cpuSeconds() - before)
        await waitForContentHash(store, document!.handle)
        document = nil
        _ = document
    }
    print(String(format: "open: wall %.1f ms, processor %.1f ms (medians of %d)", median(walls) * 1000, median(cpus) * 1000, rounds))
    exit(0)
}

if let only {
    // Profiling: one side alone, `rounds` times, on an existing file.
    guard let path = given else { fatalError("--only needs --file PATH") }
    var loadTimes: [Double] = []
    for _ in 0..<rounds {
        switch only {
        case "floor":
            _ = floorRead(path)
        case "build":
            // The open's work on this thread, without the actor (for callgrind).
            var buffer = TextBuffer()
            do { _ = try TextFileLoader.load(path: path) { buffer.append(utf8: $0) } } catch { fatalError("\(error)") }
        case "load":
            // The loader alone on this thread, its pieces dropped: read, validation, line endings.
            loadTimes.append(await time { do { _ = try TextFileLoader.load(path: path) { _ in } } catch { fatalError("\(error)") } })
        case "parts":
            _ = await openInParts(path)
        default:
            _ = await openDocument(path)
        }
    }
    if !loadTimes.isEmpty { print(String(format: "load, pieces dropped: median %.2f ms", median(loadTimes) * 1000)) }
    exit(0)
}

var directory: String? = nil
let path: String
if let given {
    path = given
} else {
    var template = Array((NSTemporaryDirectory() + "/OpenRatios.XXXXXX").utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        fatalError("mkdtemp failed")
    }
    directory = String(cString: made)
    path = directory! + "/generated.txt"
    GeneratedLines.writeFile(at: path, bytes: megabytes * 1_000_000, crlf: crlf)
}
defer {
    if let directory {
        unlink(path)
        rmdir(directory)
    }
}

// Check once that the document holds the file, byte for byte.
let (floorLines, fileSize) = floorRead(path)
do {
    let document = await openDocument(path)
    let contents = try Data(contentsOf: URL(fileURLWithPath: path))
    precondition(document.buffer.utf8Count == fileSize, "size differs")
    precondition(document.buffer.utf8Bytes().elementsEqual(contents), "text differs from the file")
    let expectedBreaks = floorLines  // the generated text has no lone '\r'
    precondition(given != nil || document.buffer.lineBreakCount == expectedBreaks, "line count differs")
    let inParts = await openInParts(path)
    precondition(inParts == document.buffer, "the open in parts differs from the open in one go")
    print(String(format: "file: %.1f MB, %d lines%@, %@; %d rounds", Double(fileSize) / 1e6, floorLines,
                 crlf ? " (CRLF)" : "", String(describing: document.lineEnding), rounds))
}

// Time: alternating, after one warm-up of each.
_ = floorRead(path)
_ = await openDocument(path)
_ = await openInParts(path)
_ = referenceRead(path)
var ratios: [Double] = []
var partsRatios: [Double] = []
var partsOpens: [Double] = []
var opens: [Double] = []
var floors: [Double] = []
var references: [Double] = []
var referenceRatios: [Double] = []
for _ in 0..<rounds {
    let floorTime = await time { _ = floorRead(path) }
    var document: Document? = nil
    let store = DocumentStore()
    let openTime = await time { document = await openDocument(path, store: store) }
    // Untimed: after answering, the open hashes the text at idle priority (the content part of
    // the file's identity); let it finish so that it does not run into the next side's time.
    await waitForContentHash(store, document!.handle)
    document = nil  // freeing the chunks is not part of opening
    _ = document
    let partsFloorTime = await time { _ = floorRead(path) }
    var buffer: TextBuffer? = nil
    let partsTime = await time { buffer = await openInParts(path) }
    buffer = nil
    _ = buffer
    partsOpens.append(partsTime)
    partsRatios.append(partsTime / partsFloorTime)
    let referenceTime = referenceRead(path)
    floors.append(floorTime)
    opens.append(openTime)
    ratios.append(openTime / floorTime)
    references.append(referenceTime)
    referenceRatios.append(referenceTime / floorTime)
}
func list(_ values: [Double], _ format: String) -> String {
    values.map { String(format: format, $0) }.joined(separator: " ")
}
print(String(format: "open time / read + count '\\n'   median %.2f  (goal <= 2)  spread %.2f-%.2f  times %.1f ms / %.1f ms (%.2f GB/s / %.2f GB/s)",
             median(ratios), ratios.min()!, ratios.max()!, median(opens) * 1000, median(floors) * 1000,
             Double(fileSize) / median(opens) / 1e9, Double(fileSize) / median(floors) / 1e9))
print("    rounds [\(list(ratios, "%.2f"))]")
tableRow("open 100 MB / read + count newlines (C)", ratios, goal: "<= 2", format: "%.2f")
print(String(format: "open in parts / read + count     median %.2f  (goal <= 2)  spread %.2f-%.2f  times %.1f ms (%.2f GB/s; TextFileLoader.loadInParts on two threads, TextBuffer(concatenating:))",
             median(partsRatios), partsRatios.min()!, partsRatios.max()!, median(partsOpens) * 1000,
             Double(fileSize) / median(partsOpens) / 1e9))
print("    rounds [\(list(partsRatios, "%.2f"))]")
print(String(format: "C reference / floor              median %.2f  spread %.2f-%.2f  times %.1f ms (read + count + UTF-8 validation + copy into 896-byte mallocs, main thread)",
             median(referenceRatios), referenceRatios.min()!, referenceRatios.max()!, median(references) * 1000))

// Peak RSS: each side in a child process of its own, three times. (The time of that first open in
// a fresh process is printed too: it pays for every page of the new chunks, where the rounds above
// may reuse memory the allocator kept from the round before.)
@MainActor func child(_ side: String) -> (peak: Int, resident: Int, seconds: Double) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    process.arguments = ["--child", side, path]
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { fatalError("cannot run a child: \(error)") }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    precondition(process.terminationStatus == 0, "child \(side) failed")
    let fields = String(decoding: output, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int($0) }
    precondition(fields.count == 5 && fields[3] == fileSize, "child \(side) answered \(fields)")
    return (fields[1] - fields[0], fields[2], Double(fields[4]) * 1e-9)
}
var peaks: [Double] = []
var residents: [Double] = []
var floorPeaks: [Double] = []
var freshRatios: [Double] = []
var freshOpens: [Double] = []
var freshFloors: [Double] = []
var partsPeaks: [Double] = []
var partsResidents: [Double] = []
var partsFreshRatios: [Double] = []
var partsFreshOpens: [Double] = []
for _ in 0..<3 {
    let floor = child("floor")
    let open = child("open")
    let parts = child("parts")
    peaks.append(Double(open.peak) / Double(fileSize))
    residents.append(Double(open.resident))
    floorPeaks.append(Double(floor.peak))
    freshOpens.append(open.seconds)
    freshFloors.append(floor.seconds)
    freshRatios.append(open.seconds / floor.seconds)
    partsPeaks.append(Double(parts.peak) / Double(fileSize))
    partsResidents.append(Double(parts.resident))
    partsFreshOpens.append(parts.seconds)
    partsFreshRatios.append(parts.seconds / floor.seconds)
}
print(String(format: "open peak RSS / file size        median %.3f  (goal <= 1.3)  spread %.3f-%.3f  (peak growth %.1f MB; resident after the open %.1f MB; floor's peak growth %.1f MB)",
             median(peaks), peaks.min()!, peaks.max()!, median(peaks) * Double(fileSize) / 1e6,
             median(residents) / 1e6, median(floorPeaks) / 1e6))
print("    rounds [\(list(peaks, "%.3f"))]")
tableRow("open: peak RSS / file size", peaks, goal: "<= 1.3")
print(String(format: "open in parts peak RSS / size    median %.3f  (goal <= 1.3)  spread %.3f-%.3f  (peak growth %.1f MB; resident after the open %.1f MB)",
             median(partsPeaks), partsPeaks.min()!, partsPeaks.max()!, median(partsPeaks) * Double(fileSize) / 1e6,
             median(partsResidents) / 1e6))
print("    rounds [\(list(partsPeaks, "%.3f"))]")
print(String(format: "first open in a fresh process / floor in one: median %.2f  spread %.2f-%.2f  times %.1f ms / %.1f ms",
             median(freshRatios), freshRatios.min()!, freshRatios.max()!, median(freshOpens) * 1000, median(freshFloors) * 1000))
print(String(format: "first open in parts in a fresh process / floor: median %.2f  spread %.2f-%.2f  times %.1f ms",
             median(partsFreshRatios), partsFreshRatios.min()!, partsFreshRatios.max()!, median(partsFreshOpens) * 1000))
