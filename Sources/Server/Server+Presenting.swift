import DocumentSession
import FileStore
import JSON
import JSONRPC
import TextBuffer

extension Server {
    /// `document/resolveConflict`: `resolution` is `mine` (keep the document's text), `theirs`
    /// (take the file's) or `merge` (a three-way merge, or the client's own merged `text`). Answers
    /// `{resolved: true, version, edits}`, or `{resolved: false, version, conflicts}` when a merge
    /// found both sides changing the same lines (then nothing changed).
    func resolveConflict(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        let params = try Params(byName: rawParams, method: "document/resolveConflict")
        let handle = try params.string("document")
        guard let how = try params.optionalEnumeration("resolution", ["mine", "theirs", "merge"]) else {
            throw .invalidParams(field: "params.resolution", "missing (one of \"mine\", \"theirs\", \"merge\" is required)")
        }
        let text = try params.optionalString("text")
        if text != nil && how != "merge" {
            throw .invalidParams(field: "params.text", "only a \"merge\" resolution takes a text (this one is \"\(how)\")")
        }
        let version = try params.optionalInteger("version")
        let resolution: ConflictResolution = how == "mine" ? .mine : how == "theirs" ? .theirs : .merge(text: text)
        let store = store
        let encoding = positionEncoding
        // In request order, like an edit: requests sent after it see its outcome (the file is read
        // and merged off the actor, but the queue waits for it).
        return .now(await {
            do throws(DocumentError) {
                let (newVersion, edits) = try await store.resolveConflict(handle, resolution, version: version, encoding: encoding)
                return .success(["resolved": true, "version": .integer(newVersion), "edits": .array(edits.map(Self.json))])
            } catch {
                if case .mergeConflicts(let regions) = error, let document = try? await store.document(handle) {
                    return .success([
                        "resolved": false, "version": .integer(document.version),
                        "conflicts": .array(regions.map { region in
                            [
                                "range": Self.json(document.buffer.range(ofUTF8Range: region.mineUTF8Range, encoding: encoding)),
                                "mine": .string(region.mine), "theirs": .string(region.theirs), "base": .string(region.base),
                            ]
                        }),
                    ])
                }
                return .failure(Self.responseError(error, id: context.id))
            }
        }())
    }

    /// `document/versions`: the document's conflict versions and saved versions, newest first.
    func listVersions(_ rawParams: JSONValue?) async throws(ResponseError) -> JSONValue {
        let params = try Params(byName: rawParams, method: "document/versions")
        let handle = try params.string("document")
        do throws(DocumentError) {
            let versions = try await store.versions(handle)
            return ["versions": .array(versions.map { version in
                [
                    "id": .string(version.id), "kind": .string(version.kind.rawValue),
                    "date": .string(Timestamp.iso8601(nanoseconds: version.date)), "size": .integer(Int64(version.size)),
                ]
            })]
        } catch {
            throw Self.responseError(error, id: .null)
        }
    }

    /// `document/readVersion`: the text of one version.
    func readVersion(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        let params = try Params(byName: rawParams, method: "document/readVersion")
        let handle = try params.string("document")
        let id = try params.string("id")
        let store = store
        return .later {
            do throws(DocumentError) {
                let text = try await store.readVersion(handle, id: id)
                return .success(["id": .string(id), "text": .string(text.text)])
            } catch {
                return .failure(Self.responseError(error, id: context.id))
            }
        }
    }

    /// `document/restoreVersion`: a version's text put back as one undoable edit.
    func restoreVersion(_ rawParams: JSONValue?, _ context: RequestContext) async throws(ResponseError) -> Reply {
        let params = try Params(byName: rawParams, method: "document/restoreVersion")
        let handle = try params.string("document")
        let id = try params.string("id")
        let version = try params.optionalInteger("version")
        // In request order, like an edit.
        do throws(DocumentError) {
            let (newVersion, edits) = try await store.restoreVersion(handle, id: id, version: version, encoding: positionEncoding)
            return .now(.success(["version": .integer(newVersion), "edits": .array(edits.map(Self.json))]))
        } catch {
            throw Self.responseError(error, id: context.id)
        }
    }
}
