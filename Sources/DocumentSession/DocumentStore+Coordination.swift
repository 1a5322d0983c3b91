import FileStore
import TextBuffer

/// What another party coordinating a file means to do with it (NSFileCoordinator's intents): the
/// open documents of the file react as NSFilePresenter's do.
public enum CoordinationIntent: String, Sendable, CaseIterable {
    /// Another party reads the file: unsaved changes are saved first (savePresentedItemChanges);
    /// editing goes on.
    case read
    /// Another party writes the file: the documents stop editing and saving until the lease ends
    /// (relinquishPresentedItemToWriter), then read the file again.
    case write
    /// As `write`; at the end a document whose file is gone closes (accommodatePresentedItemDeletion).
    case delete
    /// As `write`; at the end a document whose file is at the destination follows it
    /// (presentedItemDidMoveToURL).
    case move

    /// Whether documents stop editing and saving while the lease is held.
    public var disablesEditing: Bool { self != .read }
}

/// A coordination granted by the store: an opaque token, unique in the store (a shared store's
/// connections each name their leases as they like: the label).
public struct CoordinationLease: Sendable, Hashable {
    let id: Int
}

/// What happened to a document when the last lease holding it ended.
public enum CoordinationOutcome: String, Sendable {
    /// The file is as the document last saw it (or the lease was a `read` one, which held nothing
    /// back: the presenter reacts to changes as always).
    case unchanged
    /// The file changed and the document, which had no unsaved changes, took its text
    /// (`document/didChange`, reason `external`).
    case reloaded
    /// The file changed while the document had unsaved changes: `inConflict`, as the presenter
    /// records one.
    case conflict
    /// The file is gone: the document stays open with its text, unsaved, as the presenter keeps a
    /// deleted file's document (a `write` or `move` lease, or a `delete` lease of a document with
    /// unsaved changes, which closing would drop).
    case deleted
    /// The document followed its file to the lease's destination (`document/didMove`).
    case moved
    /// The document is closed: its client closed it during the lease, or (a `delete` lease) its
    /// file is gone and it had nothing unsaved, so it closed as `document/delete` closes it.
    case closed
    /// Another lease still holds the document: it stays disabled, and is checked when the last
    /// one ends.
    case held
}

/// Why a lease was refused. Nothing is held when one is thrown.
public enum CoordinationError: Error, Sendable, Equatable {
    /// A `read` lease: saving a document's unsaved changes failed (`error`, as `document/save`
    /// reports it).
    case saveFailed(handle: String, path: String, error: DocumentError)
}

/// A lease begun in request order (``DocumentStore/beginCoordination(path:intent:destination:label:)``).
public struct CoordinationTicket: Sendable {
    public let lease: CoordinationLease
    public let intent: CoordinationIntent
    /// The open documents of the file.
    public let documents: [String]
    /// `read`: the saves of documents with unsaved changes, begun in request order.
    let saves: [SaveTicket]
    /// `write`, `delete`, `move`: the places in line of documents with a save, revert or close
    /// running, which the lease waits for before it is granted.
    let turns: [(handle: String, turn: LockTurn)]
    /// Whether ``DocumentStore/finishCoordination(_:)`` has nothing to wait for.
    public var grantedAtOnce: Bool { saves.isEmpty && turns.isEmpty }
}

/// A granted lease: the documents of the file, and those a `read` lease saved.
public struct CoordinationGrant: Sendable, Equatable {
    public let lease: CoordinationLease
    public let documents: [String]
    public let saved: [String]
}

/// An end begun in request order (``DocumentStore/beginEndCoordination(_:)``).
public struct CoordinationEndTicket: Sendable {
    let intent: CoordinationIntent
    /// Per document of the lease: nil when the document is settled already (closed, a `read`
    /// lease, held by another lease), with its outcome; otherwise its place in line for the check.
    let steps: [(handle: String, outcome: CoordinationOutcome?, turn: LockTurn?, ending: EndingIntents?)]
    /// Whether a file is checked (``DocumentStore/finishEndCoordination(_:)`` then reads it);
    /// false: every outcome is known already.
    public var checksFiles: Bool { steps.contains { $0.outcome == nil } }
}

/// What the leases of a document that ended asked for, applied when the last one ends.
struct EndingIntents: Sendable {
    var delete = false
    var destinations: [String] = []
}

/// One lease held in the store.
struct Coordination {
    let label: String
    let intent: CoordinationIntent
    let path: String
    let destination: String?
    let handles: [String]
}

/// The coordinations of a store: the leases by id, and per document the disabling leases holding
/// it (in the order granted) and what the ended ones asked for.
struct CoordinationState {
    var next = 1
    var leases: [Int: Coordination] = [:]
    var holding: [String: [Int]] = [:]
    var ending: [String: EndingIntents] = [:]
}

extension DocumentStore {
    // MARK: - Granting

    /// The open text document of the file at `path`: by its path, or by the file's device and
    /// inode (a symbolic link, a hard link: one document per file in a store).
    public func documentOfFile(atPath path: String) -> String? {
        if let handle = handleByPath[path], documents[handle] != nil { return handle }
        guard let found = FileIdentity.current(path: path) else { return nil }
        return documents.handles(device: found.device, inode: found.inode).min()
    }

    /// Starts a lease on the file at `path`, in request order. `read`: the saves of documents with
    /// unsaved changes begin now (their text as of now). `write`, `delete`, `move`: the documents
    /// stop editing and saving from now on (`editingDisabled`, reason `coordinated`), autosave
    /// and the presenter's checks of the file held back; ``finishCoordination(_:)`` waits for a
    /// save, revert or close already running on them. `label` is the lease's name for clients
    /// (`l1`), told in the -32012 of refused edits.
    public func beginCoordination(
        path: String, intent: CoordinationIntent, destination: String?, label: String
    ) throws(CoordinationError) -> CoordinationTicket {
        let handles = documentOfFile(atPath: path).map { [$0] } ?? []
        let lease = CoordinationLease(id: coordination.next)
        coordination.next += 1
        var saves: [SaveTicket] = []
        var turns: [(handle: String, turn: LockTurn)] = []
        if intent == .read {
            for handle in handles where documents[handle]!.hasUnsavedChanges {
                do throws(DocumentError) {
                    saves.append(try beginSave(handle))
                } catch {
                    throw .saveFailed(handle: handle, path: documents[handle]!.path, error: error)
                }
            }
        } else {
            for handle in handles {
                coordination.holding[handle, default: []].append(lease.id)
                disableEditing(handle, reason: .coordinated)
                // A save, revert or close running or queued: the lease waits for it (the writer
                // must not write under a save). Nothing running: nothing to wait for.
                if let turn = reserve(handle) { turns.append((handle, turn)) } else { release(handle) }
            }
        }
        coordination.leases[lease.id] = Coordination(label: label, intent: intent, path: path, destination: destination, handles: handles)
        return CoordinationTicket(lease: lease, intent: intent, documents: handles, saves: saves, turns: turns)
    }

    /// Grants a lease begun by ``beginCoordination(path:intent:destination:label:)``: waits for
    /// the saves of a `read` lease (a failed one refuses the lease: nothing is held, the save's
    /// own state change reported the failure) or for what runs on the documents of the others.
    public func finishCoordination(_ ticket: CoordinationTicket) async throws(CoordinationError) -> CoordinationGrant {
        var saved: [String] = []
        for save in ticket.saves {
            let path = documents[save.handle]?.path ?? ""
            do throws(DocumentError) {
                _ = try await finishSave(save)
                saved.append(save.handle)
            } catch .unknownDocument {
                // Closed meanwhile: nothing of it to save.
                continue
            } catch {
                coordination.leases[ticket.lease.id] = nil
                throw .saveFailed(handle: save.handle, path: documents[save.handle]?.path ?? path, error: error)
            }
        }
        for (handle, turn) in ticket.turns {
            await waitForTurn(turn)
            release(handle)
        }
        return CoordinationGrant(lease: ticket.lease, documents: ticket.documents, saved: saved)
    }

    /// Both steps of a lease (tests, and callers in request order already).
    public func coordinate(
        path: String, intent: CoordinationIntent, destination: String? = nil, label: String
    ) async throws(CoordinationError) -> CoordinationGrant {
        try await finishCoordination(beginCoordination(path: path, intent: intent, destination: destination, label: label))
    }

    // MARK: - Holding

    /// The first lease holding the document (a disabling one), if any.
    func holdingLease(_ handle: String) -> Coordination? {
        guard let id = coordination.holding[handle]?.first else { return nil }
        return coordination.leases[id]
    }

    /// Whether a lease holds the document: its edits, saves and the presenter's checks wait.
    func isCoordinated(_ handle: String) -> Bool { coordination.holding[handle]?.isEmpty == false }

    /// The refusal of an edit, undo, redo, save, revert or resolution of a document a lease holds.
    func coordinationRefusal(_ handle: String) -> DocumentError? {
        guard let lease = holdingLease(handle) else { return nil }
        return .coordinated(handle: handle, lease: lease.label, intent: lease.intent.rawValue)
    }

    /// Throws ``coordinationRefusal(_:)`` when a lease holds the document.
    func refuseIfCoordinated(_ handle: String) throws(DocumentError) {
        if let refusal = coordinationRefusal(handle) { throw refusal }
    }

    /// Why edits of a document with `editingDisabled` are refused: a lease, or a save, revert or
    /// close at work.
    func editingDisabledError(_ handle: String) -> DocumentError {
        coordinationRefusal(handle) ?? .editingDisabled(handle: handle, reason: "the document is busy")
    }

    /// The labels of the leases held in the store (tests).
    var coordinationLabels: [String] { coordination.leases.values.map(\.label).sorted() }

    // MARK: - Ending

    /// Ends a lease in request order: nil when the store holds no such lease (ended already).
    /// Documents no other lease holds take their place in line for the check of their file (so
    /// that a save asked for after the end writes after the check); they stay disabled until
    /// ``finishEndCoordination(_:)`` has checked them.
    public func beginEndCoordination(_ lease: CoordinationLease) -> CoordinationEndTicket? {
        guard let ended = coordination.leases.removeValue(forKey: lease.id) else { return nil }
        var steps: [(handle: String, outcome: CoordinationOutcome?, turn: LockTurn?, ending: EndingIntents?)] = []
        for handle in ended.handles {
            guard ended.intent.disablesEditing else {
                steps.append((handle, documents[handle] == nil ? .closed : .unchanged, nil, nil))
                continue
            }
            coordination.holding[handle]?.removeAll { $0 == lease.id }
            var ending = coordination.ending[handle] ?? EndingIntents()
            if ended.intent == .delete { ending.delete = true }
            if ended.intent == .move, let destination = ended.destination { ending.destinations.append(destination) }
            guard documents[handle] != nil else {
                coordination.holding[handle] = nil
                coordination.ending[handle] = nil
                steps.append((handle, .closed, nil, nil))
                continue
            }
            if coordination.holding[handle]?.isEmpty == false {
                coordination.ending[handle] = ending
                // Still held: one disabler fewer, the flag stays.
                _ = releaseEditing(handle)
                steps.append((handle, .held, nil, nil))
                continue
            }
            coordination.holding[handle] = nil
            coordination.ending[handle] = nil
            steps.append((handle, nil, reserve(handle), ending))
        }
        return CoordinationEndTicket(intent: ended.intent, steps: steps)
    }

    /// Checks the file of each document the ended lease was the last to hold, the presenter's
    /// way (``checkFile(_:)``), at once: unchanged, reloaded, in conflict, deleted, or (a `move`
    /// lease) followed to the destination; a `delete` lease closes a document whose file is gone
    /// and which has nothing unsaved. Then editing comes back (`coordinationEnded`), and autosave
    /// looks again. Answers each document's outcome.
    public func finishEndCoordination(_ ticket: CoordinationEndTicket) async -> [(handle: String, outcome: CoordinationOutcome)] {
        var outcomes: [(handle: String, outcome: CoordinationOutcome)] = []
        for step in ticket.steps {
            if let outcome = step.outcome {
                outcomes.append((step.handle, outcome))
                continue
            }
            outcomes.append((step.handle, await checkAfterCoordination(step.handle, turn: step.turn, ending: step.ending ?? EndingIntents())))
        }
        return outcomes
    }

    /// Both steps of an end: nil for a lease the store does not hold.
    public func endCoordination(_ lease: CoordinationLease) async -> [(handle: String, outcome: CoordinationOutcome)]? {
        guard let ticket = beginEndCoordination(lease) else { return nil }
        return await finishEndCoordination(ticket)
    }

    /// The check at a lease's end, under the document's lock (`turn`, taken in request order),
    /// as a check of the presenter's running: the presenter's own checks asked for meanwhile wait
    /// and run after it.
    private func checkAfterCoordination(_ handle: String, turn: LockTurn?, ending: EndingIntents) async -> CoordinationOutcome {
        let ownRun = !presenter.checking.contains(handle)
        if ownRun {
            presenter.checking.insert(handle)
            presenter.checkTurns[handle] = CheckTurn(turn: turn)
        }
        await waitForTurn(turn)
        var outcome = CoordinationOutcome.closed
        if let before = documents[handle] {
            let beforeConflict = presenter.conflicts[handle]?.identity
            let wasUnsaved = before.hasUnsavedChanges
            // A move: the file is at the destination (the same file), and no longer at the
            // document's path. The document follows it as it follows a move by another program.
            if let destination = ending.destinations.last(where: { Self.isSameFile($0, as: before.identity) }),
               !before.deletedOnDisk, destination != before.path, handleByPath[destination] == nil,
               !Self.isSameFile(before.path, as: before.identity)
            {
                move(handle, to: destination)
                refreshLocator(handle)
            }
            await checkFile(handle)
            noteAttributes(handle)
            if let after = documents[handle] {
                if after.path != before.path {
                    outcome = .moved
                } else if after.deletedOnDisk {
                    outcome = .deleted
                } else if after.state.contains(.inConflict)
                    && (!before.state.contains(.inConflict) || presenter.conflicts[handle]?.identity != beforeConflict)
                {
                    outcome = .conflict
                } else if after.reloadCount != before.reloadCount {
                    outcome = .reloaded
                } else {
                    outcome = .unchanged
                }
            }
            if outcome == .deleted, ending.delete, !wasUnsaved {
                // The file was deleted, as the lease said: the document closes as
                // `document/delete` closes it (its kept undo history goes with the file).
                let path = documents[handle]!.path
                if ownRun { presenter.checkTurns[handle] = nil }
                remove(handle, keepingUndo: false)
                dropKeptUndo(forPath: path)
                outcome = .closed
            }
        }
        if ownRun { presenter.checkTurns[handle] = nil }
        release(handle)
        if documents[handle] != nil {
            let released = releaseEditing(handle)
            change(handle, reason: .coordinationEnded) { $0.state.subtract(released) }
            if documents[handle]!.hasUnsavedChanges { scheduleAutosave(handle) }
        }
        if ownRun {
            presenter.checking.remove(handle)
            // The presenter's checks asked for meanwhile run now.
            if presenter.recheck.remove(handle) != nil, documents[handle] != nil { checkSoon(handle) }
        }
        return outcome
    }

    /// Whether `path` names the file `identity` names (device and inode).
    private static func isSameFile(_ path: String, as identity: FileIdentity) -> Bool {
        guard let found = FileIdentity.current(path: path) else { return false }
        return found.device == identity.device && found.inode == identity.inode
    }

    /// Every lease in `leases` ends (a connection's shutdown, or the end of its input): nothing
    /// stays disabled for a client that is gone.
    public func endCoordinations(_ leases: [CoordinationLease]) async {
        let tickets = leases.compactMap { beginEndCoordination($0) }
        for ticket in tickets { _ = await finishEndCoordination(ticket) }
    }
}
