import CFileSystem
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// What ``PackageSave/recoverInterruptedSave(packageAt:)`` did to an interrupted save.
public struct PackageRecovery: Sendable, Equatable {
    /// Which tree the package name holds afterwards.
    public enum Outcome: String, Sendable {
        /// The fallback's renames were finished: the new tree is the package.
        case finished
        /// The interrupted save was undone: the old tree is the package (or, for an interrupted
        /// first save, there is still no package).
        case rolledBack
        /// The save had been swapped in: only leftovers (an old tree, a record) were removed.
        case cleanedUp
    }

    /// Which tree the package name holds.
    public var outcome: Outcome
    /// The names removed from the parent directory (staged or old trees, the intent record), sorted.
    public var removed: [String]
    /// Whether an intent record was found that was torn (cut short or damaged): treated as a
    /// fallback save not started.
    public var tornIntentRecord: Bool
}

/// The fallback's intent record, `.<name>.docsession-intent` in the parent: written and flushed
/// before the first rename, so that the next open knows which two names are in play.
///
/// Four lines: `docsession-package-intent 1`, `stage <name>`, `old <name>`, then `crc32c <8 hex>`,
/// the CRC-32C of the bytes before that line. A record cut short or damaged fails the check and is
/// taken as "not started": it is flushed before the first rename, so no rename happened.
struct PackageIntentRecord: Equatable {
    var stage: String
    var old: String

    static let header = "docsession-package-intent 1"

    var bytes: [UInt8] {
        let body = Array("\(Self.header)\nstage \(stage)\nold \(old)\n".utf8)
        let crc = body.withUnsafeBytes { cfs_crc32c_extend(0, $0.baseAddress, $0.count) }
        let hex = String(crc, radix: 16)
        return body + Array("crc32c \(String(repeating: "0", count: 8 - hex.count) + hex)\n".utf8)
    }

    /// The record in `bytes`, or nil when it is not whole, or names other than the save's own
    /// siblings of the package (`names`).
    init?(parsing bytes: [UInt8], names: PackageSave.SiblingNames) {
        guard bytes.last == UInt8(ascii: "\n") else { return nil }
        let lines = bytes.dropLast().split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count == 4 else { return nil }
        let bodyLength = bytes.count - lines[3].count - 1
        let crc = bytes.withUnsafeBytes { cfs_crc32c_extend(0, $0.baseAddress, bodyLength) }
        let text = lines.map { String(decoding: $0, as: UTF8.self) }
        let hex = String(crc, radix: 16)
        guard text[0] == Self.header, text[3] == "crc32c " + String(repeating: "0", count: 8 - hex.count) + hex,
              text[1].hasPrefix("stage "), text[2].hasPrefix("old ") else { return nil }
        stage = String(text[1].dropFirst(6))
        old = String(text[2].dropFirst(4))
        guard PackageSave.SiblingNames.matches(stage, prefix: names.stagePrefix),
              PackageSave.SiblingNames.matches(old, prefix: names.oldPrefix) else { return nil }
    }

    init(stage: String, old: String) {
        self.stage = stage
        self.old = old
    }
}

extension PackageSave {
    /// The fallback swap: writes and flushes the intent record, flushes the parent, renames the
    /// package to an old-tree name and the staged tree to the package's name, flushes the parent and
    /// removes the record. Answers the old tree's name. A failure before the second rename is undone
    /// (the package back under its name, the staged tree and the record removed) and thrown.
    static func swapByRenames(
        stage: String, package name: String, names: SiblingNames, parent: FileDescriptor, parentPath: String,
        packagePath: String
    ) throws(FileSystemError) -> String {
        let directory = parent.rawValue
        let stagePath = join(parentPath, stage)
        let intentPath = join(parentPath, names.intent)
        let oldName = SiblingNames.random(names.oldPrefix)
        func abandon() {
            try? removeTree(stage, in: directory, path: stagePath)
            try? flushDirectory(parent, path: parentPath)
        }
        do throws(SystemCallError) {
            let record = try Descriptor.open(names.intent, .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                             permissions: [.ownerReadWrite], relativeTo: parent)
            do {
                try writeAll(PackageIntentRecord(stage: stage, old: oldName).bytes, to: record.unowned, path: intentPath)
                try record.sync(path: intentPath)
                try record.close()
            } catch {
                unlinkat(directory, names.intent, 0)
                throw error
            }
            try flushDirectory(parent, path: parentPath)
        } catch {
            abandon()
            let waiting = error.errno == .fileExists && error.call == "openat"
            throw FileSystemError(error, path: waiting ? intentPath : nil,
                reason: waiting ? "an interrupted save of the package waits for recovery" : "writing the intent record (the package is unchanged)")
        }
        guard renameat(directory, name, directory, oldName) == 0 else {
            let error = FileSystemError(errno: errno, syscall: "renameat", path: packagePath, reason: "moving the old tree aside (the package is unchanged)")
            unlinkat(directory, names.intent, 0)
            abandon()
            throw error
        }
        guard renameat(directory, stage, directory, name) == 0 else {
            let error = FileSystemError(errno: errno, syscall: "renameat", path: stagePath, reason: "renaming the staged tree to the package (the old tree was put back)")
            // Put the old tree back; if even that fails, the record stays for the next open.
            if renameat(directory, oldName, directory, name) == 0 {
                unlinkat(directory, names.intent, 0)
                abandon()
            }
            throw error
        }
        _ = flushParent(parent, parentPath)
        unlinkat(directory, names.intent, 0)
        return oldName
    }

    /// Brings the parent of the package at `path` back to one whole tree after an interrupted save:
    /// what the next open does first. Answers what it did, or nil when there was nothing to do.
    ///
    /// - An intent record, whole: the fallback's renames were under way. Package name missing and
    ///   the staged tree there: the first rename happened, so the second is made (finished). Package
    ///   there and the staged tree gone: both happened; the old tree is removed (cleaned up). Package
    ///   and staged tree there: nothing was renamed; the staged tree is removed (rolled back).
    ///   Package and staged tree missing, old tree there: put back (rolled back).
    /// - An intent record, torn: it is flushed before the first rename, so none happened: the
    ///   record goes, and the staged trees below with it.
    /// - Only names of the save's own shape count (the prefix and exactly 16 hex digits), so the
    ///   leftovers of a package named `<name>.docsession-stage-x` are never taken for this one's.
    /// - A staged tree without a record (`.<name>.docsession-stage-*`): either a staging never
    ///   swapped in, or, with an existing package, the old tree an exchange left there. Either way
    ///   the package name holds a whole tree: the exchange is one atomic step, and a staged tree is
    ///   swapped only after every file and directory in it was flushed. So the sibling is removed.
    ///   Without a package it is an interrupted first save (the no-replace rename did not happen):
    ///   removed too, since the document never existed on disk.
    /// - An old tree without a record (`.<name>.docsession-old-*`): the record goes only after the
    ///   swap, so with a package there it is a leftover (removed); with none (a crash of the other
    ///   order, not made by this code) it is put back rather than lost.
    ///
    /// Throws a ``FileSystemError`` naming the call and path when a step fails; what was done
    /// before it stands, and the next call goes on from there.
    public static func recoverInterruptedSave(packageAt path: String) throws(FileSystemError) -> PackageRecovery? {
        let (parentPath, name) = try split(path)
        let parent = try openParent(parentPath)
        let directory = parent.rawValue
        let names = SiblingNames(name: name)
        let siblings = try self.names(in: parent.descriptor, path: parentPath, skippingNonUTF8: true)
        var removed: [String] = []
        var outcome: PackageRecovery.Outcome?
        var torn = false
        func exists(_ sibling: String) throws(FileSystemError) -> Bool {
            try status(of: sibling, in: directory, path: join(parentPath, sibling)) != nil
        }
        func remove(_ sibling: String) throws(FileSystemError) {
            try removeTree(sibling, in: directory, path: join(parentPath, sibling))
            removed.append(sibling)
        }
        func rename(_ from: String, _ to: String) throws(FileSystemError) {
            guard renameat(directory, from, directory, to) == 0 else {
                throw FileSystemError(errno: errno, syscall: "renameat", path: join(parentPath, from), reason: "recovering an interrupted save of \(path)")
            }
            _ = flushParent(parent.unowned, parentPath)
        }

        if siblings.contains(names.intent) {
            let record = try readIntent(names.intent, in: parent.descriptor, path: join(parentPath, names.intent)).flatMap {
                PackageIntentRecord(parsing: $0, names: names)
            }
            if let record {
                let packageThere = try exists(name)
                let stageThere = try exists(record.stage)
                let oldThere = try exists(record.old)
                switch (packageThere, stageThere, oldThere) {
                case (false, true, _):
                    try rename(record.stage, name)
                    outcome = .finished
                case (false, false, true):
                    try rename(record.old, name)
                    outcome = .rolledBack
                case (true, true, _):
                    try remove(record.stage)
                    outcome = .rolledBack
                default:
                    outcome = .cleanedUp
                }
                if try exists(record.old) { try remove(record.old) }
            } else {
                torn = true
                outcome = .rolledBack
            }
            _ = flushParent(parent.unowned, parentPath)
            guard unlinkat(directory, names.intent, 0) == 0 || errno == ENOENT else {
                throw FileSystemError(errno: errno, syscall: "unlinkat", path: join(parentPath, names.intent))
            }
            removed.append(names.intent)
        }

        for sibling in siblings.sorted() where SiblingNames.matches(sibling, prefix: names.oldPrefix) {
            guard try exists(sibling) else { continue }
            if try exists(name) {
                try remove(sibling)
                outcome = outcome ?? .cleanedUp
            } else {
                try rename(sibling, name)
                outcome = .rolledBack
            }
        }
        let packageThere = try exists(name)
        for sibling in siblings.sorted() where SiblingNames.matches(sibling, prefix: names.stagePrefix) {
            guard try exists(sibling) else { continue }
            try remove(sibling)
            outcome = outcome ?? (packageThere ? .cleanedUp : .rolledBack)
        }
        guard let outcome else { return nil }
        _ = flushParent(parent.unowned, parentPath)
        return PackageRecovery(outcome: outcome, removed: removed.sorted(), tornIntentRecord: torn)
    }

    /// The bytes of the intent record (at most 64 KiB: a longer one is not ours and counts as torn).
    private static func readIntent(_ name: String, in parent: borrowing Descriptor, path: String) throws(FileSystemError) -> [UInt8]? {
        do {
            let file = try Descriptor.open(name, .readOnly, options: .noFollow, relativeTo: parent.unowned)
            let bytes = try readToEnd(from: file.unowned, path: path)
            return bytes.count <= 65_536 ? bytes : nil
        } catch {
            if error.errno == .noSuchFileOrDirectory { return nil }
            throw FileSystemError(error, path: path)
        }
    }
}
