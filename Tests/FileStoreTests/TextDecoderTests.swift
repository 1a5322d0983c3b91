import Testing
import UTF8Validation

@testable import FileStore

/// The sixteen-bytes-at-a-time UTF-8 validation and line-break tally, checked against the
/// byte-by-byte code (and the standard library) on buffers long enough for the vector paths.
@Suite("Decoding UTF-8 and counting line breaks, sixteen bytes at a time")
struct TextDecoderTests {
    /// What the validator answers for `bytes`: the valid prefix, or the error's offset and reason.
    enum Outcome: Equatable {
        case valid(Int)
        case invalid(offset: Int, reason: String)
    }

    static func validate(_ bytes: [UInt8], incompleteTail: Bool, byteByByte: Bool = false, extensions: Bool = true) -> Outcome {
        bytes.withUnsafeBufferPointer { buffer in
            do throws(TextDecoder.Failure) {
                let valid = byteByByte
                    ? try TextDecoder.validUTF8Prefix(buffer, from: 0, baseOffset: 0, allowIncompleteTail: incompleteTail)
                    : try TextDecoder.validUTF8Prefix(buffer, baseOffset: 0, allowIncompleteTail: incompleteTail, extensions: extensions)
                return .valid(valid)
            } catch {
                return .invalid(offset: error.offset, reason: error.reason)
            }
        }
    }

    /// Checks `bytes` both ways, and against the standard library's validation.
    /// Both vector paths are checked: the portable one (SSE2, sixteen bytes at a time) and, where
    /// the processor has AVX2, the C one (64 bytes at a time).
    static func check(_ bytes: [UInt8], _ comment: Comment? = nil) {
        for incompleteTail in [false, true] {
            let slow = validate(bytes, incompleteTail: incompleteTail, byteByByte: true)
            for extensions in [false, true] {
                let fast = validate(bytes, incompleteTail: incompleteTail, extensions: extensions)
                #expect(fast == slow, "\(comment?.rawValue ?? "") (extensions: \(extensions))")
                if !incompleteTail {
                    let isValid = String(validating: bytes, as: UTF8.self) != nil
                    #expect((fast == .valid(bytes.count)) == isValid, comment)
                    // No false alarms: valid text is left to the byte-by-byte code only at its end.
                    let block = extensions && UTF8Validation.hasAVX2Path ? 64 : 16
                    if isValid && bytes.count >= 2 * block {
                        let vectorEnd = bytes.withUnsafeBufferPointer { UTF8Validation.wellFormedPrefix($0, extensions: extensions) }
                        #expect(vectorEnd > bytes.count - block - 4, "\(comment?.rawValue ?? "") (extensions: \(extensions))")
                    }
                }
            }
        }
    }

    /// Every lead byte followed by a second byte at each edge of the ranges the rules use (and a
    /// valid or invalid third and fourth), placed so that the pair straddles a block boundary or
    /// not, in otherwise ASCII text.
    @Test func everyLeadByteAroundBlockBoundaries() {
        let ascii = [UInt8](repeating: 0x61, count: 136)
        let seconds: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                                0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        for lead in UInt8(0x80)...0xFF {
            for second in seconds {
                for tail: [UInt8] in [[0x80, 0x80], [0x41, 0x80], [0xBF, 0x41]] {
                    // Around the 16-byte blocks of the portable path and the 32- and 64-byte
                    // ones of the AVX2 path.
                    for position in [14, 15, 16, 31, 62, 63, 64, 95] {
                        var bytes = ascii
                        bytes.replaceSubrange(position..<position + 4, with: [lead, second] + tail)
                        Self.check(bytes, Comment(rawValue: "\(bytes[position..<position + 4].map { String($0, radix: 16) }) at \(position)"))
                    }
                }
            }
        }
    }

    /// Long runs of valid text of every width, with one error put at every offset in turn, and
    /// sequences cut off by the end of the buffer.
    @Test func errorsAtEveryOffsetInMixedText() {
        let text = Array(String(repeating: "aé€😀日本語 naïve\n", count: 12).utf8)
        Self.check(text)
        let errors: [[UInt8]] = [[0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xF5], [0xFF], [0xE0, 0x80, 0x80],
                                 [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]]
        for error in errors {
            for offset in 0...min(text.count, 70) {
                var bytes = text
                bytes.insert(contentsOf: error, at: offset)
                Self.check(bytes, Comment(rawValue: "\(error) at \(offset)"))
            }
        }
        for cut in 1...12 {
            Self.check(Array(text.dropLast(cut)), Comment(rawValue: "\(cut) bytes cut off"))
        }
    }

    /// Random byte soup, mostly from valid sequences.
    @Test func randomBuffers() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        let pieces: [[UInt8]] = ["a", "\n", "é", "€", "😀", "日", "\u{10FFFF}", "\u{D7FF}", "\u{E000}", "\u{800}"].map { Array($0.utf8) }
            + [[0x80], [0xC3], [0xE2, 0x82], [0xED, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF]]
        for round in 0..<3_000 {
            var bytes: [UInt8] = []
            // Short buffers, and buffers of several 64-byte blocks (the AVX2 path) where an error
            // is rare, so that it falls anywhere: early, late, at a block's edge.
            let length = round % 2 == 0 ? Int(next() % 120) : Int(next() % 600)
            let errorsPerThousand: UInt64 = round % 2 == 0 ? 30 : 2
            while bytes.count < length {
                let roll = next() % 1000
                bytes += roll >= errorsPerThousand ? pieces[Int(next() % 10)] : pieces[10 + Int(next() % 5)]
            }
            Self.check(bytes, Comment(rawValue: "round \(round)"))
        }
    }

    /// The line-break tally of pieces of any length, against counting byte by byte.
    @Test func lineEndingTallyAgainstByteByByte() {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        let alphabet: [UInt8] = [0x0A, 0x0D, 0x61, 0x61, 0x61, 0xC3, 0xA9]
        for round in 0..<500 {
            var stream: [UInt8] = []
            for _ in 0..<Int(next() % 300) { stream.append(alphabet[Int(next() % UInt64(alphabet.count))]) }
            if round % 3 == 0 { stream = stream.map { $0 == 0x0D ? 0x61 : $0 } }  // LF only
            // Reference: byte by byte.
            var lf = 0, crlf = 0, cr = 0
            for (index, byte) in stream.enumerated() {
                if byte == 0x0A && (index == 0 || stream[index - 1] != 0x0D) { lf += 1 }
                if byte == 0x0A && index > 0 && stream[index - 1] == 0x0D { crlf += 1 }
                if byte == 0x0D && (index + 1 == stream.count || stream[index + 1] != 0x0A) { cr += 1 }
            }
            // Fed in random pieces.
            var counter = LineEndingCounter()
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + 1 + Int(next() % 70))
                stream[start..<end].withUnsafeBufferPointer { counter.count($0) }
                start = end
            }
            let comment = Comment(rawValue: "round \(round)")
            #expect(counter.lf == lf, comment)
            #expect(counter.crlf == crlf, comment)
            // `cr` leaves out a `\r` that ends the stream (it waits for a `\n`); `style` counts it.
            let finalCR = stream.last == 0x0D ? 1 : 0
            #expect(counter.cr == cr - finalCR, comment)
            let kinds = [lf > 0, crlf > 0, cr > 0].filter { $0 }.count
            let style: LineEndingStyle = kinds > 1 ? .mixed : lf > 0 ? .lf : crlf > 0 ? .crlf : cr > 0 ? .cr : .none
            #expect(counter.style == style, comment)
        }
    }

    /// The loaders' kinds of line break (`LineEndingKinds`: only pieces holding a `\r` are
    /// counted) give the style of counting byte by byte, for pieces of any length, with or without
    /// `\r`, and for a stream cut in two parts (`lineEndingStyle`, a CRLF possibly split between them).
    @Test func lineEndingKindsAgainstByteByByte() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        func style(of stream: ArraySlice<UInt8>) -> LineEndingStyle {
            let stream = Array(stream)
            var lf = 0, crlf = 0, cr = 0
            for (index, byte) in stream.enumerated() {
                if byte == 0x0A && (index == 0 || stream[index - 1] != 0x0D) { lf += 1 }
                if byte == 0x0A && index > 0 && stream[index - 1] == 0x0D { crlf += 1 }
                if byte == 0x0D && (index + 1 == stream.count || stream[index + 1] != 0x0A) { cr += 1 }
            }
            let kinds = [lf > 0, crlf > 0, cr > 0].filter { $0 }.count
            return kinds > 1 ? .mixed : lf > 0 ? .lf : crlf > 0 ? .crlf : cr > 0 ? .cr : .none
        }
        func kinds(of stream: ArraySlice<UInt8>) -> LineEndingKinds {
            var kinds = LineEndingKinds()
            var start = stream.startIndex
            while start < stream.endIndex {
                let end = min(stream.endIndex, start + 1 + Int(next() % 40))
                stream[start..<end].withUnsafeBufferPointer { kinds.count($0) }
                start = end
            }
            return kinds
        }
        let alphabet: [UInt8] = [0x0A, 0x0D, 0x61, 0x61, 0x61, 0xC3, 0xA9]
        for round in 0..<2000 {
            var stream: [UInt8] = []
            for _ in 0..<Int(next() % 120) { stream.append(alphabet[Int(next() % UInt64(alphabet.count))]) }
            switch round % 4 {
            case 0: stream = stream.map { $0 == 0x0D ? 0x61 : $0 }  // LF only
            case 1: stream = stream.map { $0 == 0x0A ? 0x61 : $0 }  // CR only
            default: break
            }
            let comment = Comment(rawValue: "round \(round): \(stream)")
            #expect(kinds(of: stream[...]).style == style(of: stream[...]), comment)
            // In two parts, as `loadInParts` reads them.
            let split = stream.isEmpty ? 0 : Int(next() % UInt64(stream.count + 1))
            let head = TextFileLoader.PartOutcome(
                part: 0, lines: kinds(of: stream[..<split]), firstByte: stream[..<split].first, lastByte: stream[..<split].last)
            let tail = TextFileLoader.PartOutcome(
                part: 0, lines: kinds(of: stream[split...]), firstByte: stream[split...].first, lastByte: stream[split...].last)
            #expect(TextFileLoader.lineEndingStyle(head, tail) == style(of: stream[...]), comment)
        }
    }
}
