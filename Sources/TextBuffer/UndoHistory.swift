/// The undo and redo history of one document: a value kept beside its ``TextBuffer``.
///
/// Each ``record(_:label:merge:)`` is one undo step (one edit request), or folds into the step
/// before with `merge: true`. ``undo(_:encoding:)`` and ``redo(_:encoding:)`` change the buffer
/// and answer the edits that turn the client's copy of the previous text into the new one.
///
/// A clean point (where the text matches the file: set at creation, moved by ``markClean()``
/// after a save) gives ``hasUnsavedChanges``: undoing or redoing back to it makes the document
/// clean again. Recording after an undo drops the redo steps; if the clean point was among them it
/// can never be reached again, nor can it once the step before it was dropped for memory.
///
/// Memory is bounded: the removed and inserted text of all steps (plus a small overhead per edit)
/// stays under ``byteLimit``, the oldest steps being dropped first.
public struct UndoHistory: Sendable {
    /// One undo step: the edits of one request (or of several merged ones), oldest first.
    struct Step: Sendable {
        var edits: [AppliedEdit]
        var label: String?
        var cost: Int
        /// Unique in this history; with `revision` (bumped by each merge) it names the state the
        /// step leads to, for ``Mark``.
        var id = 0
        var revision = 0
    }

    /// One state of the history, taken when a save starts from a snapshot of the text, so that the
    /// save can make exactly that state the clean point when it ends, whatever happened meanwhile
    /// (UIDocument's change-count token): edits made during the save stay unsaved.
    public struct Mark: Sendable, Equatable {
        /// The step whose redo leads to the state (nil: the state before every kept step).
        fileprivate let stepID: Int?
        fileprivate let revision: Int
        /// Steps dropped from the oldest end when the mark was taken.
        fileprivate let dropped: Int
    }

    /// The memory counted for each edit besides its text.
    static let costPerEdit = 64

    /// Steps `first..<position` can be undone (newest last), steps `position...` redone.
    /// Steps before `first` were dropped (their slots are emptied and compacted away in bulk).
    private var steps: [Step] = []
    private var first = 0
    private var position = 0
    /// The state (a value of `position`) that matches the saved file; `nil` when unreachable.
    private var cleanPosition: Int? = 0

    /// The next step id, and how many steps were dropped from the oldest end (or forgotten).
    private var nextID = 1
    private var dropped = 0

    /// The number of changes recorded, undone or redone since creation: it only goes up.
    public private(set) var changeCount = 0

    /// The memory the steps hold, in bytes (their text plus ``costPerEdit`` per edit).
    public private(set) var byteCount = 0

    /// The most memory the steps may hold; lowering it drops the oldest steps at once.
    public var byteLimit: Int {
        didSet { trim() }
    }

    /// An empty history whose clean point is the current text, holding at most `byteLimit`
    /// bytes of steps (64 MiB unless given).
    public init(byteLimit: Int = 64 << 20) {
        self.byteLimit = byteLimit
    }

    /// Whether there is a step to undo.
    public var canUndo: Bool { position > first }

    /// Whether there is a step to redo.
    public var canRedo: Bool { position < steps.count }

    /// The label of the step ``undo(_:encoding:)`` would undo, if it has one.
    public var undoLabel: String? { canUndo ? steps[position - 1].label : nil }

    /// The label of the step ``redo(_:encoding:)`` would redo, if it has one.
    public var redoLabel: String? { canRedo ? steps[position].label : nil }

    /// The number of steps that can be undone.
    public var undoCount: Int { position - first }

    /// The number of steps that can be redone.
    public var redoCount: Int { steps.count - position }

    /// Whether the text differs from the clean point (the last save), by the history's account.
    public var hasUnsavedChanges: Bool { cleanPosition != position }

    /// Makes the current text the clean point (after a save, or a revert).
    public mutating func markClean() {
        cleanPosition = position
    }

    /// Makes no state the clean point: the text differs from its file whatever is undone or redone
    /// (the file was deleted, or changed to a text the history never held).
    public mutating func forgetCleanPoint() {
        cleanPosition = nil
    }

    /// The current state, to pass to ``markClean(at:)`` later.
    public var mark: Mark {
        guard canUndo else { return Mark(stepID: nil, revision: 0, dropped: dropped) }
        return Mark(stepID: steps[position - 1].id, revision: steps[position - 1].revision, dropped: dropped)
    }

    /// Makes the state `mark` names the clean point: the current text if nothing changed since the
    /// mark, an earlier or later state reachable by undo or redo if it still exists, and none (the
    /// document stays unsaved until the next save) if that state can no longer be reached.
    public mutating func markClean(at mark: Mark) {
        guard let id = mark.stepID else {
            cleanPosition = mark.dropped == dropped ? first : nil
            return
        }
        if let index = steps[first...].firstIndex(where: { $0.id == id }), steps[index].revision == mark.revision {
            cleanPosition = index + 1
        } else {
            cleanPosition = nil
        }
    }

    /// Records the edits of one request (as returned by ``TextBuffer/apply(edits:encoding:)``)
    /// as a new undo step, dropping the redo steps.
    ///
    /// - Parameters:
    ///   - edits: what the request did, in order. Edits that changed nothing are left out, and a
    ///     request that changed nothing records nothing.
    ///   - label: a name for the step (shown as "Undo <label>"); a merged step keeps its first
    ///     label.
    ///   - merge: fold the edits into the previous step (typing that should undo as one), unless
    ///     the current text is the clean point: a step never spans a save.
    public mutating func record(_ edits: [AppliedEdit], label: String? = nil, merge: Bool = false) {
        let edits = edits.contains(where: \.isNoOp) ? edits.filter { !$0.isNoOp } : edits
        guard !edits.isEmpty else { return }
        dropRedoSteps()
        changeCount += 1
        let cost = edits.reduce(0) {
            $0 + $1.removedText.utf8.count + $1.insertedText.utf8.count + UndoHistory.costPerEdit
        }
        byteCount += cost
        if merge && canUndo && cleanPosition != position {
            steps[position - 1].edits.append(contentsOf: edits)
            steps[position - 1].cost += cost
            steps[position - 1].revision += 1
            if steps[position - 1].label == nil { steps[position - 1].label = label }
        } else {
            steps.append(Step(edits: edits, label: label, cost: cost, id: nextID))
            nextID += 1
            position += 1
        }
        trim()
    }

    /// The edits ``undo(_:encoding:)`` would apply, in order, in UTF-8 offsets (empty when there is
    /// nothing to undo): for the journal, which records what a change did to the text.
    public func editsForUndo() -> [AppliedEdit] {
        guard canUndo else { return [] }
        return steps[position - 1].edits.reversed().map(\.inverse)
    }

    /// The edits ``redo(_:encoding:)`` would apply, in order (empty when there is nothing to redo).
    public func editsForRedo() -> [AppliedEdit] {
        guard canRedo else { return [] }
        return steps[position].edits
    }

    /// Undoes the newest step on `buffer`, which must hold the text this history left it with.
    ///
    /// - Returns: the edits that turn the text before the undo into the text after it, in order,
    ///   each against the result of the one before, in `encoding`; `nil` if there is nothing to
    ///   undo.
    public mutating func undo(_ buffer: inout TextBuffer, encoding: PositionEncoding) -> [TextEdit]? {
        guard canUndo else { return nil }
        position -= 1
        changeCount += 1
        let edits = steps[position].edits
        var answer: [TextEdit] = []
        answer.reserveCapacity(edits.count)
        for edit in edits.reversed() {
            let inverse = edit.inverse
            answer.append(buffer.textEdit(for: inverse, encoding: encoding))
            buffer.apply(inverse)
        }
        return answer
    }

    /// Redoes the step undone last on `buffer`, which must hold the text this history left it
    /// with.
    ///
    /// - Returns: the edits that turn the text before the redo into the text after it, as for
    ///   ``undo(_:encoding:)``; `nil` if there is nothing to redo.
    public mutating func redo(_ buffer: inout TextBuffer, encoding: PositionEncoding) -> [TextEdit]? {
        guard canRedo else { return nil }
        let edits = steps[position].edits
        position += 1
        changeCount += 1
        var answer: [TextEdit] = []
        answer.reserveCapacity(edits.count)
        for edit in edits {
            answer.append(buffer.textEdit(for: edit, encoding: encoding))
            buffer.apply(edit)
        }
        return answer
    }

    /// Forgets every step; the clean point stays only if the current text is it.
    public mutating func removeAll() {
        let isClean = !hasUnsavedChanges
        steps = []
        first = 0
        position = 0
        byteCount = 0
        dropped += 1
        cleanPosition = isClean ? 0 : nil
    }

    // MARK: - Export and import

    /// The history as plain values, to be kept elsewhere (on disk) and made a history again with
    /// ``init(snapshot:byteLimit:)``: the kept steps, oldest first, with their edits and labels; the
    /// position (steps before it can be undone, steps from it redone) and the clean point.
    public struct Snapshot: Sendable, Equatable {
        /// One undo step: the edits of one request (or of several merged), in the order they
        /// applied, each against the text the one before left; in UTF-8 offsets.
        public struct Step: Sendable, Equatable {
            public var edits: [AppliedEdit]
            public var label: String?

            public init(edits: [AppliedEdit], label: String?) {
                self.edits = edits
                self.label = label
            }
        }

        public var steps: [Step]
        /// The state the text is in: `steps[..<position]` are undone by undo, newest last;
        /// `steps[position...]` are redone by redo. In `0...steps.count`.
        public var position: Int
        /// The state that matches the file (nil: none does). In `0...steps.count`.
        public var cleanPosition: Int?

        public init(steps: [Step], position: Int, cleanPosition: Int?) {
            self.steps = steps
            self.position = position
            self.cleanPosition = cleanPosition
        }

        /// The same history seen from its clean point, for a text that is the file's: the position
        /// moves to the clean point, and when the text had gone past it (edits made after the last
        /// save), the steps from the clean point on are dropped, unsaved. nil when no state matches
        /// the file.
        public func atCleanPoint() -> Snapshot? {
            guard let clean = cleanPosition, clean >= 0, clean <= steps.count else { return nil }
            let kept = position > clean ? Array(steps[..<clean]) : steps
            return Snapshot(steps: kept, position: clean, cleanPosition: clean)
        }
    }

    /// The history's steps, position and clean point (O(steps): the edits' texts are shared, not
    /// copied).
    public var snapshot: Snapshot {
        Snapshot(
            steps: steps[first...].map { Snapshot.Step(edits: $0.edits, label: $0.label) },
            position: position - first,
            cleanPosition: cleanPosition.map { $0 - first })
    }

    /// A history holding `snapshot`'s steps, at its position and with its clean point, whose undo
    /// and redo then do what the exported history's did. Edits that change nothing are left out, and
    /// steps left empty with them. The oldest steps are dropped if they hold more than `byteLimit`
    /// (and the clean point with them when it was among them). nil when the position or the clean
    /// point lies outside `0...steps.count`.
    public init?(snapshot: Snapshot, byteLimit: Int = 64 << 20) {
        let count = snapshot.steps.count
        guard (0...count).contains(snapshot.position), snapshot.cleanPosition.map({ (0...count).contains($0) }) ?? true else {
            return nil
        }
        self.byteLimit = byteLimit
        cleanPosition = snapshot.cleanPosition
        position = snapshot.position
        steps.reserveCapacity(count)
        for (index, step) in snapshot.steps.enumerated() {
            let edits = step.edits.filter { !$0.isNoOp }
            guard !edits.isEmpty else {
                // A step that does nothing is no state of its own: the states after it move down.
                if index < position { position -= 1 }
                if let clean = cleanPosition, index < clean { cleanPosition = clean - 1 }
                continue
            }
            let cost = edits.reduce(0) {
                $0 + $1.removedText.utf8.count + $1.insertedText.utf8.count + UndoHistory.costPerEdit
            }
            steps.append(Step(edits: edits, label: step.label, cost: cost, id: nextID))
            nextID += 1
            byteCount += cost
        }
        trim()
    }

    /// Drops the steps that could be redone.
    private mutating func dropRedoSteps() {
        guard canRedo else { return }
        for step in steps[position...] { byteCount -= step.cost }
        steps.removeSubrange(position...)
        if let clean = cleanPosition, clean > position { cleanPosition = nil }
    }

    /// Drops the oldest steps (then, if the limit was lowered that far, the redo steps) until the
    /// memory held is within the limit.
    private mutating func trim() {
        while byteCount > byteLimit && canUndo {
            byteCount -= steps[first].cost
            steps[first] = Step(edits: [], label: nil, cost: 0)
            if cleanPosition == first { cleanPosition = nil }
            first += 1
            dropped += 1
        }
        while byteCount > byteLimit && canRedo {
            byteCount -= steps.removeLast().cost
            if let clean = cleanPosition, clean > steps.count { cleanPosition = nil }
        }
        // Compact the emptied slots in bulk, so that dropping a step costs O(1) amortised.
        if first > 64 && first > steps.count / 2 {
            steps.removeSubrange(0..<first)
            position -= first
            cleanPosition = cleanPosition.map { $0 - first }
            first = 0
        }
    }
}
