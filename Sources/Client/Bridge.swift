import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `docsession connect`'s bridge: the editor's stdin to the daemon's socket, the socket to the
/// editor's stdout, bytes unchanged (the framing is end to end), so that an editor that spawns a
/// stdio server only changes its command.
public enum Bridge {
    /// Copies `input` to `socket` on a thread of its own (`ds-bridge-in`; at the end of `input`,
    /// the socket's sending side is shut down, so the daemon reads the end of input and can still
    /// answer) and `socket` to `output` on the caller's thread, until the socket ends. Answers the
    /// exit status: 0 when the daemon closed the connection (after `exit`, or the end of input),
    /// 1 when reading the socket or writing `output` failed (`errors` says why, except for an
    /// `output` whose reader is gone).
    public static func run(
        socket: consuming Descriptor, input: FileDescriptor = .standardInput, output: FileDescriptor = .standardOutput,
        errors: @escaping @Sendable (String) -> Void
    ) -> Int32 {
        let connection = SharedSocket(socket)
        do {
            try startThread(name: "ds-bridge-in") {
                copyInput(from: input, to: connection, errors: errors)
            }
        } catch {
            errors("cannot start the bridge's thread: \(error)")
            return 1
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes in
                    Result { () throws(SystemCallError) in try readSome(into: bytes, from: connection.socket.unowned) }
                }.get()
            } catch {
                errors("the connection to the daemon failed: \(error)")
                return 1
            }
            if count == 0 { return 0 }
            do {
                try buffer[..<count].withUnsafeBytes { bytes in
                    Result { () throws(SystemCallError) in try writeAll(bytes, to: output) }
                }.get()
            } catch {
                // The editor is gone (EPIPE) or its pipe failed: nobody is left to tell but stderr.
                if error.errno != .brokenPipe { errors("cannot write to stdout: \(error)") }
                return 1
            }
        }
    }

    private static func copyInput(from input: FileDescriptor, to connection: SharedSocket, errors: @Sendable (String) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes in
                    Result { () throws(SystemCallError) in try readSome(into: bytes, from: input) }
                }.get()
            } catch {
                errors("cannot read stdin: \(error)")
                count = 0
            }
            if count == 0 {
                // The end of the editor's input: the daemon reads its end too, and closes when done.
                try? connection.socket.shutdownWriting()
                return
            }
            do {
                try buffer[..<count].withUnsafeBytes { bytes in
                    Result { () throws(SystemCallError) in try writeAll(bytes, to: connection.socket.unowned) }
                }.get()
            } catch {
                // The daemon closed the connection (EPIPE): the reading side sees its end and
                // decides the exit status.
                return
            }
        }
    }
}

/// The connected socket, shared by the bridge's two threads for the process's life.
final class SharedSocket: Sendable {
    let socket: Descriptor
    init(_ socket: consuming Descriptor) { self.socket = socket }
}
