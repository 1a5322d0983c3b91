#if canImport(Glibc)
    import Glibc
#endif

/// How ``DocumentNaming`` makes the distinguishing part of a new document's name.
public enum NamingStyle: String, Sendable {
    /// `Note 1.txt`, `Note 2.txt`, ...: the first number from 1 that no file in the directory has.
    case sequence
    /// `Note 6F9619FF-8B86-4011-B42D-00C04FC964FF.txt`: a random (version 4) UUID, upper case.
    case uuid
    /// `Note 2026-11-22 08.01.02.txt`: the local time (dots, not colons, which other file systems
    /// refuse); `... 08.01.02 2.txt`, `3`, ... when that name is taken.
    case timestamp
}

/// A naming rule that cannot be used: which field (`prefix`, `fileExtension`) and why.
public struct NamingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule's field at fault, spelt as in ``NamingRule``.
    public var field: String
    /// A sentence saying what is wrong with it.
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}

/// How new documents in a directory are named: `prefix`, a space and the style's part, then
/// `.fileExtension`. The fields are checked by the initialiser and by ``validate()`` (for a rule
/// changed afterwards; ``DocumentNaming/createNew(in:rule:bytes:now:)`` checks too).
public struct NamingRule: Sendable, Equatable {
    /// The most bytes (UTF-8) of a prefix, leaving room in a 255-byte file name for the rest.
    public static let maximumPrefixBytes = 200
    /// The most bytes (UTF-8) of an extension.
    public static let maximumExtensionBytes = 16

    /// The start of every name, such as `Untitled`. Empty only for the uuid and timestamp styles
    /// (then the name is the UUID or the time alone).
    public var prefix: String
    public var style: NamingStyle
    /// The extension without its dot (`txt`, `md`), or nil for names without one.
    public var fileExtension: String?

    /// A checked rule; throws the first field at fault.
    public init(prefix: String, style: NamingStyle, fileExtension: String? = nil) throws(NamingError) {
        self.prefix = prefix
        self.style = style
        self.fileExtension = fileExtension
        try validate()
    }

    /// Throws the first field at fault: a prefix with `/` or NUL, `.` or `..`, longer than
    /// ``maximumPrefixBytes``, or empty for the sequence style; an extension that is empty, starts
    /// with a dot, holds `/` or NUL, or is longer than ``maximumExtensionBytes``.
    public func validate() throws(NamingError) {
        if prefix.isEmpty && style == .sequence {
            throw NamingError(field: "prefix", message: "must not be empty for the sequence style (the names would be bare numbers)")
        }
        if prefix.utf8.contains(UInt8(ascii: "/")) { throw NamingError(field: "prefix", message: "must not contain \"/\"") }
        if prefix.utf8.contains(0) { throw NamingError(field: "prefix", message: "must not contain a NUL character") }
        if prefix == "." || prefix == ".." { throw NamingError(field: "prefix", message: "must not be \".\" or \"..\"") }
        if prefix.utf8.count > Self.maximumPrefixBytes {
            throw NamingError(field: "prefix", message: "is \(prefix.utf8.count) bytes long; at most \(Self.maximumPrefixBytes) are allowed")
        }
        if let fileExtension {
            if fileExtension.isEmpty { throw NamingError(field: "fileExtension", message: "must not be empty (leave it out for names without one)") }
            if fileExtension.hasPrefix(".") { throw NamingError(field: "fileExtension", message: "must be given without its leading dot") }
            if fileExtension.utf8.contains(UInt8(ascii: "/")) { throw NamingError(field: "fileExtension", message: "must not contain \"/\"") }
            if fileExtension.utf8.contains(0) { throw NamingError(field: "fileExtension", message: "must not contain a NUL character") }
            if fileExtension.utf8.count > Self.maximumExtensionBytes {
                throw NamingError(field: "fileExtension", message: "is \(fileExtension.utf8.count) bytes long; at most \(Self.maximumExtensionBytes) are allowed")
            }
        }
    }

    /// `.ext`, or nothing.
    var dottedExtension: String { fileExtension.map { "." + $0 } ?? "" }
}

/// Names for new documents and for copies (UIDocument's "Untitled 2"), and their exclusive
/// creation: a name is only ever taken by `O_CREAT | O_EXCL` (or a rename that refuses to replace),
/// so a file that another process creates at the same moment is never overwritten; the loser of
/// such a race moves on to the next name.
public enum DocumentNaming {
    /// How many names a creation tries before giving up with EEXIST.
    public static let maximumAttempts = 10_000

    // MARK: - New documents

    /// Creates a new document in `directory` named by `rule` and holding `bytes`, exclusively and
    /// durably (``FileCreation/createNew(path:bytes:)``: the file and the directory entry are
    /// flushed). The directory is read once for the names in use; if a name turns out to be taken
    /// meanwhile (EEXIST), the next one is tried, up to ``maximumAttempts`` names.
    ///
    /// - Parameters:
    ///   - now: the time for the timestamp style, in seconds since the epoch; nil for the current
    ///     time. Shown in the local time zone.
    /// - Throws: EINVAL for a rule that fails ``NamingRule/validate()`` (the reason names the field);
    ///   the directory's errors as they come (ENOENT, ENOTDIR, EACCES, ...); EEXIST when every
    ///   attempt found its name taken.
    public static func createNew(
        in directory: String, rule: NamingRule, bytes: [UInt8], now: Int64? = nil
    ) throws(FileSystemError) -> (path: String, identity: FileIdentity) {
        do throws(NamingError) {
            try rule.validate()
        } catch {
            throw FileSystemError(errno: EINVAL, syscall: "naming rule", path: directory, reason: "the \(error.field) \(error.message)")
        }
        var taken = try entryNames(in: directory)
        var candidates = Candidates(rule: rule, now: now ?? Int64(time(nil)))
        for _ in 0..<maximumAttempts {
            let name = candidates.next(avoiding: taken)
            let path = join(directory, name)
            do throws(FileSystemError) {
                let identity = try FileCreation.createNew(path: path, bytes: bytes)
                return (path, identity)
            } catch where error.errno == EEXIST {
                taken.insert(Array(name.utf8))
            }
        }
        throw FileSystemError(errno: EEXIST, syscall: "open", path: directory,
            reason: "no free name for a new document after \(maximumAttempts) attempts (other processes are creating files with the same rule)")
    }

    /// The names a rule offers, in order, skipping the ones in use.
    struct Candidates {
        let rule: NamingRule
        /// The base of timestamp names (prefix and time), fixed for one creation.
        let stamp: String
        /// The next number to try (sequence numbers, or the timestamp's counter; 1 is none).
        var number = 1

        init(rule: NamingRule, now: Int64) {
            self.rule = rule
            let time = DocumentNaming.timestamp(now)
            stamp = rule.prefix.isEmpty ? time : rule.prefix + " " + time
        }

        mutating func next(avoiding taken: Set<[UInt8]>) -> String {
            switch rule.style {
            case .uuid:
                // A collision of random UUIDs is practically impossible; a new one each time.
                let uuid = DocumentNaming.randomUUID()
                let name = (rule.prefix.isEmpty ? uuid : rule.prefix + " " + uuid) + rule.dottedExtension
                if taken.contains(Array(name.utf8)) { return next(avoiding: taken) }
                return name
            case .sequence:
                while true {
                    let name = rule.prefix + " \(number)" + rule.dottedExtension
                    number += 1
                    if !taken.contains(Array(name.utf8)) { return name }
                }
            case .timestamp:
                while true {
                    let name = stamp + (number == 1 ? "" : " \(number)") + rule.dottedExtension
                    number += 1
                    if !taken.contains(Array(name.utf8)) { return name }
                }
            }
        }
    }

    /// `2026-11-22 08.01.02`: `seconds` since the epoch in the local time zone.
    static func timestamp(_ seconds: Int64) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        localtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = String(Int(parts.tm_year) + 1900)
        return "\(year)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)).\(two(parts.tm_min)).\(two(parts.tm_sec))"
    }

    /// A random version 4 UUID in upper case, `6F9619FF-8B86-4011-B42D-00C04FC964FF`.
    static func randomUUID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // the RFC 4122 variant
        let digits = Array("0123456789ABCDEF".utf8)
        var text: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    // MARK: - Copies and imports

    /// A name for a copy of `fileName` in `directory` that no entry there has: `fileName` itself if
    /// it is free, else `report 2.txt`, `report 3.txt`, ... (the first free number from 2); a name
    /// that already ends in a number counts on from it (`report 2.txt` → `report 3.txt`). The
    /// extension stays at the end, `.tar.gz` and the like as one (`archive 2.tar.gz`); a leading
    /// dot starts no extension (`.profile 2`). The directory is read once; a directory that cannot
    /// be read counts as empty (the creation that follows reports its error).
    ///
    /// The name is free when the directory was read; use ``createExclusiveUnique(in:preferredName:bytes:)``
    /// or ``FileTransfer/copy(from:intoDirectory:preferredName:)`` to take it without a race.
    public static func uniqueName(for fileName: String, in directory: String) -> String {
        let taken = (try? entryNames(in: directory)) ?? []
        var counter = UniqueNames(fileName)
        return counter.next(avoiding: taken)
    }

    /// Creates a file holding `bytes` in `directory` under `preferredName` or, if that is taken, the
    /// next name ``uniqueName(for:in:)`` would give, exclusively and durably (as
    /// ``createNew(in:rule:bytes:now:)``: a name taken meanwhile moves on to the next one).
    ///
    /// - Throws: EINVAL for a name that is empty, `.`, `..`, or holds `/` or NUL; the directory's
    ///   and the creation's errors as they come (ENAMETOOLONG for a name past 255 bytes); EEXIST
    ///   after ``maximumAttempts`` taken names.
    public static func createExclusiveUnique(
        in directory: String, preferredName: String, bytes: [UInt8]
    ) throws(FileSystemError) -> (path: String, identity: FileIdentity) {
        try checkFileName(preferredName, in: directory)
        var taken = try entryNames(in: directory)
        var names = UniqueNames(preferredName)
        for _ in 0..<maximumAttempts {
            let name = names.next(avoiding: taken)
            let path = join(directory, name)
            do throws(FileSystemError) {
                return (path, try FileCreation.createNew(path: path, bytes: bytes))
            } catch where error.errno == EEXIST {
                taken.insert(Array(name.utf8))
            }
        }
        throw FileSystemError(errno: EEXIST, syscall: "open", path: join(directory, preferredName),
            reason: "no free name after \(maximumAttempts) attempts")
    }

    /// The names for copies of one file: the name itself, then with a counter before the extension.
    struct UniqueNames {
        let original: String
        let stem: String
        let fileExtension: String
        var number: Int
        var offeredOriginal = false

        init(_ fileName: String) {
            original = fileName
            let (stem, fileExtension) = DocumentNaming.splitExtension(fileName)
            self.fileExtension = fileExtension
            // `report 2` counts on from 2.
            if let space = stem.lastIndex(of: " "), space != stem.startIndex {
                let digits = stem[stem.index(after: space)...]
                if let value = Int(digits), value >= 1, digits.count <= 9, digits.first != "0",
                   digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    self.stem = String(stem[..<space])
                    number = value + 1
                    return
                }
            }
            self.stem = stem
            number = 2
        }

        mutating func next(avoiding taken: Set<[UInt8]>) -> String {
            if !offeredOriginal {
                offeredOriginal = true
                if !taken.contains(Array(original.utf8)) { return original }
            }
            while true {
                let name = stem + " \(number)" + fileExtension
                number += 1
                if !taken.contains(Array(name.utf8)) { return name }
            }
        }
    }

    /// The stem and the extension (with its dot) of a file name: the extension starts at the last
    /// dot that is neither the first character nor the last; `.tar.gz`, `.tar.xz` and the like count
    /// as one.
    static func splitExtension(_ name: String) -> (stem: String, fileExtension: String) {
        func split(_ text: Substring) -> (Substring, Substring)? {
            guard let dot = text.lastIndex(of: "."), dot != text.startIndex, text.index(after: dot) != text.endIndex else { return nil }
            return (text[..<dot], text[dot...])
        }
        guard let (stem, last) = split(name[...]) else { return (name, "") }
        if let (inner, middle) = split(stem), middle.lowercased() == ".tar" {
            return (String(inner), String(middle) + String(last))
        }
        return (String(stem), String(last))
    }

    /// Throws EINVAL for a name that cannot be one directory entry.
    static func checkFileName(_ name: String, in directory: String) throws(FileSystemError) {
        let problem: String?
        if name.isEmpty { problem = "the name is empty" }
        else if name == "." || name == ".." { problem = "the name is \"\(name)\"" }
        else if name.utf8.contains(UInt8(ascii: "/")) { problem = "a file name must not contain \"/\"" }
        else if name.utf8.contains(0) { problem = "a file name must not contain a NUL character" }
        else { problem = nil }
        if let problem { throw FileSystemError(errno: EINVAL, syscall: "open", path: join(directory, name), reason: problem) }
    }

    // MARK: - Names from the text

    /// The first non-blank line of `text` as a document's display name: trimmed of white space,
    /// with `/` replaced by `-` and control characters (tabs among them) by spaces, cut to at most
    /// `maxLength` characters (on a character boundary: an emoji or an accented letter is never
    /// split) and trimmed again. Nil when the text has no line with anything but white space.
    public static func displayName(firstLineOf text: String, maxLength: Int = 120) -> String? {
        guard maxLength > 0 else { return nil }
        // Leading white space is skipped, and no more than `maxLength` characters are looked at
        // (a huge single-line text is not walked to its end).
        var line: [Character] = []
        for character in text {
            if character.isNewline {
                if !line.isEmpty { break }
                continue
            }
            if line.isEmpty && (character.isWhitespace || isControl(character)) { continue }
            line.append(character)
            if line.count == maxLength { break }
        }
        let cleaned = trimmed(line.map(cleanedCharacter))
        return cleaned.isEmpty ? nil : String(cleaned)
    }

    /// A file name for a document whose display name is `displayName` (from
    /// ``displayName(firstLineOf:maxLength:)``): the name cleaned as there, leading dots dropped
    /// (no hidden files), cut on a character boundary to leave room in 255 bytes for the extension
    /// and a counter (`My note 12.md`), then `.fileExtension`. Nil when nothing usable is left.
    /// Take it with ``createExclusiveUnique(in:preferredName:bytes:)``.
    public static func fileName(forDisplayName displayName: String, fileExtension: String?) -> String? {
        let suffix = fileExtension.map { "." + $0 } ?? ""
        let budget = 255 - suffix.utf8.count - 12
        guard budget > 0 else { return nil }
        let characters = displayName.map(cleanedCharacter).drop(while: { $0 == "." || $0.isWhitespace })
        var bytes = 0
        var kept: [Character] = []
        for character in characters {
            bytes += character.utf8.count
            if bytes > budget { break }
            kept.append(character)
        }
        kept = trimmed(kept)
        guard !kept.isEmpty else { return nil }
        return String(kept) + suffix
    }

    /// ``fileName(forDisplayName:fileExtension:)`` for the display name of `text`'s first line;
    /// nil when the text has no non-blank line.
    public static func fileName(firstLineOf text: String, fileExtension: String?, maxLength: Int = 120) -> String? {
        displayName(firstLineOf: text, maxLength: maxLength).flatMap { fileName(forDisplayName: $0, fileExtension: fileExtension) }
    }

    /// `/` as `-`, a control character (NUL, tab, escape, ...) as a space.
    private static func cleanedCharacter(_ character: Character) -> Character {
        if character == "/" { return "-" }
        return isControl(character) ? " " : character
    }

    private static func isControl(_ character: Character) -> Bool {
        character.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    private static func trimmed(_ characters: [Character]) -> [Character] {
        guard let first = characters.firstIndex(where: { !$0.isWhitespace }),
              let last = characters.lastIndex(where: { !$0.isWhitespace }) else { return [] }
        return Array(characters[first...last])
    }

    // MARK: - Directories

    /// The names of the entries of `directory` (bytes as stored: a name need not be UTF-8).
    static func entryNames(in directory: String) throws(FileSystemError) -> Set<[UInt8]> {
        guard let stream = opendir(directory) else { throw FileSystemError(errno: errno, syscall: "opendir", path: directory) }
        defer { closedir(stream) }
        var names = Set<[UInt8]>()
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw FileSystemError(errno: errno, syscall: "readdir", path: directory) }
                return names
            }
            // Read through a pointer up to the NUL (see SafeSave.sweepStaleTempFiles: loading
            // `d_name` would copy 256 bytes past the end of a short record).
            let name = UnsafeRawPointer(entry).advanced(by: entryNameOffset).assumingMemoryBound(to: CChar.self)
            let length = strlen(name)
            names.insert(Array(UnsafeRawBufferPointer(start: name, count: length)))
        }
    }

    /// `directory/name`.
    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

/// Where a directory entry's name starts in its record.
private let entryNameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
