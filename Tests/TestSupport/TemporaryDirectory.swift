import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the test targets share (issue 16.4): temporary directories, a seeded generator, waiting
/// for a condition with a deadline. One copy, here, instead of one per target.

/// A test's failure with a sentence saying what went wrong.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Makes a fresh directory `<parent>/<prefix>-XXXXXX` and answers its path with symbolic links
/// resolved (so that paths and inode comparisons agree with what the code under test sees). The
/// caller removes it; ``TemporaryDirectory`` does that by itself.
public func makeTemporaryDirectory(prefix: String = "docsession-test", in parent: String = NSTemporaryDirectory()) throws -> String {
    var template = Array((parent + "/" + prefix + "-XXXXXX").utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw TestFailure("mkdtemp in \(parent) failed: \(String(cString: strerror(errno)))")
    }
    return URL(fileURLWithPath: String(cString: made)).resolvingSymlinksInPath().path
}

/// A fresh directory under the system's temporary directory (or `parent`), removed with everything
/// in it when the value is dropped.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(prefix: String = "docsession-test", in parent: String = NSTemporaryDirectory()) throws {
        path = try makeTemporaryDirectory(prefix: prefix, in: parent)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// The path of `name` in the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `bytes` to `name` (created or replaced), answering its path.
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let target = file(name)
        guard FileManager.default.createFile(atPath: target, contents: Data(bytes)) else {
            throw TestFailure("could not write \(target)")
        }
        return target
    }

    /// Writes `text` as UTF-8 to `name`, answering its path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String { try write(name, Array(text.utf8)) }

    /// The bytes of `name`.
    public func contents(_ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: file(name)) else { throw TestFailure("could not read \(file(name))") }
        return [UInt8](data)
    }
}
