/// Conversion between `file://` URIs on the wire and absolute paths in the core.
///
/// Accepted: `file:///absolute/path` and `file://localhost/absolute/path`, with percent-encoded bytes
/// (`%20`); refused with the reason: other schemes, other hosts, relative paths, queries and
/// fragments, `%00`, and malformed escapes. URIs the server writes encode every byte outside
/// RFC 3986's unreserved set and `/`, as VS Code does, so clients can compare them as strings.
enum FileURI {
    /// Why a URI was refused.
    struct Invalid: Error, Equatable {
        let reason: String
    }

    /// The absolute path a `file://` URI names.
    static func path(from uri: String) throws(Invalid) -> String {
        let prefix = "file://"
        guard uri.lowercased().hasPrefix("file:") else {
            throw Invalid(reason: "only file:// URIs are supported, got \"\(uri.prefix(40))\"")
        }
        guard uri.lowercased().hasPrefix(prefix) else {
            throw Invalid(reason: "a file URI needs an absolute path (file:///...), got \"\(uri.prefix(60))\"")
        }
        var rest = Substring(uri.dropFirst(prefix.count))
        if rest.lowercased().hasPrefix("localhost/") { rest = rest.dropFirst("localhost".count) }
        guard rest.hasPrefix("/") else {
            let host = rest.prefix { $0 != "/" }
            throw Invalid(reason: "file URIs naming a host (\"\(host.prefix(40))\") are not supported; use file:///path")
        }
        guard !rest.contains("?"), !rest.contains("#") else {
            throw Invalid(reason: "a file URI may not have a query or a fragment")
        }
        var bytes: [UInt8] = []
        var iterator = Array(rest.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw Invalid(reason: "malformed percent escape in the URI")
            }
            let decoded = high << 4 | low
            guard decoded != 0 else { throw Invalid(reason: "the URI's path contains %00") }
            bytes.append(decoded)
        }
        guard let path = String(validating: bytes, as: UTF8.self) else {
            throw Invalid(reason: "the URI's path is not valid UTF-8 once decoded")
        }
        return path
    }

    /// The `file://` URI of an absolute path.
    static func uri(from path: String) -> String {
        // Built as bytes (a query makes 10,000 of these; appending to a String's scalars one by
        // one cost more than the rest of each file's entry).
        var bytes: [UInt8] = Array("file://".utf8)
        bytes.reserveCapacity(7 + path.utf8.count + 16)
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                bytes.append(byte)
            default:
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
