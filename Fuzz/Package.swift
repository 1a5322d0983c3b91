// swift-tools-version:6.0
//
// The libFuzzer target over DocSession's framing, JSON and dispatch (see README.md beside this file).
// A package of its own so that the root package's build is never built with the fuzzer's flags:
// build it through Fuzz/run.sh, which adds -sanitize=fuzzer,address to every module and uses its own
// scratch path (Fuzz/.build).

import PackageDescription

let package = Package(
    name: "DocSessionFuzz",
    dependencies: [
        // The root package, by path: the libraries JSON, JSONRPC, Server and FileStore are products of it.
        .package(name: "docsession", path: ".."),
        // The same version as the root package, for the Logger that Connection and Server take.
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
    ],
    targets: [
        // The declaration of libFuzzer's LLVMFuzzerRunDriver, for the entry point.
        .target(name: "CFuzzerDriver"),
        .executableTarget(
            name: "DocSessionFuzz",
            dependencies: [
                "CFuzzerDriver",
                .product(name: "JSON", package: "docsession"),
                .product(name: "JSONRPC", package: "docsession"),
                .product(name: "Server", package: "docsession"),
                .product(name: "FileStore", package: "docsession"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [
                // No top-level code: the entry points are DocSessionFuzz_main and LLVMFuzzerTestOneInput.
                .unsafeFlags(["-parse-as-library"])
            ]
        )
    ]
)
