import Foundation
import Synchronization
import Testing
// The shared test support (TemporaryDirectory, TestFailure, waitUntil), for every file of this target.
@_exported import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

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

