"""Package documents (issue 18.1, NSFileWrapper's role), end to end over stdio with the built binary.

A directory opened with `kind: "package"` (or by a package extension such as `.textbundle`) is one
document: `document/readEntry`, `writeEntry` and `deleteEntry` read and change its entries, each
change one undoable step and one version; `document/save` builds a staged sibling tree and swaps it
in with `renameat2(RENAME_EXCHANGE)` (the first save: `RENAME_NOREPLACE`; where the file system
refuses the exchange, two renames under an intent record). A SIGKILL at any system call of a save
leaves the old package or the new one, whole, and the next open cleans up.
"""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path

import pytest

from faultkit import uri, wait_until, write_file

ENTRY_ERROR = -32028
WRONG_KIND = -32031
INVALID_PARAMS = -32602
CONTENT_MODIFIED = -32801
CHANGED_ON_DISK = -32017
UNKNOWN_DOCUMENT = -32011

# Every call a package save makes that could leave something half done.
PACKAGE_SYSCALLS = ("openat", "mkdir", "mkdirat", "write", "pwrite64", "pwritev", "fsync", "fdatasync", "close",
                    "renameat", "renameat2", "unlinkat", "rmdir", "linkat", "symlinkat", "ioctl", "fchmod", "fchmodat",
                    "copy_file_range", "ftruncate")


def make_bundle(directory: Path, name: str = "notes.textbundle") -> Path:
    package = directory / name
    (package / "assets").mkdir(parents=True)
    write_file(package / "text.md", "# Notes\n\nFirst line\n")
    write_file(package / "info.json", '{"version": 2}\n')
    write_file(package / "assets" / "pixel.png", b"\x89PNG\r\n\x1a\n\x00\x01\x02")
    return package


def tree(package: Path) -> dict[str, bytes | None]:
    """Every entry under `package`: files with their bytes, directories as None."""
    found: dict[str, bytes | None] = {}
    for root, directories, files in os.walk(package):
        for name in directories:
            found[os.path.relpath(os.path.join(root, name), package)] = None
        for name in files:
            found[os.path.relpath(os.path.join(root, name), package)] = Path(root, name).read_bytes()
    return found


def siblings(package: Path) -> list[str]:
    """What else is in the package's parent directory (staged trees, intent records)."""
    return sorted(name for name in os.listdir(package.parent) if name != package.name)


def error_of(reply) -> dict:
    assert reply.error is not None, reply.result
    return reply.error


def test_a_textbundle_opens_as_a_package_and_its_entries_change_undo_and_save(sandbox):
    package = make_bundle(sandbox.docs)
    (package / "empty").mkdir()
    server = sandbox.start()
    info = server.call("document/open", {"uri": uri(package)})
    assert info["kind"] == "package" and info["document"].startswith("p"), info
    handle = info["document"]
    assert info["version"] == 1 and info["hasUnsavedChanges"] is False and info["state"] == []
    assert info["entries"] == [
        {"path": "assets", "kind": "directory", "size": 0},
        {"path": "assets/pixel.png", "kind": "file", "size": 11},
        {"path": "empty", "kind": "directory", "size": 0},
        {"path": "info.json", "kind": "file", "size": 15},
        {"path": "text.md", "kind": "file", "size": 20},
    ]
    read = server.call("document/readEntry", {"document": handle, "path": "text.md"})
    assert read == {"document": handle, "path": "text.md", "size": 20, "unsaved": False, "text": "# Notes\n\nFirst line\n"}
    image = server.call("document/readEntry", {"document": handle, "path": "assets/pixel.png"})
    assert base64.b64decode(image["base64"]) == b"\x89PNG\r\n\x1a\n\x00\x01\x02" and "text" not in image

    # Each change is one version and one undoable step; the first makes the document dirty.
    reply = server.request("document/writeEntry", {"document": handle, "path": "text.md", "text": "# Notes\n\nChanged\n", "version": 1})
    assert reply.result == {"version": 2}
    assert [n["params"]["reason"] for n in reply.notifications if n["method"] == "document/stateChanged"] == ["edited"]
    assert server.call("document/writeEntry", {"document": handle, "path": "assets/new/deep.bin",
                                               "base64": base64.b64encode(b"\x00\xff").decode()}) == {"version": 3}
    assert server.call("document/deleteEntry", {"document": handle, "path": "info.json", "version": 3}) == {"version": 4}
    state = server.call("document/state", {"document": handle})
    assert state["hasUnsavedChanges"] is True and state["canUndo"] is True and state["version"] == 4
    assert [e["path"] for e in state["entries"]] == ["assets", "assets/new", "assets/new/deep.bin", "assets/pixel.png", "empty", "text.md"]

    undone = server.call("document/undo", {"document": handle})
    assert undone == {"version": 5, "entries": [{"path": "info.json", "change": "written"}], "store": False}
    assert server.call("document/readEntry", {"document": handle, "path": "info.json"})["text"] == '{"version": 2}\n'
    redone = server.call("document/redo", {"document": handle, "version": 5})
    assert redone == {"version": 6, "entries": [{"path": "info.json", "change": "deleted"}], "store": False}

    # Nothing is on disk before the save; the save writes the whole new tree at once.
    assert (package / "info.json").exists() and (package / "text.md").read_text() == "# Notes\n\nFirst line\n"
    reply = server.save(handle)
    saved = reply.result
    assert saved["method"] == "exchange" and saved["durable"] is True and saved["version"] == 6, saved
    assert saved["entries"]["written"] == 2, saved
    assert [n["params"]["reason"] for n in reply.notifications if n["method"] == "document/stateChanged"] == ["saved"]
    assert tree(package) == {
        "assets": None, "assets/new": None, "assets/new/deep.bin": b"\x00\xff",
        "assets/pixel.png": b"\x89PNG\r\n\x1a\n\x00\x01\x02", "empty": None, "text.md": b"# Notes\n\nChanged\n",
    }
    # The old tree is removed after the answer (the new tree was in place and flushed before it).
    wait_until(lambda: siblings(package) == [], what="the old tree's removal")
    assert server.call("document/state", {"document": handle})["hasUnsavedChanges"] is False

    # Undo past the save: the entry's earlier bytes were kept before the save replaced them.
    server.call("document/undo", {"document": handle})  # info.json back
    server.call("document/undo", {"document": handle})  # deep.bin gone
    server.call("document/undo", {"document": handle})  # text.md's first text
    assert server.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "# Notes\n\nFirst line\n"
    server.save(handle)
    assert tree(package)["text.md"] == b"# Notes\n\nFirst line\n" and "assets/new/deep.bin" not in tree(package)

    # A fresh server sees the saved package.
    fresh = sandbox.start()
    again = fresh.call("document/open", {"uri": uri(package), "kind": "package"})
    assert [e["path"] for e in again["entries"]] == ["assets", "assets/pixel.png", "empty", "info.json", "text.md"]


def test_bad_input_is_refused_precisely_and_changes_nothing(sandbox):
    package = make_bundle(sandbox.docs)
    text_file = write_file(sandbox.docs / "plain.txt", "text\n")
    (package / "link").symlink_to("/etc/hostname")
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    text = server.open(text_file)["document"]

    def refused(method: str, params: dict, code: int, field: str | None = None, reason: str | None = None) -> dict:
        error = error_of(server.request(method, params))
        assert error["code"] == code, error
        if field is not None:
            assert error["data"]["field"] == field, error
        if reason is not None:
            assert error["data"]["reason"] == reason, error
        return error

    for path in ["../escape", "/etc/passwd", "a//b", "a/./b", "", "trailing/"]:
        refused("document/writeEntry", {"document": handle, "path": path, "text": "x"}, INVALID_PARAMS, "params.path")
        refused("document/readEntry", {"document": handle, "path": path}, INVALID_PARAMS, "params.path")
    refused("document/writeEntry", {"document": handle, "path": "a"}, INVALID_PARAMS, "params.text")
    refused("document/writeEntry", {"document": handle, "path": "a", "text": "x", "base64": "eA=="}, INVALID_PARAMS, "params.base64")
    error = refused("document/writeEntry", {"document": handle, "path": "a", "base64": "e$A="}, INVALID_PARAMS, "params.base64")
    assert "character 1" in error["message"], error
    refused("document/writeEntry", {"document": handle, "path": "a", "text": "x", "version": 7}, CONTENT_MODIFIED)
    refused("document/writeEntry", {"document": handle, "path": "assets", "text": "x"}, ENTRY_ERROR, reason="isDirectory")
    refused("document/writeEntry", {"document": handle, "path": "text.md/inner", "text": "x"}, ENTRY_ERROR, reason="underFile")
    refused("document/readEntry", {"document": handle, "path": "missing.md"}, ENTRY_ERROR, reason="noSuchEntry")
    refused("document/readEntry", {"document": handle, "path": "link"}, ENTRY_ERROR, reason="symbolicLink")
    refused("document/readEntry", {"document": handle, "path": "assets/pixel.png", "as": "text"}, -32014)
    refused("document/deleteEntry", {"document": handle, "path": "assets"}, ENTRY_ERROR, reason="isDirectory")
    refused("document/readEntry", {"document": "p99", "path": "text.md"}, UNKNOWN_DOCUMENT)
    refused("document/readEntry", {"document": text, "path": "text.md"}, WRONG_KIND)
    refused("document/edit", {"document": handle, "version": 1, "edits": [{"text": "x"}]}, WRONG_KIND)
    refused("document/read", {"document": handle}, WRONG_KIND)
    refused("document/restoreVersion", {"document": handle, "id": "x"}, WRONG_KIND)
    refused("document/save", {"document": handle, "to": "copy.textbundle"}, INVALID_PARAMS, "params.to")
    refused("document/resolveConflict", {"document": handle, "resolution": "merge"}, INVALID_PARAMS, "params.resolution")
    refused("document/open", {"uri": uri(text_file), "kind": "package"}, INVALID_PARAMS, "params.kind")
    refused("document/open", {"uri": uri(package), "kind": "package", "storeOptions": {}}, INVALID_PARAMS, "params.storeOptions")
    refused("document/create", {"uri": uri(sandbox.docs / "x.textbundle"), "kind": "package", "text": "t"}, INVALID_PARAMS, "params.text")

    state = server.call("document/state", {"document": handle})
    assert state["version"] == 1 and state["hasUnsavedChanges"] is False, state
    assert server.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "# Notes\n\nFirst line\n"


def test_create_makes_a_package_whole_and_refuses_an_existing_path(sandbox):
    server = sandbox.start()
    path = sandbox.docs / "new.textbundle"
    info = server.call("document/create", {"uri": uri(path), "kind": "package"})
    assert info["kind"] == "package" and info["entries"] == [] and path.is_dir()
    handle = info["document"]
    server.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "hello\n"})
    saved = server.save(handle).result
    assert saved["method"] == "exchange", saved
    assert tree(path) == {"text.md": b"hello\n"}
    error = error_of(server.request("document/create", {"uri": uri(path), "kind": "package"}))
    assert error["code"] == -32013, error


def test_another_programs_change_reloads_a_clean_package_and_is_a_conflict_for_a_dirty_one(sandbox):
    package = make_bundle(sandbox.docs)
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]

    # Clean: one document/didChange naming what changed; version + 1.
    write_file(package / "text.md", "# Notes\n\nFrom elsewhere\n")
    (package / "info.json").unlink()

    def did_change() -> dict | None:
        server.request("document/state", {"document": handle})
        for note in server.notifications:
            if note["method"] == "document/didChange" and note["params"]["document"] == handle:
                return note["params"]
        return None

    change = wait_until(did_change, what="the package's reload")
    assert change["reason"] == "external" and change["version"] == 2, change
    assert change["entries"] == [{"path": "info.json", "change": "deleted"}, {"path": "text.md", "change": "written"}], change
    assert server.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "# Notes\n\nFrom elsewhere\n"

    # Dirty: a conflict; the save is refused until it is resolved (or forced).
    server.call("document/writeEntry", {"document": handle, "path": "mine.md", "text": "mine\n"})
    write_file(package / "theirs.md", "theirs\n")
    wait_until(lambda: "inConflict" in server.call("document/state", {"document": handle})["state"],
               what="the conflict")
    error = error_of(server.save(handle))
    assert error["code"] == CHANGED_ON_DISK, error
    assert (package / "theirs.md").exists() and not (package / "mine.md").exists()
    resolved = server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert resolved["state"] == [] and resolved["hasUnsavedChanges"] is True
    server.save(handle)
    assert "mine.md" in tree(package) and "theirs.md" not in tree(package)


def test_a_refused_exchange_falls_back_to_two_renames_and_says_so(sandbox):
    # The file system's refusal is real here: strace makes renameat2 answer EINVAL, as file systems
    # without RENAME_EXCHANGE do. (One entry, rewritten: the exchange is the save thread's first
    # renameat2; copying an unchanged entry renames a temp file into the staged tree first.)
    package = sandbox.docs / "notes.textbundle"
    package.mkdir()
    write_file(package / "text.md", "old\n")
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    server.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "changed\n"})
    tracer = sandbox.trace(server, inject=("renameat2:error=EINVAL:when=1",), trace=("renameat2",))
    saved = server.save(handle).result
    tracer.detach()
    assert saved["method"] == "renames", (saved, [call.line for call in tracer.calls()])
    assert tree(package) == {"text.md": b"changed\n"} and siblings(package) == []
    renames = [call for call in tracer.calls() if call.name == "renameat2"]
    assert renames[0].injected and "RENAME_EXCHANGE" in renames[0].args, [call.line for call in renames]


def discover_save_calls(sandbox, prepare, **save_params) -> list[tuple[str, int]]:
    """The system calls of one package save (`save_params`: a save as's `to`), in order, as (name,
    nth call of that name in the save's thread): a save traced without faults."""
    server, handle, package = prepare()
    tracer = sandbox.trace(server, trace=PACKAGE_SYSCALLS)
    server.save(handle, **save_params).result
    # The old tree goes after the answer, on another thread: let it go before the next run.
    wait_until(lambda: not [name for name in siblings(package) if ".docsession-stage-" in name], what="the old tree's removal")
    tracer.detach()
    calls = tracer.calls()
    swaps = [call for call in calls if call.name in ("renameat2", "renameat")]
    assert swaps, "the save swapped nothing in"
    thread = swaps[0].pid
    counted: dict[str, int] = {}
    points = []
    for call in calls:
        if call.pid != thread:
            continue
        counted[call.name] = counted.get(call.name, 0) + 1
        points.append((call.name, counted[call.name]))
    return points


def save_killed_at(sandbox, server, handle: str, name: str, nth: int, **save_params) -> dict | None:
    """Sends a save (`save_params`: a save as's `to`) with strace set to SIGKILL the server at the
    `nth` call `name`: None once the server died of it, else the save's response (it made fewer
    such calls; the server is then killed)."""
    tracer = sandbox.trace(server, trace=PACKAGE_SYSCALLS, inject=(f"{name}:signal=SIGKILL:when={nth}",))
    request = server.send_save(handle, **save_params)
    try:
        response, _ = server.rpc.read_until_response(request, timeout=60)
    except EOFError:
        assert server.wait_exit() == -signal.SIGKILL, (name, nth)
        tracer.wait()
        return None
    tracer.stop()
    server.kill()
    return response


def kill_points(sandbox, prepare, check_whole) -> None:
    points = discover_save_calls(sandbox, prepare)
    assert len(points) >= 10, points
    outcomes = {"old": 0, "new": 0}
    missed = []
    for name, nth in points:
        server, handle, package = prepare()
        response = save_killed_at(sandbox, server, handle, name, nth)
        if response is not None:
            # This save made fewer such calls than the traced one (SQLite opens its working copy's
            # files as it needs them): it ran to the end, and must have saved.
            assert response.get("result", {}).get("method") in ("exchange", "renames"), (name, nth, response)
            missed.append((name, nth))
        outcome = check_whole(package, (name, nth))
        outcomes[outcome] += 1
        # The next open finishes or rolls back what the dead server left: nothing beside the package.
        left = siblings(package)
        fresh = sandbox.start()
        opened = fresh.call("document/open", {"uri": uri(package)})
        assert siblings(package) == [], (name, nth, siblings(package))
        # The open says what it found and did (nothing to do: no member).
        assert ("interruptedSave" in opened) == bool(left), (name, nth, left, opened.get("interruptedSave"))
        if left:
            assert sorted(opened["interruptedSave"]["removed"]) == left, (name, nth, left, opened["interruptedSave"])
        assert check_whole(package, (name, nth)) == outcome, (name, nth)
        fresh.shutdown()
    # Both sides were seen: kills before the swap leave the old tree, after it the new one; nearly
    # every point was reached.
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
    assert len(missed) <= len(points) // 4, (missed, points)


def test_sigkill_at_each_system_call_of_a_package_save_leaves_the_old_or_the_new_package_whole(sandbox):
    old_tree: dict[str, bytes | None] = {}
    new_tree: dict[str, bytes | None] = {}

    def prepare():
        package = sandbox.docs / "notes.textbundle"
        if package.exists():
            import shutil
            shutil.rmtree(package)
        make_bundle(sandbox.docs)
        old_tree.clear()
        old_tree.update(tree(package))
        server = sandbox.start()
        handle = server.call("document/open", {"uri": uri(package)})["document"]
        server.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "new text\n" * 1000})
        server.call("document/writeEntry", {"document": handle, "path": "assets/new.bin", "base64": base64.b64encode(os.urandom(4096)).decode()})
        server.call("document/deleteEntry", {"document": handle, "path": "info.json"})
        return server, handle, package

    def check_whole(package: Path, point) -> str:
        now = tree(package)
        if now == old_tree:
            return "old"
        assert set(now) == {"assets", "assets/pixel.png", "assets/new.bin", "text.md"}, (point, sorted(now))
        assert now["text.md"] == b"new text\n" * 1000 and len(now["assets/new.bin"]) == 4096, point
        return "new"

    kill_points(sandbox, prepare, check_whole)


def test_a_package_closed_and_opened_again_while_its_old_tree_is_being_removed_is_not_an_interrupted_save(sandbox):
    """A save answers once the new tree is in place, and removes the old one after. Under disk load
    that removal is slow (strace delays each `unlinkat` by 0.5 s here); a close and an open at once
    must wait for it, not take the old tree for a save a crash interrupted (`interruptedSave`:
    `cleanedUp`), as a loaded run of the §13.3 transcript once did."""
    package = make_bundle(sandbox.docs)
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    server.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "# Saved\n"})
    tracer = sandbox.trace(server, trace=("unlinkat",), inject=("unlinkat:delay_enter=500000",))
    try:
        assert server.save(handle).result["method"] == "exchange"
        assert siblings(package), "the old tree is still being removed (each unlinkat is delayed)"
        assert server.call("document/close", {"document": handle}) == {"saved": False}
        info = server.call("document/open", {"uri": uri(package)})
    finally:
        tracer.detach()
    assert "interruptedSave" not in info, info
    assert siblings(package) == [] and tree(package)["text.md"] == b"# Saved\n"


def test_saves_keep_request_order_with_the_writes_and_saves_pipelined_around_them(sandbox):
    """§13.3: saves are in request order for the document, and a write sent after a save stays
    unsaved, even when requests are pipelined (sent without waiting) and the save's work reaches
    the store after the write's: what a save writes is taken when it is asked for."""
    package = make_bundle(sandbox.docs)
    server = sandbox.start(args=("serve", "--no-journal"))
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    rpc = server.rpc
    for round in range(40):
        ids = []
        for text in (f"saved {round}\n", f"unsaved {round}\n"):
            ids.append(server.send_save(handle))
            ids.append(rpc.next_id)
            rpc.next_id += 1
            rpc.send({"jsonrpc": "2.0", "id": ids[-1], "method": "document/writeEntry",
                      "params": {"document": handle, "path": "text.md", "text": text}})
        answers = {}
        while len(answers) < len(ids):
            message = rpc.read_message(60)
            if isinstance(message, dict) and "method" not in message:
                answers[message["id"]] = message
        assert all("result" in answers[i] for i in ids), answers
        # The second save wrote the first write; the second write stays unsaved.
        assert answers[ids[2]]["result"]["version"] == answers[ids[1]]["result"]["version"], answers
        assert (package / "text.md").read_text() == f"saved {round}\n", round
        state = server.call("document/state", {"document": handle})
        assert state["hasUnsavedChanges"] is True, (round, state)
