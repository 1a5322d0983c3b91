import Foundation
import JSON

/// Test and benchmark support, not part of the server: loads the editing traces for the tests and
/// the benchmarks, which all replay them.
///
/// One of the editing traces in shared/data/editing-traces (josephg/editing-traces, CC BY 4.0):
/// a start text, an end text, and transactions of patches counted in Unicode scalars.
public struct EditingTrace: Sendable {
    /// A patch: at scalar offset `position`, delete `deleteCount` scalars, insert `text`.
    public struct Patch: Sendable {
        public var position: Int
        public var deleteCount: Int
        public var text: String
        /// `text` as UTF-8, for the flat baseline.
        public var bytes: [UInt8]
    }

    public var name: String
    public var startContent: String
    public var endContent: String
    public var transactions: [[Patch]]

    /// Every patch, in order.
    public var patches: [Patch] { transactions.flatMap { $0 } }

    /// The folder holding the traces: `DOCSESSION_TRACES` if set, else shared/data/editing-traces
    /// beside the repository.
    public static var directory: URL {
        if let path = ProcessInfo.processInfo.environment["DOCSESSION_TRACES"] {
            return URL(fileURLWithPath: path)
        }
        // This file is <repository>/Sources/EditingTraces/EditingTrace.swift; shared/ is beside the repository.
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("shared/data/editing-traces")
    }

    /// The names of the traces present (without `.json.gz`).
    public static var available: [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.filter { $0.hasSuffix(".json.gz") }.map { String($0.dropLast(8)) }.sorted()
    }

    /// Whether the trace `name` is present.
    public static func isPresent(_ name: String) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(name + ".json.gz").path)
    }

    /// Loads a trace: gunzip through /bin/gzip, parse with the project's JSON module.
    public static func load(_ name: String) throws -> EditingTrace {
        let path = directory.appendingPathComponent(name + ".json.gz").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TraceError.gzipFailed(path) }

        let json = try JSONParser().parse([UInt8](data))
        guard let start = json["startContent"]?.stringValue,
              let end = json["endContent"]?.stringValue,
              let txns = json["txns"]?.arrayValue else { throw TraceError.malformed(name) }
        var transactions: [[Patch]] = []
        transactions.reserveCapacity(txns.count)
        for txn in txns {
            guard let patches = txn["patches"]?.arrayValue else { throw TraceError.malformed(name) }
            transactions.append(try patches.map { patch in
                guard let position = patch[0]?.integerValue, let deleteCount = patch[1]?.integerValue,
                      let text = patch[2]?.stringValue else { throw TraceError.malformed(name) }
                return Patch(position: Int(position), deleteCount: Int(deleteCount), text: text,
                             bytes: Array(text.utf8))
            })
        }
        return EditingTrace(name: name, startContent: start, endContent: end, transactions: transactions)
    }

    /// Why a trace could not be loaded.
    public enum TraceError: Error {
        case gzipFailed(String)
        case malformed(String)
    }
}
