import Foundation
import JSON
import JSONRPC
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// LSP's base protocol as the server reads and writes it over real pipes.
@Suite("Framing")
struct FramingTests {
    static let initializeBody = #"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#

    @Test("header names match case-insensitively", arguments: [
        "Content-Length", "content-length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh",
    ])
    func headerNameCase(name: String) throws {
        let session = try Session()
        let body = Self.initializeBody
        try session.sendRaw("\(name): \(body.utf8.count)\r\n\r\n\(body)")
        expectResult(try session.next(), id: 1)
        let probe = #"{"jsonrpc":"2.0","id":"two","method":"probe"}"#
        try session.sendRaw("\(name): \(probe.utf8.count)\r\n\r\n\(probe)")
        expectError(try session.next(), code: -32601, id: "two")
        try session.shutdownAndExit()
    }

    @Test("Content-Type is accepted and ignored, before or after Content-Length; spaces and tabs around values too")
    func contentTypeIsAccepted() throws {
        let session = try Session()
        let body = Self.initializeBody
        try session.sendRaw("Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        expectResult(try session.next(), id: 1)
        let probe = #"{"jsonrpc":"2.0","id":2,"method":"probe"}"#
        try session.sendRaw("Content-Length: \(probe.utf8.count)\r\ncontent-type: application/json\r\n\r\n\(probe)")
        expectError(try session.next(), code: -32601, id: 2)
        try session.sendRaw("Content-Length:\t \(probe.utf8.count) \t\r\nX-Unknown-Header: whatever\r\n\r\n\(probe)")
        expectError(try session.next(), code: -32601, id: 2)
        try session.shutdownAndExit()
    }

    @Test("bare LF line ends and blank lines between messages are tolerated")
    func bareLineFeeds() throws {
        let session = try Session()
        let body = Self.initializeBody
        try session.sendRaw("Content-Length: \(body.utf8.count)\n\n\(body)")
        expectResult(try session.next(), id: 1)
        let probe = #"{"jsonrpc":"2.0","id":2,"method":"probe"}"#
        try session.sendRaw("\r\n\r\n\nContent-Length: \(probe.utf8.count)\r\n\r\n\(probe)\r\n")
        expectError(try session.next(), code: -32601, id: 2)
        try session.shutdownAndExit()
    }

    @Test("the same Content-Length twice is accepted; two that disagree are a parse error")
    func repeatedContentLength() throws {
        let session = try Session()
        let body = Self.initializeBody
        try session.sendRaw("Content-Length: \(body.utf8.count)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        expectResult(try session.next(), id: 1)
        try session.sendRaw("Content-Length: 40\r\nContent-Length: 41\r\n\r\n" + #"{"jsonrpc":"2.0","id":"lost","method":"x"}"#)
        expectError(try session.next(), code: -32700, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("several messages in one write are all answered, in order")
    func severalMessagesInOneWrite() throws {
        let session = try Session()
        var bytes = framed(Self.initializeBody)
        bytes += framed(notificationText(method: "initialized"))
        for index in 2...6 { bytes += framed(requestText(id: .integer(Int64(index)), method: "probe/\(index)")) }
        bytes += framed(requestText(id: 7, method: "shutdown"))
        bytes += framed(notificationText(method: "exit"))
        try session.sendRaw(bytes)
        expectResult(try session.next(), id: 1)
        for index in 2...6 {
            let error = expectError(try session.next(), code: -32601, id: .integer(Int64(index)))
            #expect(error?["message"]?.stringValue?.contains("probe/\(index)") == true)
        }
        #expect(expectResult(try session.next(), id: 7) == .null)
        try session.finish(status: 0)
    }

    @Test("a message split into 1-byte writes is answered once")
    func oneByteWrites() throws {
        let session = try Session()
        let bytes = framed(Self.initializeBody) + framed(requestText(id: "split", method: "probe"))
        for byte in bytes {
            try session.sendRaw([byte])
            usleep(200)
        }
        expectResult(try session.next(), id: 1)
        expectError(try session.next(), code: -32601, id: "split")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    /// A header fault, the request that followed it in the same broken message (which must not be
    /// answered: the parser skips to the next header) and a label.
    static let headerFaults: [(String, String)] = [
        ("missing Content-Length", "Content-Type: application/vscode-jsonrpc\r\n\r\n"),
        ("negative Content-Length", "Content-Length: -5\r\n\r\n"),
        ("Content-Length -0", "Content-Length: -0\r\n\r\n"),
        ("non-numeric Content-Length", "Content-Length: abc\r\n\r\n"),
        ("Content-Length with a sign", "Content-Length: +40\r\n\r\n"),
        ("Content-Length with a fraction", "Content-Length: 40.0\r\n\r\n"),
        ("Content-Length in hex", "Content-Length: 0x28\r\n\r\n"),
        ("number followed by garbage", "Content-Length: 40abc\r\n\r\n"),
        ("empty Content-Length", "Content-Length: \r\n\r\n"),
        ("Content-Length beyond any integer", "Content-Length: 99999999999999999999999999\r\n\r\n"),
        ("a header line without a colon", "Content-Length: 40\r\nthis is not a header\r\n\r\n"),
        ("a header name with a space", "Content-Length: 40\r\nBad Name: x\r\n\r\n"),
        ("an unframed JSON object", #"{"jsonrpc":"2.0","id":"lost","method":"x"}"# + "\r\n"),
        ("an unframed JSON array", #"[{"jsonrpc":"2.0","id":"lost","method":"x"}]"# + "\r\n"),
    ]

    @Test("header faults are answered -32700 with id null, and the next good message is answered", arguments: headerFaults)
    func headerFaultsAreParseErrors(label: String, header: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(header + #"{"jsonrpc":"2.0","id":"lost","method":"lost"}"#)
        let error = expectError(try session.next(), code: -32700, id: .null)
        #expect(error?["data"]?["offset"] == nil, "a framing fault has no JSON offset")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    /// A header fault, then the body it leaves behind, which mentions Content-Length.
    static let faultsBeforeHeaderLikeText: [(String, String)] = [
        ("Content-Length: abc\r\n\r\n", #"{"jsonrpc":"2.0","id":"lost","method":"x","params":{"text":"Content-Length: 5"}}"#),
        ("Content-Type: text/plain\r\n\r\n", #"{"jsonrpc":"2.0","id":"lost","method":"x","params":{"text":"see content-length"}}"#),
        ("Content-Length: -1\r\n\r\n", "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": \"lost\",\n  \"Content-Length: 12\": 1\n}"),
        ("Content-Length: 1x\r\n\r\n", #"{"jsonrpc":"2.0","id":"lost","method":"x","params":["Content-Length: 2\r\n\r\n{}"]}"#),
    ]

    @Test("after a header fault, Content-Length text inside the discarded body neither costs a second error nor the next message",
        arguments: faultsBeforeHeaderLikeText)
    func resynchronisationPassesOverHeaderTextInABody(header: String, lostBody: String) throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw(Array((header + lostBody).utf8) + framed(requestText(id: "good", method: "probe")))
        expectError(try session.next(), code: -32700, id: .null)
        expectError(try session.next(), code: -32601, id: "good")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("thousands of messages in one write and a batch of a thousand requests are all answered, in order")
    func manyMessages() throws {
        let session = try Session()
        try session.initialize()
        var bytes: [UInt8] = []
        for index in 0..<5000 { bytes += framed(requestText(id: .integer(Int64(index)), method: "probe")) }
        try session.sendRaw(bytes)
        for index in 0..<5000 {
            let message = try session.next()
            #expect(message["id"] == .integer(Int64(index)) && message["error"]?["code"] == -32601, "\(message.jsonText)")
            if message["id"] != .integer(Int64(index)) { break }
        }
        let batch = (0..<1000).map { requestText(id: .string("b\($0)"), method: "probe") }.joined(separator: ",")
        try session.sendBody("[" + batch + "]")
        let response = try session.next()
        let elements = response.arrayValue ?? []
        #expect(elements.count == 1000)
        #expect(Set(elements.compactMap { $0["id"]?.stringValue }) == Set((0..<1000).map { "b\($0)" }))
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a header line longer than the limit is a parse error and the stream resynchronises")
    func overlongHeaderLine() throws {
        let session = try Session()
        try session.initialize()
        try session.sendRaw("X-Padding: " + String(repeating: "x", count: 20_000) + "\r\n\r\n")
        expectError(try session.next(), code: -32700, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    /// A header line of exactly `length` bytes, not counting its line end.
    static func paddingHeader(length: Int) -> String {
        let name = "X-Padding: "
        return name + String(repeating: "x", count: length - name.utf8.count)
    }

    @Test("a header line of 8192 bytes is accepted and one of 8193 refused", arguments: ["\r\n", "\n"])
    func headerLineLengthBoundary(lineEnd: String) throws {
        let session = try Session()
        try session.initialize()
        let probe = requestText(id: "padded", method: "probe")
        try session.sendRaw(Self.paddingHeader(length: 8192) + lineEnd + "Content-Length: \(probe.utf8.count)\r\n\r\n" + probe)
        expectError(try session.next(), code: -32601, id: "padded")
        try session.sendRaw(Self.paddingHeader(length: 8193) + lineEnd + "Content-Length: \(probe.utf8.count)\r\n\r\n" + probe)
        let error = expectError(try session.next(), code: -32700, id: .null)
        #expect(error?["message"]?.stringValue?.contains("8192") == true)
        // The padded request itself was read: resynchronisation found its Content-Length.
        expectError(try session.next(), code: -32601, id: "padded")
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("a header line of 8192 bytes is accepted even when a read ends between its CR and LF")
    func headerLineSplitBetweenCRAndLF() throws {
        let session = try Session()
        try session.initialize()
        // One write: a request (whose answer shows the server has read this far), then the padded
        // line and its CR. The LF and the rest of the header come in a second write.
        try session.sendRaw(framed(requestText(id: "marker", method: "probe")) + Array((Self.paddingHeader(length: 8192) + "\r").utf8))
        expectError(try session.next(), code: -32601, id: "marker")
        usleep(200_000)
        let probe = requestText(id: "padded", method: "probe")
        try session.sendRaw("\nContent-Length: \(probe.utf8.count)\r\n\r\n" + probe)
        expectError(try session.next(), code: -32601, id: "padded")
        try session.shutdownAndExit()
    }

    @Test("with --max-message-size 1K a body of 1024 bytes is accepted and one of 1025 refused and skipped")
    func messageSizeLimitBoundary() throws {
        let session = try Session(["--max-message-size", "1K"])
        let result = try session.initialize()
        #expect(result["capabilities"]?["maxMessageSize"] == 1024)
        for (size, accepted) in [(1024, true), (1025, false)] {
            // A request padded with spaces to exactly `size` bytes.
            let text = requestText(id: .integer(Int64(size)), method: "probe")
            let body = Array(text.utf8) + Array(repeating: UInt8(ascii: " "), count: size - text.utf8.count)
            #expect(body.count == size)
            try session.sendBody(body)
            if accepted {
                expectError(try session.next(), code: -32601, id: .integer(Int64(size)))
            } else {
                let error = expectError(try session.next(), code: -32700, id: .null)
                #expect(error?["message"]?.stringValue?.contains("1025") == true)
            }
        }
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an oversized body is skipped exactly: a framed request hidden inside it is not answered")
    func oversizedBodyIsSkippedExactly() throws {
        let session = try Session(["--max-message-size", "1K"])
        try session.initialize()
        // The oversized body holds complete framed requests; were the parser resynchronising on
        // the next header instead of skipping Content-Length bytes, these would be answered.
        var inner: [UInt8] = []
        while inner.count < 3000 { inner += framed(requestText(id: "hidden", method: "probe")) }
        let good = framed(requestText(id: "after", method: "probe"))
        // Oversized message and the next good one in one write, and again split at awkward places.
        try session.sendRaw(framed(inner) + good)
        expectError(try session.next(), code: -32700, id: .null)
        expectError(try session.next(), code: -32601, id: "after")
        let whole = framed(inner) + good
        for cut in [10, 30, 500, 2500, whole.count - good.count - 1, whole.count - good.count + 5] {
            try session.sendRaw(Array(whole[..<cut]))
            usleep(20_000)
            try session.sendRaw(Array(whole[cut...]))
            expectError(try session.next(), code: -32700, id: .null)
            expectError(try session.next(), code: -32601, id: "after")
        }
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("an oversized Content-Length is refused as soon as the header arrives, before the body")
    func oversizedIsRefusedAtTheHeader() throws {
        let session = try Session(["--max-message-size", "1K"])
        try session.initialize()
        try session.sendRaw("Content-Length: 2048\r\n\r\n")
        let error = expectError(try session.next(), code: -32700, id: .null)
        #expect(error?["message"]?.stringValue?.contains("1024") == true)
        try session.sendRaw(String(repeating: "z", count: 2048))
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("every message the server writes has exactly the header Content-Length: N\\r\\n\\r\\n")
    func outputHeaderIsExact() throws {
        var input = framed(Self.initializeBody)
        input += framed(notificationText(method: "initialized"))
        input += framed(notificationText(method: "$/setTrace", params: ["value": "verbose"]))
        input += framed(requestText(id: "ü/é", method: "probe"))
        input += framed(#"{"jsonrpc":"2.0","id":2,"method":"probe","params":{"#)
        input += framed("[1,2]")
        input += Array("Content-Length: nope\r\n\r\n".utf8)
        input += framed(requestText(id: 3, method: "shutdown"))
        input += framed(notificationText(method: "exit"))
        let run = try RawRun.run([], input: input)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let messages = try run.strictMessages()
        // initialize; the probe (traced: received, sending, answer); the parse error; the batch's
        // array; the framing fault; shutdown (traced: received, sending, answer); exit (traced).
        #expect(messages.count == 11, "\(messages.map(\.jsonText))")
        #expect(messages.contains { $0["id"] == "ü/é" && $0["error"]?["code"] == -32601 })
        #expect(messages.contains { $0["id"] == 3 && $0["result"] == .null })
        #expect(messages.contains { $0.arrayValue?.count == 2 })
        #expect(messages.filter { $0["method"] == "$/logTrace" }.count == 5)
        // Non-ASCII is written as UTF-8 and "/" is not escaped.
        #expect(run.stdout.contains(bytes: #""id":"ü/é""#))
        #expect(!run.stdout.contains(bytes: "Content-Type"))
    }
}
