import Foundation
import JSON
import JSONRPC
import Testing

/// One malformed message and the exact answer it must get.
struct BadMessage: Sendable {
    /// What the byte offset in `error.data.offset` must be.
    enum Offset: Sendable, Equatable {
        /// Exactly this byte of the body.
        case at(Int)
        /// No offset (framing faults, an empty body: there is no byte to point at).
        case absent
        /// Not checked: the parser does not promise one for this case.
        case unchecked
    }

    let label: String
    /// Exactly what goes on the wire, framing included.
    let wire: [UInt8]
    let code: Int64
    let id: JSONValue
    let offset: Offset
    /// For a batch: the number of -32600 responses in the array that answers it.
    var batchCount: Int? = nil

    /// A framed body json-c or the Swift check must refuse, -32700 with id null, the offset at the
    /// first occurrence of `marker` in the body (nil: `offset` decides).
    static func parse(_ label: String, _ body: [UInt8], at marker: [UInt8]? = nil, offset: Offset = .unchecked) -> BadMessage {
        var resolved = offset
        if let marker {
            guard let index = body.firstRange(of: marker)?.lowerBound else { fatalError("marker of \(label) not in its body") }
            resolved = .at(index)
        }
        return BadMessage(label: label, wire: framed(body), code: -32700, id: .null, offset: resolved)
    }

    static func parse(_ label: String, _ body: String, at marker: String? = nil, offset: Offset = .unchecked) -> BadMessage {
        parse(label, Array(body.utf8), at: marker.map { Array($0.utf8) }, offset: offset)
    }

    /// A framing fault (sent as is): -32700 with id null and no offset.
    static func framing(_ label: String, _ wire: String) -> BadMessage {
        BadMessage(label: label, wire: Array(wire.utf8), code: -32700, id: .null, offset: .absent)
    }

    /// A body that parses but is answered with `code` under `id`.
    static func rpc(_ label: String, _ body: String, code: Int64, id: JSONValue) -> BadMessage {
        BadMessage(label: label, wire: framed(body), code: code, id: id, offset: .absent)
    }
}

/// Builds `open` repeated `depth` times, a core, then `close` repeated `depth` times.
func nested(_ depth: Int, open: String = "[", close: String = "]", core: String = "") -> String {
    String(repeating: open, count: depth) + core + String(repeating: close, count: depth)
}

@Suite("The barrage: every kind of bad input in one session")
struct BarrageTests {
    static let request = #"{"jsonrpc":"2.0","id":1,"method":"probe","params":"#

    static let badMessages: [BadMessage] = [
        // Nesting.
        .parse("arrays nested 65 deep", nested(65), offset: .at(64)),
        .parse("arrays nested 100000 deep", nested(100_000), offset: .at(64)),
        .parse("objects nested 65 deep", nested(65, open: #"{"a":"#, close: "}", core: "1"), offset: .at(5 * 64)),
        .parse("a request whose params reach depth 65", request + nested(64, core: "1") + "}",
            offset: .at(request.utf8.count + 63)),
        // Numbers.
        .parse("2^64 as an id", #"{"jsonrpc":"2.0","id":18446744073709551616,"method":"probe"}"#, at: "18446744073709551616"),
        .parse("-2^63-1 as an id", #"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"probe"}"#, at: "-9223372036854775809"),
        .parse("a 100-digit integer", request + "[" + String(repeating: "9", count: 100) + "]}", at: "999"),
        .parse("1e400", request + #"{"x":1e400}}"#, at: "1e400"),
        .parse("-1e400", request + #"[-1e400]}"#, at: "-1e400"),
        .parse("NaN", request + #"{"x":NaN}}"#, at: "NaN"),
        .parse("Infinity", request + #"{"x":Infinity}}"#, at: "Infinity"),
        .parse("-Infinity", request + #"{"x":-Infinity}}"#, at: "-Infinity"),
        .parse("hexadecimal 0x10", "0x10", offset: .at(0)),
        .parse("hexadecimal in a request", request + "[0x10]}", at: "0x10"),
        .parse("1. without digits after the point", "1.", offset: .at(0)),
        .parse(".5 without a leading digit", request + "[.5]}", at: ".5"),
        .parse("a leading zero, 01", request + "[01]}", at: "01"),
        .parse("an exponent without digits, 1e", request + "[1e]}", at: "1e"),
        .parse("a point before an exponent, 1.e5", request + "[1.e5]}", at: "1.e5"),
        .parse("a lone minus", request + "[-]}", at: "-]"),
        .parse("a plus sign, +1", request + "[+1]}", at: "+1"),
        // Strings.
        .parse("single-quoted strings", "{'jsonrpc':'2.0','id':1,'method':'probe'}", offset: .at(1)),
        .parse("a raw tab in a string", "{\"jsonrpc\":\"2.0\",\"id\":\"tab\there\",\"method\":\"probe\"}", at: "\t"),
        .parse("a raw newline in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pro\nbe\"}", at: "\n"),
        .parse("a raw NUL byte in a string", Array(#"{"jsonrpc":"2.0","id":"nul"#.utf8) + [0] + Array(#"","method":"probe"}"#.utf8),
            at: [0]),
        .parse("a lone \\ud800 escape", #"{"jsonrpc":"2.0","id":"\ud800","method":"probe"}"#, at: #"\ud800"#),
        .parse("a lone \\udc00 escape", #"{"jsonrpc":"2.0","id":"x\udc00","method":"probe"}"#, at: #"\udc00"#),
        .parse("\\ud800 followed by a non-surrogate escape", #"{"jsonrpc":"2.0","id":"\ud800\u0041","method":"probe"}"#,
            at: #"\ud800"#),
        .parse("an invalid escape \\x", #"{"jsonrpc":"2.0","id":"\x41","method":"probe"}"#, at: #"\x"#),
        .parse("a short \\u escape", #"{"jsonrpc":"2.0","id":"\u12","method":"probe"}"#, at: #"\u12"#),
        .parse("an unterminated string", #"{"jsonrpc":"2.0","id":"open"#, at: #""open"#),
        .parse("\\u0000 in a member name", #"{"jsonrpc":"2.0","id":1,"method":"probe","params":{"a\u0000b":1}}"#,
            at: ":1}}"),
        // UTF-8.
        .parse("overlong C0 AF", Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0xC0, 0xAF] + Array(#"","method":"probe"}"#.utf8),
            at: [0xC0]),
        .parse("an encoded surrogate ED A0 80", Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#"","method":"probe"}"#.utf8),
            at: [0xED]),
        .parse("a lead byte F5", Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0xF5, 0x80, 0x80, 0x80] + Array(#"","method":"probe"}"#.utf8),
            at: [0xF5]),
        .parse("a code point above U+10FFFF, F4 90 80 80",
            Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#"","method":"probe"}"#.utf8), at: [0xF4]),
        .parse("a byte FF", Array(#"{"jsonrpc":"2.0","id":"x"#.utf8) + [0xFF] + Array(#"","method":"probe"}"#.utf8), at: [0xFF]),
        .parse("a truncated sequence E2 82", Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0xE2, 0x82] + Array(#"","method":"probe"}"#.utf8),
            at: [0xE2]),
        .parse("a continuation byte alone", Array(#"{"jsonrpc":"2.0","id":""#.utf8) + [0x80] + Array(#"","method":"probe"}"#.utf8),
            at: [0x80]),
        .parse("invalid UTF-8 outside a string", Array(#"{"jsonrpc":"2.0","id":1,"method":"probe"} "#.utf8) + [0xC3], at: [0xC3]),
        .parse("a BOM before the body", [0xEF, 0xBB, 0xBF] + Array(#"{"jsonrpc":"2.0","id":1,"method":"probe"}"#.utf8),
            offset: .at(0)),
        // Structure.
        .parse("an empty body", "", offset: .absent),
        .parse("a body of whitespace", " \r\n\t ", offset: .absent),
        .parse("trailing garbage {} x", "{} x", offset: .at(3)),
        .parse("two objects in one body", "{}{}", offset: .at(2)),
        .parse("a request followed by another", #"{"jsonrpc":"2.0","id":1,"method":"probe"}[]"#, at: "[]"),
        .parse("a duplicate id", #"{"jsonrpc":"2.0","id":1,"id":2,"method":"probe"}"#, at: #""id":2"#),
        .parse("a duplicate id spelt with an escape", #"{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"probe"}"#),
        .parse("a duplicate member in params", request + #"{"a":1,"b":2,"a":3}}"#, at: #""a":3"#),
        .parse("a trailing comma in an array", request + "[1,]}", at: "]}"),
        .parse("a trailing comma in an object", #"{"jsonrpc":"2.0","id":1,"method":"probe",}"#, at: "}"),
        .parse("a missing colon", #"{"jsonrpc" "2.0"}"#),
        .parse("an unclosed object", #"{"jsonrpc":"2.0","id":1,"method":"probe""#),
        .parse("a stray closing bracket", "]", offset: .at(0)),
        .parse("tru", request + "[tru]}", at: "tru"),
        .parse("nul", request + "[nul]}", at: "nul"),
        .parse("True", request + "[True]}", at: "True"),
        .parse("a comment", "/* hi */ {}", offset: .at(0)),
        // Framing.
        .framing("a missing Content-Length", "Content-Type: application/vscode-jsonrpc\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":\"lost\",\"method\":\"x\"}"),
        .framing("a negative Content-Length", "Content-Length: -1\r\n\r\n{}"),
        .framing("a non-numeric Content-Length", "Content-Length: twelve\r\n\r\n{}"),
        .framing("a Content-Length of 30 digits", "Content-Length: 123456789012345678901234567890\r\n\r\n{}"),
        .framing("two Content-Lengths that disagree", "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
        .framing("a header line without a colon", "Content-Length: 2\r\nnonsense\r\n\r\n{}"),
        .framing("unframed JSON", "{\"jsonrpc\":\"2.0\",\"id\":\"lost\",\"method\":\"x\"}\r\n"),
        // JSON-RPC.
        .rpc("a number as the message", "1", code: -32600, id: .null),
        .rpc("a string as the message", #""probe""#, code: -32600, id: .null),
        .rpc("null as the message", "null", code: -32600, id: .null),
        .rpc("an empty object", "{}", code: -32600, id: .null),
        .rpc("an empty batch", "[]", code: -32600, id: .null),
        BadMessage(label: "a batch of one number", wire: framed("[1]"), code: -32600, id: .null, offset: .absent, batchCount: 1),
        BadMessage(label: "a batch of three numbers", wire: framed("[1,2,3]"), code: -32600, id: .null, offset: .absent, batchCount: 3),
        .rpc("jsonrpc missing", #"{"id":9,"method":"probe"}"#, code: -32600, id: 9),
        .rpc("jsonrpc 1.0", #"{"jsonrpc":"1.0","id":9,"method":"probe"}"#, code: -32600, id: 9),
        .rpc("jsonrpc 2.0 as a number", #"{"jsonrpc":2.0,"id":9,"method":"probe"}"#, code: -32600, id: 9),
        .rpc("method a number", #"{"jsonrpc":"2.0","id":9,"method":1}"#, code: -32600, id: 9),
        .rpc("method missing", #"{"jsonrpc":"2.0","id":9}"#, code: -32600, id: 9),
        .rpc("params a string", #"{"jsonrpc":"2.0","id":9,"method":"probe","params":"x"}"#, code: -32600, id: 9),
        .rpc("params a number", #"{"jsonrpc":"2.0","id":9,"method":"probe","params":1}"#, code: -32600, id: 9),
        .rpc("params a boolean", #"{"jsonrpc":"2.0","id":"nine","method":"shutdown","params":false}"#, code: -32600, id: "nine"),
        .rpc("an object id", #"{"jsonrpc":"2.0","id":{"n":9},"method":"probe"}"#, code: -32600, id: .null),
        .rpc("an array id", #"{"jsonrpc":"2.0","id":[9],"method":"probe"}"#, code: -32600, id: .null),
        .rpc("a boolean id", #"{"jsonrpc":"2.0","id":true,"method":"shutdown"}"#, code: -32600, id: .null),
        .rpc("an unknown method", #"{"jsonrpc":"2.0","id":9,"method":"document/frobnicate"}"#, code: -32601, id: 9),
        .rpc("a second initialize", #"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}"#, code: -32600, id: 9),
        .rpc("shutdown with positional params", #"{"jsonrpc":"2.0","id":9,"method":"shutdown","params":[1]}"#, code: -32602, id: 9),
        .rpc("shutdown with params", #"{"jsonrpc":"2.0","id":9,"method":"shutdown","params":{"force":true}}"#, code: -32602, id: 9),
    ]

    @Test("every malformed message gets exactly its error, and the request after it is answered")
    func barrage() throws {
        let session = try Session()
        try session.initialize()
        try session.notify("initialized")
        #expect(Self.badMessages.count >= 30)
        for (index, bad) in Self.badMessages.enumerated() {
            let goodID = JSONValue.string("good-\(index)")
            // The bad message and the good request in one write: one read sees both.
            try session.sendRaw(bad.wire + framed(requestText(id: goodID, method: "probe/\(index)")))
            let answer = try session.next()
            if let count = bad.batchCount {
                let elements = answer.arrayValue ?? []
                #expect(elements.count == count, "[\(bad.label)] expected an array of \(count), got \(answer.jsonText)")
                for element in elements { expectError(element, code: bad.code, id: bad.id, bad.label) }
            } else {
                let error = expectError(answer, code: bad.code, id: bad.id, bad.label)
                switch bad.offset {
                case .at(let offset):
                    #expect(error?["data"]?["offset"] == .integer(Int64(offset)), "[\(bad.label)] offset: \(answer.jsonText)")
                case .absent:
                    #expect(error?["data"]?["offset"] == nil, "[\(bad.label)] offset: \(answer.jsonText)")
                case .unchecked:
                    break
                }
            }
            let good = try session.next()
            let goodError = expectError(good, code: -32601, id: goodID, "the request after \(bad.label)")
            #expect(goodError?["message"]?.stringValue?.contains("probe/\(index)") == true, "[\(bad.label)] \(good.jsonText)")
        }
        try session.shutdownAndExit()
    }
}

/// Inputs at the edges of what is valid: accepted, and echoed exactly.
@Suite("Valid input at the edges")
struct EdgeTests {
    @Test("integers at the Int64 boundaries are accepted, as ids and in params")
    func int64BoundariesAreAccepted() throws {
        let session = try Session()
        try session.sendBody(#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"initialize","params":{"processId":-9223372036854775808}}"#)
        expectResult(try session.next(), id: .integer(Int64.max))
        try session.sendBody(#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"probe","params":[9223372036854775807,-9223372036854775808]}"#)
        expectError(try session.next(), code: -32601, id: .integer(Int64.min))
        try session.sendBody(#"{"jsonrpc":"2.0","id":0,"method":"probe","params":[-0, 0.0, -1e-400, 1e308, 123456789.123456789]}"#)
        expectError(try session.next(), code: -32601, id: 0)
        try session.shutdownAndExit()
    }

    @Test("nesting 64 deep is accepted, 65 refused")
    func nestingOf64IsAccepted() throws {
        let session = try Session()
        try session.initialize()
        // The message object is level 1, its params level 2: 62 more arrays reach 64.
        try session.sendBody(#"{"jsonrpc":"2.0","id":"deep","method":"probe","params":{"a":"# + nested(62, core: "1") + "}}")
        expectError(try session.next(), code: -32601, id: "deep")
        try session.sendBody(#"{"jsonrpc":"2.0","id":"deep","method":"probe","params":{"a":"# + nested(63, core: "1") + "}}")
        expectError(try session.next(), code: -32700, id: .null)
        try session.sendBody(nested(64))
        let batch = try session.next()
        expectError(batch.arrayValue?.first ?? .null, code: -32600, id: .null)
        try session.expectNothingElse()
        try session.shutdownAndExit()
    }

    @Test("\\u0000 inside a string round-trips, as an id echoed back")
    func nulInsideAStringRoundTrips() throws {
        let session = try Session()
        try session.initialize()
        try session.sendBody(#"{"jsonrpc":"2.0","id":"a\u0000b\u0000","method":"probe"}"#)
        expectError(try session.next(), code: -32601, id: .string("a\u{0}b\u{0}"))
        try session.shutdownAndExit()
    }

    @Test("escapes and non-ASCII text round-trip as ids")
    func escapesRoundTrip() throws {
        let session = try Session()
        try session.initialize()
        let cases: [(String, String)] = [
            (#""\ud83d\ude00""#, "😀"),
            (#""\"\\\/\b\f\n\r\t""#, "\"\\/\u{8}\u{c}\n\r\t"),
            (#""\u00e9\u4e2d\u001f""#, "é中\u{1f}"),
            ("\"é中😀\"", "é中😀"),
            (#""\uD83D\uDE00""#, "😀"),
        ]
        for (literal, value) in cases {
            try session.sendBody(#"{"jsonrpc":"2.0","id":"# + literal + #","method":"probe"}"#)
            expectError(try session.next(), code: -32601, id: .string(value), literal)
        }
        try session.shutdownAndExit()
    }

    @Test("ids are echoed byte for byte, \\u0000 is written escaped and / is not escaped")
    func outputBytesAreExact() throws {
        var input = framed(#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#)
        let ids = ["9223372036854775807", "-9223372036854775808", "0", "-1", #""a/b""#, #""a\/b/c""#, #""nul\u0000""#, #""""#]
        for id in ids { input += framed(#"{"jsonrpc":"2.0","id":"# + id + #","method":"x/y"}"#) }
        input += framed(#"{"jsonrpc":"2.0","id":2,"method":"shutdown"}"#) + framed(#"{"jsonrpc":"2.0","method":"exit"}"#)
        let run = try RawRun.run([], input: input)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let bodies = try run.strictBodies().map { String(decoding: $0, as: UTF8.self) }
        #expect(bodies.count == ids.count + 2)
        let expected = ["9223372036854775807", "-9223372036854775808", "0", "-1", #""a/b""#, #""a/b/c""#, #""nul\u0000""#, #""""#]
        for (index, id) in expected.enumerated() where index + 1 < bodies.count {
            #expect(bodies[index + 1].contains(#""id":"# + id + ","), "\(bodies[index + 1])")
            #expect(bodies[index + 1].contains("Method not found: x/y"), "\(bodies[index + 1])")
        }
        #expect(!run.stdoutText.contains(#"\/"#))
    }
}
