"""Changes of a document's file's attributes alone (protocol README §8.18, "Attributes"): chattr +i,
chown, extended attributes, ACLs and, for a server running as nobody, a chmod that takes away even
reading. Each is one `document/stateChanged` of reason `attributesChanged` carrying `readOnly`, and
never a reload or a conflict; `readOnly` shows in `document/state` and the document info, and a save
is refused exactly while it is true. The document's own saves report nothing.

Every wait is for a notification, with a generous deadline (the machine may be busy)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from faultkit import NOBODY, leftovers, metadata, uri, write_file

OLD = "old line one\nold line two\n"
NEW = "new text\n"
WAIT = 20.0

AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


def next_change(server, reason: str, timeout: float = WAIT) -> dict:
    """The params of the next `document/stateChanged` with `reason` (the notifications read on the
    way are kept in `server.notifications`)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no document/stateChanged {reason!r} within {timeout} s; got {server.notifications}")
        try:
            message = server.rpc.read_message(timeout=remaining)
        except TimeoutError:
            continue
        if isinstance(message, dict) and "method" in message:
            server.notifications.append(message)
            if message["method"] == "document/stateChanged" and message["params"]["reason"] == reason:
                return message["params"]


def about_the_file(server) -> list[dict]:
    """The notifications a change on disk would cause other than attributesChanged: reloads, moves,
    conflicts, deletions."""
    return [m for m in server.notifications
            if m["method"] in ("document/didChange", "document/didMove")
            or (m["method"] == "document/stateChanged"
                and m["params"]["reason"] in ("externalChange", "reloaded", "deletedOnDisk"))]


def attribute_changes(server) -> list[bool]:
    return [m["params"]["readOnly"] for m in server.notifications
            if m["method"] == "document/stateChanged" and m["params"]["reason"] == "attributesChanged"]


def test_immutable_flag_makes_the_document_read_only_until_it_is_cleared(sandbox):
    """`chattr +i` changes no permission bit and sends no IN_ATTRIB (the server sees the close of
    chattr's descriptor); root may then write nothing: readOnly, and a save refused with EPERM."""
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    info = server.open(path)
    assert "readOnly" not in info, info
    document = info["document"]
    server.replace_text(document, info["version"], NEW)
    if not sandbox.make_immutable(path):
        pytest.skip(f"chattr +i refused on {sandbox.docs} (the file system has no immutable flag: tmpfs, overlayfs?)")

    change = next_change(server, "attributesChanged")
    assert change["readOnly"] is True, change
    assert (change["version"], change["state"], change["hasUnsavedChanges"]) == (2, [], True), change
    assert server.state(document)["readOnly"] is True
    refused = server.save(document)
    assert refused.error["data"]["code"] == "EPERM", refused.error
    assert path.read_text() == OLD

    subprocess.run(["chattr", "-i", str(path)], check=True)
    assert next_change(server, "attributesChanged")["readOnly"] is False
    assert "readOnly" not in server.state(document)
    assert server.save(document).ok
    assert path.read_text() == NEW
    assert about_the_file(server) == [], about_the_file(server)
    assert leftovers(sandbox.docs) == []


def test_a_read_only_file_opens_read_only(sandbox):
    """The document info says it at once: a file with no write bit is refused even by root's saves."""
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o444)
    server = sandbox.start()
    info = server.open(path)
    assert info["readOnly"] is True, info
    assert server.state(info["document"])["readOnly"] is True


def test_owner_extended_attribute_and_acl_changes_are_reported_and_own_saves_are_not(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o640)
    server = sandbox.start()
    info = server.open(path)
    document = info["document"]

    os.chown(path, 1234, 4321)
    assert next_change(server, "attributesChanged")["readOnly"] is False
    os.setxattr(path, "user.colour", b"blue")
    assert next_change(server, "attributesChanged")["readOnly"] is False
    subprocess.run(["setfacl", "-m", f"u:{NOBODY}:r", str(path)], check=True)
    assert next_change(server, "attributesChanged")["readOnly"] is False
    assert about_the_file(server) == [], about_the_file(server)
    state = server.state(document)
    assert (state["version"], state["hasUnsavedChanges"], "readOnly" in state) == (1, False, False), state

    # The document's own saves keep owner, mode, attributes and ACL: nothing is reported.
    before = metadata(path)
    version = info["version"]
    for round_number in range(5):
        version = server.replace_text(document, version, f"{NEW}{round_number}\n")
        assert server.save(document).ok
    assert metadata(path) == before
    # A marker after them: the watcher reports in order, so anything the saves caused came first.
    os.setxattr(path, "user.marker", b"1")
    assert next_change(server, "attributesChanged")["readOnly"] is False
    assert server.state(document)["hasUnsavedChanges"] is False
    assert attribute_changes(server) == [False, False, False, False], server.notifications
    assert about_the_file(server) == [], about_the_file(server)


def test_unprivileged_server_chmod_000_is_an_attributes_change_not_a_conflict(sandbox):
    """As nobody, a chmod that takes reading away leaves a file the server cannot read to compare:
    the same file, size and modification time is an attributes change (readOnly), not a conflict;
    made readable and writable again, the unsaved edit saves without force."""
    os.chown(sandbox.docs, NOBODY, NOBODY)  # nobody's saves make their temp file here
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o644, owner=(NOBODY, NOBODY))
    server = sandbox.start(AS_NOBODY)
    document = server.open_and_edit(path, NEW)

    os.chmod(path, 0o000)
    assert next_change(server, "attributesChanged")["readOnly"] is True
    assert server.state(document)["readOnly"] is True
    os.chmod(path, 0o644)
    assert next_change(server, "attributesChanged")["readOnly"] is False
    state = server.state(document)
    assert (state["state"], state["hasUnsavedChanges"], "readOnly" in state) == ([], True, False), state
    assert about_the_file(server) == [], about_the_file(server)
    assert server.save(document).ok
    assert path.read_text() == NEW
    assert (os.stat(path).st_uid, oct(os.stat(path).st_mode & 0o7777)) == (NOBODY, "0o644")
