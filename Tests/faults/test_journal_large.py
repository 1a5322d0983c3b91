"""Large changes and the journal's flush window (issue 34.7), end to end over stdio with the built
binary. The journal's writer batches records for `flushDelay` (200 ms); a 20 MB whole-text edit's
record (60 MB with its base and the text it replaced) took longer than that to reach the disk, so an
edit acknowledged 250-550 ms before a SIGKILL was lost. A change whose record is over 1 MiB is now
answered once it is written and flushed: killed the moment its answer arrives, it is recovered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from faultkit import uri
from test_journal import Editor, serve, sigkill

MB = 1 << 20


def big_text(tag: str, size: int) -> str:
    line = f"{tag} " + "x" * 70 + "\n"
    return line * (size // len(line))


def reopened_after_a_kill(sandbox, server, state: Path, params: dict):
    """SIGKILLs `server` the moment its last answer was read, then opens with `params` in a new
    server on the same state directory: that server and the open's answer."""
    sigkill(server)
    after = serve(sandbox, state)
    return after, after.call("document/open", params)


@pytest.mark.parametrize("change", ["replace_all", "first_keystroke"])
def test_a_large_change_killed_as_it_is_answered_is_recovered(sandbox, change):
    state = sandbox.root / "state"
    path = sandbox.docs / "big.txt"
    path.write_text(big_text("old", 20 * MB))
    server = serve(sandbox, state)
    editor = Editor(server, path)
    if change == "replace_all":
        # A formatter's whole-text replacement: 20 MB in, 20 MB out, 20 MB of base.
        editor.replace_all(big_text("new", 20 * MB))
    else:
        # The first change of a 20 MB document starts its journal with the 20 MB base.
        editor.insert(0, 0, "typed ")
    # Killed the moment the answer is read: before the fix the record was still in the writer's
    # batch (3 of 3 runs lost it), now it is on disk before the answer is sent.
    after, info = reopened_after_a_kill(sandbox, server, state, {"uri": uri(path)})
    offer = info.get("recovery")
    assert offer is not None, "the acknowledged change was lost: nothing offered"
    assert offer["version"] == editor.version and offer["fileMatchesBase"] is True and offer["cut"] is None, offer
    recovered = after.call("document/recover", {"document": info["document"]})
    text = after.call("document/read", {"document": info["document"]})["text"]
    assert len(text) == len(editor.text) and text == editor.text, recovered


def test_small_edits_of_a_large_document_are_answered_without_waiting_for_the_disk(sandbox):
    """Only the journal's start waits; the keystrokes after it go into the writer's batch as before
    (their answers come before their record is flushed: the journal holds them later)."""
    state = sandbox.root / "state"
    path = sandbox.docs / "big.txt"
    path.write_text(big_text("old", 4 * MB))
    server = serve(sandbox, state, flush_delay=60_000)
    editor = Editor(server, path)
    editor.insert(0, 0, "a")  # starts the journal: flushed before the answer
    journal = next((state / "journal").glob("*.journal"))
    size = journal.stat().st_size
    assert size > 4 * MB
    for index in range(20):
        editor.insert(0, 1 + index, "b")
    # With a one-minute flush delay, nothing of the twenty keystrokes is on disk yet: they were
    # answered without waiting for it.
    assert journal.stat().st_size == size
    sigkill(server)


def test_a_large_package_entry_killed_as_it_is_answered_is_recovered(sandbox):
    state = sandbox.root / "state"
    package = sandbox.docs / "big.textbundle"
    package.mkdir()
    (package / "text.md").write_text("saved\n")
    server = serve(sandbox, state)
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    body = big_text("entry", 20 * MB)
    version = server.call("document/writeEntry", {"document": handle, "path": "text.md", "text": body})["version"]
    after, info = reopened_after_a_kill(sandbox, server, state, {"uri": uri(package)})
    offer = info.get("recovery")
    assert offer is not None and offer["version"] == version, info
    after.call("document/recover", {"document": info["document"]})
    read = after.call("document/readEntry", {"document": info["document"], "path": "text.md"})
    assert read["text"] == body


def test_the_first_change_of_a_large_managed_store_killed_as_it_is_answered_is_recovered(sandbox):
    """The first change after an open starts the managed journal with a copy of the store (20 MB
    here): answered once that copy is on disk."""
    state = sandbox.root / "state"
    package = sandbox.docs / "big.docpackage"
    server = serve(sandbox, state)
    migrations = ["CREATE TABLE t(id INTEGER PRIMARY KEY, x)",
                  "INSERT INTO t(x) SELECT zeroblob(10000) FROM (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 2000) SELECT n FROM c)"]
    handle = server.call("document/create", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": migrations}})["document"]
    server.call("document/close", {"document": handle})
    handle = server.call("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": migrations}})["document"]
    done = server.call("store/execute", {"document": handle, "sql": "DELETE FROM t WHERE id = 7"})
    after, info = reopened_after_a_kill(sandbox, server, state, {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": migrations}})
    offer = info.get("recovery")
    assert offer is not None and offer["version"] == done["version"], info
    after.call("document/recover", {"document": info["document"]})
    rows = after.call("store/query", {"document": info["document"], "sql": "SELECT count(*), sum(id = 7) FROM t"})["rows"]
    assert rows == [[1999, 0]], rows
