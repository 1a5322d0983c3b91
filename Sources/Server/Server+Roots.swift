import DocumentSession
import FileStore
import JSON
import JSONRPC

/// A path a request names, checked against the sandbox roots.
///
/// With roots set, ``path`` is the canonical path of what was resolved (symlinks followed, each
/// step beneath a root) and ``operationPath`` names exactly that object through a descriptor
/// (`/proc/self/fd/N`, or `/proc/self/fd/D/name` for a file yet to be made in the pinned directory
/// `D`): an operation on ``operationPath`` acts on what was checked, whatever is renamed or swapped
/// in meanwhile. Without roots both are the path as given.
struct RequestPath: Sendable {
    /// The path the session records and reports.
    let path: String
    /// The path to act on.
    let operationPath: String
    /// Keeps the descriptors behind ``operationPath`` open while this value lives.
    let resolved: ResolvedPath?
}

extension Server {
    /// A path naming a file to create (`field` names the params member, for errors): with roots,
    /// its directory is checked and pinned and the file is made by its name in that directory, so a symlink at the
    /// name (even a dangling one, even pointing inside) is never followed: the exclusive creation
    /// finds it there (-32013), as without roots.
    func creationPath(_ path: String, field: String) async throws(ResponseError) -> RequestPath {
        guard roots != nil else { return RequestPath(path: path, operationPath: path, resolved: nil) }
        let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
        guard !name.isEmpty, name != ".", name != ".." else {
            throw .invalidParams(field: field, "the last component must be a name (not ‘/’, ‘.’ or ‘..’) to create a file")
        }
        let directory = String(path.dropLast(name.utf8.count))
        let checked: RequestPath
        do throws(ResponseError) {
            checked = try await checkPath(directory.count > 1 ? String(directory.dropLast()) : directory, field: field, mustExist: true)
        } catch where error.code == .outsideRoots {
            // The refusal names the path asked for, not its directory.
            guard let roots else { throw error }
            do throws(SandboxError) {
                _ = try await Workspace.resolve(path, in: roots, mustExist: false)
            } catch {
                throw Self.responseError(error, field: field, roots: roots)
            }
            throw error
        }
        let separator = checked.path.hasSuffix("/") ? "" : "/"
        return RequestPath(
            path: checked.path + separator + name, operationPath: checked.operationPath + "/" + name, resolved: checked.resolved)
    }

    /// Checks `path` (absolute, as a request type read it with ``Params/filePath(_:)``) against the
    /// roots, if any; `mustExist: false` for a file the request may create (its directory must
    /// exist beneath a root). `field` names the params member, for errors. The resolution (system
    /// calls on each component) runs on a pooled thread (``Workspace/resolve(_:in:mustExist:)``),
    /// never on the loop; without roots there is nothing to resolve.
    func checkPath(_ path: String, field: String, mustExist: Bool) async throws(ResponseError) -> RequestPath {
        guard let roots else { return RequestPath(path: path, operationPath: path, resolved: nil) }
        do throws(SandboxError) {
            let resolved = try await Workspace.resolve(path, in: roots, mustExist: mustExist)
            return RequestPath(path: resolved.realPath, operationPath: resolved.procPath, resolved: resolved)
        } catch {
            throw Self.responseError(error, field: field, roots: roots)
        }
    }
}
