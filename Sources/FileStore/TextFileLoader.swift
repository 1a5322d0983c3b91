import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// What loading a text file learned about it.
public struct LoadedText: Sendable, Equatable {
    /// The path that was read.
    public var path: String
    /// The encoding the file was decoded from.
    public var encoding: TextEncoding
    /// Whether the file starts with a byte order mark (kept off the text and written back on save).
    public var hasByteOrderMark: Bool
    /// How the file's lines end (kept byte for byte: the text is not normalised).
    public var lineEnding: LineEndingStyle
    /// The file's identity when it was read.
    public var identity: FileIdentity

    public init(path: String, encoding: TextEncoding, hasByteOrderMark: Bool, lineEnding: LineEndingStyle, identity: FileIdentity) {
        self.path = path
        self.encoding = encoding
        self.hasByteOrderMark = hasByteOrderMark
        self.lineEnding = lineEnding
        self.identity = identity
    }
}

/// Why a file could not be loaded as text.
public enum LoadError: Error, Sendable, Equatable {
    /// A system call failed.
    case fileSystem(FileSystemError)
    /// A byte did not decode in the encoding; names the offset in the file.
    case notText(path: String, offset: Int, encoding: TextEncoding, reason: String)
    /// The path names a directory, a device, a socket or a pipe.
    case notRegularFile(path: String, kind: String)
    /// The caller cancelled the load.
    case cancelled
    /// With sandbox roots: the file opened is not beneath them (a directory of its path was
    /// swapped for a symlink pointing out); nothing was read.
    case outsideRoots(path: String)
}

/// Reads a text file in pieces, decoding it to UTF-8 as it goes, so that a large file is never held
/// twice in memory and a caller can report progress and cancel.
public enum TextFileLoader {
    /// Loads `path`. With `encoding` nil the encoding is detected: a byte order mark names UTF-8 or
    /// UTF-16 (LE or BE); otherwise the file must be UTF-8. `consume` receives the text as
    /// well-formed UTF-8 pieces, in order; `progress` the bytes read so far and the file's size.
    public static func load(
        path: String,
        encoding requested: TextEncoding? = nil,
        pieceSize: Int = 1 << 20,
        progress: (_ done: Int, _ total: Int) -> Void = { _, _ in },
        isCancelled: () -> Bool = { false },
        consume: (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(LoadError) -> LoadedText {
        var status = stat()
        let file = try openRegularFile(path, status: &status)
        return try readSequentially(
            fd: file.rawValue, status: status, path: path, encoding: requested, pieceSize: pieceSize,
            progress: progress, isCancelled: isCancelled, consume: consume)
    }

    /// Opens `path` for reading and checks that it names a regular file; `status` is set to its
    /// status.
    static func openRegularFile(
        _ path: String, fileGuard: (@Sendable (Int32) -> Bool)? = nil, status: inout stat
    ) throws(LoadError) -> Descriptor {
        let file: Descriptor
        do {
            file = try Descriptor.open(path, .readOnly, options: [FileDescriptor.OpenOptions(rawValue: O_NOCTTY), .nonBlocking])
        } catch {
            throw .fileSystem(FileSystemError(error))
        }
        let fd = file.rawValue
        // With sandbox roots, the file as opened must lie beneath them (checked on the descriptor
        // that is then read, so no swap after the check can redirect the read).
        if let fileGuard, !fileGuard(fd) { throw .outsideRoots(path: path) }
        guard fstat(fd, &status) == 0 else { throw .fileSystem(FileSystemError(errno: errno, syscall: "fstat", path: path)) }
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFREG else { throw .notRegularFile(path: path, kind: kind == S_IFDIR ? "directory" : "special file") }
        // Too large to hold: refused before a byte is read (issue 34.8).
        if let refusal = FileSizeLimit.refusal(size: Int(status.st_size), path: path) { throw .fileSystem(refusal) }
        // O_NONBLOCK only kept open() from hanging on a FIFO; regular files read as usual.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return file
    }

    /// Reads the open file `fd` from its current offset (the start) to its end, in order, on the
    /// calling thread: the body of ``load(path:encoding:pieceSize:progress:isCancelled:consume:)``.
    static func readSequentially(
        fd: Int32, status: stat, path: String, encoding requested: TextEncoding?, pieceSize: Int,
        progress: (_ done: Int, _ total: Int) -> Void,
        isCancelled: () -> Bool,
        consume: (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(LoadError) -> LoadedText {
        let total = Int(status.st_size)
        // Page-aligned: the kernel copies into a destination that is not 32-byte aligned up to
        // three times slower (measured: 41 ms against 12 ms for 100 MB on the development VM).
        let buffer = UnsafeMutableBufferPointer<UInt8>(
            start: UnsafeMutableRawPointer.allocate(byteCount: max(pieceSize, 3), alignment: 4096)
                .bindMemory(to: UInt8.self, capacity: max(pieceSize, 3)),
            count: max(pieceSize, 3))
        defer { buffer.deallocate() }
        var done = 0
        var decoder: TextDecoder? = nil
        var encoding = requested ?? .utf8
        var hasByteOrderMark = false
        var lines = LineEndingKinds()

        while true {
            if isCancelled() { throw .cancelled }
            // The first piece must hold any byte order mark whole, whatever the piece size.
            let wanted = decoder == nil ? max(pieceSize, 3) : pieceSize
            var count = 0
            while count < (decoder == nil ? 3 : 1) {
                let got: Int
                do {
                    got = try readSome(
                        into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[count..<wanted]),
                        from: FileDescriptor(rawValue: fd), path: path)
                } catch {
                    throw .fileSystem(FileSystemError(error))
                }
                if got == 0 { break }
                count += got
            }
            if count == 0 { break }
            var skip = 0
            if decoder == nil {
                // The first piece decides the encoding (a piece of at least 3 bytes holds any BOM).
                let head = UnsafeBufferPointer(rebasing: buffer[0..<count])
                if let announced = TextEncoding.sniff(head), requested == nil || requested == announced {
                    encoding = announced
                    hasByteOrderMark = true
                    skip = announced.byteOrderMark.count
                }
                decoder = TextDecoder(encoding: encoding, startOffset: skip)
            }
            do {
                try decoder!.decode(UnsafeBufferPointer(rebasing: buffer[skip..<count])) { piece in
                    lines.count(piece)
                    consume(piece)
                }
            } catch {
                throw .notText(path: path, offset: error.offset, encoding: encoding, reason: error.reason)
            }
            done += count
            progress(done, max(total, done))
        }
        do {
            try decoder?.finish()
        } catch {
            throw .notText(path: path, offset: error.offset, encoding: encoding, reason: error.reason)
        }
        return LoadedText(
            path: path, encoding: encoding, hasByteOrderMark: hasByteOrderMark, lineEnding: lines.style,
            identity: FileIdentity(status))
    }
}
