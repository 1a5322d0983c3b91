import JSON
import JSONRPC
import Logging
import Synchronization
import Testing

@testable import Server

private final class Sent: Sendable {
    let messages = Mutex<[JSONValue]>([])
    var all: [JSONValue] { messages.withLock { $0 } }
}

/// A server whose outgoing notifications are captured.
private func makeServer() -> (Server, Sent) {
    let sent = Sent()
    let writer = MessageWriter(sink: { bytes in
        var parser = FrameParser()
        for case .message(let body) in parser.feed(bytes) {
            let value = try! JSONParser().parse(body)
            sent.messages.withLock { $0.append(value) }
        }
        return true
    })
    return (Server(writer: writer, logger: Logger(label: "test")), sent)
}

private func call(_ server: Server, _ method: String, _ params: JSONValue? = nil, id: Int64 = 1) async -> Result<JSONValue, ResponseError> {
    switch await server.handle(Request(id: .integer(id), method: method, params: params), context: RequestContext(id: .integer(id), method: method)) {
    case .now(let result): return result
    case .later(let work, let answered):
        // As the connection does: what the answer lets go of (a document's turn), once it is out.
        let result = await work()
        await answered?()
        return result
    }
}

private func errorCode(_ result: Result<JSONValue, ResponseError>) -> Int? {
    if case .failure(let error) = result { return error.code.rawValue }
    return nil
}

@Suite("Server lifecycle")
struct ServerLifecycleTests {
    @Test("requests before initialize get -32002, unknown methods included")
    func beforeInitialize() async {
        let (server, _) = makeServer()
        #expect(errorCode(await call(server, "shutdown")) == -32002)
        #expect(errorCode(await call(server, "no/such")) == -32002)
        #expect(await server.lifecycle == .uninitialized)
    }

    @Test("the first position encoding the client lists wins",
        arguments: [
            (["utf-8", "utf-16"], "utf-8"),
            (["utf-32", "utf-8"], "utf-32"),
            (["latin-1", "utf-16", "utf-8"], "utf-16"),
            (["ucs-2"], "utf-16"),
            ([], "utf-16"),
        ])
    func negotiation(offered: [String], chosen: String) async throws {
        let (server, _) = makeServer()
        let params: JSONValue = ["capabilities": ["general": ["positionEncodings": .array(offered.map { .string($0) })]]]
        let result = try await call(server, "initialize", params).get()
        #expect(result["capabilities"]?["positionEncoding"] == .string(chosen))
        #expect(await server.positionEncoding.rawValue == chosen)
    }

    @Test("the short form capabilities.positionEncodings is read too; nothing listed means utf-16")
    func shortFormAndDefault() async throws {
        let (server, _) = makeServer()
        let result = try await call(server, "initialize", ["capabilities": ["positionEncodings": ["utf-32"]]]).get()
        #expect(result["capabilities"]?["positionEncoding"] == "utf-32")
        let (plain, _) = makeServer()
        let defaulted = try await call(plain, "initialize", nil).get()
        #expect(defaulted["capabilities"]?["positionEncoding"] == "utf-16")
        #expect(defaulted["serverInfo"]?["name"] == "docsession")
    }

    @Test("bad initialize params name the field and leave the server uninitialized")
    func badInitialize() async {
        let (server, _) = makeServer()
        let result = await call(server, "initialize", ["capabilities": ["general": ["positionEncodings": ["utf-8", 8]]]])
        guard case .failure(let error) = result else {
            Issue.record("expected an error")
            return
        }
        #expect(error.code == .invalidParams)
        #expect(error.data?["field"] == "params.capabilities.general.positionEncodings[1]")
        #expect(await server.lifecycle == .uninitialized)
        #expect(errorCode(await call(server, "initialize", ["trace": "loud"])) == -32602)
        #expect(errorCode(await call(server, "initialize", ["processId": "12"])) == -32602)
        #expect(errorCode(await call(server, "initialize", [1, 2])) == -32602)
        #expect((try? await call(server, "initialize", ["processId": 12]).get()) != nil)
        #expect(await server.lifecycle == .running)
    }

    @Test("a second initialize is -32600; unknown methods are -32601")
    func afterInitialize() async {
        let (server, _) = makeServer()
        _ = await call(server, "initialize")
        #expect(errorCode(await call(server, "initialize")) == -32600)
        #expect(errorCode(await call(server, "no/such")) == -32601)
    }

    @Test("a notification sent with an id is -32600; a request sent without one is not acted on")
    func wrongKind() async {
        let (server, _) = makeServer()
        _ = await call(server, "initialize")
        #expect(errorCode(await call(server, "exit")) == -32600)
        #expect(errorCode(await call(server, "$/cancelRequest", ["id": 1])) == -32600)
        #expect(server.exitStatus == nil)
        await server.handle(Notification(method: "shutdown"))
        #expect(await server.lifecycle == .running)
    }

    @Test("shutdown answers null, then requests get -32600 and exit gives status 0")
    func shutdownThenExit() async {
        let (server, _) = makeServer()
        _ = await call(server, "initialize")
        #expect((try? await call(server, "shutdown").get()) == .null)
        #expect(errorCode(await call(server, "shutdown")) == -32600)
        #expect(server.exitStatus == nil)
        await server.handle(Notification(method: "exit"))
        #expect(server.exitStatus == 0)
    }

    @Test("shutdown with params is -32602")
    func shutdownParams() async {
        let (server, _) = makeServer()
        _ = await call(server, "initialize")
        #expect(errorCode(await call(server, "shutdown", ["now": true])) == -32602)
        #expect(await server.lifecycle == .running)
    }

    @Test("exit without shutdown gives status 1, even before initialize")
    func exitWithoutShutdown() async {
        let (server, _) = makeServer()
        await server.handle(Notification(method: "exit"))
        #expect(server.exitStatus == 1)
    }

    @Test("exit and initialized are acted on whatever their params (they are not read)")
    func notificationParamsNotRead() async {
        let (server, _) = makeServer()
        await server.handle(Notification(method: "initialized", params: [1]))
        await server.handle(Notification(method: "exit", params: ["any": "thing"]))
        #expect(server.exitStatus == 1)
    }

    @Test("every params member is checked before the store is asked: a bad member of a request for an unknown document is -32602")
    func paramsBeforeStore() async throws {
        let (server, _) = makeServer()
        _ = await call(server, "initialize")
        let unknown = await call(server, "document/delete", ["document": "d404"])
        #expect(errorCode(unknown) == -32011)
        guard case .failure(let error) = await call(server, "document/delete", ["document": "d404", "discard": "yes"]) else {
            Issue.record("a bad discard was accepted")
            return
        }
        #expect(error.code == .invalidParams)
        #expect(error.message == "params.discard: expected a boolean, got a string")
    }

    @Test("end of input gives status 0 after shutdown, else 1")
    func endOfInput() async {
        let (server, _) = makeServer()
        #expect(await server.inputEnded(midMessage: false) == 1)
        _ = await call(server, "initialize")
        _ = await call(server, "shutdown")
        #expect(await server.inputEnded(midMessage: true) == 0)
    }

    @Test("$/setTrace turns $/logTrace notifications on, verbose adds the params, off stops them")
    func tracing() async {
        let (server, sent) = makeServer()
        _ = await call(server, "initialize")
        await server.handle(Notification(method: "$/setTrace", params: ["value": "messages"]))
        _ = await call(server, "no/such", ["a": 1], id: 5)
        #expect(sent.all.count == 2)
        #expect(sent.all.first?["method"] == "$/logTrace")
        #expect(sent.all.first?["params"]?["message"] == "Received request 'no/such - (5)'.")
        #expect(sent.all.first?["params"]?["verbose"] == nil)
        await server.handle(Notification(method: "$/setTrace", params: ["value": "verbose"]))
        _ = await call(server, "no/such", ["a": 1], id: 6)
        #expect(sent.all.count == 5)
        #expect(sent.all[3]["params"]?["verbose"] == #"{"a":1}"#)
        await server.handle(Notification(method: "$/setTrace", params: ["value": "off"]))
        _ = await call(server, "no/such", id: 7)
        #expect(sent.all.count == 6)
        #expect(await server.trace == .off)
    }

    @Test("a bad $/setTrace is ignored")
    func badSetTrace() async {
        let (server, _) = makeServer()
        _ = await call(server, "initialize", ["trace": "messages"])
        await server.handle(Notification(method: "$/setTrace", params: ["value": "everything"]))
        await server.handle(Notification(method: "$/setTrace", params: nil))
        #expect(await server.trace == .messages)
    }
}
