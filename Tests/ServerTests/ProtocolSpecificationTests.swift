import JSON
import JSONRPC
import Logging
import Testing

@testable import Server

/// The repository's protocol/openrpc.json, found from this file's location.
private func loadSpecification() throws -> JSONValue {
    let testsDirectory = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
    let path = "/" + testsDirectory + "/protocol/openrpc.json"
    guard let file = fopen(path, "rb") else { throw SpecificationMissing(path: path) }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes += chunk[0..<count]
    }
    return try JSONParser().parse(bytes)
}

private struct SpecificationMissing: Error { let path: String }

#if canImport(Glibc)
    import Glibc
#endif

@Suite("protocol/openrpc.json and the server agree")
struct ProtocolSpecificationTests {
    private func methods(direction: String) throws -> Set<String> {
        let specification = try loadSpecification()
        let methods = try #require(specification["methods"]?.arrayValue)
        return Set(methods.compactMap { method -> String? in
            let methodDirection = method["x-direction"]?.stringValue ?? "client-to-server"
            return methodDirection == direction ? method["name"]?.stringValue : nil
        })
    }

    @Test("every method a client may send is described, and nothing described is missing from the server")
    func clientMethods() throws {
        let described = try methods(direction: "client-to-server")
        #expect(described == Server.clientMethods, "described but not served: \(described.subtracting(Server.clientMethods)); served but not described: \(Server.clientMethods.subtracting(described))")
    }

    @Test("the registry names each method once, and the dispatcher's tables and clientMethods are built from it")
    func registry() {
        let requests = Server.requests.map(\.method)
        let notifications = Server.notifications.map(\.method)
        #expect(Set(requests).count == requests.count, "a request registered twice: \(requests)")
        #expect(Set(notifications).count == notifications.count, "a notification registered twice: \(notifications)")
        #expect(Set(requests).isDisjoint(with: notifications))
        #expect(Set(Server.requestHandlers.keys) == Set(requests))
        #expect(Set(Server.notificationHandlers.keys) == Set(notifications))
        #expect(Server.clientMethods == Set(requests + notifications + ["$/cancelRequest"]))
    }

    @Test("the registry's requests are the specification's requests, and its notifications its notifications")
    func requestsAndNotifications() throws {
        let specification = try loadSpecification()
        let methods = try #require(specification["methods"]?.arrayValue).filter {
            ($0["x-direction"]?.stringValue ?? "client-to-server") == "client-to-server"
        }
        let described = methods.filter { $0["x-notification"] != .bool(true) }.compactMap { $0["name"]?.stringValue }
        let describedNotifications = methods.filter { $0["x-notification"] == .bool(true) }.compactMap { $0["name"]?.stringValue }
        #expect(Set(described) == Set(Server.requests.map(\.method)))
        // `$/cancelRequest` is applied by the connection, ahead of the queue.
        #expect(Set(describedNotifications) == Set(Server.notifications.map(\.method) + ["$/cancelRequest"]))
    }

    @Test("each registered request reads its params as its own method (an array of params is refused naming it)")
    func entriesDecodeAsTheirMethod() async throws {
        let server = Server(writer: MessageWriter(sink: { _ in true }), logger: Logger(label: "test"))
        for entry in Server.requests {
            let request = Request(id: .integer(1), method: entry.method, params: [1])
            guard case .now(.failure(let error)) = await entry.run(server, request, RequestContext(id: .integer(1), method: entry.method)) else {
                Issue.record("\(entry.method) accepted an array of params")
                continue
            }
            #expect(error.code == .invalidParams)
            // The methods that take no params say so; the others want an object.
            let expected = ["shutdown", "workspace/recoverable", "session/snapshot"].contains(entry.method)
                ? "not a param of \(entry.method), which takes none: send no params, or null, {} or []"
                : "\(entry.method) takes its params by name (an object), not an array"
            #expect(error.message.hasSuffix(expected), "\(entry.method): \(error.message)")
        }
    }

    @Test("every notification and request the server sends is described, and nothing else is")
    func serverNotifications() throws {
        let described = try methods(direction: "server-to-client")
        #expect(described == Server.serverNotifications.union(Server.serverRequests))
        #expect(Server.serverNotifications.isDisjoint(with: Server.serverRequests))
    }
}
