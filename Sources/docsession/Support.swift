import ArgumentParser
import Logging

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
            let fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw ValidationError("cannot open --log-file \(file): \(String(cString: strerror(errno)))")
            }
            stream = .descriptor(fd)
        }
        let target = stream
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            if case .descriptor = target {
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

/// Where log lines go: stderr (fd 2, which fd 1 also points at once the server runs) or a file.
enum TextOutputStreamTarget: TextOutputStream, Sendable {
    case standardError
    case descriptor(Int32)

    mutating func write(_ string: String) {
        let fd: Int32
        switch self {
        case .standardError: fd = STDERR_FILENO
        case .descriptor(let descriptor): fd = descriptor
        }
        var text = string
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}

/// The path of the running executable, so that `demo` can start the same binary as a server.
enum CurrentExecutable {
    static var path: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        if length > 0 { return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CommandLine.arguments[0]
    }
}

/// Paths given on the command line, relative to the current directory.
enum CurrentDirectory {
    /// `path` made absolute against the current directory (unchanged when already absolute).
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        guard let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }
}
