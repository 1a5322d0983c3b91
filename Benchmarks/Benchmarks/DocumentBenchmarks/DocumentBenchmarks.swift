// The in-process document figures of shared/design/performance.md under ordo-one/benchmark:
// absolute times, percentiles, allocation counts and peak memory, each beside its floor measured
// the same way: opening 100 MB (DocumentStore.open / a C read plus newline count), saving 100 KB and
// 10 MB (DocumentStore.save / the C program making the same system calls from a flat buffer), and the
// JSON codec per message (parsing an edit request and serialising an edit response / json-c on the
// same bytes). The ratios the goals are stated in come from OpenRatios, SaveRatios and CodecRatios,
// which alternate each pair round by round (`make bench`); this harness adds the distributions.

import Benchmark
import BufferWorkloads
import CodecFloor
import DocumentSession
import Execution
import FileStore
import Foundation
import JSON
import OpenFloor
import SaveFloor
import TextBuffer

/// The files the benchmarks read and write, in a directory of their own on a disk-backed file
/// system (fsync on tmpfs costs nothing), made once.
struct Files: Sendable {
    let directory: String
    let large: String
    let largeSize: Int

    init() {
        var template = Array("/var/tmp/DocumentBenchmarks.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!
        directory = String(cString: made)
        large = directory + "/large.txt"
        GeneratedLines.writeFile(at: large, bytes: 100_000_000)
        var status = stat()
        stat(large, &status)
        largeSize = Int(status.st_size)
    }
}

let files = Files()

/// A document with unsaved changes to save, and the same bytes in a flat buffer for the floor.
final class SaveSubject: @unchecked Sendable {
    let store = DocumentStore(watchFiles: false)
    let handle: String
    let name: String
    let flat: UnsafeMutablePointer<UInt8>
    let count: Int
    var version: Int64 = 1
    var toggle = false

    init(bytes: Int) async {
        // A name of its own: the harness runs a benchmark's body more than once.
        name = "save-\(bytes)-\(UUID().uuidString)"
        let text = Workloads.generatedDocument(bytes: bytes)
        let bytes = Array(text.utf8)
        count = bytes.count
        let buffer = save_floor_alloc(bytes.count)!
        bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: $0.count) }
        flat = buffer
        // The floor replaces a file that exists, as a save does.
        FileManager.default.createFile(atPath: files.directory + "/" + name + "-floor.txt", contents: Data(bytes))
        let document = try! await store.create(path: files.directory + "/" + name + "-ours.txt", text: text)
        handle = document.handle
    }

    /// One edit (not timed separately: both sides of a pair pay for theirs) and the save, from the
    /// server's loop thread as a request runs it.
    func saveOurs() async {
        let store = store, handle = handle
        toggle.toggle()
        let edit = TextEdit(range: TextRange(0, 0, 0, 1), text: toggle ? "B" : "A")
        version = await withTaskExecutorPreference(LoopExecutor.shared) { [version] () async -> Int64 in
            let next = try! await store.edit(handle, version: version, edits: [edit], encoding: .utf16, label: nil, merge: false)
            _ = try! await store.save(handle)
            return next
        }
    }

    deinit {
        save_floor_free(flat)
        unlink(files.directory + "/" + name + "-ours.txt")
        unlink(files.directory + "/" + name + "-floor.txt")
    }

    func saveFloor() {
        var durable: Int32 = 0
        precondition(save_floor(files.directory, name + "-floor.txt", flat, count, 1 << 20, &durable, nil) == 0)
    }
}

/// An edit request as an editor sends it, and the JSON-RPC response body the server writes.
let editRequest = Array(
    #"{"jsonrpc":"2.0","id":42,"method":"document/edit","params":{"document":"d1","version":7,"edits":[{"range":{"start":{"line":12,"character":4},"end":{"line":12,"character":9}},"text":"hello"}]}}"#.utf8)

let benchmarks: @Sendable () -> Void = {
    let slow = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], warmupIterations: 1,
        maxDuration: .seconds(15), maxIterations: 9)
    let quick = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal], warmupIterations: 10, scalingFactor: .kilo,
        maxDuration: .seconds(5))

    // Opening 100 MB.
    Benchmark("open 100 MB: DocumentStore.open", configuration: slow) { benchmark in
        let store = DocumentStore(watchFiles: false)
        for _ in benchmark.scaledIterations {
            let document = try! await store.open(path: files.large, encoding: nil)
            blackHole(document.buffer.utf8Count)
            try! await store.close(document.handle, save: .never)
        }
    }
    Benchmark("open 100 MB: floor (C read + newline count)", configuration: slow) { benchmark in
        for _ in benchmark.scaledIterations {
            var read: Int64 = 0
            blackHole(open_floor_read_count(files.large, 1 << 20, &read))
        }
    }

    // Saving 100 KB and 10 MB durably.
    for size in [100_000, 10_000_000] {
        let label = size >= 1_000_000 ? "\(size / 1_000_000) MB" : "\(size / 1000) KB"
        Benchmark("save \(label): DocumentStore.save (with one edit)", configuration: slow) { benchmark in
            let subject = await SaveSubject(bytes: size)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { await subject.saveOurs() }
            benchmark.stopMeasurement()
        }
        Benchmark("save \(label): floor (the same system calls in C)", configuration: slow) { benchmark in
            let subject = await SaveSubject(bytes: size)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { subject.saveFloor() }
            benchmark.stopMeasurement()
        }
    }

    // The JSON codec per message.
    Benchmark("codec: parse an edit request (JSONParser)", configuration: quick) { benchmark in
        let parser = JSONParser()
        for _ in benchmark.scaledIterations { blackHole(try! parser.parse(editRequest)) }
    }
    Benchmark("codec: parse an edit request (json-c alone)", configuration: quick) { benchmark in
        let floor = codecfloor_new(512)!
        defer { codecfloor_free(floor) }
        editRequest.withUnsafeBytes { raw in
            let body = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            for _ in benchmark.scaledIterations { blackHole(codecfloor_edit_requests(floor, body, raw.count, 1, nil)) }
        }
    }
    Benchmark("codec: serialise an edit response (JSONValue)", configuration: quick) { benchmark in
        for _ in benchmark.scaledIterations {
            let response: JSONValue = ["jsonrpc": "2.0", "id": .integer(42), "result": ["version": .integer(8)]]
            blackHole(response.serialized())
        }
    }
    Benchmark("codec: serialise an edit response (json-c alone)", configuration: quick) { benchmark in
        var output = codecfloor_output(out: nil, capacity: 0, length: 0)
        for _ in benchmark.scaledIterations { blackHole(codecfloor_edit_responses(42, 8, 1, &output)) }
        free(output.out)
    }
}
