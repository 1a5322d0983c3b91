import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under the system's temporary directory, removed with everything in it when
/// the value is dropped.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "/docsession-store-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestFailure("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        // Resolve symlinks in the temporary directory's path (so inode comparisons are the point).
        path = URL(fileURLWithPath: String(cString: made)).resolvingSymlinksInPath().path
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// The path of `name` in the directory.
    func file(_ name: String) -> String { path + "/" + name }

    /// Writes `bytes` to `name`, answering its path.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let target = file(name)
        guard FileManager.default.createFile(atPath: target, contents: Data(bytes)) else {
            throw TestFailure("could not write \(target)")
        }
        return target
    }

    /// Writes `text` as UTF-8 to `name`, answering its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String { try write(name, Array(text.utf8)) }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The bytes of a file.
func contents(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { throw TestFailure("could not read \(path)") }
    return [UInt8](data)
}

/// `stat` of a path (not following a final symlink with `lstat`).
func fileStatus(_ path: String, follow: Bool = true) throws -> stat {
    var status = stat()
    let result = follow ? stat(path, &status) : lstat(path, &status)
    guard result == 0 else { throw TestFailure("stat \(path): \(String(cString: strerror(errno)))") }
    return status
}

/// The process's umask, read from /proc (setting it to read it would race with other tests that
/// create files).
func currentUmask() throws -> mode_t {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
        let value = mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8)
    else { throw TestFailure("no Umask line in /proc/self/status") }
    return value
}

/// A thread-safe counter and flag box for closures the store calls from its loading task.
final class Probe: Sendable {
    private let state = Mutex<(calls: Int, flag: Bool, values: [Int])>((0, false, []))

    func hit() { state.withLock { $0.calls += 1 } }
    var calls: Int { state.withLock { $0.calls } }

    func raise() { state.withLock { $0.flag = true } }
    var isRaised: Bool { state.withLock { $0.flag } }

    func record(_ value: Int) { state.withLock { $0.values.append(value) } }
    var values: [Int] { state.withLock { $0.values } }
}

