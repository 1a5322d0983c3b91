"""Handoff (issue 17.6, NSUserActivity's role), end to end over stdio with the built binary.

`document/setClientState` keeps what a client wants back per document; `session/snapshot` writes the
open documents, their client states and a copy of each unsaved document's journal under
`<state dir>/sessions/<token>/`; `session/restore` in another server opens each file again, recovers
the unsaved work (text, version, undo history; a conflict when the file changed since), answers each
client state, and removes the snapshot; `session/discardSnapshot` removes one unrestored.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from faultkit import uri, wait_until, write_file
from test_journal import ORIGINAL, Editor, journal_files, serve, sigkill, span, wait_for_journal

UNKNOWN_DOCUMENT = -32011
INVALID_PARAMS = -32602
NO_SNAPSHOT = -32026
HANDOFF_UNAVAILABLE = -32027


def sessions(state: Path) -> Path:
    return state / "sessions"


def snapshot(server, expect_documents: int) -> tuple[str, list[dict]]:
    result = server.call("session/snapshot", {})
    assert set(result) == {"snapshot", "documents"}, result
    token = result["snapshot"]
    assert len(token) == 32 and all(c in "0123456789abcdef" for c in token), token
    assert len(result["documents"]) == expect_documents, result
    return token, result["documents"]


def test_a_snapshot_restored_in_another_server_brings_back_unsaved_work_undo_and_client_states(sandbox):
    state = sandbox.root / "state"
    edited = write_file(sandbox.docs / "edited.txt", ORIGINAL)
    clean = write_file(sandbox.docs / "clean.txt", "stays as it is\n")
    first = serve(sandbox, state, hot_exit=False)
    assert first.initialized["capabilities"]["handoff"] is True
    editor = Editor(first, edited)
    editor.insert(0, 0, "one\n")
    editor.edit([{"range": span(2, 0, 2, 4), "text": "BETA"}])
    other = first.open(clean)["document"]
    cursor = {"line": 1, "character": 3, "scroll": 0.25, "folds": [[2, 4]]}
    assert first.call("document/setClientState", {"document": editor.document, "state": cursor}) is None
    assert first.call("document/setClientState", {"document": other, "state": "top"}) is None

    token, listed = snapshot(first, 2)
    assert listed == [
        {"uri": uri(edited), "version": editor.version, "hasUnsavedChanges": True},
        {"uri": uri(clean), "version": 1, "hasUnsavedChanges": False},
    ]
    folder = sessions(state) / token
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(os.listdir(folder)) == ["1.journal", "manifest.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [d["clientState"] for d in manifest["documents"]] == [cursor, "top"]
    # The editor hands off and quits without hot exit: its own journal goes, the snapshot stays.
    first.shutdown()
    assert journal_files(state) == []

    second = serve(sandbox, state)
    restored = second.call("session/restore", {"snapshot": token})
    entries = restored["documents"]
    assert [e["uri"] for e in entries] == [uri(edited), uri(clean)]
    mine, theirs = entries
    assert mine["error"] is None and theirs["error"] is None, entries
    assert mine["clientState"] == cursor and theirs["clientState"] == "top"
    assert mine["recovered"]["version"] == editor.version, mine
    assert mine["recovered"]["inConflict"] is False and mine["recovered"]["hasUnsavedChanges"] is True
    assert mine["document"]["text"] == editor.text and mine["document"]["version"] == editor.version
    assert mine["document"]["hasUnsavedChanges"] is True and "recovery" not in mine["document"]
    assert theirs["recovered"] is None and theirs["document"]["text"] == "stays as it is\n"
    assert theirs["document"]["hasUnsavedChanges"] is False
    assert not folder.exists(), "a restored snapshot is removed"
    assert edited.read_text() == ORIGINAL, "restoring writes nothing to the file"

    # The undo history came along: two undos go back to the file's text, clean.
    handle = mine["document"]["document"]
    second.call("document/undo", {"document": handle})
    second.call("document/undo", {"document": handle})
    assert second.read(handle) == ORIGINAL
    assert second.state(handle)["hasUnsavedChanges"] is False
    second.call("document/redo", {"document": handle})
    second.call("document/redo", {"document": handle})
    assert second.read(handle) == editor.text

    # The restored server keeps the client states: its own snapshot carries them on.
    token2, _ = snapshot(second, 2)
    manifest2 = json.loads((sessions(state) / token2 / "manifest.json").read_text())
    assert [d["clientState"] for d in manifest2["documents"]] == [cursor, "top"]

    again = second.request("session/restore", {"snapshot": token}).error
    assert again["code"] == NO_SNAPSHOT and again["data"] == {"snapshot": token}, again


def test_the_snapshot_holds_the_text_at_its_time_and_a_later_crash_loses_nothing(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    first = serve(sandbox, state)
    editor = Editor(first, path)
    editor.insert(0, 0, "before the snapshot\n")
    at_snapshot, version_at_snapshot = editor.text, editor.version
    token, _ = snapshot(first, 1)
    editor.insert(0, 0, "after it\n")
    wait_for_journal(state, editor.version)
    sigkill(first)

    second = serve(sandbox, state)
    entry = second.call("session/restore", {"snapshot": token})["documents"][0]
    assert entry["error"] is None, entry
    assert entry["recovered"]["version"] == version_at_snapshot
    assert entry["document"]["text"] == at_snapshot
    # The dead server's later journal is not lost: it waits, listed as recoverable.
    journals = second.call("workspace/recoverable", {})["journals"]
    assert [(j["uri"], j["version"], j["open"]) for j in journals] == [(uri(path), editor.version, True)], journals


def test_a_restore_after_the_file_changed_comes_back_in_conflict_and_merges(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    first = serve(sandbox, state, hot_exit=False)
    editor = Editor(first, path)
    editor.edit([{"range": span(0, 0, 0, 5), "text": "ALPHA (mine)"}])
    token, _ = snapshot(first, 1)
    first.shutdown()
    theirs = ORIGINAL.replace("epsilon", "EPSILON (theirs)")
    path.write_text(theirs)

    second = serve(sandbox, state)
    entry = second.call("session/restore", {"snapshot": token})["documents"][0]
    assert entry["recovered"]["inConflict"] is True, entry
    assert "inConflict" in entry["document"]["state"]
    handle = entry["document"]["document"]
    assert second.read(handle) == editor.text
    second.call("document/resolveConflict", {"document": handle, "resolution": "merge"})
    assert second.read(handle) == "ALPHA (mine)\nbeta\ngamma\ndelta\nEPSILON (theirs)\n"


def test_a_document_that_cannot_be_opened_is_answered_with_its_error_and_its_work_waits(sandbox):
    state = sandbox.root / "state"
    gone = write_file(sandbox.docs / "gone.txt", ORIGINAL)
    kept = write_file(sandbox.docs / "kept.txt", "kept\n")
    first = serve(sandbox, state, hot_exit=False)
    editor = Editor(first, gone)
    editor.insert(0, 0, "unsaved\n")
    first.open(kept)
    token, _ = snapshot(first, 2)
    first.shutdown()
    gone.unlink()

    second = serve(sandbox, state)
    missing, fine = second.call("session/restore", {"snapshot": token})["documents"]
    assert missing["document"] is None and missing["recovered"] is None, missing
    assert missing["error"]["code"] == -32010 and missing["error"]["data"]["code"] == "ENOENT", missing
    assert fine["error"] is None and fine["document"]["text"] == "kept\n"
    # The unsaved work of the missing file waits in the journal directory.
    journals = second.call("workspace/recoverable", {})["journals"]
    assert [(j["uri"], j["version"]) for j in journals] == [(uri(gone), editor.version)], journals


def test_client_states_and_the_errors_of_the_handoff_requests(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    handle = server.open(path)["document"]

    error = server.request("document/setClientState", {"document": handle}).error
    assert error["code"] == INVALID_PARAMS and "params.state" in error["message"], error
    error = server.request("document/setClientState", {"document": "d999", "state": 1}).error
    assert error["code"] == UNKNOWN_DOCUMENT, error
    error = server.request("document/setClientState", {"document": handle, "state": "x" * (1 << 20)}).error
    assert error["code"] == INVALID_PARAMS and "params.state" in error["message"] and "1048576" in error["message"], error
    for bad in ("../../etc", "ABCDEF0123456789ABCDEF0123456789", "", 7):
        error = server.request("session/restore", {"snapshot": bad}).error
        assert error["code"] == INVALID_PARAMS and "params.snapshot" in error["message"], (bad, error)
    error = server.request("session/snapshot", {"documents": []}).error
    assert error["code"] == INVALID_PARAMS, error
    unknown = "0" * 32
    for method in ("session/restore", "session/discardSnapshot"):
        error = server.request(method, {"snapshot": unknown}).error
        assert error["code"] == NO_SNAPSHOT and error["data"] == {"snapshot": unknown}, error
    assert not sessions(state).exists() or os.listdir(sessions(state)) == []

    # null clears a state; a closed document's state is not carried.
    server.call("document/setClientState", {"document": handle, "state": {"line": 3}})
    server.call("document/setClientState", {"document": handle, "state": None})
    token, _ = snapshot(server, 1)
    manifest = json.loads((sessions(state) / token / "manifest.json").read_text())
    assert manifest["documents"][0]["clientState"] is None
    assert server.call("session/discardSnapshot", {"snapshot": token}) is None
    assert not (sessions(state) / token).exists()
    server.call("document/setClientState", {"document": handle, "state": [1, 2]})
    server.call("document/close", {"document": handle})
    token, listed = snapshot(server, 0)
    assert listed == []


def test_without_a_usable_state_directory_or_journal_the_handoff_says_why_and_changes_nothing(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    first = serve(sandbox, state, hot_exit=False)
    editor = Editor(first, path)
    editor.insert(0, 0, "unsaved\n")
    token, _ = snapshot(first, 1)
    first.shutdown()

    # A server that journals nothing cannot bring the unsaved work back: refused, the snapshot kept.
    plain = sandbox.start(args=("serve", "--state-dir", str(state), "--no-journal"))
    error = plain.request("session/restore", {"snapshot": token}).error
    assert error["code"] == HANDOFF_UNAVAILABLE and "--no-journal" in error["message"], error
    assert error["data"] == {"snapshot": token}
    assert (sessions(state) / token / "manifest.json").exists()
    assert plain.request("document/state", {"document": "d1"}).error["code"] == UNKNOWN_DOCUMENT, "nothing was opened"
    plain.shutdown()

    # A state directory whose sessions folder cannot be made.
    blocked = sandbox.root / "blocked"
    blocked.mkdir()
    (blocked / "sessions").write_text("a file where the folder would go\n")
    server = serve(sandbox, blocked)
    assert server.initialized["capabilities"]["handoff"] is False
    for method, params in (("session/snapshot", {}), ("session/restore", {"snapshot": token})):
        error = server.request(method, params).error
        assert error["code"] == HANDOFF_UNAVAILABLE and "state directory" in error["message"], error

    # The kept snapshot is still whole for a server that journals.
    third = serve(sandbox, state)
    entry = third.call("session/restore", {"snapshot": token})["documents"][0]
    assert entry["document"]["text"] == editor.text, entry
    wait_until(lambda: not (sessions(state) / token).exists(), what="the restored snapshot removed")


def test_packages_and_managed_documents_are_handed_off_with_their_unsaved_work(sandbox):
    """protocol §13.7: a snapshot carries packages too (each journal copied, a managed document's
    migrations kept); the restore opens each with its kind and recovers it, undo history included."""
    state = sandbox.root / "state"
    bundle = sandbox.docs / "notes.textbundle"
    bundle.mkdir()
    write_file(bundle / "text.md", "# Notes\n")
    store = sandbox.docs / "store.docpackage"
    migrations = ["CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT NOT NULL)"]
    first = serve(sandbox, state, hot_exit=False)
    created = first.call("document/create", {"uri": uri(store), "kind": "managed", "storeOptions": {"migrations": migrations}})
    first.call("document/save", {"document": created["document"]})
    package = first.call("document/open", {"uri": uri(bundle)})["document"]
    first.call("document/writeEntry", {"document": package, "path": "text.md", "text": "# Handed off\n", "label": "Type"})
    first.call("store/execute", {"document": created["document"], "sql": "INSERT INTO notes VALUES (1, 'unsaved')", "label": "Add"})
    assert first.call("document/setClientState", {"document": package, "state": {"selected": "text.md"}}) is None

    token, listed = snapshot(first, 2)
    assert [(d["uri"], d["hasUnsavedChanges"]) for d in listed] == [(uri(store), True), (uri(bundle), True)], listed
    manifest = json.loads((sessions(state) / token / "manifest.json").read_text())
    assert [(d["kind"], d.get("migrations")) for d in manifest["documents"]] == [("managed", migrations), ("package", None)]
    assert sorted(os.listdir(sessions(state) / token)) == ["1.pjournal", "2.pjournal", "manifest.json"]
    first.shutdown()

    second = serve(sandbox, state)
    entries = second.call("session/restore", {"snapshot": token})["documents"]
    assert [e["error"] for e in entries] == [None, None], entries
    managed, restored = entries
    assert restored["recovered"]["entries"] == [{"path": "text.md", "change": "written"}], restored
    assert restored["clientState"] == {"selected": "text.md"} and restored["document"]["undoLabel"] == "Type"
    handle = restored["document"]["document"]
    assert second.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "# Handed off\n"
    assert managed["document"]["kind"] == "managed" and managed["recovered"]["hasUnsavedChanges"] is True
    rows = second.call("store/query", {"document": managed["document"]["document"], "sql": "SELECT id, title FROM notes"})["rows"]
    assert rows == [[1, "unsaved"]]
    second.call("document/undo", {"document": handle})
    assert second.call("document/readEntry", {"document": handle, "path": "text.md"})["text"] == "# Notes\n"
    assert (bundle / "text.md").read_text() == "# Notes\n", "restoring writes nothing to the package"
