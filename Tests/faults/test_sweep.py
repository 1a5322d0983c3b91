"""Test list 8: opening a document sweeps the temp files a killed save left beside it
(`.docsession-save-*`, regular files only), but never a backup of an in-place write
(`.docsession-backup-*`, it may hold the only whole copy), nor anything in other directories, nor a
temp file while another save holds the directory's lock. A save as sweeps its destination's directory
by the same rules before it writes there."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from faultkit import uri, wait_until, write_file


def test_open_sweeps_leftover_temp_files_but_not_backups(sandbox):
    path = write_file(sandbox.docs / "doc.txt", "the document\n")
    write_file(sandbox.docs / ".docsession-save-x", "half a save")
    write_file(sandbox.docs / ".docsession-save-0123abcd", "")
    write_file(sandbox.docs / ".docsession-backup-x", "the only whole copy")
    write_file(sandbox.docs / "unrelated.txt", "unrelated")
    (sandbox.docs / ".docsession-save-dir").mkdir()  # not a regular file: not ours
    (sandbox.docs / ".docsession-save-link").symlink_to("doc.txt")  # neither
    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    write_file(elsewhere / ".docsession-save-y", "another directory")

    info = sandbox.start().open(path)
    assert info["hasUnsavedChanges"] is False
    assert sorted(os.listdir(sandbox.docs)) == [
        ".docsession-backup-x", ".docsession-save-dir", ".docsession-save-link", "doc.txt", "unrelated.txt"]
    assert (sandbox.docs / ".docsession-backup-x").read_text() == "the only whole copy"
    assert (elsewhere / ".docsession-save-y").exists()
    assert path.read_text() == "the document\n"


def test_sweep_leaves_the_temp_file_of_a_save_holding_the_directory_lock(sandbox):
    path = write_file(sandbox.docs / "doc.txt", "the document\n")
    other = write_file(sandbox.docs / "other.txt", "another document\n")
    temp = write_file(sandbox.docs / ".docsession-save-running", "a save in progress")
    server = sandbox.start()
    directory = os.open(sandbox.docs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)  # what a running save holds
        server.open(path)
        assert temp.exists()
    finally:
        os.close(directory)
    server.open(other)  # the lock is free now
    assert not temp.exists()


def test_save_as_sweeps_its_destination_directory_by_the_same_rules(sandbox):
    """README §8.14, step 7: a save as sweeps the directory it writes into before writing, as an
    open does beside its file: our stale temp files go, backups, directories and symlinks with the
    prefix and other names stay, and so does everything in the document's own directory and
    elsewhere."""
    path = write_file(sandbox.docs / "doc.txt", "the document\n")
    destination = sandbox.root / "destination"
    destination.mkdir()
    write_file(destination / ".docsession-save-x", "half a save")
    write_file(destination / ".docsession-save-0123abcd", "")
    write_file(destination / ".docsession-backup-x", "the only whole copy")
    write_file(destination / "unrelated.txt", "unrelated")
    (destination / ".docsession-save-dir").mkdir()
    (destination / ".docsession-save-link").symlink_to("unrelated.txt")
    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    write_file(elsewhere / ".docsession-save-y", "another directory")

    server = sandbox.start()
    document = server.open_and_edit(path, "saved as\n")
    # The open swept the document's own directory; a temp file left there after it stays.
    write_file(sandbox.docs / ".docsession-save-later", "beside the old file")
    reply = server.save(document, to=uri(destination / "copy.txt"))
    assert reply.result["uri"] == uri(destination / "copy.txt"), reply.response
    assert sorted(os.listdir(destination)) == [
        ".docsession-backup-x", ".docsession-save-dir", ".docsession-save-link", "copy.txt", "unrelated.txt"]
    assert (destination / "copy.txt").read_text() == "saved as\n"
    assert (destination / ".docsession-backup-x").read_text() == "the only whole copy"
    assert (elsewhere / ".docsession-save-y").exists()
    assert (sandbox.docs / ".docsession-save-later").exists()
    assert path.read_text() == "the document\n"


def _blocked_flock_waiters(directory: Path) -> int:
    """How many flock(2) calls wait on `directory` now (/proc/locks lists a blocked one as `->`)."""
    inode = os.stat(directory).st_ino
    with open("/proc/locks") as locks:
        return sum(1 for line in locks
                   if "->" in line and "FLOCK" in line and line.split()[-3].rsplit(":", 1)[-1] == str(inode))


def test_save_as_leaves_the_temp_file_of_a_save_holding_the_destination_lock(sandbox):
    """While another save holds the destination directory's lock the save as sweeps nothing there
    (that save's temp file is not stale): it waits for the lock, then writes, and the temp file is
    still there. The wait is seen in /proc/locks, so the sweep has been tried by then."""
    path = write_file(sandbox.docs / "doc.txt", "the document\n")
    destination = sandbox.root / "destination"
    destination.mkdir()
    temp = write_file(destination / ".docsession-save-running", "a save in progress")
    server = sandbox.start()
    document = server.open_and_edit(path, "saved as\n")
    directory = os.open(destination, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)  # what a running save holds
        request_id = server.send_save(document, to=uri(destination / "copy.txt"))
        wait_until(lambda: _blocked_flock_waiters(destination) > 0, what="the save as waiting for the lock")
        assert temp.exists()
        assert not (destination / "copy.txt").exists()
    finally:
        os.close(directory)
    response, _ = server.rpc.read_until_response(request_id)
    assert "result" in response, response
    assert (destination / "copy.txt").read_text() == "saved as\n"
    assert temp.read_text() == "a save in progress"
