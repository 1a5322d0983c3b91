import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The names sync tools give the conflict copies they write beside a file, and their temporary
/// files: which tool wrote a name, which file it is a copy of, and what the name says of the other
/// side (a device, a user, a host) and of when.
///
/// Each format is the tool's own (protocol/README.md §8.24 cites the source of each):
///
/// | tool | copy of `stem.ext` |
/// |---|---|
/// | Syncthing | `stem.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext` |
/// | Nextcloud, ownCloud | `stem (conflicted copy [user ]YYYY-MM-DD HHMMSS).ext`, older `stem_conflict-YYYYMMDD-HHMMSS.ext` |
/// | Seafile | `stem (SFConflict email YYYY-MM-DD-HH-MM-SS).ext` |
/// | Unison | `stem (conflict[ #n]_on_YYYY-MM-DD).ext` |
/// | Dropbox | `stem (NAME's conflicted copy YYYY-MM-DD).ext` |
/// | OneDrive (abraunegg's client) | `stem-HOST-safeBackup-NNNN.ext` |
///
/// Names are compared as they are (bytes; no case folding, no normalization): the tools make them
/// from the file's own name.
public enum SyncConflictNames {
    /// A sync tool.
    public enum Tool: String, Sendable, CaseIterable {
        case syncthing, nextcloud, seafile, unison, dropbox, onedrive
    }

    /// A date as a name spells it, in the local time of the machine that wrote it (no zone).
    public struct NameDate: Sendable, Equatable {
        public var year: Int, month: Int, day: Int
        /// nil when the name gives only the day.
        public var hour: Int?, minute: Int?, second: Int?

        public init(year: Int, month: Int, day: Int, hour: Int? = nil, minute: Int? = nil, second: Int? = nil) {
            (self.year, self.month, self.day, self.hour, self.minute, self.second) = (year, month, day, hour, minute, second)
        }
    }

    /// What a conflict copy's name says.
    public struct Copy: Sendable, Equatable {
        /// The copy's file name.
        public var name: String
        /// The name of the file it is a copy of (in the same directory).
        public var original: String
        public var tool: Tool
        /// The other side as the name gives it: Syncthing's short device id, Nextcloud's user,
        /// Seafile's email, Dropbox's name, OneDrive's host (nil when the name has none).
        public var device: String?
        /// When, as the name gives it (OneDrive's names give none).
        public var date: NameDate?
    }

    /// The copy `name` is of the file named `original` (both names in one directory), or nil.
    public static func parse(_ name: String, of original: String) -> Copy? {
        guard name != original else { return nil }
        return candidates(name).first { $0.original == original }
    }

    /// Every reading of `name` as a conflict copy: usually none or one. OneDrive's host may hold a
    /// dash, so `a-b-host-safeBackup-0001.txt` reads as a copy of `a.txt` or of `a-b.txt` (the
    /// caller knows which exists).
    public static func candidates(_ name: String) -> [Copy] {
        // Most names are no copy: one pass over the bytes for a mark any format needs first.
        guard mayHoldMark(name.utf8) else { return [] }
        let bytes = Array(name.utf8)
        if bytes.isEmpty || bytes.contains(UInt8(ascii: "/")) { return [] }
        var found: [Copy] = []
        if let copy = syncthing(bytes, name) { found.append(copy) }
        if let copy = parenthesized(bytes, name) { found.append(copy) }
        if let copy = nextcloudOld(bytes, name) { found.append(copy) }
        found.append(contentsOf: onedrive(bytes, name))
        return found
    }

    /// Whether the bytes hold a mark some format needs: `.sync-conflict-`, `_conflict-`,
    /// `-safeBackup-`, or a ` (` that a parenthesised mark starts with.
    private static func mayHoldMark(_ utf8: String.UTF8View) -> Bool {
        var previous: UInt8 = 0
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "("): if previous == UInt8(ascii: " ") { return true }
            case UInt8(ascii: "-"):
                // `.sync-conflict-`, `_conflict-` and `-safeBackup-` all hold `t-` or `p-`.
                if previous == UInt8(ascii: "t") || previous == UInt8(ascii: "p") { return true }
            default: break
            }
            previous = byte
        }
        return false
    }

    /// Whether `name` is a sync tool's temporary file (a download in progress): never a document
    /// nor a conflict copy. Syncthing `.syncthing.NAME.tmp` (and `~syncthing~NAME.tmp`), Unison
    /// `.unison.NAME.*.unison.tmp`, Nextcloud and ownCloud `.NAME.~HEX`, Seafile's `NAME.sbak`,
    /// partial downloads `.NAME.part` and `NAME.partial` (OneDrive's client, rclone).
    public static func isTemporary(_ name: String) -> Bool {
        if name.hasPrefix(".syncthing.") && name.hasSuffix(".tmp") { return true }
        if name.hasPrefix("~syncthing~") && name.hasSuffix(".tmp") { return true }
        if name.hasPrefix(".unison.") && name.hasSuffix(".tmp") { return true }
        if name.hasPrefix(".") && name.hasSuffix(".part") && name.count > ".x.part".count - 1 { return true }
        if name.hasSuffix(".partial") && name.count > ".partial".count { return true }
        // Seafile moves the file it replaces to `NAME.sbak` for the time of the swap.
        if name.hasSuffix(".sbak") && name.count > ".sbak".count { return true }
        // `.NAME.~` and hex digits at the end.
        let bytes = Array(name.utf8)
        if bytes.first == UInt8(ascii: "."), let tilde = lastRange(of: Array(".~".utf8), in: bytes), tilde.lowerBound > 1 {
            let tail = bytes[tilde.upperBound...]
            if !tail.isEmpty && tail.allSatisfy(isHexDigit) { return true }
        }
        return false
    }

    // MARK: - The formats

    /// `stem.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext` (DEVICE: letters and digits; names made
    /// before Syncthing 0.14 have no `-DEVICE`).
    private static func syncthing(_ bytes: [UInt8], _ name: String) -> Copy? {
        guard let marker = lastRange(of: Array(".sync-conflict-".utf8), in: bytes) else { return nil }
        var index = marker.upperBound
        guard let date = digits(bytes, &index, 8), take(bytes, &index, "-"), let time = digits(bytes, &index, 6) else { return nil }
        var device: String?
        if take(bytes, &index, "-") {
            // Empty when the device's id was not known (`-HHMMSS-.ext`).
            let start = index
            while index < bytes.count, isAlphanumeric(bytes[index]) { index += 1 }
            if index > start { device = String(decoding: bytes[start..<index], as: UTF8.self) }
        }
        guard let ext = extensionAt(bytes, index) else { return nil }
        let stem = String(decoding: bytes[..<marker.lowerBound], as: UTF8.self)
        guard let nameDate = compact(date, time) else { return nil }
        return Copy(name: name, original: stem + ext, tool: .syncthing, device: device, date: nameDate)
    }

    /// The formats that put their mark in parentheses before the extension: Nextcloud's and
    /// ownCloud's `(conflicted copy ...)`, Seafile's `(SFConflict ...)`, Unison's `(conflict...)`,
    /// Dropbox's `(NAME's conflicted copy ...)`.
    private static func parenthesized(_ bytes: [UInt8], _ name: String) -> Copy? {
        // The mark's closing parenthesis is the last one; what follows it is the extension.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), let ext = extensionAt(bytes, close + 1) else { return nil }
        // Nextcloud: ` (conflicted copy [user ]YYYY-MM-DD HHMMSS)`.
        if let open = lastRange(of: Array(" (conflicted copy ".utf8), in: bytes[..<close]) {
            let inside = Array(bytes[open.upperBound..<close])
            guard inside.count >= 17 else { return nil }
            var index = inside.count - 17
            guard let date = dashed(inside, &index), take(inside, &index, " "), let time = digits(inside, &index, 6),
                let nameDate = dashedDate(date, time: time)
            else { return nil }
            var user: String?
            if inside.count > 17 {
                guard inside[inside.count - 18] == UInt8(ascii: " "), inside.count > 18 else { return nil }
                user = String(decoding: inside[..<(inside.count - 18)], as: UTF8.self)
            }
            let stem = String(decoding: bytes[..<open.lowerBound], as: UTF8.self)
            return Copy(name: name, original: stem + ext, tool: .nextcloud, device: user, date: nameDate)
        }
        // Seafile: ` (SFConflict EMAIL YYYY-MM-DD-HH-MM-SS)`.
        if let open = lastRange(of: Array(" (SFConflict ".utf8), in: bytes[..<close]) {
            // The email is left out when the library's owner has none.
            let inside = Array(bytes[open.upperBound..<close])
            guard inside.count == 19 || (inside.count >= 21 && inside[inside.count - 20] == UInt8(ascii: " ")) else { return nil }
            var index = inside.count - 19
            guard let date = dashed(inside, &index), take(inside, &index, "-"),
                let hour = digits(inside, &index, 2), take(inside, &index, "-"),
                let minute = digits(inside, &index, 2), take(inside, &index, "-"),
                let second = digits(inside, &index, 2), index == inside.count
            else { return nil }
            let email = inside.count == 19 ? nil : String(decoding: inside[..<(inside.count - 20)], as: UTF8.self)
            let stem = String(decoding: bytes[..<open.lowerBound], as: UTF8.self)
            var nameDate = date
            (nameDate.hour, nameDate.minute, nameDate.second) = (hour, minute, second)
            guard valid(nameDate) else { return nil }
            return Copy(name: name, original: stem + ext, tool: .seafile, device: email, date: nameDate)
        }
        // Dropbox: ` (NAME's conflicted copy YYYY-MM-DD)`, maybe ` (N)` before the parenthesis
        // closes; the apostrophe may be typographic.
        for mark in ["'s conflicted copy ", "\u{2019}s conflicted copy "] {
            guard let marker = lastRange(of: Array(mark.utf8), in: bytes[..<close]),
                let open = lastRange(of: Array(" (".utf8), in: bytes[..<marker.lowerBound]),
                open.upperBound < marker.lowerBound
            else { continue }
            var index = marker.upperBound
            guard let date = dashed(bytes, &index), valid(date) else { return nil }
            if index != close {
                // ` (N)` and the closing parenthesis of the mark.
                guard take(bytes, &index, " "), take(bytes, &index, "(") else { return nil }
                let start = index
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
                guard index > start, take(bytes, &index, ")"), index == close else { return nil }
            }
            let owner = String(decoding: bytes[open.upperBound..<marker.lowerBound], as: UTF8.self)
            let stem = String(decoding: bytes[..<open.lowerBound], as: UTF8.self)
            return Copy(name: name, original: stem + ext, tool: .dropbox, device: owner, date: date)
        }
        // Unison: ` (conflict[ #n]_on_YYYY-MM-DD[_was_deleted])`.
        if let open = lastRange(of: Array(" (conflict".utf8), in: bytes[..<close]) {
            var index = open.upperBound
            if take(bytes, &index, " ") {
                guard take(bytes, &index, "#") else { return nil }
                let start = index
                while index < close, isDigit(bytes[index]) { index += 1 }
                guard index > start else { return nil }
            }
            guard takeString(bytes, &index, "_on_"), let date = dashed(bytes, &index), valid(date) else { return nil }
            _ = takeString(bytes, &index, "_was_deleted")
            guard index == close else { return nil }
            let stem = String(decoding: bytes[..<open.lowerBound], as: UTF8.self)
            return Copy(name: name, original: stem + ext, tool: .unison, device: nil, date: date)
        }
        return nil
    }

    /// Nextcloud's and ownCloud's older `stem_conflict-[USER-]YYYYMMDD-HHMMSS.ext` (before 2.5;
    /// the user from 2018 on).
    private static func nextcloudOld(_ bytes: [UInt8], _ name: String) -> Copy? {
        guard let marker = lastRange(of: Array("_conflict-".utf8), in: bytes) else { return nil }
        // The date and time end where the extension starts: the first `.` after the marker.
        var end = marker.upperBound
        while end < bytes.count, bytes[end] != UInt8(ascii: ".") { end += 1 }
        guard end - marker.upperBound >= 15, let ext = extensionAt(bytes, end) else { return nil }
        var index = end - 15
        guard let date = digits(bytes, &index, 8), take(bytes, &index, "-"), let time = digits(bytes, &index, 6),
            let nameDate = compact(date, time)
        else { return nil }
        var user: String?
        if end - marker.upperBound > 15 {
            guard end - marker.upperBound > 16, bytes[end - 16] == UInt8(ascii: "-") else { return nil }
            user = String(decoding: bytes[marker.upperBound..<(end - 16)], as: UTF8.self)
        }
        let stem = String(decoding: bytes[..<marker.lowerBound], as: UTF8.self)
        guard !stem.isEmpty else { return nil }
        return Copy(name: name, original: stem + ext, tool: .nextcloud, device: user, date: nameDate)
    }

    /// OneDrive (abraunegg's client): `stem-HOST-safeBackup-NNNN.ext`; one reading per dash that
    /// can end the stem.
    private static func onedrive(_ bytes: [UInt8], _ name: String) -> [Copy] {
        guard let marker = lastRange(of: Array("-safeBackup-".utf8), in: bytes) else { return [] }
        var index = marker.upperBound
        let start = index
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        guard index > start, let ext = extensionAt(bytes, index) else { return [] }
        let front = bytes[..<marker.lowerBound]
        var copies: [Copy] = []
        for dash in front.indices.reversed() where front[dash] == UInt8(ascii: "-") && dash > front.startIndex && dash + 1 < front.endIndex {
            let stem = String(decoding: front[..<dash], as: UTF8.self)
            let host = String(decoding: front[(dash + 1)...], as: UTF8.self)
            copies.append(Copy(name: name, original: stem + ext, tool: .onedrive, device: host, date: nil))
        }
        return copies
    }

    // MARK: - Reading bytes

    /// The extension that starts at `index`: "" at the end, else `.` and the rest (no `)` or `/`).
    private static func extensionAt(_ bytes: [UInt8], _ index: Int) -> String? {
        if index == bytes.count { return "" }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "."), index + 1 < bytes.count else { return nil }
        let rest = bytes[index...]
        guard !rest.contains(UInt8(ascii: ")")) else { return nil }
        return String(decoding: rest, as: UTF8.self)
    }

    private static func lastRange(of needle: [UInt8], in haystack: some Collection<UInt8>) -> Range<Int>? {
        let bytes = Array(haystack)
        let base = haystack.startIndex as? Int ?? 0
        guard needle.count <= bytes.count else { return nil }
        var start = bytes.count - needle.count
        while start >= 0 {
            if bytes[start..<(start + needle.count)].elementsEqual(needle) { return (base + start)..<(base + start + needle.count) }
            start -= 1
        }
        return nil
    }

    private static func take(_ bytes: [UInt8], _ index: inout Int, _ character: Unicode.Scalar) -> Bool {
        guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    private static func takeString(_ bytes: [UInt8], _ index: inout Int, _ string: String) -> Bool {
        let needle = Array(string.utf8)
        guard index + needle.count <= bytes.count, bytes[index..<(index + needle.count)].elementsEqual(needle) else { return false }
        index += needle.count
        return true
    }

    /// `count` decimal digits at `index`, as a number.
    private static func digits(_ bytes: [UInt8], _ index: inout Int, _ count: Int) -> Int? {
        guard index + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[index..<(index + count)] {
            guard isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        index += count
        return value
    }

    /// `YYYY-MM-DD` at `index`.
    private static func dashed(_ bytes: [UInt8], _ index: inout Int) -> NameDate? {
        guard let year = digits(bytes, &index, 4), take(bytes, &index, "-"), let month = digits(bytes, &index, 2),
            take(bytes, &index, "-"), let day = digits(bytes, &index, 2)
        else { return nil }
        return NameDate(year: year, month: month, day: day)
    }

    /// `YYYY-MM-DD` and `HHMMSS`, checked.
    private static func dashedDate(_ date: NameDate, time: Int) -> NameDate? {
        var full = date
        (full.hour, full.minute, full.second) = (time / 10000, time / 100 % 100, time % 100)
        return valid(full) ? full : nil
    }

    /// `YYYYMMDD` and `HHMMSS`, checked.
    private static func compact(_ date: Int, _ time: Int) -> NameDate? {
        let value = NameDate(
            year: date / 10000, month: date / 100 % 100, day: date % 100, hour: time / 10000, minute: time / 100 % 100, second: time % 100)
        return valid(value) ? value : nil
    }

    private static func valid(_ date: NameDate) -> Bool {
        guard (1970...9999).contains(date.year), (1...12).contains(date.month), (1...31).contains(date.day) else { return false }
        if let hour = date.hour, !(0...23).contains(hour) { return false }
        if let minute = date.minute, !(0...59).contains(minute) { return false }
        if let second = date.second, !(0...60).contains(second) { return false }
        return true
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }
}

/// A conflict copy found on disk beside a file.
public struct SyncCopyFile: Sendable, Equatable {
    /// What its name says.
    public var copy: SyncConflictNames.Copy
    /// Its path.
    public var path: String
    /// Its size in bytes.
    public var size: Int64
    /// Its modification time, in nanoseconds since the epoch.
    public var modified: Int64
    /// When the copy was made, in nanoseconds since the epoch: the name's date (in local time,
    /// as the tools write it) when it has one, else the modification time.
    public var date: Int64
}

extension SyncConflictNames {
    /// The conflict copies of the file at `path` in its directory (regular files only; temporary
    /// files never), newest first. Blocks on the directory: run it off the loop. A directory that
    /// cannot be read has none.
    public static func copies(besides path: String) -> [SyncCopyFile] {
        guard let (directory, name) = FileWatcher.split(path), let names = try? listDirectory(directory) else { return [] }
        var found: [SyncCopyFile] = []
        for candidate in names where candidate != name && !isTemporary(candidate) {
            guard let copy = parse(candidate, of: name) else { continue }
            let copyPath = FileWatcher.join(directory, candidate)
            var status = stat()
            guard lstat(copyPath, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { continue }
            let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
            found.append(SyncCopyFile(
                copy: copy, path: copyPath, size: Int64(status.st_size), modified: modified,
                date: copy.date.flatMap(\.localNanoseconds) ?? modified))
        }
        return found.sorted { ($0.date, $0.copy.name) > ($1.date, $1.copy.name) }
    }

    /// Removes a copy found earlier if it is still that file (its size and modification time): a
    /// copy the tool rewrote meanwhile stays, to be found again. Answers whether it is gone (also
    /// when it was gone already). Blocks.
    public static func removeIfUnchanged(_ copy: SyncCopyFile) -> Bool {
        var status = stat()
        guard lstat(copy.path, &status) == 0 else { return true }
        let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        guard Int64(status.st_size) == copy.size, modified == copy.modified else { return false }
        do throws(SystemCallError) {
            try removeFile(copy.path)
            return true
        } catch {
            return error.errno == .noSuchFileOrDirectory
        }
    }

    /// Whether `name` may be a conflict copy of the file `original` (a quick test for the watcher).
    public static func mayBeCopy(_ name: String, of original: String) -> Bool {
        name != original && !isTemporary(name) && parse(name, of: original) != nil
    }
}

extension SyncConflictNames.NameDate {
    /// The date in this machine's local time, in nanoseconds since the epoch (midnight for a day).
    public var localNanoseconds: Int64? {
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour ?? 0)
        parts.tm_min = Int32(minute ?? 0)
        parts.tm_sec = Int32(second ?? 0)
        parts.tm_isdst = -1
        let seconds = mktime(&parts)
        guard seconds != -1 else { return nil }
        return Int64(seconds) * 1_000_000_000
    }
}
