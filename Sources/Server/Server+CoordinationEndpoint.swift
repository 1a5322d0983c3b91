import JSONRPC
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A server of its own (`docsession serve`, one editor's) reached by `docsession coordinate`
/// (protocol/README.md §14.3): besides its client's stdio, it listens on
/// `<runtime>/servers/<pid>.sock`, and each connection there is served by a second `Server` over
/// the same stores that answers only the lifecycle and the coordination methods. A lease taken
/// there acts on this server's documents as the daemon's act on its own: saved first for a reader,
/// editing disabled for a writer and the file read again after.
extension Server {
    /// The methods a coordinator's connection answers.
    static let coordinatorMethods: Set<String> = [
        InitializeRequest.method, ShutdownRequest.method, CoordinateRequest.method, EndCoordinationRequest.method,
    ]

    /// Serves one coordinator's connection (a connected socket whose peer is this user) until it
    /// ends, then closes `descriptor`; its leases end with it.
    public nonisolated func serveCoordinator(descriptor: Int32) async {
        let output = SocketOutput(descriptor: descriptor, logger: logger)
        let writer = MessageWriter(sink: { bytes in output.enqueue(bytes) })
        let endpoint = Server(
            writer: writer, logger: logger, configuration: configuration, stores: Stores(store: store, packages: packages),
            mirrorEvents: MirrorEventRoute(), membership: nil, coordinatorOnly: true)
        let connection = Connection(input: descriptor, writer: writer, maxMessageSize: configuration.maxMessageSize, logger: logger)
        _ = await connection.run(handler: endpoint)
        await output.finish()
        Glibc.close(descriptor)
    }
}
