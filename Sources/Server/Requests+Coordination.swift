import DocumentSession
import JSON
import JSONRPC

// Coordination with other parties, NSFileCoordinator's way (Server+Coordination.swift).

/// `workspace/coordinate` → ``CoordinateResult``: a lease on a file for another party to read,
/// write, delete or move it.
struct CoordinateRequest: RequestType {
    static let method = "workspace/coordinate"
    typealias Result = CoordinateResult
    /// `uri` as a path, not yet checked against the roots.
    var path: String
    var intent: CoordinationIntent
    /// `destination` as a path (a `move` only), not yet checked against the roots.
    var destination: String?

    init(params: Params) throws(ResponseError) {
        path = try params.filePath("uri")
        let names = CoordinationIntent.allCases.map(\.rawValue)
        guard let name = try params.optionalEnumeration("intent", names), let intent = CoordinationIntent(rawValue: name) else {
            let list = names.map { "\"\($0)\"" }.joined(separator: ", ")
            throw .invalidParams(field: params.fieldPath("intent"), "missing (one of \(list) is required)")
        }
        self.intent = intent
        if params.value("destination") != nil {
            guard intent == .move else {
                throw .invalidParams(
                    field: params.fieldPath("destination"), "only a lease to move a file has a destination (the intent is \"\(name)\")")
            }
            destination = try params.filePath("destination")
        } else if intent == .move {
            throw .invalidParams(field: params.fieldPath("destination"), "missing (a file URI, where the file is moved to, is required to move)")
        }
    }
}

/// A granted lease: its id, the open documents of the file, and those a `read` lease saved first.
struct CoordinateResult: RequestResult {
    var lease: String
    var intent: CoordinationIntent
    var documents: [String]
    var saved: [String]

    var json: JSONValue {
        [
            "lease": .string(lease), "intent": .string(intent.rawValue),
            "documents": .array(documents.map { .string($0) }), "saved": .array(saved.map { .string($0) }),
        ]
    }
}

/// `workspace/endCoordination` → ``EndCoordinationResult``.
struct EndCoordinationRequest: RequestType {
    static let method = "workspace/endCoordination"
    typealias Result = EndCoordinationResult
    var lease: String

    init(params: Params) throws(ResponseError) {
        lease = try params.string("lease")
    }
}

/// What the end of a lease did to each document of the file.
struct EndCoordinationResult: RequestResult {
    var documents: [(handle: String, outcome: CoordinationOutcome)]

    var json: JSONValue {
        ["documents": .array(documents.map { ["document": .string($0.handle), "outcome": .string($0.outcome.rawValue)] })]
    }
}
