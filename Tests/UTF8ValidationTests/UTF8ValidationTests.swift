import TestSupport
import Testing
import UTF8Validation

/// The one validator against the standard library's (`String(validating:as:)`), which follows the
/// same rules (RFC 3629, Unicode table 3-7).
@Suite("UTF8Validation: the one UTF-8 validator")
struct UTF8ValidationTests {
    static func standardLibraryAccepts(_ bytes: [UInt8]) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil
    }

    static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
    }

    @Test("every sequence of one and two bytes, and of three and four bytes with every lead and the edges of the ranges after it, is judged as the standard library judges it")
    func shortSequencesAgreeWithTheStandardLibrary() {
        var disagreements: [[UInt8]] = []
        func check(_ bytes: [UInt8]) {
            let expected = Self.standardLibraryAccepts(bytes)
            var singleAgrees = true
            if bytes[0] >= 0x80 {
                // A buffer led by a non-ASCII byte starts with one sequence: the shortest prefix the
                // standard library accepts is that sequence, or there is none.
                let accepted = (1...bytes.count).first { Self.standardLibraryAccepts(Array(bytes[..<$0])) }
                let single = bytes.withUnsafeBufferPointer { UTF8Validation.checkSequence(at: 0, in: $0) }
                if case .valid(let length) = single { singleAgrees = accepted == length } else { singleAgrees = accepted == nil }
            }
            if Self.isValid(bytes) != expected || !singleAgrees { disagreements.append(bytes) }
        }
        for a in UInt8.min...UInt8.max {
            check([a])
            for b in UInt8.min...UInt8.max { check([a, b]) }
        }
        // The edges of every range the rules use for a second byte (80...8F, 90...9F, A0...BF and
        // what is outside them), and after it only whether a byte continues matters.
        let seconds: [UInt8] = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF]
        let continuations: [UInt8] = [0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xFF]
        for a in UInt8(0xC0)...UInt8.max {
            for b in seconds {
                for c in continuations {
                    check([a, b, c])
                    for d in continuations { check([a, b, c, d]) }
                }
            }
        }
        let agreed = disagreements.isEmpty
        #expect(agreed, "\(disagreements.count) disagreements, the first: \(disagreements.prefix(10))")
    }

    @Test("a problem is named at the sequence's first byte: a bad lead with its byte, a bad continuation as malformed, a cut-off sequence as truncated")
    func problemsAreNamed() {
        func checked(_ bytes: [UInt8], tail: Bool = false) -> (Int, UTF8Validation.Problem?) {
            let result = bytes.withUnsafeBufferPointer { UTF8Validation.validPrefix($0, allowIncompleteTail: tail) }
            return (result.end, result.problem)
        }
        #expect(checked(Array("abc".utf8)) == (3, nil))
        #expect(checked([0x61, 0x80]) == (1, .invalidLead(0x80)))
        #expect(checked([0x61, 0x62, 0xC0, 0x80]) == (2, .invalidLead(0xC0)))
        #expect(checked([0xE0, 0x80, 0x80]) == (0, .malformed))  // overlong
        #expect(checked([0xED, 0xA0, 0x80]) == (0, .malformed))  // a surrogate
        #expect(checked([0xF4, 0x90, 0x80, 0x80]) == (0, .malformed))  // above U+10FFFF
        #expect(checked([0x61, 0xE2, 0x82]) == (1, .truncated))
        #expect(checked([0x61, 0xE2, 0x82], tail: true) == (1, nil))
        #expect(checked([0x61, 0xE2, 0x41], tail: true) == (1, .malformed))  // not merely cut off
    }

    @Test("long texts with one error at a random place: the block paths (16 bytes in Swift, 64 with AVX2) agree with the byte-by-byte path and the standard library")
    func longTextsAgree() {
        var generator = SeededGenerator(seed: 16_3)
        let pieces = ["a", "é", "€", "😀", "日本語", " naïve\n", String(repeating: "x", count: 40)].map { Array($0.utf8) }
        let errors: [[UInt8]] = [[0x80], [0xC0, 0x80], [0xF5], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80],
                                 [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]]
        for round in 0..<400 {
            var bytes: [UInt8] = []
            while bytes.count < Int.random(in: 64...600, using: &generator) {
                bytes += pieces.randomElement(using: &generator)!
            }
            if round % 4 != 0 {
                let at = Int.random(in: 0...bytes.count, using: &generator)
                bytes.insert(contentsOf: errors.randomElement(using: &generator)!, at: at)
            }
            let expected = Self.standardLibraryAccepts(bytes)
            for extensions in [false, true] {
                let blocks = bytes.withUnsafeBufferPointer { UTF8Validation.wellFormedPrefix($0, extensions: extensions) }
                let rest = bytes.withUnsafeBufferPointer { UTF8Validation.validPrefix($0, from: blocks, allowIncompleteTail: false) }
                let slow = bytes.withUnsafeBufferPointer { UTF8Validation.validPrefix($0, allowIncompleteTail: false) }
                #expect(rest.end == slow.end && rest.problem == slow.problem, "round \(round), extensions \(extensions)")
                #expect((slow.problem == nil) == expected, "round \(round)")
                // The block paths never pass the first error.
                #expect(blocks <= slow.end, "round \(round), extensions \(extensions)")
            }
            #expect(Self.isValid(bytes) == expected, "round \(round)")
        }
    }
}
