import Foundation
import Testing

@testable import FileStore

#if canImport(Glibc)
    import Glibc
#endif

/// Creates `name` in `directory` holding `text`.
private func touch(_ directory: String, _ name: String, _ text: String = "") {
    let fd = open(directory + "/" + name, O_WRONLY | O_CREAT | O_EXCL, 0o644)
    precondition(fd >= 0)
    _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

private func rule(_ prefix: String, _ style: NamingStyle, _ fileExtension: String? = "txt") throws -> NamingRule {
    try NamingRule(prefix: prefix, style: style, fileExtension: fileExtension)
}

/// The name of a file created by `createNew`.
private func createdName(_ directory: String, _ rule: NamingRule, _ text: String = "", now: Int64? = nil) throws -> String {
    let (path, _) = try DocumentNaming.createNew(in: directory, rule: rule, bytes: Array(text.utf8), now: now)
    #expect(path.hasPrefix(directory + "/"))
    return String(path.dropFirst(directory.count + 1))
}

/// Whether `text` is an upper-case version 4 UUID.
private func isUUIDv4(_ text: Substring) -> Bool {
    let groups = text.split(separator: "-", omittingEmptySubsequences: false)
    guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
    guard text.allSatisfy({ $0 == "-" || ($0.isHexDigit && !$0.isLowercase) }) else { return false }
    return groups[2].first == "4" && "89AB".contains(groups[3].first ?? "x")
}

@Suite("DocumentNaming: names for new documents and copies")
struct DocumentNamingTests {
    // MARK: Sequence

    @Test("sequence names start at 1 and take the first free number: gaps are filled")
    func sequenceFillsGaps() throws {
        let directory = freshDirectory()
        let note = try rule("Note", .sequence)
        #expect(try createdName(directory, note, "one") == "Note 1.txt")
        touch(directory, "Note 3.txt", "three")
        #expect(try createdName(directory, note, "two") == "Note 2.txt")
        #expect(try createdName(directory, note, "four") == "Note 4.txt")
        // Names that only look alike take no number: other extensions, leading zeros, other prefixes.
        touch(directory, "Note 5.md")
        touch(directory, "Note 05.txt")
        touch(directory, "Notes 5.txt")
        #expect(try createdName(directory, note) == "Note 5.txt")
        #expect(try fileText(directory + "/Note 3.txt") == "three")
        #expect(try fileText(directory + "/Note 2.txt") == "two")
        let bare = try rule("Untitled", .sequence, nil)
        #expect(try createdName(directory, bare) == "Untitled 1")
    }

    @Test("8 threads × 50 creations with one rule in one directory: 400 distinct files, each with its own content")
    func concurrentCreators() throws {
        let directory = freshDirectory()
        let note = try rule("Note", .sequence)
        let results = Probe()
        let failures = Probe()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<50 {
                let id = thread * 50 + index
                do {
                    let (path, identity) = try DocumentNaming.createNew(in: directory, rule: note, bytes: Array("creator \(id)\n".utf8))
                    if identity.size == Int64("creator \(id)\n".utf8.count), let number = Int(path.dropFirst(directory.count + 6).dropLast(4)) {
                        results.record(id * 1000 + number)
                    } else {
                        failures.record(id)
                    }
                } catch {
                    failures.record(id)
                }
            }
        }
        #expect(failures.values.isEmpty)
        let created = results.values
        #expect(created.count == 400)
        let numbers = Set(created.map { $0 % 1000 })
        #expect(numbers == Set(1...400))
        #expect(try entries(directory).count == 400)
        for value in created {
            #expect(try fileText(directory + "/Note \(value % 1000).txt") == "creator \(value / 1000)\n")
        }
    }

    // MARK: UUID and timestamp

    @Test("uuid names: prefix, a space, an upper-case version 4 UUID, the extension; the UUID alone without a prefix")
    func uuidNames() throws {
        let directory = freshDirectory()
        let first = try createdName(directory, try rule("Note", .uuid))
        #expect(first.hasPrefix("Note ") && first.hasSuffix(".txt"))
        #expect(isUUIDv4(first.dropFirst(5).dropLast(4)))
        let bare = try createdName(directory, try rule("", .uuid, nil))
        #expect(isUUIDv4(bare[...]))
        let many = Set((0..<200).map { _ in DocumentNaming.randomUUID() })
        #expect(many.count == 200)
        #expect(many.allSatisfy { isUUIDv4($0[...]) })
    }

    @Test("timestamp names: local time with dots; a taken time counts on with 2, 3, ...")
    func timestampNames() throws {
        let directory = freshDirectory()
        let now: Int64 = 1_795_334_462  // 2026-11-22 08:01:02 UTC
        var clock = time_t(now)
        var parts = tm()
        localtime_r(&clock, &parts)
        let stamp = String(format: "%04d-%02d-%02d %02d.%02d.%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
        let note = try rule("Note", .timestamp)
        #expect(try createdName(directory, note, now: now) == "Note \(stamp).txt")
        #expect(try createdName(directory, note, now: now) == "Note \(stamp) 2.txt")
        #expect(try createdName(directory, note, now: now) == "Note \(stamp) 3.txt")
        #expect(try createdName(directory, try rule("", .timestamp, "md"), now: now) == "\(stamp).md")
        #expect(!stamp.contains(":"))
        // The format itself: 2026-11-22 08.01.02.
        let shape = stamp.map { $0.isNumber ? "9" : String($0) }.joined()
        #expect(shape == "9999-99-99 99.99.99")
        // Without `now`, the current time.
        let current = try createdName(directory, try rule("Now", .timestamp))
        #expect(current.hasPrefix("Now 20") && current.count == "Now 2026-11-22 08.01.02.txt".count)
    }

    @Test("creation never overwrites, reports a missing directory and a file in place of one")
    func creationErrors() throws {
        let directory = freshDirectory()
        #expect(throws: FileSystemError.self) { try DocumentNaming.createNew(in: directory + "/missing", rule: try rule("Note", .sequence), bytes: []) }
        do {
            _ = try DocumentNaming.createNew(in: directory + "/missing", rule: try rule("Note", .sequence), bytes: [])
        } catch let error as FileSystemError {
            #expect(error.code == "ENOENT")
        }
        touch(directory, "plain")
        do {
            _ = try DocumentNaming.createNew(in: directory + "/plain", rule: try rule("Note", .sequence), bytes: [])
            Issue.record("a file is not a directory")
        } catch let error as FileSystemError {
            #expect(error.code == "ENOTDIR")
        }
        // A rule made valid and changed afterwards is checked again.
        var changed = try rule("Note", .sequence)
        changed.prefix = "a/b"
        do throws(FileSystemError) {
            _ = try DocumentNaming.createNew(in: directory, rule: changed, bytes: [])
            Issue.record("an invalid rule was used")
        } catch {
            #expect(error.code == "EINVAL" && error.message.contains("prefix"))
        }
    }

    // MARK: Validation

    @Test("validation names the field at fault", arguments: [
        ("", NamingStyle.sequence, "txt", "prefix"),
        ("a/b", .sequence, "txt", "prefix"),
        ("a\u{0}b", .uuid, "txt", "prefix"),
        (".", .uuid, "txt", "prefix"),
        ("..", .timestamp, "txt", "prefix"),
        (String(repeating: "é", count: 101), .sequence, "txt", "prefix"),
        ("Note", .sequence, "", "fileExtension"),
        ("Note", .sequence, ".txt", "fileExtension"),
        ("Note", .sequence, "t/x", "fileExtension"),
        ("Note", .sequence, "t\u{0}", "fileExtension"),
        ("Note", .sequence, String(repeating: "x", count: 17), "fileExtension"),
    ] as [(String, NamingStyle, String, String)])
    func validation(prefix: String, style: NamingStyle, fileExtension: String, field: String) {
        #expect(throws: NamingError.self) { try NamingRule(prefix: prefix, style: style, fileExtension: fileExtension) }
        do throws(NamingError) {
            _ = try NamingRule(prefix: prefix, style: style, fileExtension: fileExtension)
        } catch {
            #expect(error.field == field)
            #expect(!error.message.isEmpty)
        }
    }

    @Test("valid rules: an empty prefix for uuid and timestamp, 200-byte prefixes, no extension")
    func validRules() throws {
        _ = try NamingRule(prefix: "", style: .uuid)
        _ = try NamingRule(prefix: "", style: .timestamp, fileExtension: "md")
        _ = try NamingRule(prefix: String(repeating: "é", count: 100), style: .sequence, fileExtension: "txt")
        _ = try NamingRule(prefix: "Untitled", style: .sequence)
        _ = try NamingRule(prefix: ".hidden", style: .sequence, fileExtension: "tar.gz")
    }

    // MARK: Unique names

    @Test("uniqueName: the name if free, else a counter before the extension, counting on from a counter")
    func uniqueNames() {
        let directory = freshDirectory()
        #expect(DocumentNaming.uniqueName(for: "report.txt", in: directory) == "report.txt")
        touch(directory, "report.txt")
        #expect(DocumentNaming.uniqueName(for: "report.txt", in: directory) == "report 2.txt")
        touch(directory, "report 2.txt")
        #expect(DocumentNaming.uniqueName(for: "report.txt", in: directory) == "report 3.txt")
        #expect(DocumentNaming.uniqueName(for: "report 2.txt", in: directory) == "report 3.txt")
        touch(directory, "report 5.txt")
        #expect(DocumentNaming.uniqueName(for: "report 5.txt", in: directory) == "report 6.txt")
        touch(directory, "archive.tar.gz")
        #expect(DocumentNaming.uniqueName(for: "archive.tar.gz", in: directory) == "archive 2.tar.gz")
        touch(directory, "README")
        #expect(DocumentNaming.uniqueName(for: "README", in: directory) == "README 2")
        touch(directory, ".profile")
        #expect(DocumentNaming.uniqueName(for: ".profile", in: directory) == ".profile 2")
        touch(directory, "v 0")
        #expect(DocumentNaming.uniqueName(for: "v 0", in: directory) == "v 0 2")
        touch(directory, "notes.")
        #expect(DocumentNaming.uniqueName(for: "notes.", in: directory) == "notes. 2")
        // A directory that cannot be read counts as empty.
        #expect(DocumentNaming.uniqueName(for: "a.txt", in: directory + "/missing") == "a.txt")
    }

    @Test("createExclusiveUnique takes the preferred name or the next free one, never overwriting")
    func exclusiveUnique() throws {
        let directory = freshDirectory()
        touch(directory, "report.txt", "original")
        let (path, identity) = try DocumentNaming.createExclusiveUnique(in: directory, preferredName: "report.txt", bytes: Array("copy".utf8))
        #expect(path == directory + "/report 2.txt")
        #expect(identity.size == 4)
        #expect(try fileText(directory + "/report.txt") == "original")
        #expect(try fileText(path) == "copy")
        let fresh = try DocumentNaming.createExclusiveUnique(in: directory, preferredName: "new.md", bytes: [])
        #expect(fresh.path == directory + "/new.md")
        for bad in ["", ".", "..", "a/b"] {
            #expect(throws: FileSystemError.self) { try DocumentNaming.createExclusiveUnique(in: directory, preferredName: bad, bytes: []) }
        }
        // Concurrent importers of one name: all distinct.
        let paths = Probe()
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for _ in 0..<25 {
                if let (path, _) = try? DocumentNaming.createExclusiveUnique(in: directory, preferredName: "same.txt", bytes: [UInt8(thread)]) {
                    paths.record(path.hashValue)
                }
            }
        }
        #expect(Set(paths.values).count == 100)
        #expect(try entries(directory).filter { $0.hasPrefix("same") }.count == 100)
    }

    // MARK: Display names

    @Test("displayName: the first non-blank line, trimmed, cleaned, cut on a character boundary")
    func displayNames() {
        #expect(DocumentNaming.displayName(firstLineOf: "Shopping list\nmilk\n") == "Shopping list")
        #expect(DocumentNaming.displayName(firstLineOf: "\n\n   \n\t  Title  \nbody") == "Title")
        #expect(DocumentNaming.displayName(firstLineOf: "\r\n\r\n  Windows  \r\nbody") == "Windows")
        #expect(DocumentNaming.displayName(firstLineOf: "") == nil)
        #expect(DocumentNaming.displayName(firstLineOf: " \n\t\n   ") == nil)
        #expect(DocumentNaming.displayName(firstLineOf: "and/or\n") == "and-or")
        #expect(DocumentNaming.displayName(firstLineOf: "a\tb\u{7}c\u{0}d") == "a b c d")
        #expect(DocumentNaming.displayName(firstLineOf: "🎉 Party 👨‍👩‍👧‍👦\n") == "🎉 Party 👨‍👩‍👧‍👦")
        let family = "👨‍👩‍👧‍👦"
        let cut = DocumentNaming.displayName(firstLineOf: String(repeating: family, count: 10), maxLength: 3)
        #expect(cut == String(repeating: family, count: 3))
        let long = String(repeating: "word ", count: 100)
        let name = DocumentNaming.displayName(firstLineOf: long)
        #expect(name?.count == 119)  // 120 characters, the last a space, trimmed
        #expect(name?.hasSuffix("word") == true)
        #expect(DocumentNaming.displayName(firstLineOf: "e\u{301}tude", maxLength: 1) == "e\u{301}")
        #expect(DocumentNaming.displayName(firstLineOf: "x", maxLength: 0) == nil)
    }

    @Test("fileName from a display name: the extension, no leading dots, at most 255 bytes with room for a counter")
    func fileNames() {
        #expect(DocumentNaming.fileName(forDisplayName: "Shopping list", fileExtension: "txt") == "Shopping list.txt")
        #expect(DocumentNaming.fileName(forDisplayName: "Shopping list", fileExtension: nil) == "Shopping list")
        #expect(DocumentNaming.fileName(forDisplayName: "..hidden", fileExtension: "md") == "hidden.md")
        #expect(DocumentNaming.fileName(forDisplayName: "...", fileExtension: "md") == nil)
        #expect(DocumentNaming.fileName(forDisplayName: "a/b", fileExtension: "md") == "a-b.md")
        let long = DocumentNaming.fileName(forDisplayName: String(repeating: "👨‍👩‍👧‍👦", count: 120), fileExtension: "txt")
        #expect(long != nil)
        if let long {
            #expect(long.utf8.count <= 255 - 12)
            #expect(long.hasSuffix(".txt"))
            #expect(long.dropLast(4).allSatisfy { $0 == "👨‍👩‍👧‍👦" })
        }
        #expect(DocumentNaming.fileName(firstLineOf: "\n  My note  \nbody", fileExtension: "md") == "My note.md")
        #expect(DocumentNaming.fileName(firstLineOf: "  \n", fileExtension: "md") == nil)
    }
}
