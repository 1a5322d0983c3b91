// swift-tools-version:6.0
//
// DocSession: a document-session server speaking JSON-RPC 2.0 over stdio.
// The targets follow the module boundaries described in README.md ("Architecture").

import PackageDescription

let package = Package(
    name: "docsession",
    products: [
        .executable(name: "docsession", targets: ["docsession"]),
        // Libraries are products so that the fuzzing package under Fuzz/ can link them.
        .library(name: "JSON", targets: ["JSON"]),
        .library(name: "JSONRPC", targets: ["JSONRPC"]),
        .library(name: "Server", targets: ["Server"]),
        .library(name: "Client", targets: ["Client"]),
        .library(name: "TextBuffer", targets: ["TextBuffer"]),
        .library(name: "EditingTraces", targets: ["EditingTraces"]),
        .library(name: "FileStore", targets: ["FileStore"]),
        .library(name: "DocumentSession", targets: ["DocumentSession"]),
        .library(name: "Execution", targets: ["Execution"]),
        .library(name: "SystemCalls", targets: ["SystemCalls"]),
        .library(name: "ManagedStore", targets: ["ManagedStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", exact: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", exact: "1.8.1"),
    ],
    targets: [
        // json-c, Debian's libjson-c-dev: the only JSON implementation in the project.
        .systemLibrary(
            name: "CJSONC",
            pkgConfig: "json-c",
            providers: [.apt(["libjson-c-dev"])]
        ),
        // xxHash, Debian's libxxhash-dev: the XXH64 of file contents and of version-store paths.
        .systemLibrary(
            name: "CXXHash",
            pkgConfig: "libxxhash",
            providers: [.apt(["libxxhash-dev"])]
        ),
        // SQLite, Debian's libsqlite3-dev (3.40.1): the managed documents' stores. Its shim.h defines
        // SQLITE_ENABLE_SESSION and SQLITE_ENABLE_PREUPDATE_HOOK before including sqlite3.h, so the
        // session extension's declarations are seen (Debian's library is built with both).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // One thread that runs jobs and, between them, polls descriptors: the executor the whole
        // request path runs on (the connection's dispatcher and the document store's actor).
        .target(name: "Execution", dependencies: ["SystemCalls"]),
        // The system-call layer beneath FileStore, Execution, JSONRPC and the executable (issue
        // 16.1): owned descriptors closed exactly once, errors naming errno, call and path, EINTR
        // retried, the one thread starter and the one directory flush; on swift-system.
        .target(name: "SystemCalls", dependencies: [
            "CFileSystem",
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        // JSONValue parsed and serialised through json-c, hardened; the only module touching json-c.
        .target(name: "JSON", dependencies: ["CJSONC", "UTF8Validation"]),
        // The one UTF-8 validator (a sequence, a prefix byte by byte, blocks of 16 or, with AVX2 in
        // CTextScan, 64 bytes), which JSON, TextBuffer and FileStore call. Pure: no I/O.
        .target(
            name: "UTF8Validation", dependencies: ["CTextScan"],
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]
        ),
        // Framing, the JSON-RPC 2.0 message model, batches, the serial writer, cancellation.
        .target(name: "JSONRPC", dependencies: [
            "JSON",
            "Execution",
            "SystemCalls",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Files: reading with encoding detection, the safe save, the watcher, versions, the workspace's
        // file operations (docs/Modules.md).
        .target(
            name: "FileStore",
            dependencies: ["SystemCalls", "CFileSystem", "UTF8Validation", "CXXHash"],
            // Optimised in debug builds too, as TextBuffer: validating, counting and hashing 100 MB
            // byte loops run 30 times slower unoptimised, which made the large-file tests crawl.
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]
        ),
        // The few Linux file calls Swift's Glibc module does not declare (renameat2, xattrs).
        .target(name: "CFileSystem"),
        // Byte scans with AVX2 chosen at run time (UTF-8 validation), which Swift cannot ask for
        // per function; optimised in debug builds too, like FileStore.
        .target(name: "CTextScan", cSettings: [.unsafeFlags(["-O2"])]),
        // A document's life (UIDocument's role): open documents, versions, edits, undo, states.
        .target(name: "DocumentSession", dependencies: ["TextBuffer", "FileStore", "Execution", "ManagedStore"]),
        // The protocol's method table and lifecycle; the only place that knows wire and core types.
        .target(name: "Server", dependencies: [
            "JSONRPC",
            "DocumentSession",
            "ManagedStore",
            "UTF8Validation",
            "TextBuffer",
            "FileStore",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The SQLite store of a managed document (UIManagedDocument's persistent store): a private
        // working copy, migrations by PRAGMA user_version, one transaction per request, undo and redo
        // through the session extension's changesets, an authorizer, publishing by the backup API.
        // Not JSON: the server converts. On CSQLite rather than GRDB.swift 7.10.0, which wraps
        // neither the session extension (sqlite3session_*, changeset invert and apply), nor the
        // authorizer, nor the backup API, and whose migrator tracks migrations in a table of its
        // own where ours are tracked by PRAGMA user_version.
        .target(name: "ManagedStore", dependencies: ["CSQLite", "FileStore", "SystemCalls"]),
        // Drives a server from the outside (spawn, frame, print traffic): the demo, call, run and replay.
        .target(name: "Client", dependencies: ["JSONRPC", "SystemCalls"]),
        // The executable: arguments, stdio wiring, logging, signals. No logic of its own.
        .executableTarget(name: "docsession", dependencies: [
            "Server",
            "Client",
            "FileStore",
            "Execution",
            "SystemCalls",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        // The text of a document: a rope of UTF-8 chunks, LSP positions, edits and undo. Pure: no I/O.
        .target(
            name: "TextBuffer",
            dependencies: [.product(name: "_RopeModule", package: "swift-collections"), "UTF8Validation"],
            // Optimised in debug builds too: the rope's generic code (inlined from swift-collections)
            // runs 20 to 50 times slower unoptimised, which made the trace tests take minutes.
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]
        ),

        // Test and benchmark support: the editing traces of ../shared/data, loaded once for all.
        .target(name: "EditingTraces", dependencies: ["JSON"]),

        // What the test targets share: temporary directories, a seeded generator, waiting for a
        // condition with a deadline (a library, not a test target: the others import it).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ExecutionTests", dependencies: ["TestSupport", "Execution"]),
        .testTarget(name: "SystemCallsTests", dependencies: ["TestSupport", "SystemCalls"]),
        .testTarget(name: "JSONTests", dependencies: ["TestSupport", "JSON"]),
        .testTarget(name: "UTF8ValidationTests", dependencies: ["TestSupport", "UTF8Validation"]),
        .testTarget(name: "FileStoreTests", dependencies: ["TestSupport", "FileStore", "UTF8Validation"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC"]),
        .testTarget(name: "ServerTests", dependencies: ["Server"]),
        .testTarget(name: "TextBufferTests", dependencies: ["TestSupport", "TextBuffer", "JSON", "EditingTraces"]),
        .testTarget(name: "DocumentSessionTests", dependencies: ["TestSupport", "DocumentSession", "TextBuffer", "FileStore"]),
        .testTarget(name: "ManagedStoreTests", dependencies: ["TestSupport", "ManagedStore"]),
        .testTarget(name: "EndToEndTests", dependencies: ["TestSupport", "docsession", "JSONRPC", "Server", "Client", "JSON", "EditingTraces"]),
    ]
)
