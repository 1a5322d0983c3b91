"""Test list 8: opening a document sweeps the temp files a killed save left beside it
(`.docsession-save-*`, regular files only), but never a backup of an in-place write
(`.docsession-backup-*`, it may hold the only whole copy), nor anything in other directories, nor a
temp file while another save holds the directory's lock."""

from __future__ import annotations

import fcntl
import os

from faultkit import write_file


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
