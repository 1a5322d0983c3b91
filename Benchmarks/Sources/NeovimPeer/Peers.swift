import BufferWorkloads
import Foundation
import JSON
import JSONRPC

/// A child process driven from this thread alone over two pipes: write(2) of each request, read(2)
/// into one reused buffer (no reader thread, no allocation per read).
final class Channel {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let inputFD: Int32
    let outputFD: Int32
    let capacity = 1 << 20
    let readBuffer: UnsafeMutableRawPointer

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        inputFD = input.fileHandleForWriting.fileDescriptor
        outputFD = output.fileHandleForReading.fileDescriptor
        readBuffer = .allocate(byteCount: capacity, alignment: 64)
    }

    @inline(__always) func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let wrote = Glibc.write(inputFD, raw.baseAddress! + offset, raw.count - offset)
                if wrote < 0 && errno == EINTR { continue }
                precondition(wrote > 0, "the peer's input closed (errno \(errno))")
                offset += wrote
            }
        }
    }

    /// One read(2): the bytes that are there (at least one; blocks until then).
    @inline(__always) func read() -> UnsafeRawBufferPointer {
        while true {
            let count = Glibc.read(outputFD, readBuffer, capacity)
            if count > 0 { return UnsafeRawBufferPointer(start: readBuffer, count: count) }
            if count < 0 && errno == EINTR { continue }
            fatalError("the peer closed its output")
        }
    }

    func close() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// What the replay loop needs of a peer: encode one edit as a request, and take the responses that
/// one read brings.
protocol Peer: AnyObject {
    var channel: Channel { get }
    /// Appends edit `index` as a complete request (framed) to `out`.
    func encode(_ edit: PeerEdit, index: Int, into out: inout [UInt8])
    /// Reads once (blocking), checks every complete response to an edit, and answers their count.
    func takeResponses() -> Int
}

/// Replays `edits` with at most `window` requests in flight (1: synchronous, each request sent after
/// the previous response); one write(2) per request. Answers the wall time in nanoseconds.
func replay<P: Peer>(_ peer: P, _ edits: [PeerEdit], window: Int) -> Int64 {
    var out: [UInt8] = []
    out.reserveCapacity(1 << 16)
    var sent = 0
    var done = 0
    let start = nanoseconds()
    while done < edits.count {
        while sent < edits.count && sent - done < window {
            out.removeAll(keepingCapacity: true)
            peer.encode(edits[sent], index: sent, into: &out)
            peer.channel.write(out)
            sent += 1
        }
        done += peer.takeResponses()
    }
    return nanoseconds() - start
}

@inline(__always) func appendDecimal(_ value: Int64, _ out: inout [UInt8]) {
    if value < 0 { out.append(UInt8(ascii: "-")); appendDecimal(-value, &out); return }
    if value < 10 { out.append(UInt8(truncatingIfNeeded: value) + 48); return }
    var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // 32 bytes of room
    var count = 0
    var v = value
    withUnsafeMutableBytes(of: &digits) { raw in
        while v > 0 {
            raw[31 - count] = UInt8(truncatingIfNeeded: v % 10) + 48
            v /= 10
            count += 1
        }
        out.append(contentsOf: raw[(32 - count)...])
    }
}

// MARK: - Neovim over msgpack-RPC

/// `nvim --embed --headless -u NONE -i NONE -n` and its msgpack-RPC: requests [0, msgid, method,
/// params], responses [1, msgid, error, result], notifications [2, method, params] (skipped).
final class Neovim: Peer {
    let channel: Channel
    var nextID: Int64 = 1
    var pending: [UInt8] = []
    var notifications = 0
    /// During a replay: the msgid of edit 0, and the buffer edited.
    var editBase: Int64 = 0
    var buffer: Int64 = 0
    static let setText = Array("nvim_buf_set_text".utf8)
    static let setLines = Array("nvim_buf_set_lines".utf8)

    init(executable: String) throws {
        channel = try Channel(executable: executable, arguments: ["--embed", "--headless", "-u", "NONE", "-i", "NONE", "-n"])
        pending.reserveCapacity(1 << 16)
    }

    /// Decodes the complete messages in `pending`, handing each response's (msgid, error, result)
    /// to `body`; keeps an incomplete tail.
    @inline(__always) func decodePending(_ body: (Int64, MsgPack, MsgPack) -> Void) {
        var decoder = MsgPackDecoder(pending)
        var consumed = 0
        while decoder.index < pending.count {
            let message: MsgPack
            do { message = try decoder.decode() } catch is MsgPackDecoder.Incomplete { break } catch {
                fatalError("bad msgpack from Neovim: \(error)")
            }
            consumed = decoder.index
            guard let items = message.arrayValue, let kind = items.first?.intValue else { fatalError("unexpected message from Neovim: \(message.description)") }
            if kind == 2 { notifications += 1; continue }
            guard kind == 1, items.count == 4, let id = items[1].intValue else { fatalError("unexpected message from Neovim: \(message.description)") }
            body(id, items[2], items[3])
        }
        if consumed == pending.count { pending.removeAll(keepingCapacity: true) } else if consumed > 0 { pending.removeFirst(consumed) }
    }

    func readMore() {
        let chunk = channel.read()
        pending.append(contentsOf: chunk)
    }

    /// A request answered before the next is sent (setup and the save figure).
    @discardableResult
    func call(_ method: String, _ params: [MsgPack]) -> MsgPack {
        let (error, result) = callAnswering(method, params)
        guard error.isNil else { fatalError("\(method) failed: \(error.description)") }
        return result
    }

    /// A request answered before the next is sent: its error (nil when none) and result.
    func callAnswering(_ method: String, _ params: [MsgPack]) -> (MsgPack, MsgPack) {
        let id = nextID
        nextID += 1
        var out: [UInt8] = []
        MsgPackWriter.write(.array([.int(0), .int(id), .str(method), .array(params)]), &out)
        channel.write(out)
        var answer: (MsgPack, MsgPack)?
        while answer == nil {
            readMore()
            decodePending { msgid, error, result in
                guard msgid == id else { fatalError("Neovim answered \(msgid) while \(id) was awaited") }
                answer = (error, result)
            }
        }
        return answer!
    }

    func encode(_ edit: PeerEdit, index: Int, into out: inout [UInt8]) {
        if let lines = edit.neovimLines {
            // A range across lines: whole lines (nvim_buf_set_text mishandles these in 0.7.2).
            out.append(0x94)
            out.append(0x00)
            MsgPackWriter.writeInt(editBase + Int64(index), &out)
            MsgPackWriter.writeString(Self.setLines, &out)
            out.append(0x95)
            MsgPackWriter.writeInt(buffer, &out)
            MsgPackWriter.writeInt(Int64(edit.startLine), &out)
            MsgPackWriter.writeInt(Int64(edit.endLine) + 1, &out)
            out.append(0xC3)
            MsgPackWriter.writeArrayHeader(lines.count, &out)
            for line in lines { MsgPackWriter.writeString(line, &out) }
            return
        }
        out.append(0x94)
        out.append(0x00)
        MsgPackWriter.writeInt(editBase + Int64(index), &out)
        MsgPackWriter.writeString(Self.setText, &out)
        out.append(0x96)
        MsgPackWriter.writeInt(buffer, &out)
        MsgPackWriter.writeInt(Int64(edit.startLine), &out)
        MsgPackWriter.writeInt(Int64(edit.startColumn), &out)
        MsgPackWriter.writeInt(Int64(edit.endLine), &out)
        MsgPackWriter.writeInt(Int64(edit.endColumn), &out)
        // The replacement as lines: the text split at each '\n'.
        let text = edit.text
        var lineCount = 1
        for byte in text where byte == 0x0A { lineCount += 1 }
        MsgPackWriter.writeArrayHeader(lineCount, &out)
        var lineStart = 0
        for i in 0..<text.count where text[i] == 0x0A {
            MsgPackWriter.writeString(text[lineStart..<i], &out)
            lineStart = i + 1
        }
        MsgPackWriter.writeString(text[lineStart...], &out)
    }

    func takeResponses() -> Int {
        readMore()
        var count = 0
        decodePending { msgid, error, _ in
            guard error.isNil else { fatalError("nvim_buf_set_text \(msgid - editBase) failed: \(error.description)") }
            count += 1
        }
        return count
    }

    /// A new scratch buffer holding `text`; answers its handle.
    func beginReplay(_ text: [UInt8], edits: Int) -> Int64 {
        let made = call("nvim_create_buf", [.bool(false), .bool(true)])
        guard let handle = made.intValue else { fatalError("nvim_create_buf answered \(made.description)") }
        buffer = handle
        setLines(text)
        editBase = nextID
        nextID += Int64(edits)
        return handle
    }

    /// Replaces the buffer's lines with `text` split at '\n' (no line is added for a final '\n' when
    /// `forFile`: Neovim's 'eol' writes it).
    func setLines(_ text: [UInt8], forFile: Bool = false) {
        var lines = text.split(separator: 0x0A, omittingEmptySubsequences: false).map { MsgPack.string(Array($0)) }
        if forFile, text.last == 0x0A { lines.removeLast() }
        call("nvim_buf_set_lines", [.int(buffer), .int(0), .int(-1), .bool(true), .array(lines)])
    }

    /// The buffer's text: its lines joined with '\n'.
    func text() -> [UInt8] {
        let lines = call("nvim_buf_get_lines", [.int(buffer), .int(0), .int(-1), .bool(true)])
        guard let items = lines.arrayValue else { fatalError("nvim_buf_get_lines answered \(lines.description)") }
        var out: [UInt8] = []
        for (index, line) in items.enumerated() {
            if index > 0 { out.append(0x0A) }
            out += line.bytesValue ?? []
        }
        return out
    }

    func endReplay() {
        call("nvim_buf_delete", [.int(buffer), .map([(.str("force"), .bool(true))])])
    }

    func close() {
        var out: [UInt8] = []
        MsgPackWriter.write(.array([.int(2), .str("nvim_command"), .array([.str("qa!")])]), &out)
        channel.write(out)
        channel.close()
    }
}

// MARK: - Our server over JSON-RPC with LSP framing

final class DocSession: Peer {
    let channel: Channel
    var nextID: Int64 = 1
    var framer = FrameParser(maxMessageSize: 1 << 30)
    let parser = JSONParser()
    var notifications = 0
    var handle: [UInt8] = []
    var handleName = ""
    var editBase: Int64 = 0
    var versionBase: Int64 = 0  // the document's version before the replay, minus one
    var body: [UInt8] = []
    var editEnd: Int64 = 0
    var edits: [PeerEdit] = []

    init(executable: String) throws {
        channel = try Channel(executable: executable, arguments: ["serve"])
        body.reserveCapacity(1 << 16)
        let result = call("initialize", ["processId": .integer(Int64(getpid())), "capabilities": ["general": ["positionEncodings": ["utf-8"]]]])
        guard result["capabilities"]?["positionEncoding"]?.stringValue == "utf-8" else {
            fatalError("the server did not take utf-8 positions: \(result.jsonText)")
        }
        notify("initialized", [:])
    }

    func frame(_ body: [UInt8], into out: inout [UInt8]) {
        out += Array("Content-Length: ".utf8)
        appendDecimal(Int64(body.count), &out)
        out += [0x0D, 0x0A, 0x0D, 0x0A]
        out += body
    }

    func notify(_ method: String, _ params: JSONValue) {
        var out: [UInt8] = []
        frame(JSONValue.object(["jsonrpc": "2.0", "method": .string(method), "params": params]).serialized(), into: &out)
        channel.write(out)
    }

    /// Parses the complete messages that one read brings, handing each response to `body`.
    @inline(__always) func readMessages(_ body: (Int64, JSONValue) -> Void) {
        let chunk = channel.read()
        framer.append(chunk)
        while let event = framer.next() {
            guard case .message(let bytes) = event, let message = try? parser.parse(bytes) else {
                fatalError("bad output from the server: \(event)")
            }
            if message["method"] != nil { notifications += 1; continue }
            guard let id = message["id"]?.integerValue else { fatalError("unexpected message: \(message.jsonText)") }
            body(id, message)
        }
    }

    @discardableResult
    func call(_ method: String, _ params: JSONValue) -> JSONValue {
        let id = nextID
        nextID += 1
        var out: [UInt8] = []
        frame(JSONValue.object(["jsonrpc": "2.0", "id": .integer(id), "method": .string(method), "params": params]).serialized(), into: &out)
        channel.write(out)
        var answer: JSONValue?
        while answer == nil {
            readMessages { msgid, message in
                guard msgid == id else { fatalError("the server answered \(msgid) while \(id) was awaited") }
                guard let result = message["result"] else { fatalError("\(method) failed: \(message.jsonText)") }
                answer = result
            }
        }
        return answer!
    }

    static let prefix1 = Array("{\"jsonrpc\":\"2.0\",\"id\":".utf8)
    static let prefix2 = Array(",\"method\":\"document/edit\",\"params\":{\"document\":\"".utf8)
    static let prefix3 = Array("\",\"version\":".utf8)
    static let prefix4 = Array(",\"edits\":[{\"range\":{\"start\":{\"line\":".utf8)
    static let character = Array(",\"character\":".utf8)
    static let endLine = Array("},\"end\":{\"line\":".utf8)
    static let textKey = Array("}},\"text\":\"".utf8)
    static let suffix = Array("\"}]}}".utf8)
    static let hex = Array("0123456789abcdef".utf8)

    func encode(_ edit: PeerEdit, index: Int, into out: inout [UInt8]) {
        body.removeAll(keepingCapacity: true)
        body += Self.prefix1
        appendDecimal(editBase + Int64(index), &body)
        body += Self.prefix2
        body += handle
        body += Self.prefix3
        appendDecimal(versionBase + (index == 0 ? 1 : edits[index - 1].version), &body)
        body += Self.prefix4
        appendDecimal(Int64(edit.startLine), &body)
        body += Self.character
        appendDecimal(Int64(edit.startColumn), &body)
        body += Self.endLine
        appendDecimal(Int64(edit.endLine), &body)
        body += Self.character
        appendDecimal(Int64(edit.endColumn), &body)
        body += Self.textKey
        for byte in edit.text {
            switch byte {
            case 0x22: body.append(0x5C); body.append(0x22)
            case 0x5C: body.append(0x5C); body.append(0x5C)
            case 0x0A: body.append(0x5C); body.append(UInt8(ascii: "n"))
            case 0x0D: body.append(0x5C); body.append(UInt8(ascii: "r"))
            case 0x09: body.append(0x5C); body.append(UInt8(ascii: "t"))
            case 0..<0x20:
                body += Array("\\u00".utf8)
                body.append(Self.hex[Int(byte >> 4)])
                body.append(Self.hex[Int(byte & 15)])
            default: body.append(byte)
            }
        }
        body += Self.suffix
        frame(body, into: &out)
    }

    func takeResponses() -> Int {
        var count = 0
        readMessages { id, message in
            let index = Int(id - editBase)
            guard index >= 0, index < edits.count, let version = message["result"]?["version"]?.integerValue else {
                fatalError("document/edit \(id - editBase) failed: \(message.jsonText)")
            }
            guard version == versionBase + edits[index].version else {
                fatalError("document/edit \(index) answered version \(version), expected \(versionBase + edits[index].version)")
            }
            count += 1
        }
        return count
    }

    /// A new document at `path` holding `text`, ready for `edits`.
    func beginReplay(path: String, _ text: String, edits: [PeerEdit]) {
        let created = call("document/create", ["uri": .string("file://" + path), "text": .string(text)])
        handleName = created["document"]!.stringValue!
        handle = Array(handleName.utf8)
        versionBase = created["version"]!.integerValue! - 1
        self.edits = edits
        editBase = nextID
        nextID += Int64(edits.count)
    }

    func text() -> [UInt8] {
        Array(call("document/read", ["document": .string(handleName)])["text"]!.stringValue!.utf8)
    }

    func endReplay() {
        call("document/close", ["document": .string(handleName), "save": "never"])
        edits = []
    }

    func close() {
        call("shutdown", .null)
        notify("exit", .null)
        channel.close()
    }
}
