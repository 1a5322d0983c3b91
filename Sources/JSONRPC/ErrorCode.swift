import JSON

/// A JSON-RPC error code. An extensible struct rather than an enum, so that later parts of the
/// protocol add their own codes (in -32000...-32099) next to the ones they belong with.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// -32700: the message could not be framed or parsed as JSON.
    public static let parseError = ErrorCode(rawValue: -32700)
    /// -32600: the JSON is not a valid request object (or the server is shutting down).
    public static let invalidRequest = ErrorCode(rawValue: -32600)
    /// -32601: no such method.
    public static let methodNotFound = ErrorCode(rawValue: -32601)
    /// -32602: the params are missing a field, or a field has the wrong type or value.
    public static let invalidParams = ErrorCode(rawValue: -32602)
    /// -32603: the server failed in a way the request did not cause.
    public static let internalError = ErrorCode(rawValue: -32603)
    /// -32002 (LSP): a request other than `initialize` arrived before `initialize`.
    public static let serverNotInitialized = ErrorCode(rawValue: -32002)
    /// -32800 (LSP): the client cancelled the request with `$/cancelRequest`.
    public static let requestCancelled = ErrorCode(rawValue: -32800)
    /// -32801 (LSP): the request was made against a version that is no longer current.
    public static let contentModified = ErrorCode(rawValue: -32801)

    public var description: String { String(rawValue) }
}

/// The error member of a JSON-RPC response: a code, a sentence a person can act on, optional data.
public struct ResponseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var data: JSONValue?

    public init(_ code: ErrorCode, _ message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// The error as the JSON object of a response's `error` member.
    public var json: JSONValue {
        var object: JSONObject = ["code": .integer(Int64(code.rawValue)), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// -32700 for a body json-c (or the Swift check before it) refused.
    public init(parseError: JSONParseError) {
        var data: JSONObject = [:]
        if let offset = parseError.offset { data["offset"] = .integer(Int64(offset)) }
        self.init(.parseError, "Parse error: \(parseError)", data: data.isEmpty ? nil : .object(data))
    }

    /// -32602 naming the field and what was wrong with it.
    public static func invalidParams(field: String, _ problem: String) -> ResponseError {
        ResponseError(.invalidParams, "\(field): \(problem)", data: ["field": .string(field)])
    }

    /// -32800 for a request the client cancelled.
    public static func cancelled(_ id: RequestID) -> ResponseError {
        ResponseError(.requestCancelled, "Request \(id.json.jsonText) was cancelled")
    }
}
