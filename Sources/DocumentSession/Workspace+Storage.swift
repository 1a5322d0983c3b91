import FileStore
import SystemCalls

/// The file work of the storage locations (protocol §11.8), each call on a pooled thread.
extension Workspace {
    /// The documents under the storage root `root`: regular files and package directories
    /// (``PackageStore/impliedKind(ofDirectory:)``), as ``StorageLocations/documents(under:isPackage:)``.
    public static func storageDocuments(under root: String) async -> Result<[StorageLocations.Item], FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try StorageLocations.documents(under: root) { PackageStore.impliedKind(ofDirectory: $0) != nil })
            } catch {
                return .failure(error)
            }
        }
    }

    /// Whether `path` is a directory that opens as a package (a known extension, or a managed store).
    public static func isPackageDirectory(_ path: String) async -> Bool {
        await runOnOwnThread { PackageStore.impliedKind(ofDirectory: path) != nil }
    }

    /// Which of `paths` name something (a file, a directory, a link) already.
    public static func existing(_ paths: [String]) async -> [String] {
        await runOnOwnThread { paths.filter { StorageLocations.exists($0) } }
    }

    /// Makes the missing directories of `relativeDirectory` under `root`; answers those made.
    public static func makeDirectories(_ relativeDirectory: String, under root: String) async -> Result<[String], FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try StorageLocations.makeDirectories(relativeDirectory, under: root))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Removes those of `paths` that are empty, innermost first.
    public static func removeEmptyDirectories(_ paths: [String]) async {
        await runOnOwnThread { StorageLocations.removeEmptyDirectories(paths) }
    }

    /// Renames a package directory, never over an existing name.
    public static func moveDirectory(from source: String, to destination: String) async -> FileSystemError? {
        await runOnOwnThread { () -> FileSystemError? in
            do throws(FileSystemError) {
                try StorageLocations.moveDirectory(from: source, to: destination)
                return nil
            } catch {
                return error
            }
        }
    }

    /// The sync tool marking the folder of each of `paths` (files beneath `root`), by path: a
    /// listing of each directory at most, on a pooled thread.
    public static func syncTools(forFiles paths: [String], root: String) async -> [String: SyncConflictNames.Tool] {
        await runOnOwnThread {
            var finder = SyncToolFinder(root: root)
            var tools: [String: SyncConflictNames.Tool] = [:]
            for path in paths {
                if let tool = finder.tool(forFile: path) { tools[path] = tool }
            }
            return tools
        }
    }
}

extension Workspace {
    /// A storage root as the server keeps it: the real path of `path` (symbolic links resolved),
    /// which must be a directory.
    public static func storageDirectory(_ path: String) async -> Result<String, FileSystemError> {
        await runOnOwnThread {
            do throws(FileSystemError) {
                return .success(try StorageLocations.realDirectory(path))
            } catch {
                return .failure(error)
            }
        }
    }

    /// How many unresolved conflict copies lie beside each of `paths` (a listing of each
    /// directory): for the changes of a live query, whose batch does not list the directory.
    public static func conflictCounts(forFiles paths: [String]) async -> [String: Int] {
        await runOnOwnThread {
            // Each directory listed and its names read once.
            var byDirectory: [String: [String: Int]] = [:]
            var counts: [String: Int] = [:]
            for path in paths {
                let directory = SyncToolFinder.parent(path)
                if byDirectory[directory] == nil {
                    byDirectory[directory] = StorageLocations.conflictCopyCounts(among: Set((try? listDirectory(directory)) ?? []))
                }
                let name = String(path[path.index(after: path.lastIndex(of: "/")!)...])
                if let count = byDirectory[directory]![name], count > 0 { counts[path] = count }
            }
            return counts
        }
    }

}
