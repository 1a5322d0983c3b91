import JSON

/// A request's params read straight from json-c's tree by a ``ParamsPredecoder``, already checked
/// as the handler would check them.
public protocol PredecodedParams: Sendable {
    /// The params as JSON (for traces, recordings and `Request.params`): equal, member for member,
    /// to what the client sent.
    var json: JSONValue { get }
}

/// Reads the params of the methods a handler answers most often straight from the parsed text,
/// on the connection's thread as each message is decoded: `method` and the params (an object),
/// valid only during the call. It answers `nil` for anything it does not take whole (another
/// method, a member it does not know, a value of another kind or out of range), and the message
/// then goes the ordinary way, where every refusal is worded.
public typealias ParamsPredecoder = (_ method: String, _ params: JSONCView) -> (any PredecodedParams)?
