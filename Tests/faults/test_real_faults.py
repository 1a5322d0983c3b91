"""Test list 4: real faults, no strace: a file-size limit (EFBIG), dropped privileges (EACCES; root
ignores permission bits, so these run the server as nobody), an immutable file (EPERM), and, in a
mount namespace of its own, a full tmpfs (ENOSPC), a read-only bind mount (EROFS) and a single file
bind-mounted over the document (EBUSY from rename: written in place).

Skips (with the reason printed): chattr where the file system has no immutable flag (overlayfs,
tmpfs); the namespace tests where `unshare -m` or mounting is forbidden (an unprivileged container).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from faultkit import NOBODY, check_failed_save, check_saved, leftovers, metadata, text, uri, wait_until, write_file

OLD = "old line one\nold line two\n"
NEW = "new text\n" * 20


def effective_uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Uid:"):
                return int(line.split()[2])
    raise AssertionError("no Uid line")


# -- EFBIG -------------------------------------------------------------------------------------------


def test_file_size_limit_gives_efbig_and_the_server_survives(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    big = text("new", 4096)
    server = sandbox.start(("prlimit", "--fsize=1024:unlimited", "--"))
    document = server.open_and_edit(path, big)
    reply = server.save(document)
    check_failed_save(server, reply, document, "EFBIG", "pwritev", big, path_under=sandbox.docs)
    assert server.alive(), "SIGXFSZ killed the server"
    assert path.read_text() == OLD
    assert leftovers(sandbox.docs) == []
    # The (soft) limit lifted, the same session saves. (Raising a hard limit needs CAP_SYS_RESOURCE,
    # which a container may lack.)
    subprocess.run(["prlimit", "--pid", str(server.pid), "--fsize=unlimited"], check=True)
    check_saved(server, server.save(document))
    assert path.read_text() == big


# -- EACCES as nobody --------------------------------------------------------------------------------

AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


def test_unprivileged_server_refuses_a_file_it_can_read_but_not_write(sandbox):
    directory = sandbox.docs / "world-writable"
    directory.mkdir()
    os.chmod(directory, 0o777)
    path = write_file(directory / "doc.txt", OLD, mode=0o644)  # root's
    before = metadata(path)
    server = sandbox.start(AS_NOBODY)
    assert effective_uid(server.pid) == NOBODY
    document = server.open_and_edit(path, NEW)
    detail = check_failed_save(server, server.save(document), document, "EACCES", "faccessat", NEW)
    assert detail["path"] == str(path)
    assert path.read_text() == OLD and metadata(path) == before
    assert leftovers(directory) == []


def test_unprivileged_server_in_a_directory_it_cannot_write_explains_the_directory(sandbox):
    directory = sandbox.docs / "locked"
    directory.mkdir()
    os.chmod(directory, 0o755)  # root's: nobody cannot create the temp file
    path = write_file(directory / "doc.txt", OLD, mode=0o644, owner=(NOBODY, NOBODY))
    before = metadata(path)
    server = sandbox.start(AS_NOBODY)
    assert effective_uid(server.pid) == NOBODY
    document = server.open_and_edit(path, NEW)
    detail = check_failed_save(server, server.save(document), document, "EACCES", None, NEW)
    # The path is the directory itself, or the temp file that could not be made in it.
    assert detail["path"] == str(directory) or os.path.dirname(detail["path"]) == str(directory), detail
    assert "directory" in detail["message"], detail
    assert path.read_text() == OLD and metadata(path) == before
    assert leftovers(directory) == []


# -- EPERM: immutable --------------------------------------------------------------------------------


def test_immutable_file_gives_eperm(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    if not sandbox.make_immutable(path):
        pytest.skip(f"chattr +i refused on {sandbox.docs} (the file system has no immutable flag: tmpfs, overlayfs?)")
    server = sandbox.start()
    document = server.open_and_edit(path, NEW)
    detail = check_failed_save(server, server.save(document), document, "EPERM", None, NEW, path_under=sandbox.docs)
    assert detail["path"] == str(path)
    assert path.read_text() == OLD
    assert leftovers(sandbox.docs) == []


# -- a mount namespace of the server's own -----------------------------------------------------------

_namespace_refusal: list[str] = []


def namespaces_refused() -> str | None:
    """Why `unshare -m` with a tmpfs mount does not work here, or None when it does (asked once)."""
    if not _namespace_refusal:
        probe = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
            capture_output=True, text=True)
        _namespace_refusal.append("" if probe.returncode == 0 else
                                  f"unshare -m / mount is forbidden in this sandbox: {probe.stderr.strip() or probe.returncode}")
    return _namespace_refusal[0] or None


def start_in_namespace(sandbox, setup: str):
    """A server in a new mount namespace after the shell commands `setup` ran in it."""
    reason = namespaces_refused()
    if reason:
        pytest.skip(reason)
    return sandbox.start(("unshare", "-m", "--propagation", "private", "sh", "-c", f'set -e; {setup}; exec "$0"'))


def in_namespace(server, path: Path) -> Path:
    """`path` as the server sees it (its mounts), from outside."""
    return Path(f"/proc/{server.pid}/root{path}")


def nsenter(server, *command: str) -> None:
    subprocess.run(["nsenter", "-t", str(server.pid), "-m", *command], check=True, capture_output=True)


def test_full_tmpfs_gives_enospc_and_a_retry_after_freeing_space_succeeds(sandbox):
    directory = sandbox.docs / "small"
    directory.mkdir()
    path = directory / "doc.txt"
    quoted = shlex.quote(str(directory))
    server = start_in_namespace(sandbox, f"mount -t tmpfs -o size=64k tmpfs {quoted}; printf 'old\\n' > {quoted}/doc.txt")
    big = text("new", 256 * 1024)
    document = server.open_and_edit(path, big)
    check_failed_save(server, server.save(document), document, "ENOSPC", "pwritev", big, path_under=directory)
    seen = in_namespace(server, path)
    assert seen.read_text() == "old\n"
    assert leftovers(seen.parent) == []
    # More space: the same session saves.
    nsenter(server, "mount", "-o", "remount,size=1m", str(directory))
    check_saved(server, server.save(document))
    assert seen.read_text() == big
    assert leftovers(seen.parent) == []
    assert not path.exists()  # the tmpfs was the server's alone


def test_read_only_bind_mount_gives_erofs(sandbox):
    directory = sandbox.docs / "readonly"
    directory.mkdir()
    path = write_file(directory / "doc.txt", OLD)
    quoted = shlex.quote(str(directory))
    server = start_in_namespace(sandbox, f"mount --bind {quoted} {quoted}; mount -o remount,bind,ro {quoted}")
    document = server.open_and_edit(path, NEW)
    detail = check_failed_save(server, server.save(document), document, "EROFS", None, NEW, path_under=directory)
    assert path.read_text() == OLD
    assert leftovers(directory) == []
    # Read-write again: the same session saves.
    nsenter(server, "mount", "-o", "remount,bind,rw", str(directory))
    check_saved(server, server.save(document))
    assert path.read_text() == NEW
    assert detail["path"] == str(path) or os.path.dirname(detail["path"]) == str(directory)


def test_bind_mounted_single_file_is_written_in_place(sandbox):
    # rename() over a mount point fails with EBUSY: the save writes into the file instead.
    directory = sandbox.docs / "mounted"
    directory.mkdir()
    path = write_file(directory / "doc.txt", "the file under the mount\n")
    source = write_file(sandbox.root / "source.txt", OLD, mode=0o640, xattrs={"user.k": b"v"})
    before = metadata(source)
    server = start_in_namespace(sandbox, f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(path))}")
    document = server.open_and_edit(path, NEW)
    check_saved(server, server.save(document), method="inPlace")
    assert source.read_text() == NEW and metadata(source) == before
    assert in_namespace(server, path).read_text() == NEW
    assert path.read_text() == "the file under the mount\n"
    assert leftovers(directory) == []


# -- issue 34.8: files larger than the server can hold -------------------------------------------------

EIGHT_GB = 8 << 30
UNDER_3GB = ("prlimit", "--as=3000000000", "--")


def sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes taking no disk space (`truncate -s`): zeros, which decode as text."""
    subprocess.run(["truncate", "-s", str(size), str(path)], check=True)
    return path


def check_too_large(error: dict, path: Path, size: int, limit: int | None = None) -> int:
    """-32010, EFBIG from fstat, naming the file, its size and the limit; answers the limit."""
    assert error["code"] == -32010, error
    detail = error["data"]
    assert detail["code"] == "EFBIG" and detail["syscall"] == "fstat" and detail["path"] == str(path), detail
    assert detail["size"] == size and detail["limit"] < size, detail
    if limit is not None:
        assert detail["limit"] == limit, detail
    assert f"the file is {size} bytes" in error["message"] and f"limit of {detail['limit']} bytes" in error["message"], error
    assert detail["recoverable"] is False, detail
    return detail["limit"]


def test_an_open_of_a_file_over_the_size_limit_is_refused_and_the_server_survives(sandbox):
    """An 8 GB (sparse) file opened by a server under a 3 GB address-space limit: before issue
    34.8 the read's allocation failed and the server aborted; now the open is refused after
    fstat, naming the size and the limit (derived from memory: under a quarter of the 3 GB)."""
    big = sparse(sandbox.docs / "big.txt", EIGHT_GB)
    small = write_file(sandbox.docs / "small.txt", OLD)
    server = sandbox.start(UNDER_3GB)
    reply = server.request("document/open", {"uri": uri(big), "includeText": False}, timeout=120)
    assert "error" in reply.response, reply.response
    limit = check_too_large(reply.error, big, EIGHT_GB)
    assert limit <= 3_000_000_000 // 4, limit
    assert server.alive()
    assert server.read(server.open(small)["document"]) == OLD


def test_a_file_grown_past_the_limit_is_too_large_for_the_document_not_a_crash(sandbox):
    """Another program grows an open document's file to 8 GB: the watcher's reload refuses it, and
    the document says so (`tooLarge` with `inConflict`, reason externalChange, the EFBIG detail);
    it keeps its text. A revert is refused the same way. When the file is small again, the next
    reload clears both."""
    path = write_file(sandbox.docs / "doc.txt", OLD)
    server = sandbox.start(UNDER_3GB)
    info = server.open(path)
    document = info["document"]
    sparse(path, EIGHT_GB)

    def reported() -> dict | None:
        assert server.alive(), "the reload of the grown file killed the server"
        server.state(document)  # the notifications before its answer are collected
        return next((n["params"] for n in server.notifications if n["method"] == "document/stateChanged"), None)

    change = wait_until(reported, what="the reload's stateChanged", timeout=120)
    assert change["reason"] == "externalChange" and change["state"] == ["inConflict", "tooLarge"], change
    assert change["error"]["code"] == "EFBIG" and change["error"]["size"] == EIGHT_GB, change
    assert server.state(document)["state"] == ["inConflict", "tooLarge"]
    assert server.read(document) == OLD
    reverted = server.request("document/revert", {"document": document}, timeout=120)
    assert "error" in reverted.response, reverted.response
    check_too_large(reverted.error, path, EIGHT_GB)
    assert server.alive()
    # The failed revert set savingError (a revert's failure, §8.16), which stays until one succeeds.
    assert server.state(document)["state"] == ["inConflict", "savingError", "tooLarge"]
    # Small again, with the document's text: back in sync, both flags cleared.
    os.truncate(path, 0)
    path.write_text(OLD)
    wait_until(lambda: server.state(document)["state"] == ["savingError"], what="the flags cleared by the next reload", timeout=60)
    assert server.read(document) == OLD


@pytest.mark.parametrize("how", ["option", "initializationOptions"])
def test_the_size_limit_is_a_server_option_and_an_initialization_option(sandbox, how):
    """--max-file-size and initializationOptions.maxFileSize set the limit: an open, a kept
    version (document/readVersion) and a package entry over it are refused, naming it."""
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", OLD)
    # A server without the limit keeps a version of 3000 bytes, then saves the small text again.
    first = sandbox.start(args=("serve", "--state-dir", str(state), "--no-file-locks"))
    document = first.open(path)["document"]
    for content in ("x" * 2999 + "\n", OLD):
        first.replace_text(document, first.state(document)["version"], content)
        assert first.save(document).ok
    wait_until(lambda: len(first.call("document/versions", {"document": document})["versions"]) == 2, what="two versions")
    first.shutdown()
    package = sandbox.docs / "p.textbundle"
    package.mkdir()
    (package / "text.md").write_text("y" * 3000)
    big = write_file(sandbox.docs / "big.txt", "z" * 3000)
    if how == "option":
        server = sandbox.start(args=("serve", "--state-dir", str(state), "--no-file-locks", "--max-file-size", "2K"))
    else:
        server = sandbox.start(args=("serve", "--state-dir", str(state), "--no-file-locks"),
                               initialization={"initializationOptions": {"maxFileSize": 2048}})
    check_too_large(server.request("document/open", {"uri": uri(big)}).error, big, 3000, 2048)
    document = server.open(path)["document"]
    versions = server.call("document/versions", {"document": document})["versions"]
    [large] = [v for v in versions if v["size"] == 3000]
    refused = server.request("document/readVersion", {"document": document, "id": large["id"]})
    assert refused.error["code"] == -32010 and refused.error["data"]["size"] == 3000 and refused.error["data"]["limit"] == 2048, refused.response
    handle = server.call("document/open", {"uri": uri(package)})["document"]
    entry = server.request("document/readEntry", {"document": handle, "path": "text.md"})
    assert entry.error["data"]["size"] == 3000 and entry.error["data"]["limit"] == 2048, entry.response
    assert server.alive()
