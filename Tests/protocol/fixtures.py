"""The scratch directory the document examples and transcripts of the specification rely on.

protocol/README.md (§8.1) and the examples of protocol/openrpc.json name files in
/tmp/docsession-protocol-fixtures/. `make_fixtures()` deletes that directory and creates it afresh
with exactly the files listed in FILES (and the symbolic link in LINKS), every one with the
modification time FIXTURE_DATE, so that what the server answers about them is deterministic, and
the hard links in HARD_LINKS. `change_fixture()` and `delete_fixture()` play another program that
changes a file behind the server's back (the transcript directives `(file NAME now holds "TEXT")`
and `(file NAME deleted)`, README §1), `move_fixture()` one that renames or moves it (`(file NAME
moved to NAME2)`), `chmod_fixture()` one that changes its permission bits (`(file NAME mode MODE)`).

Several test runs on one machine would share the directory, so a run holds an exclusive lock on
LOCK_PATH from start to end (see conftest.py): a second run waits for the first.
Standard library only.
"""

from __future__ import annotations

import calendar
import fcntl
import os
import shutil
from pathlib import Path
from typing import IO

ROOT = Path("/tmp/docsession-protocol-fixtures")
ROOT_URI = "file:///tmp/docsession-protocol-fixtures/"
LOCK_PATH = Path("/tmp/docsession-protocol-fixtures.lock")

# 2026-01-02T03:04:05.678Z, the modification time of every fixture file.
FIXTURE_DATE = "2026-01-02T03:04:05.678Z"
FIXTURE_NS = calendar.timegm((2026, 1, 2, 3, 4, 5, 0, 0, 0)) * 1_000_000_000 + 678_000_000

# The file big.txt: 40 960 lines of 63 "x" and a line feed, 2 621 440 bytes (2.5 MiB). The server
# reads files in pieces of 1 MiB, so opening it reports progress at 40 %, 80 % and 100 %.
BIG_LINES = 40960
BIG_TEXT = ("x" * 63 + "\n") * BIG_LINES

FILES: dict[str, bytes] = {
    # UTF-8, LF line endings.
    "notes.txt": b"Hello, world!\nSecond line\n",
    # UTF-8, CRLF line endings.
    "crlf.txt": b"one\r\ntwo\r\n",
    # UTF-8 with a character outside the BMP (two UTF-16 code units, four UTF-8 bytes) and an é.
    "emoji.txt": "a\U0001F600b\ncaf\u00e9\n".encode("utf-8"),
    # UTF-16 little-endian with a byte order mark.
    "utf16.txt": b"\xff\xfe" + "h\u00e9llo\n".encode("utf-16-le"),
    # ISO 8859-1: byte 0xE9 is é there, and not valid UTF-8.
    "latin1.txt": b"caf\xe9\n",
    "big.txt": BIG_TEXT.encode("ascii"),
    # A file with two names (see HARD_LINKS): a save keeps its inode ("method": "inPlace").
    "shared.txt": b"Shared\n",
}

# name -> target: a second path for notes.txt.
LINKS: dict[str, str] = {"link.txt": "notes.txt"}

# name -> existing file: a hard link, a second name of the same inode.
HARD_LINKS: dict[str, str] = {"shared-link.txt": "shared.txt"}

# Empty directories: the storage locations of the examples of §11.8 (a query lists files only).
DIRECTORIES: list[str] = ["local", "synced"]


def uri(name: str) -> str:
    return ROOT_URI + name


def make_fixtures() -> Path:
    """Deletes the fixture directory and creates it afresh; answers its path."""
    if ROOT.is_symlink() or ROOT.is_file():
        ROOT.unlink()
    elif ROOT.exists():
        shutil.rmtree(ROOT)
    ROOT.mkdir(mode=0o755)
    for name, content in FILES.items():
        path = ROOT / name
        path.write_bytes(content)
        os.utime(path, ns=(FIXTURE_NS, FIXTURE_NS))
    for name, target in LINKS.items():
        os.symlink(target, ROOT / name)
    for name, target in HARD_LINKS.items():
        os.link(ROOT / target, ROOT / name)
    for name in DIRECTORIES:
        (ROOT / name).mkdir(mode=0o755)
    return ROOT


def fixture_path(name: str) -> Path:
    """A file of the fixture directory by its name, or its path relative to the directory (no
    dot-dot, nothing absolute: a move may have taken a file into a subdirectory)."""
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"not a path under the fixture directory: {name!r}")
    return ROOT.joinpath(*parts)


def change_fixture(name: str, text: str) -> None:
    """Writes `text` (UTF-8) over the content of an existing fixture file, in place (same inode),
    as another program would: its size, modification and status-change times change."""
    path = fixture_path(name)
    if not path.is_file():
        raise FileNotFoundError(path)
    with open(path, "r+b") as out:
        out.write(text.encode("utf-8"))
        out.truncate()


def create_fixture(name: str, text: str) -> None:
    """Makes a new file `name` in the fixture directory holding `text` (UTF-8), as a sync tool
    does: written under a temporary name, then renamed in."""
    path = fixture_path(name)
    if path.exists():
        raise FileExistsError(path)
    temp = path.with_name(".incoming-" + path.name)
    temp.write_bytes(text.encode("utf-8"))
    os.rename(temp, path)


def move_fixture(name: str, to: str) -> None:
    """Renames a fixture file, as another program would (`mv`, one rename(2)): `to` is a path under
    the fixture directory, whose missing directories are made first."""
    source = fixture_path(name)
    target = fixture_path(to)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)


def chmod_fixture(name: str, mode: int) -> None:
    """Changes the permission bits of a fixture file, as `chmod` would: only its status-change time
    moves, its content and modification time stay."""
    os.chmod(fixture_path(name), mode)


def delete_fixture(name: str) -> None:
    """Deletes a fixture file, as another program would."""
    fixture_path(name).unlink()


def lock() -> IO[bytes]:
    """Takes the exclusive lock on the fixture directory; it is held until the answer is closed."""
    handle = open(LOCK_PATH, "ab")
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    return handle
