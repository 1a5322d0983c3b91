"""Test list 6: the order of one save's system calls, from an strace log (fds matched by number and
by the path `-y` prints): the directory opened and locked; an exclusive, private (0600) temp file
created beside the target; the bytes written contiguously in 1 MiB pieces; owner, then mode, then
xattrs; the temp file flushed and closed; the rename; then the directory flushed and unlocked.
A save-as to a new file renames with RENAME_NOREPLACE instead and sets 0666 less the umask."""

from __future__ import annotations

import re

from faultkit import OTHER_OWNER, TEMP_PREFIX, check_saved, leftovers, save_thread_calls, text, umask_prefix, uri, write_file

OLD = text("old", 10_000)
NEW = text("new", 2_600_000)  # three pieces of at most 1 MiB
PIECE = 1 << 20
TRACED = ("openat", "pwrite64", "pwritev", "fchown", "fchmod", "fsetxattr", "fsync", "close", "renameat", "renameat2", "flock")


def position(calls, predicate, what: str, after: int = -1) -> int:
    """The index (in `calls`) of the first call after `after` that matches."""
    for index, call in enumerate(calls):
        if index > after and predicate(call):
            return index
    raise AssertionError(f"no {what} after call #{after}:\n" + "\n".join(call.line for call in calls))


def check_temp_creation(calls, directory, directory_fd):
    """The temp file's openat: exclusive, no symlink followed, private, in the target's directory."""
    index = position(calls, lambda c: c.name == "openat" and TEMP_PREFIX in c.args, "temp file openat")
    create = calls[index]
    assert create.fd(0) == directory_fd and create.fd_path(0) == str(directory), create.line
    name = create.arg(1).strip('"')
    assert re.fullmatch(re.escape(TEMP_PREFIX) + "[0-9a-f]+", name), create.line
    flags = set(create.arg(2).split("|"))
    assert {"O_RDWR", "O_CREAT", "O_EXCL", "O_NOFOLLOW", "O_CLOEXEC"} <= flags, create.line
    assert create.arg(3) == "0600", create.line
    temp_fd = create.value
    assert temp_fd is not None and temp_fd >= 0 and create.result_fd_path == f"{directory}/{name}", create.line
    return index, name, temp_fd


def check_writes(calls, temp_fd, start, size) -> int:
    """pwritevs to the temp fd (the rope's chunks gathered, not copied): contiguous from 0 to `size`,
    at most 1,024 pieces and about 1 MiB a call. Answers the index of the last."""
    writes = [(index, call) for index, call in enumerate(calls) if call.name == "pwritev" and call.fd(0) == temp_fd]
    assert writes and writes[0][0] > start
    offset = 0
    for _, call in writes:
        pieces, at = int(call.arg(2)), int(call.arg(3))
        assert at == offset and 0 < pieces <= 1024 and 0 < call.value <= PIECE + 64 * 1024, call.line
        offset += call.value
    assert offset == size
    assert [c for c in calls if c.name in ("pwrite64", "pwritev") and c.fd(0) != temp_fd] == []
    return writes[-1][0]


def test_order_of_a_save_over_an_existing_file(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o640, owner=OTHER_OWNER, xattrs={"user.k": b"v"})
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    tracer = sandbox.trace(server, trace=TRACED)
    result = check_saved(server, server.save(document))
    tracer.detach()
    calls = save_thread_calls(tracer.calls(), sandbox.docs)
    directory = str(sandbox.docs)

    opened = position(calls, lambda c: c.name == "openat" and c.arg(0).startswith("AT_FDCWD") and c.arg(1) == f'"{directory}"', "directory open")
    assert "O_DIRECTORY" in calls[opened].arg(2)
    directory_fd = calls[opened].value
    locked = position(calls, lambda c: c.name == "flock" and c.fd(0) == directory_fd and "LOCK_EX" in c.args, "LOCK_EX", opened)
    created, name, temp_fd = check_temp_creation(calls, sandbox.docs, directory_fd)
    assert created > locked
    last_write = check_writes(calls, temp_fd, created, result["size"])
    on_temp = lambda syscall: (lambda c: c.name == syscall and c.fd(0) == temp_fd)  # noqa: E731
    chowned = position(calls, on_temp("fchown"), "fchown of the temp file", last_write)
    assert calls[chowned].args.endswith(f"{OTHER_OWNER[0]}, {OTHER_OWNER[1]}"), calls[chowned].line
    chmodded = position(calls, on_temp("fchmod"), "fchmod of the temp file", chowned)
    assert calls[chmodded].arg(1) == "0640", calls[chmodded].line
    attributes = position(calls, on_temp("fsetxattr"), "fsetxattr of the temp file", chmodded)
    flushed = position(calls, on_temp("fsync"), "fsync of the temp file", attributes)
    closed = position(calls, on_temp("close"), "close of the temp file", flushed)
    renamed = position(calls, lambda c: c.name == "renameat", "renameat", closed)
    rename = calls[renamed]
    assert (rename.fd(0), rename.arg(1), rename.fd(2), rename.arg(3)) == (directory_fd, f'"{name}"', directory_fd, '"doc.txt"'), rename.line
    assert rename.value == 0
    directory_flushed = position(calls, lambda c: c.name == "fsync" and c.fd(0) == directory_fd, "fsync of the directory", renamed)
    unlocked = position(calls, lambda c: c.name == "flock" and c.fd(0) == directory_fd and "LOCK_UN" in c.args, "LOCK_UN", directory_flushed)
    position(calls, lambda c: c.name == "close" and c.fd(0) == directory_fd, "close of the directory", unlocked)
    # Nothing but those: no second rename, no fsync of anything else, no other file created.
    assert [c.name for c in calls if c.name.startswith("rename")] == ["renameat"]
    assert [c.index for c in calls if c.name == "fsync"] == [calls[flushed].index, calls[directory_flushed].index]
    assert path.read_text() == NEW and leftovers(sandbox.docs) == []


def test_order_of_a_save_as_to_a_new_file(sandbox):
    source = write_file(sandbox.docs / "source.txt", OLD)
    target = sandbox.docs / "new.txt"
    server = sandbox.start(umask_prefix(0o027))
    document = server.open_and_edit(source, NEW)
    tracer = sandbox.trace(server, trace=TRACED)
    result = check_saved(server, server.save(document, to=uri(target)))
    tracer.detach()
    calls = save_thread_calls(tracer.calls(), sandbox.docs)

    opened = position(calls, lambda c: c.name == "openat" and c.arg(1) == f'"{sandbox.docs}"', "directory open")
    directory_fd = calls[opened].value
    created, name, temp_fd = check_temp_creation(calls, sandbox.docs, directory_fd)
    last_write = check_writes(calls, temp_fd, created, result["size"])
    assert not [c for c in calls if c.name == "fchown"], "a new file of ours needs no chown"
    chmodded = position(calls, lambda c: c.name == "fchmod" and c.fd(0) == temp_fd, "fchmod", last_write)
    assert calls[chmodded].arg(1) == "0640", calls[chmodded].line  # 0666 & ~027
    flushed = position(calls, lambda c: c.name == "fsync" and c.fd(0) == temp_fd, "fsync of the temp file", chmodded)
    closed = position(calls, lambda c: c.name == "close" and c.fd(0) == temp_fd, "close of the temp file", flushed)
    renamed = position(calls, lambda c: c.name == "renameat2", "renameat2", closed)
    assert calls[renamed].arg(1) == f'"{name}"' and calls[renamed].arg(3) == '"new.txt"', calls[renamed].line
    assert calls[renamed].arg(4) == "RENAME_NOREPLACE", calls[renamed].line
    position(calls, lambda c: c.name == "fsync" and c.fd(0) == directory_fd, "fsync of the directory", renamed)
    assert target.read_text() == NEW and source.read_text() == OLD and leftovers(sandbox.docs) == []
