// swift-tools-version:6.1
//
// DocSession's benchmarks: a package of its own, so that a plain `swift build` of the root package
// never compiles the benchmark harness. Build and run from the repository root with
// `swift package --package-path Benchmarks --scratch-path Benchmarks/.build benchmark`, or print the
// side-by-side ratios with `swift run -c release --package-path Benchmarks --scratch-path
// Benchmarks/.build BufferRatios` (and `OpenRatios`; see README.md beside this file).

import PackageDescription

let package = Package(
    name: "DocSessionBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // The root package, by path: TextBuffer, and JSON to read the editing traces.
        .package(name: "docsession", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The workloads, shared by the harness and the ratio command: trace loading, replays,
        // the flat baseline, the large generated document, undo and redo.
        .target(name: "BufferWorkloads", dependencies: [
            .product(name: "TextBuffer", package: "docsession"),
            .product(name: "EditingTraces", package: "docsession"),
        ]),
        // ordo-one/benchmark's harness: absolute times, percentiles, allocations.
        .executableTarget(
            name: "TextBufferBenchmarks",
            dependencies: [
                "BufferWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/TextBufferBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // ordo-one/benchmark's harness for the document figures: open, save, the codec, each beside
        // its C floor (distributions, allocations, peak memory).
        .executableTarget(
            name: "DocumentBenchmarks",
            dependencies: [
                "BufferWorkloads", "OpenFloor", "SaveFloor", "CodecFloor",
                .product(name: "DocumentSession", package: "docsession"),
                .product(name: "Execution", package: "docsession"),
                .product(name: "FileStore", package: "docsession"),
                .product(name: "JSON", package: "docsession"),
                .product(name: "TextBuffer", package: "docsession"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/DocumentBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Runs each pair side by side in one process and prints the ratios (median of rounds).
        .executableTarget(name: "BufferRatios", dependencies: ["BufferWorkloads"]),
        // The floor of opening a file: read(2) in 1 MiB pieces and a vectorised '\n' count, in C.
        .target(name: "OpenFloor"),
        // Opening a generated 100 MB file through DocumentStore / the floor, side by side in one
        // process; peak RSS of an open in child processes.
        .executableTarget(name: "OpenRatios", dependencies: [
            "OpenFloor", "BufferWorkloads",
            .product(name: "DocumentSession", package: "docsession"),
            .product(name: "FileStore", package: "docsession"),
            .product(name: "TextBuffer", package: "docsession"),
        ]),
        // The floor of saving a file: SafeSave's system calls, in order, from one flat buffer, in C.
        .target(name: "SaveFloor"),
        // Figure 4: DocumentStore.save / SaveFloor for 100 KB and 10 MB documents, side by side in
        // one process, with a breakdown (SafeSave alone from the rope and from a flat buffer).
        .executableTarget(name: "SaveRatios", dependencies: [
            "SaveFloor", "BufferWorkloads",
            .product(name: "DocumentSession", package: "docsession"),
            .product(name: "Execution", package: "docsession"),
            .product(name: "FileStore", package: "docsession"),
            .product(name: "TextBuffer", package: "docsession"),
        ]),
        // Figure 2's floor: a C ping-pong over pipes with a child that echoes, with the message
        // sizes of the protocol benchmark.
        .target(name: "PipeFloor"),
        // Figure 2: the editing traces replayed as document/edit requests to the built server over
        // stdio, synchronously and pipelined, against PipeFloor.
        .executableTarget(name: "ProtocolRatios", dependencies: [
            "PipeFloor", "BufferWorkloads",
            .product(name: "EditingTraces", package: "docsession"),
            .product(name: "JSON", package: "docsession"),
            .product(name: "JSONRPC", package: "docsession"),
        ]),
        // Figure 3: the same traces against Neovim over its msgpack RPC and against our server,
        // driven the same way; Neovim's :write with fsync against our save.
        .executableTarget(name: "NeovimPeer", dependencies: [
            "BufferWorkloads", "PipeFloor",
            .product(name: "EditingTraces", package: "docsession"),
            .product(name: "JSON", package: "docsession"),
            .product(name: "JSONRPC", package: "docsession"),
        ]),
        // The JSON codec's floor: json-c called directly on the same bytes.
        .target(name: "CodecFloor", linkerSettings: [.linkedLibrary("json-c")]),
        // The JSON codec per message (parse a request, build and serialise a response) / CodecFloor.
        .executableTarget(name: "CodecRatios", dependencies: [
            "CodecFloor", "BufferWorkloads",
            .product(name: "JSON", package: "docsession"),
            .product(name: "JSONRPC", package: "docsession"),
        ]),
        // The three-way merge of document/resolveConflict on a 100 MB text / memcmp and a copy.
        .executableTarget(name: "MergeRatios", dependencies: [
            "BufferWorkloads",
            .product(name: "TextBuffer", package: "docsession"),
        ]),
        // libgit2's git_merge_file (Debian libgit2-dev) behind a small C shim, for MergeCompare.
        .target(name: "GitMergeFile", linkerSettings: [.linkedLibrary("git2")]),
        // Issue 16.3: ThreeWayMerge against git_merge_file on merge cases cut from the editing
        // traces, with known right answers: clean and right, clean and wrong, missed, conflicts.
        .executableTarget(name: "MergeCompare", dependencies: [
            "GitMergeFile", "BufferWorkloads",
            .product(name: "EditingTraces", package: "docsession"),
            .product(name: "TextBuffer", package: "docsession"),
        ]),
        // Figure 7: round trips of single-character edits to the built server while it saves a
        // 100 MB document, and with no save running.
        .executableTarget(name: "EditLatency", dependencies: [
            "SaveFloor", "PipeFloor",  // the floor: C round trips while C saves the same bytes
            "BufferWorkloads",
            .product(name: "JSON", package: "docsession"),
            .product(name: "JSONRPC", package: "docsession"),
        ]),
    ]
)
