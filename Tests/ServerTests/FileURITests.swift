import Testing

@testable import Server

@Suite("file:// URIs")
struct FileURITests {
    @Test("paths decode, percent escapes included", arguments: [
        ("file:///tmp/a.txt", "/tmp/a.txt"),
        ("file://localhost/tmp/a.txt", "/tmp/a.txt"),
        ("file:///tmp/with%20space/%C3%A9t%C3%A9.md", "/tmp/with space/été.md"),
        ("FILE:///x", "/x"),
        ("file:///tmp/%25literal", "/tmp/%literal"),
    ])
    func decode(uri: String, path: String) throws {
        #expect(try FileURI.path(from: uri) == path)
    }

    @Test("bad URIs are refused with a reason", arguments: [
        "http://example.com/a", "file://host/a", "file:relative", "/tmp/a", "file:///a?x=1", "file:///a#f",
        "file:///a%2", "file:///a%zz", "file:///a%00b", "file:///a%FF",
    ])
    func refuse(uri: String) {
        #expect(throws: FileURI.Invalid.self) { try FileURI.path(from: uri) }
    }

    @Test("URIs the server writes round-trip and escape what needs escaping")
    func encode() throws {
        let path = "/tmp/a b/été#1?.txt"
        let uri = FileURI.uri(from: path)
        #expect(uri == "file:///tmp/a%20b/%C3%A9t%C3%A9%231%3F.txt")
        #expect(try FileURI.path(from: uri) == path)
    }
}
