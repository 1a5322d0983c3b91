"""The journal of packages' unsaved changes (protocol/README.md §13.7), end to end over stdio with the
built binary.

A package (`kind: "package"`, a `.textbundle`) or a managed document with unsaved changes has a
journal in the state directory, `<state>/journal/<XXH64 of the path>-<random>.pjournal`, exactly while
it has them: entries written and deleted, store transactions (their changesets), undos and redos are
appended as they happen; a save, revert or reload in sync
deletes it. A server killed with SIGKILL leaves it; the next `document/open` of the package offers it
(`recovery`), `document/recover` brings the entries and the undo history back, and
`document/discardRecovery` drops it. The tests read the journal's framing (the text journal's: magic
`DSJRNL1\\n`, records `crc32c u32 | length u32 | type u8 | payload`) to wait until a change is on disk,
never for a time.
"""

from __future__ import annotations

import base64
import os
import signal
import struct
from pathlib import Path

import pytest

from faultkit import uri, wait_until, write_file
from test_packages import make_bundle, tree

NO_RECOVERY = -32025
UNSAVED_CHANGES = -32023
CHANGED_ON_DISK = -32017

MAGIC = b"DSJRNL1\n"
HEADER, STATE, CHANGE = 1, 3, 4


def records(data: bytes) -> tuple[list[tuple[int, int, bytes]], int | None]:
    """(offset, type, payload) of each whole record (lengths only), and where a torn one starts."""
    if len(data) < len(MAGIC) and MAGIC.startswith(data):
        return [], 0  # just made: its magic not written yet
    assert data.startswith(MAGIC), data[:16]
    found, offset = [], len(MAGIC)
    while offset < len(data):
        if len(data) - offset < 9:
            return found, offset
        _, length, kind = struct.unpack_from("<IIB", data, offset)
        if len(data) - offset - 9 < length:
            return found, offset
        found.append((offset, kind, data[offset + 9: offset + 9 + length]))
        offset += 9 + length
    return found, None


def package_journals(state: Path) -> list[Path]:
    directory = state / "journal"
    if not directory.is_dir():
        return []
    return sorted(directory / n for n in os.listdir(directory) if n.endswith(".pjournal") and not n.startswith("."))


def last_version(data: bytes) -> int | None:
    versions = [struct.unpack_from("<q", payload)[0] for _, kind, payload in records(data)[0] if kind in (STATE, CHANGE)]
    return versions[-1] if versions else None


def wait_for_journal(state: Path, version: int) -> bytes:
    """Waits until the state directory holds one package journal whose whole records end at `version`."""
    found: list[bytes] = []

    def ready() -> bool:
        files = package_journals(state)
        if len(files) != 1:
            return False
        try:
            data = files[0].read_bytes()
        except FileNotFoundError:
            return False
        if records(data)[1] is None and last_version(data) == version:
            found[:] = [data]
            return True
        return False

    wait_until(ready, what=f"a package journal at version {version} in {state / 'journal'}")
    return found[0]


def wait_for_no_journal(state: Path) -> None:
    wait_until(lambda: package_journals(state) == [], what="the package journal's deletion")


def serve(sandbox, state: Path, **options):
    initialization = {"initializationOptions": options} if options else {}
    return sandbox.start(args=("serve", "--state-dir", str(state)), initialization=initialization)


def kill(server) -> None:
    os.kill(server.pid, signal.SIGKILL)
    server.rpc.process.wait(timeout=30)


def write(server, handle: str, path: str, data: bytes | str, label: str | None = None) -> int:
    params = {"document": handle, "path": path}
    params.update({"text": data} if isinstance(data, str) else {"base64": base64.b64encode(data).decode()})
    if label:
        params["label"] = label
    return server.call("document/writeEntry", params)["version"]


def entry(server, handle: str, path: str) -> str:
    return server.call("document/readEntry", {"document": handle, "path": path})["text"]


def edit_and_kill(sandbox, state: Path, package: Path) -> None:
    """A server that writes text.md, adds assets/new.bin, deletes info.json (versions 2 to 4), is
    killed once the journal holds the last, and leaves the package on disk untouched."""
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "text.md", "# Notes\n\nChanged\n", label="Typing")
    write(server, handle, "assets/new.bin", b"\x00\xff\x10", label="Add image")
    assert server.call("document/deleteEntry", {"document": handle, "path": "info.json", "label": "Delete info"}) == {"version": 4}
    wait_for_journal(state, 4)
    kill(server)


def test_a_killed_servers_package_changes_are_offered_recovered_with_their_undo_history_and_saved(sandbox):
    package = make_bundle(sandbox.docs)
    before = tree(package)
    state = sandbox.root / "state"
    edit_and_kill(sandbox, state, package)
    assert tree(package) == before, "nothing reached the package itself"
    assert len(package_journals(state)) == 1

    server = serve(sandbox, state)
    listed = server.call("workspace/recoverable", {})["journals"]
    assert [(j["uri"], j["edits"], j["version"], j["open"]) for j in listed] == [(uri(package), 3, 4, False)], listed
    info = server.call("document/open", {"uri": uri(package)})
    handle = info["document"]
    assert info["hasUnsavedChanges"] is False and info["version"] == 1
    offer = info["recovery"]
    assert (offer["edits"], offer["version"], offer["fileMatchesBase"], offer["cut"]) == (3, 4, True, None), offer
    assert server.call("workspace/recoverable", {})["journals"][0]["open"] is True
    # Nothing is applied before the client asks.
    assert entry(server, handle, "text.md") == "# Notes\n\nFirst line\n"

    reply = server.request("document/recover", {"document": handle})
    assert reply.result == {
        "version": 4, "inConflict": False, "hasUnsavedChanges": True,
        "entries": [{"path": "assets/new.bin", "change": "written"}, {"path": "info.json", "change": "deleted"},
                    {"path": "text.md", "change": "written"}],
    }, reply.result
    assert [n["params"]["reason"] for n in reply.notifications if n["method"] == "document/stateChanged"] == ["recovered"]
    assert entry(server, handle, "text.md") == "# Notes\n\nChanged\n"
    state_now = server.call("document/state", {"document": handle})
    assert state_now["undoLabel"] == "Delete info" and state_now["hasUnsavedChanges"] is True
    assert "info.json" not in [e["path"] for e in state_now["entries"]]

    # Undo goes back step by step to the package on disk, and no further; redo comes back.
    assert server.call("document/undo", {"document": handle})["entries"] == [{"path": "info.json", "change": "written"}]
    assert server.call("document/undo", {"document": handle})["entries"] == [{"path": "assets/new.bin", "change": "deleted"}]
    assert server.call("document/undo", {"document": handle})["entries"] == [{"path": "text.md", "change": "written"}]
    clean = server.call("document/state", {"document": handle})
    assert clean["hasUnsavedChanges"] is False and clean["canUndo"] is False and clean["version"] == 7
    wait_for_no_journal(state)  # back in sync: nothing to keep
    for _ in range(3):
        server.call("document/redo", {"document": handle})
    wait_for_journal(state, 10)

    # The recovered changes save like any others, and the journal goes.
    assert server.save(handle).result["version"] == 10
    wait_for_no_journal(state)
    assert tree(package) == {"assets": None, "assets/pixel.png": before["assets/pixel.png"],
                             "assets/new.bin": b"\x00\xff\x10", "text.md": b"# Notes\n\nChanged\n"}


def test_a_recovered_journal_is_appended_to_and_survives_a_second_kill(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    edit_and_kill(sandbox, state, package)
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    server.call("document/recover", {"document": handle})
    assert write(server, handle, "later.txt", "after the recovery\n") == 5
    wait_for_journal(state, 5)
    kill(server)

    third = serve(sandbox, state)
    info = third.call("document/open", {"uri": uri(package)})
    assert (info["recovery"]["edits"], info["recovery"]["version"]) == (4, 5), info["recovery"]
    third.call("document/recover", {"document": info["document"]})
    assert entry(third, info["document"], "later.txt") == "after the recovery\n"
    assert entry(third, info["document"], "text.md") == "# Notes\n\nChanged\n"
    recovered = third.call("document/state", {"document": info["document"]})
    assert recovered["canUndo"] is True and "undoLabel" not in recovered  # its step had no label


def test_a_package_changed_on_disk_after_the_kill_recovers_in_conflict(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    edit_and_kill(sandbox, state, package)
    write_file(package / "theirs.txt", "another program's\n")

    server = serve(sandbox, state)
    info = server.call("document/open", {"uri": uri(package)})
    handle = info["document"]
    assert info["recovery"]["fileMatchesBase"] is False
    result = server.call("document/recover", {"document": handle})
    assert result["inConflict"] is True and result["hasUnsavedChanges"] is True
    assert "inConflict" in server.call("document/state", {"document": handle})["state"]
    refused = server.save(handle)
    assert refused.error is not None and refused.error["code"] == CHANGED_ON_DISK, refused
    assert tree(package)["text.md"] == b"# Notes\n\nFirst line\n"
    # Mine: the recovered entries over their tree (their new entry is kept: it was on disk).
    server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert "result" in server.save(handle).response
    saved = tree(package)
    assert saved["text.md"] == b"# Notes\n\nChanged\n" and saved["theirs.txt"] == b"another program's\n"
    assert "info.json" not in saved
    wait_for_no_journal(state)


def test_saves_reverts_closes_and_undo_to_the_clean_point_delete_the_journal_and_a_clean_package_has_none(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    assert package_journals(state) == []
    write(server, handle, "text.md", "one\n")
    wait_for_journal(state, 2)
    server.call("document/undo", {"document": handle})
    wait_for_no_journal(state)
    server.call("document/redo", {"document": handle})
    wait_for_journal(state, 4)
    server.call("document/revert", {"document": handle})
    wait_for_no_journal(state)
    write(server, handle, "text.md", "two\n")
    wait_for_journal(state, 6)
    server.save(handle)
    wait_for_no_journal(state)
    write(server, handle, "text.md", "three\n")
    wait_for_journal(state, 7)
    server.call("document/close", {"document": handle, "save": "never"})
    wait_for_no_journal(state)
    assert tree(package)["text.md"] == b"two\n"


def test_undo_past_a_save_restarts_the_journal_from_the_entries_and_recovers_the_same(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    write(server, handle, "info.json", "{}\n", label="First")
    write(server, handle, "text.md", "saved\n", label="Save me")
    server.save(handle)
    wait_for_no_journal(state)
    # Before the save's point: the journal cannot replay that undo from the disk, so it starts from
    # every entry (a state record).
    server.call("document/undo", {"document": handle})
    data = wait_for_journal(state, 4)
    assert [kind for _, kind, _ in records(data)[0]] == [HEADER, STATE]
    # And once more: a step from before the journal began, so it starts again.
    server.call("document/undo", {"document": handle})
    data = wait_for_journal(state, 5)
    assert [kind for _, kind, _ in records(data)[0]] == [HEADER, STATE]
    write(server, handle, "extra.txt", "x\n")
    wait_for_journal(state, 6)
    kill(server)

    again = serve(sandbox, state)
    info = again.call("document/open", {"uri": uri(package)})
    assert info["recovery"]["version"] == 6 and info["recovery"]["fileMatchesBase"] is True
    result = again.call("document/recover", {"document": info["document"]})
    assert result["entries"] == [{"path": "extra.txt", "change": "written"}, {"path": "info.json", "change": "written"},
                                 {"path": "text.md", "change": "written"}]
    assert entry(again, info["document"], "info.json") == '{"version": 2}\n'
    assert entry(again, info["document"], "text.md") == "# Notes\n\nFirst line\n"
    assert entry(again, info["document"], "extra.txt") == "x\n"


def test_a_torn_tail_recovers_up_to_the_record_before_and_says_what_was_cut(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    edit_and_kill(sandbox, state, package)
    path = package_journals(state)[0]
    data = path.read_bytes()
    last_offset = records(data)[0][-1][0]
    path.write_bytes(data[: last_offset + 5])  # inside the last record (the deletion)

    server = serve(sandbox, state)
    info = server.call("document/open", {"uri": uri(package)})
    offer = info["recovery"]
    assert (offer["edits"], offer["version"]) == (2, 3), offer
    assert offer["cut"] == {"offset": last_offset, "bytes": 5, "reason": "torn"}
    server.call("document/recover", {"document": info["document"]})
    assert entry(server, info["document"], "info.json") == '{"version": 2}\n'
    assert entry(server, info["document"], "text.md") == "# Notes\n\nChanged\n"


def test_discard_recovery_and_the_errors_of_recover(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    edit_and_kill(sandbox, state, package)
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    # Unsaved changes of its own: recovering would replace them.
    write(server, handle, "mine.txt", "mine\n")
    refused = server.request("document/recover", {"document": handle})
    assert refused.error["code"] == UNSAVED_CHANGES, refused
    server.call("document/undo", {"document": handle})
    assert server.call("document/discardRecovery", {"document": handle}) is None
    assert package_journals(state) == []
    missing = server.request("document/recover", {"document": handle})
    assert missing.error["code"] == NO_RECOVERY and missing.error["data"]["document"] == handle, missing.error
    assert server.request("document/discardRecovery", {"document": handle}).error["code"] == NO_RECOVERY
    assert server.call("workspace/recoverable", {})["journals"] == []


def test_hot_exit_keeps_the_journal_and_hot_exit_false_deletes_it(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    for hot_exit, kept in ((True, True), (False, False)):
        server = serve(sandbox, state, hotExit=hot_exit)
        info = server.call("document/open", {"uri": uri(package)})
        if info.get("recovery"):
            server.call("document/discardRecovery", {"document": info["document"]})
        write(server, info["document"], "text.md", f"hot exit {hot_exit}\n")
        server.call("shutdown", None)
        assert (len(package_journals(state)) == 1) is kept, (hot_exit, package_journals(state))
        server.rpc.notify("exit")
        server.rpc.process.wait(timeout=30)
    assert tree(package)["text.md"] == b"# Notes\n\nFirst line\n"


def test_a_live_servers_journal_is_edited_elsewhere(sandbox):
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    first = serve(sandbox, state)
    handle = first.call("document/open", {"uri": uri(package)})["document"]
    write(first, handle, "text.md", "first's\n")
    wait_for_journal(state, 2)
    second = serve(sandbox, state)
    info = second.call("document/open", {"uri": uri(package)})
    assert info.get("editedElsewhere") is True and "recovery" not in info, info


MIGRATIONS = ["CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT NOT NULL)"]


def rows(server, handle: str) -> list:
    return server.call("store/query", {"document": handle, "sql": "SELECT id, title FROM notes ORDER BY id"})["rows"]


def execute(server, handle: str, sql: str, label: str | None = None) -> int:
    params = {"document": handle, "sql": sql}
    if label:
        params["label"] = label
    return server.call("store/execute", params)["version"]


def open_managed(server, package: Path, migrations=MIGRATIONS) -> dict:
    return server.call("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": migrations}})


def make_managed(sandbox, state: Path) -> Path:
    """A managed document with one row, saved (by a server of its own, shut down)."""
    package = sandbox.docs / "store.docpackage"
    maker = serve(sandbox, state)
    created = maker.call("document/create", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": MIGRATIONS}})
    execute(maker, created["document"], "INSERT INTO notes VALUES (1, 'saved')")
    assert maker.call("document/close", {"document": created["document"]}) == {"saved": True}
    return package


def test_a_managed_documents_transactions_are_recovered_with_their_undo_history(sandbox):
    state = sandbox.root / "state"
    package = make_managed(sandbox, state)
    server = serve(sandbox, state)
    handle = open_managed(server, package)["document"]
    execute(server, handle, "INSERT INTO notes VALUES (2, 'two')", label="Add two")
    execute(server, handle, "UPDATE notes SET title = 'one' WHERE id = 1", label="Rename")
    execute(server, handle, "UPDATE notes SET title = 'none' WHERE id = 99")  # changes nothing: a version only
    version = execute(server, handle, "DELETE FROM notes WHERE id = 2", label="Delete two")
    wait_for_journal(state, version)
    seen = rows(server, handle)
    assert seen == [[1, "one"]]
    kill(server)

    again = serve(sandbox, state)
    info = open_managed(again, package)
    offer = info["recovery"]
    assert (offer["edits"], offer["version"], offer["fileMatchesBase"]) == (4, version, True), offer
    assert rows(again, info["document"]) == [[1, "saved"]]
    result = again.call("document/recover", {"document": info["document"]})
    assert result["version"] == version and result["hasUnsavedChanges"] is True and result["inConflict"] is False
    assert rows(again, info["document"]) == seen
    state_now = again.call("document/state", {"document": info["document"]})
    assert state_now["undoLabel"] == "Delete two"
    # Undo goes back through the dead session's transactions to the store on disk.
    assert again.call("document/undo", {"document": info["document"]})["store"] is True
    assert rows(again, info["document"]) == [[1, "one"], [2, "two"]]
    again.call("document/undo", {"document": info["document"]})
    again.call("document/undo", {"document": info["document"]})
    assert rows(again, info["document"]) == [[1, "saved"]]
    assert again.call("document/state", {"document": info["document"]})["hasUnsavedChanges"] is False
    wait_until(lambda: package_journals(state) == [], what="the journal's deletion at the clean point")
    again.call("document/redo", {"document": info["document"]})
    again.call("document/redo", {"document": info["document"]})
    again.call("document/redo", {"document": info["document"]})
    assert "result" in again.save(info["document"]).response
    wait_for_no_journal(state)
    fresh = serve(sandbox, state)
    assert rows(fresh, open_managed(fresh, package)["document"]) == seen


def test_a_managed_journal_started_again_holds_a_copy_of_the_store(sandbox):
    """An undo past a save, and an open whose migration left the store unsaved from the start: the
    journal starts with a state record holding the store; steps after it are replayed onto it."""
    state = sandbox.root / "state"
    package = make_managed(sandbox, state)
    server = serve(sandbox, state)
    handle = open_managed(server, package)["document"]
    execute(server, handle, "INSERT INTO notes VALUES (2, 'two')", label="Add two")
    server.save(handle)
    wait_for_no_journal(state)
    server.call("document/undo", {"document": handle})
    data = wait_for_journal(state, 3)
    assert [kind for _, kind, _ in records(data)[0]] == [HEADER, STATE]
    version = execute(server, handle, "INSERT INTO notes VALUES (3, 'three')", label="Add three")
    wait_for_journal(state, version)
    kill(server)

    again = serve(sandbox, state)
    info = open_managed(again, package)
    assert info["recovery"]["fileMatchesBase"] is True, info["recovery"]
    again.call("document/recover", {"document": info["document"]})
    assert rows(again, info["document"]) == [[1, "saved"], [3, "three"]]
    again.call("document/undo", {"document": info["document"]})
    assert rows(again, info["document"]) == [[1, "saved"]]
    again.call("document/close", {"document": info["document"], "save": "never"})
    again.call("shutdown", None)

    # A migration at the open: unsaved from the start, so the first step's journal copies the store.
    migrations = MIGRATIONS + ["ALTER TABLE notes ADD COLUMN body TEXT"]
    third = serve(sandbox, state)
    handle = open_managed(third, package, migrations)["document"]
    assert third.call("document/state", {"document": handle})["hasUnsavedChanges"] is True
    version = execute(third, handle, "INSERT INTO notes VALUES (4, 'four', 'body')")
    data = wait_for_journal(state, version)
    assert [kind for _, kind, _ in records(data)[0]] == [HEADER, STATE]
    kill(third)
    fourth = serve(sandbox, state)
    info = open_managed(fourth, package, migrations)
    assert info["recovery"]["fileMatchesBase"] is True
    fourth.call("document/recover", {"document": info["document"]})
    assert fourth.call("store/query", {"document": info["document"], "sql": "SELECT id, title, body FROM notes ORDER BY id"})["rows"] == [
        [1, "saved", None], [2, "two", None], [4, "four", "body"]]  # row 2: saved before the undo that was closed unsaved
    assert info["store"]["userVersion"] == 2



def snapshot(server, handle: str) -> dict:
    """What a user sees of a package: every entry with its bytes, and its state."""
    info = server.call("document/state", {"document": handle})
    files = {}
    for item in info["entries"]:
        if item["kind"] == "file":
            read = server.call("document/readEntry", {"document": handle, "path": item["path"], "as": "base64"})
            files[item["path"]] = base64.b64decode(read["base64"])
    directories = sorted(item["path"] for item in info["entries"] if item["kind"] == "directory")
    return {"files": files, "directories": directories, "unsaved": info["hasUnsavedChanges"], "version": info["version"]}


@pytest.mark.parametrize("seed", range(int(os.environ.get("DOCSESSION_PACKAGE_JOURNAL_TRIALS", "6"))))
def test_random_changes_saves_and_reverts_then_a_kill_recover_what_the_user_saw(sandbox, seed):
    """Writes, deletions, undos, redos, saves and reverts at random; the server is killed once the
    journal holds the last change; the next server's recovery shows every entry as the killed one
    did, and undoing all of it leads back to the package on disk."""
    import random
    rng = random.Random(seed)
    package = make_bundle(sandbox.docs)
    (package / "empty").mkdir()
    state = sandbox.root / "state"
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    names = ["text.md", "info.json", "assets/pixel.png", "assets/new.bin", "deep/a/b.txt", "c.txt"]
    for step in range(rng.randrange(5, 40)):
        roll = rng.random()
        if roll < 0.45:
            write(server, handle, rng.choice(names), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64))),
                  label=f"step {step}")
        elif roll < 0.6:
            present = [e["path"] for e in server.call("document/state", {"document": handle})["entries"] if e["kind"] == "file"]
            if present:
                server.call("document/deleteEntry", {"document": handle, "path": rng.choice(present)})
        elif roll < 0.75:
            server.call("document/undo", {"document": handle})
        elif roll < 0.87:
            server.call("document/redo", {"document": handle})
        elif roll < 0.95:
            server.save(handle)
        else:
            server.call("document/revert", {"document": handle})
    if rng.random() < 0.3 and (package / "empty").is_dir():
        empty = [e["path"] for e in server.call("document/state", {"document": handle})["entries"] if e["path"] == "empty"]
        if empty:
            server.call("document/deleteEntry", {"document": handle, "path": "empty"})
    seen = snapshot(server, handle)
    if not seen["unsaved"]:
        write(server, handle, "last.txt", "so that something is unsaved\n")
        seen = snapshot(server, handle)
    wait_for_journal(state, seen["version"])
    kill(server)

    on_disk = tree(package)
    again = serve(sandbox, state)
    info = again.call("document/open", {"uri": uri(package)})
    assert info["recovery"]["version"] == seen["version"] and info["recovery"]["fileMatchesBase"] is True, info["recovery"]
    again.call("document/recover", {"document": info["document"]})
    recovered = snapshot(again, info["document"])
    assert recovered["files"] == seen["files"] and recovered["directories"] == seen["directories"]
    assert recovered["unsaved"] is True and recovered["version"] == seen["version"]
    # Undo all the way: back at the package on disk (when the journal started at it), or at the
    # entries the journal started from.
    for _ in range(200):
        if not again.call("document/state", {"document": info["document"]})["canUndo"]:
            break
        again.call("document/undo", {"document": info["document"]})
    floor = snapshot(again, info["document"])
    disk_files = {path: data for path, data in on_disk.items() if data is not None}
    if not floor["unsaved"]:
        assert floor["files"] == disk_files


def test_a_journal_grown_past_its_bound_starts_again_from_the_entries_and_recovers_the_same(sandbox):
    """Entries rewritten again and again: past 32 MiB plus twice the unsaved bytes, the journal starts
    again with a state record holding the entries as they are, and stays small."""
    package = make_bundle(sandbox.docs)
    state = sandbox.root / "state"
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    size = 6 << 20
    restarted_at = None
    for round_number in range(1, 21):
        version = write(server, handle, "big.txt", chr(ord("a") + round_number) * size)
        data = wait_for_journal(state, version)
        kinds = [kind for _, kind, _ in records(data)[0]]
        if kinds[:2] == [HEADER, STATE]:
            restarted_at = round_number
            assert len(data) < 2 * size, len(data)
            break
        assert kinds == [HEADER] + [CHANGE] * round_number
    assert restarted_at is not None and 6 <= restarted_at <= 10, restarted_at
    version = write(server, handle, "small.txt", "after\n")
    wait_for_journal(state, version)
    kill(server)

    again = serve(sandbox, state)
    info = again.call("document/open", {"uri": uri(package)})
    assert info["recovery"]["version"] == version
    again.call("document/recover", {"document": info["document"]})
    assert entry(again, info["document"], "big.txt") == chr(ord("a") + restarted_at) * size
    assert entry(again, info["document"], "small.txt") == "after\n"


# -- Issue 34.4: a managed save killed between its swap and the journal's restart -------------------
#
# The save swaps the new tree in; the journal starts again (or goes) only after the save answers.
# A kill in between leaves the old journal, whose base is the old tree, beside the new store. Its
# transactions are changesets: replayed onto the saved store, "insert 10, insert 1, delete 10" ran
# "insert 10" (fits), then stopped silently at "insert 1" (the row is there): row 10 came back, and
# the offer said `cut: null` and the journal's full version. A journal now carries its store and
# replays onto it, or not at all; the offer says exactly what a recovery brings back.


def make_empty_managed(sandbox) -> Path:
    """A managed document with an empty `notes` table, saved, kept aside as a template."""
    template = sandbox.root / "template" / "store.docpackage"
    template.parent.mkdir()
    maker = serve(sandbox, sandbox.root / "maker-state")
    created = maker.call("document/create", {"uri": uri(template), "kind": "managed", "storeOptions": {"migrations": MIGRATIONS}})
    maker.call("document/close", {"document": created["document"]})
    maker.shutdown()
    return template


def published_notes(package: Path) -> list:
    import sqlite3
    with sqlite3.connect(f"file:{package / 'StoreContent' / 'persistentStore'}?mode=ro", uri=True) as connection:
        return [list(row) for row in connection.execute("SELECT id, title FROM notes ORDER BY id")]


class ManagedSaveRun:
    """A fresh copy of the template and a fresh state directory per run: a server opens the copy,
    runs `statements` (each version's rows kept: the states the user had), waits until the journal
    holds the last, and is left to save."""

    def __init__(self, sandbox, statements: list[str]):
        self.sandbox = sandbox
        self.template = make_empty_managed(sandbox)
        self.package = sandbox.docs / "store.docpackage"
        self.statements = statements
        self.runs = 0
        self.states: dict[int, list] = {}
        self.state = sandbox.root / "state-0"

    def prepare(self):
        import shutil
        self.runs += 1
        self.state = self.sandbox.root / f"state-{self.runs}"
        if self.package.exists():
            shutil.rmtree(self.package)
        shutil.copytree(self.template, self.package)
        server = serve(self.sandbox, self.state)
        info = open_managed(server, self.package)
        handle = info["document"]
        self.states = {info["version"]: rows(server, handle)}
        version = info["version"]
        for sql in self.statements:
            version = execute(server, handle, sql)
            self.states[version] = rows(server, handle)
        wait_for_journal(self.state, version)
        return server, handle, self.package

    @property
    def last(self) -> int:
        return max(self.states)

    def check_next_open(self, where) -> tuple[str, dict | None]:
        """The next server's open and recovery: the store on disk, the recovered store (at the
        offer's version) and the store saved after `mine` are each a state the user had. Answers
        which tree the kill left ("old" or "new") and the offer."""
        disk = published_notes(self.package)
        assert disk in (self.states[min(self.states)], self.states[self.last]), (where, disk, self.states)
        outcome = "new" if disk == self.states[self.last] and disk != self.states[min(self.states)] else "old"
        server = serve(self.sandbox, self.state)
        info = open_managed(server, self.package)
        handle = info["document"]
        assert rows(server, handle) == disk, where
        offer = info.get("recovery")
        if offer is not None:
            assert offer["version"] in self.states, (where, offer, self.states)
            if offer["cut"] is not None:
                assert offer["cut"]["reason"] in ("torn", "checksum", "unreadable", "notOnBase"), (where, offer)
            result = server.call("document/recover", {"document": handle})
            recovered = rows(server, handle)
            # What the offer said: the store at its version, not some other.
            assert recovered == self.states[offer["version"]], (where, offer, recovered, self.states)
            assert result["inConflict"] is (not offer["fileMatchesBase"]), (where, offer, result)
            if result["inConflict"]:
                server.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
            saved = server.save(handle)
            assert "result" in saved.response, (where, saved.response)
            assert published_notes(self.package) == recovered, where
        server.shutdown()
        return outcome, offer


def test_a_managed_save_killed_before_its_answer_brings_no_deleted_row_back(sandbox):
    """Issue 34.4, the red team's case: insert row 10, insert row 1, delete row 10, save, SIGKILL
    once the save has swapped its tree in and before it answers (strace, at the save thread's first
    system call after the swap: the journal has not started again). The next open offers the old
    journal (its base is the old tree); recovering it gives the store at the offer's version, row 10
    stays deleted, and `mine` saves that."""
    from test_packages import discover_save_calls, save_killed_at
    run = ManagedSaveRun(sandbox, ["INSERT INTO notes VALUES (10, 'ten')", "INSERT INTO notes VALUES (1, 'one')",
                                   "DELETE FROM notes WHERE id = 10"])
    points = discover_save_calls(sandbox, run.prepare)
    # The swap: the save thread's last rename (an entry copied into the staged tree is renamed too).
    swap = max(index for index, (name, _) in enumerate(points) if name in ("renameat2", "renameat"))
    name, nth = points[swap + 1]
    server, handle, package = run.prepare()
    assert save_killed_at(sandbox, server, handle, name, nth) is None, (name, nth)
    assert published_notes(package) == [[1, "one"]]  # the save's store is on disk
    journals = package_journals(run.state)
    assert len(journals) == 1 and last_version(journals[0].read_bytes()) == run.last  # the old journal stayed
    # Listed with its three changes (its state record, the base's, is none).
    lister = serve(sandbox, run.state)
    listed = lister.call("workspace/recoverable", {})["journals"]
    assert [(item["edits"], item["version"], item["open"]) for item in listed] == [(3, run.last, False)], listed
    lister.shutdown()
    outcome, offer = run.check_next_open((name, nth))
    assert outcome == "new" and offer is not None, (outcome, offer)
    # The journal carries its store: the whole of it comes back, in conflict with the saved tree.
    assert (offer["fileMatchesBase"], offer["version"], offer["cut"]) == (False, run.last, None), offer


def test_random_kills_during_a_managed_save_leave_a_state_the_user_had(sandbox):
    """20 SIGKILLs at system calls of a managed save chosen at random (seeded), after the red team's
    three statements and random inserts, updates and deletes of other rows: every time the store on
    disk is the old or the saved one, and what the next open offers and recovers (and `mine` saves)
    is the store at the offer's version."""
    import random
    from test_packages import discover_save_calls, save_killed_at
    rng = random.Random(int(os.environ.get("DOCSESSION_RECOVERY_SEED", "344")))
    statements = ["INSERT INTO notes VALUES (10, 'ten')", "INSERT INTO notes VALUES (1, 'one')", "DELETE FROM notes WHERE id = 10"]
    for _ in range(6):
        key = rng.randrange(2, 6)
        statements.append(rng.choice([
            f"INSERT OR IGNORE INTO notes VALUES ({key}, 'n{key}')",
            f"UPDATE notes SET title = title || '+' WHERE id = {key}",
            f"DELETE FROM notes WHERE id = {key}",
        ]))
    run = ManagedSaveRun(sandbox, statements)
    points = discover_save_calls(sandbox, run.prepare)
    chosen = rng.sample(points, min(20, len(points)))
    outcomes = {"old": 0, "new": 0}
    wrong = []
    for name, nth in chosen:
        server, handle, _ = run.prepare()
        response = save_killed_at(sandbox, server, handle, name, nth)
        if response is not None:  # this save made fewer such calls: it ran to the end
            assert "result" in response, (name, nth, response)
        try:
            outcome, _ = run.check_next_open((name, nth))
        except AssertionError as failure:  # counted, so that the message says how many of the 20
            wrong.append(str(failure).splitlines()[0][:400])
            continue
        outcomes[outcome] += 1
    assert not wrong, (f"{len(wrong)} of {len(chosen)} kills left no state the user had", statements, wrong)
    assert outcomes["old"] > 0 and outcomes["new"] > 0, (outcomes, chosen)


def package_save_preparer(sandbox, template: Path, package: Path, changes: list[tuple[str, str, bytes | None]]):
    """The `prepare` of a kill test of a package's save (test_packages.discover_save_calls,
    save_killed_at): each call copies `template` to `package` anew, starts a server on a state
    directory of its own, makes `changes` (("write", path, bytes) or ("delete", path, None), a
    deletion only of an entry there) and waits until the journal holds the last. Answers it, the
    states seen by version (`states`, filled by the last call) and where the last call's state
    directory is (`where["state"]`)."""
    import shutil
    runs = [0]
    states: dict[int, dict] = {}
    where = {"state": sandbox.root / "state-0"}

    def prepare():
        runs[0] += 1
        where["state"] = state = sandbox.root / f"state-{runs[0]}"
        if package.exists():
            shutil.rmtree(package)
        shutil.copytree(template, package)
        server = serve(sandbox, state)
        handle = server.call("document/open", {"uri": uri(package)})["document"]
        states.clear()
        seen = snapshot(server, handle)
        states[seen["version"]] = seen["files"]
        for kind, path, data in changes:
            if kind == "write":
                write(server, handle, path, data)
            elif path in seen["files"]:
                server.call("document/deleteEntry", {"document": handle, "path": path})
            seen = snapshot(server, handle)
            states[seen["version"]] = seen["files"]
        wait_for_journal(state, seen["version"])
        return server, handle, package

    return prepare, states, where


def test_a_package_save_killed_before_its_answer_recovers_no_mix_of_two_states(sandbox):
    """The same kill for a plain package: text.md written, info.json deleted, text.md written
    again, saved, SIGKILL after the swap. The old journal's base is the old tree; replayed onto
    the saved one, its first write fitted and the deletion did not (info.json was gone): the
    offer held text.md's first bytes without info.json, a state the user never had, and `mine`
    would have saved it over the newer text. Off its base a journal replays whole or not at all:
    here nothing (cut at its first change, reason notOnBase), and the package stays as saved."""
    from test_packages import discover_save_calls, save_killed_at
    template = make_bundle(sandbox.root / "template")
    package = sandbox.docs / template.name
    changes = [("write", "text.md", b"first\n"), ("delete", "info.json", None), ("write", "text.md", b"second\n")]
    prepare, states, where = package_save_preparer(sandbox, template, package, changes)
    points = discover_save_calls(sandbox, prepare)
    # The swap: the save thread's last rename (an entry copied into the staged tree is renamed too).
    swap = max(index for index, (name, _) in enumerate(points) if name in ("renameat2", "renameat"))
    name, nth = points[swap + 1]
    server, handle, _ = prepare()
    assert save_killed_at(sandbox, server, handle, name, nth) is None, (name, nth)
    last = max(states)
    disk = {path: data for path, data in tree(package).items() if data is not None}
    assert disk == states[last], disk  # the save's tree is on disk
    assert len(package_journals(where["state"])) == 1

    again = serve(sandbox, where["state"])
    info = again.call("document/open", {"uri": uri(package)})
    handle = info["document"]
    offer = info["recovery"]
    assert offer["fileMatchesBase"] is False and offer["edits"] == 0, offer
    assert offer["cut"] is not None and offer["cut"]["reason"] == "notOnBase", offer
    result = again.call("document/recover", {"document": handle})
    recovered = snapshot(again, handle)["files"]
    assert recovered == disk, recovered  # nothing of the journal: the package as saved
    assert result["inConflict"] is True
    again.call("document/resolveConflict", {"document": handle, "resolution": "mine"})
    assert "result" in again.save(handle).response
    assert {path: data for path, data in tree(package).items() if data is not None} == states[last]


def test_random_kills_during_a_package_save_leave_a_state_the_user_had(sandbox):
    """20 SIGKILLs at system calls of a plain package's save chosen at random (seeded), after
    writes and deletions: the package on disk is the old or the saved one, and the next open's
    offer recovers the entries at its version (or, when it replayed nothing, the package as on
    disk), which `mine` saves."""
    import random
    from test_packages import discover_save_calls, save_killed_at
    rng = random.Random(int(os.environ.get("DOCSESSION_RECOVERY_SEED", "344")))
    template = make_bundle(sandbox.root / "template")
    package = sandbox.docs / template.name
    changes = [("write", "text.md", b"first\n"), ("delete", "info.json", None), ("write", "text.md", b"second\n")]
    for index in range(4):
        changes.append(rng.choice([("write", rng.choice(["a.txt", "assets/b.bin", "text.md"]), bytes([index]) * rng.randrange(1, 9)),
                                   ("delete", "assets/pixel.png", None)]))
    prepare, states, where = package_save_preparer(sandbox, template, package, changes)
    points = discover_save_calls(sandbox, prepare)
    chosen = rng.sample(points, min(20, len(points)))
    first, outcomes, wrong = min(states), {"old": 0, "new": 0}, []
    for name, nth in chosen:
        server, handle, _ = prepare()
        response = save_killed_at(sandbox, server, handle, name, nth)
        if response is not None:
            assert "result" in response, (name, nth, response)
        last = max(states)
        disk = {path: data for path, data in tree(package).items() if data is not None}
        try:
            assert disk in (states[first], states[last]), ((name, nth), sorted(disk))
            outcomes["new" if disk == states[last] else "old"] += 1
            again = serve(sandbox, where["state"])
            info = again.call("document/open", {"uri": uri(package)})
            offer = info.get("recovery")
            if offer is not None:
                again.call("document/recover", {"document": info["document"]})
                recovered = snapshot(again, info["document"])["files"]
                expected = disk if offer["edits"] == 0 else states[offer["version"]]
                assert recovered == expected, ((name, nth), offer, sorted(recovered), sorted(expected))
                if not offer["fileMatchesBase"]:
                    again.call("document/resolveConflict", {"document": info["document"], "resolution": "mine"})
                assert "result" in again.save(info["document"]).response
                assert {path: data for path, data in tree(package).items() if data is not None} == recovered, (name, nth)
            again.shutdown()
        except AssertionError as failure:
            wrong.append(str(failure).splitlines()[0][:400])
    assert not wrong, (f"{len(wrong)} of {len(chosen)} kills left no state the user had", changes, wrong)
    assert outcomes["old"] > 0 and outcomes["new"] > 0, (outcomes, chosen)
