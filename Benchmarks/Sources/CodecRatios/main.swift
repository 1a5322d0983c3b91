// The JSON codec per message (issue 7, point 1: "the JSON codec at most 2 times raw json-c per
// message"), measured against its floor side by side in one process.
//
//   ours:  what the server does with the message. A request: `JSONParser.parse` of the body (the
//          Swift scanner's hardening checks, json-c, the conversion into `JSONValue`),
//          `IncomingMessage` classification, the params read as `Server.editDocument` reads them
//          (`Params`: document, version, every edit's range and text as `Params.textEdits` does,
//          undo), then the response built as a `JSONValue` (`Response.success(...).json`) and
//          serialised to bytes as `MessageWriter.send` does (`serialized()`; framing not included).
//          A message the server sends: built as the server builds it (`Server.info`,
//          `Server.json(event)`, `Response.json`, `Notification.json`) and serialised.
//   floor: CodecFloor, json-c called directly on the same bytes: `json_tokener_parse_ex` (a reused
//          tokener with the module's depth and flags), `json_object_object_get_ex` for the same
//          fields (strings read in place), the same response built with `json_object_new_*` and
//          serialised with `json_object_to_json_string_length(PLAIN | NOSLASHESCAPE)`, then freed.
//
// Both sides write the same bytes (checked before timing). Each round runs ours and the floor
// alternately (which goes first turns each round), one batch of messages each; it prints µs per
// message of each side and their ratio; then the medians over rounds and the spread of the ratio.
//
//     swift build -c release --package-path Benchmarks --scratch-path Benchmarks/.build --product CodecRatios
//     Benchmarks/.build/release/CodecRatios [rounds]     (9 rounds by default)
//         [--scale F]                 messages per round times F (default 1: 200,000 of each small
//                                     message, 20,000 of the 4 KB open response, 10,000 of the
//                                     request of 100 edits)
//         [--kind NAME]               only this kind (edit, response, state, open, edit100)
//         [--phases]                  also time ours in stages for the requests (parse; + classify
//                                     and params; + response), medians of the rounds
//         [--proposed]                also time ours a second time (the change once proposed here is now the module's: a noise check)
//         [--only NAME ours|proposed|floor N]  run one side of one kind N times and stop (callgrind, perf)

import CodecFloor
import BufferWorkloads
import JSON
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Arguments

nonisolated(unsafe) var arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    let value = arguments[index + 1]
    arguments.removeSubrange(index...index + 1)
    return value
}
func flag(_ name: String) -> Bool {
    guard let index = arguments.firstIndex(of: name) else { return false }
    arguments.remove(at: index)
    return true
}

let scale = option("--scale").flatMap(Double.init) ?? 1
let onlyKindOption = option("--kind")
let phases = flag("--phases")
let proposedToo = flag("--proposed")
var only: (kind: String, side: String, count: Int)? = nil
if let index = arguments.firstIndex(of: "--only"), index + 3 < arguments.count, let count = Int(arguments[index + 3]) {
    only = (arguments[index + 1], arguments[index + 2], count)
    arguments.removeSubrange(index...index + 3)
}
let rounds = arguments.first.flatMap { Int($0) } ?? 9

// MARK: - Measuring

func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) * 1e-9
}


/// Keeps results alive so that nothing is optimised away.
nonisolated(unsafe) var sink: UInt64 = 0


func format2(_ value: Double) -> String {
    let hundredths = Int((value * 100).rounded())
    let fraction = abs(hundredths % 100)
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

func format3(_ value: Double) -> String {
    let thousandths = Int((value * 1000).rounded())
    let fraction = thousandths % 1000
    return "\(thousandths / 1000).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)"
}

/// µs with three significant digits or so.
func microseconds(_ seconds: Double) -> String {
    let us = seconds * 1e6
    if us >= 100 { return String(Int(us.rounded())) }
    if us >= 10 { let t = Int((us * 10).rounded()); return "\(t / 10).\(t % 10)" }
    return format3(us)
}

func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

// MARK: - The messages

let editRequest148 = Array(
    #"{"jsonrpc":"2.0","id":1234,"method":"document/edit","params":{"document":"d1","version":57,"edits":[{"range":{"start":{"line":12,"character":4},"end":{"line":12,"character":4}},"text":"x"}]}}"#
        .utf8)

/// A request of 100 edits, as a client sends them while the user types and pastes: short inserts,
/// deletions, a few lines, some non-ASCII, quotes and backslashes (escaped on the wire).
let editRequest100: [UInt8] = {
    let texts: [String] = [
        "x", "", "\n", "hello", "  return value;\n", "é", "\"quoted\"", "path\\to\\file", "🍐", "\t",
        "let total = items.reduce(0, +)\n", "ü", "}\n", "a", "",
    ]
    var edits: [JSONValue] = []
    for i in 0..<100 {
        let line = Int64(10 + i * 3)
        let character = Int64((i * 7) % 40)
        let width = Int64(i % 3)
        edits.append([
            "range": [
                "start": ["line": .integer(line), "character": .integer(character)],
                "end": ["line": .integer(line), "character": .integer(character + width)],
            ],
            "text": .string(texts[i % texts.count]),
        ])
    }
    let request: JSONValue = [
        "jsonrpc": "2.0", "id": 1235, "method": "document/edit",
        "params": ["document": "d1", "version": 58, "edits": .array(edits)],
    ]
    return request.serialized()
}()

/// About 4 KB of a notes file: prose, code, a URL, tabs, quotes, a backslash, some non-ASCII.
let openText: String = {
    let lines = [
        "# Shopping list",
        "",
        "- apples, pears 🍐 and plums",
        "- bread: rye or \"sourdough\" (not the sliced kind)",
        "- cheese: Gruyère, Comté, a little Roquefort",
        "\tsee https://example.org/recipes/fondue for the quantities",
        "- milk (2 L), butter, crème fraîche",
        "Paths on the old machine: C:\\Users\\me\\Documents\\lists",
        "func total(_ items: [Item]) -> Int { items.reduce(0) { $0 + $1.price } }",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
        "Straße, naïve café, 日本語のテキスト, ελληνικά.",
        "",
    ]
    var text = ""
    var index = 0
    while text.utf8.count + lines[index % lines.count].utf8.count + 1 <= 4096 {
        text += lines[index % lines.count] + "\n"
        index += 1
    }
    return text
}()

let documentHandle = String("d1")
let documentURI = String("file:///tmp/docsession-protocol-fixtures/notes.txt")

// MARK: - Ours

/// An edit as `Params.textEdits` (module Server) reads it; `TextEdit` is in TextBuffer, which this
/// package's target does not link, so the same shape is kept here.
struct Edit {
    var range: (startLine: Int, startCharacter: Int, endLine: Int, endCharacter: Int)?
    var text: String
}

let positionRange: ClosedRange<Int64> = 0...Int64(Int32.max)

/// `Params.textPosition`, `textRange` and `textEdits` of Server/Params+Documents.swift, verbatim
/// but for the result types.
extension Params {
    func position() throws(ResponseError) -> (Int, Int) {
        let line = try integer("line", in: positionRange)
        let character = try integer("character", in: positionRange)
        return (Int(line), Int(character))
    }

    func range() throws(ResponseError) -> (Int, Int, Int, Int) {
        guard let start = try optionalObject("start") else { throw .invalidParams(field: fieldPath("start"), "missing (a position is required)") }
        guard let end = try optionalObject("end") else { throw .invalidParams(field: fieldPath("end"), "missing (a position is required)") }
        let (startLine, startCharacter) = try start.position()
        let (endLine, endCharacter) = try end.position()
        return (startLine, startCharacter, endLine, endCharacter)
    }

    func edits(_ key: String) throws(ResponseError) -> [Edit] {
        guard let value = value(key) else { throw .invalidParams(field: fieldPath(key), "missing (an array of edits is required)") }
        guard case .array(let elements) = value else {
            throw .invalidParams(field: fieldPath(key), "expected an array of edits, got \(value.kindDescription)")
        }
        var edits: [Edit] = []
        edits.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            let path = "\(fieldPath(key))[\(index)]"
            guard case .object(let object) = element else {
                throw .invalidParams(field: path, "expected an edit object, got \(element.kindDescription)")
            }
            let edit = Params(object: object, path: path)
            let range = try edit.optionalObject("range").map { (range) throws(ResponseError) in try range.range() }
            edits.append(Edit(range: range, text: try edit.string("text")))
        }
        return edits
    }
}

enum Stage { case parse, read, all }

/// A document/edit request as the server handles it, up to `stage`; returns the response's bytes.
@inline(never)
func oursRequest(_ body: [UInt8], _ parser: JSONParser, upTo stage: Stage = .all, proposed: Bool = false) -> [UInt8] {
    let value: JSONValue
    do { value = try parser.parse(body) } catch { fatalError("parse: \(error)") }
    if stage == .parse { return value.objectValue == nil ? [] : [1] }
    guard case .request(let request) = IncomingMessage(value), request.method == "document/edit" else {
        fatalError("not a document/edit request")
    }
    do throws(ResponseError) {
        // Server.editDocument.
        let params = try Params(byName: request.params, method: "document/edit")
        let handle = try params.string("document")
        let version = try params.integer("version", in: 0...Int64.max)
        let edits = try params.edits("edits")
        let undo = try params.optionalObject("undo")
        let merge = try undo?.optionalBool("merge") ?? false
        let label = try undo?.optionalString("label")
        sink &+= UInt64(handle.utf8.count + edits.count + (merge ? 1 : 0) + (label?.utf8.count ?? 0))
        if let first = edits.first { sink &+= UInt64(first.text.utf8.count + (first.range?.endCharacter ?? 0)) }
        if stage == .read { return [] }
        // The answer, as Connection hands it to MessageWriter.send(_: Response).
        let response = Response.success(request.id, ["version": .integer(version + 1)])
        return proposed ? response.json.serializedProposed() : response.json.serialized()
    } catch {
        fatalError("params: \(error)")
    }
}

@inline(never)
func oursEditResponse(proposed: Bool = false) -> [UInt8] {
    let message = Response.success(.integer(1234), ["version": .integer(58)]).json
    return proposed ? message.serializedProposed() : message.serialized()
}

/// `Server.json(event)` for an edit that took the document away from its clean point, sent as
/// `writer.send(Notification(method: "document/stateChanged", params: ...))` does.
@inline(never)
func oursStateChanged(proposed: Bool = false) -> [UInt8] {
    let state: [String] = []
    let params: JSONObject = [
        "document": .string(documentHandle), "uri": .string(documentURI),
        "version": .integer(58), "state": .array(state.map { .string($0) }),
        "previousState": .array(state.map { .string($0) }), "reason": .string("edited"),
        "hasUnsavedChanges": .bool(true),
    ]
    let message = Notification(method: "document/stateChanged", params: .object(params)).json
    return proposed ? message.serializedProposed() : message.serialized()
}

/// `Server.info(document, includeText: true)`, answered to document/open.
@inline(never)
func oursOpenResponse(proposed: Bool = false) -> [UInt8] {
    let state: [String] = []
    var info: JSONObject = [
        "document": .string(documentHandle),
        "uri": .string(documentURI),
        "version": .integer(1),
    ]
    info["text"] = .string(openText)
    info["state"] = .array(state.map { .string($0) })
    info["fileType"] = .string("plaintext")
    info["displayName"] = .string("notes.txt")
    info["modificationDate"] = .string("2026-01-02T03:04:05.678Z")
    info["encoding"] = .string("utf-8")
    info["byteOrderMark"] = .bool(false)
    info["lineEnding"] = .string("lf")
    info["hasUnsavedChanges"] = .bool(false)
    let message = Response.success(.integer(7), .object(info)).json
    return proposed ? message.serializedProposed() : message.serialized()
}

// MARK: - The floor

guard let floor = codecfloor_new(64) else { fatalError("json-c could not allocate a tokener") }

func floorRun(_ kind: String, _ count: Int, output: UnsafeMutablePointer<codecfloor_output>?) -> UInt64 {
    switch kind {
    case "edit", "edit100":
        let body = kind == "edit" ? editRequest148 : editRequest100
        return (body + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                codecfloor_edit_requests(floor, chars.baseAddress, body.count, count, output)
            }
        }
    case "response":
        return codecfloor_edit_responses(1234, 58, count, output)
    case "state":
        return codecfloor_state_changed(documentHandle, documentURI, 58, "edited", count, output)
    case "open":
        var text = openText
        return text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                var info = codecfloor_open_info(
                    id: 7, document: nil, uri: nil, version: 1, text: chars.baseAddress, text_length: chars.count,
                    file_type: nil, display_name: nil, modification_date: nil, encoding: nil, line_ending: nil)
                return documentHandle.withCString { document in
                    documentURI.withCString { uri in
                        info.document = document
                        info.uri = uri
                        return "plaintext".withCString { fileType in
                            "notes.txt".withCString { displayName in
                                "2026-01-02T03:04:05.678Z".withCString { date in
                                    "utf-8".withCString { encoding in
                                        "lf".withCString { lineEnding in
                                            info.file_type = fileType
                                            info.display_name = displayName
                                            info.modification_date = date
                                            info.encoding = encoding
                                            info.line_ending = lineEnding
                                            return codecfloor_open_responses(&info, count, output)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    default:
        fatalError("unknown kind \(kind)")
    }
}

/// The floor's serialised output of one message.
func floorBytes(_ kind: String) -> [UInt8] {
    var buffer = [CChar](repeating: 0, count: 1 << 16)
    return buffer.withUnsafeMutableBufferPointer { chars in
        var output = codecfloor_output(out: chars.baseAddress, capacity: chars.count, length: 0)
        guard floorRun(kind, 1, output: &output) != 0 else { fatalError("the floor refused \(kind)") }
        return Array(UnsafeRawBufferPointer(start: chars.baseAddress, count: output.length))
    }
}

// MARK: - The kinds

nonisolated(unsafe) let parser = JSONParser()

struct Kind {
    var name: String
    var label: String
    var messageBytes: Int
    var count: Int
    var ours: () -> [UInt8]
    var isRequest: Bool
    var proposed: () -> [UInt8]
}

let kinds: [Kind] = [
    Kind(name: "edit", label: "edit request, 1 edit", messageBytes: editRequest148.count, count: 200_000,
         ours: { oursRequest(editRequest148, parser) }, isRequest: true,
         proposed: { oursRequest(editRequest148, parser, proposed: true) }),
    Kind(name: "response", label: "edit response", messageBytes: oursEditResponse().count, count: 200_000,
         ours: { oursEditResponse() }, isRequest: false, proposed: { oursEditResponse(proposed: true) }),
    Kind(name: "state", label: "stateChanged notification", messageBytes: oursStateChanged().count, count: 200_000,
         ours: { oursStateChanged() }, isRequest: false, proposed: { oursStateChanged(proposed: true) }),
    Kind(name: "open", label: "open response, 4 KB text", messageBytes: oursOpenResponse().count, count: 20_000,
         ours: { oursOpenResponse() }, isRequest: false, proposed: { oursOpenResponse(proposed: true) }),
    Kind(name: "edit100", label: "edit request, 100 edits", messageBytes: editRequest100.count, count: 10_000,
         ours: { oursRequest(editRequest100, parser) }, isRequest: true,
         proposed: { oursRequest(editRequest100, parser, proposed: true) }),
].filter { onlyKindOption == nil || $0.name == onlyKindOption || $0.name == only?.kind }

@inline(never)
func runOurs(_ kind: Kind, _ count: Int, proposed: Bool = false) -> Double {
    let body = proposed ? kind.proposed : kind.ours
    let start = now()
    var total: UInt64 = 0
    for _ in 0..<count {
        let bytes = body()
        total &+= UInt64(bytes.count)
    }
    let elapsed = now() - start
    sink &+= total
    return elapsed
}

@inline(never)
func runOursStage(_ body: [UInt8], _ stage: Stage, _ count: Int) -> Double {
    let start = now()
    var total: UInt64 = 0
    for _ in 0..<count { total &+= UInt64(oursRequest(body, parser, upTo: stage).count) }
    let elapsed = now() - start
    sink &+= total
    return elapsed
}

@inline(never)
func runFloor(_ kind: Kind, _ count: Int) -> Double {
    let start = now()
    let sum = floorRun(kind.name, count, output: nil)
    let elapsed = now() - start
    guard sum != 0 else { fatalError("the floor refused \(kind.name)") }
    sink &+= sum
    return elapsed
}

// The check: both sides write the same bytes for each kind.
for kind in kinds {
    let ours = kind.ours()
    let theirs = floorBytes(kind.name)
    guard ours == theirs, kind.proposed() == theirs else {
        print("MISMATCH for \(kind.name):\n ours:  \(String(decoding: ours, as: UTF8.self).prefix(400))\n floor: \(String(decoding: theirs, as: UTF8.self).prefix(400))")
        exit(1)
    }
}

// MARK: - One side alone, for a profiler

if let only {
    guard let kind = kinds.first(where: { $0.name == only.kind }) else { fatalError("unknown kind \(only.kind)") }
    let elapsed = only.side == "floor" ? runFloor(kind, only.count) : runOurs(kind, only.count, proposed: only.side == "proposed")
    print("\(only.side) \(kind.name): \(only.count) messages, \(microseconds(elapsed / Double(only.count))) µs each (\(sink % 10))")
    exit(0)
}

// MARK: - Rounds

print("CodecRatios: \(rounds) rounds, load average \(loadAverage())")
print("message sizes: " + kinds.map { "\($0.name) \($0.messageBytes) B" }.joined(separator: ", "))
print("")

struct Outcome {
    var kind: Kind
    var ours: [Double] = []
    var floor: [Double] = []
    var ratios: [Double] = []
    var proposed: [Double] = []
    var proposedRatios: [Double] = []
    var stages: [Stage: [Double]] = [:]
}

var outcomes = kinds.map { Outcome(kind: $0) }
// Warm-up: a tenth of a round of each.
for kind in kinds {
    _ = runOurs(kind, max(1, Int(Double(kind.count) * scale) / 10))
    _ = runFloor(kind, max(1, Int(Double(kind.count) * scale) / 10))
    if proposedToo { _ = runOurs(kind, max(1, Int(Double(kind.count) * scale) / 10), proposed: true) }
}

for round in 0..<rounds {
    var line = "round \(round + 1):"
    for index in outcomes.indices {
        let kind = outcomes[index].kind
        let count = max(1, Int(Double(kind.count) * scale))
        let ours: Double
        let floorTime: Double
        if round % 2 == 0 {
            ours = runOurs(kind, count) / Double(count)
            floorTime = runFloor(kind, count) / Double(count)
        } else {
            floorTime = runFloor(kind, count) / Double(count)
            ours = runOurs(kind, count) / Double(count)
        }
        outcomes[index].ours.append(ours)
        outcomes[index].floor.append(floorTime)
        outcomes[index].ratios.append(ours / floorTime)
        if proposedToo {
            let time = runOurs(kind, count, proposed: true) / Double(count)
            outcomes[index].proposed.append(time)
            outcomes[index].proposedRatios.append(time / floorTime)
        }
        line += "  \(kind.name) \(microseconds(ours))/\(microseconds(floorTime)) µs = \(format2(ours / floorTime))"
        if phases, kind.isRequest {
            let body = kind.name == "edit" ? editRequest148 : editRequest100
            for stage in [Stage.parse, .read] {
                outcomes[index].stages[stage, default: []].append(runOursStage(body, stage, count) / Double(count))
            }
        }
    }
    print(line)
}

print("")
print("load average \(loadAverage())")
print("")
print("| message | bytes | ours µs | floor µs | ours / floor (goal <= 2): median | min - max of rounds |")
print("|---|---|---|---|---|---|")
for outcome in outcomes {
    let ratios = outcome.ratios.sorted()
    print("| \(outcome.kind.label) | \(outcome.kind.messageBytes) | \(microseconds(median(outcome.ours))) | \(microseconds(median(outcome.floor))) | **\(format2(median(outcome.ratios)))** | \(format2(ratios.first!)) - \(format2(ratios.last!)) |")
}
for outcome in outcomes {
    tableRow("JSON codec / raw json-c: \(outcome.kind.label)", outcome.ratios, goal: "<= 2", format: "%.2f")
}
if proposedToo {
    print("")
    print("| message | proposed serialiser µs | proposed / floor: median | min - max | ours / proposed |")
    print("|---|---|---|---|---|")
    for outcome in outcomes {
        let ratios = outcome.proposedRatios.sorted()
        print("| \(outcome.kind.label) | \(microseconds(median(outcome.proposed))) | **\(format2(median(outcome.proposedRatios)))** | \(format2(ratios.first!)) - \(format2(ratios.last!)) | \(format2(median(outcome.ours) / median(outcome.proposed))) |")
    }
}
if phases {
    print("")
    print("ours in stages (medians, µs): parse / + classify and params / + response built and serialised")
    for outcome in outcomes where outcome.kind.isRequest {
        print("  \(outcome.kind.label): \(microseconds(median(outcome.stages[.parse]!))) / \(microseconds(median(outcome.stages[.read]!))) / \(microseconds(median(outcome.ours)))")
    }
}
if sink == 42 { print("") }

extension JSONValue {
    /// The serialiser change this benchmark proposed (member names to json-c through `withCString`)
    /// is now the JSON module's own code, so `--proposed` times the module against itself: a check
    /// of the noise between two identical sides.
    func serializedProposed() -> [UInt8] { serialized() }
}
