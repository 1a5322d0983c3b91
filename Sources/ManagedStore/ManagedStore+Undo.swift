import CSQLite

extension ManagedStore {
    /// Undoes the last step: applies its inverted changeset (`sqlite3changeset_invert`,
    /// `sqlite3changeset_apply`) in one transaction. Any conflict (a row not as the step left it)
    /// aborts: nothing changes, the step stays to undo, and the error says so. Throws
    /// `nothingToUndo` when there is no step.
    public func undo() throws(StoreError) {
        let connection = try openConnection()
        guard !options.readOnly else { throw .refusal(.readOnly, "the store was opened read-only") }
        guard let step = undoSteps.last else { throw .refusal(.nothingToUndo, "there is nothing to undo") }
        let inverse = try ManagedStore.invert(step)
        try ManagedStore.apply(inverse, on: connection, what: "undo")
        undoSteps.removeLast()
        redoSteps.append(step)
        changeCount += 1
    }

    /// Redoes the step undone last: applies its changeset again, as `undo` applies the inverse.
    /// Throws `nothingToUndo` when there is no step to redo.
    public func redo() throws(StoreError) {
        let connection = try openConnection()
        guard !options.readOnly else { throw .refusal(.readOnly, "the store was opened read-only") }
        guard let step = redoSteps.last else { throw .refusal(.nothingToUndo, "there is nothing to redo") }
        try ManagedStore.apply(step, on: connection, what: "redo")
        redoSteps.removeLast()
        undoSteps.append(step)
        changeCount += 1
    }

    /// The changeset of the last step (the one `undo` would take back), if any.
    public var lastStep: [UInt8]? { undoSteps.last }

    /// Takes a step recorded elsewhere (a journal's): applies its changeset unless `apply` is false
    /// (the working copy holds it already), and makes it the step to undo next; the steps to redo
    /// go. A conflict aborts the application: nothing changes.
    public func takeStep(_ changeset: [UInt8], apply: Bool) throws(StoreError) {
        let connection = try openConnection()
        if apply {
            try ManagedStore.apply(changeset, on: connection, what: "recovery")
            changeCount += 1
        }
        undoSteps.append(changeset)
        redoSteps = []
    }

    /// Undoes or redoes the next step without applying it (the working copy shows it already):
    /// only the history moves.
    public func moveStep(forward: Bool) throws(StoreError) {
        if forward {
            guard let step = redoSteps.popLast() else { throw .refusal(.nothingToUndo, "there is nothing to redo") }
            undoSteps.append(step)
        } else {
            guard let step = undoSteps.popLast() else { throw .refusal(.nothingToUndo, "there is nothing to undo") }
            redoSteps.append(step)
        }
    }

    /// Runs `body` inside the caller's transaction with a session attached to every table of
    /// `main`, and answers the changeset it recorded (empty when nothing changed).
    static func recordingChanges(on connection: Connection, _ body: () throws(StoreError) -> Void) throws(StoreError) -> [UInt8] {
        guard let handle = connection.handle else { throw .refusal(.closed, "the store is closed") }
        var session: OpaquePointer?
        var code = sqlite3session_create(handle, "main", &session)
        guard code == SQLITE_OK, let session else {
            throw StoreError(code: code, message: "sqlite3session_create failed: \(String(cString: sqlite3_errstr(code)))")
        }
        defer { sqlite3session_delete(session) }
        code = sqlite3session_attach(session, nil)
        guard code == SQLITE_OK else {
            throw StoreError(code: code, message: "sqlite3session_attach failed: \(String(cString: sqlite3_errstr(code)))")
        }
        try body()
        var size: Int32 = 0
        var bytes: UnsafeMutableRawPointer?
        code = sqlite3session_changeset(session, &size, &bytes)
        defer { sqlite3_free(bytes) }
        guard code == SQLITE_OK else {
            throw StoreError(code: code, message: "sqlite3session_changeset failed: \(String(cString: sqlite3_errstr(code)))")
        }
        guard let bytes, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(size)))
    }

    /// The inverse of `changeset` (`sqlite3changeset_invert`).
    static func invert(_ changeset: [UInt8]) throws(StoreError) -> [UInt8] {
        var size: Int32 = 0
        var bytes: UnsafeMutableRawPointer?
        let code = changeset.withUnsafeBytes { buffer in
            sqlite3changeset_invert(Int32(buffer.count), buffer.baseAddress, &size, &bytes)
        }
        defer { sqlite3_free(bytes) }
        guard code == SQLITE_OK, let bytes else {
            throw StoreError(code: code, message: "sqlite3changeset_invert failed: \(String(cString: sqlite3_errstr(code)))")
        }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(size)))
    }

    /// Applies `changeset` in one transaction; any conflict aborts it (`SQLITE_CHANGESET_ABORT`)
    /// and nothing changes. `what` names the operation in the error.
    static func apply(_ changeset: [UInt8], on connection: Connection, what: String) throws(StoreError) {
        guard let handle = connection.handle else { throw .refusal(.closed, "the store is closed") }
        try connection.run("BEGIN IMMEDIATE")
        // The store's own statements: the changeset's application makes a savepoint of its own.
        connection.policy.mode = .internal
        let code = changeset.withUnsafeBytes { buffer in
            sqlite3changeset_apply(
                handle, Int32(buffer.count), UnsafeMutableRawPointer(mutating: buffer.baseAddress), nil,
                { _, _, _ in SQLITE_CHANGESET_ABORT }, nil)
        }
        guard code == SQLITE_OK else {
            let error = connection.lastError(statement: nil)
            try? connection.run("ROLLBACK")
            throw StoreError(
                code: code == SQLITE_ABORT ? code : error.code,
                message: code == SQLITE_ABORT
                    ? "\(what) found the rows changed since the step (a conflict) and changed nothing"
                    : "\(what) failed and changed nothing: \(error.message)")
        }
        do throws(StoreError) {
            try connection.run("COMMIT")
        } catch {
            try? connection.run("ROLLBACK")
            throw error
        }
    }
}
