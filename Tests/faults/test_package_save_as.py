"""Saving a package or a managed document as another (protocol/README.md §13.3, "Save as"), end to
end over stdio with the built binary.

`document/save` with `to` builds the tree beside the new path, its unchanged entries cloned (or
copied) from the package, renames it in with `RENAME_NOREPLACE` (or, with `force`, exchanges it with
a directory already there), and moves the document there: later saves, reloads and the journal are
the new package's; the package it was saved from is left as it was. A SIGKILL at any system call
leaves the new path absent or whole, and the package untouched.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from faultkit import uri, wait_until, write_file
from test_package_journal import kill, package_journals, serve, wait_for_journal, wait_for_no_journal, write
from test_packages import discover_save_calls, make_bundle, save_killed_at, siblings, tree

ALREADY_EXISTS = -32013
FILE_SYSTEM_ERROR = -32010
INVALID_PARAMS = -32602
OUTSIDE_ROOTS = -32022
CHANGED_ON_DISK = -32017


def error_of(reply) -> dict:
    assert reply.error is not None, reply.result
    return reply.error


def state_changes(reply, handle: str) -> list[dict]:
    return [n["params"] for n in reply.notifications if n["method"] == "document/stateChanged" and n["params"]["document"] == handle]


def test_a_package_saved_as_another_moves_there_and_leaves_the_original_as_it_was(sandbox):
    package = make_bundle(sandbox.docs)
    original = tree(package)
    copy = sandbox.docs / "Notes copy.textbundle"
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "text.md", "# Notes\n\nChanged\n", label="Typing")
    assert server.call("document/deleteEntry", {"document": handle, "path": "info.json"}) == {"version": 3}

    reply = server.save(handle, to=uri(copy))
    saved = reply.result
    assert saved["uri"] == uri(copy) and saved["version"] == 3 and saved["method"] == "firstSave", saved
    # One entry written from the session; the unchanged one cloned or copied from the package.
    entries = saved["entries"]
    assert entries["written"] == 1 and entries["cloned"] + entries["copied"] == 1 and entries["linked"] == 0, entries
    [change] = state_changes(reply, handle)
    assert change["reason"] == "saved" and change["uri"] == uri(copy) and change["hasUnsavedChanges"] is False, change
    assert tree(copy) == {"assets": None, "assets/pixel.png": original["assets/pixel.png"], "text.md": b"# Notes\n\nChanged\n"}
    assert tree(package) == original, "the package saved from is left as it was"
    assert siblings(copy) == [package.name], "no staged tree is left"

    info = server.call("document/state", {"document": handle})
    assert info["uri"] == uri(copy) and info["displayName"] == "Notes copy.textbundle" and info["hasUnsavedChanges"] is False, info
    # An open of the new path is the same document; the old path is another package now.
    assert server.call("document/open", {"uri": uri(copy)})["document"] == handle
    other = server.call("document/open", {"uri": uri(package)})
    assert other["document"] != handle and other["version"] == 1
    assert server.call("document/readEntry", {"document": other["document"], "path": "text.md"})["text"] == "# Notes\n\nFirst line\n"

    # The history goes on: undo reaches back past the save as (the deleted entry comes back from
    # the bytes read before the save), and the next save writes the new package in place.
    assert server.call("document/undo", {"document": handle})["entries"] == [{"path": "info.json", "change": "written"}]
    assert server.call("document/readEntry", {"document": handle, "path": "info.json"})["text"] == '{"version": 2}\n'
    write(server, handle, "later.md", "later\n")
    again = server.save(handle).result
    assert again["uri"] == uri(copy) and again["method"] == "exchange", again
    assert tree(copy) == {"assets": None, "assets/pixel.png": original["assets/pixel.png"], "text.md": b"# Notes\n\nChanged\n",
                          "info.json": b'{"version": 2}\n', "later.md": b"later\n"}
    assert tree(package) == original
    wait_until(lambda: siblings(copy) == [package.name], what="the old tree's removal")

    # Another program's change to the new package reloads the document; one to the old does not.
    write_file(package / "text.md", "elsewhere, in the original\n")
    write_file(copy / "text.md", "elsewhere, in the copy\n")

    def reloaded() -> bool:
        server.request("document/state", {"document": handle})
        return any(n["method"] == "document/didChange" and n["params"]["document"] == handle for n in server.notifications)

    wait_until(reloaded, what="the reload of the new package")
    assert server.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "elsewhere, in the copy\n"


def test_a_save_as_is_refused_precisely_and_changes_nothing(sandbox):
    package = make_bundle(sandbox.docs)
    original = tree(package)
    existing = make_bundle(sandbox.docs, "existing.textbundle")
    existing_tree = tree(existing)
    held = make_bundle(sandbox.docs, "held.textbundle")
    text_file = write_file(sandbox.docs / "plain.txt", "text\n")
    folder = sandbox.docs / "folder"
    folder.mkdir()
    inner = write_file(folder / "inner.txt", "inner\n")
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    other = server.call("document/open", {"uri": uri(held)})["document"]
    text = server.open(text_file)["document"]
    inner_handle = server.open(inner)["document"]
    write(server, handle, "text.md", "mine\n")

    def refused(to: str, code: int, force: bool = False) -> dict:
        params = {"to": to, "force": True} if force else {"to": to}
        reply = server.save(handle, **params)
        error = error_of(reply)
        assert error["code"] == code, error
        # Refused before anything was attempted: no savingError, the document where it was.
        assert state_changes(reply, handle) == [], reply.notifications
        return error

    error = refused(uri(existing), ALREADY_EXISTS)
    assert error["data"] == {"uri": uri(existing)} and "force" in error["message"], error
    error = refused(uri(held), ALREADY_EXISTS, force=True)
    assert error["data"] == {"uri": uri(held), "document": other}, error
    error = refused(uri(text_file), ALREADY_EXISTS, force=True)
    assert error["data"] == {"uri": uri(text_file), "document": text}, error
    # A directory holding an open document is not replaced: that document's file would go.
    error = refused(uri(folder), ALREADY_EXISTS, force=True)
    assert error["data"] == {"uri": uri(inner), "document": inner_handle}, error
    error = refused("https://example.com/x.textbundle", INVALID_PARAMS)
    assert error["data"]["field"] == "params.to", error
    error = refused("notes.textbundle", INVALID_PARAMS)
    assert error["data"]["field"] == "params.to", error

    # A regular file (or a symbolic link) is never replaced by a package, even with force.
    plain = write_file(sandbox.docs / "not-a-package", "a file\n")
    link = sandbox.docs / "link.textbundle"
    link.symlink_to(existing)
    for target in (plain, link):
        reply = server.save(handle, to=uri(target), force=True)
        error = error_of(reply)
        assert error["code"] == FILE_SYSTEM_ERROR and error["data"]["code"] == "ENOTDIR", error
        assert error["data"]["path"] == str(target), error
    assert plain.read_text() == "a file\n" and link.is_symlink() and os.readlink(link) == str(existing)

    # As rename(2): not into itself, nor over a directory that holds it (which force would remove).
    for target, reason in ((package / "inner.textbundle", "inside itself"), (sandbox.docs, "holds it")):
        reply = server.save(handle, to=uri(target), force=True)
        error = error_of(reply)
        assert error["code"] == FILE_SYSTEM_ERROR and error["data"]["code"] == "EINVAL", error
        assert reason in error["message"], error

    assert tree(package) == original and tree(existing) == existing_tree and inner.read_text() == "inner\n"
    info = server.call("document/state", {"document": handle})
    assert info["uri"] == uri(package) and info["hasUnsavedChanges"] is True and info["version"] == 2, info
    assert server.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "mine\n"
    assert sorted(os.listdir(sandbox.docs)) == sorted(["notes.textbundle", "existing.textbundle", "held.textbundle", "plain.txt",
                                                       "folder", "not-a-package", "link.textbundle"])
    # It still saves where it is.
    assert server.save(handle).result["uri"] == uri(package)


def test_a_save_as_outside_the_roots_is_refused(sandbox):
    inside = sandbox.docs / "inside"
    inside.mkdir()
    package = make_bundle(inside)
    server = sandbox.start(args=("serve", "--no-journal", "--root", str(inside)))
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    outside = sandbox.docs / "outside.textbundle"
    error = error_of(server.save(handle, to=uri(outside)))
    assert error["code"] == OUTSIDE_ROOTS and error["data"]["field"] == "params.to", error
    assert not outside.exists()
    assert server.save(handle, to=uri(inside / "copy.textbundle")).result["uri"] == uri(inside / "copy.textbundle")


def test_force_replaces_a_directory_at_the_new_path_whole(sandbox):
    package = make_bundle(sandbox.docs)
    target = sandbox.docs / "old.textbundle"
    (target / "deep" / "deeper").mkdir(parents=True)
    write_file(target / "deep" / "deeper" / "stale.txt", "stale\n")
    write_file(target / "text.md", "stale text\n")
    server = sandbox.start()
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "text.md", "replacing\n")
    saved = server.save(handle, to=uri(target), force=True).result
    assert saved["method"] == "exchange" and saved["uri"] == uri(target), saved
    original = tree(package)
    assert tree(target) == {"assets": None, "assets/pixel.png": original["assets/pixel.png"],
                            "info.json": original["info.json"], "text.md": b"replacing\n"}
    # The replaced tree goes after the answer.
    wait_until(lambda: sorted(os.listdir(sandbox.docs)) == ["notes.textbundle", "old.textbundle"], what="the replaced tree's removal")


def test_a_package_changed_on_disk_is_not_copied_unasked(sandbox):
    package = make_bundle(sandbox.docs)
    server = sandbox.start(args=("serve", "--no-journal", "--no-watch"))
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "text.md", "mine\n")
    write_file(package / "info.json", '{"version": 3}\n')
    copy = sandbox.docs / "copy.textbundle"
    error = error_of(server.save(handle, to=uri(copy)))
    assert error["code"] == CHANGED_ON_DISK, error
    assert not copy.exists()
    # With force, the copy takes the package's entries as they are now.
    server.save(handle, to=uri(copy), force=True)
    assert tree(copy)["info.json"] == b'{"version": 3}\n' and tree(copy)["text.md"] == b"mine\n"


def test_a_managed_document_saved_as_another_carries_its_store(sandbox):
    package = sandbox.docs / "Library.managed"
    server = sandbox.start()
    handle = server.call("document/create", {"uri": uri(package), "kind": "managed", "storeOptions": {
        "migrations": ["CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)"]}})["document"]
    server.save(handle)
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(body) VALUES (?)", "params": ["saved as"]})
    copy = sandbox.docs / "Library copy.managed"
    saved = server.save(handle, to=uri(copy)).result
    assert saved["uri"] == uri(copy), saved

    def rows(path: Path) -> list[tuple]:
        connection = sqlite3.connect(f"file:{path / 'StoreContent' / 'persistentStore'}?mode=ro", uri=True)
        try:
            return connection.execute("SELECT body FROM notes").fetchall()
        finally:
            connection.close()

    assert rows(copy) == [("saved as",)] and rows(package) == []
    assert sorted(os.listdir(copy / "StoreContent")) == ["persistentStore"], "published whole: no -wal or -shm"
    # The store goes on in the new package.
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(body) VALUES ('after')"})
    server.save(handle)
    assert rows(copy) == [("saved as",), ("after",)] and rows(package) == []


def test_the_journal_follows_a_save_as(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "text.md", "before the save as\n")
    wait_for_journal(state, 2)
    copy = sandbox.docs / "copy.textbundle"
    server.save(handle, to=uri(copy))
    wait_for_no_journal(state)
    write(server, handle, "text.md", "after the save as\n")
    wait_for_journal(state, 3)
    kill(server)

    fresh = serve(sandbox, state)
    assert [j["uri"] for j in fresh.call("workspace/recoverable", {})["journals"]] == [uri(copy)]
    assert "recovery" not in fresh.call("document/open", {"uri": uri(package)})
    info = fresh.call("document/open", {"uri": uri(copy)})
    assert info["recovery"]["edits"] == 1, info
    fresh.call("document/recover", {"document": info["document"]})
    assert fresh.call("document/readEntry", {"document": info["document"], "path": "text.md"})["text"] == "after the save as\n"
    assert len(package_journals(state)) == 1


def test_sigkill_at_each_system_call_of_a_save_as_leaves_no_package_or_a_whole_one_and_the_original_untouched(sandbox):
    source = sandbox.docs / "notes.textbundle"
    target = sandbox.docs / "copy.textbundle"
    original: dict[str, bytes | None] = {}

    def prepare():
        for path in (source, target):
            if path.exists():
                shutil.rmtree(path)
        for name in siblings(source) if source.parent.exists() else []:
            shutil.rmtree(sandbox.docs / name, ignore_errors=True)
        make_bundle(sandbox.docs)
        original.clear()
        original.update(tree(source))
        server = sandbox.start(args=("serve", "--no-journal"))
        handle = server.call("document/open", {"uri": uri(source)})["document"]
        write(server, handle, "text.md", "new text\n" * 1000)
        server.call("document/deleteEntry", {"document": handle, "path": "info.json"})
        return server, handle, target

    expected = {"assets", "assets/pixel.png", "text.md"}
    points = discover_save_calls(sandbox, prepare, to=uri(target))
    assert len(points) >= 10, points
    outcomes = {"absent": 0, "whole": 0}
    for name, nth in points:
        server, handle, _ = prepare()
        response = save_killed_at(sandbox, server, handle, name, nth, to=uri(target))
        if response is not None:
            assert response.get("result", {}).get("method") == "firstSave", (name, nth, response)
        assert tree(source) == original, (name, nth)
        if target.exists():
            now = tree(target)
            assert set(now) == expected and now["text.md"] == b"new text\n" * 1000, (name, nth, sorted(now))
            outcomes["whole"] += 1
        else:
            outcomes["absent"] += 1
        # A later save as to the same path removes what the dead server left, and succeeds.
        fresh = sandbox.start(args=("serve", "--no-journal"))
        again = fresh.call("document/open", {"uri": uri(source)})["document"]
        write(fresh, again, "text.md", "again\n")
        reply = fresh.save(again, to=uri(target), force=True)
        assert "error" not in reply.response, (name, nth, reply.response)
        wait_until(lambda: sorted(os.listdir(sandbox.docs)) == ["copy.textbundle", "notes.textbundle"],
                   what=f"nothing but the two packages after a kill at {name} #{nth}")
        assert tree(target)["text.md"] == b"again\n"
        fresh.shutdown()
    assert outcomes["absent"] > 0 and outcomes["whole"] > 0, outcomes


def test_a_save_as_holds_its_path_from_its_request_another_save_as_is_refused_and_an_open_waits(sandbox):
    """In request order: while a save as writes (strace slows each of its renameat2 by 0.3 s), a
    second document's save as to the same path is refused, naming the first, and an open of the
    path answers the first document once it is there."""
    package = make_bundle(sandbox.docs)
    second = make_bundle(sandbox.docs, "second.textbundle")
    target = sandbox.docs / "copy.textbundle"
    server = sandbox.start(args=("serve", "--no-journal"))
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    other = server.call("document/open", {"uri": uri(second)})["document"]
    write(server, handle, "text.md", "first\n")
    write(server, other, "text.md", "second\n")
    tracer = sandbox.trace(server, trace=("renameat2",), inject=("renameat2:delay_enter=300000",))
    try:
        saving = server.send_save(handle, to=uri(target))
        refusing = server.send_save(other, to=uri(target), force=True)
        opening = server.rpc.next_id
        server.rpc.next_id += 1
        server.rpc.send({"jsonrpc": "2.0", "id": opening, "method": "document/open", "params": {"uri": uri(target)}})
        answers: dict = {}
        while len(answers) < 3:
            message = server.rpc.read_message(60)
            if isinstance(message, dict) and "method" not in message:
                answers[message["id"]] = message
    finally:
        tracer.detach()
    refused = answers[refusing]["error"]
    assert refused["code"] == ALREADY_EXISTS and refused["data"] == {"uri": uri(target), "document": handle}, refused
    assert answers[saving]["result"]["uri"] == uri(target), answers[saving]
    opened = answers[opening]["result"]
    assert opened["document"] == handle and opened["uri"] == uri(target), opened
    assert tree(target)["text.md"] == b"first\n" and tree(second)["text.md"] == b"# Notes\n\nFirst line\n"

    # The same document's saves as to one path, pipelined: the second is a save in place there, and
    # each lets its hold go (an open of the path after them is answered, not kept waiting).
    elsewhere = sandbox.docs / "elsewhere.textbundle"
    write(server, handle, "text.md", "twice\n")
    ids = [server.send_save(handle, to=uri(elsewhere)) for _ in range(2)]
    answers = {}
    while len(answers) < 2:
        message = server.rpc.read_message(60)
        if isinstance(message, dict) and "method" not in message:
            answers[message["id"]] = message
    assert [answers[i].get("result", {}).get("method") for i in ids] == ["firstSave", "exchange"], answers
    assert server.call("document/open", {"uri": uri(elsewhere)})["document"] == handle
