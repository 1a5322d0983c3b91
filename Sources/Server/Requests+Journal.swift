import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

// The requests about the journal of unsaved changes: recovering a dead server's unsaved work
// (Server+Journal.swift).

/// `document/recover` → ``RecoverResult``.
struct RecoverRequest: RequestType, PackageAwareRequest {
    static let method = "document/recover"
    typealias Result = EitherResult<RecoverResult, PackageRecoverResult>
    var handle: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
    }
}

/// The version the document now has, the edits from the text before, and whether it came back in
/// conflict (the file changed since the journal's base).
struct RecoverResult: RequestResult {
    var version: Int64
    var edits: [TextEdit]
    var inConflict: Bool
    var hasUnsavedChanges: Bool

    var json: JSONValue {
        [
            "version": .integer(version), "edits": .array(edits.map(Server.json)), "inConflict": .bool(inConflict),
            "hasUnsavedChanges": .bool(hasUnsavedChanges),
        ]
    }
}

/// `document/recover` of a package: the entries the recovery wrote or deleted, in place of the
/// text's edits.
struct PackageRecoverResult: RequestResult {
    var result: PackageStore.RecoveryResult

    var json: JSONValue {
        [
            "version": .integer(result.version),
            "entries": .array(result.entries.map { ["path": .string($0.path), "change": .string($0.change.rawValue)] }),
            "inConflict": .bool(result.inConflict), "hasUnsavedChanges": .bool(result.hasUnsavedChanges),
        ]
    }
}

/// `document/discardRecovery` → `null`.
struct DiscardRecoveryRequest: RequestType, PackageAwareRequest {
    static let method = "document/discardRecovery"
    typealias Result = NullResult
    var handle: String

    init(params: Params) throws(ResponseError) {
        handle = try params.string("document")
    }
}

/// `workspace/recoverable` → ``RecoverableResult``: takes no params.
struct RecoverableRequest: ParamlessRequest {
    static let method = "workspace/recoverable"
    typealias Result = RecoverableResult
}

/// Every journal waiting: `{journals: [{uri, date, edits, version, open}]}`, newest first.
struct RecoverableResult: RequestResult {
    var journals: [RecoverableJournal]

    var json: JSONValue {
        ["journals": .array(journals.map { journal in
            [
                "uri": .string(FileURI.uri(from: journal.path)), "date": .string(Timestamp.iso8601(nanoseconds: journal.date)),
                "edits": .integer(Int64(journal.edits)), "version": .integer(journal.version), "open": .bool(journal.open),
            ]
        })]
    }
}

extension Server {
    /// The `recovery` member of a package's info: a dead server's journal of it waiting.
    static func json(_ offer: PackageRecoveryOffer) -> JSONValue {
        recoveryJSON(date: offer.date, edits: offer.edits, version: offer.version, fileMatchesBase: offer.fileMatchesBase, cut: offer.cut)
    }

    /// The `recovery` member of a document's info: a dead server's journal waiting.
    static func json(_ offer: RecoveryOffer) -> JSONValue {
        recoveryJSON(date: offer.date, edits: offer.edits, version: offer.version, fileMatchesBase: offer.fileMatchesBase, cut: offer.cut)
    }

    private static func recoveryJSON(date: Int64, edits: Int, version: Int64, fileMatchesBase: Bool, cut: JournalFraming.Cut?) -> JSONValue {
        [
            "date": .string(Timestamp.iso8601(nanoseconds: date)), "edits": .integer(Int64(edits)),
            "version": .integer(version), "fileMatchesBase": .bool(fileMatchesBase),
            "cut": cut.map { cut in
                ["offset": .integer(Int64(cut.offset)), "bytes": .integer(Int64(cut.bytes)), "reason": .string(cut.reason)]
            } ?? .null,
        ]
    }
}
