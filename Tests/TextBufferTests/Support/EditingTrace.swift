import Foundation
import JSON

/// One of the editing traces in shared/data/editing-traces (josephg/editing-traces, CC BY 4.0):
/// a start text, an end text, and transactions of patches counted in Unicode scalars.
struct EditingTrace {
    /// A patch: at scalar offset `position`, delete `deleteCount` scalars, insert `text`.
    struct Patch {
        var position: Int
        var deleteCount: Int
        var text: String
    }

    var name: String
    var startContent: String
    var endContent: String
    var transactions: [[Patch]]

    /// The folder holding the traces: shared/data/editing-traces beside the repository.
    static var directory: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("shared/data/editing-traces")
    }

    /// The names of the traces present (without `.json.gz`).
    static var available: [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.filter { $0.hasSuffix(".json.gz") }.map { String($0.dropLast(8)) }.sorted()
    }

    /// Loads a trace: gunzip through /bin/gzip, parse with the project's JSON module.
    static func load(_ name: String) throws -> EditingTrace {
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
                return Patch(position: Int(position), deleteCount: Int(deleteCount), text: text)
            })
        }
        return EditingTrace(name: name, startContent: start, endContent: end, transactions: transactions)
    }

    enum TraceError: Error {
        case gzipFailed(String)
        case malformed(String)
    }
}
