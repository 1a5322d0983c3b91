import Testing
@testable import TextBuffer

/// Copies are snapshots: editing one copy (through the remembered chunk or not) never changes
/// another, and each goes on working on its own.
@Suite struct SnapshotTests {
    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func forkedCopiesStayIndependent(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let start = RandomEditTests.randomText(length: 8_000, using: &random)
        // Each fork is a buffer and the bytes it must hold.
        var forks: [(buffer: TextBuffer, bytes: [UInt8])] = [(TextBuffer(start), Array(start.utf8))]
        for step in 0..<600 {
            let which = Int.random(in: 0..<forks.count, using: &random)
            if Int.random(in: 0..<25, using: &random) == 0 && forks.count < 8 {
                forks.append(forks[which])  // a snapshot, then both go on
                continue
            }
            var (buffer, bytes) = forks[which]
            // Typing-like edits near the last one, so that the remembered chunk is used.
            let reference = ReferenceText(String(decoding: bytes, as: UTF8.self))
            let index = min(reference.scalars.count, (step * 37) % (reference.scalars.count + 1))
            var lower = reference.utf8Offset(ofScalarIndex: index)
            while buffer.isInsideCRLF(lower) { lower -= 1 }
            var upper = lower
            if Bool.random(using: &random), upper < bytes.count {
                upper = reference.utf8Offset(ofScalarIndex: min(reference.scalars.count, index + Int.random(in: 1...3, using: &random)))
                while buffer.isInsideCRLF(upper) { upper += 1 }
            }
            let text = RandomEditTests.randomText(length: Int.random(in: 0...3, using: &random), using: &random)
            buffer.replace(utf8Range: lower..<upper, with: text)
            bytes.replaceSubrange(lower..<upper, with: Array(text.utf8))
            forks[which] = (buffer, bytes)
            for fork in forks {
                #expect(fork.buffer.utf8Bytes() == fork.bytes, "seed \(seed), step \(step)")
            }
        }
        for fork in forks {
            fork.buffer.checkInvariants()
            let reference = ReferenceText(String(decoding: fork.bytes, as: UTF8.self))
            #expect(fork.buffer.lineCount == reference.lines.count)
            #expect(fork.buffer.count(in: .utf16) == reference.count(.utf16))
        }
    }
}
