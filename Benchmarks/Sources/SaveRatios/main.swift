// Saving a document (shared/design/performance.md, figure 4), measured against its floor side by
// side in one process:
//
//   DocumentStore.save(handle): the code document/save runs, called and timed on the server's
//   loop thread as a request is (a snapshot of the rope taken on the actor, SafeSave.save on a thread of its own, the chunks copied into the sink's 1 MiB buffer,
//   pwrite, the XXH64 of the bytes, fsync, rename, fsync of the directory, the outcome recorded on
//   the actor) for a document with one unsaved edit
//   / SaveFloor's `save_floor`: the same system calls in the same order, in C, from one flat
//   page-aligned buffer (pwrite straight from it in 1 MiB pieces, no copy, no hash).
//   Goal: at most 1.2, for 100 KB and 10 MB documents.
//
// For the breakdown, each round also times (files of their own in the same directory):
//   SafeSave.save from the rope on the calling thread (no actor, no thread of its own): the
//     content closure TextBuffer.write runs for UTF-8 (`for chunk in utf8Chunks { sink.write }`);
//   SafeSave.save from the flat buffer (one sink.write of all the bytes).
// and, after the rounds, the CPU work alone (no system calls): the rope's chunks copied into a
// 1 MiB buffer, XXH64 over the bytes, a runOnOwnThread round trip.
//
// The files live in a new directory under /var/tmp (or --dir): it must be on a disk-backed file
// system, since fsync on tmpfs costs nothing; the file system is printed.
//
//     swift run -c release --package-path Benchmarks --scratch-path Benchmarks/.build SaveRatios [rounds, default 31]
//         [--sizes 100000,10000000]  document sizes in bytes (default 100 KB and 10 MB)
//         [--dir PATH]               where to make the working directory (default /var/tmp)
//         [--only ours|floor|rope|flat --size BYTES]  one side alone, `rounds` times, for strace
//                                    or perf (no timing printed but the median)

import BufferWorkloads
import DocumentSession
import Execution
import FileStore
import Foundation
import SaveFloor
import TextBuffer

// MARK: - Arguments

let options = CommandLineOptions()

let pieceSize = 1 << 20
let sizes = (options.option("--sizes") ?? "100000,10000000").split(separator: ",").compactMap { Int($0) }
let parent = options.option("--dir") ?? "/var/tmp"
let only = options.option("--only")
let onlySize = options.option("--size").flatMap { Int($0) } ?? 100_000
let rounds = options.remaining.first.flatMap { Int($0) } ?? 31

// MARK: - Measuring

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

@MainActor func time(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    return seconds(ContinuousClock.now - start)
}

/// CPU time of the whole process (every thread), in seconds: the save's own work without the
/// waits for the disk, which on this VM come in steps of the journal's commits.
func processCPU() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) * 1e-9
}

/// Wall-clock and CPU seconds taken by `body`.
@MainActor func measure(_ body: () async throws -> Void) async rethrows -> (wall: Double, cpu: Double) {
    let cpu = processCPU()
    let start = ContinuousClock.now
    try await body()
    let wall = seconds(ContinuousClock.now - start)
    return (wall, processCPU() - cpu)
}


func milliseconds(_ value: Double) -> String { String(format: value < 0.01 ? "%.3f" : "%.2f", value * 1000) }

// MARK: - The document

/// About `target` bytes of text: a first line that the rounds' edit toggles, then lines of 0 to 160
/// characters made of words of which about one in three is not ASCII (2-, 3- and 4-byte UTF-8),
/// from a fixed seed (the word list of OpenRatios' generated file).
func generateText(bytes target: Int) -> [UInt8] {
    var lines = GeneratedLines()
    var text = Array("A generated document\n".utf8)
    text.reserveCapacity(target + 200)
    while text.count < target { lines.appendLine(to: &text) }
    return text
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    precondition(fd >= 0, "cannot create \(path): errno \(errno)")
    defer { close(fd) }
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let wrote = write(fd, raw.baseAddress! + offset, raw.count - offset)
            precondition(wrote > 0, "write \(path) failed")
            offset += wrote
        }
    }
    precondition(fsync(fd) == 0)
}

func readFile(_ path: String) -> [UInt8] {
    (try? Data(contentsOf: URL(fileURLWithPath: path))).map { Array($0) } ?? []
}


// MARK: - The sides

/// One document of the benchmark: a file per side, all with the same text.
@MainActor final class Subject {
    let size: Int
    let directory: String
    let text: [UInt8]
    nonisolated(unsafe) let flat: UnsafeMutablePointer<UInt8>
    let store = DocumentStore()
    var handle = ""
    var version: Int64 = 0
    var toggle = false
    /// The rope the SafeSave sides write (the document's text, opened once more) and the identities
    /// their files had after their last save.
    var rope = TextBuffer()
    var ropeIdentity: FileIdentity?
    var flatIdentity: FileIdentity?

    var oursPath: String { directory + "/ours.txt" }
    var floorName: String { "floor.txt" }
    var ropePath: String { directory + "/safesave-rope.txt" }
    var flatPath: String { directory + "/safesave-flat.txt" }

    init(size: Int, directory: String) async {
        self.size = size
        self.directory = directory
        text = generateText(bytes: size)
        flat = save_floor_alloc(text.count)!
        text.withUnsafeBufferPointer { flat.update(from: $0.baseAddress!, count: $0.count) }
        for path in [oursPath, directory + "/" + floorName, ropePath, flatPath] { writeFile(path, text) }
        do {
            let document = try await store.open(path: oursPath, encoding: nil)
            handle = document.handle
            version = document.version
            rope = document.buffer
        } catch {
            fatalError("open \(oursPath): \(error)")
        }
    }

    deinit { save_floor_free(flat) }

    /// One edit so that the document has unsaved changes (its first character, A and B in turn:
    /// the size stays the same). Not timed.
    func makeDirty() async {
        toggle.toggle()
        let edit = TextEdit(range: TextRange(0, 0, 0, 1), text: toggle ? "B" : "A")
        do {
            version = try await store.edit(handle, version: version, edits: [edit], encoding: .utf16, label: nil, merge: false)
        } catch {
            fatalError("edit: \(error)")
        }
    }

    /// Ours: what document/save runs, timed from the server's loop thread as the server runs it
    /// (a request is answered on the loop, where the store's actor runs too): answers the seconds
    /// from the call to its answer there. Calling from elsewhere would add two thread hops to the
    /// loop and back that no request pays.
    @discardableResult
    func saveOurs() async -> Double {
        let store = store, handle = handle, size = text.count
        return await withTaskExecutorPreference(LoopExecutor.shared) { () async -> Double in
            let start = ContinuousClock.now
            do {
                let result = try await store.save(handle)
                precondition(result.durable && result.method == .rename && result.size == size)
            } catch {
                fatalError("DocumentStore.save: \(error)")
            }
            return seconds(ContinuousClock.now - start)
        }
    }

    /// The floor: the same system calls from the flat buffer, in C.
    func saveFloor() {
        var durable: Int32 = 0
        let status = save_floor(directory, floorName, flat, text.count, pieceSize, &durable, nil)
        precondition(status == 0 && durable == 1, "save_floor failed: errno \(errno)")
    }

    /// The floor with its phases timed.
    func saveFloorPhases() -> [Int64] {
        var durable: Int32 = 0
        var phases = [Int64](repeating: 0, count: Int(SAVE_FLOOR_PHASES.rawValue))
        let status = save_floor(directory, floorName, flat, text.count, pieceSize, &durable, &phases)
        precondition(status == 0 && durable == 1, "save_floor failed: errno \(errno)")
        return phases
    }

    /// SafeSave from the rope on this thread: the content closure TextBuffer.write runs for UTF-8.
    func saveRope() {
        let rope = rope
        do {
            let outcome = try SafeSave.save(SafeSave.Request(path: ropePath, expected: ropeIdentity)) { (sink) throws(SaveError) in
                for chunk in rope.utf8Chunks { try sink.write(chunk) }
            }
            ropeIdentity = outcome.identity
        } catch {
            fatalError("SafeSave.save (rope): \(error)")
        }
    }

    /// SafeSave from the flat buffer on this thread: one write of every byte.
    func saveFlat() {
        let bytes = text
        do {
            let outcome = try SafeSave.save(SafeSave.Request(path: flatPath, expected: flatIdentity)) { (sink) throws(SaveError) in
                try sink.write(bytes)
            }
            flatIdentity = outcome.identity
        } catch {
            fatalError("SafeSave.save (flat): \(error)")
        }
    }

    /// Checks that every side's file holds the text.
    func verify() async {
        let document = try! await store.document(handle)
        precondition(readFile(oursPath) == document.buffer.utf8Bytes(), "ours: the file differs from the document")
        precondition(!document.hasUnsavedChanges, "ours: still unsaved after the save")
        precondition(readFile(directory + "/" + floorName) == text, "floor: the file differs")
        precondition(readFile(ropePath) == rope.utf8Bytes(), "SafeSave (rope): the file differs")
        precondition(readFile(flatPath) == text, "SafeSave (flat): the file differs")
        let ours = readFile(oursPath)
        // The content hash is recorded off the save's path, at idle priority, soon after it.
        var recorded = document.identity.contentHash
        for _ in 0..<1000 where recorded == nil {
            try? await Task.sleep(for: .milliseconds(5))
            recorded = try! await store.document(handle).identity.contentHash
        }
        precondition(recorded == ContentHasher.hash(ours), "ours: the recorded hash differs")
    }
}

// MARK: - CPU alone

/// The rope's chunks copied into a page-aligned 1 MiB buffer, as SaveSink does, without the writes.
func copyChunks(_ rope: TextBuffer, into buffer: UnsafeMutableRawBufferPointer) -> Int {
    var used = 0
    var total = 0
    for chunk in rope.utf8Chunks {
        chunk.withUnsafeBytes { source in
            var offset = 0
            while offset < source.count {
                if used == buffer.count { total += used; used = 0 }
                let take = min(source.count - offset, buffer.count - used)
                (buffer.baseAddress! + used).copyMemory(from: source.baseAddress! + offset, byteCount: take)
                used += take
                offset += take
            }
        }
    }
    return total + used
}

// MARK: - The working directory

var template = Array((parent + "/SaveRatios.XXXXXX").utf8CString)
guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    fatalError("mkdtemp in \(parent) failed: errno \(errno)")
}
let directory = String(cString: made)
func removeDirectory() {
    if let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) {
        for entry in entries { unlink(directory + "/" + entry) }
    }
    rmdir(directory)
}

// MARK: - One side alone (strace, perf)

if let only {
    let subject = await Subject(size: onlySize, directory: directory)
    var times: [Double] = []
    for _ in 0..<rounds {
        await subject.makeDirty()
        switch only {
        case "floor": times.append(await time { subject.saveFloor() })
        case "rope": times.append(await time { subject.saveRope() })
        case "flat": times.append(await time { subject.saveFlat() })
        default: times.append(await subject.saveOurs())
        }
    }
    print("\(only) \(subject.text.count) bytes: median \(milliseconds(median(times))) ms of \(rounds)")
    removeDirectory()
    exit(0)
}

// MARK: - The rounds

print("directory \(directory): \(String(cString: save_floor_filesystem_name(directory))); \(rounds) rounds per size; \(ProcessInfo.processInfo.activeProcessorCount) processors")
for size in sizes {
    let subject = await Subject(size: size, directory: directory)
    let megabytes = Double(subject.text.count) / 1e6
    print(String(format: "\n%.1f KB document (%d bytes, %d chunks), files in one directory; times in ms", megabytes * 1000,
                 subject.text.count, subject.rope.utf8Chunks.reduce(0) { n, _ in n + 1 }))
    // Warm-up: two saves of each side, then check the files.
    for _ in 0..<2 {
        await subject.makeDirty()
        await subject.saveOurs()
        subject.saveFloor()
        subject.saveRope()
        subject.saveFlat()
    }
    await subject.verify()

    var ours: [Double] = [], floors: [Double] = [], ropes: [Double] = [], flats: [Double] = []
    var oursCPU: [Double] = [], floorsCPU: [Double] = [], ropesCPU: [Double] = [], flatsCPU: [Double] = []
    var ratios: [Double] = [], cpuRatios: [Double] = []
    var floorPhases: [[Int64]] = []
    print("round   ours   floor   ratio   SafeSave(rope)  SafeSave(flat)   CPU: ours   floor   ratio   rope    flat")
    for round in 0..<rounds {
        await subject.makeDirty()
        // The order turns each round, so that no side always follows the same one.
        var o = (wall: 0.0, cpu: 0.0), f = o, r = o, l = o
        for step in 0..<4 {
            switch (step + round) % 4 {
            case 0:
                var inner = 0.0
                o = await measure { inner = await subject.saveOurs() }
                o.wall = inner
            case 1: f = await measure { subject.saveFloor() }
            case 2: r = await measure { subject.saveRope() }
            default: l = await measure { subject.saveFlat() }
            }
        }
        ours.append(o.wall); floors.append(f.wall); ropes.append(r.wall); flats.append(l.wall)
        oursCPU.append(o.cpu); floorsCPU.append(f.cpu); ropesCPU.append(r.cpu); flatsCPU.append(l.cpu)
        ratios.append(o.wall / f.wall)
        cpuRatios.append(o.cpu / f.cpu)
        print(String(format: "%5d  %6@  %6@  %5.2f   %6@          %6@           %6@  %6@  %5.2f  %6@  %6@", round + 1,
                     milliseconds(o.wall), milliseconds(f.wall), o.wall / f.wall, milliseconds(r.wall), milliseconds(l.wall),
                     milliseconds(o.cpu), milliseconds(f.cpu), o.cpu / f.cpu, milliseconds(r.cpu), milliseconds(l.cpu)))
    }
    // The floor's phases, in rounds of their own.
    for _ in 0..<rounds { floorPhases.append(subject.saveFloorPhases()) }
    await subject.verify()

    // The CPU work alone.
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 4096)
    defer { buffer.deallocate() }
    var copies: [Double] = [], hashes: [Double] = [], hops: [Double] = []
    var sink = 0
    for _ in 0..<max(rounds, 9) {
        copies.append(await time { sink &+= copyChunks(subject.rope, into: buffer) })
        hashes.append(await time {
            var hasher = ContentHasher()
            hasher.update(UnsafeRawBufferPointer(start: subject.flat, count: subject.text.count))
            sink &+= Int(truncatingIfNeeded: hasher.finalize())
        })
        hops.append(await time { sink &+= await runOnOwnThread { 1 } })
    }
    precondition(sink != 0)

    let ratio = median(ratios)
    defer { tableRow(String(format: "save %.0f KB / the C save floor", megabytes * 1000), ratios, goal: "<= 1.2") }
    print(String(format: "\n%.1f KB: DocumentStore.save / save_floor  median of rounds %.3f  (goal <= 1.2)  spread %.2f-%.2f  ratio of medians %.3f",
                 megabytes * 1000, ratio, ratios.min()!, ratios.max()!, median(ours) / median(floors)))
    print(String(format: "    CPU time (process, every thread) ours / floor  median of rounds %.3f  spread %.2f-%.2f; medians: ours %@ ms, floor %@ ms, SafeSave(rope) %@ ms, SafeSave(flat) %@ ms",
                 median(cpuRatios), cpuRatios.min()!, cpuRatios.max()!, milliseconds(median(oursCPU)), milliseconds(median(floorsCPU)),
                 milliseconds(median(ropesCPU)), milliseconds(median(flatsCPU))))
    print("    wall medians: ours \(milliseconds(median(ours))) ms, floor \(milliseconds(median(floors))) ms, "
        + "SafeSave from the rope \(milliseconds(median(ropes))) ms, SafeSave from a flat buffer \(milliseconds(median(flats))) ms")
    let phaseNames = ["setup (lstat..openat)", "pwrite", "fchmod + llistxattr", "fsync", "close + fstatat + renameat", "fsync dir", "fstatat + unlock + close"]
    let phaseText = phaseNames.indices.map { index in
        "\(phaseNames[index]) \(milliseconds(median(floorPhases.map { Double($0[index]) * 1e-9 })))"
    }.joined(separator: ", ")
    print("    floor phases (medians, ms): " + phaseText)
    print("    CPU alone (medians, ms): rope chunks copied into 1 MiB \(milliseconds(median(copies))), "
        + "XXH64 \(milliseconds(median(hashes))) (\(String(format: "%.1f", megabytes / 1000 / median(hashes))) GB/s), "
        + "runOnOwnThread round trip \(milliseconds(median(hops)))")
    print(String(format: "    differences of medians (ms): ours - SafeSave(rope) %.3f (actor, thread, bookkeeping); "
        + "SafeSave(rope) - SafeSave(flat) %.3f (chunk by chunk); SafeSave(flat) - floor %.3f (copy into the sink, hash, Swift)",
                 (median(ours) - median(ropes)) * 1000, (median(ropes) - median(flats)) * 1000, (median(flats) - median(floors)) * 1000))
}
removeDirectory()
