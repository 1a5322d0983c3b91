"""Coordination (protocol/README.md §14.3): `workspace/coordinate` and `workspace/endCoordination`,
end to end over stdio with the built binary. Another party (here: the test itself) takes a lease on
a file; the open documents of the file react as NSFilePresenter's do to NSFileCoordinator:

- read: unsaved changes are saved first (the file's bytes are checked), or the lease is refused
  with the save's own error (-32032) and nothing is held;
- write: edits, undo, redo, saves and closes that would save get -32012 naming the lease, autosave
  and the file presenter's reaction stand aside, and at the end the file is read again: a reload
  when the document is clean, a conflict when it has unsaved edits;
- delete: at the end a clean document whose file is gone closes; one with unsaved edits stays open
  with them (deleted on disk, as the presenter keeps it);
- move: at the end the document follows its file to the destination (`document/didMove`);
- several leases on one file: the document edits again when the last one ends;
- every lease of a connection ends at its shutdown and at the end of its input.

Nothing here sleeps a fixed time to synchronise: a "nothing happened" is proved after a witness
(another document of the same directory, changed after the coordinated file) has shown that the
server's watcher and autosave got that far."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faultkit import CHANGED_ON_DISK, Reply, Server, uri, wait_until, write_file

EDITING_DISABLED = -32012
INVALID_PARAMS = -32602
UNKNOWN_DOCUMENT = -32011
OUTSIDE_ROOTS = -32022
COORDINATION_REFUSED = -32032
UNKNOWN_LEASE = -32033

OLD = "the original text\nsecond line\n"
MINE = "the user's unsaved edit\n"
THEIRS = "what the other program wrote\n"
WAIT = 60.0  # generous: both processors may be kept busy by other work


def coordinate(server: Server, path: Path, intent: str, **params) -> Reply:
    return server.request("workspace/coordinate", {"uri": uri(path), "intent": intent, **params})


def end(server: Server, lease: str) -> Reply:
    return server.request("workspace/endCoordination", {"lease": lease})


def outcomes(reply: Reply) -> dict[str, str]:
    return {entry["document"]: entry["outcome"] for entry in reply.result["documents"]}


def edit(server: Server, document: str, version: int, new_text: str) -> Reply:
    return server.request("document/edit", {"document": document, "version": version, "edits": [{"text": new_text}]})


def notes(reply: Reply, method: str, document: str | None = None) -> list[dict]:
    return [n["params"] for n in reply.notifications
            if n["method"] == method and (document is None or n["params"].get("document") == document)]


def seen(server: Server, method: str, document: str, reason: str | None = None) -> list[dict]:
    """The notifications of `method` for `document` received so far (and those waiting to be read)."""
    _pump(server)
    return [n["params"] for n in server.notifications
            if n["method"] == method and n["params"].get("document") == document
            and (reason is None or n["params"].get("reason") == reason)]


def _pump(server: Server) -> None:
    while True:
        try:
            message = server.rpc.read_message(timeout=0.05)
        except TimeoutError:
            return
        if isinstance(message, dict) and "method" in message:
            server.notifications.append(message)


def witness_reloads(server: Server, witness_path: Path, witness: str, tag: str) -> None:
    """Rewrites the witness file (a clean open document of the same directory) and waits for its
    reload: the watcher's events come in order, so every change made before this one has reached
    the server by then."""
    before = len(seen(server, "document/didChange", witness))
    witness_path.write_text(f"witness {tag}\n")
    wait_until(lambda: len(seen(server, "document/didChange", witness)) > before, timeout=WAIT, what="the witness's reload")


def assert_refused_for_lease(error: dict, document: str, lease: str, intent: str) -> None:
    assert error["code"] == EDITING_DISABLED, error
    assert error["data"] == {"document": document, "reason": "coordinated", "lease": lease, "intent": intent}, error


# -- read ------------------------------------------------------------------------------------------


def test_read_saves_unsaved_changes_before_answering(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)

    reply = coordinate(server, path, "read")
    assert reply.result == {"lease": "l1", "intent": "read", "documents": [document], "saved": [document]}
    # Saved the way document/save saves, before the answer.
    assert path.read_bytes() == MINE.encode()
    saved = [n for n in notes(reply, "document/stateChanged", document) if n["reason"] == "saved"]
    assert saved and saved[0]["hasUnsavedChanges"] is False, reply.notifications
    # Editing stays enabled under a read lease.
    state = server.state(document)
    assert "editingDisabled" not in state["state"], state
    assert edit(server, document, state["version"], "more\n").ok

    ended = end(server, "l1")
    assert outcomes(ended) == {document: "unchanged"}
    # A clean document is not saved again: nothing to save.
    clean = sandbox.docs / "clean.txt"
    write_file(clean, OLD)
    other = server.open(clean)["document"]
    assert coordinate(server, clean, "read").result == {"lease": "l2", "intent": "read", "documents": [other], "saved": []}


def test_read_refused_when_the_save_fails(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)
    # Another program changed the file: the save would overwrite it, so it fails with -32017.
    path.write_text(THEIRS)

    reply = coordinate(server, path, "read")
    error = reply.error
    assert error["code"] == COORDINATION_REFUSED, error
    assert error["data"]["document"] == document and error["data"]["uri"] == uri(path), error
    assert error["data"]["error"]["code"] == CHANGED_ON_DISK, error
    assert error["data"]["error"]["data"]["path"] == str(path), error
    # Nothing else changed: the file is theirs, the text mine, no lease is held, editing goes on.
    assert path.read_text() == THEIRS
    assert server.read(document) == MINE
    assert end(server, "l1").error["code"] == UNKNOWN_LEASE
    state = server.state(document)
    assert "editingDisabled" not in state["state"] and state["hasUnsavedChanges"] is True, state
    assert edit(server, document, state["version"], MINE + "more\n").ok


# -- write -----------------------------------------------------------------------------------------


def test_write_lease_refuses_edits_undo_redo_saves_until_it_ends(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)
    version = server.state(document)["version"]

    reply = coordinate(server, path, "write")
    assert reply.result == {"lease": "l1", "intent": "write", "documents": [document], "saved": []}
    change = server.state_change(reply, "coordinated")
    assert "editingDisabled" in change["state"] and change["hasUnsavedChanges"] is True, change

    assert_refused_for_lease(edit(server, document, version, "x").error, document, "l1", "write")
    assert_refused_for_lease(server.request("document/undo", {"document": document}).error, document, "l1", "write")
    assert_refused_for_lease(server.request("document/redo", {"document": document}).error, document, "l1", "write")
    assert_refused_for_lease(server.save(document).error, document, "l1", "write")
    assert_refused_for_lease(server.save(document, force=True).error, document, "l1", "write")
    assert_refused_for_lease(server.request("document/revert", {"document": document}).error, document, "l1", "write")
    # A close that would save is refused too; the document stays open with its edits.
    assert_refused_for_lease(server.request("document/close", {"document": document}).error, document, "l1", "write")
    assert path.read_text() == OLD and server.read(document) == MINE

    ended = end(server, "l1")
    assert outcomes(ended) == {document: "unchanged"}
    back = server.state_change(ended, "coordinationEnded")
    assert "editingDisabled" not in back["state"], back
    assert edit(server, document, version, MINE + "more\n").ok
    assert server.save(document).ok
    assert path.read_text() == MINE + "more\n"


def test_write_lease_pauses_autosave(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    witness_path = write_file(sandbox.docs / "witness.txt", OLD)
    server = sandbox.start(initialization={"initializationOptions": {"autosave": {"policy": "afterDelay", "delay": 1000}}})
    document = server.open(path)["document"]
    witness = server.open(witness_path)["document"]
    # The edit and the lease are sent together: the lease is taken long before the delay is up.
    rpc = server.rpc
    first, second = rpc.next_id, rpc.next_id + 1
    rpc.next_id += 2
    rpc.send({"jsonrpc": "2.0", "id": first, "method": "document/edit",
              "params": {"document": document, "version": 1, "edits": [{"text": MINE}]}})
    rpc.send({"jsonrpc": "2.0", "id": second, "method": "workspace/coordinate",
              "params": {"uri": uri(path), "intent": "write"}})
    response, before = rpc.read_until_response(first)
    assert "result" in response, response
    response, more = rpc.read_until_response(second)
    assert response["result"]["lease"] == "l1", response
    server.notifications += [m for m in before + more if isinstance(m, dict) and "method" in m]

    # The witness is edited after the lease was granted: when it has autosaved, the coordinated
    # document's autosave was due too.
    assert edit(server, witness, 1, "witness edit\n").ok
    wait_until(lambda: seen(server, "document/stateChanged", witness, "saved"), timeout=WAIT, what="the witness's autosave")
    assert path.read_text() == OLD
    assert not seen(server, "document/stateChanged", document, "saved")
    assert server.state(document)["hasUnsavedChanges"] is True

    assert outcomes(end(server, "l1")) == {document: "unchanged"}
    # Autosave looks again once the lease has ended.
    wait_until(lambda: seen(server, "document/stateChanged", document, "saved"), timeout=WAIT, what="the autosave after the lease")
    wait_until(lambda: path.read_text() == MINE, timeout=WAIT, what="the autosaved file")
    assert seen(server, "document/stateChanged", document, "saved")[0].get("autosave") is True


@pytest.mark.parametrize("how", ["in-place", "rename-replace"])
def test_write_lease_holds_back_the_reload_until_its_end(sandbox, how):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    witness_path = write_file(sandbox.docs / "witness.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    witness = server.open(witness_path)["document"]
    assert coordinate(server, path, "write").result["documents"] == [document]

    if how == "in-place":
        path.write_text(THEIRS)
    else:
        temp = sandbox.docs / "doc.txt.tmp"
        temp.write_text(THEIRS)
        os.replace(temp, path)
    witness_reloads(server, witness_path, witness, "1")
    # Held back: no reload, no conflict during the lease.
    assert not seen(server, "document/didChange", document)
    assert not seen(server, "document/stateChanged", document, "externalChange")
    assert server.read(document) == OLD

    ended = end(server, "l1")
    assert outcomes(ended) == {document: "reloaded"}
    changes = notes(ended, "document/didChange", document)
    assert len(changes) == 1 and changes[0]["reason"] == "external", ended.notifications
    server.state_change(ended, "coordinationEnded")
    assert server.read(document) == THEIRS
    state = server.state(document)
    assert state["state"] == [] and state["hasUnsavedChanges"] is False, state


def test_write_lease_ends_in_a_conflict_when_there_are_unsaved_edits(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    witness_path = write_file(sandbox.docs / "witness.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)
    witness = server.open(witness_path)["document"]
    assert coordinate(server, path, "write").ok
    path.write_text(THEIRS)
    witness_reloads(server, witness_path, witness, "1")
    assert not seen(server, "document/stateChanged", document, "externalChange")

    ended = end(server, "l1")
    assert outcomes(ended) == {document: "conflict"}
    conflict = server.state_change(ended, "externalChange")
    assert "inConflict" in conflict["state"] and conflict["error"]["code"] == "changedOnDisk", conflict
    assert server.read(document) == MINE and path.read_text() == THEIRS
    # Editing is back (in conflict, as the presenter leaves a document).
    version = server.state(document)["version"]
    assert edit(server, document, version, MINE + "more\n").ok


def test_write_lease_of_a_deleted_file_keeps_the_document(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").ok
    path.unlink()
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "deleted"}
    deleted = server.state_change(ended, "deletedOnDisk")
    assert deleted["hasUnsavedChanges"] is True, deleted
    assert server.read(document) == OLD


# -- delete and move -------------------------------------------------------------------------------


def test_delete_lease_closes_a_clean_document_whose_file_is_gone(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "delete").result == {"lease": "l1", "intent": "delete", "documents": [document], "saved": []}
    path.unlink()
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "closed"}
    closed = server.state_change(ended, "closed")
    assert closed["state"] == ["closed"], closed
    assert server.request("document/state", {"document": document}).error["code"] == UNKNOWN_DOCUMENT


def test_delete_lease_keeps_unsaved_edits(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)
    assert coordinate(server, path, "delete").ok
    path.unlink()
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "deleted"}
    state = server.state(document)
    assert state["hasUnsavedChanges"] is True and "editingDisabled" not in state["state"], state
    assert server.read(document) == MINE
    # The next save writes the file again.
    assert server.save(document).ok and path.read_text() == MINE


def test_delete_lease_of_a_file_that_stays_is_checked_as_a_write(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "delete").ok
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "unchanged"}
    assert server.read(document) == OLD


def test_move_lease_follows_the_file(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    (sandbox.docs / "archive").mkdir()
    destination = sandbox.docs / "archive" / "doc.md"
    server = sandbox.start()
    document = server.open_and_edit(path, MINE)
    reply = coordinate(server, path, "move", destination=uri(destination))
    assert reply.result == {"lease": "l1", "intent": "move", "documents": [document], "saved": []}
    os.rename(path, destination)
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "moved"}
    moved = notes(ended, "document/didMove", document)
    assert moved and moved[0]["oldUri"] == uri(path) and moved[0]["uri"] == uri(destination), ended.notifications
    state = server.state(document)
    assert state["uri"] == uri(destination) and state["hasUnsavedChanges"] is True, state
    assert server.save(document).ok
    assert destination.read_text() == MINE and not path.exists()


def test_move_lease_whose_file_did_not_move_is_checked_as_a_write(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "move", destination=uri(sandbox.docs / "elsewhere.txt")).ok
    path.write_text(THEIRS)
    ended = end(server, "l1")
    assert outcomes(ended) == {document: "reloaded"}
    assert server.read(document) == THEIRS and server.state(document)["uri"] == uri(path)


# -- leases ----------------------------------------------------------------------------------------


def test_two_leases_on_one_file(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    first = coordinate(server, path, "write")
    assert first.result["lease"] == "l1"
    second = coordinate(server, path, "write")
    assert second.result == {"lease": "l2", "intent": "write", "documents": [document], "saved": []}
    # The second lease changes no state: the document was disabled already.
    assert not notes(second, "document/stateChanged", document)

    assert outcomes(end(server, "l1")) == {document: "held"}
    # Still held by l2, the first lease still holding it.
    assert_refused_for_lease(edit(server, document, 1, "x").error, document, "l2", "write")
    path.write_text(THEIRS)
    ended = end(server, "l2")
    assert outcomes(ended) == {document: "reloaded"}
    server.state_change(ended, "coordinationEnded")
    assert edit(server, document, server.state(document)["version"], "mine\n").ok


def test_a_file_with_no_open_document_gets_an_empty_lease(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    assert coordinate(server, path, "write").result == {"lease": "l1", "intent": "write", "documents": [], "saved": []}
    assert coordinate(server, sandbox.docs / "new.txt", "read").result == {"lease": "l2", "intent": "read", "documents": [], "saved": []}
    assert end(server, "l1").result == {"documents": []}
    assert end(server, "l2").result == {"documents": []}


def test_a_document_closed_during_the_lease(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").ok
    # A close that saves nothing is allowed; the lease ends quietly for the document.
    assert server.request("document/close", {"document": document, "save": "never"}).ok
    assert outcomes(end(server, "l1")) == {document: "closed"}


def test_unknown_and_ended_leases(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    error = end(server, "l9").error
    assert error["code"] == UNKNOWN_LEASE and error["data"] == {"lease": "l9"}, error
    assert coordinate(server, path, "write").ok
    assert end(server, "l1").ok
    error = end(server, "l1").error
    assert error["code"] == UNKNOWN_LEASE and error["data"] == {"lease": "l1"}, error


def test_the_same_file_through_a_symbolic_link(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    link = sandbox.docs / "link.txt"
    link.symlink_to(path)
    server = sandbox.start()
    document = server.open(link)["document"]
    assert coordinate(server, path, "write").result["documents"] == [document]
    assert_refused_for_lease(edit(server, document, 1, "x").error, document, "l1", "write")
    assert end(server, "l1").ok


def test_shutdown_ends_the_leases(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").ok
    reply = server.request("shutdown", None)
    assert reply.ok
    ended = [n for n in notes(reply, "document/stateChanged", document) if n["reason"] == "coordinationEnded"]
    assert ended and "editingDisabled" not in ended[0]["state"], reply.notifications


def test_the_end_of_input_ends_the_leases(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").ok
    server.rpc.close_input()
    messages = server.rpc.drain(timeout=WAIT)
    ended = [m["params"] for m in messages if isinstance(m, dict) and m.get("method") == "document/stateChanged"
             and m["params"]["document"] == document and m["params"]["reason"] == "coordinationEnded"]
    assert ended, messages
    assert server.wait_exit() == 1


# -- bad input -------------------------------------------------------------------------------------

BAD = [
    ({"intent": "write"}, "params.uri"),
    ({"uri": 7, "intent": "write"}, "params.uri"),
    ({"uri": "http://example.com/doc.txt", "intent": "write"}, "params.uri"),
    ({"uri": "doc.txt", "intent": "write"}, "params.uri"),
    ({"uri": "DOC"}, "params.intent"),
    ({"uri": "DOC", "intent": "append"}, "params.intent"),
    ({"uri": "DOC", "intent": 1}, "params.intent"),
    ({"uri": "DOC", "intent": "write", "destination": "DEST"}, "params.destination"),
    ({"uri": "DOC", "intent": "read", "destination": "DEST"}, "params.destination"),
    ({"uri": "DOC", "intent": "move"}, "params.destination"),
    ({"uri": "DOC", "intent": "move", "destination": "relative.txt"}, "params.destination"),
    ({"uri": "DOC", "intent": "move", "destination": 3}, "params.destination"),
]


@pytest.mark.parametrize("params,field", BAD, ids=[f"{field}-{index}" for index, (_, field) in enumerate(BAD)])
def test_bad_params_of_coordinate(sandbox, params, field):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    concrete = {key: uri(path) if value == "DOC" else uri(sandbox.docs / "dest.txt") if value == "DEST" else value
                for key, value in params.items()}
    error = server.request("workspace/coordinate", concrete).error
    assert error["code"] == INVALID_PARAMS and error["data"]["field"] == field, error
    # Nothing changed: no lease, the document edits.
    assert end(server, "l1").error["code"] == UNKNOWN_LEASE
    assert "editingDisabled" not in server.state(document)["state"]
    assert edit(server, document, 1, "x").ok


@pytest.mark.parametrize("params", [{}, {"lease": 1}, {"lease": None}, [1]], ids=["missing", "number", "null", "array"])
def test_bad_params_of_end_coordination(sandbox, params):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").ok
    error = server.request("workspace/endCoordination", params).error
    assert error["code"] == INVALID_PARAMS, error
    assert error["data"]["field"] == ("params" if isinstance(params, list) else "params.lease"), error
    # The lease is still held.
    assert_refused_for_lease(edit(server, document, 1, "x").error, document, "l1", "write")
    assert end(server, "l1").ok


def test_outside_the_roots(sandbox):
    inside = sandbox.docs / "inside"
    inside.mkdir()
    outside = write_file(sandbox.docs / "outside.txt", OLD)
    path = write_file(inside / "doc.txt", OLD)
    server = sandbox.start(args=("serve", "--no-journal", "--root", str(inside)))
    error = coordinate(server, outside, "write").error
    assert error["code"] == OUTSIDE_ROOTS and error["data"]["field"] == "params.uri", error
    error = coordinate(server, path, "move", destination=uri(sandbox.docs / "away.txt")).error
    assert error["code"] == OUTSIDE_ROOTS and error["data"]["field"] == "params.destination", error
    assert end(server, "l1").error["code"] == UNKNOWN_LEASE
    document = server.open(path)["document"]
    assert coordinate(server, path, "write").result == {"lease": "l1", "intent": "write", "documents": [document], "saved": []}


def test_a_package_document_is_not_coordinated_yet(sandbox):
    package = sandbox.docs / "notes.package"
    package.mkdir()
    write_file(package / "text.md", "# notes\n")
    server = sandbox.start()
    info = server.call("document/open", {"uri": uri(package), "kind": "package"})
    error = coordinate(server, package, "write").error
    assert error["code"] == -32031 and error["data"] == {"document": info["document"], "kind": "package"}, error
    assert "coordinated yet" in error["message"], error
    assert end(server, "l1").error["code"] == UNKNOWN_LEASE
