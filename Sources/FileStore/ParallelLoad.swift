#if canImport(Glibc)
    import Glibc
#endif
import Synchronization
import SystemCalls
import SystemPackage

extension TextFileLoader {
    /// The size from which ``loadInParts(path:encoding:pieceSize:minimumSplitSize:progress:isCancelled:startingWith:consume:)``
    /// reads a UTF-8 file as two halves on two threads: below it the second thread costs more than
    /// it saves.
    public static let defaultMinimumSplitSize = 8 << 20

    /// Loads `path` as ``load(path:encoding:pieceSize:progress:isCancelled:consume:)`` does, but
    /// cuts a large UTF-8 file (at least `minimumSplitSize` bytes; no BOM, or a UTF-8 one) into two
    /// parts at a character boundary near its middle and reads, validates and hands over the two
    /// on two threads at once (the calling thread and a new one).
    ///
    /// Each part starts as a copy of `initial` and is built by `consume`, which receives that part's
    /// text as well-formed UTF-8 pieces in order; the parts are answered in file order, and the
    /// caller joins them (concatenating the parts' texts gives the file's text). `consume` runs on
    /// both threads at the same time, each call with its own part. Other files (small, UTF-16,
    /// Latin-1) are read in one part on the calling thread.
    ///
    /// The same errors as `load`: a byte that does not decode is reported at its offset in the
    /// file, the first in file order; `progress` receives the bytes read so far by both threads
    /// and the file's size, from either thread but never from both at once; `isCancelled` is asked
    /// before each piece on both.
    public static func loadInParts<Part: Sendable>(
        path: String,
        encoding requested: TextEncoding? = nil,
        pieceSize: Int = 1 << 20,
        minimumSplitSize: Int = defaultMinimumSplitSize,
        progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false },
        fileGuard: (@Sendable (Int32) -> Bool)? = nil,
        startingWith initial: Part,
        consume: @escaping @Sendable (inout Part, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(LoadError) -> (parts: [Part], loaded: LoadedText) {
        try loadInParts(
            path: path, encoding: requested, pieceSize: pieceSize, minimumSplitSize: minimumSplitSize,
            splitOffset: nil, progress: progress, isCancelled: isCancelled, fileGuard: fileGuard,
            startingWith: initial, consume: consume)
    }

    /// The same, with the split at `splitOffset` when it is given (for tests: any offset past a BOM
    /// and before the end, used as is).
    static func loadInParts<Part: Sendable>(
        path: String,
        encoding requested: TextEncoding?,
        pieceSize: Int,
        minimumSplitSize: Int,
        splitOffset: Int?,
        progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void,
        isCancelled: @escaping @Sendable () -> Bool,
        fileGuard: (@Sendable (Int32) -> Bool)? = nil,
        startingWith initial: Part,
        consume: @escaping @Sendable (inout Part, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(LoadError) -> (parts: [Part], loaded: LoadedText) {
        var status = stat()
        let file = try openRegularFile(path, fileGuard: fileGuard, status: &status)
        let fd = file.rawValue
        let total = Int(status.st_size)
        if total >= minimumSplitSize, requested == nil || requested == .utf8,
            let plan = try planSplit(fd: fd, path: path, total: total, requested: requested, splitOffset: splitOffset)
        {
            let pieceSize = max(pieceSize, 1)
            let shared = SharedLoad(total: total, done: plan.start, progress: progress)
            let (first, second) = runConcurrently({
                readPart(fd: fd, path: path, from: plan.start, to: plan.split, pieceSize: pieceSize,
                         shared: shared, isCancelled: isCancelled, startingWith: initial, consume: consume)
            }, alongside: {
                readPart(fd: fd, path: path, from: plan.split, to: nil, pieceSize: pieceSize,
                         shared: shared, isCancelled: isCancelled, startingWith: initial, consume: consume)
            })
            // The first error in file order: the first part's, if it failed (the second stops then,
            // but the first goes on when only the second failed, to find any earlier error).
            let head: PartOutcome<Part>, tail: PartOutcome<Part>
            switch first {
            case .failure(let error): throw error
            case .success(let outcome): head = outcome
            }
            switch second {
            case .failure(let error): throw error
            case .success(let outcome): tail = outcome
            }
            return ([head.part, tail.part], LoadedText(
                path: path, encoding: .utf8, hasByteOrderMark: plan.start > 0,
                lineEnding: lineEndingStyle(head, tail), identity: FileIdentity(status)))
        }
        var part = initial
        let loaded = try readSequentially(
            fd: fd, status: status, path: path, encoding: requested, pieceSize: pieceSize,
            progress: progress, isCancelled: isCancelled) { consume(&part, $0) }
        return ([part], loaded)
    }

    /// Where the two parts of a UTF-8 file start: the first after any BOM, the second at `split`.
    struct SplitPlan {
        var start: Int
        var split: Int
    }

    /// Decides whether the file is read in two parts (UTF-8 with or without its BOM; not a file
    /// whose BOM names UTF-16) and where the second starts: at the first byte from the middle on
    /// that is not a UTF-8 continuation byte (10xxxxxx), a step further if it is the `\n` of a
    /// `\r\n`. Nil (one part) when four continuation bytes in a row leave no such byte: the text is
    /// malformed there, and the reader in one go reports it.
    static func planSplit(fd: Int32, path: String, total: Int, requested: TextEncoding?, splitOffset: Int?) throws(LoadError) -> SplitPlan? {
        var head = [UInt8](repeating: 0, count: 3)
        let headCount = try readFully(fd: fd, path: path, into: &head, at: 0)
        var start = 0
        if let announced = TextEncoding.sniff(head[..<headCount]), requested == nil || requested == announced {
            guard announced == .utf8 else { return nil }
            start = announced.byteOrderMark.count
        }
        if let splitOffset {
            return splitOffset > start && splitOffset < total ? SplitPlan(start: start, split: splitOffset) : nil
        }
        let middle = start + (total - start) / 2
        guard middle - 1 > start else { return nil }
        // The byte before the middle and four from it.
        var window = [UInt8](repeating: 0, count: 5)
        let count = try readFully(fd: fd, path: path, into: &window, at: middle - 1)
        for index in 1..<count where window[index] & 0xC0 != 0x80 {
            var split = middle - 1 + index
            if window[index - 1] == 0x0D && window[index] == 0x0A { split += 1 }
            return split < total ? SplitPlan(start: start, split: split) : nil
        }
        return nil
    }

    /// Reads up to `bytes.count` bytes at `offset` (fewer only at the end of the file).
    static func readFully(fd: Int32, path: String, into bytes: inout [UInt8], at offset: Int) throws(LoadError) -> Int {
        try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in
                try SystemCalls.readFully(into: buffer, from: FileDescriptor(rawValue: fd), at: Int64(offset), path: path)
            }
        }.mapError { LoadError.fileSystem(FileSystemError($0)) }.get()
    }

    /// What reading one part learned.
    struct PartOutcome<Part: Sendable>: Sendable {
        var part: Part
        var lines = LineEndingKinds()
        var firstByte: UInt8? = nil
        var lastByte: UInt8? = nil
    }

    /// Reads `start..<end` of the UTF-8 file (to its end when `end` is nil) with `pread`, decodes
    /// it and hands it to `consume`, on the calling thread.
    static func readPart<Part: Sendable>(
        fd: Int32, path: String, from start: Int, to end: Int?, pieceSize: Int, shared: SharedLoad,
        isCancelled: () -> Bool,
        startingWith initial: Part,
        consume: (inout Part, UnsafeBufferPointer<UInt8>) -> Void
    ) -> Result<PartOutcome<Part>, LoadError> {
        let result = Result { () throws(LoadError) -> PartOutcome<Part> in
            // Page-aligned, as in `readSequentially`.
            let buffer = UnsafeMutableBufferPointer<UInt8>(
                start: UnsafeMutableRawPointer.allocate(byteCount: pieceSize, alignment: 4096)
                    .bindMemory(to: UInt8.self, capacity: pieceSize),
                count: pieceSize)
            defer { buffer.deallocate() }
            var outcome = PartOutcome(part: initial)
            var decoder = TextDecoder(encoding: .utf8, startOffset: start)
            var offset = start
            let limit = end ?? Int.max
            while offset < limit {
                if shared.isStopped || isCancelled() { throw .cancelled }
                let got: Int
                do throws(SystemCallError) {
                    let piece = UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[..<min(pieceSize, limit - offset)]))
                    got = try readSome(into: piece, from: FileDescriptor(rawValue: fd), at: Int64(offset), path: path)
                } catch {
                    throw .fileSystem(FileSystemError(error))
                }
                if got == 0 { break }
                do throws(TextDecoder.Failure) {
                    try decoder.decode(UnsafeBufferPointer(rebasing: buffer[..<got])) { piece in
                        outcome.lines.count(piece)
                        if outcome.firstByte == nil { outcome.firstByte = piece.first }
                        outcome.lastByte = piece.last
                        consume(&outcome.part, piece)
                    }
                } catch {
                    throw .notText(path: path, offset: error.offset, encoding: .utf8, reason: error.reason)
                }
                offset += got
                shared.advance(by: got)
            }
            // A sequence cut off by the split is an error only if the bytes after it say so.
            var next = [UInt8](repeating: 0, count: 3)
            let nextCount = end == nil ? 0 : try readFully(fd: fd, path: path, into: &next, at: end!)
            do throws(TextDecoder.Failure) {
                try next.withUnsafeBufferPointer { (next) throws(TextDecoder.Failure) in
                    try decoder.finish(followedBy: UnsafeBufferPointer(rebasing: next[..<nextCount]))
                }
            } catch {
                throw .notText(path: path, offset: error.offset, encoding: .utf8, reason: error.reason)
            }
            return outcome
        }
        // The first part failing stops the second (its error comes first in the file); the second
        // failing does not stop the first, which may hold an earlier error.
        if case .failure = result, end != nil { shared.stop() }
        return result
    }

    /// The line-ending style of the two parts' text together: a `\r` ending the first part and a
    /// `\n` starting the second are one CRLF, and a `\r` ending either part, counted by neither
    /// counter (it waited for the next piece), is a break of its own otherwise.
    static func lineEndingStyle<Part>(_ head: PartOutcome<Part>, _ tail: PartOutcome<Part>) -> LineEndingStyle {
        let headEndsCR = head.lastByte == 0x0D
        let joined = headEndsCR && tail.firstByte == 0x0A
        let lf = head.lines.lf + tail.lines.lf - (joined ? 1 : 0)
        let crlf = head.lines.crlf + tail.lines.crlf + (joined ? 1 : 0)
        let cr = head.lines.cr + (headEndsCR && !joined ? 1 : 0) + tail.lines.cr + (tail.lastByte == 0x0D ? 1 : 0)
        let kinds = [lf > 0, crlf > 0, cr > 0].filter { $0 }.count
        if kinds > 1 { return .mixed }
        if lf > 0 { return .lf }
        if crlf > 0 { return .crlf }
        if cr > 0 { return .cr }
        return .none
    }
}

/// What the threads of a load in parts share: the bytes read (reported to `progress` under a lock,
/// so that the reports come one at a time and in order) and whether to stop.
final class SharedLoad: Sendable {
    private let total: Int
    private let done: Mutex<Int>
    private let progress: @Sendable (Int, Int) -> Void
    private let stopped = Atomic<Bool>(false)

    init(total: Int, done: Int, progress: @escaping @Sendable (Int, Int) -> Void) {
        self.total = total
        self.done = Mutex(done)
        self.progress = progress
    }

    func advance(by count: Int) {
        done.withLock { done in
            done += count
            progress(done, max(total, done))
        }
    }

    var isStopped: Bool { stopped.load(ordering: .relaxed) }

    func stop() { stopped.store(true, ordering: .relaxed) }
}
