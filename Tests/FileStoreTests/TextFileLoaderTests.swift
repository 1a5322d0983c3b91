import Foundation
import Testing
// The shared test support (makeTemporaryDirectory, SeededGenerator, waitUntil), for every file of this target.
@_exported import TestSupport

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh temporary directory for one test (TestSupport's; the caller removes it).
func freshDirectory() -> String {
    try! makeTemporaryDirectory(prefix: "docsession-filestore", in: "/tmp")
}

/// Writes `bytes` to a new file in a new temporary directory and answers its path.
func writeTemporaryFile(_ bytes: [UInt8], name: String = "file.txt") -> String {
    let path = freshDirectory() + "/" + name
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    return path
}

/// Loads `path` with pieces of `pieceSize` bytes; answers the text and what was learned.
func load(_ path: String, encoding: TextEncoding? = nil, pieceSize: Int = 1 << 20) throws(LoadError) -> ([UInt8], LoadedText) {
    var text: [UInt8] = []
    let loaded = try TextFileLoader.load(path: path, encoding: encoding, pieceSize: pieceSize) { text += $0 }
    return (text, loaded)
}

private let pieceSizes = [1, 2, 3, 4, 5, 7, 64, 1 << 20]

@Suite("Loading text files")
struct TextFileLoaderTests {
    @Test("a file over the size limit is refused after fstat, naming its size and the limit, before a byte is read")
    func overTheSizeLimit() throws {
        let directory = freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/sparse.txt"
        let size = FileSizeLimit.bytes + 1
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0 && ftruncate(fd, off_t(size)) == 0)
        close(fd)
        var consumed = 0
        let error = #expect(throws: LoadError.self) {
            try TextFileLoader.load(path: path) { consumed += $0.count }
        }
        guard case .fileSystem(let failure)? = error else {
            Issue.record("not a file system error: \(String(describing: error))")
            return
        }
        #expect(failure.isTooLarge && failure.code == "EFBIG" && failure.syscall == "fstat" && failure.path == path)
        #expect(failure.size == Int64(size) && failure.limit == Int64(FileSizeLimit.bytes))
        #expect(failure.message.contains("the file is \(size) bytes") && failure.message.contains("limit of \(FileSizeLimit.bytes) bytes"))
        #expect(consumed == 0)
        // At the limit it fits.
        #expect(FileSizeLimit.refusal(size: 10, path: path, limit: 10) == nil)
        #expect(FileSizeLimit.refusal(size: 11, path: path, limit: 10)?.limit == 10)
        #expect(FileSizeLimit.defaultBytes >= 16 << 20)
    }

    @Test("UTF-8 without a BOM loads as is, for every piece size")
    func plainUTF8() throws {
        let text = Array("héllo\nwörld 😀\r\nend".utf8)
        let path = writeTemporaryFile(text)
        for size in pieceSizes {
            let (loaded, info) = try load(path, pieceSize: size)
            #expect(loaded == text, "piece size \(size)")
            #expect(info.encoding == .utf8)
            #expect(!info.hasByteOrderMark)
            #expect(info.lineEnding == .mixed)
        }
    }

    @Test("a UTF-8 BOM is detected and kept off the text")
    func utf8BOM() throws {
        let path = writeTemporaryFile([0xEF, 0xBB, 0xBF] + Array("a\nb\n".utf8))
        let (text, info) = try load(path)
        #expect(text == Array("a\nb\n".utf8))
        #expect(info.encoding == .utf8)
        #expect(info.hasByteOrderMark)
        #expect(info.lineEnding == .lf)
    }

    @Test("UTF-16 LE and BE with a BOM decode, surrogate pairs included, for every piece size")
    func utf16() throws {
        let string = "a\u{E9}\u{1F600}\r\nz"
        let units = Array(string.utf16)
        let little: [UInt8] = [0xFF, 0xFE] + units.flatMap { unit -> [UInt8] in [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        let big: [UInt8] = [0xFE, 0xFF] + units.flatMap { unit -> [UInt8] in [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
        for (bytes, encoding) in [(little, TextEncoding.utf16LittleEndian), (big, .utf16BigEndian)] {
            let path = writeTemporaryFile(bytes)
            for size in pieceSizes {
                let (text, info) = try load(path, pieceSize: size)
                #expect(String(decoding: text, as: UTF8.self) == string, "\(encoding) piece size \(size)")
                #expect(info.encoding == encoding)
                #expect(info.hasByteOrderMark)
                #expect(info.lineEnding == .crlf)
            }
        }
    }

    @Test("undecodable bytes are refused, naming the offset in the file",
        arguments: [
            (Array("abc".utf8) + [0xFF] + Array("def".utf8), 3),
            (Array("ab".utf8) + [0xC0, 0xAF], 2),
            (Array("x".utf8) + [0xED, 0xA0, 0x80], 1),
            (Array("xyz".utf8) + [0xE2, 0x82], 3),
            ([0xEF, 0xBB, 0xBF] + Array("ok".utf8) + [0x80], 5),
        ] as [([UInt8], Int)])
    func notText(bytes: [UInt8], offset: Int) {
        let path = writeTemporaryFile(bytes)
        for size in pieceSizes {
            #expect(throws: LoadError.self) { try load(path, pieceSize: size) }
            do {
                _ = try load(path, pieceSize: size)
            } catch {
                guard case .notText(_, let reported, let encoding, _) = error else {
                    Issue.record("expected notText, got \(error)")
                    continue
                }
                #expect(reported == offset, "piece size \(size)")
                #expect(encoding == .utf8)
            }
        }
    }

    @Test("unpaired UTF-16 surrogates and an odd byte count are refused")
    func badUTF16() {
        let lonely = writeTemporaryFile([0xFF, 0xFE, 0x41, 0x00, 0x00, 0xD8, 0x41, 0x00])
        #expect(throws: LoadError.notText(path: lonely, offset: 4, encoding: .utf16LittleEndian, reason: "unpaired UTF-16 high surrogate")) {
            try load(lonely)
        }
        let odd = writeTemporaryFile([0xFE, 0xFF, 0x00, 0x41, 0x00])
        #expect(throws: LoadError.notText(path: odd, offset: 4, encoding: .utf16BigEndian, reason: "odd number of bytes in a UTF-16 file")) {
            try load(odd)
        }
    }

    @Test("a client-named encoding decodes what auto-detection refuses")
    func namedEncoding() throws {
        let path = writeTemporaryFile([0x63, 0x61, 0x66, 0xE9])  // "café" in ISO 8859-1
        #expect(throws: LoadError.self) { try load(path) }
        let (text, info) = try load(path, encoding: .latin1)
        #expect(String(decoding: text, as: UTF8.self) == "café")
        #expect(info.encoding == .latin1)
    }

    @Test("line-ending styles", arguments: [("a\nb\n", LineEndingStyle.lf), ("a\r\nb\r\n", .crlf), ("a\rb\r", .cr), ("a\nb\r\n", .mixed), ("ab", .none), ("", .none)])
    func lineEndings(text: String, style: LineEndingStyle) throws {
        let path = writeTemporaryFile(Array(text.utf8))
        for size in [1, 2, 1 << 20] {
            #expect(try load(path, pieceSize: size).1.lineEnding == style)
        }
    }

    @Test("an empty file is an empty text")
    func empty() throws {
        let (text, info) = try load(writeTemporaryFile([]))
        #expect(text.isEmpty)
        #expect(info.identity.size == 0)
    }

    @Test("a missing file is a file-system error with errno, syscall and path")
    func missing() {
        let path = freshDirectory() + "/absent.txt"
        do {
            _ = try load(path)
            Issue.record("expected an error")
        } catch {
            guard case .fileSystem(let detail) = error else {
                Issue.record("expected a file-system error, got \(error)")
                return
            }
            #expect(detail.code == "ENOENT")
            #expect(detail.errno == ENOENT)
            #expect(detail.syscall == "open")
            #expect(detail.path == path)
            #expect(detail.suggestions == ["checkPath"])
        }
    }

    @Test("directories and FIFOs are refused without blocking")
    func notRegular() {
        let directory = freshDirectory()
        #expect(throws: LoadError.notRegularFile(path: directory, kind: "directory")) { try load(directory) }
        let fifo = directory + "/pipe"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: LoadError.notRegularFile(path: fifo, kind: "special file")) { try load(fifo) }
    }

    @Test("a cancelled load stops with .cancelled")
    func cancelled() {
        let path = writeTemporaryFile([UInt8](repeating: 0x61, count: 10_000))
        var pieces = 0
        #expect(throws: LoadError.cancelled) {
            _ = try TextFileLoader.load(path: path, pieceSize: 1000, isCancelled: { pieces >= 3 }) { _ in pieces += 1 }
        }
        #expect(pieces == 3)
    }

    @Test("progress reports bytes read against the file size")
    func progress() throws {
        let path = writeTemporaryFile([UInt8](repeating: 0x61, count: 2500))
        var reports: [Int] = []
        _ = try TextFileLoader.load(path: path, pieceSize: 1000, progress: { done, total in
            #expect(total == 2500)
            reports.append(done)
        }) { _ in }
        #expect(reports == [1000, 2000, 2500])
    }
}
