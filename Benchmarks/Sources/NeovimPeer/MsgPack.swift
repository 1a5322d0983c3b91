/// A minimal MessagePack codec: what Neovim's RPC needs (nil, booleans, integers, floats, strings,
/// binary, arrays, maps, and the ext types Neovim uses for buffer, window and tabpage handles).

enum MsgPack: Equatable {
    case `nil`
    case bool(Bool)
    case int(Int64)
    case float(Double)
    case string([UInt8])  // the str family, kept as bytes (Neovim's lines need not be valid UTF-8)
    case binary([UInt8])
    case array([MsgPack])
    case map([(MsgPack, MsgPack)])
    case ext(Int8, [UInt8])

    static func == (lhs: MsgPack, rhs: MsgPack) -> Bool {
        switch (lhs, rhs) {
        case (.nil, .nil): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.float(let a), .float(let b)): return a == b
        case (.string(let a), .string(let b)), (.binary(let a), .binary(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.ext(let t, let a), .ext(let u, let b)): return t == u && a == b
        default: return false
        }
    }

    static func str(_ text: String) -> MsgPack { .string(Array(text.utf8)) }

    var intValue: Int64? {
        if case .int(let value) = self { return value }
        // Neovim's handles (buffer, window, tabpage) are ext types holding an integer.
        if case .ext(_, let bytes) = self {
            var decoder = MsgPackDecoder(bytes)
            return (try? decoder.decode())?.intValue
        }
        return nil
    }

    var bytesValue: [UInt8]? {
        switch self {
        case .string(let bytes), .binary(let bytes): return bytes
        default: return nil
        }
    }

    var arrayValue: [MsgPack]? {
        if case .array(let items) = self { return items }
        return nil
    }

    var isNil: Bool { self == .nil }

    var description: String {
        switch self {
        case .nil: return "nil"
        case .bool(let b): return "\(b)"
        case .int(let i): return "\(i)"
        case .float(let f): return "\(f)"
        case .string(let s): return "\"" + String(decoding: s, as: UTF8.self) + "\""
        case .binary(let b): return "bin(\(b.count))"
        case .array(let a): return "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .map(let m): return "{" + m.map { "\($0.0.description): \($0.1.description)" }.joined(separator: ", ") + "}"
        case .ext(let t, let b): return "ext(\(t), \(b.count) bytes)"
        }
    }
}

// MARK: - Encoding

/// Appends MessagePack to a byte array (the smallest form of each value, as the spec asks).
enum MsgPackWriter {
    @inline(__always) static func big<T: FixedWidthInteger>(_ value: T, into out: inout [UInt8]) {
        var v = value.bigEndian
        withUnsafeBytes(of: &v) { out.append(contentsOf: $0) }
    }

    @inline(__always) static func writeNil(_ out: inout [UInt8]) { out.append(0xC0) }

    @inline(__always) static func writeBool(_ value: Bool, _ out: inout [UInt8]) { out.append(value ? 0xC3 : 0xC2) }

    @inline(__always) static func writeInt(_ value: Int64, _ out: inout [UInt8]) {
        if value >= 0 {
            if value < 128 { out.append(UInt8(value)) }
            else if value <= 0xFF { out.append(0xCC); out.append(UInt8(value)) }
            else if value <= 0xFFFF { out.append(0xCD); big(UInt16(value), into: &out) }
            else if value <= 0xFFFF_FFFF { out.append(0xCE); big(UInt32(value), into: &out) }
            else { out.append(0xCF); big(UInt64(value), into: &out) }
        } else {
            if value >= -32 { out.append(UInt8(bitPattern: Int8(value))) }
            else if value >= -128 { out.append(0xD0); out.append(UInt8(bitPattern: Int8(value))) }
            else if value >= -32768 { out.append(0xD1); big(Int16(value), into: &out) }
            else if value >= -2_147_483_648 { out.append(0xD2); big(Int32(value), into: &out) }
            else { out.append(0xD3); big(value, into: &out) }
        }
    }

    @inline(__always) static func writeStringHeader(_ count: Int, _ out: inout [UInt8]) {
        if count < 32 { out.append(0xA0 | UInt8(count)) }
        else if count <= 0xFF { out.append(0xD9); out.append(UInt8(count)) }
        else if count <= 0xFFFF { out.append(0xDA); big(UInt16(count), into: &out) }
        else { out.append(0xDB); big(UInt32(count), into: &out) }
    }

    @inline(__always) static func writeString<C: Collection<UInt8>>(_ bytes: C, _ out: inout [UInt8]) {
        writeStringHeader(bytes.count, &out)
        out.append(contentsOf: bytes)
    }

    @inline(__always) static func writeBinary(_ bytes: [UInt8], _ out: inout [UInt8]) {
        if bytes.count <= 0xFF { out.append(0xC4); out.append(UInt8(bytes.count)) }
        else if bytes.count <= 0xFFFF { out.append(0xC5); big(UInt16(bytes.count), into: &out) }
        else { out.append(0xC6); big(UInt32(bytes.count), into: &out) }
        out.append(contentsOf: bytes)
    }

    @inline(__always) static func writeArrayHeader(_ count: Int, _ out: inout [UInt8]) {
        if count < 16 { out.append(0x90 | UInt8(count)) }
        else if count <= 0xFFFF { out.append(0xDC); big(UInt16(count), into: &out) }
        else { out.append(0xDD); big(UInt32(count), into: &out) }
    }

    @inline(__always) static func writeMapHeader(_ count: Int, _ out: inout [UInt8]) {
        if count < 16 { out.append(0x80 | UInt8(count)) }
        else if count <= 0xFFFF { out.append(0xDE); big(UInt16(count), into: &out) }
        else { out.append(0xDF); big(UInt32(count), into: &out) }
    }

    static func write(_ value: MsgPack, _ out: inout [UInt8]) {
        switch value {
        case .nil: writeNil(&out)
        case .bool(let b): writeBool(b, &out)
        case .int(let i): writeInt(i, &out)
        case .float(let f): out.append(0xCB); big(f.bitPattern, into: &out)
        case .string(let s): writeString(s, &out)
        case .binary(let b): writeBinary(b, &out)
        case .array(let items):
            writeArrayHeader(items.count, &out)
            for item in items { write(item, &out) }
        case .map(let pairs):
            writeMapHeader(pairs.count, &out)
            for (key, item) in pairs { write(key, &out); write(item, &out) }
        case .ext(let type, let bytes):
            switch bytes.count {
            case 1: out.append(0xD4)
            case 2: out.append(0xD5)
            case 4: out.append(0xD6)
            case 8: out.append(0xD7)
            case 16: out.append(0xD8)
            default:
                if bytes.count <= 0xFF { out.append(0xC7); out.append(UInt8(bytes.count)) }
                else if bytes.count <= 0xFFFF { out.append(0xC8); big(UInt16(bytes.count), into: &out) }
                else { out.append(0xC9); big(UInt32(bytes.count), into: &out) }
            }
            out.append(UInt8(bitPattern: type))
            out.append(contentsOf: bytes)
        }
    }
}

// MARK: - Decoding

/// Decodes MessagePack values one after another from bytes; `Incomplete` when the bytes end inside
/// a value (the caller keeps them and waits for more).
struct MsgPackDecoder {
    struct Incomplete: Error {}
    struct Malformed: Error { let byte: UInt8 }

    let bytes: [UInt8]
    var index: Int

    init(_ bytes: [UInt8], from index: Int = 0) {
        self.bytes = bytes
        self.index = index
    }

    @inline(__always) mutating func byte() throws -> UInt8 {
        guard index < bytes.count else { throw Incomplete() }
        defer { index += 1 }
        return bytes[index]
    }

    @inline(__always) mutating func take(_ count: Int) throws -> [UInt8] {
        guard count >= 0, bytes.count - index >= count else { throw Incomplete() }
        defer { index += count }
        return Array(bytes[index..<index + count])
    }

    @inline(__always) mutating func unsigned(_ width: Int) throws -> UInt64 {
        guard bytes.count - index >= width else { throw Incomplete() }
        var value: UInt64 = 0
        for i in 0..<width { value = value << 8 | UInt64(bytes[index + i]) }
        index += width
        return value
    }

    @inline(__always) mutating func signed(_ width: Int) throws -> Int64 {
        let raw = try unsigned(width)
        let shift = UInt64(64 - 8 * width)
        return Int64(bitPattern: raw << shift) >> Int64(shift)
    }

    mutating func decode() throws -> MsgPack {
        let head = try byte()
        switch head {
        case 0x00...0x7F: return .int(Int64(head))
        case 0x80...0x8F: return try map(Int(head & 0x0F))
        case 0x90...0x9F: return try array(Int(head & 0x0F))
        case 0xA0...0xBF: return .string(try take(Int(head & 0x1F)))
        case 0xC0: return .nil
        case 0xC2: return .bool(false)
        case 0xC3: return .bool(true)
        case 0xC4: return .binary(try take(Int(try unsigned(1))))
        case 0xC5: return .binary(try take(Int(try unsigned(2))))
        case 0xC6: return .binary(try take(Int(try unsigned(4))))
        case 0xC7: let n = Int(try unsigned(1)); return try ext(n)
        case 0xC8: let n = Int(try unsigned(2)); return try ext(n)
        case 0xC9: let n = Int(try unsigned(4)); return try ext(n)
        case 0xCA: return .float(Double(Float(bitPattern: UInt32(try unsigned(4)))))
        case 0xCB: return .float(Double(bitPattern: try unsigned(8)))
        case 0xCC: return .int(Int64(try unsigned(1)))
        case 0xCD: return .int(Int64(try unsigned(2)))
        case 0xCE: return .int(Int64(try unsigned(4)))
        case 0xCF: return .int(Int64(bitPattern: try unsigned(8)))
        case 0xD0: return .int(try signed(1))
        case 0xD1: return .int(try signed(2))
        case 0xD2: return .int(try signed(4))
        case 0xD3: return .int(try signed(8))
        case 0xD4: return try ext(1)
        case 0xD5: return try ext(2)
        case 0xD6: return try ext(4)
        case 0xD7: return try ext(8)
        case 0xD8: return try ext(16)
        case 0xD9: return .string(try take(Int(try unsigned(1))))
        case 0xDA: return .string(try take(Int(try unsigned(2))))
        case 0xDB: return .string(try take(Int(try unsigned(4))))
        case 0xDC: return try array(Int(try unsigned(2)))
        case 0xDD: return try array(Int(try unsigned(4)))
        case 0xDE: return try map(Int(try unsigned(2)))
        case 0xDF: return try map(Int(try unsigned(4)))
        case 0xE0...0xFF: return .int(Int64(Int8(bitPattern: head)))
        default: throw Malformed(byte: head)
        }
    }

    private mutating func array(_ count: Int) throws -> MsgPack {
        var items: [MsgPack] = []
        items.reserveCapacity(min(count, 1 << 16))
        for _ in 0..<count { items.append(try decode()) }
        return .array(items)
    }

    private mutating func map(_ count: Int) throws -> MsgPack {
        var pairs: [(MsgPack, MsgPack)] = []
        pairs.reserveCapacity(min(count, 1 << 16))
        for _ in 0..<count { pairs.append((try decode(), try decode())) }
        return .map(pairs)
    }

    private mutating func ext(_ count: Int) throws -> MsgPack {
        let type = Int8(bitPattern: try byte())
        return .ext(type, try take(count))
    }
}
