#if canImport(Glibc)
    import Glibc
#endif

/// The generated text the open and save benchmarks share: lines of 0 to 160 characters made of
/// words of which about one in three is not ASCII (2-, 3- and 4-byte UTF-8), from a fixed seed, so
/// that no ASCII-only shortcut decides a figure and every run sees the same bytes.
public struct GeneratedLines {
    private var state: UInt64 = 0x2545_F491_4F6C_DD1D
    private static let words: [[UInt8]] = [
        "buffer", "rope", "chunk", "line", "the", "of", "a", "edit", "undo", "save",
        "naïve", "café", "Grüße", "日本語", "emoji 😀", "x",
    ].map { Array($0.utf8) }

    public init() {}

    private mutating func next() -> UInt64 {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return state
    }

    /// Appends the next line, its break included (CR LF with `crlf`, else LF), to `bytes`.
    public mutating func appendLine(to bytes: inout [UInt8], crlf: Bool = false) {
        let length = Int(next() % 161)
        var lineLength = 0
        while lineLength < length {
            let word = Self.words[Int(next() % UInt64(Self.words.count))]
            bytes.append(contentsOf: word)
            bytes.append(0x20)
            lineLength += word.count + 1
        }
        if crlf { bytes.append(0x0D) }
        bytes.append(0x0A)
    }

    /// Writes generated lines to `path` until it holds at least `target` bytes (in 1 MiB writes),
    /// flushed with `fsync` if asked; answers the number of lines.
    @discardableResult
    public static func writeFile(at path: String, bytes target: Int, crlf: Bool = false, sync: Bool = false) -> Int {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "cannot create \(path): errno \(errno)")
        defer { close(fd) }
        var lines = GeneratedLines()
        var piece: [UInt8] = []
        piece.reserveCapacity((1 << 20) + 512)
        var written = 0
        var count = 0
        func flush() {
            piece.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let wrote = write(fd, raw.baseAddress! + offset, raw.count - offset)
                    precondition(wrote > 0, "write \(path) failed: errno \(errno)")
                    offset += wrote
                }
            }
            written += piece.count
            piece.removeAll(keepingCapacity: true)
        }
        while written + piece.count < target {
            lines.appendLine(to: &piece, crlf: crlf)
            count += 1
            if piece.count >= 1 << 20 { flush() }
        }
        flush()
        if sync { precondition(fsync(fd) == 0, "fsync \(path) failed: errno \(errno)") }
        return count
    }
}
