"""Test list 1: a save changes the content and nothing else a user can see: mode (setgid too), owner,
xattrs, ACLs, symlinks (relative, chained, dangling), hard links; a new file gets 0666 less the
umask; a symlink loop fails cleanly. No temp or backup file is left anywhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from faultkit import (
    OTHER_OWNER, check_failed_save, check_saved, getfacl, leftovers, metadata, umask_prefix, uri, write_file,
)

OLD = "old line one\nold line two\n"
NEW = "new text, longer than the old one\nsecond line\nthird line\n"


def edit_and_save(server, path: Path, method: str = "rename") -> dict:
    document = server.open_and_edit(path, NEW)
    return check_saved(server, server.save(document), method=method)


def assert_saved_in_place_of(path: Path, before) -> None:
    """Content new, everything else as before, nothing left beside it."""
    assert path.read_text() == NEW
    assert metadata(path) == before
    assert leftovers(path.parent) == []


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755], ids=["0600", "0640", "0755"])
def test_mode_is_kept(sandbox, mode):
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=mode)
    before = metadata(path)
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)
    assert before.mode == oct(mode)


def test_setgid_mode_and_group_are_kept_in_a_setgid_directory(sandbox):
    directory = sandbox.docs / "shared"
    directory.mkdir()
    os.chown(directory, 0, OTHER_OWNER[1])
    os.chmod(directory, 0o2775)
    path = write_file(directory / "doc.txt", OLD)
    os.chmod(path, 0o2775)
    before = metadata(path)
    assert before.mode == oct(0o2775) and before.gid == OTHER_OWNER[1]
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)


def test_owner_and_group_are_kept(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD, owner=OTHER_OWNER, mode=0o664)
    before = metadata(path)
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)
    assert (before.uid, before.gid) == OTHER_OWNER


def test_setuid_mode_of_another_owners_file_is_kept(sandbox):
    # chown clears setuid: the mode must be set after the owner.
    path = write_file(sandbox.docs / "tool", OLD, owner=OTHER_OWNER, mode=0o4755)
    before = metadata(path)
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)
    assert before.mode == oct(0o4755)


def test_unprivileged_server_writes_another_owners_file_in_place(sandbox):
    # nobody cannot give a new file root's ownership, so it writes into the file (owner kept).
    directory = sandbox.docs / "sticky"
    directory.mkdir()
    os.chmod(directory, 0o1777)
    path = write_file(directory / "doc.txt", OLD, mode=0o666)  # root's, writable by all
    before = metadata(path)
    server = sandbox.start(("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    edit_and_save(server, path, method="inPlace")
    assert_saved_in_place_of(path, before)
    assert (before.uid, before.gid) == (0, 0)


def test_user_xattrs_are_kept(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD)
    subprocess.run(["setfattr", "-n", "user.comment", "-v", "a note", str(path)], check=True)
    subprocess.run(["setfattr", "-n", "user.binary", "-v", "0x00ff00fe", str(path)], check=True)
    before = metadata(path)
    assert dict(before.xattrs) == {"user.binary": b"\x00\xff\x00\xfe", "user.comment": b"a note"}
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)


def test_posix_acl_is_kept(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o640)
    subprocess.run(["setfacl", "-m", "u:1234:rw", str(path)], check=True)
    acl = getfacl(path)
    assert "user:1234:rw-" in acl
    before = metadata(path)
    edit_and_save(sandbox.start(), path)
    assert_saved_in_place_of(path, before)
    assert getfacl(path) == acl


@pytest.mark.parametrize("mask, mode", [(0o077, 0o600), (0o002, 0o664)], ids=["umask077", "umask002"])
def test_new_file_of_save_as_gets_0666_less_the_umask(sandbox, mask, mode):
    source = write_file(sandbox.docs / "source.txt", OLD)
    target = sandbox.docs / "new.txt"
    server = sandbox.start(umask_prefix(mask))
    document = server.open_and_edit(source, NEW)
    result = check_saved(server, server.save(document, to=uri(target)))
    assert result["uri"] == uri(target)
    assert target.read_text() == NEW
    assert oct(os.stat(target).st_mode & 0o7777) == oct(mode)
    assert source.read_text() == OLD
    assert leftovers(sandbox.docs) == []


@pytest.mark.parametrize("mask", [0o022, 0o077], ids=["umask022", "umask077"])
def test_new_file_of_save_as_in_a_directory_with_a_default_acl_gets_what_touch_gets(sandbox, mask):
    # With a default ACL the kernel ignores the umask: a new file takes the default ACL, masked by
    # the mode asked for (0666). `touch`, a shell redirection and document/create all agree; so must
    # a save-as (KNOWN BUG, see README.md: it applies the umask and gets mask::r--).
    directory = sandbox.docs / "team"
    directory.mkdir()
    subprocess.run(["setfacl", "-d", "-m", "u:1234:rw,g::rw,o::r", str(directory)], check=True)
    subprocess.run(["sh", "-c", f'umask {mask:03o} && touch "$0"', str(directory / "touched.txt")], check=True)
    expected_mode = oct(os.stat(directory / "touched.txt").st_mode & 0o7777)
    expected_acl = getfacl(directory / "touched.txt")
    source = write_file(sandbox.docs / "source.txt", OLD)
    target = directory / "saved.txt"
    server = sandbox.start(umask_prefix(mask))
    document = server.open_and_edit(source, NEW)
    check_saved(server, server.save(document, to=uri(target)))
    assert target.read_text() == NEW
    found_mode, found_acl = oct(os.stat(target).st_mode & 0o7777), getfacl(target)
    assert (found_mode, found_acl) == (expected_mode, expected_acl), (
        f"save-as made {found_mode}:\n{found_acl}touch made {expected_mode}:\n{expected_acl}")


def test_relative_symlink_stays_a_link_and_its_target_changes(sandbox):
    real = write_file(sandbox.docs / "real.txt", OLD, mode=0o640)
    link = sandbox.docs / "link.txt"
    link.symlink_to("real.txt")
    before = metadata(real)
    edit_and_save(sandbox.start(), link)
    assert link.is_symlink() and os.readlink(link) == "real.txt"
    assert_saved_in_place_of(real, before)


def test_chain_of_three_symlinks(sandbox):
    for name in "abc":
        (sandbox.docs / name).mkdir()
    real = write_file(sandbox.docs / "c" / "real.txt", OLD, mode=0o640, xattrs={"user.k": b"v"})
    first, second, third = sandbox.docs / "a" / "l1", sandbox.docs / "b" / "l2", sandbox.docs / "c" / "l3"
    first.symlink_to("../b/l2")  # relative, into another directory
    second.symlink_to(third)  # absolute
    third.symlink_to("real.txt")  # relative, beside the file
    links = {link: os.readlink(link) for link in (first, second, third)}
    before = metadata(real)
    edit_and_save(sandbox.start(), first)
    assert {link: os.readlink(link) for link in links if link.is_symlink()} == links
    assert_saved_in_place_of(real, before)
    for name in "ab":
        assert leftovers(sandbox.docs / name) == []


def test_save_as_to_a_dangling_symlink_creates_its_target(sandbox):
    source = write_file(sandbox.docs / "source.txt", OLD)
    link = sandbox.docs / "link.txt"
    link.symlink_to("missing.txt")
    server = sandbox.start(umask_prefix(0o022))
    document = server.open_and_edit(source, NEW)
    check_saved(server, server.save(document, to=uri(link)))
    assert link.is_symlink() and os.readlink(link) == "missing.txt"
    target = sandbox.docs / "missing.txt"
    assert target.read_text() == NEW
    assert oct(os.stat(target).st_mode & 0o7777) == oct(0o644)
    assert source.read_text() == OLD
    assert leftovers(sandbox.docs) == []


def test_symlink_whose_target_vanished_recreates_the_target(sandbox):
    real = write_file(sandbox.docs / "real.txt", OLD)
    link = sandbox.docs / "link.txt"
    link.symlink_to("real.txt")
    server = sandbox.start()
    document = server.open_and_edit(link, NEW)
    real.unlink()  # now dangling
    check_saved(server, server.save(document))
    assert link.is_symlink() and os.readlink(link) == "real.txt"
    assert real.read_text() == NEW
    assert leftovers(sandbox.docs) == []


@pytest.mark.parametrize("how", ["save", "saveAs"])
def test_symlink_loop_fails_with_eloop_and_keeps_the_buffer(sandbox, how):
    real = write_file(sandbox.docs / "real.txt", OLD)
    link, other = sandbox.docs / "loop1", sandbox.docs / "loop2"
    server = sandbox.start()
    if how == "save":
        # The document's own path becomes a loop after it was opened.
        link.symlink_to("real.txt")
        document = server.open_and_edit(link, NEW)
        link.unlink()
        link.symlink_to("loop2")
        other.symlink_to("loop1")
        reply = server.save(document)
    else:
        link.symlink_to("loop2")
        other.symlink_to("loop1")
        document = server.open_and_edit(real, NEW)
        reply = server.save(document, to=uri(link))
    check_failed_save(server, reply, document, "ELOOP", None, NEW, path_under=sandbox.docs)
    assert os.readlink(link) == "loop2" and os.readlink(other) == "loop1"
    assert real.read_text() == OLD
    assert leftovers(sandbox.docs) == []


def test_hard_link_is_written_in_place_and_both_names_see_the_new_content(sandbox):
    path = write_file(sandbox.docs / "doc.txt", OLD, mode=0o640, owner=OTHER_OWNER, xattrs={"user.k": b"v"})
    other = sandbox.docs / "other-name.txt"
    os.link(path, other)
    before = metadata(path)
    inode = os.stat(path).st_ino
    assert before.nlink == 2
    result = edit_and_save(sandbox.start(), path, method="inPlace")
    assert result["size"] == len(NEW)
    assert_saved_in_place_of(path, before)
    assert other.read_text() == NEW
    assert os.stat(path).st_ino == os.stat(other).st_ino == inode
