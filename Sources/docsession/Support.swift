import ArgumentParser
import Logging
import FileStore
import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A `--log-level` value.
struct LogLevelArgument: ExpressibleByArgument {
    let level: Logger.Level

    init(level: Logger.Level) { self.level = level }

    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument.lowercased()) else { return nil }
        self.level = level
    }

    var defaultValueDescription: String { level.rawValue }
    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}

/// A byte count such as `65536`, `64K`, `64M` or `1G`.
struct ByteCount: ExpressibleByArgument {
    let bytes: Int

    init(bytes: Int) { self.bytes = bytes }

    init?(argument: String) {
        var digits = Substring(argument)
        var scale = 1
        switch digits.last.map({ Character($0.uppercased()) }) {
        case "K": scale = 1 << 10
        case "M": scale = 1 << 20
        case "G": scale = 1 << 30
        default: break
        }
        if scale != 1 { digits = digits.dropLast() }
        guard let value = Int(digits), value > 0, value <= Int(Int32.max) / scale else { return nil }
        bytes = value * scale
    }

    var defaultValueDescription: String { "\(bytes >> 20)M" }
}

/// Logging to stderr or a file, bootstrapped once by the executable (libraries only take a Logger).
enum LogSetup {
    static func bootstrap(level: Logger.Level, file: String?) throws -> Logger {
        var stream: TextOutputStreamTarget = .standardError
        if let file {
            do {
                stream = .file(LogFile(try Descriptor.open(
                    file, .writeOnly, options: [.create, .append], permissions: FilePermissions(rawValue: 0o644))))
            } catch {
                throw ValidationError("cannot open --log-file \(file): \(String(cString: strerror(error.errno.rawValue)))")
            }
        }
        let target = stream
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            if case .file = target {
                handler = StreamLogHandler(label: label, stream: target)
            }
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: "docsession")
        logger.logLevel = level
        return logger
    }
}

/// The `--log-file`, open for appending; the logging system keeps it (and its descriptor) for the
/// process's life.
final class LogFile: Sendable {
    let descriptor: Descriptor
    init(_ descriptor: consuming Descriptor) { self.descriptor = descriptor }
}

/// Where log lines go: stderr (fd 2, which fd 1 also points at once the server runs) or a file.
enum TextOutputStreamTarget: TextOutputStream, Sendable {
    case standardError
    case file(LogFile)

    /// Writes the line whole (retrying EINTR and short writes); a failed write is dropped.
    mutating func write(_ string: String) {
        let descriptor: FileDescriptor
        switch self {
        case .standardError: descriptor = .standardError
        case .file(let file): descriptor = file.descriptor.unowned
        }
        var text = string
        text.withUTF8 { buffer in
            _ = try? writeAll(UnsafeRawBufferPointer(buffer), to: descriptor)
        }
    }
}

/// The path of the running executable, so that `demo` can start the same binary as a server.
enum CurrentExecutable {
    static var path: String {
        if let path = try? readLink("/proc/self/exe"), !path.isEmpty { return path }
        return CommandLine.arguments[0]
    }
}

/// Paths given on the command line, relative to the current directory.
enum CurrentDirectory {
    /// `path` made absolute against the current directory (unchanged when already absolute).
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        guard let cwd = try? currentDirectory() else { return path }
        return cwd + "/" + path
    }
}

/// `--root` (serve's and the daemon's): the directories every path must stay beneath; one that
/// cannot be used is a usage error, before serving.
enum SandboxArgument {
    static func roots(_ paths: [String]) throws -> SandboxRoots? {
        guard !paths.isEmpty else { return nil }
        do throws(FileSystemError) {
            return try SandboxRoots(paths.map(CurrentDirectory.absolute))
        } catch {
            throw ValidationError("--root: \(error.message)")
        }
    }
}

