/// The character encodings a document file can be read and written in.
public enum TextEncoding: String, Sendable, CaseIterable {
    case utf8 = "utf-8"
    case utf16LittleEndian = "utf-16le"
    case utf16BigEndian = "utf-16be"
    /// ISO 8859-1: every byte is the code point of the same number, so any file decodes.
    case latin1 = "iso-8859-1"

    /// The byte order mark that starts a file in this encoding, if it has one.
    public var byteOrderMark: [UInt8] {
        switch self {
        case .utf8: return [0xEF, 0xBB, 0xBF]
        case .utf16LittleEndian: return [0xFF, 0xFE]
        case .utf16BigEndian: return [0xFE, 0xFF]
        case .latin1: return []
        }
    }

    /// The encoding a file's leading bytes announce with a byte order mark, if any.
    public static func sniff(_ prefix: some Collection<UInt8>) -> TextEncoding? {
        let bytes = Array(prefix.prefix(3))
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return .utf8 }
        if bytes.starts(with: [0xFF, 0xFE]) { return .utf16LittleEndian }
        if bytes.starts(with: [0xFE, 0xFF]) { return .utf16BigEndian }
        return nil
    }
}

/// How the lines of a text end.
public enum LineEndingStyle: String, Sendable {
    case lf, crlf, cr
    /// More than one kind of line break.
    case mixed
    /// No line break at all.
    case none
}

/// Counts the line breaks of a UTF-8 stream fed in pieces (a `\r\n` split across pieces counts once).
public struct LineEndingCounter: Sendable {
    public private(set) var lf = 0
    public private(set) var crlf = 0
    public private(set) var cr = 0
    private var pendingCR = false

    public init() {}

    /// Counts the breaks in the next piece of the stream.
    public mutating func count(_ bytes: UnsafeBufferPointer<UInt8>) {
        for byte in bytes {
            if byte == 0x0A {
                if pendingCR { crlf += 1; pendingCR = false } else { lf += 1 }
            } else {
                if pendingCR { cr += 1 }
                pendingCR = byte == 0x0D
            }
        }
    }

    /// The style, once the whole stream has been counted.
    public var style: LineEndingStyle {
        let finalCR = cr + (pendingCR ? 1 : 0)
        let kinds = [lf > 0, crlf > 0, finalCR > 0].filter { $0 }.count
        if kinds > 1 { return .mixed }
        if lf > 0 { return .lf }
        if crlf > 0 { return .crlf }
        if finalCR > 0 { return .cr }
        return .none
    }
}
