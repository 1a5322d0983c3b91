// A libFuzzer target over DocSession's framing, JSON and dispatch.
//
// Each input is used twice:
//
// 1. As a byte stream from a client: fed to an `InboundDecoder` (the reader side of the server) in
//    slices whose sizes are drawn from a generator seeded with a hash of the input (so every run of
//    an input is the same), and every `Inbound` it produces is dispatched through
//    `Connection.dispatch(_:to:)` into a fresh `Server` whose `MessageWriter` captures its output in
//    memory.
// 2. As one bare JSON body: `InboundDecoder.decodeBody`, then dispatch, into another fresh server.
//
// Properties checked (a violation traps, so libFuzzer saves the input as a crash):
//
// - no crash, no sanitizer report, no hang (libFuzzer's own checks);
// - framing does not depend on slicing: the events of the sliced feed equal those of the whole input
//   fed at once, of reads ending after every CR and, for small inputs, of a byte at a time, as
//   FrameParser's documentation promises;
// - every message the server writes is exactly one frame, re-frames to the same bytes, parses with
//   the strict `JSONParser`, and is canonical (serialising the parsed value gives the same bytes);
// - every output message is a well-formed JSON-RPC 2.0 response (or a `$/logTrace` notification);
// - the responses are exactly those an independent reading of JSON-RPC 2.0 asks for, in order: one
//   per request with a valid id (with that id), one -32600 per invalid message (with its id, or
//   null), one -32700 per framing fault or unparseable body, one -32600 for an empty batch, one array
//   for a batch with at least one request or invalid element, nothing for notifications, responses
//   and all-notification batches; so at most one response per request and none for notifications;
// - the server stops at `exit` exactly when the input holds an exit notification;
// - no request stays registered as pending once the input has been dispatched;
// - the serialiser round-trips what the parser accepts: parse(serialize(v)) == v, and serialising
//   again gives the same bytes.

import CFuzzerDriver
import Dispatch
import FileStore
import JSON
import JSONRPC
import Logging
import Server
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Entry points

/// The executable's entry point: SwiftPM links an executable target with `main` aliased to
/// `<module>_main`, so this function owns the process and hands it to libFuzzer's driver, which
/// parses libFuzzer's usual arguments (corpus directories, -max_total_time=..., a crash file to rerun).
@_cdecl("DocSessionFuzz_main")
public func docSessionFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input: [UInt8] = if let data, size > 0 { Array(UnsafeBufferPointer(start: data, count: size)) } else { [] }
    var random = InputRandom(seed: input)
    let stream = StreamPass(input: input, random: &random)
    Sandbox.run { stream.run() }
    let bare = BarePass(input: input, preInitialize: random.below(2) == 0, predecode: random.below(2) == 0)
    Sandbox.run { bare.run() }
    return 0
}

// MARK: - The file system the server may touch

/// The document and workspace methods open, create, move, delete and copy files named by `file://`
/// URIs. So that fuzzing neither litters the machine (it runs as root) nor blocks on a device or a
/// FIFO, the server's only sandbox root is a private directory, and every `uri`, `to` and `from`
/// member of a request's or notification's params that is a `file:` URI is rewritten, before
/// dispatch, to a file in it (`directory` and `root` members to the directory itself): the URI's last path segment, with bytes other than letters,
/// digits, `.` and `-` replaced by `_`, behind `f-` (so `file:///any/where/a.txt` becomes
/// `file://<sandbox>/f-a.txt`); an authority is kept (sanitised the same way), so that
/// `file://host/a.txt` is still refused for its host. Other URIs are left alone, for the server to
/// refuse. The directory holds
/// a few fixtures and is emptied of anything else after an input that touched it. Ids and
/// everything the oracle reads are unchanged.
enum Sandbox {
    /// The fixtures, by sanitised name: what `document/open` can find.
    static let fixtures: [(name: String, bytes: [UInt8])] = [
        ("f-a.txt", Array("line one\nline two\r\nline three é€😀\n".utf8)),
        ("f-empty", []),
        ("f-utf16.txt", [0xFF, 0xFE, 0x68, 0x00, 0x69, 0x00, 0x0A, 0x00]),
        ("f-binary", [0x00, 0x01, 0x02, 0xFF, 0xC0, 0xAF]),
        ("f-latin1.txt", [0x63, 0x61, 0x66, 0xE9, 0x0A]),
    ]

    nonisolated(unsafe) static var touched = false

    /// The private directory, made (with its fixtures) on first use: $DOCSESSION_FUZZ_SANDBOX
    /// (run.sh sets it inside Fuzz/.build and removes it afterwards), else a new directory in /tmp
    /// that an exit handler removes when libFuzzer exits normally.
    static let directory: String = {
        if let given = getenv("DOCSESSION_FUZZ_SANDBOX") {
            let path = String(cString: given)
            mkdir(path, 0o700)
            empty(path, keepFixtures: false)
            for fixture in fixtures { write(fixture.bytes, to: path + "/" + fixture.name) }
            return path
        }
        var template = Array("/tmp/docsession-fuzz-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fatalError("mkdtemp failed: errno \(errno)")
        }
        let path = String(cString: made)
        sandboxPathForExit = strdup(path)
        atexit {
            if let path = sandboxPathForExit {
                Sandbox.empty(String(cString: path), keepFixtures: false)
                rmdir(path)
            }
        }
        for fixture in fixtures { write(fixture.bytes, to: path + "/" + fixture.name) }
        return path
    }()

    /// Runs one pass; afterwards, if the pass touched the sandbox, checks that no file descriptor
    /// on a file of the sandbox was left open, and removes what the pass created.
    ///
    /// "Left open" means still open 500 ms after the pass: a deferred reply's work holds the
    /// descriptors pinned by its path checks (sandbox roots) until Swift releases the finished
    /// task's closure, which can happen just after the task's value was handed to the pass.
    static func run(_ pass: () -> Void) {
        touched = false
        pass()
        guard touched else { return }
        var open = descriptorsInSandbox()
        var waited = 0
        while !open.isEmpty, waited < 500 {
            usleep(1000)
            waited += 1
            open = descriptorsInSandbox()
        }
        if !open.isEmpty {
            violated("no file descriptor stays open on a document once its server is gone", open.joined(separator: "\n"))
        }
        empty(directory, keepFixtures: true)
    }

    static func confine(_ item: Inbound) -> Inbound {
        switch item {
        case .message(let message): return .message(confine(message))
        case .batch(let messages): return .batch(messages.map(confine))
        case .failure: return item
        }
    }

    static func confine(_ message: IncomingMessage) -> IncomingMessage {
        switch message {
        case .request(var request):
            // Reassigned only when a member was rewritten: a request whose params the server's
            // predecoder read keeps them predecoded (setting `params` drops the predecoded ones).
            let params = request.params
            let confined = confine(params: params)
            if confined != params { request.params = confined }
            return .request(request)
        case .notification(var notification):
            notification.params = confine(params: notification.params)
            return .notification(notification)
        default:
            return message
        }
    }

    /// The params members that name files (`uri`, and the workspace's `to` and `from`) and
    /// directories (`directory`, `root`).
    static let fileMembers = ["uri", "to", "from", "destination"]
    static let directoryMembers = ["directory", "root"]

    static func confine(params: JSONValue?) -> JSONValue? {
        guard case .object(var object)? = params else { return params }
        for key in fileMembers + directoryMembers {
            guard case .string(let uri)? = object[key], uri.utf8.count >= 5,
                uri.utf8.prefix(5).map({ $0 | 0x20 }) == Array("file:".utf8)
            else { continue }
            let rest = Array(uri.utf8.dropFirst(5))
            // An authority (`file://host/...`) is kept, sanitised, so that the server still refuses
            // hosts it does not serve.
            var authority = ""
            if rest.starts(with: Array("//".utf8)) {
                let end = rest[2...].firstIndex(of: UInt8(ascii: "/")) ?? rest.count
                authority = "//" + sanitised(rest[2..<end], allowingUnderscore: false)
            }
            touched = true
            if directoryMembers.contains(key) {
                // A directory is the sandbox itself (queries, imports and named creation there).
                object[key] = .string("file:" + authority + directory)
            } else {
                let segment = rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last ?? []
                object[key] = .string("file:" + authority + directory + "/f-" + sanitised(segment, allowingUnderscore: true))
            }
        }
        return .object(object)
    }

    /// Letters, digits, `.` and `-` (and `_`) as they are, anything else as `_`; at most 64 bytes.
    static func sanitised(_ bytes: some Collection<UInt8>, allowingUnderscore: Bool) -> String {
        var text = ""
        for byte in bytes.prefix(64) {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
                text.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                text += "_"
            }
        }
        return text
    }

    /// Removes every entry of `path` but the fixtures (and those too unless `keepFixtures`).
    static func empty(_ path: String, keepFixtures: Bool) {
        guard let directory = opendir(path) else { return }
        defer { closedir(directory) }
        let keep = keepFixtures ? Set(fixtures.map(\.name)) : []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." || keep.contains(name) { continue }
            let full = path + "/" + name
            if unlink(full) != 0 { rmdir(full) }
        }
    }

    static func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fatalError("cannot write the fixture \(path): errno \(errno)") }
        _ = FileDescriptorIO.writeAll(fd, bytes)
        close(fd)
    }

    /// The descriptors open on a file of the sandbox, as "fd -> path".
    static func descriptorsInSandbox() -> [String] {
        guard let descriptors = opendir("/proc/self/fd") else { return [] }
        defer { closedir(descriptors) }
        var found: [String] = []
        var target = [CChar](repeating: 0, count: 4096)
        while let entry = readdir(descriptors) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            guard name.first?.isNumber == true else { continue }
            let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
            guard length > 0 else { continue }
            let path = String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if path.hasPrefix(directory + "/") { found.append("fd \(name) -> \(path)") }
        }
        return found
    }
}

/// The sandbox's path for the exit handler, which cannot capture.
nonisolated(unsafe) var sandboxPathForExit: UnsafeMutablePointer<CChar>? = nil

// MARK: - Reporting

/// Reports a broken property and traps, so that libFuzzer keeps the input as a crash.
func violated(_ property: String, _ detail: @autoclosure () -> String) -> Never {
    let text = "\n==== DocSessionFuzz: PROPERTY VIOLATED: \(property)\n\(detail())\n"
    _ = FileDescriptorIO.writeAll(2, Array(text.utf8))
    fatalError("property violated: \(property)")
}

/// Bytes for a report: printable ASCII as is, everything else escaped; long texts shortened.
func show(_ bytes: some Collection<UInt8>, limit: Int = 600) -> String {
    var text = "\(bytes.count) bytes: \""
    for byte in bytes.prefix(limit) {
        switch byte {
        case 0x5C: text += "\\\\"
        case 0x22: text += "\\\""
        case 0x0A: text += "\\n"
        case 0x0D: text += "\\r"
        case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
        default: text += "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }
    }
    return text + (bytes.count > limit ? "\"..." : "\"")
}

// MARK: - Deterministic randomness derived from the input

/// SplitMix64 seeded with the FNV-1a hash of the input: the slicing and the modes of a run are a
/// function of the input alone, so every crash reproduces.
struct InputRandom {
    private var state: UInt64

    init(seed bytes: [UInt8]) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        state = hash
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in 0..<bound.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// The input cut into consecutive slices of sizes chosen by one of several styles.
    mutating func slices(of input: [UInt8]) -> [ArraySlice<UInt8>] {
        var style = below(5)
        // Reads of a byte or a few cost a call each: keep them to inputs where that is cheap.
        if style == 1, input.count > 1 << 14 { style = 2 }
        if style == 2, input.count > 1 << 16 { style = 4 }
        var result: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset < input.count {
            let size: Int
            switch style {
            case 0: size = input.count
            case 1: size = 1
            case 2: size = 1 + below(8)
            case 3: size = 1 + below(512)
            default:
                switch below(4) {
                case 0: size = 1
                case 1: size = 1 + below(16)
                case 2: size = 1 + below(4096)
                default: size = 1 + below(1 << 16)
                }
            }
            let end = min(input.count, offset + size)
            result.append(input[offset..<end])
            offset = end
        }
        return result
    }
}

// MARK: - A server whose output is captured

/// The framed messages a `MessageWriter` wrote, one element per `send`.
final class OutputLog: Sendable {
    private let chunks = Mutex<[[UInt8]]>([])
    func append(_ chunk: [UInt8]) { chunks.withLock { $0.append(chunk) } }
    func take() -> [[UInt8]] { chunks.withLock { chunks in defer { chunks = [] }; return chunks } }
}

/// Evaluates every log message (so their interpolations run, at every level) and discards it.
struct EvaluatingLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        _ = event.message.description.utf8.count
    }
}

/// A real `Server` behind a real `Connection` (never run: its reader is not started), with the
/// writer's output captured. Dispatch is driven from the fuzzer's thread through a semaphore.
final class Session: @unchecked Sendable {
    let output = OutputLog()
    let connection: Connection
    let server: Server
    /// Whether dispatch stopped because the server handled `exit`, as `Connection.run` does.
    private(set) var exited = false

    init(maxMessageSize: Int, preInitialize: Bool) {
        let output = output
        let writer = MessageWriter(sink: { bytes in
            output.append(bytes)
            return true
        })
        let logger = Logger(label: "fuzz", factory: { _ in EvaluatingLogHandler() })
        connection = Connection(input: -1, writer: writer, maxMessageSize: maxMessageSize, logger: logger)
        // Files unwatched: the target is the protocol layer; a watcher thread and an inotify
        // descriptor per pass would slow every input down and run on after it (and each open
        // document's locator holds a descriptor on its file while the server lives).
        // The sandbox is also the server's only root: whatever a path member holds after the
        // rewrite above (or in a member it does not know), the server itself refuses anything
        // outside, and the roots' resolution is fuzzed with the rest.
        let roots: SandboxRoots
        do throws(FileSystemError) {
            roots = try SandboxRoots([Sandbox.directory])
        } catch {
            fatalError("the fuzzing sandbox cannot be a root: \(error.message)")
        }
        server = Server(
            writer: writer, logger: logger,
            configuration: Server.Configuration(maxMessageSize: maxMessageSize, watchFiles: false, roots: roots))
        if preInitialize {
            // So that the input reaches the method table past the lifecycle gate at once.
            let request = Request(id: .string("fuzz-preinitialize"), method: "initialize")
            dispatch([.message(.request(request))])
            let chunks = output.take()
            // The server is an actor on the loop's thread: its lifecycle is read from the answer.
            guard chunks.count == 1, String(decoding: chunks[0], as: UTF8.self).contains(#""result":{"serverInfo""#) else {
                violated("a bare initialize succeeds", chunks.map { show($0) }.joined(separator: "\n"))
            }
        }
    }

    /// Dispatches `items` in order, stopping after the item that made the server handle `exit`.
    ///
    /// `Task.immediate` runs the task on this thread until it first suspends. The server is an actor
    /// on the loop's thread (its store's executor), so each request and notification hops there and
    /// back; the semaphore waits for the run to end, so every allocation of the run is still freed
    /// before the next input (otherwise libFuzzer sees more mallocs than frees and runs a full
    /// LeakSanitizer scan after every input).
    func dispatch(_ items: [Inbound]) {
        guard !exited, !items.isEmpty else { return }
        let done = DispatchSemaphore(value: 0)
        Task.immediate {
            for item in items.map(Sandbox.confine) {
                // A reply deferred by its handler (`Reply.later`) is awaited in place, so that the
                // output is in arrival order and deterministic; the server's real loop goes on with
                // the next item meanwhile.
                if let deferred = await self.connection.dispatch(item, to: self.server) { await deferred.value }
                if self.server.exitStatus != nil {
                    self.exited = true
                    break
                }
            }
            done.signal()
        }
        done.wait()
    }
}

// MARK: - What JSON-RPC 2.0 asks for (the oracle)

/// One message the server must write in answer to the input.
enum Expected: CustomStringConvertible {
    /// One response with this id; with this error code when `code` is set.
    case single(Answer)
    /// One array of responses, in this order.
    case batch([Answer])

    struct Answer: CustomStringConvertible {
        var id: JSONValue
        /// The error code required, or nil when any result or error will do (a request).
        var code: Int64?
        var description: String { "id \(id.jsonText)" + (code.map { " error \($0)" } ?? " (any outcome)") }
    }

    var description: String {
        switch self {
        case .single(let answer): return "response \(answer)"
        case .batch(let answers): return "batch [" + answers.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// The strict parser of the harness (one per process; the harness is single-threaded).
nonisolated(unsafe) let harnessParser = JSONParser()

enum Oracle {
    enum Classified {
        /// Must be answered by one response with this id (and this code, if set).
        case answer(Expected.Answer)
        /// Must not be answered; `exit` tells whether it is the exit notification.
        case silent(exit: Bool)
    }

    /// What one framed body (or the bare input) must produce, and whether it holds an exit
    /// notification (after which the server stops).
    static func expectations(forBody body: [UInt8]) -> (expected: [Expected], exits: Bool) {
        let value: JSONValue
        do {
            value = try harnessParser.parse(body)
        } catch {
            return ([.single(.init(id: .null, code: -32700))], false)
        }
        if case .array(let elements) = value {
            if elements.isEmpty { return ([.single(.init(id: .null, code: -32600))], false) }
            var answers: [Expected.Answer] = []
            var exits = false
            for element in elements {
                switch classify(element) {
                case .answer(let answer): answers.append(answer)
                case .silent(let exit): exits = exit
                }
                // Nothing after exit is processed, inside a batch as outside one.
                if exits { break }
            }
            return (answers.isEmpty ? [] : [.batch(answers)], exits)
        }
        switch classify(value) {
        case .answer(let answer): return ([.single(answer)], false)
        case .silent(let exit): return ([], exit)
        }
    }

    /// JSON-RPC 2.0 section 4 and 5, read independently of `IncomingMessage`.
    static func classify(_ value: JSONValue) -> Classified {
        guard case .object(let object) = value else { return .answer(.init(id: .null, code: -32600)) }
        let idMember = object["id"]
        var id = JSONValue.null
        if let idMember {
            switch idMember {
            case .string, .integer, .double, .null: id = idMember
            default: return .answer(.init(id: .null, code: -32600))
            }
        }
        guard object["jsonrpc"] == .string("2.0") else { return .answer(.init(id: id, code: -32600)) }
        if let methodMember = object["method"] {
            guard case .string(let method) = methodMember else { return .answer(.init(id: id, code: -32600)) }
            switch object["params"] {
            case nil, .null?, .object?, .array?: break
            default: return .answer(.init(id: id, code: -32600))
            }
            if idMember == nil { return .silent(exit: method == "exit") }
            return .answer(.init(id: id, code: nil))
        }
        // No method: a response to a request of the server's, which is never answered, if it has
        // an id and exactly one of result and error, the error being {code: integer, message: string}.
        if idMember != nil, (object["result"] == nil) != (object["error"] == nil) {
            if object["result"] != nil { return .silent(exit: false) }
            if let error = object["error"]?.objectValue, error["code"]?.integerValue != nil,
                error["message"]?.stringValue != nil
            {
                return .silent(exit: false)
            }
        }
        return .answer(.init(id: id, code: -32600))
    }
}

// MARK: - Checks on what the server wrote

enum OutputCheck {
    /// Checks every written message and matches the responses against `expected`, in order.
    static func check(_ chunks: [[UInt8]], against expected: [Expected], input: @autoclosure () -> String) {
        var remaining = expected[...]
        func context() -> String {
            "input: \(input())\nexpected: \(expected.map(\.description))\nwritten:\n"
                + chunks.map { "  " + show($0, limit: 300) }.joined(separator: "\n")
        }
        for chunk in chunks {
            let value = parseFrame(chunk, context: context)
            switch value {
            case .object(let object) where object["method"] != nil:
                checkNotification(object, context: context)
            case .object(let object):
                let answer = checkResponse(object, context: context)
                guard case .single(let wanted)? = remaining.popFirst() else {
                    violated("at most one response per request; none for notifications", context())
                }
                match(answer, wanted, context: context)
            case .array(let elements):
                guard case .batch(let wanted)? = remaining.popFirst() else {
                    violated("a batch is answered by one array only when it holds requests", context())
                }
                guard elements.count == wanted.count else {
                    violated("a batch's answer has one response per request or invalid element", context())
                }
                for (element, want) in zip(elements, wanted) {
                    guard case .object(let object) = element, object["method"] == nil else {
                        violated("a batch's answer holds responses only", context())
                    }
                    match(checkResponse(object, context: context), want, context: context)
                }
            default:
                violated("the server writes objects and arrays only", context())
            }
        }
        if !remaining.isEmpty {
            violated("every request with a valid id gets exactly one response", context())
        }
    }

    /// One written chunk: exactly one frame that re-frames to itself, with a strictly parseable,
    /// canonical body that round-trips.
    static func parseFrame(_ chunk: [UInt8], context: () -> String) -> JSONValue {
        var framer = FrameParser(maxMessageSize: Int.max)
        let events = framer.feed(chunk)
        guard events.count == 1, case .message(let body) = events[0], framer.isAtMessageBoundary else {
            violated("every write is exactly one frame", "events \(events)\n" + context())
        }
        guard Framing.frame(body) == chunk else {
            violated("every written frame re-frames to the same bytes", context())
        }
        let value: JSONValue
        do {
            value = try harnessParser.parse(body)
        } catch {
            violated("every written message parses strictly", "\(error)\n" + context())
        }
        guard value.serialized() == body else {
            violated("every written message is canonical (serialize(parse(body)) == body)", context())
        }
        RoundTrip.check(body)
        return value
    }

    static func checkNotification(_ object: JSONObject, context: () -> String) {
        if let id = object["id"] {
            // The LSP mode's own requests (protocol/README.md §12.3): ids of their own, `ds-N`.
            guard object["jsonrpc"] == .string("2.0"), let method = object["method"]?.stringValue,
                Server.serverRequests.contains(method), case .string(let text) = id, text.hasPrefix("ds-")
            else {
                violated("a request the server writes is well-formed, one it declares, with an id of its own", context())
            }
            return
        }
        guard object["jsonrpc"] == .string("2.0"),
            let method = object["method"]?.stringValue, Server.serverNotifications.contains(method)
        else {
            violated("a notification the server writes is well-formed and one it declares", context())
        }
    }

    /// Checks the shape of a response; answers its id and error code (nil for a result).
    static func checkResponse(_ object: JSONObject, context: () -> String) -> Expected.Answer {
        let allowed: Set<String> = ["jsonrpc", "id", "result", "error"]
        guard object["jsonrpc"] == .string("2.0"), let id = object["id"],
            object.keys.allSatisfy(allowed.contains), (object["result"] == nil) != (object["error"] == nil)
        else {
            violated("a response has jsonrpc 2.0, an id and exactly one of result and error", context())
        }
        switch id {
        case .string, .integer, .double, .null: break
        default: violated("a response id is a string, a number or null", context())
        }
        guard let error = object["error"] else { return .init(id: id, code: nil) }
        let allowedInError: Set<String> = ["code", "message", "data"]
        guard case .object(let errorObject) = error, let code = errorObject["code"]?.integerValue,
            errorObject["message"]?.stringValue != nil, errorObject.keys.allSatisfy(allowedInError.contains)
        else {
            violated("an error has an integer code and a string message", context())
        }
        return .init(id: id, code: code)
    }

    static func match(_ got: Expected.Answer, _ wanted: Expected.Answer, context: () -> String) {
        guard got.id == wanted.id else {
            violated("responses come in arrival order, each with its request's id", context())
        }
        if let code = wanted.code, got.code != code {
            violated("the error code is the one JSON-RPC 2.0 prescribes (\(code))", context())
        }
    }
}

// MARK: - The serialiser round-trips what the parser accepts

/// One serialiser for the whole run, as the server's writer has one for its life.
nonisolated(unsafe) let keptTreeSerializer = ShapeCachedSerializer()

enum RoundTrip {
    static func check(_ text: [UInt8]) {
        guard let value = try? harnessParser.parse(text) else { return }
        let serialized = value.serialized()
        let again: JSONValue
        do {
            again = try harnessParser.parse(serialized)
        } catch {
            violated("what the serialiser writes parses", "\(error)\nparsed: \(show(text))\nserialized: \(show(serialized))")
        }
        guard again == value else {
            violated("parse(serialize(v)) == v", "parsed: \(show(text))\nserialized: \(show(serialized))")
        }
        let twice = again.serialized()
        guard twice == serialized else {
            violated(
                "serialising is a fixpoint", "serialized: \(show(serialized))\nserialized again: \(show(twice))")
        }
        // The writer's kept-tree serialiser writes the same text, whether it builds a tree for the
        // value or reuses the last one (kept across inputs; the second call always reuses it).
        if ShapeCachedSerializer.accepts(value) {
            for _ in 0..<2 where keptTreeSerializer.serialized(value) != serialized {
                violated("the kept-tree serialiser writes what serialized() writes", "serialized: \(show(serialized))")
            }
        }
    }
}

// MARK: - The two passes

/// The input as a client's byte stream.
struct StreamPass {
    let input: [UInt8]
    let slices: [ArraySlice<UInt8>]
    let maxMessageSize: Int
    let preInitialize: Bool
    /// Whether the reader decodes the whole input before the dispatcher starts (a fast reader, so
    /// cancellations overtake everything), or the dispatcher drains after every slice.
    let readAhead: Bool
    /// Whether the decoder has the server's params predecoder (`document/edit` read straight from
    /// json-c's tree), as the server's own connection does.
    let predecode: Bool

    init(input: [UInt8], random: inout InputRandom) {
        self.input = input
        slices = random.slices(of: input)
        // A small cap now and then, so that the skip-an-oversized-body path is reached.
        maxMessageSize = random.below(4) == 0 ? 1 << 12 : 64 << 20
        preInitialize = random.below(2) == 0
        readAhead = random.below(2) == 0
        predecode = random.below(2) == 0
    }

    func run() {
        let session = Session(maxMessageSize: maxMessageSize, preInitialize: preInitialize)
        let decoder = InboundDecoder(
            maxMessageSize: maxMessageSize, pending: session.connection.pending,
            predecoder: predecode ? session.server.paramsPredecoder : nil)
        var framer = FrameParser(maxMessageSize: maxMessageSize)
        var events: [FrameParser.Event] = []
        var queue: [Inbound] = []
        for slice in slices {
            queue += decoder.decode(slice)
            events += framer.feed(slice)
            checkBufferIsBounded(framer, cap: maxMessageSize)
            if !readAhead {
                session.dispatch(queue)
                queue.removeAll()
            }
        }
        session.dispatch(queue)

        checkFramingIsSliceIndependent(events, boundary: framer.isAtMessageBoundary)
        guard decoder.isAtMessageBoundary == framer.isAtMessageBoundary else {
            violated("the decoder and a frame parser agree on the message boundary", show(input))
        }

        var expected: [Expected] = []
        var exits = false
        for event in events {
            switch event {
            case .error:
                expected.append(.single(.init(id: .null, code: -32700)))
            case .message(let body):
                let (more, exit) = Oracle.expectations(forBody: body)
                expected += more
                exits = exit
            }
            if exits { break }
        }
        let describe = { "\(show(input)) (stream, \(slices.count) slices, cap \(maxMessageSize), "
            + "\(preInitialize ? "pre-initialized" : "uninitialized"), \(readAhead ? "read-ahead" : "interleaved"), "
            + "\(predecode ? "predecoded" : "not predecoded"))" }
        OutputCheck.check(session.output.take(), against: expected, input: describe())
        guard session.exited == exits else {
            violated("the server stops exactly at an exit notification", describe())
        }
        if !session.exited, session.connection.pending.count != 0 {
            violated("no request stays pending once answered", "\(session.connection.pending.count) pending; \(describe())")
        }
        for case .message(let body) in events { RoundTrip.check(body) }
    }

    /// Between reads, a frame parser holds at most a partial body (never more than the cap: a body
    /// over it is skipped unread), a partial header line (at most the line limit and its CR), or
    /// the few bytes of a "Content-Length" it is resynchronising on (at most a length line).
    func checkBufferIsBounded(_ parser: FrameParser, cap: Int) {
        let bound = max(cap, parser.maxHeaderLineLength + 1) + 128
        guard parser.bufferedByteCount <= bound else {
            violated(
                "a frame parser buffers at most a body, a header line or a length line between reads",
                "\(parser.bufferedByteCount) bytes buffered, bound \(bound) (cap \(cap)); input: \(show(input))")
        }
    }

    /// FrameParser promises the same events for any slicing of the stream.
    func checkFramingIsSliceIndependent(_ events: [FrameParser.Event], boundary: Bool) {
        var whole = FrameParser(maxMessageSize: maxMessageSize)
        let wholeEvents = whole.feed(input)
        checkBufferIsBounded(whole, cap: maxMessageSize)
        // The bound means something only under a small cap: check one whatever the run's cap,
        // after each read and at the end.
        var smallCap = FrameParser(maxMessageSize: 1 << 12)
        for slice in slices {
            _ = smallCap.feed(slice)
            checkBufferIsBounded(smallCap, cap: 1 << 12)
        }
        guard wholeEvents == events, whole.isAtMessageBoundary == boundary else {
            violated(
                "framing does not depend on how the stream is sliced",
                "input: \(show(input))\nslices: \(slices.map(\.count).prefix(50))\n"
                    + "sliced: \(events.prefix(20))\nwhole:  \(wholeEvents.prefix(20))")
        }
        // Reads that end between a CR and its LF, the split a header line check is most likely to
        // get wrong.
        var crSplit = FrameParser(maxMessageSize: maxMessageSize)
        var crSplitEvents: [FrameParser.Event] = []
        var sliceStart = 0
        for (index, byte) in input.enumerated() where byte == 0x0D {
            crSplitEvents += crSplit.feed(input[sliceStart...index])
            sliceStart = index + 1
        }
        crSplitEvents += crSplit.feed(input[sliceStart...])
        guard crSplitEvents == wholeEvents, crSplit.isAtMessageBoundary == boundary else {
            violated(
                "framing does not depend on how the stream is sliced (reads ending after each CR)",
                "input: \(show(input))\nsplit: \(crSplitEvents.prefix(20))\nwhole: \(wholeEvents.prefix(20))")
        }
        if input.count <= 512 {
            var bytewise = FrameParser(maxMessageSize: maxMessageSize)
            var bytewiseEvents: [FrameParser.Event] = []
            for byte in input { bytewiseEvents += bytewise.feed(CollectionOfOne(byte)) }
            guard bytewiseEvents == events, bytewise.isAtMessageBoundary == boundary else {
                violated(
                    "framing does not depend on how the stream is sliced (a byte at a time)",
                    "input: \(show(input))\nbytewise: \(bytewiseEvents.prefix(20))\nwhole:    \(wholeEvents.prefix(20))")
            }
        }
    }
}

/// The whole input as one message body.
struct BarePass {
    let input: [UInt8]
    let preInitialize: Bool
    let predecode: Bool

    func run() {
        let session = Session(maxMessageSize: 64 << 20, preInitialize: preInitialize)
        let decoder = InboundDecoder(
            maxMessageSize: 64 << 20, pending: session.connection.pending,
            predecoder: predecode ? session.server.paramsPredecoder : nil)
        if let item = decoder.decodeBody(input) { session.dispatch([item]) }
        let (expected, exits) = Oracle.expectations(forBody: input)
        let describe = {
            "\(show(input)) (bare body, \(preInitialize ? "pre-initialized" : "uninitialized"), \(predecode ? "predecoded" : "not predecoded"))"
        }
        OutputCheck.check(session.output.take(), against: expected, input: describe())
        guard session.exited == exits else {
            violated("the server stops exactly at an exit notification", describe())
        }
        if !session.exited, session.connection.pending.count != 0 {
            violated("no request stays pending once answered", describe())
        }
        RoundTrip.check(input)
    }
}
