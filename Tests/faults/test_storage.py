"""Issue 20 part 4: storage locations (protocol/README.md §11.8), and what workspace/query says of
synced folders (§11.3).

`initializationOptions.storage` names a local and a synced root; `document/moveToStorage` and
`workspace/moveAllToStorage` move documents between them through document/move's machinery (open
sessions follow, a name taken in the target is refused with detail, nothing half-moved);
`workspace/query` names the sync tool that marks a folder (`syncTool`), counts the conflict copies
beside each file (`conflicts`) and never lists the tools' temporary files."""

from __future__ import annotations

import os
from pathlib import Path

from faultkit import BIN, Server, uri, wait_until, write_file
from rpc_client import RpcClient

INVALID_PARAMS = -32602
ALREADY_EXISTS = -32013
UNKNOWN_DOCUMENT = -32011


def storage_dirs(sandbox) -> tuple[Path, Path]:
    local = sandbox.docs / "Local"
    synced = sandbox.docs / "Synced"
    local.mkdir()
    synced.mkdir()
    return local, synced


def start(sandbox, local: Path, synced: Path) -> Server:
    server = sandbox.start(initialization={"initializationOptions": {"storage": {"local": uri(local), "synced": uri(synced)}}})
    assert server.initialized["capabilities"]["storage"] == {"local": uri(local), "synced": uri(synced)}
    return server


def tree(root: Path) -> list[str]:
    """Every file and directory under `root`, relative, sorted (a package's entries included)."""
    found = []
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories + files:
            found.append(str(Path(directory, name).relative_to(root)))
    return sorted(found)


def put(path: Path, content: str | bytes) -> Path:
    """write_file, its directories made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_file(path, content)


def initialize_error(options: dict) -> dict:
    client = RpcClient(binary=BIN, args=("serve", "--no-journal", "--no-file-locks"), timeout=30)
    try:
        response, _ = client.request("initialize", {"initializationOptions": options})
        assert "error" in response, response
        # Refused: the server is still uninitialized, and takes a good initialize.
        again, _ = client.request("initialize", {})
        assert again["result"]["capabilities"]["storage"] is None, again
        return response["error"]
    finally:
        client.shutdown_and_exit()
        client.kill()


def make_documents(local: Path) -> None:
    put(local / "top.txt", "top\n")
    put(local / "a" / "b" / "deep.md", "deep\n")
    put(local / "a" / "side.txt", "side\n")
    put(local / "Story.textbundle" / "text.md", "story\n")
    put(local / "Story.textbundle" / "assets" / "img.png", b"\x89PNG")


def test_every_document_moves_to_the_synced_storage_and_back_with_one_open_and_dirty(sandbox):
    local, synced = storage_dirs(sandbox)
    make_documents(local)
    server = start(sandbox, local, synced)
    handle = server.open_and_edit(local / "a" / "b" / "deep.md", "deep, edited\n")
    before = tree(local)

    reply = server.request("workspace/moveAllToStorage", {"storage": "synced"})
    moved = reply.result["moved"]
    assert [(m["from"], m["to"]) for m in moved] == [
        (uri(local / p), uri(synced / p)) for p in ["Story.textbundle", "a/b/deep.md", "a/side.txt", "top.txt"]
    ], moved
    assert [m["document"] for m in moved] == [None, handle, None, None]
    # The open session followed: didMove before the response, its uri the new path.
    assert any(n["method"] == "document/didMove" and n["params"]["document"] == handle for n in reply.notifications), reply.notifications
    state = server.state(handle)
    assert state["uri"] == uri(synced / "a" / "b" / "deep.md"), state
    assert state["hasUnsavedChanges"] is True
    assert server.read(handle) == "deep, edited\n"
    # Nothing left in the source; everything in the target, the package whole.
    assert tree(local) == []
    assert tree(synced) == before
    assert (synced / "a" / "b" / "deep.md").read_text() == "deep\n"
    assert (synced / "Story.textbundle" / "assets" / "img.png").read_bytes() == b"\x89PNG"
    # A save writes the new path.
    assert server.save(handle).ok
    assert (synced / "a" / "b" / "deep.md").read_text() == "deep, edited\n"
    assert not (local / "a" / "b" / "deep.md").exists()

    # And back: every document to the local storage.
    back = server.call("workspace/moveAllToStorage", {"storage": "local"})["moved"]
    assert len(back) == 4
    assert tree(synced) == [] and tree(local) == before
    assert server.state(handle)["uri"] == uri(local / "a" / "b" / "deep.md")
    server.shutdown()


def test_a_taken_name_refuses_the_move_of_every_document_and_nothing_moves(sandbox):
    local, synced = storage_dirs(sandbox)
    make_documents(local)
    put(synced / "a" / "side.txt", "already here\n")
    put(synced / "top.txt", "also here\n")
    server = start(sandbox, local, synced)
    handle = server.open_and_edit(local / "top.txt", "top, edited\n")
    before_local, before_synced = tree(local), tree(synced)

    error = server.request("workspace/moveAllToStorage", {"storage": "synced"}).error
    assert error["code"] == ALREADY_EXISTS, error
    assert error["data"]["taken"] == [uri(synced / "a" / "side.txt"), uri(synced / "top.txt")], error
    assert str(synced / "top.txt") in error["message"] and "nothing was moved" in error["message"]
    assert tree(local) == before_local and tree(synced) == before_synced
    assert server.state(handle)["uri"] == uri(local / "top.txt")
    assert (synced / "top.txt").read_text() == "also here\n"

    # One document onto a taken name: refused the same way, nothing moved.
    error = server.request("document/moveToStorage", {"document": handle, "storage": "synced"}).error
    assert error["code"] == ALREADY_EXISTS and error["data"] == {"uri": uri(synced / "top.txt")}, error
    assert tree(local) == before_local and tree(synced) == before_synced
    server.shutdown()


def test_one_document_moves_to_the_synced_storage_and_back(sandbox):
    local, synced = storage_dirs(sandbox)
    put(local / "notes" / "today.md", "today\n")
    put(local / "other.txt", "other\n")
    server = start(sandbox, local, synced)
    handle = server.open_and_edit(local / "notes" / "today.md", "today, edited\n")

    there = server.request("document/moveToStorage", {"document": handle, "storage": "synced"})
    assert there.result == {"uri": uri(synced / "notes" / "today.md"), "displayName": "today.md",
                            "fileType": "markdown", "document": handle}, there.result
    assert any(n["method"] == "document/didMove" for n in there.notifications) or wait_until(
        lambda: server.state(handle)["uri"] == uri(synced / "notes" / "today.md"), what="the document following its file")
    assert server.state(handle)["uri"] == uri(synced / "notes" / "today.md")
    assert (synced / "notes" / "today.md").read_text() == "today\n"
    assert not (local / "notes" / "today.md").exists()
    assert server.read(handle) == "today, edited\n" and server.state(handle)["hasUnsavedChanges"] is True

    # Already there: answered as it is, nothing moves.
    again = server.call("document/moveToStorage", {"document": handle, "storage": "synced"})
    assert again["uri"] == uri(synced / "notes" / "today.md") and again["document"] == handle

    # A file that is not open, by its uri.
    other = server.call("document/moveToStorage", {"uri": uri(local / "other.txt"), "storage": "synced"})
    assert other["uri"] == uri(synced / "other.txt") and other["document"] is None
    assert (synced / "other.txt").read_text() == "other\n"

    back = server.call("document/moveToStorage", {"document": handle, "storage": "local"})
    assert back["uri"] == uri(local / "notes" / "today.md")
    assert server.save(handle).ok
    assert (local / "notes" / "today.md").read_text() == "today, edited\n"
    assert not (synced / "notes" / "today.md").exists()
    server.shutdown()


def test_bad_params_are_refused_precisely_and_change_nothing(sandbox):
    local, synced = storage_dirs(sandbox)
    outside = put(sandbox.docs / "outside.txt", "outside\n")
    put(local / "in.txt", "in\n")

    # No storage option: refused, naming params.storage and why.
    plain = sandbox.start()
    assert plain.initialized["capabilities"]["storage"] is None
    error = plain.request("workspace/moveAllToStorage", {"storage": "synced"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.storage", error
    assert "initializationOptions.storage was not given" in error["message"]
    error = plain.request("document/moveToStorage", {"uri": uri(local / "in.txt"), "storage": "synced"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.storage", error
    plain.shutdown()

    server = start(sandbox, local, synced)
    for params, field in [
        ({"storage": "cloud"}, "params.storage"),
        ({}, "params.storage"),
        ({"storage": 1}, "params.storage"),
    ]:
        error = server.request("workspace/moveAllToStorage", params).error
        assert error["code"] == INVALID_PARAMS and error["data"]["field"] == field, (params, error)
    error = server.request("document/moveToStorage", {"uri": uri(local / "in.txt"), "storage": "icloud"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.storage", error
    assert '"icloud" is not one of "local", "synced"' in error["message"]
    error = server.request("document/moveToStorage", {"storage": "synced"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.uri", error

    # A document outside both storages.
    handle = server.open(outside)["document"]
    error = server.request("document/moveToStorage", {"document": handle, "storage": "synced"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.document", error
    assert "in neither storage location" in error["message"] and str(outside) in error["message"]
    error = server.request("document/moveToStorage", {"uri": uri(outside), "storage": "local"}).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == "params.uri", error
    error = server.request("document/moveToStorage", {"document": "d99", "storage": "local"}).error
    assert error["code"] == UNKNOWN_DOCUMENT, error
    assert outside.read_text() == "outside\n" and tree(local) == ["in.txt"] and tree(synced) == []
    server.shutdown()


def test_storage_options_are_checked_at_initialize(sandbox):
    local, synced = storage_dirs(sandbox)
    file = put(sandbox.docs / "file.txt", "x\n")
    field = "params.initializationOptions.storage"
    cases = [
        ({"local": uri(local)}, f"{field}.synced", "missing"),
        ({"local": uri(local), "synced": "https://example.org/x"}, f"{field}.synced", ""),
        ({"local": uri(sandbox.docs / "missing"), "synced": uri(synced)}, f"{field}.local", "does not exist"),
        ({"local": uri(local), "synced": uri(file)}, f"{field}.synced", "is not a directory"),
        ({"local": uri(local), "synced": uri(local)}, f"{field}.synced", "the same directory"),
        ({"local": uri(local), "synced": uri(local / "..")}, f"{field}.local", "lies inside storage.synced"),
    ]
    (local / "inner").mkdir()
    cases.append(({"local": uri(local), "synced": uri(local / "inner")}, f"{field}.synced", "lies inside storage.local"))
    cases.append(({"local": uri(local / "inner"), "synced": uri(local)}, f"{field}.local", "lies inside storage.synced"))
    for storage, expected_field, words in cases:
        error = initialize_error({"storage": storage})
        assert error["code"] == INVALID_PARAMS, (storage, error)
        assert error["data"]["field"] == expected_field, (storage, error)
        assert words in error["message"], (storage, error)
    # With roots: each must lie inside them.
    error = initialize_error({"roots": [uri(local)], "storage": {"local": uri(local), "synced": uri(synced)}})
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == f"{field}.synced", error
    assert "outside the server's roots" in error["message"], error


def test_query_names_the_sync_tool_counts_conflict_copies_and_skips_temporary_files(sandbox):
    root = sandbox.docs
    (root / "Sync" / ".stfolder").mkdir(parents=True)
    put(root / "Sync" / "sub" / "a.md", "a\n")
    put(root / "Sync" / "sub" / "a.sync-conflict-20261128-101502-ABCDEFG.md", "a (theirs)\n")
    put(root / "Sync" / "sub" / "a (conflicted copy Jane 2026-11-28 101502).md", "a (jane)\n")
    put(root / "Sync" / "sub" / ".syncthing.a.md.tmp", "partial")
    put(root / "Cloud" / ".sync_0123456789ab.db", b"SQLite format 3\0")
    put(root / "Cloud" / "b.txt", "b\n")
    put(root / "Cloud" / ".b.txt.~1a2b3c", "partial")
    put(root / "Plain" / "c.txt", "c\n")
    server = sandbox.start()

    files = {f["relativePath"]: f for f in server.call("workspace/query", {"root": uri(root)})["files"]}
    assert "Sync/sub/.syncthing.a.md.tmp" not in files and "Cloud/.b.txt.~1a2b3c" not in files, sorted(files)
    assert files["Sync/sub/a.md"]["syncTool"] == "syncthing" and files["Sync/sub/a.md"]["conflicts"] == 2, files["Sync/sub/a.md"]
    assert files["Sync/sub/a.sync-conflict-20261128-101502-ABCDEFG.md"]["syncTool"] == "syncthing"
    assert "conflicts" not in files["Sync/sub/a.sync-conflict-20261128-101502-ABCDEFG.md"]
    assert files["Cloud/b.txt"]["syncTool"] == "nextcloud" and "conflicts" not in files["Cloud/b.txt"], files["Cloud/b.txt"]
    assert "syncTool" not in files["Plain/c.txt"] and "conflicts" not in files["Plain/c.txt"], files["Plain/c.txt"]

    # A query rooted below the marker's folder does not look above its root.
    inner = server.call("workspace/query", {"root": uri(root / "Sync" / "sub")})["files"]
    assert all("syncTool" not in f for f in inner), inner

    # Live: a temporary file appearing is not reported; the file it becomes is, with its tool.
    live = server.call("workspace/query", {"root": uri(root / "Cloud"), "watch": True})
    assert [f["name"] for f in live["files"]] == [".sync_0123456789ab.db", "b.txt"], live
    put(root / "Cloud" / ".c.txt.~99ff", "c\n")
    os.rename(root / "Cloud" / ".c.txt.~99ff", root / "Cloud" / "c.txt")

    def created():
        for n in server.notifications:
            if n["method"] == "workspace/didChangeFiles":
                for change in n["params"]["changes"]:
                    if change["uri"] == uri(root / "Cloud" / "c.txt"):
                        return change
        server.notifications += [m for m in drain_notifications(server)]
        return None

    change = wait_until(created, what="the change of c.txt")
    assert change["type"] == "created" and change["file"]["syncTool"] == "nextcloud", change
    for n in server.notifications:
        if n["method"] == "workspace/didChangeFiles":
            assert all(".~" not in c["uri"] for c in n["params"]["changes"]), n
    server.shutdown()


def drain_notifications(server: Server) -> list[dict]:
    """The notifications the server has sent meanwhile (a short read: none waiting is an empty list)."""
    got = []
    while True:
        try:
            message = server.rpc.read_message(timeout=0.05)
        except TimeoutError:
            return got
        if isinstance(message, dict) and "method" in message:
            got.append(message)


def test_a_move_failing_midway_moves_back_what_it_moved(sandbox):
    local, synced = storage_dirs(sandbox)
    make_documents(local)
    put(local / "0.txt", "zero\n")
    # A file where the target needs the directory `a`: the third move fails (ENOTDIR), after
    # `0.txt` (open, edited) and the package moved.
    put(synced / "a", "not a directory\n")
    server = start(sandbox, local, synced)
    handle = server.open_and_edit(local / "0.txt", "zero, edited\n")
    before_local, before_synced = tree(local), tree(synced)

    reply = server.request("workspace/moveAllToStorage", {"storage": "synced"})
    error = reply.error
    assert error["code"] == -32010 and error["data"]["code"] == "ENOTDIR", error
    assert error["data"]["path"] == str(synced / "a"), error
    # Everything back where it was; the open document followed there and back.
    assert tree(local) == before_local and tree(synced) == before_synced
    moves = [n["params"]["uri"] for n in reply.notifications if n["method"] == "document/didMove"]
    assert moves == [uri(synced / "0.txt"), uri(local / "0.txt")], reply.notifications
    state = server.state(handle)
    assert state["uri"] == uri(local / "0.txt") and state["hasUnsavedChanges"] is True
    assert server.read(handle) == "zero, edited\n"
    server.shutdown()


def test_conflict_copies_move_with_their_file_and_the_tools_files_stay(sandbox):
    local, synced = storage_dirs(sandbox)
    put(synced / "notes.md", "mine\n")
    copy = "notes.sync-conflict-20261128-101502-ABCDEFG.md"
    put(synced / copy, "theirs\n")
    (synced / ".stfolder").mkdir()
    put(synced / ".syncthing.notes.md.tmp", "partial")
    server = start(sandbox, local, synced)
    moved = server.call("workspace/moveAllToStorage", {"storage": "local"})["moved"]
    assert [m["to"] for m in moved] == [uri(local / "notes.md"), uri(local / copy)], moved
    assert tree(local) == ["notes.md", copy]
    assert tree(synced) == [".stfolder", ".syncthing.notes.md.tmp"]
    server.shutdown()


def test_with_sandbox_roots_the_moves_act_inside_them(sandbox):
    local, synced = storage_dirs(sandbox)
    make_documents(local)
    options = {"initializationOptions": {"storage": {"local": uri(local), "synced": uri(synced)}}}
    server = sandbox.start(args=("serve", "--no-journal", "--no-file-locks", "--root", str(sandbox.docs)), initialization=options)
    assert server.initialized["capabilities"]["roots"] == [uri(sandbox.docs)]
    handle = server.open_and_edit(local / "a" / "side.txt", "side, edited\n")
    before = tree(local)
    moved = server.call("workspace/moveAllToStorage", {"storage": "synced"})["moved"]
    assert len(moved) == 4 and tree(local) == [] and tree(synced) == before
    assert server.state(handle)["uri"] == uri(synced / "a" / "side.txt")
    assert server.call("document/moveToStorage", {"document": handle, "storage": "local"})["uri"] == uri(local / "a" / "side.txt")
    assert server.save(handle).ok and (local / "a" / "side.txt").read_text() == "side, edited\n"
    server.shutdown()
    # A storage outside the roots is refused at initialize.
    error = initialize_error({"roots": [uri(local)], "storage": {"local": uri(local), "synced": uri(synced)}})
    assert error["data"]["field"] == "params.initializationOptions.storage.synced", error


def test_a_move_of_every_document_reports_progress_under_the_token_before_its_answer(sandbox):
    local, synced = storage_dirs(sandbox)
    for n in range(12):
        put(local / f"note {n:02}.txt", f"note {n}\n")
    server = start(sandbox, local, synced)
    reply = server.request("workspace/moveAllToStorage", {"storage": "synced", "workDoneToken": "move-all"})
    assert len(reply.result["moved"]) == 12, reply.result
    progress = [n["params"] for n in reply.notifications if n["method"] == "$/progress"]
    assert progress and all(p["token"] == "move-all" for p in progress), reply.notifications
    values = [p["value"] for p in progress]
    assert values[0] == {"kind": "begin", "title": "Moving to the synced storage", "cancellable": False, "percentage": 0}, values
    assert values[-1] == {"kind": "end"}, values
    reports = values[1:-1]
    assert reports and [v["kind"] for v in reports] == ["report"] * len(reports), values
    percentages = [v["percentage"] for v in reports]
    assert percentages == sorted(set(percentages)) and percentages[-1] == 100, percentages
    assert reports[-1]["message"] == "12 of 12 documents", reports
    # Nothing to move: no progress at all. A token of the wrong type: -32602 naming it, nothing moved.
    empty = server.request("workspace/moveAllToStorage", {"storage": "synced", "workDoneToken": 7})
    assert empty.result == {"moved": []} and not [n for n in empty.notifications if n["method"] == "$/progress"], empty.notifications
    bad = server.request("workspace/moveAllToStorage", {"storage": "local", "workDoneToken": {"not": "a token"}})
    assert bad.error["code"] == -32602 and bad.error["data"] == {"field": "params.workDoneToken"}, bad.error
    assert len(tree(synced)) == 12 and tree(local) == []
    server.shutdown()
