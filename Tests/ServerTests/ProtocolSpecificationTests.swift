import JSON
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

    @Test("every notification the server sends is described, and nothing else is")
    func serverNotifications() throws {
        let described = try methods(direction: "server-to-client")
        #expect(described == Server.serverNotifications)
    }
}
