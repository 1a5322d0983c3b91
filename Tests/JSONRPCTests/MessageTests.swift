import JSON
import Testing

@testable import JSONRPC

private func classify(_ text: String) throws -> IncomingMessage {
    IncomingMessage(try JSONParser().parse(text))
}

private func invalidCode(_ message: IncomingMessage) -> (RequestID, Int)? {
    if case .invalid(let id, let error) = message { return (id, error.code.rawValue) }
    return nil
}

@Suite("JSON-RPC message classification")
struct MessageTests {
    @Test("a request keeps its id, method and params")
    func request() throws {
        #expect(try classify(#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a":1}}"#)
            == .request(Request(id: .integer(7), method: "m", params: ["a": 1])))
    }

    @Test("no id means a notification; an id of null means a request answered under null")
    func notificationVersusNullID() throws {
        #expect(try classify(#"{"jsonrpc":"2.0","method":"n"}"#) == .notification(Notification(method: "n")))
        #expect(try classify(#"{"jsonrpc":"2.0","id":null,"method":"n"}"#) == .request(Request(id: .null, method: "n")))
    }

    @Test("params null is the same as absent params")
    func nullParams() throws {
        #expect(try classify(#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#) == .request(Request(id: .integer(1), method: "m")))
    }

    @Test("ids of every allowed kind are kept exactly")
    func ids() throws {
        #expect(try classify(#"{"jsonrpc":"2.0","id":"abc-é","method":"m"}"#) == .request(Request(id: .string("abc-é"), method: "m")))
        #expect(try classify(#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}"#) == .request(Request(id: .integer(.min), method: "m")))
        #expect(try classify(#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#) == .request(Request(id: .double(1.5), method: "m")))
        #expect(Response.success(.string("a/b"), .null).json.jsonText == #"{"jsonrpc":"2.0","id":"a/b","result":null}"#)
    }

    @Test("invalid request objects are -32600, under the id when it could be read",
        arguments: [
            (#"1"#, RequestID.null),
            (#""x""#, .null),
            (#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, .null),
            (#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#, .null),
            (#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, .null),
            (#"{"id":4,"method":"m"}"#, .integer(4)),
            (#"{"jsonrpc":"1.0","id":4,"method":"m"}"#, .integer(4)),
            (#"{"jsonrpc":2.0,"id":"s","method":"m"}"#, .string("s")),
            (#"{"jsonrpc":"2.0","id":5,"method":1}"#, .integer(5)),
            (#"{"jsonrpc":"2.0","id":5,"method":"m","params":"p"}"#, .integer(5)),
            (#"{"jsonrpc":"2.0","id":5,"method":"m","params":3}"#, .integer(5)),
            (#"{"jsonrpc":"2.0","id":6}"#, .integer(6)),
            (#"{"jsonrpc":"2.0"}"#, .null),
            (#"{"jsonrpc":"2.0","id":6,"result":1,"error":{"code":1,"message":"m"}}"#, .integer(6)),
            (#"{"jsonrpc":"2.0","id":6,"error":{"code":"x"}}"#, .integer(6)),
        ])
    func invalid(text: String, id: RequestID) throws {
        let result = invalidCode(try classify(text))
        #expect(result?.0 == id)
        #expect(result?.1 == -32600)
    }

    @Test("responses from the client are recognised, not answered")
    func responses() throws {
        #expect(try classify(#"{"jsonrpc":"2.0","id":3,"result":{"ok":true}}"#) == .response(.success(.integer(3), ["ok": true])))
        #expect(try classify(#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#)
            == .response(.failure(.integer(3), ResponseError(ErrorCode(rawValue: -1), "no"))))
    }

    @Test("responses serialise with jsonrpc, id and result or error")
    func responseJSON() {
        let error = ResponseError.invalidParams(field: "params.x", "expected an integer, got a string")
        #expect(Response.failure(.integer(2), error).json.jsonText
            == #"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"params.x: expected an integer, got a string","data":{"field":"params.x"}}}"#)
    }
}

@Suite("Params reading")
struct ParamsTests {
    private func params(_ text: String) throws -> Params {
        try Params(byName: try JSONParser().parse(text), method: "m")
    }

    @Test("absent and null params read as an empty object; an array is refused naming params")
    func byName() throws {
        #expect(try Params(byName: nil, method: "m").object.isEmpty)
        #expect(try Params(byName: .null, method: "m").object.isEmpty)
        #expect(throws: ResponseError.invalidParams(field: "params", "m takes its params by name (an object), not an array")) {
            try Params(byName: [1], method: "m")
        }
    }

    @Test("type checks are exact and name the field")
    func typeChecks() throws {
        let p = try params(#"{"n":"123abc","d":1.5,"s":7,"o":{"list":["a",2]}}"#)
        #expect(throws: ResponseError.invalidParams(field: "params.n", "expected an integer, got a string")) { try p.integer("n") }
        #expect(throws: ResponseError.invalidParams(field: "params.d", "expected an integer, got a non-integral number")) { try p.integer("d") }
        #expect(throws: ResponseError.invalidParams(field: "params.s", "expected a string, got an integer")) { try p.string("s") }
        #expect(throws: ResponseError.invalidParams(field: "params.missing", "missing (a string is required)")) { try p.string("missing") }
        let nested = try #require(try p.optionalObject("o"))
        #expect(throws: ResponseError.invalidParams(field: "params.o.list[1]", "expected a string, got an integer")) { try nested.optionalStringArray("list") }
    }

    @Test("ranges are checked")
    func ranges() throws {
        let p = try params(#"{"v":-1,"w":5}"#)
        #expect(throws: ResponseError.invalidParams(field: "params.v", "-1 is out of range 0...2147483647")) { try p.integer("v", in: 0...2_147_483_647) }
        #expect(try p.integer("w", in: 0...10) == 5)
    }

    @Test("enumerations list what is allowed")
    func enumerations() throws {
        let p = try params(#"{"t":"loud"}"#)
        #expect(throws: ResponseError.invalidParams(field: "params.t", #""loud" is not one of "off", "on""#)) { try p.optionalEnumeration("t", ["off", "on"]) }
    }

    @Test("methods without params accept absent, null, {} and [] only")
    func none() throws {
        try Params.expectNone(nil, method: "m")
        try Params.expectNone(.null, method: "m")
        try Params.expectNone([:], method: "m")
        try Params.expectNone([], method: "m")
        #expect(throws: ResponseError.self) { try Params.expectNone(["a": 1], method: "m") }
    }

    @Test("a method without params refuses any given, naming the first by its path and saying why")
    func noneNamesTheField() throws {
        #expect(throws: ResponseError.invalidParams(field: "params.save", "not a param of m, which takes none: send no params, or null, {} or []")) {
            try Params.expectNone(["save": true], method: "m")
        }
        #expect(throws: ResponseError.invalidParams(field: "params.b", "not a param of m, which takes none (the first of 2 given): send no params, or null, {} or []")) {
            try Params.expectNone(.object(JSONObject([("b", .null), ("a", 1)])), method: "m")
        }
        #expect(throws: ResponseError.invalidParams(field: "params[0]", "not a param of m, which takes none (the first of 3 given): send no params, or null, {} or []")) {
            try Params.expectNone([1, 2, 3], method: "m")
        }
    }
}
