"""Undo that survives (`initializationOptions.persistUndo`, protocol/README.md §8.22), end to end over
stdio with the built binary: servers started one after another on one state directory
(`--state-dir`), each editing, saving and closing, or opening and undoing.

The undo file of a path is `<state>/undo/<XXH64 of the path, 16 hex digits>.undo`; the tests find it
by listing the directory (one document per test), not by hashing.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from rpc_client import RpcClient, binary_path, wait_until as wait_for

PERSIST = {"initializationOptions": {"persistUndo": True}}


def need_binary() -> Path:
    path = binary_path()
    if not path.is_file():
        pytest.skip(f"server binary {path} is missing: run `swift build` or set DOCSESSION_BIN")
    return path


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory of the test's own: `docs/` for the files, `state/` for the servers' state."""
    root = Path(tempfile.mkdtemp(prefix="docsession-undo-test-"))
    (root / "docs").mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def uri(path: Path) -> str:
    return "file://" + str(path)


def start(place: Path, options: dict[str, Any] | None = PERSIST) -> RpcClient:
    client = RpcClient(need_binary(), args=("--state-dir", str(place / "state")))
    client.capabilities = client.initialize(options or {})["capabilities"]
    client.notify("initialized")
    return client


def undo_files(place: Path) -> list[Path]:
    directory = place / "state" / "undo"
    return sorted(p for p in directory.iterdir() if p.name.endswith(".undo")) if directory.is_dir() else []


def edit(client: RpcClient, document: str, version: int, line: int, new: str, label: str) -> int:
    at = {"line": line, "character": 0}
    result = client.call("document/edit", {"document": document, "version": version,
                                           "edits": [{"range": {"start": at, "end": at}, "text": new}],
                                           "undo": {"label": label}})
    return result["version"]


def state(client: RpcClient, document: str) -> dict[str, Any]:
    return client.call("document/state", {"document": document})


def read(client: RpcClient, document: str) -> str:
    return client.call("document/read", {"document": document})["text"]


def edit_save_close(place: Path, path: Path, ending: str = "shutdown") -> None:
    """A server that opens `path`, makes two labelled steps, saves, makes a third it never saves,
    closes without saving, and ends (`shutdown`, or the end of its input)."""
    client = start(place)
    try:
        assert client.capabilities["persistUndo"] is True
        document = client.call("document/open", {"uri": uri(path), "includeText": False})["document"]
        version = edit(client, document, 1, 1, "two\n", "Second")
        version = edit(client, document, version, 2, "three\n", "Third")
        client.call("document/save", {"document": document})
        edit(client, document, version, 0, "draft ", "Draft")
        assert client.call("document/close", {"document": document, "save": "never"}) is not None
        if ending == "shutdown":
            assert client.shutdown_and_exit() == 0
        else:
            client.close_input()
            assert client.wait() == 1
    finally:
        client.kill()


@pytest.mark.parametrize("ending", ["shutdown", "endOfInput"])
def test_undo_goes_back_through_an_earlier_server(place: Path, ending: str) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\n")
    edit_save_close(place, path, ending)
    assert path.read_text() == "one\ntwo\nthree\n"
    (kept,) = undo_files(place)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert kept.read_bytes().startswith(b"DSUNDO1\n")

    client = start(place)
    try:
        info = client.call("document/open", {"uri": uri(path), "includeText": False})
        document = info["document"]
        assert (info["version"], info["hasUnsavedChanges"]) == (1, False)
        now = state(client, document)
        assert (now["canUndo"], now["canRedo"], now["undoLabel"]) == (True, False, "Third"), now
        undone = client.call("document/undo", {"document": document, "version": 1})
        assert undone["version"] == 2
        assert read(client, document) == "one\ntwo\n"
        assert state(client, document)["undoLabel"] == "Second"
        client.call("document/undo", {"document": document})
        assert read(client, document) == "one\n"
        now = state(client, document)
        assert (now["canUndo"], now["canRedo"], now["hasUnsavedChanges"]) == (False, True, True), now
        # Redo all the way: the file's text, clean.
        client.call("document/redo", {"document": document})
        client.call("document/redo", {"document": document})
        assert read(client, document) == "one\ntwo\nthree\n"
        assert state(client, document)["hasUnsavedChanges"] is False
        assert client.shutdown_and_exit() == 0
    finally:
        client.kill()


def test_off_by_default_and_the_file_is_left_alone(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\n")
    edit_save_close(place, path)
    (kept,) = undo_files(place)
    client = start(place, options=None)
    try:
        assert client.capabilities["persistUndo"] is False
        document = client.call("document/open", {"uri": uri(path), "includeText": False})["document"]
        assert state(client, document)["canUndo"] is False
        assert client.shutdown_and_exit() == 0
    finally:
        client.kill()
    assert undo_files(place) == [kept]


def test_a_file_changed_while_closed_drops_the_history(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\n")
    edit_save_close(place, path)
    assert len(undo_files(place)) == 1
    # Another program: the same size, other bytes.
    path.write_text("ONE\nTWO\nTHREE\n")
    client = start(place)
    try:
        document = client.call("document/open", {"uri": uri(path), "includeText": False})["document"]
        now = state(client, document)
        assert (now["canUndo"], now["canRedo"]) == (False, False), now
        assert undo_files(place) == []
        assert client.shutdown_and_exit() == 0
    finally:
        client.kill()


def test_a_crash_keeps_the_history_up_to_the_last_save(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\n")
    client = start(place)
    try:
        document = client.call("document/open", {"uri": uri(path), "includeText": False})["document"]
        version = edit(client, document, 1, 1, "two\n", "Second")
        client.call("document/save", {"document": document})
        wait_for(lambda: len(undo_files(place)) == 1, what="the undo file written after the save")
        edit(client, document, version, 2, "unsaved\n", "Unsaved")
        os.kill(client.process.pid, signal.SIGKILL)
        assert client.wait() == -signal.SIGKILL
    finally:
        client.kill()

    client = start(place)
    try:
        info = client.call("document/open", {"uri": uri(path), "includeText": False})
        document = info["document"]
        # The kept history undoes the saved step (the unsaved one is the journal's, if it was flushed).
        assert state(client, document)["undoLabel"] == "Second"
        client.call("document/undo", {"document": document})
        assert read(client, document) == "one\n"
        assert client.shutdown_and_exit() == 0
    finally:
        client.kill()


def test_a_corrupt_undo_file_is_ignored_and_deleted(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\n")
    edit_save_close(place, path)
    (kept,) = undo_files(place)
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0x40
    kept.write_bytes(bytes(data))
    client = start(place)
    try:
        info = client.call("document/open", {"uri": uri(path), "includeText": True})
        assert info["text"] == "one\ntwo\nthree\n"
        assert state(client, info["document"])["canUndo"] is False
        assert undo_files(place) == []
        assert client.shutdown_and_exit() == 0
    finally:
        client.kill()
