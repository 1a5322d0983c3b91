import BufferWorkloads
import Foundation
import JSON
import JSONRPC

/// A framed response as the timed loops see it: the id, and the version of an edit's result. The
/// scan is byte-level (no JSON parse on the client's side of the round trip; the C floor parses
/// nothing either); anything that is not `{"jsonrpc":"2.0","id":N,"result":{"version":V}}` is
/// handed back whole.
struct ScannedResponse {
    var id: Int64?      // nil: a notification
    var version: Int64? // nil: not an edit's result (an error, or another result)
    var size: Int       // the whole frame, header included
    var bodySize: Int
    var text: String?   // the body, when it is not an edit's result
}

/// The server as a child process, driven from this thread alone: requests written with write(2),
/// its output read with read(2) into one buffer and cut into frames here.
final class ServerSession {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let inputFD: Int32
    let outputFD: Int32
    private let capacity = 1 << 22
    private let buffer: UnsafeMutablePointer<UInt8>
    private var start = 0, end = 0
    var nextID: Int64 = 1
    var notifications = 0

    init(server: String, stateDirectory: String, arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: server)
        process.arguments = ["serve", "--state-dir", stateDirectory] + arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        buffer = .allocate(capacity: capacity)
        try process.run()
        inputFD = input.fileHandleForWriting.fileDescriptor
        outputFD = output.fileHandleForReading.fileDescriptor
    }

    deinit { buffer.deallocate() }

    func makeID() -> Int64 {
        defer { nextID += 1 }
        return nextID
    }

    @inline(__always) func write(_ bytes: UnsafeRawPointer, _ count: Int) {
        var done = 0
        while done < count {
            let n = Glibc.write(inputFD, bytes + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                fatalError("the server's input closed (errno \(errno))")
            }
            done += n
        }
    }

    func send(_ body: [UInt8]) {
        let frame = Framing.frame(body)
        frame.withUnsafeBytes { write($0.baseAddress!, $0.count) }
    }

    /// One read(2) more into the buffer.
    func fill() {
        if start == end {
            start = 0; end = 0
        } else if end == capacity {
            (buffer).update(from: buffer + start, count: end - start)
            end -= start
            start = 0
            precondition(end < capacity, "a response larger than \(capacity) bytes")
        }
        while true {
            let n = read(outputFD, buffer + end, capacity - end)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { fatalError("the server closed its output") }
            end += n
            return
        }
    }

    /// The complete frame at the front of the buffer: the body's range in the buffer and the
    /// frame's length; nil when it is not complete.
    @inline(__always) private func frontFrame() -> (body: Range<Int>, length: Int)? {
        let available = end - start
        let prefix = 16  // "Content-Length: "
        guard available >= prefix + 5 else { return nil }
        let p = buffer + start
        precondition(p[0] == UInt8(ascii: "C") && p[15] == UInt8(ascii: " "), "unexpected header from the server")
        var i = prefix, bodyLength = 0
        while i < available, p[i] >= 0x30, p[i] <= 0x39 { bodyLength = bodyLength * 10 + Int(p[i] - 0x30); i += 1 }
        guard i + 4 <= available else { return nil }
        precondition(p[i] == 0x0D && p[i + 3] == 0x0A, "unexpected header from the server")
        let total = i + 4 + bodyLength
        guard total <= available else { return nil }
        return (start + i + 4..<start + total, total)
    }

    /// The integer after `key` (e.g. `"id":`) in the body, if the key is there.
    @inline(__always) private func integer(after key: StaticString, in body: Range<Int>) -> Int64? {
        let k = key.utf8Start
        let keyLength = key.utf8CodeUnitCount
        var i = body.lowerBound
        let last = body.upperBound - keyLength
        while i <= last {
            if buffer[i] == k[0] && memcmp(buffer + i, k, keyLength) == 0 {
                var j = i + keyLength, value: Int64 = 0, digits = 0
                while j < body.upperBound, buffer[j] >= 0x30, buffer[j] <= 0x39 {
                    value = value * 10 + Int64(buffer[j] - 0x30); j += 1; digits += 1
                }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }

    /// Takes the next complete frame in the buffer, scanned; nil when none is complete.
    func takeScanned() -> ScannedResponse? {
        guard let (body, length) = frontFrame() else { return nil }
        defer { start += length }
        // An edit's result has an id and {"version":N}; anything else is looked at as text.
        let id = integer(after: "\"id\":", in: body)
        let version = integer(after: "{\"version\":", in: body)
        if id != nil, version != nil { return ScannedResponse(id: id, version: version, size: length, bodySize: body.count, text: nil) }
        let text = String(decoding: UnsafeBufferPointer(start: buffer + body.lowerBound, count: body.count), as: UTF8.self)
        if text.contains("\"method\"") {
            notifications += 1
            return ScannedResponse(id: nil, version: nil, size: length, bodySize: body.count, text: text)
        }
        return ScannedResponse(id: id, version: version, size: length, bodySize: body.count, text: text)
    }

    /// The text of the frame at the front (for error messages), without taking it.
    func frontText() -> String {
        guard let (body, _) = frontFrame() else { return "(incomplete)" }
        return String(decoding: UnsafeBufferPointer(start: buffer + body.lowerBound, count: body.count), as: UTF8.self)
    }

    /// Takes the next complete frame, parsed; nil when none is complete.
    func takeParsed() -> JSONValue? {
        guard let (body, length) = frontFrame() else { return nil }
        defer { start += length }
        let bytes = Array(UnsafeBufferPointer(start: buffer + body.lowerBound, count: body.count))
        guard let message = try? JSONParser().parse(bytes) else { fatalError("bad JSON from the server") }
        return message
    }

    /// Sends a request and waits for its response (untimed setup calls).
    func call(_ method: String, _ params: JSONValue) -> JSONValue {
        let id = makeID()
        send(JSONValue.object(["jsonrpc": "2.0", "id": .integer(id), "method": .string(method), "params": params]).serialized())
        while true {
            while let message = takeParsed() {
                if message["method"] != nil { notifications += 1; continue }
                guard message["id"]?.integerValue == id else { fatalError("an unexpected response: \(message.jsonText)") }
                guard let result = message["result"] else { fatalError("\(method) failed: \(message.jsonText)") }
                return result
            }
            fill()
        }
    }

    func notify(_ method: String, _ params: JSONValue) {
        send(JSONValue.object(["jsonrpc": "2.0", "method": .string(method), "params": params]).serialized())
    }

    func shutDown() {
        _ = call("shutdown", .null)
        send(JSONValue.object(["jsonrpc": "2.0", "method": "exit"]).serialized())
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
