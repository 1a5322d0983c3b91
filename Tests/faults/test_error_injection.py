"""Test list 3: an errno injected into one system call of a save (strace `inject=SYSCALL:error=ERRNO`).

A failed save answers -32010 with the full detail, sends stateChanged (saveFailed, savingError, the
same detail), keeps the buffer and its unsaved changes, leaves the file and its metadata untouched
and no temp file behind. Once the fault is gone (strace detached) the same session saves: savingError
clears. EXDEV and EBUSY from renameat are not failures: the save falls back to writing in place.

The injection counters of strace are per thread and each save runs on a new thread, so `when=1`
would hit the retry too: the fault goes away by detaching strace instead (faultkit.py).
"""

from __future__ import annotations

import os

import pytest

from faultkit import (
    OTHER_OWNER, TEMP_PREFIX, check_failed_save, check_saved, leftovers, metadata, text, write_file,
)

def injected_in(calls, sandbox, docs=None):
    """The injected calls that touched the documents' directory. strace counts `when=N` per thread,
    so the Nth such call of another thread is injected too when it comes while the tracer is
    attached: the version store writing the save's version at nice 10 (under load, after the save's
    answer and before the detach), elsewhere, under the state directory."""
    directory = str(docs or sandbox.docs)
    return [call for call in calls if call.injected and directory in call.line]


OLD = text("old", 3000)
NEW = text("new", 5000)

# (syscall, which call of the save thread, errno, the syscall the detail names). The save thread's
# first openat opens the directory, its second creates the temp file; its first fsync and close are
# the temp file's.
FAILURES = [
    ("pwritev", 1, "ENOSPC", "pwritev"),
    ("pwritev", 1, "EDQUOT", "pwritev"),
    ("pwritev", 1, "EIO", "pwritev"),
    ("pwritev", 1, "EFBIG", "pwritev"),
    ("fsync", 1, "EIO", "fsync"),
    ("openat", 2, "EACCES", "openat"),
    ("openat", 2, "EPERM", "openat"),
    ("openat", 2, "EROFS", "openat"),
    ("fchown", 1, "EPERM", "fchown"),
    ("fchmod", 1, "EPERM", "fchmod"),
    ("fsetxattr", 1, "ENOSPC", "fsetxattr"),
    ("close", 1, "EIO", "close"),
]


def document_file(sandbox):
    """A file the save has to work on: another owner (fchown), a mode, an xattr (fsetxattr)."""
    return write_file(sandbox.docs / "doc.txt", OLD, mode=0o640, owner=OTHER_OWNER, xattrs={"user.k": b"v"})


def injected_call(tracer, syscall: str, nth: int):
    """The one call strace tampered with, checked to be the nth of its kind in the save's thread."""
    calls = tracer.calls()
    # The sandbox's documents beside the tracer's log (conftest.Sandbox.trace).
    injected = injected_in(calls, None, docs=tracer.log_path.parent / "docs")
    assert len(injected) == 1, [call.line for call in injected]
    call = injected[0]
    assert call.name == syscall, call.line
    same_thread = [other for other in calls if other.pid == call.pid and other.name == syscall]
    assert same_thread.index(call) == nth - 1, [other.line for other in same_thread]
    assert TEMP_PREFIX in call.args, call.line
    return calls, call


@pytest.mark.parametrize("syscall, nth, code, reported", FAILURES, ids=[f"{f[0]}-{f[2]}" for f in FAILURES])
def test_injected_error_fails_the_save_cleanly_and_a_retry_succeeds(sandbox, syscall, nth, code, reported):
    path = document_file(sandbox)
    before = metadata(path)
    inode = os.stat(path).st_ino
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)

    tracer = sandbox.trace(server, inject=(f"{syscall}:error={code}:when={nth}",))
    reply = server.save(document)
    tracer.detach()
    calls, call = injected_call(tracer, syscall, nth)

    detail = check_failed_save(server, reply, document, code, reported, NEW, path_under=sandbox.docs)
    # The detail names what the user knows: the document's file (the temp file is gone by now, and
    # the message says the file is unchanged), or the directory no file could be created in.
    if syscall == "openat":
        assert detail["path"] == str(sandbox.docs), detail
    else:
        assert detail["path"] == str(path) and "unchanged" in detail["message"], detail
    assert path.read_text() == OLD
    assert metadata(path) == before and os.stat(path).st_ino == inode
    assert leftovers(sandbox.docs) == []
    if syscall == "fsync":
        # A failed fsync is never followed by a rename (nor retried).
        after = [other.line for other in calls if other.pid == call.pid and other.index > call.index]
        assert not [line for line in after if "rename" in line or "fsync(" in line], after

    # The fault is gone: the same session saves, and savingError clears.
    check_saved(server, server.save(document))
    assert path.read_text() == NEW
    assert metadata(path) == before
    assert leftovers(sandbox.docs) == []
    state = server.state(document)
    assert state["state"] == [] and state["hasUnsavedChanges"] is False, state


@pytest.mark.parametrize("code", ["EXDEV", "EBUSY"])
def test_rename_refused_falls_back_to_writing_in_place(sandbox, code):
    path = document_file(sandbox)
    before = metadata(path)
    inode = os.stat(path).st_ino
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)

    tracer = sandbox.trace(server, inject=(f"renameat:error={code}:when=1",))
    reply = server.save(document)
    tracer.detach()
    injected_call(tracer, "renameat", 1)

    result = check_saved(server, reply, method="inPlace")
    assert result["size"] == len(NEW)
    assert path.read_text() == NEW
    assert metadata(path) == before
    assert os.stat(path).st_ino == inode  # written into the file itself
    assert leftovers(sandbox.docs) == []
    assert server.state(document)["hasUnsavedChanges"] is False


def test_failed_directory_fsync_still_saves_but_not_durably(sandbox):
    path = document_file(sandbox)
    before = metadata(path)
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    tracer = sandbox.trace(server, inject=("fsync:error=EIO:when=2",))
    reply = server.save(document)
    tracer.detach()
    calls = tracer.calls()
    # The sandbox's documents beside the tracer's log (conftest.Sandbox.trace).
    injected = injected_in(calls, None, docs=tracer.log_path.parent / "docs")
    assert len(injected) == 1 and injected[0].fd_path(0) == str(sandbox.docs), [call.line for call in injected]
    result = check_saved(server, reply)
    assert result["durable"] is False
    assert path.read_text() == NEW and metadata(path) == before
    assert leftovers(sandbox.docs) == []


# In place (a file with two hard links), the save thread writes a backup copy first: for a 2.5 MiB
# file that is pwrite64 #1-#3, ftruncate #1, fsync #1 (backup), fsync #2 (directory); then the new
# text: pwritev #1-#3, ftruncate #2, fsync #3. A failure there puts the old bytes back from the backup.
BIG_OLD = text("old", 2_500_000)
BIG_NEW = text("new", 2_700_000)
IN_PLACE_FAILURES = [
    ("pwrite64", 1, "ENOSPC", "pwrite", "backup"),  # while copying the backup: the file is untouched
    ("pwritev", 2, "ENOSPC", "pwritev", "file"),  # the file holds about 1 MiB of the new text by then
    ("ftruncate", 2, "EIO", "ftruncate", "file"),
    ("fsync", 3, "EIO", "fsync", "file"),
]


@pytest.mark.parametrize("syscall, nth, code, reported, where", IN_PLACE_FAILURES,
                         ids=[f"{f[0]}-{f[1]}-{f[2]}" for f in IN_PLACE_FAILURES])
def test_failed_in_place_write_restores_the_file(sandbox, syscall, nth, code, reported, where):
    path = write_file(sandbox.docs / "doc.txt", BIG_OLD, mode=0o640, owner=OTHER_OWNER, xattrs={"user.k": b"v"})
    os.link(path, sandbox.docs / "second-name.txt")
    before = metadata(path)
    server = sandbox.start()
    document = server.open_and_edit(path, BIG_NEW)
    tracer = sandbox.trace(server, inject=(f"{syscall}:error={code}:when={nth}",))
    reply = server.save(document)
    tracer.detach()
    injected = injected_in(tracer.calls(), sandbox)
    assert len(injected) == 1, [call.line for call in injected]
    target = injected[0].fd_path(0)
    assert (target.startswith(str(sandbox.docs / ".docsession-backup-")) if where == "backup" else target == str(path)), injected[0].line

    check_failed_save(server, reply, document, code, reported, BIG_NEW, path_under=sandbox.docs)
    assert path.read_text() == BIG_OLD
    assert (sandbox.docs / "second-name.txt").read_text() == BIG_OLD
    assert metadata(path) == before
    assert leftovers(sandbox.docs) == []

    check_saved(server, server.save(document), method="inPlace")
    assert path.read_text() == BIG_NEW and (sandbox.docs / "second-name.txt").read_text() == BIG_NEW
    assert metadata(path) == before
    assert leftovers(sandbox.docs) == []


def test_in_place_write_that_cannot_be_undone_keeps_the_backup_and_names_it(sandbox):
    # Every pwritev from the second piece of the new text on fails, and every pwrite64 after the
    # backup copy's three: the rollback (a pwrite64 copy back from the backup) fails too.
    path = write_file(sandbox.docs / "doc.txt", BIG_OLD)
    os.link(path, sandbox.docs / "second-name.txt")
    server = sandbox.start()
    document = server.open_and_edit(path, BIG_NEW)
    tracer = sandbox.trace(server, inject=("pwritev:error=ENOSPC:when=2+", "pwrite64:error=ENOSPC:when=4+"))
    reply = server.save(document)
    tracer.detach()
    detail = check_failed_save(server, reply, document, "ENOSPC", "pwrite", BIG_NEW, path_under=sandbox.docs)
    backups = leftovers(sandbox.docs)
    assert len(backups) == 1 and backups[0].startswith(".docsession-backup-"), backups
    backup = sandbox.docs / backups[0]
    assert backup.read_text() == BIG_OLD
    assert str(backup) in detail["message"], detail
    # The sweep of the next open leaves a backup alone: it may hold the only whole copy; the open
    # puts that copy back into the file, in place, says so, and only then lets the backup go.
    inode = os.stat(path).st_ino
    info = sandbox.start().open(sandbox.docs / "second-name.txt")
    assert info.get("restoredFromBackup", {}).get("size") == len(BIG_OLD.encode()), info
    assert path.read_text() == BIG_OLD and os.stat(path).st_ino == inode
    assert leftovers(sandbox.docs) == []
