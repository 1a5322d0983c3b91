import ArgumentParser
import Client
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The server options a scripting command passes on to the server it starts.
struct ScriptedServerOptions: ParsableArguments {
    @Option(name: .long, help: "Position encoding to ask for at initialize: utf-8, utf-16 (the default) or utf-32.")
    var positionEncoding: String?

    @Option(name: .long, help: "The server's state directory (see `docsession serve --help`).")
    var stateDir: String?

    @Flag(name: .long, help: "Start the server with its files unwatched.")
    var noWatch = false

    @Option(name: .long, help: "Seconds to wait for each response.")
    var timeout: Double = 60

    func validate() throws {
        if let positionEncoding, !["utf-8", "utf-16", "utf-32"].contains(positionEncoding) {
            throw ValidationError("--position-encoding must be utf-8, utf-16 or utf-32 (got \(positionEncoding))")
        }
    }

    func scripting() -> Scripting {
        var arguments: [String] = []
        if let stateDir { arguments += ["--state-dir", stateDir] }
        if noWatch { arguments.append("--no-watch") }
        return Scripting(
            executable: CurrentExecutable.path, serverArguments: arguments, positionEncoding: positionEncoding,
            timeout: timeout, output: { print($0) }, errors: { StandardError.write($0) })
    }
}

/// `docsession call METHOD [PARAMS]`: one request against a fresh server.
struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a server, send one request, print its result as one line of JSON.",
        discussion: """
            The server is initialized first and shut down after. Exit status: 0 for a result, 1 for an
            error response (printed to stderr with its code), 2 for a usage error.
            Example: docsession call document/open '{"uri": "file:///tmp/notes.txt", "includeText": true}'
            """)

    @Argument(help: "The method, for example document/open.")
    var method: String

    @Argument(help: "The params: a JSON object (by name), or nothing.")
    var params: String?

    @Flag(name: .long, help: "Also print the notifications sent before the response, to stderr.")
    var notifications = false

    @OptionGroup var server: ScriptedServerOptions

    func run() throws {
        let status: Int32
        do {
            status = try server.scripting().call(method: method, paramsText: params, notifications: notifications)
        } catch let error as Scripting.UsageError {
            StandardError.write("docsession call: \(error)")
            throw ExitCode(2)
        }
        if status != 0 { throw ExitCode(status) }
    }
}

/// `docsession run SCRIPT`: a JSON Lines script of messages against a fresh server.
struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a server and send it a JSON Lines script of messages, printing the traffic.",
        discussion: """
            Each line is a message: {"method": ..., "params": ...}. A line without an "id" is a request
            given the next free integer id, unless it has "notification": true; each request's response
            is awaited before the next line. Blank lines and lines starting with # are skipped. Without
            an initialize line first the command sends initialize and initialized; without shutdown it
            ends with shutdown and exit. Prints "--> message" and "<-- message" lines (with --json:
            only what the server sent, one JSON object a line). Exit status: 0 when every request got
            a result, 1 when one got an error, 2 for a bad script (its line and why).
            """)

    @Argument(help: "The script's path, or - for standard input.")
    var script: String

    @Flag(name: .long, help: "Print only what the server sent, as JSON Lines.")
    var json = false

    @OptionGroup var server: ScriptedServerOptions

    func run() throws {
        let text: String
        if script == "-" {
            text = String(decoding: FileDescriptorReader.readUntilEndOrError(.standardInput), as: UTF8.self)
        } else {
            do {
                text = try FileDescriptorReader.contents(of: script)
            } catch {
                StandardError.write("docsession run: cannot read \(script): \(String(cString: strerror(error.errno.rawValue)))")
                throw ExitCode(2)
            }
        }
        let status: Int32
        do {
            status = try server.scripting().run(script: text, name: script == "-" ? "stdin" : script, jsonLines: json)
        } catch let error as Scripting.UsageError {
            StandardError.write("docsession run: \(error)")
            throw ExitCode(2)
        }
        if status != 0 { throw ExitCode(status) }
    }
}

/// Lines to stderr.
enum StandardError {
    /// Writes `line` and a newline (retrying EINTR and short writes); a failed write is dropped.
    static func write(_ line: String) {
        _ = try? writeAll(Array((line + "\n").utf8), to: .standardError)
    }
}

/// Reading a script.
enum FileDescriptorReader {
    /// What `descriptor` holds up to its end, or up to a failed read: what was read before the
    /// failure is kept, the failure itself is not reported.
    static func readUntilEndOrError(_ descriptor: FileDescriptor) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                try? readSome(into: buffer, from: descriptor)
            }
            guard let count, count > 0 else { return bytes }
            bytes += chunk[..<count]
        }
    }

    /// The text of the file at `path`; throws when it cannot be opened, and when it is a directory
    /// (`EISDIR`: the open succeeds, the first read fails; a read that fails after some text ends
    /// the text there, see ``readUntilEndOrError(_:)``).
    static func contents(of path: String) throws(SystemCallError) -> String {
        let file = try Descriptor.open(path, .readOnly)
        var first = [UInt8](repeating: 0, count: 1 << 16)
        let count = try first.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in try readSome(into: buffer, from: file.unowned, path: path) }
        }.get()
        guard count > 0 else { return "" }
        return String(decoding: first[..<count] + readUntilEndOrError(file.unowned), as: UTF8.self)
    }
}
