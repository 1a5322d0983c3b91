/// Base64 (RFC 4648 §4, the standard alphabet, with padding) for bytes on the wire: package
/// entries that are not text and SQL blobs. Written here rather than taken from Foundation, which
/// the server does not link; decoding is strict (no whitespace, padding only at the end, the
/// unused bits of the last character zero), so one text has one meaning.
enum Base64 {
    struct DecodingError: Error, Sendable {
        /// The byte of the text (0-based) where decoding stopped.
        var offset: Int
        var reason: String
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output += [alphabet[Int(chunk >> 18 & 63)], alphabet[Int(chunk >> 12 & 63)], alphabet[Int(chunk >> 6 & 63)], alphabet[Int(chunk & 63)]]
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let chunk = UInt32(bytes[index]) << 16
            output += [alphabet[Int(chunk >> 18 & 63)], alphabet[Int(chunk >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output += [alphabet[Int(chunk >> 18 & 63)], alphabet[Int(chunk >> 12 & 63)], alphabet[Int(chunk >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func decode(_ text: String) throws(DecodingError) -> [UInt8] {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else {
            throw DecodingError(offset: characters.count, reason: "the length, \(characters.count), is not a multiple of 4")
        }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            var quad: [UInt32] = [0, 0, 0, 0]
            var padding = 0
            for offset in 0..<4 {
                let character = characters[index + offset]
                if character == UInt8(ascii: "=") {
                    guard index + 4 == characters.count, offset >= 2 else {
                        throw DecodingError(offset: index + offset, reason: "padding \"=\" before the end")
                    }
                    padding += 1
                    continue
                }
                if padding > 0 { throw DecodingError(offset: index + offset, reason: "a character after the padding") }
                let value = values[Int(character)]
                guard value != 0xFF else {
                    throw DecodingError(offset: index + offset, reason: "a character outside the base64 alphabet")
                }
                quad[offset] = UInt32(value)
            }
            let chunk = quad[0] << 18 | quad[1] << 12 | quad[2] << 6 | quad[3]
            output.append(UInt8(chunk >> 16 & 0xFF))
            if padding < 2 { output.append(UInt8(chunk >> 8 & 0xFF)) }
            if padding < 1 { output.append(UInt8(chunk & 0xFF)) }
            if padding > 0 {
                let unused: UInt32 = padding == 2 ? chunk & 0xFFFF : chunk & 0xFF
                if unused != 0 { throw DecodingError(offset: index + 3 - padding, reason: "the last character's unused bits are not zero") }
            }
            index += 4
        }
        return output
    }
}
