import Dispatch
import DocumentSession
import Execution
import FileStore
import JSON
import JSONRPC
import Logging
import Synchronization
import SystemCalls
import TextBuffer

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's side of sharing (`docsession daemon`; docs/Sharing.md): every connection gets a
/// ``Server`` of its own (its lifecycle, its position encoding, the handles it holds), and all of
/// them work on one document store, so that clients opening one file hold one document, with one
/// version sequence and one undo history.
///
/// The hub keeps, for every document some connection holds, its holders and the text they all
/// have (the text at the document's last version). The store tells it of every change of a
/// version, on the loop's thread, right after the change (``DocumentStore/setTextObserver(_:)``):
/// the hub turns what changed into each holder's position encoding and sends it as
/// `document/didChange` to every holder but the client whose request made it (whose answer
/// already says it). Everything runs on the loop's thread; the lock only makes that checkable.
public final class Hub: Sendable {
    let configuration: Server.Configuration
    let logger: Logger
    let stores: Server.Stores
    private let registry = Mutex<Registry>(Registry())

    /// The client whose request is changing a document, while it does (``Server/attributed(_:)``):
    /// its change goes to the other holders with reason `client`. Set only around the store's
    /// calls that change text, so that no task the store starts inherits it.
    @TaskLocal static var origin: Int? = nil

    struct Member {
        let writer: MessageWriter
        var encoding: PositionEncoding = .utf16
        var name: String = ""
        var held: Set<String> = []
        /// The connection's roots (set by its `initialize`; nil: none), and the handles whose hold
        /// ended when their file went outside them (Hub+Roots.swift).
        var roots: SandboxRoots? = nil
        var leftOutsideRoots: Set<String> = []
    }

    struct Shared {
        /// The connections holding the document, in the order they opened it.
        var holders: [Int]
        /// The version and text every holder has.
        var version: Int64
        var text: TextBuffer
        var path: String
    }

    struct Registry {
        var next = 0
        var live = 0
        var members: [Int: Member] = [:]
        var documents: [String: Shared] = [:]
        /// The connection whose `initialize` set the store's settings (autosave, the journal's
        /// flush delay, persistUndo): the first.
        var settingsOwner: Int? = nil
        var prepared = false
    }

    public init(configuration: Server.Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        let box = HubBox()
        stores = Server.makeStores(configuration: configuration, logger: logger, documentEvents: { event in
            box.hub?.route(event)
        }, packageEvents: { event in
            box.hub?.route(event)
        })
        box.hub = self
    }

    /// Before the first connection: the store tells the hub of every text change, and its roots
    /// are the daemon's. (The store's own position encoding only shapes the events the hub does
    /// not pass on: a reload's edits, which it computes in each holder's encoding.)
    private func prepare() async {
        guard registry.withLock({ registry in
            defer { registry.prepared = true }
            return !registry.prepared
        }) else { return }
        await stores.store.setTextObserver { [weak self] change in self?.observe(change) }
        await stores.store.setRoots(configuration.roots)
        await stores.store.setFileLocks(configuration.fileLocks)
    }

    /// How many connections are being served.
    public var connectionCount: Int { registry.withLock { $0.live } }

    /// Serves one connection (a connected socket, read and written) until it ends, then closes
    /// `descriptor`. `peerProcess` names the process at the other end (from `SO_PEERCRED`).
    public func serve(descriptor: Int32, peerProcess: Int32) async {
        await prepare()
        let output = SocketOutput(descriptor: descriptor, logger: logger)
        let writer = MessageWriter(
            sink: { bytes in output.enqueue(bytes) },
            offload: { estimate, produce in output.enqueue(estimate: estimate, producing: produce) })
        let id = registry.withLock { registry -> Int in
            registry.next += 1
            registry.live += 1
            registry.members[registry.next] = Member(writer: writer)
            return registry.next
        }
        logger.info("connection c\(id) from process \(peerProcess)")
        let server = Server(
            writer: writer, logger: logger, configuration: configuration, stores: stores, mirrorEvents: MirrorEventRoute(),
            membership: Membership(hub: self, id: id))
        let connection = Connection(input: descriptor, writer: writer, maxMessageSize: configuration.maxMessageSize, logger: logger)
        let status = await connection.run(handler: server)
        // `exit` without the end of input: the holds go now (the end of input let them go already).
        await server.releaseAllHolds(keepJournals: true)
        registry.withLock { registry in
            registry.live -= 1
            registry.members[id] = nil
            if registry.settingsOwner == id { registry.settingsOwner = nil }
        }
        await output.finish()
        Glibc.close(descriptor)
        logger.info("connection c\(id) ended (status \(status))")
    }

    /// Writes and flushes every journaled change (a signal's thread, the daemon's end).
    public func flushJournals(within limit: Duration) -> Bool {
        stores.store.flushJournalsBlocking(within: limit)
    }

    // MARK: - Holders

    /// `id` holds `handle`, whose text it was given at `version`.
    func hold(_ id: Int, handle: String, path: String, version: Int64, text: TextBuffer) {
        registry.withLock { registry in
            registry.members[id]?.held.insert(handle)
            registry.members[id]?.leftOutsideRoots.remove(handle)
            if registry.documents[handle] == nil {
                registry.documents[handle] = Shared(holders: [id], version: version, text: text, path: path)
            } else if !(registry.documents[handle]!.holders.contains(id)) {
                registry.documents[handle]!.holders.append(id)
            }
        }
    }

    func holds(_ id: Int, _ handle: String) -> Bool {
        registry.withLock { $0.members[id]?.held.contains(handle) ?? false }
    }

    /// Whether `id`'s hold of `handle` ended because the document went outside its roots
    /// (Hub+Roots.swift).
    func leftOutsideRoots(_ id: Int, _ handle: String) -> Bool {
        registry.withLock { $0.members[id]?.leftOutsideRoots.contains(handle) ?? false }
    }

    /// The other connections holding `handle` besides `id`.
    func otherHolders(_ id: Int, _ handle: String) -> Int {
        registry.withLock { registry in registry.documents[handle]?.holders.filter { $0 != id }.count ?? 0 }
    }

    /// Ends `id`'s hold of `handle`; answers how many holders are left.
    @discardableResult
    func release(_ id: Int, _ handle: String) -> Int {
        registry.withLock { registry in
            registry.members[id]?.held.remove(handle)
            guard var shared = registry.documents[handle] else { return 0 }
            shared.holders.removeAll { $0 == id }
            registry.documents[handle] = shared.holders.isEmpty ? nil : shared
            return shared.holders.count
        }
    }

    /// The handles `id` holds.
    func held(_ id: Int) -> Set<String> {
        registry.withLock { $0.members[id]?.held ?? [] }
    }

    /// Records `id`'s client name and position encoding; answers whether its `initialize` sets
    /// the store's settings (it is the first connection to initialize while none other owns them).
    func initialized(_ id: Int, name: String, encoding: PositionEncoding, roots: SandboxRoots?) -> Bool {
        registry.withLock { registry in
            registry.members[id]?.name = name
            registry.members[id]?.encoding = encoding
            registry.members[id]?.roots = roots
            if registry.settingsOwner == nil {
                registry.settingsOwner = id
                return true
            }
            return false
        }
    }

    // MARK: - Passing changes on

    /// A store event goes to every holder of its document. Text changes are passed on by
    /// ``observe(_:)`` instead, in each holder's encoding; a closed document is let go.
    func route(_ event: DocumentEvent) {
        let params: JSONValue
        let method: String
        switch event.kind {
        case .textChanged, .reloadProposed:
            return
        case .stateChanged:
            method = "document/stateChanged"
            params = Server.json(event)
        case .moved(let oldPath):
            method = "document/didMove"
            params = Server.didMoveParams(event, oldPath: oldPath)
            registry.withLock { $0.documents[event.handle]?.path = event.path }
        case .entriesChanged(let entries, let store):
            method = "document/didChange"
            params = Server.didChangeEntries(event, entries: entries, store: store)
        case .versionsChanged(let added, let removed, let resolved):
            method = "document/didChangeVersions"
            params = Server.didChangeVersionsParams(event, added: added, removed: removed, resolved: resolved)
        }
        let closed = event.reason == .closed
        var dropped: (writers: [(MessageWriter, JSONValue)], orphaned: Bool) = ([], false)
        let writers = registry.withLock { registry -> [MessageWriter] in
            dropped = Self.dropHoldersOutsideRoots(
                event.handle, path: event.path, previousState: event.kind == .stateChanged ? event.previousState : event.state,
                knownPath: { if case .moved(let oldPath) = event.kind { oldPath } else { nil } }(), in: &registry)
            guard let shared = registry.documents[event.handle] else { return [] }
            let writers = shared.holders.compactMap { registry.members[$0]?.writer }
            if closed {
                for holder in shared.holders { registry.members[holder]?.held.remove(event.handle) }
                registry.documents[event.handle] = nil
            }
            return writers
        }
        for writer in writers { writer.send(Notification(method: method, params: params)) }
        finishDropping(event.handle, dropped)
    }

    /// A change of a held document's version: every holder but its origin gets the edits from
    /// the text they have to the new one, in its own encoding (an edit that changed nothing: no
    /// edits, the new version).
    func observe(_ change: TextChange) {
        let origin = Hub.origin
        var dropped: (writers: [(MessageWriter, JSONValue)], orphaned: Bool) = ([], false)
        defer { finishDropping(change.handle, dropped) }
        let work = registry.withLock { registry -> (before: TextBuffer, receivers: [(MessageWriter, PositionEncoding)], originName: String?)? in
            dropped = Self.dropHoldersOutsideRoots(change.handle, path: change.path, previousState: [], knownPath: nil, in: &registry)
            guard var shared = registry.documents[change.handle] else { return nil }
            let before = shared.text
            shared.text = change.text
            shared.version = change.version
            shared.path = change.path
            registry.documents[change.handle] = shared
            let receivers = shared.holders.filter { $0 != origin }.compactMap { id in
                registry.members[id].map { ($0.writer, $0.encoding) }
            }
            return (before, receivers, origin.flatMap { registry.members[$0]?.name })
        }
        guard let work, !work.receivers.isEmpty else { return }
        let steps = change.steps ?? TextDiff.edits(from: work.before, to: change.text)
        var byEncoding: [PositionEncoding: JSONValue] = [:]
        for (writer, encoding) in work.receivers {
            let params: JSONValue
            if let made = byEncoding[encoding] {
                params = made
            } else {
                var params_: JSONObject = [
                    "document": .string(change.handle), "uri": .string(FileURI.uri(from: change.path)),
                    "version": .integer(change.version), "reason": .string(origin == nil ? "external" : "client"),
                    "edits": .array(Self.edits(steps, from: work.before, encoding: encoding).map(Server.json)),
                ]
                if let origin {
                    params_["client"] = ["name": .string(work.originName ?? ""), "connection": .string("c\(origin)")]
                }
                params = .object(params_)
                byEncoding[encoding] = params
            }
            writer.send(Notification(method: "document/didChange", params: params))
        }
    }

    /// `steps` (each against the result of the one before, starting from `before`) as a client's
    /// edits in `encoding`.
    static func edits(_ steps: [AppliedEdit], from before: TextBuffer, encoding: PositionEncoding) -> [TextEdit] {
        var text = before
        var edits: [TextEdit] = []
        edits.reserveCapacity(steps.count)
        for (index, step) in steps.enumerated() {
            edits.append(text.textEdit(for: step, encoding: encoding))
            if index + 1 < steps.count { text.apply(step) }
        }
        return edits
    }
}

/// Lets the store's event closures, made before the hub is whole, reach it.
private final class HubBox: @unchecked Sendable {
    // Set once in the hub's init, before any event can be produced; read on the loop after.
    weak var hub: Hub?
}

/// A connection's place among the daemon's clients (``Server/membership``).
final class Membership: Sendable {
    let hub: Hub
    let id: Int
    init(hub: Hub, id: Int) {
        self.hub = hub
        self.id = id
    }
}

/// What a daemon writes to one client, written by a thread of its own, so that a client that
/// reads slowly (or not at all) never holds up the loop and the other clients: bytes queue up to
/// ``limit``, past which the client is cut off (its socket shut down, its holds released as if it
/// vanished).
final class SocketOutput: Sendable {
    /// The most bytes queued for one client.
    static let limit = 256 << 20
    private let descriptor: Int32
    private let queue: DispatchQueue
    private let logger: Logger
    private let queued = Atomic<Int>(0)
    private let broken = Atomic<Bool>(false)

    init(descriptor: Int32, logger: Logger) {
        self.descriptor = descriptor
        self.logger = logger
        queue = DispatchQueue(label: "docsession-output-\(descriptor)")
    }

    /// Queues `bytes`; false once the client is gone or cut off.
    func enqueue(_ bytes: [UInt8]) -> Bool {
        guard reserve(bytes.count) else { return false }
        let descriptor = descriptor
        queue.async { [self] in
            if !broken.load(ordering: .relaxed), !FileDescriptorIO.writeAll(descriptor, bytes) {
                broken.store(true, ordering: .relaxed)
            }
            queued.subtract(bytes.count, ordering: .relaxed)
        }
        return true
    }

    /// Queues a message that the output's thread serialises and frames (`produce`) before writing
    /// it, in order with the others; `estimate`, its size roughly, counts towards ``limit`` until
    /// it is written. False once the client is gone or cut off.
    func enqueue(estimate: Int, producing produce: @escaping @Sendable () -> [UInt8]) -> Bool {
        guard reserve(estimate) else { return false }
        let descriptor = descriptor
        queue.async { [self] in
            if !broken.load(ordering: .relaxed), !FileDescriptorIO.writeAll(descriptor, Self.produced(by: produce)) {
                broken.store(true, ordering: .relaxed)
            }
            queued.subtract(estimate, ordering: .relaxed)
        }
        return true
    }

    /// Runs `produce` on a pooled thread at nice 10 and waits for its bytes (this queue's thread
    /// waits; the other clients' go on): on two cores, serialising a client's 2 MB answers
    /// competed with the loop answering the other clients, and they should win. Only the
    /// serialising goes there, never the write: a client that does not read would hold a thread
    /// of that small pool (the one versions are written on) for as long as it does not.
    private static func produced(by produce: @escaping @Sendable () -> [UInt8]) -> [UInt8] {
        let done = DispatchSemaphore(value: 0)
        let box = Mutex<[UInt8]>([])
        runDetached(niceness: 10) {
            let bytes = produce()
            box.withLock { $0 = bytes }
            done.signal()
        }
        done.wait()
        return box.withLock { $0 }
    }

    /// Counts `count` more bytes queued; past ``limit`` the client is cut off and this answers false.
    private func reserve(_ count: Int) -> Bool {
        guard !broken.load(ordering: .relaxed) else { return false }
        let total = queued.add(count, ordering: .relaxed).newValue
        if total > Self.limit {
            if !broken.exchange(true, ordering: .relaxed) {
                logger.warning("a client stopped reading (\(total) bytes waiting): disconnected")
                _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
            }
            return false
        }
        return true
    }

    /// Waits until everything queued has been written (or dropped).
    func finish() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
    }
}
