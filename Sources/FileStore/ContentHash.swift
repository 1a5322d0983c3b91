#if canImport(Glibc)
    import Glibc
#endif

/// XXH64 of a file's bytes, fed in pieces: the content part of a file's identity, which catches a
/// change that leaves size and times as they were, and spares a false conflict when a file was
/// rewritten with the same bytes (a `touch`, an editor saving unchanged text).
public struct ContentHasher: Sendable {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var v1: UInt64
    private var v2: UInt64
    private var v3: UInt64
    private var v4: UInt64
    /// Bytes fed so far.
    private var total: UInt64 = 0
    /// A partial stripe carried to the next piece (at most 31 bytes in `pending`).
    private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var pendingCount = 0

    public init(seed: UInt64 = 0) {
        v1 = seed &+ Self.p1 &+ Self.p2
        v2 = seed &+ Self.p2
        v3 = seed
        v4 = seed &- Self.p1
        self.seed = seed
    }

    private let seed: UInt64

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    @inline(__always) private static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }

    @inline(__always) private static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    /// Feeds the next bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress, bytes.count > 0 else { return }
        var count = bytes.count
        total &+= UInt64(count)
        if pendingCount > 0 {
            let take = min(32 - pendingCount, count)
            withUnsafeMutableBytes(of: &pending) { stripe in
                (stripe.baseAddress! + pendingCount).copyMemory(from: base, byteCount: take)
            }
            pendingCount += take
            base += take
            count -= take
            guard pendingCount == 32 else { return }
            let stripe = pending
            v1 = Self.round(v1, UInt64(littleEndian: stripe.0))
            v2 = Self.round(v2, UInt64(littleEndian: stripe.1))
            v3 = Self.round(v3, UInt64(littleEndian: stripe.2))
            v4 = Self.round(v4, UInt64(littleEndian: stripe.3))
            pendingCount = 0
        }
        var a = v1, b = v2, c = v3, d = v4
        while count >= 32 {
            a = Self.round(a, UInt64(littleEndian: base.loadUnaligned(as: UInt64.self)))
            b = Self.round(b, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            c = Self.round(c, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
            d = Self.round(d, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
            base += 32
            count -= 32
        }
        v1 = a; v2 = b; v3 = c; v4 = d
        if count > 0 {
            withUnsafeMutableBytes(of: &pending) { stripe in
                stripe.baseAddress!.copyMemory(from: base, byteCount: count)
            }
            pendingCount = count
        }
    }

    /// Feeds the next bytes.
    public mutating func update(_ bytes: UnsafeBufferPointer<UInt8>) {
        update(UnsafeRawBufferPointer(bytes))
    }

    /// The hash of everything fed so far.
    public func finalize() -> UInt64 {
        var h: UInt64
        if total >= 32 {
            h = Self.rotl(v1, 1) &+ Self.rotl(v2, 7) &+ Self.rotl(v3, 12) &+ Self.rotl(v4, 18)
            h = Self.merge(h, v1)
            h = Self.merge(h, v2)
            h = Self.merge(h, v3)
            h = Self.merge(h, v4)
        } else {
            h = seed &+ Self.p5
        }
        h &+= total
        var tail = pending
        let count = pendingCount
        withUnsafeBytes(of: &tail) { raw in
            var offset = 0
            while offset + 8 <= count {
                let k = Self.round(0, UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                h = Self.rotl(h ^ k, 27) &* Self.p1 &+ Self.p4
                offset += 8
            }
            if offset + 4 <= count {
                let k = UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                h = Self.rotl(h ^ (k &* Self.p1), 23) &* Self.p2 &+ Self.p3
                offset += 4
            }
            while offset < count {
                h = Self.rotl(h ^ (UInt64(raw[offset]) &* Self.p5), 11) &* Self.p1
                offset += 1
            }
        }
        h ^= h >> 33
        h &*= Self.p2
        h ^= h >> 29
        h &*= Self.p3
        h ^= h >> 32
        return h
    }

    /// The hash of `bytes` at once.
    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hasher = ContentHasher()
        let array = Array(bytes)
        array.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// The hash of the file at `path` and its identity, read in one pass; nil when the file
    /// changed while it was read (its identity before and after differ) or cannot be read.
    public static func hashFile(path: String) -> (hash: UInt64, identity: FileIdentity)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return hashFile(fd: fd)
    }

    /// The same for an open file (read from its start with `pread`).
    public static func hashFile(fd: Int32) -> (hash: UInt64, identity: FileIdentity)? {
        var before = stat()
        guard fstat(fd, &before) == 0, before.st_mode & S_IFMT == S_IFREG else { return nil }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        var hasher = ContentHasher()
        var offset: off_t = 0
        while true {
            let got = pread(fd, buffer, size, offset)
            if got < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if got == 0 { break }
            hasher.update(UnsafeRawBufferPointer(start: buffer, count: got))
            offset += off_t(got)
        }
        var after = stat()
        guard fstat(fd, &after) == 0 else { return nil }
        let identity = FileIdentity(after)
        guard FileIdentity(before).sameState(as: identity), Int64(offset) == identity.size else { return nil }
        return (hasher.finalize(), identity)
    }
}
