"""Test list 5: a file changed on disk between open and save is not overwritten: -32017, state
inConflict, stateChanged externalChange; a forced save then overwrites it and clears inConflict.
Changes: an in-place write, a rename-replace, and a same-size write with the modification time put
back (`touch -r`; only the change time and the content hash tell). A file that was merely touched
(new times, same bytes) is not a conflict: the content hash decides."""

from __future__ import annotations

import os
import signal
import time

import pytest

from faultkit import CHANGED_ON_DISK, Reply, all_threads_stopped, check_saved, leftovers, temp_files, uri, wait_until, write_file

OLD = "the original text\nsecond line\n"
NEW = "the user's edit\n"
THEIRS = "their edited text\nsecond line\n"  # the same size as OLD
assert len(THEIRS) == len(OLD)

# The content hash of a file just opened is computed in the background (a small file: microseconds),
# and nothing the protocol reports says when it is known (the etag has no hash in it). The touch
# tests that need it wait this long after opening; a variant that needs no wait (the hash of a save
# comes from the bytes written) runs too.
HASH_SETTLE_SECONDS = 0.5


def write_in_place(path):
    with open(path, "r+") as file:
        file.write(THEIRS)


def rename_replace(path):
    temp = path.with_name("editor-temp")
    temp.write_text(THEIRS)
    os.replace(temp, path)


def same_size_with_mtime_restored(path):
    status = os.stat(path)
    write_in_place(path)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == status.st_mtime_ns and os.stat(path).st_size == status.st_size


CHANGES = {"in-place write": write_in_place, "rename-replace": rename_replace, "same size, mtime restored": same_size_with_mtime_restored}


@pytest.mark.parametrize("change", list(CHANGES), ids=["in-place", "rename-replace", "touch-r"])
def test_external_change_is_a_conflict_until_a_forced_save(sandbox, change):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    etag = server.state(document)["etag"]
    CHANGES[change](path)

    reply = server.save(document)
    error = reply.error
    assert error["code"] == CHANGED_ON_DISK, error
    assert error["data"]["path"] == str(path) and error["data"]["uri"] == uri(path), error
    assert error["data"]["expectedEtag"] == etag, error
    notice = server.state_change(reply, "externalChange")
    assert "inConflict" in notice["state"] and notice["hasUnsavedChanges"] is True, notice
    assert path.read_text() == THEIRS  # not overwritten
    assert server.read(document) == NEW
    assert "inConflict" in server.state(document)["state"]
    assert leftovers(sandbox.docs) == []

    # A plain save again is still refused; a forced one overwrites and clears the conflict.
    assert server.save(document).error["code"] == CHANGED_ON_DISK
    check_saved(server, server.save(document, force=True))
    assert path.read_text() == NEW
    assert server.state(document)["state"] == []
    assert leftovers(sandbox.docs) == []


@pytest.mark.parametrize("change", ["in-place write", "rename-replace"], ids=["in-place", "rename-replace"])
def test_change_while_the_save_runs_is_a_conflict(sandbox, change):
    # The server is stopped (SIGSTOP injected at the temp file's fsync, after the first check),
    # the file changed, the server continued: the check just before the rename refuses.
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    tracer = sandbox.trace(server, trace=("fsync",), inject=("fsync:signal=SIGSTOP:when=1",))
    request_id = server.send_save(document)
    wait_until(lambda: all_threads_stopped(server.pid), what="the server to stop in its save")
    assert temp_files(sandbox.docs), "stopped, but not in the middle of the save"
    CHANGES[change](path)
    os.kill(server.pid, signal.SIGCONT)
    response, before = server.rpc.read_until_response(request_id)
    tracer.detach()  # before any other save: each save's thread would stop again
    reply = Reply(response, [note for note in before if "method" in note])
    assert reply.error["code"] == CHANGED_ON_DISK, response
    assert "inConflict" in server.state_change(reply, "externalChange")["state"]
    assert path.read_text() == THEIRS
    assert leftovers(sandbox.docs) == []
    check_saved(server, server.save(document, force=True))
    assert path.read_text() == NEW


def touch(path):
    os.utime(path)  # now


def rewrite_same_bytes(path):
    path.write_text(path.read_text())


@pytest.mark.parametrize("how", [touch, rewrite_same_bytes], ids=["touched", "same-bytes-rewritten"])
def test_same_bytes_after_open_is_not_a_conflict(sandbox, how):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    before = os.stat(path)
    time.sleep(HASH_SETTLE_SECONDS)  # the background hash of the file just read
    how(path)
    assert os.stat(path).st_ctime_ns != before.st_ctime_ns
    check_saved(server, server.save(document))
    assert path.read_text() == NEW


def test_touch_after_a_save_is_not_a_conflict(sandbox):
    # The hash of a saved file comes from the bytes written: no wait at all.
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    check_saved(server, server.save(document))
    version = server.replace_text(document, server.state(document)["version"], NEW + "more\n")
    touch(path)
    check_saved(server, server.save(document))
    assert path.read_text() == NEW + "more\n"
    assert version > 0


def test_touched_and_changed_after_a_save_is_a_conflict(sandbox):
    # The control of the test above: the hash is what lets a touch through, not a blind eye.
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    document = server.open_and_edit(path, OLD.upper())
    check_saved(server, server.save(document))
    server.replace_text(document, server.state(document)["version"], NEW)
    same_size_with_mtime_restored(path)
    reply = server.save(document)
    assert reply.error["code"] == CHANGED_ON_DISK
    assert path.read_text() == THEIRS


@pytest.mark.parametrize("change", ["in-place write", "rename-replace"], ids=["in-place", "rename-replace"])
def test_a_write_between_the_opens_read_and_its_watch_is_reported(sandbox, change):
    """Issue 34 point 11: a write 2 to 4 ms after `document/open` (3 of 30 trials) was never
    reported: the file was read, then its directory watched, and nothing looked at it again. The
    server is stopped (SIGSTOP injected before its first inotify_add_watch, after the read), the file
    changed, the server continued: the document, clean, must take the file's text (a reload).
    The stop is injected at the watcher's making (inotify_init1, at the first open, after the
    read): a signal injected at inotify_add_watch itself comes once the watch is added."""
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start()
    tracer = sandbox.trace(server, trace=("inotify_init1", "inotify_add_watch"), inject=("inotify_init1:signal=SIGSTOP:when=1",))
    request_id = server.rpc.next_id
    server.rpc.next_id += 1
    server.rpc.send({"jsonrpc": "2.0", "id": request_id, "method": "document/open", "params": {"uri": uri(path), "includeText": True}})
    wait_until(lambda: all_threads_stopped(server.pid), what="the server to stop at its watch")
    CHANGES[change](path)
    tracer.detach()  # continues the server
    response, _ = server.rpc.read_until_response(request_id)
    assert response["result"]["text"] == OLD, response  # read before the write
    document = response["result"]["document"]
    wait_until(lambda: server.read(document) == THEIRS, timeout=20, what="the write made before the watch to be reloaded")
    assert server.state(document)["hasUnsavedChanges"] is False
