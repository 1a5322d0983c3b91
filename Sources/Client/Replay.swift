import Foundation
import JSON
import JSONRPC
import SystemCalls
import SystemPackage

/// `docsession replay FILE`: feeds a recorded session (`docsession serve --record FILE`, JSON Lines
/// in vscode-jsonrpc's JSON-trace shape) to a fresh server and compares what comes back with what
/// was recorded, after normalising what varies from run to run.
///
/// The records are taken in steps: each `send-*` record with the `receive-*` records that follow it
/// up to the next `send-*`. A step sends its message, then waits for the response to its request
/// (if it is one), for as many responses as the step recorded, and for as many notifications
/// (and server requests). Responses are compared by id, notifications in order within their step.
public struct Replay {
    /// The help text's description of what is normalised and how fixtures are found.
    public static let discussion = """
        Starts a fresh server (this executable: serve --state-dir ROOT/.state, then each --server-arg), \
        sends the recorded send-* records in order (after a request, waits for its response; \
        send-invalid records are sent as raw bodies; a batch was recorded one record per message and \
        is replayed one message at a time), and compares what comes back: responses by id, \
        notifications in order between one sent message and the next.

        ${ROOT} in the recording stands for a fresh temporary directory; the files of FILE minus \
        .jsonl plus .files/ (if that directory exists) are copied into it first. With --root DIR, \
        DIR (as a path or percent-encoded in a URI) is read as ${ROOT}.

        Normalised before comparing: record timestamps (ignored); the values of modificationDate and \
        date (ISO timestamps) and of etag and expectedEtag (when strings); "took <n>ms" in $/logTrace \
        messages; the ids of earlier versions (each id in a document/versions result is mapped to the \
        live one in the same position, and that mapping is applied to later requests and to the \
        expected messages); the live temporary directory, written back as ${ROOT}. A document/versions \
        request whose answer lists fewer versions than recorded is asked again (same id, up to 5 s): \
        versions are written in the background.

        Prints "replay: N requests, M notifications: identical" and exits 0 when everything matches \
        (N: requests sent; M: notifications, both ways); otherwise a unified diff (expected, got; \
        pretty JSON, keys sorted) per differing message, with its record's line, and exits 1. With \
        --update, FILE is rewritten with this run's traffic (${ROOT} kept) and the exit status is 0. \
        A FILE that cannot be read or is not a recording: an error naming the line, exit status 2.
        """

    public var file: String
    public var update: Bool
    public var recordedRoot: String?
    public var executable: String
    public var serverArguments: [String]
    /// How long to wait for a response, in seconds.
    public var timeout: Double
    public var output: (String) -> Void
    public var errors: (String) -> Void

    public init(
        file: String, update: Bool = false, recordedRoot: String? = nil, executable: String, serverArguments: [String] = [],
        timeout: Double = 10, output: @escaping (String) -> Void, errors: @escaping (String) -> Void
    ) {
        self.file = file
        self.update = update
        self.recordedRoot = recordedRoot
        self.executable = executable
        self.serverArguments = serverArguments
        self.timeout = timeout
        self.output = output
        self.errors = errors
    }

    /// The placeholder of the session's directory in a recording.
    public static let rootPlaceholder = "${ROOT}"

    /// Runs the replay; answers the exit status (0 identical or updated, 1 different, 2 unusable).
    public func run() -> Int32 {
        let records: [Record]
        do {
            records = try Self.load(file, recordedRoot: recordedRoot)
        } catch {
            errors("docsession replay: \(error)")
            return 2
        }
        let steps: [Step]
        do {
            steps = try Self.steps(records, file: file)
        } catch {
            errors("docsession replay: \(error)")
            return 2
        }
        let session: Session
        do {
            session = try Session(fixtures: Self.fixtureDirectory(of: file))
        } catch {
            errors("docsession replay: \(error)")
            return 2
        }
        defer { session.remove() }
        let outcome: [StepOutcome]
        do {
            outcome = try drive(steps, session: session)
        } catch {
            errors("docsession replay: \(error)")
            return 2
        }

        let requests = steps.filter { $0.sent.direction == .sendRequest }.count
        let notifications = records.filter { $0.direction == .sendNotification || $0.direction == .receiveNotification }.count
        let differences = outcome.flatMap(\.differences)
        if update {
            do {
                try write(outcome, root: session.root)
            } catch {
                errors("docsession replay: \(error)")
                return 2
            }
            output("replay: \(requests) requests, \(notifications) notifications: \(differences.count) messages differed; \(file) updated")
            return 0
        }
        guard !differences.isEmpty else {
            output("replay: \(requests) requests, \(notifications) notifications: identical")
            return 0
        }
        for difference in differences { output(difference) }
        output("replay: \(requests) requests, \(notifications) notifications: \(differences.count) messages differ")
        return 1
    }

    // MARK: - Records

    /// One line of a recording.
    struct Record {
        var line: Int
        var direction: Recorder.Direction
        /// The message; for `send-invalid`, a string holding the raw body.
        var message: JSONValue
        var timestamp: JSONValue
    }

    /// A fault in the recording.
    struct FileError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func load(_ file: String, recordedRoot: String?) throws -> [Record] {
        let data: [UInt8]
        do {
            let recording = try Descriptor.open(file, .readOnly)
            data = try readToEnd(from: recording.unowned, path: file)
        } catch {
            // Something that exists (a directory, a file without read permission) cannot be read;
            // anything else is missing.
            if let status = try? fileStatus(file) {
                throw FileError("\(file): cannot read it\(status.st_mode & S_IFMT == S_IFDIR ? " (a directory)" : "")")
            }
            throw FileError("\(file): no such file")
        }
        let parser = JSONParser()
        var records: [Record] = []
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        for (index, line) in lines.enumerated() {
            let number = index + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            func fail(_ why: String) -> FileError { FileError("\(file):\(number): \(why)") }
            let value: JSONValue
            do {
                value = try parser.parse(Array(line))
            } catch {
                throw fail("not a JSON text: \(error)")
            }
            guard let object = value.objectValue else { throw fail("a record must be a JSON object, not \(value.kindDescription)") }
            guard object["isLSPMessage"] == .bool(true) else {
                throw fail("not a message record: \"isLSPMessage\" must be true (records are {\"isLSPMessage\": true, \"type\": ..., \"message\": ..., \"timestamp\": ...})")
            }
            let known = Recorder.Direction.allCases.map(\.rawValue)
            guard let typeName = object["type"]?.stringValue, let direction = Recorder.Direction(rawValue: typeName) else {
                throw fail("\"type\" must be one of \(known.joined(separator: ", ")), not \(object["type"]?.jsonText ?? "nothing")")
            }
            guard let timestamp = object["timestamp"], timestamp.integerValue != nil || { if case .double = timestamp { return true }; return false }() else {
                throw fail("\"timestamp\" must be a number (milliseconds since the epoch), not \(object["timestamp"]?.jsonText ?? "nothing")")
            }
            guard var message = object["message"] else { throw fail("\"message\" is missing") }
            if let recordedRoot { message = Self.substitute(message, replacing: recordedRoot, with: rootPlaceholder) }
            switch direction {
            case .sendInvalid:
                if message.isNull, let fault = object["fault"]?.stringValue {
                    throw fail("a framing fault (\(fault)) cannot be replayed: its bytes were not recorded")
                }
                guard message.stringValue != nil else { throw fail("the \"message\" of a send-invalid record must be a string (the raw body)") }
            case .sendRequest, .receiveRequest:
                guard message["method"]?.stringValue != nil, message["id"] != nil else {
                    throw fail("the \"message\" of a \(typeName) record must be a request (an object with \"id\" and \"method\")")
                }
            case .sendNotification, .receiveNotification:
                guard message["method"]?.stringValue != nil, message["id"] == nil else {
                    throw fail("the \"message\" of a \(typeName) record must be a notification (an object with \"method\" and no \"id\")")
                }
            case .sendResponse, .receiveResponse:
                guard message.objectValue != nil, message["id"] != nil, message["method"] == nil else {
                    throw fail("the \"message\" of a \(typeName) record must be a response (an object with \"id\" and no \"method\")")
                }
            }
            // Sent when background work ends, at no fixed place: not compared (see collect).
            if direction == .receiveNotification, let method = message["method"]?.stringValue,
               asynchronousNotifications.contains(method) { continue }
            records.append(Record(line: number, direction: direction, message: message, timestamp: timestamp))
        }
        guard !records.isEmpty else { throw FileError("\(file): no records") }
        return records
    }

    /// One sent message and what was received after it, before the next one was sent.
    struct Step {
        var sent: Record
        var received: [Record]
    }

    static func steps(_ records: [Record], file: String) throws -> [Step] {
        var steps: [Step] = []
        for record in records {
            if record.direction.rawValue.hasPrefix("send-") {
                steps.append(Step(sent: record, received: []))
            } else {
                guard !steps.isEmpty else {
                    throw FileError("\(file):\(record.line): a \(record.direction.rawValue) record before anything was sent; a replay cannot wait for it")
                }
                steps[steps.count - 1].received.append(record)
            }
        }
        return steps
    }

    static func fixtureDirectory(of file: String) -> String {
        (file.hasSuffix(".jsonl") ? String(file.dropLast(".jsonl".count)) : file) + ".files"
    }

    // MARK: - The live session

    /// The temporary directory standing for ${ROOT}, with the fixtures copied in.
    final class Session {
        let root: String
        var stateDirectory: String { root + "/.state" }

        init(fixtures: String) throws {
            var base = NSTemporaryDirectory()
            // The root must read the same in a path and in a URI (no percent-encoding).
            if base.isEmpty || base.contains(where: { !Self.isPlain($0) }) { base = "/tmp/" }
            if !base.hasSuffix("/") { base += "/" }
            do {
                root = try makeTemporaryDirectory(prefix: base + "docsession-replay-")
            } catch {
                throw FileError("cannot make a temporary directory in \(base): \(String(cString: strerror(error.errno.rawValue)))")
            }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: fixtures, isDirectory: &isDirectory), isDirectory.boolValue {
                do {
                    for name in try FileManager.default.contentsOfDirectory(atPath: fixtures) {
                        try FileManager.default.copyItem(atPath: fixtures + "/" + name, toPath: root + "/" + name)
                    }
                } catch {
                    remove()
                    throw FileError("cannot copy the fixtures of \(fixtures): \(error)")
                }
            }
        }

        static func isPlain(_ character: Character) -> Bool {
            character.isASCII && (character.isLetter || character.isNumber || "/._-".contains(character))
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    /// What one step sent and received, and how that differs from the recording.
    struct StepOutcome {
        var sent: JSONValue
        var sentDirection: Recorder.Direction
        var received: [JSONValue]
        var differences: [String]
    }

    private func drive(_ steps: [Step], session: Session) throws -> [StepOutcome] {
        let server: ServerProcess
        do {
            server = try ServerProcess(
                executable: executable, arguments: ["serve", "--state-dir", session.stateDirectory] + serverArguments)
        } catch {
            throw FileError("cannot start the server \(executable): \(error)")
        }
        defer { server.terminate() }
        var context = Context(root: session.root)
        var outcomes: [StepOutcome] = []
        var tally = ResponseTally()
        var ended = false
        for step in steps {
            let sent = context.toLive(step.sent.message)
            for record in step.received where record.direction == .receiveResponse {
                tally.expectRecorded(record.message["id"] ?? .null)
            }
            let expectedOthers = step.received.filter { $0.direction != .receiveResponse }.count
            let own: JSONValue? = step.sent.direction == .sendRequest ? sent["id"] : nil
            if let own { tally.expectRequested(own) }
            var received: [JSONValue] = []
            if !ended {
                try send(sent, step.sent.direction, to: server)
                ended = collect(from: server, into: &received, tally: &tally, others: expectedOthers)
                // Versions are written in the background: ask again while fewer are listed than recorded.
                if !ended, sent["method"] == "document/versions", let own,
                    let wanted = step.received.first(where: { $0.direction == .receiveResponse && $0.message["id"] == own })?
                        .message["result"]?["versions"]?.arrayValue?.count
                {
                    let deadline = Date(timeIntervalSinceNow: 5)
                    while !ended, Date() < deadline,
                        let index = received.firstIndex(where: { $0["method"] == nil && $0["id"] == own }),
                        (received[index]["result"]?["versions"]?.arrayValue?.count ?? wanted) < wanted
                    {
                        received.remove(at: index)
                        tally.forget(own)
                        usleep(100_000)
                        try send(sent, step.sent.direction, to: server)
                        ended = collect(from: server, into: &received, tally: &tally, others: 0)
                    }
                }
            }
            if step.sent.direction == .sendRequest, let method = sent["method"]?.stringValue, let id = sent["id"] {
                context.methods[id] = method
                if method == "document/versions" { context.mapVersionIDs(recorded: step.received, live: received, id: id) }
                if method == "session/snapshot" { context.mapSnapshotToken(recorded: step.received, live: received, id: id) }
            }
            // As sent (live version ids, which the updated recording's listings hold too), root as ${ROOT}.
            outcomes.append(StepOutcome(
                sent: context.fromLiveRoot(sent), sentDirection: step.sent.direction,
                received: received.map { context.fromLiveRoot($0) }, differences: []))
        }
        // The end: what the server still writes (after exit, or once its input is closed).
        if !ended { server.closeInput() }
        if let rest = try? server.drain(timeout: timeout), !rest.isEmpty, !outcomes.isEmpty {
            outcomes[outcomes.count - 1].received += rest.flatMap { message in message.arrayValue ?? [message] }
                .map { context.fromLiveRoot($0) }
        }
        _ = try? server.waitForExit(timeout: timeout)
        compare(steps, &outcomes, context: context)
        return outcomes
    }

    private func send(_ message: JSONValue, _ direction: Recorder.Direction, to server: ServerProcess) throws {
        if direction == .sendInvalid {
            try server.sendRaw(Framing.frame(Array((message.stringValue ?? "").utf8)))
        } else {
            try server.send(message)
        }
    }

    /// How many responses with each id are awaited so far, and how many have come: as many as were
    /// recorded up to this step, and at least one per request sent with the id.
    struct ResponseTally {
        private var recorded: [JSONValue: Int] = [:]
        private var requested: [JSONValue: Int] = [:]
        private var got: [JSONValue: Int] = [:]

        mutating func expectRecorded(_ id: JSONValue) { recorded[id, default: 0] += 1 }

        mutating func expectRequested(_ id: JSONValue) { requested[id, default: 0] += 1 }

        mutating func received(_ id: JSONValue) { got[id, default: 0] += 1 }

        mutating func forget(_ id: JSONValue) { got[id, default: 0] -= 1 }

        var isSatisfied: Bool {
            recorded.allSatisfy { got[$0.key, default: 0] >= $0.value }
                && requested.allSatisfy { got[$0.key, default: 0] >= $0.value }
        }
    }

    /// Notifications the server sends when background work ends (`document/didChangeVersions`: a
    /// version written, protocol/README.md §8.21), at no fixed place among the other messages: left
    /// out of the recording and of what is received, so that the rest compares deterministically.
    static let asynchronousNotifications: Set<String> = ["document/didChangeVersions"]

    /// Takes messages until every response expected so far has come, and `others` other messages;
    /// answers whether the server's output has ended.
    private func collect(from server: ServerProcess, into received: inout [JSONValue], tally: inout ResponseTally, others: Int) -> Bool {
        var otherCount = 0
        while !tally.isSatisfied || otherCount < others {
            // Missing notifications are waited for less long than a response.
            let wait = tally.isSatisfied ? min(timeout, 2) : timeout
            let message: JSONValue
            do {
                message = try server.nextMessage(timeout: wait)
            } catch {
                return "\(error)".hasPrefix("the server closed its output")
            }
            for element in message.arrayValue ?? [message] {
                if element["id"] == nil, let method = element["method"]?.stringValue, Self.asynchronousNotifications.contains(method) {
                    continue  // at no fixed place: not compared
                }
                received.append(element)
                if element["method"] == nil {
                    tally.received(element["id"] ?? .null)
                } else {
                    otherCount += 1
                }
            }
        }
        return false
    }

    // MARK: - Substitution and normalisation

    /// The live session's side of the substitutions: ${ROOT}, version ids, the methods of requests.
    struct Context {
        let root: String
        /// Recorded version id -> live version id.
        var versionIDs: [String: String] = [:]
        /// Recorded session snapshot token -> live token (`session/snapshot`): 32 random hexadecimal
        /// digits, replaced wherever they appear in a string (an error's message names the token).
        var snapshotTokens: [String: String] = [:]
        /// The method of each request sent, by id.
        var methods: [JSONValue: String] = [:]

        /// A recorded message as it is sent now.
        func toLive(_ value: JSONValue) -> JSONValue {
            mapStrings(value) { text in
                if let live = versionIDs[text] { return live }
                return liveTokens(in: text).replacingOccurrences(of: Replay.rootPlaceholder, with: root)
            }
        }

        /// `text` with the recorded snapshot tokens in it replaced by the live ones.
        func liveTokens(in text: String) -> String {
            var text = text
            for (recorded, live) in snapshotTokens where text.contains(recorded) {
                text = text.replacingOccurrences(of: recorded, with: live)
            }
            return text
        }

        /// Pairs the token of a recorded `session/snapshot` answer with the live one's.
        mutating func mapSnapshotToken(recorded: [Record], live: [JSONValue], id: JSONValue) {
            guard
                let old = recorded.first(where: { $0.direction == .receiveResponse && $0.message["id"] == id })?
                    .message["result"]?["snapshot"]?.stringValue,
                let new = live.last(where: { $0["method"] == nil && $0["id"] == id })?["result"]?["snapshot"]?.stringValue
            else { return }
            snapshotTokens[old] = new
        }

        /// Pairs the version ids of a recorded document/versions listing with the live one's,
        /// position by position.
        mutating func mapVersionIDs(recorded: [Record], live: [JSONValue], id: JSONValue) {
            guard
                let old = recorded.first(where: { $0.direction == .receiveResponse && $0.message["id"] == id })?
                    .message["result"]?["versions"]?.arrayValue,
                let new = live.last(where: { $0["method"] == nil && $0["id"] == id })?["result"]?["versions"]?.arrayValue
            else { return }
            for (recordedVersion, liveVersion) in zip(old, new) {
                if let recordedID = recordedVersion["id"]?.stringValue, let liveID = liveVersion["id"]?.stringValue,
                    versionIDs[recordedID] == nil
                {
                    versionIDs[recordedID] = liveID
                }
            }
        }

        /// A recorded message with its version ids mapped to the live ones (${ROOT} kept).
        func recordedVersionsAsLive(_ value: JSONValue) -> JSONValue {
            guard !versionIDs.isEmpty || !snapshotTokens.isEmpty else { return value }
            return mapStrings(value) { versionIDs[$0] ?? liveTokens(in: $0) }
        }

        /// A live message with the root as ${ROOT} (version ids kept live).
        func fromLiveRoot(_ value: JSONValue) -> JSONValue {
            mapStrings(value) { $0.replacingOccurrences(of: root, with: Replay.rootPlaceholder) }
        }
    }

    /// `value` with `old` (as it is, and percent-encoded) replaced by `new` in every string.
    static func substitute(_ value: JSONValue, replacing old: String, with new: String) -> JSONValue {
        let encoded = percentEncoded(old)
        return mapStrings(value) { text in
            var text = text
            if encoded != old { text = text.replacingOccurrences(of: encoded, with: new) }
            return text.replacingOccurrences(of: old, with: new)
        }
    }

    static func percentEncoded(_ path: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~/!$&'()*+,;=:@")
        return path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    }

    /// Normalises what varies from run to run, in a message about to be compared.
    static func normalise(_ message: JSONValue) -> JSONValue {
        var value = normaliseMembers(message)
        if message["method"] == "$/logTrace", case .object(var object) = value, case .object(var params)? = object["params"],
            let text = params["message"]?.stringValue
        {
            params["message"] = .string(text.replacing(timing, with: "took <n>ms"))
            object["params"] = .object(params)
            value = .object(object)
        }
        return value
    }

    private nonisolated(unsafe) static let timing = try! Regex("took [0-9.e+-]+ms")

    private static func normaliseMembers(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            var result = JSONObject()
            for (key, member) in object {
                switch (key, member) {
                case ("modificationDate", .string), ("date", .string): result[key] = "<date>"
                case ("etag", .string), ("expectedEtag", .string): result[key] = "<etag>"
                default: result[key] = normaliseMembers(member)
                }
            }
            return .object(result)
        case .array(let elements):
            return .array(elements.map(normaliseMembers))
        default:
            return value
        }
    }

    // MARK: - Comparing

    /// Compares responses by id over the whole session (in order among those with the same id), and
    /// notifications (and server requests) in order within each step.
    private func compare(_ steps: [Step], _ outcomes: inout [StepOutcome], context: Context) {
        var unmatched: [(step: Int, message: JSONValue)] = []
        for (index, outcome) in outcomes.enumerated() {
            unmatched += outcome.received.filter { $0["method"] == nil }.map { (index, $0) }
        }
        for (index, step) in steps.enumerated() {
            var differences: [String] = []
            for record in step.received where record.direction == .receiveResponse {
                let expected = context.recordedVersionsAsLive(record.message)
                if let position = unmatched.firstIndex(where: { $0.message["id"] == expected["id"] }) {
                    let got = unmatched.remove(at: position).message
                    if let text = describe(record, expected: expected, got: got, context: context) { differences.append(text) }
                } else {
                    differences.append(describe(record, expected: expected, got: nil, context: context)!)
                }
            }
            let expectedOthers = step.received.filter { $0.direction != .receiveResponse }
            let gotOthers = outcomes[index].received.filter { $0["method"] != nil }
            for position in 0..<max(expectedOthers.count, gotOthers.count) {
                let record: Record? = position < expectedOthers.count ? expectedOthers[position] : nil
                let got: JSONValue? = position < gotOthers.count ? gotOthers[position] : Optional<JSONValue>.none
                if let record {
                    if let text = describe(record, expected: context.recordedVersionsAsLive(record.message), got: got, context: context) {
                        differences.append(text)
                    }
                } else if let got {
                    differences.append(describeUnexpected(got, after: step.sent))
                }
            }
            outcomes[index].differences = differences
        }
        for (index, got) in unmatched {
            outcomes[index].differences.append(describeUnexpected(got, after: steps[index].sent))
        }
    }

    private func label(_ message: JSONValue, _ direction: String) -> String {
        if let method = message["method"]?.stringValue {
            if let id = message["id"] { return "\(direction) \(method) (id \(id.jsonText))" }
            return "\(direction) \(method)"
        }
        return "\(direction) (id \(message["id"]?.jsonText ?? "?"))"
    }

    /// A difference between a recorded message and the live one, or `nil` when they agree.
    private func describe(_ record: Record, expected: JSONValue, got: JSONValue?, context: Context) -> String? {
        let normalisedExpected = Self.normalise(expected)
        var title = "\(file):\(record.line): \(label(record.message, record.direction.rawValue))"
        if record.direction == .receiveResponse, let method = context.methods[record.message["id"] ?? .null] {
            title += " to \(method)"
        }
        guard let got else {
            return ([title + ": expected, but nothing came", "--- expected", "+++ got"]
                + ReplayDiff.unified(expected: ReplayDiff.pretty(normalisedExpected), got: [])).joined(separator: "\n")
        }
        let normalisedGot = Self.normalise(got)
        guard normalisedExpected != normalisedGot else { return nil }
        let paths = ReplayDiff.differingPaths(normalisedExpected, normalisedGot)
        return ([title + ": differs at " + paths.joined(separator: ", "), "--- expected", "+++ got"]
            + ReplayDiff.unified(expected: ReplayDiff.pretty(normalisedExpected), got: ReplayDiff.pretty(normalisedGot)))
            .joined(separator: "\n")
    }

    private func describeUnexpected(_ got: JSONValue, after sent: Record) -> String {
        let direction = got["method"] == nil ? "receive-response" : (got["id"] == nil ? "receive-notification" : "receive-request")
        return ([
            "\(file):\(sent.line): after this record, an unexpected \(label(got, direction))", "--- expected", "+++ got",
        ] + ReplayDiff.unified(expected: [], got: ReplayDiff.pretty(Self.normalise(got)))).joined(separator: "\n")
    }

    // MARK: - Updating

    private func write(_ outcomes: [StepOutcome], root: String) throws {
        var text: [UInt8] = []
        var millis = Int64(Date().timeIntervalSince1970 * 1000)
        func record(_ direction: String, _ message: JSONValue) {
            let object: JSONObject = [
                "isLSPMessage": true, "type": .string(direction), "message": message, "timestamp": .integer(millis),
            ]
            text += JSONValue.object(object).serialized()
            text.append(UInt8(ascii: "\n"))
            millis += 1
        }
        for outcome in outcomes {
            record(outcome.sentDirection.rawValue, outcome.sent)
            for message in outcome.received {
                let direction = message["method"] == nil ? "receive-response" : (message["id"] == nil ? "receive-notification" : "receive-request")
                record(direction, message)
            }
        }
        let temporary = file + ".update-\(getpid())"
        do {
            let staged = try Descriptor.open(
                temporary, .writeOnly, options: [.create, .truncate], permissions: FilePermissions(rawValue: 0o666))
            try writeAll(text, to: staged.unowned, path: temporary)
            try staged.close()
        } catch {
            try? removeFile(temporary)
            throw FileError("cannot write \(temporary)")
        }
        do {
            try renameFile(temporary, to: file)
        } catch {
            try? removeFile(temporary)
            throw FileError("cannot replace \(file): \(String(cString: strerror(error.errno.rawValue)))")
        }
    }
}

/// Replaces every string in `value` (member names excepted) by `transform` of it.
func mapStrings(_ value: JSONValue, _ transform: (String) -> String) -> JSONValue {
    switch value {
    case .string(let text): return .string(transform(text))
    case .array(let elements): return .array(elements.map { mapStrings($0, transform) })
    case .object(let object): return .object(JSONObject(object.map { ($0.key, mapStrings($0.value, transform)) }))
    default: return value
    }
}
