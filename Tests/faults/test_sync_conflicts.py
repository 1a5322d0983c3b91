"""Issue 20: sync tools' conflict copies are conflict versions (protocol/README.md §8.23).

A copy that Syncthing, Nextcloud (or ownCloud), Seafile, Unison, Dropbox or OneDrive's Linux client
writes beside an open document puts it `inConflict` (reason `syncConflict`) and is listed by
`document/versions` (kind `syncConflict`, the tool, the device or user its name gives, its date, its
uri); `document/resolveConflict` settles copies (`mine`, `theirs`, `merge` with a base found among
the kept versions) and removes them from disk. The tools' temporary files are never taken for
copies, and a save of the file's own bytes writes nothing (no new modification time to spread)."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone

import pytest

from faultkit import uri, wait_until, write_file

INVALID_PARAMS = -32602

# Each tool's copy of notes.md: (name, tool, device or user, (y, m, d, H, M, S) the name gives or None).
COPIES = {
    "syncthing": ("notes.sync-conflict-20261128-101502-ABCDEFG.md", "syncthing", "ABCDEFG", (2026, 11, 28, 10, 15, 2)),
    "nextcloud": ("notes (conflicted copy Jane Doe 2026-11-28 101502).md", "nextcloud", "Jane Doe", (2026, 11, 28, 10, 15, 2)),
    "nextcloud-old": ("notes_conflict-20261128-101502.md", "nextcloud", None, (2026, 11, 28, 10, 15, 2)),
    "seafile": ("notes (SFConflict jane@example.org 2026-11-28-10-15-02).md", "seafile", "jane@example.org", (2026, 11, 28, 10, 15, 2)),
    "unison": ("notes (conflict #2_on_2026-11-28).md", "unison", None, (2026, 11, 28, 0, 0, 0)),
    "dropbox": ("notes (Jane's conflicted copy 2026-11-28).md", "dropbox", "Jane", (2026, 11, 28, 0, 0, 0)),
    "onedrive": ("notes-laptop-safeBackup-0001.md", "onedrive", "laptop", None),
}

MINE = "one\ntwo\nthree\n"
THEIRS = "one\ntwo (theirs)\nthree\n"


def start(sandbox):
    return sandbox.start(args=("serve", "--no-journal", "--no-file-locks", "--state-dir", str(sandbox.root / "state")))


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(seconds * 1000) % 1000:03d}Z"


def expected_date(copy_path, parts) -> str:
    """The date a listing gives: the name's, in local time (as the tools write it), else the mtime."""
    if parts is None:
        return iso(os.stat(copy_path).st_mtime_ns // 1_000_000 / 1000)
    return iso(time.mktime((*parts, 0, 0, -1)))


def copies_listed(server, handle):
    """The conflict copies waiting (unresolved). A copy settled comes back, once the version queue
    has written it, as a resolved kept version of the same kind: not a copy waiting (CI run 58
    listed one right after a resolution)."""
    return [v for v in server.call("document/versions", {"document": handle})["versions"]
            if v["kind"] == "syncConflict" and not v["resolved"]]


def kept_copies(server, handle, count=1):
    """The settled copies kept as resolved versions, once `count` of them are written."""
    return wait_until(lambda: (lambda kept: kept if len(kept) == count else None)(
        [v for v in server.call("document/versions", {"document": handle})["versions"]
         if v["kind"] == "syncConflict" and v["resolved"]]), what=f"{count} settled copies kept")


def sync_changes(server, handle):
    return [n["params"] for n in server.notifications
            if n["method"] == "document/stateChanged" and n["params"]["document"] == handle and n["params"]["reason"] == "syncConflict"]


@pytest.mark.parametrize("tool", list(COPIES))
def test_a_copy_appearing_beside_a_document_with_unsaved_edits_is_a_conflict_version(sandbox, tool):
    name, tool_name, device, parts = COPIES[tool]
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    handle = server.open_and_edit(path, MINE + "four (unsaved)\n")
    copy = write_file(sandbox.docs / name, THEIRS)

    wait_until(lambda: "inConflict" in server.state(handle)["state"], what="the copy's conflict")
    assert [(c["state"], c["previousState"], c["hasUnsavedChanges"]) for c in sync_changes(server, handle)] == [(["inConflict"], [], True)]
    [listed] = copies_listed(server, handle)
    assert listed["id"] == "sync:" + name and listed["tool"] == tool_name and listed.get("device") == device, listed
    assert listed["uri"] == uri(copy) and listed["size"] == len(THEIRS) and listed["resolved"] is False, listed
    assert listed["date"] == expected_date(copy, parts), listed
    assert server.call("document/readVersion", {"document": handle, "id": listed["id"]})["text"] == THEIRS

    # The file is still the document's to save: a save goes through, the copy still waits.
    assert server.save(handle).result["method"] == "rename"
    assert path.read_text() == MINE + "four (unsaved)\n"
    assert server.state(handle)["state"] == ["inConflict"]

    # Keeping mine settles the copy: it is removed from disk, and the document leaves the conflict.
    resolved = server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert resolved["resolved"] is True and resolved["edits"] == []
    assert not copy.exists()
    assert server.state(handle)["state"] == [] and copies_listed(server, handle) == []
    assert server.read(handle) == MINE + "four (unsaved)\n"
    # The copy's text is kept, resolved, under its name.
    [kept] = kept_copies(server, handle)
    assert (kept["origin"], kept["tool"], "uri" in kept) == (name, tool_name, False), kept
    assert server.call("document/readVersion", {"document": handle, "id": kept["id"]})["text"] == THEIRS


@pytest.mark.parametrize("tool", list(COPIES))
def test_a_copy_there_before_the_open_opens_the_document_in_conflict(sandbox, tool):
    name, tool_name, device, _ = COPIES[tool]
    path = write_file(sandbox.docs / "notes.md", MINE)
    write_file(sandbox.docs / name, THEIRS)
    server = start(sandbox)
    opened = server.open(path)
    assert opened["state"] == ["inConflict"], opened
    [listed] = copies_listed(server, opened["document"])
    assert (listed["tool"], listed.get("device")) == (tool_name, device)
    # Taking theirs: the copy's text, as one undoable change; the copy goes.
    resolved = server.call("document/resolveConflict", {"document": opened["document"], "resolution": "theirs"})
    assert resolved["resolved"] is True and resolved["version"] == 2
    assert server.read(opened["document"]) == THEIRS
    assert server.state(opened["document"])["hasUnsavedChanges"] is True
    assert not (sandbox.docs / name).exists()
    server.call("document/undo", {"document": opened["document"]})
    assert server.read(opened["document"]) == MINE


def test_two_copies_at_once_each_resolved_by_its_id(sandbox):
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    handle = server.open_and_edit(path, MINE + "mine\n")
    first = write_file(sandbox.docs / COPIES["syncthing"][0], "from the laptop\n")
    second = write_file(sandbox.docs / COPIES["nextcloud"][0], "from the phone\n")
    wait_until(lambda: len(copies_listed(server, handle)) == 2, what="both copies")
    ids = {v["tool"]: v["id"] for v in copies_listed(server, handle)}

    # Two copies: `theirs` must say which.
    reply = server.request("document/resolveConflict", {"document": handle, "resolution": "theirs"})
    assert reply.error["code"] == INVALID_PARAMS and reply.error["data"] == {"field": "params.id"}, reply.error
    assert ids["syncthing"] in reply.error["message"] and ids["nextcloud"] in reply.error["message"]
    assert server.read(handle) == MINE + "mine\n" and first.exists() and second.exists()
    # An id that names no copy.
    reply = server.request("document/resolveConflict", {"document": handle, "resolution": "theirs", "id": "sync:nothing.md"})
    assert reply.error["code"] == -32020 and reply.error["data"] == {"id": "sync:nothing.md"}, reply.error

    server.call("document/resolveConflict", {"document": handle, "resolution": "theirs", "id": ids["syncthing"]})
    assert server.read(handle) == "from the laptop\n"
    assert not first.exists() and second.exists()
    assert server.state(handle)["state"] == ["inConflict"], "the other copy still waits"
    assert [v["id"] for v in copies_listed(server, handle)] == [ids["nextcloud"]]

    server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert not second.exists() and server.state(handle)["state"] == []
    assert server.read(handle) == "from the laptop\n"
    # Both copies are kept, resolved, with what their names said.
    kept = kept_copies(server, handle, 2)
    assert sorted((v["origin"], v["tool"], v["resolved"], "uri" in v) for v in kept) == [
        (COPIES["nextcloud"][0], "nextcloud", True, False), (COPIES["syncthing"][0], "syncthing", True, False)], kept
    texts = {v["origin"]: server.call("document/readVersion", {"document": handle, "id": v["id"]})["text"] for v in kept}
    assert texts == {COPIES["syncthing"][0]: "from the laptop\n", COPIES["nextcloud"][0]: "from the phone\n"}
    # didChangeVersions told of each copy as it came and as it was resolved.
    messages = server.notifications + [frame.message for frame in server.rpc.asynchronous]
    told = [n["params"] for n in messages if isinstance(n, dict) and n.get("method") == "document/didChangeVersions"]
    added = {v["id"] for p in told for v in p["added"]}
    resolved = {i for p in told for i in p["resolved"]}
    assert {ids["syncthing"], ids["nextcloud"]} <= added and {ids["syncthing"], ids["nextcloud"]} <= resolved, told


def test_deleting_a_copys_version_removes_the_copy(sandbox):
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    handle = server.open_and_edit(path, MINE + "mine\n")
    copy = write_file(sandbox.docs / COPIES["onedrive"][0], THEIRS)
    [listed] = wait_until(lambda: copies_listed(server, handle), what="the copy")
    assert server.call("document/deleteVersion", {"document": handle, "id": listed["id"]}) is None
    assert not copy.exists() and server.state(handle)["state"] == [] and copies_listed(server, handle) == []
    assert server.request("document/deleteVersion", {"document": handle, "id": listed["id"]}).error["code"] == -32020


def test_a_copy_the_tool_removes_before_a_resolution_ends_the_conflict(sandbox):
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    handle = server.open_and_edit(path, MINE + "mine\n")
    copy = write_file(sandbox.docs / COPIES["dropbox"][0], THEIRS)
    wait_until(lambda: "inConflict" in server.state(handle)["state"], what="the conflict")
    copy.unlink()
    wait_until(lambda: server.state(handle)["state"] == [], what="the end of the conflict")
    assert copies_listed(server, handle) == []
    assert [c["state"] for c in sync_changes(server, handle)][-1] == []
    reply = server.request("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert reply.error["code"] == -32019, reply.error  # NotInConflict: nothing left to resolve
    assert server.read(handle) == MINE + "mine\n"


def test_the_merge_base_is_the_kept_version_the_copy_descends_from(sandbox):
    """Saved v1, then v2 with my change; their copy is v1 with their change. The base must be v1:
    with v2 (the text last synced with the file) their side would seem to undo my change."""
    path = write_file(sandbox.docs / "notes.md", "zero\n")
    server = start(sandbox)
    opened = server.open(path)
    handle = opened["document"]
    v1 = "one\ntwo\nthree\nfour\nfive\n"
    version = server.replace_text(handle, opened["version"], v1)
    server.save(handle).result
    version = server.replace_text(handle, version, "one\nTWO\nthree\nfour\nfive\n")
    server.save(handle).result
    wait_until(lambda: len([v for v in server.call("document/versions", {"document": handle})["versions"] if v["kind"] == "saved"]) >= 2, what="two kept versions")
    server.replace_text(handle, version, "one\nTWO\nthree\nFOUR\nfive\n")  # unsaved
    write_file(sandbox.docs / COPIES["syncthing"][0], "one\ntwo\nthree\nfour\nFIVE\n")
    wait_until(lambda: copies_listed(server, handle), what="the copy")
    resolved = server.call("document/resolveConflict", {"document": handle, "resolution": "merge"})
    assert resolved["resolved"] is True, resolved
    assert server.read(handle) == "one\nTWO\nthree\nFOUR\nFIVE\n"
    assert server.state(handle)["state"] == [] and not (sandbox.docs / COPIES["syncthing"][0]).exists()


def test_without_a_common_version_a_merge_answers_the_regions_and_changes_nothing(sandbox):
    path = write_file(sandbox.docs / "notes.md", "alpha\nbeta\n")
    server = start(sandbox)
    handle = server.open_and_edit(path, "alpha\nbeta\ngamma\n")
    copy = write_file(sandbox.docs / COPIES["seafile"][0], "something\nelse entirely\n")
    wait_until(lambda: copies_listed(server, handle), what="the copy")
    version = server.state(handle)["version"]
    result = server.call("document/resolveConflict", {"document": handle, "resolution": "merge"})
    assert result["resolved"] is False and result["version"] == version, result
    assert [(c["mine"], c["theirs"], c["base"]) for c in result["conflicts"]] == [("alpha\nbeta\ngamma\n", "something\nelse entirely\n", "")]
    assert server.read(handle) == "alpha\nbeta\ngamma\n" and copy.exists()
    assert server.state(handle)["state"] == ["inConflict"]


def test_the_tools_temporary_files_are_never_copies(sandbox):
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    handle = server.open(path)["document"]
    for name in [".syncthing.notes.md.tmp", "~syncthing~notes.md.tmp", ".unison.notes.md.0123456789abcdef.unison.tmp",
                 ".notes.md.~1a2b3c", ".notes.md.part", "notes.md.partial"]:
        write_file(sandbox.docs / name, THEIRS)
    # A real copy after them: once it is seen, the temporary files were seen before it.
    write_file(sandbox.docs / COPIES["unison"][0], THEIRS)
    wait_until(lambda: copies_listed(server, handle), what="the real copy")
    assert [v["id"] for v in copies_listed(server, handle)] == ["sync:" + COPIES["unison"][0]]


def test_a_save_of_the_files_own_bytes_writes_nothing(sandbox):
    path = write_file(sandbox.docs / "notes.md", MINE)
    before = os.stat(path)
    server = start(sandbox)
    opened = server.open(path)
    handle = opened["document"]
    saved = server.save(handle).result
    assert saved["method"] == "unchanged" and saved["size"] == len(MINE), saved
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (before.st_ino, before.st_mtime_ns, before.st_ctime_ns)
    # An edit taken back by undo: the same bytes again, nothing written.
    version = server.replace_text(handle, opened["version"], "other\n")
    server.call("document/undo", {"document": handle})
    assert server.save(handle).result["method"] == "unchanged"
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    # A real change is written.
    server.replace_text(handle, version + 1, "changed\n")
    assert server.save(handle).result["method"] == "rename"
    assert path.read_text() == "changed\n" and os.stat(path).st_ino != before.st_ino


def test_saves_never_make_names_a_sync_tool_treats_specially(sandbox):
    """Every name that appears beside the file during 30 saves is the file's or our own temp file."""
    path = write_file(sandbox.docs / "notes.md", MINE)
    server = start(sandbox)
    opened = server.open(path)
    handle, version = opened["document"], opened["version"]
    seen: set[str] = set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.update(os.listdir(sandbox.docs))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(30):
            version = server.replace_text(handle, version, f"text {i}\n" * 2000)
            server.save(handle).result
    finally:
        stop.set()
        watcher.join()
    others = {name for name in seen if name != "notes.md"}
    assert all(name.startswith(".docsession-save-") for name in others), others
    import re
    special = re.compile(r"sync-conflict|conflicted copy|_conflict-|SFConflict|\(conflict|safeBackup|\.tmp$|\.part$|\.partial$|\.~|~$")
    assert not [name for name in others if special.search(name)], others


def test_workspace_query_counts_a_files_unresolved_conflict_versions(sandbox):
    """Per file: the copies beside it and the kept conflict versions nobody resolved."""
    path = write_file(sandbox.docs / "notes.md", MINE)
    write_file(sandbox.docs / "other.md", MINE)
    server = start(sandbox)
    handle = server.open_and_edit(path, MINE + "mine\n")
    path.write_text(THEIRS)  # another program: a conflict, its text kept as a conflict version
    wait_until(lambda: [v for v in server.call("document/versions", {"document": handle})["versions"] if v["kind"] == "conflict"], what="the kept conflict version")
    write_file(sandbox.docs / COPIES["syncthing"][0], THEIRS)
    wait_until(lambda: copies_listed(server, handle), what="the copy")

    def counts():
        files = server.call("workspace/query", {"root": uri(sandbox.docs)})["files"]
        return {f["name"]: f.get("conflicts") for f in files}

    assert counts()["notes.md"] == 2 and counts()["other.md"] is None, counts()
    # Resolving settles both: the file's conflict (its version marked resolved) and the copy.
    server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    wait_until(lambda: counts().get("notes.md") is None, what="no unresolved conflict left")
