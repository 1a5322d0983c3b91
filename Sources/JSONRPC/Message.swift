import JSON

/// A request id: JSON-RPC allows a string, a number or null; it is echoed back exactly.
///
/// Integers and strings, what every client sends, round-trip byte for byte. A non-integral number
/// (which JSON-RPC discourages) is echoed as the same number in its shortest form.
public enum RequestID: Hashable, Sendable, CustomStringConvertible {
    case integer(Int64)
    case string(String)
    case double(Double)
    case null

    /// The id as JSON.
    public var json: JSONValue {
        switch self {
        case .integer(let value): return .integer(value)
        case .string(let value): return .string(value)
        case .double(let value): return .double(value)
        case .null: return .null
        }
    }

    /// The id for a JSON value, or `nil` when JSON-RPC does not allow that kind of value as an id.
    public init?(json: JSONValue) {
        switch json {
        case .integer(let value): self = .integer(value)
        case .string(let value): self = .string(value)
        case .double(let value): self = .double(value)
        case .null: self = .null
        default: return nil
        }
    }

    /// The id as vscode-jsonrpc prints it in traces: a string without quotes, a number as JSON.
    public var description: String {
        if case .string(let value) = self { return value }
        return json.jsonText
    }
}

/// A request from the peer: it must be answered exactly once.
public struct Request: Sendable, Equatable {
    public var id: RequestID
    public var method: String
    /// The params; `nil` when absent or `null`, which JSON-RPC treats alike. For a request whose
    /// params were read straight from the parsed text (``predecoded``), the same params rebuilt.
    public var params: JSONValue? {
        get { storedParams ?? predecoded?.json }
        set {
            storedParams = newValue
            predecoded = nil
        }
    }
    private var storedParams: JSONValue?
    /// The params as the handler's ``ParamsPredecoder`` read them from the parsed text, already
    /// checked; `nil` for every other request.
    public private(set) var predecoded: (any PredecodedParams)?

    public init(id: RequestID, method: String, params: JSONValue? = nil) {
        self.id = id
        self.method = method
        self.storedParams = params
    }

    /// A request whose params a ``ParamsPredecoder`` has read.
    public init(id: RequestID, method: String, predecoded: any PredecodedParams) {
        self.id = id
        self.method = method
        self.predecoded = predecoded
    }

    public static func == (lhs: Request, rhs: Request) -> Bool {
        lhs.id == rhs.id && lhs.method == rhs.method && lhs.params == rhs.params
    }

    /// The request as a JSON-RPC message.
    public var json: JSONValue {
        var object: JSONObject = ["jsonrpc": "2.0", "id": id.json, "method": .string(method)]
        if let params { object["params"] = params }
        return .object(object)
    }
}

/// A notification: a request without an id, never answered.
public struct Notification: Sendable, Equatable {
    public var method: String
    /// The params; `nil` when absent or `null`.
    public var params: JSONValue?

    public init(method: String, params: JSONValue? = nil) {
        self.method = method
        self.params = params
    }

    /// The notification as a JSON-RPC message.
    public var json: JSONValue {
        var object: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { object["params"] = params }
        return .object(object)
    }
}

/// A response: the result of a request, or an error. The id is `null` when the request's id could
/// not be read (a parse error, an invalid request object).
public struct Response: Sendable, Equatable {
    public var id: RequestID
    public var result: Result<JSONValue, ResponseError>

    public init(id: RequestID, result: Result<JSONValue, ResponseError>) {
        self.id = id
        self.result = result
    }

    /// A successful response.
    public static func success(_ id: RequestID, _ value: JSONValue) -> Response {
        Response(id: id, result: .success(value))
    }

    /// An error response.
    public static func failure(_ id: RequestID, _ error: ResponseError) -> Response {
        Response(id: id, result: .failure(error))
    }

    /// The response as a JSON-RPC message.
    public var json: JSONValue {
        switch result {
        case .success(let value):
            return ["jsonrpc": "2.0", "id": id.json, "result": value]
        case .failure(let error):
            return ["jsonrpc": "2.0", "id": id.json, "error": error.json]
        }
    }
}

/// One element of what the peer sent, classified by JSON-RPC 2.0's rules.
public enum IncomingMessage: Sendable, Equatable {
    case request(Request)
    case notification(Notification)
    /// A response to a request the server sent.
    case response(Response)
    /// Not a valid JSON-RPC message: answered with this error (-32600), under this id (or null).
    case invalid(RequestID, ResponseError)

    /// Classifies one JSON value (a whole message, or one element of a batch).
    public init(_ value: JSONValue) {
        guard case .object(let object) = value else {
            self = .invalid(.null, ResponseError(.invalidRequest, "Invalid request: a message must be a JSON object, not \(value.kindDescription)"))
            return
        }
        // The id is read first so that every later complaint can be sent under it.
        let idValue = object["id"]
        var id = RequestID.null
        if let idValue {
            guard let parsed = RequestID(json: idValue) else {
                self = .invalid(.null, ResponseError(.invalidRequest, "Invalid request: \"id\" must be a string, a number or null, not \(idValue.kindDescription)"))
                return
            }
            id = parsed
        }
        switch object["jsonrpc"] {
        case .string("2.0"): break
        case nil:
            self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"jsonrpc\" is missing; it must be \"2.0\""))
            return
        case .string(let other)?:
            self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"jsonrpc\" must be \"2.0\", not \"\(other)\""))
            return
        case let other?:
            self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"jsonrpc\" must be the string \"2.0\", not \(other.kindDescription) (\(other.jsonText))"))
            return
        }
        if let methodValue = object["method"] {
            guard case .string(let method) = methodValue else {
                self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"method\" must be a string, not \(methodValue.kindDescription)"))
                return
            }
            var params: JSONValue? = nil
            switch object["params"] {
            case nil, .null?: params = nil
            case let value? where value.objectValue != nil || value.arrayValue != nil: params = value
            case let value?:
                self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"params\" must be an object or an array, not \(value.kindDescription)"))
                return
            }
            if idValue == nil {
                self = .notification(Notification(method: method, params: params))
            } else {
                self = .request(Request(id: id, method: method, params: params))
            }
            return
        }
        // No method: a response to one of the server's requests, or nothing valid.
        let result = object["result"]
        let error = object["error"]
        if idValue != nil, (result == nil) != (error == nil) {
            if let result {
                self = .response(.success(id, result))
                return
            }
            if let error = error?.objectValue, let code = error["code"]?.integerValue,
                let message = error["message"]?.stringValue
            {
                self = .response(.failure(id, ResponseError(ErrorCode(rawValue: Int(truncatingIfNeeded: code)), message, data: error["data"])))
                return
            }
            self = .invalid(id, ResponseError(.invalidRequest, "Invalid response: \"error\" must be an object with an integer \"code\" and a string \"message\""))
            return
        }
        if idValue != nil, result != nil, error != nil {
            self = .invalid(id, ResponseError(.invalidRequest, "Invalid response: it has both \"result\" and \"error\"; a response has exactly one"))
            return
        }
        self = .invalid(id, ResponseError(.invalidRequest, "Invalid request: \"method\" is missing"))
    }
}
