import Testing

@testable import JSONRPC

private func framed(_ body: String) -> [UInt8] { Framing.frame(Array(body.utf8)) }
private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Feeds `stream` to a fresh parser in slices of `size` bytes and collects every event.
private func events(_ stream: [UInt8], slice size: Int, maxMessageSize: Int = 1 << 20) -> [FrameParser.Event] {
    var parser = FrameParser(maxMessageSize: maxMessageSize)
    var result: [FrameParser.Event] = []
    var index = 0
    while index < stream.count {
        let end = min(index + size, stream.count)
        result += parser.feed(stream[index..<end])
        index = end
    }
    return result
}

/// The events for every slicing from one byte at a time to the whole stream at once, checked equal.
private func eventsForAllSlicings(_ stream: [UInt8], maxMessageSize: Int = 1 << 20, sourceLocation: SourceLocation = #_sourceLocation) -> [FrameParser.Event] {
    let whole = events(stream, slice: max(stream.count, 1), maxMessageSize: maxMessageSize)
    for size in [1, 2, 3, 7, 16, 64] {
        #expect(events(stream, slice: size, maxMessageSize: maxMessageSize) == whole, "slice size \(size)", sourceLocation: sourceLocation)
    }
    return whole
}

@Suite("Framing: the read side")
struct FrameParserTests {
    @Test("one message, fed whole and byte by byte")
    func single() {
        let result = eventsForAllSlicings(framed(#"{"a":1}"#))
        #expect(result == [.message(bytes(#"{"a":1}"#))])
    }

    @Test("several messages in one read come out in order")
    func several() {
        let stream = framed("[1]") + framed("{}") + framed(#""x""#)
        #expect(eventsForAllSlicings(stream) == [.message(bytes("[1]")), .message(bytes("{}")), .message(bytes(#""x""#))])
    }

    @Test("a partial message yields nothing until it completes")
    func partial() {
        var parser = FrameParser()
        let stream = framed(#"{"abc":true}"#)
        #expect(parser.feed(stream.dropLast()) == [])
        #expect(!parser.isAtMessageBoundary)
        #expect(parser.feed(stream.suffix(1)) == [.message(bytes(#"{"abc":true}"#))])
        #expect(parser.isAtMessageBoundary)
    }

    @Test("header names match in any case", arguments: ["content-length", "CONTENT-LENGTH", "Content-length", "cOnTeNt-LeNgTh"])
    func headerCase(name: String) {
        let stream = bytes("\(name): 2\r\n\r\n{}")
        #expect(eventsForAllSlicings(stream) == [.message(bytes("{}"))])
    }

    @Test("Content-Type and unknown headers are accepted, before or after the length")
    func otherHeaders() {
        let stream = bytes("Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\nX-Other: 1\r\n\r\n{}")
            + bytes("Content-Length: 2\r\ncontent-type: application/json\r\n\r\n[]")
        #expect(eventsForAllSlicings(stream) == [.message(bytes("{}")), .message(bytes("[]"))])
    }

    @Test("spaces around the length, bare LF line ends, and blank lines between messages are tolerated")
    func tolerance() {
        let stream = bytes("Content-Length:2\n\n{}") + bytes("\r\n\r\nContent-Length:   2  \r\n\r\n[]")
        #expect(eventsForAllSlicings(stream) == [.message(bytes("{}")), .message(bytes("[]"))])
    }

    @Test("a zero length gives an empty body")
    func emptyBody() {
        #expect(eventsForAllSlicings(bytes("Content-Length: 0\r\n\r\n")) == [.message([])])
    }

    @Test("a missing length is an error; the next message is still read")
    func missingLength() {
        let stream = bytes("Content-Type: x\r\n\r\n{\"lost\":1}") + framed("{}")
        #expect(eventsForAllSlicings(stream) == [.error(.missingContentLength), .message(bytes("{}"))])
    }

    @Test("negative, non-numeric, empty and huge lengths are errors; the stream resynchronises",
        arguments: [
            ("-5", FramingError.invalidContentLength("-5", "it is negative")),
            ("abc", .invalidContentLength("abc", "it is not a decimal number")),
            ("12abc", .invalidContentLength("12abc", "it is not a decimal number")),
            ("+3", .invalidContentLength("+3", "it is not a decimal number")),
            ("", .invalidContentLength("", "it is empty")),
            ("1.5", .invalidContentLength("1.5", "it is not a decimal number")),
            ("99999999999999999999999", .invalidContentLength("99999999999999999999999", "it is too large")),
        ])
    func badLength(value: String, expected: FramingError) {
        let stream = bytes("Content-Length: \(value)\r\n\r\n{\"jsonrpc\":\"2.0\"}") + framed("[7]")
        #expect(eventsForAllSlicings(stream) == [.error(expected), .message(bytes("[7]"))])
    }

    @Test("a body above the cap is an error and is skipped exactly, unbuffered")
    func oversized() {
        let big = String(repeating: "x", count: 5000)
        let stream = framed("\"\(big)\"") + framed("{}")
        #expect(eventsForAllSlicings(stream, maxMessageSize: 1024) == [.error(.messageTooLarge(length: 5002, limit: 1024)), .message(bytes("{}"))])
        var parser = FrameParser(maxMessageSize: 1024)
        _ = parser.feed(stream.prefix(3000))
        #expect(parser.bufferedByteCount == 0, "an oversized body must not be buffered")
    }

    @Test("an implausible length resynchronises instead of skipping all further input")
    func implausibleLength() {
        let stream = bytes("Content-Length: 1000000000000000\r\n\r\n{}") + framed("[1]")
        #expect(eventsForAllSlicings(stream, maxMessageSize: 1024) == [.error(.invalidContentLength("1000000000000000", "it is implausibly large")), .message(bytes("[1]"))])
    }

    @Test("a header line of the maximum length is accepted however the read splits its CR and LF")
    func maximumLineSplitAtCR() {
        var parser = FrameParser(maxMessageSize: 1024, maxHeaderLineLength: 20)
        let line = "X-Padding: " + String(repeating: "p", count: 9)
        #expect(line.utf8.count == 20)
        #expect(parser.feed(bytes(line + "\r")) == [])
        #expect(parser.feed(bytes("\nContent-Length: 2\r\n\r\n{}")) == [.message(bytes("{}"))])
    }

    @Test("a body exactly at the cap is accepted")
    func atCap() {
        let body = String(repeating: "1", count: 16)
        #expect(eventsForAllSlicings(framed(body), maxMessageSize: 16) == [.message(bytes(body))])
    }

    @Test("two lengths that disagree are an error")
    func conflicting() {
        let stream = bytes("Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}") + framed("1")
        #expect(eventsForAllSlicings(stream) == [.error(.conflictingContentLength), .message(bytes("1"))])
    }

    @Test("raw JSON without a header is named as such, and the next framed message is read")
    func unframed() {
        let stream = bytes("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\n") + framed("{}")
        #expect(eventsForAllSlicings(stream) == [.error(.unframedJSON), .message(bytes("{}"))])
    }

    @Test("raw JSON glued to the next header is skipped up to that header")
    func unframedGlued() {
        let stream = bytes("{\"id\":1}\r\n") + bytes("garbage-without-colon\r\n") + framed("2")
        let result = eventsForAllSlicings(stream)
        #expect(result.first == .error(.unframedJSON))
        #expect(result.last == .message(bytes("2")))
    }

    @Test("a header line with no colon is an error")
    func malformedHeader() {
        let stream = bytes("Hello there\r\n\r\n") + framed("3")
        #expect(eventsForAllSlicings(stream) == [.error(.malformedHeaderLine("Hello there")), .message(bytes("3"))])
    }

    @Test("an endless header line is cut off at the limit")
    func endlessHeader() {
        var parser = FrameParser(maxMessageSize: 1 << 20, maxHeaderLineLength: 100)
        let result = parser.feed(bytes(String(repeating: "a", count: 500)))
        #expect(result == [.error(.headerLineTooLong(limit: 100))])
        #expect(parser.bufferedByteCount < 20, "garbage is discarded while resynchronising")
        #expect(parser.feed(framed("{}")) == [.message(bytes("{}"))])
    }

    @Test("a too-long header line that starts with a valid Content-Length is consumed, not looped on (fuzzer finding F1)")
    func tooLongLineWithValidLength() {
        let line = bytes("Content-Length: 2") + [UInt8](repeating: UInt8(ascii: " "), count: 8200)
        let stream = line + bytes("\r\n\r\n{}") + framed("{}")
        #expect(eventsForAllSlicings(stream) == [.error(.headerLineTooLong(limit: 8192)), .message(bytes("{}"))])
    }

    @Test("while resynchronising, a candidate followed by endless blanks is given up, not buffered (fuzzer finding F3)")
    func resyncBlankRun() {
        var parser = FrameParser()
        #expect(parser.feed(bytes("x\r\nContent-Length: 2")) == [.error(.malformedHeaderLine("x"))])
        for _ in 0..<1000 { _ = parser.feed(bytes("        ")) }
        #expect(parser.bufferedByteCount < 100, "the blank run is not kept")
        #expect(parser.feed(bytes("\r\n") + framed("{}")) == [.message(bytes("{}"))])
    }

    @Test("resynchronisation passes over Content-Length text inside the discarded body")
    func resyncSkipsTextInBody() {
        let stream = bytes(#"Content-Length: abc\#r\#n\#r\#n{"text":"Content-Length: 5","x":"a Content-Length: 9"}"#) + framed("{}")
        #expect(eventsForAllSlicings(stream) == [.error(.invalidContentLength("abc", "it is not a decimal number")), .message(bytes("{}"))])
    }

    @Test("resynchronisation finds a Content-Length split across reads")
    func resyncAcrossReads() {
        var parser = FrameParser()
        #expect(parser.feed(bytes("Content-Length: x\r\n\r\njunk junk Conte")) == [.error(.invalidContentLength("x", "it is not a decimal number"))])
        #expect(parser.feed(bytes("nt-Length: 2\r\n\r\n{}")) == [.message(bytes("{}"))])
    }
}

@Suite("Framing: the write side")
struct FramingWriteTests {
    @Test("the header is exactly Content-Length: N CRLF CRLF, N counting bytes")
    func header() {
        #expect(Framing.frame(bytes("{\"a\":\"é\"}")) == bytes("Content-Length: 10\r\n\r\n{\"a\":\"é\"}"))
    }

    @Test("what the writer frames, the parser reads back")
    func roundTrip() {
        var parser = FrameParser()
        let bodies = ["{}", "[1,2,3]", "\"\u{1F600}\"", ""]
        let stream = bodies.flatMap { Framing.frame(bytes($0)) }
        #expect(parser.feed(stream) == bodies.map { .message(bytes($0)) })
    }
}

@Suite("Framing: the header written")
struct FramingHeaderTests {
    @Test("Content-Length in decimal for every length, then the body; appending after earlier frames")
    func header() {
        for length in [0, 1, 9, 10, 99, 100, 12345, 1 << 20] {
            let body = [UInt8](repeating: 0x61, count: length)
            #expect(Framing.frame(body) == Array("Content-Length: \(length)\r\n\r\n".utf8) + body)
        }
        var output = Framing.frame([0x7B, 0x7D])
        Framing.append([0x5B, 0x5D], to: &output)
        #expect(String(decoding: output, as: UTF8.self) == "Content-Length: 2\r\n\r\n{}Content-Length: 2\r\n\r\n[]")
    }
}
