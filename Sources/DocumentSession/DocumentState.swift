/// A document's state: a set of flags, empty when all is normal (UIDocument's `documentState`).
public struct DocumentState: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Not open, or reading it failed.
    public static let closed = DocumentState(rawValue: 1 << 0)
    /// The file changed on disk while there were unsaved edits.
    public static let inConflict = DocumentState(rawValue: 1 << 1)
    /// The last save or revert failed; the unsaved edits are kept.
    public static let savingError = DocumentState(rawValue: 1 << 2)
    /// Edits are refused for now.
    public static let editingDisabled = DocumentState(rawValue: 1 << 3)
    /// A long load or save is running.
    public static let progressAvailable = DocumentState(rawValue: 1 << 4)
    /// A sync tool wrote conflict copies beside the file that are not resolved yet. On the wire
    /// it is `inConflict` too; inside, it is kept apart from the file's own conflict, which
    /// stops autosave and saves (the file is the document's to write while copies wait).
    public static let syncConflict = DocumentState(rawValue: 1 << 5)
    /// The file grew past the server's file-size limit (``FileSizeLimit``, issue 34.8): the
    /// watcher's reload refused to read it, and the document keeps its text, in conflict. Set and
    /// cleared with `inConflict` by that reload.
    public static let tooLarge = DocumentState(rawValue: 1 << 6)

    /// The flags by their wire names, in a fixed order.
    public static let names: [(DocumentState, String)] = [
        (.closed, "closed"), (.inConflict, "inConflict"), (.savingError, "savingError"),
        (.editingDisabled, "editingDisabled"), (.progressAvailable, "progressAvailable"), (.tooLarge, "tooLarge"),
    ]

    /// The names of the flags set, in a fixed order (`syncConflict` is `inConflict`).
    public var flagNames: [String] {
        var shown = self
        if shown.contains(.syncConflict) { shown.remove(.syncConflict); shown.insert(.inConflict) }
        return Self.names.filter { shown.contains($0.0) }.map(\.1)
    }
}
