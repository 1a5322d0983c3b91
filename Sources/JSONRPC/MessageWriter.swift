import JSON
import Synchronization
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The one serial writer of outgoing messages: each message is serialised, framed and written whole
/// before the next one starts, whatever task sends it.
public final class MessageWriter: Sendable {
    /// Where framed bytes go; answers `false` when the peer is gone.
    public typealias Sink = @Sendable ([UInt8]) -> Bool

    /// Hands the writing of one large message to the sink's own thread, in order with the bytes
    /// given to the sink: `produce` serialises and frames it there. `estimate` is the message's
    /// size, roughly, for the sink's accounting. Answers `false` when the peer is gone.
    public typealias Offload = @Sendable (_ estimate: Int, _ produce: @escaping @Sendable () -> [UInt8]) -> Bool

    private let sink: Sink
    private let offload: Offload?
    /// A message of at least this many bytes (roughly) is serialised by ``offload`` when there is one.
    public static let offloadThreshold = 1 << 16
    private struct State {
        var broken = false
        /// Told the id of every response about to be written (a batch's, one by one).
        var observers: [@Sendable (RequestID) -> Void] = []
        /// While held, framed messages collect in `pending` and go out in one write at `flush()`.
        var held = false
        var pending: [UInt8] = []
        /// Serialises small messages through a kept json-c tree (the answers to a typing
        /// client's edits differ only in their numbers).
        let serializer = ShapeCachedSerializer()
        /// The framed message being written when not held, reused.
        var framed: [UInt8] = []
    }
    private let state = Mutex<State>(State())
    /// A held writer writes what it collected once it holds this much, without waiting for `flush()`.
    public static let holdLimit = 1 << 18
    /// Where every message is recorded before it is written (`--record`); `nil`, the usual case,
    /// costs one check per message.
    public let recorder: Recorder?

    /// A writer that hands each framed message to `sink`.
    public init(sink: @escaping Sink) {
        self.sink = sink
        self.recorder = nil
        self.offload = nil
    }

    /// A writer that hands each framed message to `sink`, recording it first with `recorder`.
    public init(sink: @escaping Sink, recorder: Recorder?) {
        self.sink = sink
        self.recorder = recorder
        self.offload = nil
    }

    /// A writer whose sink writes on a thread of its own (a daemon's client): a large message
    /// (a document's text) is serialised there too, through `offload`, not on the caller's
    /// thread, so that the loop goes on serving the other clients meanwhile.
    public init(sink: @escaping Sink, offload: @escaping Offload) {
        self.sink = sink
        self.recorder = nil
        self.offload = offload
    }

    /// A writer to a file descriptor (the protocol's duplicate of stdout).
    public convenience init(fileDescriptor: Int32) {
        self.init(sink: { bytes in FileDescriptorIO.writeAll(fileDescriptor, bytes) })
    }

    /// A writer to a file descriptor that records every message first with `recorder` (`--record`).
    public convenience init(fileDescriptor: Int32, recorder: Recorder?) {
        self.init(sink: { bytes in FileDescriptorIO.writeAll(fileDescriptor, bytes) }, recorder: recorder)
    }

    /// Calls `observer` with the id of every response before it is written (each response of a
    /// batch's array, in order).
    public func addResponseObserver(_ observer: @escaping @Sendable (RequestID) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    /// Writes one message (or, while held, queues it for the next flush, in order). Messages to a
    /// broken peer are dropped.
    public func send(_ message: JSONValue) {
        // A large message is serialised before the lock is taken; a small one under it, through
        // the kept tree.
        let large = !ShapeCachedSerializer.accepts(message)
        if large, let offload, let estimate = Self.estimate(message, atLeast: Self.offloadThreshold) {
            state.withLock { state in
                guard !state.broken else { return }
                if !state.observers.isEmpty { Self.tell(state.observers, about: message) }
                // What was held goes first, in order.
                Self.writePending(&state, sink)
                let written = offload(estimate) {
                    var framed: [UInt8] = []
                    Framing.append(message.serialized(), to: &framed)
                    return framed
                }
                if !written { state.broken = true }
            }
            return
        }
        let serialized = large ? message.serialized() : nil
        state.withLock { state in
            guard !state.broken else { return }
            let body = serialized ?? state.serializer.serialized(message)
            if !state.observers.isEmpty { Self.tell(state.observers, about: message) }
            // Under the lock, so the records are in the order of the writes.
            recorder?.recordSent(message, body: body)
            Self.write(body, &state, sink)
        }
    }

    /// Writes the array answering a batch, built response by response (its text, no tree).
    public func send(_ batch: consuming BatchAnswer) {
        guard !batch.isEmpty else { return }
        let ids = batch.ids
        let body = batch.close()
        state.withLock { state in
            guard !state.broken else { return }
            for id in ids {
                for observer in state.observers { observer(id) }
            }
            if let recorder {
                for text in batch.responseTexts(in: body) { recorder.recordSentResponse(Array(text)) }
            }
            Self.write(body, &state, sink)
        }
    }

    /// The size of `message`'s text, roughly (its strings' bytes and a few per node), when it is
    /// at least `threshold`; nil for a smaller one (counted no further than the threshold).
    static func estimate(_ message: JSONValue, atLeast threshold: Int) -> Int? {
        var total = 0
        func add(_ value: JSONValue) {
            guard total < threshold else { return }
            switch value {
            case .string(let string): total += string.utf8.count + 2
            case .array(let elements): total += 2; elements.forEach(add)
            case .object(let object):
                total += 2
                for (key, member) in object.members {
                    total += key.utf8.count + 4
                    add(member)
                }
            case .null, .bool, .integer, .double: total += 8
            }
        }
        add(message)
        return total >= threshold ? total : nil
    }

    private static func tell(_ observers: [@Sendable (RequestID) -> Void], about message: JSONValue) {
        func check(_ message: JSONValue) {
            guard message["method"] == nil, let idValue = message["id"], let id = RequestID(json: idValue) else { return }
            for observer in observers { observer(id) }
        }
        if let array = message.arrayValue { array.forEach(check) } else { check(message) }
    }

    /// Frames `body` and writes it, or queues it while held.
    private static func write(_ body: [UInt8], _ state: inout State, _ sink: Sink) {
        if state.held {
            Framing.append(body, to: &state.pending)
            if state.pending.count >= Self.holdLimit { Self.writePending(&state, sink) }
        } else {
            state.framed.removeAll(keepingCapacity: state.framed.capacity <= 1 << 16)
            Framing.append(body, to: &state.framed)
            if !sink(state.framed) { state.broken = true }
        }
    }

    /// Collects messages instead of writing each at once, until ``flush()``: the connection holds
    /// the writer while it answers requests that were already queued (a pipelining client), so
    /// their answers go out in one write instead of one each. Anything sent meanwhile, from any
    /// thread, is queued in order with them.
    public func hold() {
        state.withLock { $0.held = true }
    }

    /// Writes what was collected while held, in one write, and stops holding.
    public func flush() {
        state.withLock { state in
            state.held = false
            Self.writePending(&state, sink)
        }
    }

    private static func writePending(_ state: inout State, _ sink: Sink) {
        guard !state.pending.isEmpty else { return }
        if !state.broken, !sink(state.pending) { state.broken = true }
        state.pending.removeAll(keepingCapacity: state.pending.count <= holdLimit * 2)
    }

    /// Writes a response.
    public func send(_ response: Response) { send(response.json) }

    /// Writes a notification.
    public func send(_ notification: Notification) { send(notification.json) }
}

/// Blocking reads and writes on the protocol's pipes, on the system-call layer: `EINTR` and short
/// writes are retried there; a descriptor left non-blocking by the parent (`EAGAIN`) is waited on
/// with `poll` here, and the call goes on.
public enum FileDescriptorIO {
    /// Writes all of `bytes`; answers `false` on an error such as EPIPE (the peer has gone).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        let descriptor = FileDescriptor(rawValue: fd)
        return bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                do throws(SystemCallError) {
                    offset += try writeSome(UnsafeRawBufferPointer(rebasing: buffer[offset...]), to: descriptor)
                } catch where error.errno == .resourceTemporarilyUnavailable {
                    // The descriptor was left non-blocking by the parent: wait until writable.
                    _ = try? pollDescriptor(descriptor, events: Int16(POLLOUT), timeoutMilliseconds: -1)
                } catch {
                    return false
                }
            }
            return true
        }
    }

    /// Reads into `buffer` (up to its count), which the caller keeps from one read to the next:
    /// answers the number of bytes read, 0 at the end of input, `nil` on an error. The loop reads
    /// the input this way (`InboundQueue`), without allocating and zeroing a buffer per read.
    public static func read(_ fd: Int32, into buffer: inout [UInt8]) -> Int? {
        buffer.withUnsafeMutableBytes { read(FileDescriptor(rawValue: fd), into: $0) }
    }

    /// Reads up to `capacity` bytes; an empty answer means end of input, `nil` an error.
    public static func read(_ fd: Int32, capacity: Int = 1 << 16) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: capacity)
        guard let count = chunk.withUnsafeMutableBytes({ read(FileDescriptor(rawValue: fd), into: $0) }) else { return nil }
        chunk.removeLast(capacity - count)
        return chunk
    }

    /// One read into `buffer`, waiting while a non-blocking descriptor has nothing (`EAGAIN`).
    private static func read(_ descriptor: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        while true {
            do throws(SystemCallError) {
                return try readSome(into: buffer, from: descriptor)
            } catch where error.errno == .resourceTemporarilyUnavailable {
                _ = try? pollDescriptor(descriptor, events: Int16(POLLIN), timeoutMilliseconds: -1)
            } catch {
                return nil
            }
        }
    }
}
