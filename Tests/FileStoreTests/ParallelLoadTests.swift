import Synchronization
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif


/// Random text of about `count` bytes: ASCII words, two-, three- and four-byte characters, and
/// every kind of line break (`\n`, `\r\n`, a lone `\r`), in runs so that all of them meet.
private func randomText(_ count: Int, seed: UInt64, breaks: [String] = ["\n", "\r\n", "\r"]) -> [UInt8] {
    var random = SeededGenerator(seed: seed)
    let atoms = ["a", "word", " ", "é", "ß", "日", "本", "😀", "🍐", "x"] + breaks
    var bytes: [UInt8] = []
    while bytes.count < count { bytes += Array(atoms.randomElement(using: &random)!.utf8) }
    return bytes
}

/// A thread-safe list, for what the loader's `@Sendable` callbacks see.
private final class Recorder<Value: Sendable>: Sendable {
    let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Loads `path` in parts (split when `minimumSplitSize` allows; at `split` if given), each part
/// collected as bytes; answers the parts and what was learned.
private func loadParts(
    _ path: String, encoding: TextEncoding? = nil, pieceSize: Int = 1 << 20, minimumSplitSize: Int = 0,
    split: Int? = nil,
    progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in },
    isCancelled: @escaping @Sendable () -> Bool = { false }
) throws(LoadError) -> ([[UInt8]], LoadedText) {
    try TextFileLoader.loadInParts(
        path: path, encoding: encoding, pieceSize: pieceSize, minimumSplitSize: minimumSplitSize, splitOffset: split,
        progress: progress, isCancelled: isCancelled, startingWith: [UInt8]()
    ) { part, piece in part += piece }
}

/// The error of a load, or nil.
private func loadError(_ body: () throws -> Void) -> LoadError? {
    do {
        try body()
        return nil
    } catch let error as LoadError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// Every offset at which the loader may split `bytes` (not a UTF-8 continuation byte), inside.
private func boundaries(_ bytes: [UInt8], from start: Int = 1) -> [Int] {
    (max(start, 1)..<bytes.count).filter { bytes[$0] & 0xC0 != 0x80 }
}

@Suite("Loading a text file in two parts on two threads")
struct ParallelLoadTests {
    @Test("random files: the parts joined are the file, the line endings those of the one-go loader, at every split")
    func randomFilesEveryBoundary() throws {
        for seed in UInt64(1)...6 {
            let breaks: [String] = [["\n"], ["\r\n"], ["\r"], ["\n", "\r\n", "\r"], ["\r\n", "\n"], []][Int(seed - 1)]
            let bytes = randomText(300, seed: seed, breaks: breaks)
            let path = writeTemporaryFile(bytes)
            let (whole, expected) = try load(path)
            #expect(whole == bytes)
            for split in boundaries(bytes) {
                for pieceSize in [1, 7, 64] {
                    let (parts, info) = try loadParts(path, pieceSize: pieceSize, split: split)
                    #expect(parts.count == 2, "seed \(seed), split \(split)")
                    #expect(parts.joined().elementsEqual(bytes), "seed \(seed), split \(split), piece \(pieceSize)")
                    #expect(parts.first?.count == split, "seed \(seed), split \(split)")
                    #expect(info == expected, "seed \(seed), split \(split), piece \(pieceSize)")
                }
            }
        }
    }

    @Test("larger random files split where the loader chooses: the same text and style as the one-go loader")
    func randomFilesAutomaticSplit() throws {
        for seed in UInt64(10)..<30 {
            let bytes = randomText(Int(seed) * 997, seed: seed)
            let path = writeTemporaryFile(bytes)
            let (whole, expected) = try load(path, pieceSize: 4096)
            for pieceSize in [1000, 1 << 20] {
                let (parts, info) = try loadParts(path, pieceSize: pieceSize)
                #expect(parts.count == 2)
                #expect(parts.joined().elementsEqual(whole), "seed \(seed)")
                #expect(info == expected, "seed \(seed)")
                // The split is near the middle, at a character boundary, not inside a CRLF.
                let split = parts[0].count
                #expect(abs(split - bytes.count / 2) <= 5, "seed \(seed): split \(split) of \(bytes.count)")
                #expect(bytes[split] & 0xC0 != 0x80)
                #expect(!(bytes[split - 1] == 0x0D && bytes[split] == 0x0A))
            }
        }
    }

    @Test("the split moves past a multi-byte character that straddles the middle")
    func splitAtCharacterBoundary() throws {
        for width in 2...4 {
            let character = Array(["é", "日", "😀"][width - 2].utf8)
            for shift in 0..<width {
                // The middle (10) falls `shift` bytes into the character.
                let bytes = Array(repeating: UInt8(ascii: "a"), count: 10 - shift) + character
                    + Array(repeating: UInt8(ascii: "b"), count: 10 + shift - width)
                #expect(bytes.count == 20)
                let path = writeTemporaryFile(bytes)
                let (parts, info) = try loadParts(path)
                #expect(parts.joined().elementsEqual(bytes))
                #expect(parts[0].count == (shift == 0 ? 10 : 10 - shift + width), "width \(width), shift \(shift)")
                #expect(info.lineEnding == .none)
            }
        }
    }

    @Test("a CRLF across the middle: the split moves past it; forced between the two, the pair counts once")
    func crlfAcrossTheSplit() throws {
        let bytes = Array("0123456789abc\r\ndef\r\nghij12345678901".utf8)
        let path = writeTemporaryFile(bytes)
        // The middle (17) is not in the pair; move the text so it is.
        let centred = Array("0123456789abcdef\r\nghij\r\nklmn1234567".utf8)
        #expect(centred[17] == 0x0A && centred.count == 35)
        let centredPath = writeTemporaryFile(centred)
        let (parts, info) = try loadParts(centredPath)
        #expect(parts[0].count == 18)
        #expect(parts.joined().elementsEqual(centred))
        #expect(info.lineEnding == .crlf)
        // Forced between `\r` and `\n`: one CRLF, not a CR and an LF.
        let (forced, forcedInfo) = try loadParts(path, split: 14)
        #expect(forced[0].last == 0x0D && forced[1].first == 0x0A)
        #expect(forcedInfo.lineEnding == .crlf)
        // A `\r` ending the first part and no `\n` after it is a lone CR.
        let lone = Array("abc\r\ndef\rghi\r\n".utf8)
        let (_, loneInfo) = try loadParts(writeTemporaryFile(lone), split: 9)
        #expect(loneInfo.lineEnding == .mixed)
        let onlyCR = Array("abc\rdef\r".utf8)
        let (_, crInfo) = try loadParts(writeTemporaryFile(onlyCR), split: 4)
        #expect(crInfo.lineEnding == .cr)
    }

    @Test("an invalid byte in the second part is reported at its offset in the file")
    func invalidByteInSecondPart() {
        var bytes = randomText(50_000, seed: 42, breaks: ["\n"])
        let bad = 40_000 + (bytes[40_000...].firstIndex { $0 < 0x80 }! - 40_000)
        bytes[bad] = 0xFF
        let path = writeTemporaryFile(bytes)
        let expected = loadError { _ = try load(path) }
        #expect(expected == .notText(path: path, offset: bad, encoding: .utf8, reason: "byte 0xFF is not valid UTF-8"))
        for pieceSize in [1000, 1 << 20] {
            #expect(loadError { _ = try loadParts(path, pieceSize: pieceSize) } == expected)
        }
    }

    @Test("with errors in both parts, the first in the file is reported")
    func firstErrorInFileOrder() {
        var bytes = randomText(50_000, seed: 43, breaks: ["\n"])
        let early = bytes[10_000...].firstIndex { $0 < 0x80 }!
        let late = bytes[40_000...].firstIndex { $0 < 0x80 }!
        bytes[early] = 0xC0
        bytes[late] = 0xFF
        let path = writeTemporaryFile(bytes)
        let expected = loadError { _ = try load(path) }
        #expect(expected == .notText(path: path, offset: early, encoding: .utf8, reason: "byte 0xC0 is not valid UTF-8"))
        #expect(loadError { _ = try loadParts(path, pieceSize: 997) } == expected)
    }

    @Test("random corruptions: the same error as the one-go loader, wherever the split falls")
    func corruptionsMatchTheOneGoLoader() {
        var random = SeededGenerator(seed: 7)
        let corruptions: [[UInt8]] = [[0xFF], [0x80], [0xC3], [0xE6, 0x97], [0xF0, 0x9F, 0x98], [0xED, 0xA0, 0x80], [0xC0, 0xAF]]
        for round in 0..<60 {
            var bytes = randomText(400, seed: UInt64(100 + round))
            let at = Int.random(in: 1..<bytes.count - 4, using: &random)
            let corruption = corruptions[round % corruptions.count]
            bytes.replaceSubrange(at..<at, with: corruption)
            let path = writeTemporaryFile(bytes)
            let expected = loadError { _ = try load(path, pieceSize: 13) }
            #expect(expected != nil)
            for split in boundaries(bytes) where abs(split - at) < 6 || split % 37 == 0 {
                let error = loadError { _ = try loadParts(path, pieceSize: 13, split: split) }
                #expect(error == expected, "round \(round), corruption at \(at), split \(split)")
            }
        }
    }

    @Test("a sequence cut off by a forced split before a non-continuation byte is the one-go loader's error")
    func truncatedBeforeTheSplit() {
        // "ab", then the first two bytes of a three-byte character, then "cd": the split at 4.
        let bytes: [UInt8] = [0x61, 0x62, 0xE6, 0x97, 0x63, 0x64] + Array(repeating: 0x65, count: 10)
        let path = writeTemporaryFile(bytes)
        let expected = loadError { _ = try load(path) }
        #expect(expected == .notText(path: path, offset: 2, encoding: .utf8, reason: "malformed UTF-8 sequence"))
        #expect(loadError { _ = try loadParts(path, split: 4) } == expected)
        #expect(loadError { _ = try loadParts(path, pieceSize: 1, split: 4) } == expected)
    }

    @Test("cancellation stops both threads with .cancelled")
    func cancellation() {
        let bytes = randomText(200_000, seed: 5)
        let path = writeTemporaryFile(bytes)
        let reads = Atomic<Int>(0)
        #expect(throws: LoadError.cancelled) {
            _ = try loadParts(
                path, pieceSize: 1000, progress: { _, _ in reads.wrappingAdd(1, ordering: .relaxed) },
                isCancelled: { reads.load(ordering: .relaxed) >= 6 })
        }
        // Each thread asks before each piece: at most one more piece each after the sixth.
        #expect((6...8).contains(reads.load(ordering: .relaxed)))
        // Cancelled before anything is read.
        #expect(throws: LoadError.cancelled) {
            _ = try loadParts(path, isCancelled: { true })
        }
    }

    @Test("progress: the bytes read by both threads, in order, up to the file size")
    func progress() throws {
        let bytes = randomText(123_457, seed: 9)
        let path = writeTemporaryFile(bytes)
        let reports = Recorder<[Int]>()
        _ = try loadParts(path, pieceSize: 4096, progress: { done, total in reports.append([done, total]) })
        let all = reports.all
        #expect(all.allSatisfy { $0[1] == bytes.count })
        #expect(all.map { $0[0] } == all.map { $0[0] }.sorted())
        #expect(all.last?[0] == bytes.count)
        // One report per piece read: each part of about 61.7 KB in 4 KiB pieces.
        #expect(all.count == 2 * ((bytes.count / 2 + 4095) / 4096))

        // With a UTF-8 BOM the first report counts it too, and the last is the size.
        let withBOM = [0xEF, 0xBB, 0xBF] + bytes
        let bomPath = writeTemporaryFile(withBOM)
        let bomReports = Recorder<[Int]>()
        let (parts, info) = try loadParts(bomPath, pieceSize: 4096, progress: { done, total in bomReports.append([done, total]) })
        #expect(bomReports.all.last == [withBOM.count, withBOM.count])
        #expect(parts.count == 2 && parts.joined().elementsEqual(bytes))
        #expect(info.hasByteOrderMark && info.encoding == .utf8)
    }

    @Test("small files, UTF-16 and Latin-1 are read in one part, as load reads them")
    func onePart() throws {
        let text = Array("héllo\r\nwörld 😀".utf8)
        let small = writeTemporaryFile(text)
        let (smallParts, smallInfo) = try loadParts(small, minimumSplitSize: 1000)
        #expect(smallParts == [text])
        #expect(smallInfo == (try load(small)).1)

        let utf16 = writeTemporaryFile([0xFF, 0xFE] + Array("héllo\r\nwörld 😀".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        let (utf16Parts, utf16Info) = try loadParts(utf16)
        #expect(utf16Parts == [text])
        #expect(utf16Info.encoding == .utf16LittleEndian && utf16Info.hasByteOrderMark)

        let latin1 = writeTemporaryFile([0x63, 0x61, 0x66, 0xE9, 0x0A, 0x61, 0x62, 0x63])
        let (latin1Parts, latin1Info) = try loadParts(latin1, encoding: .latin1)
        #expect(latin1Parts == [Array("café\nabc".utf8)])
        #expect(latin1Info.encoding == .latin1)

        // UTF-8 requested of a file with a UTF-16 BOM: split, and refused at offset 0 as load does.
        let wrong = writeTemporaryFile([0xFF, 0xFE] + Array(repeating: 0x61, count: 40))
        #expect(loadError { _ = try loadParts(wrong, encoding: .utf8) } == loadError { _ = try load(wrong, encoding: .utf8) })

        // Errors before any reading are load's.
        #expect(loadError { _ = try loadParts("/nonexistent/file") } == loadError { _ = try load("/nonexistent/file") })
    }

    @Test("no boundary in the four bytes from the middle: one part, and load's error")
    func noBoundaryNearTheMiddle() {
        let bytes = Array(repeating: UInt8(ascii: "a"), count: 10) + [0x80, 0x80, 0x80, 0x80, 0x80] + Array(repeating: UInt8(ascii: "a"), count: 5)
        let path = writeTemporaryFile(bytes)
        let expected = loadError { _ = try load(path) }
        #expect(expected == .notText(path: path, offset: 10, encoding: .utf8, reason: "byte 0x80 is not valid UTF-8"))
        #expect(loadError { _ = try loadParts(path) } == expected)
    }
}

/// The validator's four-blocks-at-a-time loop (which each thread of a load in parts runs over its
/// half), against the byte-by-byte code and the standard library, with errors and sequences on
/// every side of the 64-byte groups and after ASCII runs the loop skips whole.
@Suite("UTF-8 validation in groups of four blocks")
struct GroupedValidationTests {
    func check(_ bytes: [UInt8], _ comment: Comment) {
        bytes.withUnsafeBufferPointer { buffer in
            func outcome(_ byteByByte: Bool) -> String {
                do throws(TextDecoder.Failure) {
                    let valid = byteByByte
                        ? try TextDecoder.validUTF8Prefix(buffer, from: 0, baseOffset: 0, allowIncompleteTail: false)
                        : try TextDecoder.validUTF8Prefix(buffer, baseOffset: 0, allowIncompleteTail: false)
                    return "valid \(valid)"
                } catch {
                    return "\(error.offset): \(error.reason)"
                }
            }
            let fast = outcome(false)
            #expect(fast == outcome(true), comment)
            #expect((fast == "valid \(bytes.count)") == (String(validating: bytes, as: UTF8.self) != nil), comment)
        }
    }

    @Test func errorsAroundGroupsAfterASCIIRuns() {
        let insertions: [[UInt8]] = [[0x80], [0xC3], [0xC3, 0xA9], [0xE2, 0x82], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98],
                                     [0xF0, 0x9F, 0x98, 0x80], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xFF]]
        for insertion in insertions {
            for position in 0...200 {
                var ascii = [UInt8](repeating: 0x61, count: 260)
                ascii.replaceSubrange(position..<position + insertion.count, with: insertion)
                check(ascii, "\(insertion) at \(position) in ASCII")
            }
        }
        let text = Array(String(repeating: "aé€😀日本語 naïve\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", count: 8).utf8)
        check(text, "mixed")
        for insertion in insertions {
            for offset in stride(from: 0, through: text.count, by: 1) where offset % 3 == 0 || (offset + 3) % 16 < 6 {
                var bytes = text
                bytes.insert(contentsOf: insertion, at: offset)
                check(bytes, "\(insertion) at \(offset) in mixed text")
            }
        }
    }
}
