import FileStore
import TextBuffer

extension TextBuffer {
    /// Writes the text into `sink` as the bytes of a file in `encoding`, after its byte order mark
    /// if `byteOrderMark`. Line endings are the text's own (kept byte for byte since the load).
    func write(to sink: SaveSink, encoding: TextEncoding, byteOrderMark: Bool) throws(SaveError) {
        try encode(encoding, byteOrderMark: byteOrderMark) { (bytes) throws(SaveError) in try sink.write(bytes) }
    }

    /// XXH64 of the bytes ``write(to:encoding:byteOrderMark:)`` would write: the content hash of
    /// the file this text was read from, computed from memory (the file may have changed since).
    func contentHash(encoding: TextEncoding, byteOrderMark: Bool) -> UInt64? {
        var hasher = ContentHasher()
        do throws(SaveError) {
            try encode(encoding, byteOrderMark: byteOrderMark) { bytes in bytes.withUnsafeBytes { hasher.update($0) } }
        } catch {
            return nil
        }
        return hasher.finalize()
    }

    /// The file's bytes in pieces, in order.
    func encode(_ encoding: TextEncoding, byteOrderMark: Bool, _ emit: ([UInt8]) throws(SaveError) -> Void) throws(SaveError) {
        if byteOrderMark { try emit(encoding.byteOrderMark) }
        switch encoding {
        case .utf8:
            for chunk in utf8Chunks { try emit(chunk) }
        case .utf16LittleEndian, .utf16BigEndian:
            let bigEndian = encoding == .utf16BigEndian
            var bytes: [UInt8] = []
            for chunk in utf8Chunks {
                bytes.removeAll(keepingCapacity: true)
                bytes.reserveCapacity(chunk.count * 2)
                // Chunks hold whole characters, so each decodes alone.
                for unit in String(decoding: chunk, as: UTF8.self).utf16 {
                    if bigEndian {
                        bytes.append(UInt8(unit >> 8)); bytes.append(UInt8(unit & 0xFF))
                    } else {
                        bytes.append(UInt8(unit & 0xFF)); bytes.append(UInt8(unit >> 8))
                    }
                }
                try emit(bytes)
            }
        case .latin1:
            var bytes: [UInt8] = []
            var offset = 0
            for chunk in utf8Chunks {
                bytes.removeAll(keepingCapacity: true)
                for scalar in String(decoding: chunk, as: UTF8.self).unicodeScalars {
                    guard scalar.value <= 0xFF else { throw .unencodable(offset: offset, scalar: scalar.value, encoding: .latin1) }
                    bytes.append(UInt8(scalar.value))
                    offset += UTF8.width(scalar)
                }
                try emit(bytes)
            }
        }
    }
}
