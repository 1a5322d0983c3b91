import SystemCalls
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Read-only copies of earlier versions, for an editor to show (the LSP mode's
/// `docsession.showVersion`, protocol/README.md §12.4): files under `<state>/shown/`, mode 0444,
/// named after the document and the version, so that the editor's buffer says what it shows and a
/// save of it is refused by the file system.
public enum ShownVersion {
    /// Writes `bytes` as the read-only copy `name` in `<stateDirectory>/shown` (made 0700),
    /// replacing an earlier copy of that name; answers its path. Blocks: run it off the loop.
    public static func write(_ bytes: [UInt8], name: String, stateDirectory: String) throws(FileSystemError) -> String {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw FileSystemError(errno: EINVAL, syscall: "open", path: name, reason: "not a file name")
        }
        let directory = stateDirectory.hasSuffix("/") ? stateDirectory + "shown" : stateDirectory + "/shown"
        try makePrivateDirectory(directory, purpose: "the read-only copies of versions")
        let path = directory + "/" + name
        do throws(SystemCallError) {
            try removeFile(path)
        } catch where error.errno != .noSuchFileOrDirectory {
            throw FileSystemError(error)
        } catch {}
        _ = try FileCreation.createNew(path: path, bytes: bytes)
        if chmod(path, 0o444) != 0 {
            throw FileSystemError(errno: errno, syscall: "chmod", path: path)
        }
        return path
    }
}
