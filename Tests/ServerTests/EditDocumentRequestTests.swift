import JSON
import JSONRPC
import Testing
import TextBuffer

@testable import Server

/// `document/edit`'s params read two ways: straight from json-c's tree (the predecoder, on the hot
/// path) and from a `JSONValue` (everything else, with worded refusals). The predecoder must take
/// only what the ordinary reading accepts, read it identically, and leave the rest to it.
@Suite("document/edit params: the predecoder agrees with the ordinary reading")
struct EditDocumentRequestTests {
    static let position = #"{"line":0,"character":1}"#
    static let range = #"{"start":\#(position),"end":{"line":2,"character":3}}"#

    /// Params the predecoder takes whole.
    static let taken: [String] = [
        #"{"document":"d1","version":0,"edits":[]}"#,
        #"{"document":"d1","version":7,"edits":[{"range":\#(range),"text":"abc"}]}"#,
        #"{"edits":[{"text":"all"}],"version":9223372036854775807,"document":"x"}"#,
        #"{"document":"d","version":1,"edits":[{"text":"é😀\u0000\n","range":\#(range)},{"text":""}]}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{}}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{"merge":true,"label":"Typing"}}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{"label":""}}"#,
        #"{"document":"d","version":1,"edits":[{"range":{"start":{"line":2147483647,"character":0},"end":{"character":2147483647,"line":0}},"text":"z"}]}"#,
    ]

    /// Params it leaves to the ordinary reading: accepted there (unknown members, nulls) or refused
    /// with a worded error.
    static let declined: [String] = [
        #"{"document":"d","version":1,"edits":[],"extra":1}"#,
        #"{"document":"d","version":1,"edits":[],"extra":1e999}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","extra":null}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":null}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":\#(position),"end":\#(position),"x":0}}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":{"line":0,"character":0,"x":0},"end":\#(position)}}]}"#,
        #"{"document":"d","version":1,"edits":[],"undo":null}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{"merge":null}}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{"other":1}}"#,
        #"{"document":"d","version":1,"edits":[],"undo":{"merge":"yes"}}"#,
        #"{"document":"d","version":1,"edits":[],"undo":[]}"#,
        #"{"document":"d","version":-1,"edits":[]}"#,
        #"{"document":"d","version":1.0,"edits":[]}"#,
        #"{"document":"d","version":"1","edits":[]}"#,
        #"{"document":1,"version":1,"edits":[]}"#,
        #"{"document":"d","edits":[]}"#,
        #"{"document":"d","version":1}"#,
        #"{"document":"d","version":1,"edits":{}}"#,
        #"{"document":"d","version":1,"edits":[1]}"#,
        #"{"document":"d","version":1,"edits":[{"range":\#(range)}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":5}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":\#(position)}}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":{"line":-1,"character":0},"end":\#(position)}}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":{"line":2147483648,"character":0},"end":\#(position)}}]}"#,
        #"{"document":"d","version":1,"edits":[{"text":"a","range":{"start":{"line":0.5,"character":0},"end":\#(position)}}]}"#,
        #"{"document":null,"version":1,"edits":[]}"#,
    ]

    /// Both readings of one params text: the predecoder's (nil when it declines) and the ordinary.
    /// (A text the parser refuses as a whole, such as one with `1e999`, reads as declined and as
    /// `null`: the message never reaches either reading.)
    static func read(_ text: String) throws -> (EditDocumentRequest?, Result<EditDocumentRequest, ResponseError>, JSONValue) {
        let value = (try? JSONParser().parse(text)) ?? .null
        let predecoded = Array(text.utf8).withUnsafeBufferPointer { bytes in
            try? JSONParser().withParsed(bytes) { root in EditDocumentRequest.predecode("document/edit", root) }.get()
        } ?? nil
        let ordinary = Result { () throws(ResponseError) in try EditDocumentRequest(value) }
        return (predecoded.map { $0 as! EditDocumentRequest }, ordinary, value)
    }

    @Test("taken whole: read exactly as the ordinary reading reads them, and rebuilt as sent", arguments: taken)
    func takenWhole(_ text: String) throws {
        let (predecoded, ordinary, sent) = try Self.read(text)
        let fast = try #require(predecoded, "the predecoder declined \(text)")
        let slow = try ordinary.get()
        #expect(fast.handle == slow.handle)
        #expect(fast.version == slow.version)
        #expect(fast.edits == slow.edits)
        #expect(fast.label == slow.label)
        #expect(fast.merge == slow.merge)
        #expect(fast.json == sent)
        #expect(slow.json == sent)
    }

    @Test("anything else is left to the ordinary reading", arguments: declined)
    func leftToTheOrdinaryReading(_ text: String) throws {
        let (predecoded, _, _) = try Self.read(text)
        #expect(predecoded == nil, "\(text)")
    }

    @Test("another method is never predecoded")
    func otherMethods() throws {
        let text = #"{"document":"d","version":1,"edits":[]}"#
        let taken = try Array(text.utf8).withUnsafeBufferPointer { bytes in
            try JSONParser().withParsed(bytes) { root in EditDocumentRequest.predecode("document/undo", root) }.get()
        }
        #expect(taken == nil)
    }
}
