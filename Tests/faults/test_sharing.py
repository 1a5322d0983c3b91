"""Several clients on one document through the daemon (issue 19): one version sequence, every
change passed on to the other holders in their own position encoding, holds that end with a close
or with the client, a shared undo history, and three clients typing at once under load.

Every client is a real `docsession connect` process over stdio, as an editor starts it; the first
one starts the daemon; the fixture ends every daemon on the runtime directory at teardown."""

from __future__ import annotations

import fcntl
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

import faultkit
from faultkit import Server, uri, wait_until
from rpc_client import end_daemons


class Daemon:
    """A runtime directory and a state directory of one test; clients connect through them."""

    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox
        self.runtime = sandbox.root / "run"
        self.state = sandbox.root / "state"
        self.log = sandbox.root / "daemon.log"

    def client(self, name: str, encoding: str = "utf-16", **options) -> Server:
        initialization = {"clientInfo": {"name": name}, "capabilities": {"general": {"positionEncodings": [encoding]}}}
        initialization.update(options)
        return self.sandbox.start(
            args=("connect", "--runtime-dir", str(self.runtime), "--state-dir", str(self.state), "--log-file", str(self.log)),
            initialization=initialization)

    def stop(self) -> None:
        end_daemons(self.runtime)


@pytest.fixture
def daemon(sandbox) -> Iterator[Daemon]:
    hub = Daemon(sandbox)
    try:
        yield hub
    finally:
        for server in sandbox.servers:
            server.kill()
        hub.stop()


def notes(server: Server, method: str, count: int = 1, timeout: float = 20.0, **match) -> list[dict]:
    """Waits until `server` has received `count` notifications `method` whose params hold `match`;
    answers them (their params), taking them off the list of notifications received."""
    def matching() -> list[dict]:
        return [n for n in server.notifications if n["method"] == method
                and all(n["params"].get(key) == value for key, value in match.items())]
    deadline = time.monotonic() + timeout
    while len(matching()) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"{count} {method} {match} not received; got {server.notifications}")
        try:
            message = server.rpc.read_message(timeout=remaining)
        except TimeoutError:
            continue
        if isinstance(message, dict) and "method" in message:
            server.notifications.append(message)
    found = matching()[:count]
    for note in found:
        server.notifications.remove(note)
    return [note["params"] for note in found]


# Applying LSP edits in Python, in each position encoding, as an editor does.

def units(character: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(character.encode("utf-8"))
    if encoding == "utf-16":
        return 2 if ord(character) > 0xFFFF else 1
    return 1


def offset(text: str, position: dict, encoding: str, clamp: bool = False) -> int:
    """The index in `text` of an LSP position; exact unless `clamp` (LSP's rule, which the server
    applies to a client's edits: a character past its line's end is the line's end, a line past
    the last is the end of the text)."""
    index = 0
    for _ in range(position["line"]):
        found = text.find("\n", index)
        if found < 0:
            assert clamp, f"position {position} past the last line"
            return len(text)
        index = found + 1
    count = 0
    while count < position["character"]:
        if index == len(text) or text[index] in "\r\n":
            assert clamp, f"position {position} past the end of its line"
            return index
        count += units(text[index], encoding)
        index += 1
    assert count == position["character"], f"position {position} inside a character in {encoding}"
    return index


def position(text: str, index: int, encoding: str) -> dict:
    line = text.count("\n", 0, index)
    start = text.rfind("\n", 0, index) + 1
    return {"line": line, "character": sum(units(c, encoding) for c in text[start:index])}


def apply(text: str, edits: list[dict], encoding: str, clamp: bool = False) -> str:
    for edit in edits:
        if "range" not in edit:
            text = edit["text"]
            continue
        start = offset(text, edit["range"]["start"], encoding, clamp)
        end = offset(text, edit["range"]["end"], encoding, clamp)
        text = text[:start] + edit["text"] + text[end:]
    return text


def test_an_edit_reaches_the_other_holders_in_their_own_encoding(sandbox, daemon) -> None:
    path = sandbox.docs / "shared.txt"
    path.write_text("héllo 🌍 world\nsecond line\n")
    alpha = daemon.client("alpha", "utf-16")
    beta = daemon.client("beta", "utf-8")
    gamma = daemon.client("gamma", "utf-32")
    a = alpha.open(path, includeText=True)
    b = beta.open(path, includeText=True)
    c = gamma.open(path, includeText=True)
    # One document: one handle, one version.
    assert a["document"] == b["document"] == c["document"]
    assert a["version"] == b["version"] == c["version"]
    handle, version = a["document"], a["version"]
    texts = {"beta": (beta, "utf-8", b["text"]), "gamma": (gamma, "utf-32", c["text"])}

    # alpha replaces "world" (after a character outside the BMP: 2 UTF-16 units, 4 UTF-8 bytes).
    original = a["text"]
    start = original.index("world")
    edit = {"range": {"start": position(original, start, "utf-16"), "end": position(original, start + 5, "utf-16")},
            "text": "Welt"}
    answer = alpha.call("document/edit", {"document": handle, "version": version, "edits": [edit]})
    assert answer["version"] == version + 1
    expected = apply(original, [edit], "utf-16")
    for name, (client, encoding, text) in texts.items():
        [change] = notes(client, "document/didChange", document=handle)
        assert change["reason"] == "client"
        assert change["client"]["name"] == "alpha"
        assert change["client"]["connection"].startswith("c")
        assert change["version"] == version + 1
        assert apply(text, change["edits"], encoding) == expected, name
        assert client.read(handle) == expected
    # alpha hears nothing of its own edit.
    assert not [n for n in alpha.notifications if n["method"] == "document/didChange"]

    # beta, still at the old version, is refused and changes nothing; at the new one it edits.
    stale = beta.request("document/edit", {"document": handle, "version": version, "edits": [{"text": "lost"}]})
    assert stale.error["code"] == -32801
    assert alpha.read(handle) == expected
    line2 = expected.index("second")
    edit = {"range": {"start": position(expected, line2, "utf-8"), "end": position(expected, line2, "utf-8")}, "text": "ü "}
    answer = beta.call("document/edit", {"document": handle, "version": version + 1, "edits": [edit]})
    assert answer["version"] == version + 2
    final = apply(expected, [edit], "utf-8")
    [change] = notes(alpha, "document/didChange", document=handle)
    assert change["client"]["name"] == "beta"
    assert apply(expected, change["edits"], "utf-16") == final
    [change] = notes(gamma, "document/didChange", document=handle)
    assert apply(expected, change["edits"], "utf-32") == final

    # An edit that changes nothing raises the version for everyone (a pipelining client counts).
    answer = gamma.call("document/edit", {"document": handle, "version": version + 2, "edits": []})
    assert answer["version"] == version + 3
    for client in (alpha, beta):
        [change] = notes(client, "document/didChange", document=handle)
        assert change["version"] == version + 3 and change["edits"] == []

    # State changes reach every holder: a save by gamma.
    gamma.save(handle).result
    assert path.read_text() == final
    for client in (alpha, beta):
        saved = notes(client, "document/stateChanged", document=handle, reason="saved")
        assert saved[0]["hasUnsavedChanges"] is False


def test_a_handle_not_opened_on_a_connection_is_unknown_there(sandbox, daemon) -> None:
    path = sandbox.docs / "mine.txt"
    path.write_text("mine\n")
    alpha = daemon.client("alpha")
    beta = daemon.client("beta")
    handle = alpha.open(path)["document"]
    for method, params in (("document/edit", {"version": 1, "edits": []}), ("document/read", {}),
                           ("document/close", {}), ("document/save", {})):
        reply = beta.request(method, {"document": handle, **params})
        assert reply.error["code"] == -32011, method
        assert handle in reply.error["message"]
    assert alpha.read(handle) == "mine\n"
    assert alpha.state(handle)["hasUnsavedChanges"] is False


def test_a_close_ends_only_its_own_hold(sandbox, daemon) -> None:
    path = sandbox.docs / "held.txt"
    path.write_text("one\n")
    alpha = daemon.client("alpha")
    beta = daemon.client("beta")
    info = alpha.open(path)
    handle = info["document"]
    beta.open(path)
    version = alpha.replace_text(handle, info["version"], "two\n")
    # alpha's close saves nothing and leaves the document to beta, unsaved edits and all.
    closed = alpha.call("document/close", {"document": handle})
    assert closed == {"saved": False, "holders": 1}
    assert path.read_text() == "one\n"
    assert alpha.request("document/read", {"document": handle}).error["code"] == -32011
    assert beta.read(handle) == "two\n"
    assert beta.state(handle)["hasUnsavedChanges"] is True
    beta.call("document/edit", {"document": handle, "version": version, "edits": [{"text": "three\n"}]})
    assert not [n for n in alpha.notifications if n["method"] == "document/didChange"]
    # The last holder's close is a close: saved first.
    assert beta.call("document/close", {"document": handle}) == {"saved": True}
    assert path.read_text() == "three\n"
    # Opened again: a new document.
    again = alpha.open(path, includeText=True)
    assert again["text"] == "three\n"


def test_undo_is_shared_by_the_holders(sandbox, daemon) -> None:
    """One history per document, as one NSUndoManager per NSDocument: an undo takes back the last
    step, whoever made it (docs/Sharing.md says why)."""
    path = sandbox.docs / "undo.txt"
    path.write_text("")
    alpha = daemon.client("alpha")
    beta = daemon.client("beta")
    info = alpha.open(path)
    handle = info["document"]
    beta.open(path)
    version = info["version"]
    steps = []
    for turn in range(6):
        client = alpha if turn % 2 == 0 else beta
        text = f"{'ab'[turn % 2]}{turn}\n"
        end = {"line": turn, "character": 0}
        version = client.call("document/edit", {"document": handle, "version": version,
                                                "edits": [{"range": {"start": end, "end": end}, "text": text}]})["version"]
        steps.append(text)
    assert alpha.read(handle) == "".join(steps)
    # alpha undoes beta's last step, then its own.
    undone = alpha.call("document/undo", {"document": handle, "version": version})
    assert alpha.read(handle) == "".join(steps[:5])
    [change] = notes(beta, "document/didChange", document=handle, version=undone["version"])
    assert change["client"]["name"] == "alpha"
    undone = alpha.call("document/undo", {"document": handle, "version": undone["version"]})
    assert beta.read(handle) == "".join(steps[:4])
    # beta redoes both.
    redone = beta.call("document/redo", {"document": handle, "version": undone["version"]})
    redone = beta.call("document/redo", {"document": handle, "version": redone["version"]})
    assert alpha.read(handle) == "".join(steps)
    state = alpha.state(handle)
    assert state["canUndo"] is True and state["canRedo"] is False


def test_a_client_that_vanishes_leaves_its_unsaved_text_in_the_journal(sandbox, daemon) -> None:
    path = sandbox.docs / "vanish.txt"
    path.write_text("saved\n")
    alpha = daemon.client("alpha", flushDelay=10)
    beta = daemon.client("beta")
    info = alpha.open(path)
    handle = info["document"]
    beta.open(path)
    version = alpha.replace_text(handle, info["version"], "unsaved by alpha\n")
    notes(beta, "document/didChange", document=handle)
    # alpha's editor dies: beta goes on.
    alpha.kill()
    beta.call("document/edit", {"document": handle, "version": version, "edits": [{"text": "unsaved by both\n"}]})
    assert beta.read(handle) == "unsaved by both\n"
    # beta dies too: the document closes without a save, its text kept in the journal.
    beta.kill()
    assert path.read_text() == "saved\n"
    gamma = daemon.client("gamma")
    # Once the daemon has seen beta go (and not before: an open while beta still held the document
    # would hold it too), the journal waits to be recovered.
    wait_until(lambda: [j for j in gamma.call("workspace/recoverable", {})["journals"] if j["uri"] == uri(path)], what="the journal listed as recoverable")
    opened = gamma.open(path)
    assert opened["recovery"]["edits"] >= 1
    recovered = gamma.call("document/recover", {"document": opened["document"]})
    assert recovered["hasUnsavedChanges"] is True
    assert gamma.read(opened["document"]) == "unsaved by both\n"
    assert path.read_text() == "saved\n"


def test_a_client_that_vanishes_leaves_its_packages_unsaved_entries_in_the_journal(sandbox, daemon) -> None:
    package = sandbox.docs / "vanish.textbundle"
    package.mkdir()
    (package / "text.md").write_text("saved\n")
    alpha = daemon.client("alpha", flushDelay=10)
    info = alpha.call("document/open", {"uri": uri(package)})
    alpha.call("document/writeEntry", {"document": info["document"], "path": "text.md", "text": "unsaved\n", "label": "Type"})
    alpha.kill()
    gamma = daemon.client("gamma")
    wait_until(lambda: [j for j in gamma.call("workspace/recoverable", {})["journals"] if j["uri"] == uri(package)], what="the package's journal listed as recoverable")
    opened = gamma.call("document/open", {"uri": uri(package)})
    assert opened["recovery"]["edits"] == 1 and opened["recovery"]["fileMatchesBase"] is True, opened
    recovered = gamma.call("document/recover", {"document": opened["document"]})
    assert recovered["entries"] == [{"path": "text.md", "change": "written"}] and recovered["hasUnsavedChanges"] is True
    assert gamma.call("document/readEntry", {"document": opened["document"], "path": "text.md"})["text"] == "unsaved\n"
    assert (package / "text.md").read_text() == "saved\n"


def test_a_shared_package_saved_as_another_moves_for_every_holder(sandbox, daemon) -> None:
    package = sandbox.docs / "shared.textbundle"
    package.mkdir()
    (package / "text.md").write_text("saved\n")
    alpha, beta = daemon.client("alpha"), daemon.client("beta")
    handle = alpha.call("document/open", {"uri": uri(package)})["document"]
    assert beta.call("document/open", {"uri": uri(package)})["document"] == handle
    alpha.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "in the copy\n"})
    copy = sandbox.docs / "copy.textbundle"
    assert alpha.save(handle, to=uri(copy)).result["uri"] == uri(copy)

    def moved() -> bool:
        beta.request("document/state", {"document": handle})
        return any(n["method"] == "document/stateChanged" and n["params"]["reason"] == "saved" and n["params"]["uri"] == uri(copy)
                   for n in beta.notifications)

    wait_until(moved, what="the other holder's saved notification with the new uri")
    assert beta.call("document/state", {"document": handle})["uri"] == uri(copy)
    assert beta.call("document/open", {"uri": uri(copy)})["document"] == handle
    assert (copy / "text.md").read_text() == "in the copy\n" and (package / "text.md").read_text() == "saved\n"


@pytest.mark.parametrize("kind", ["text", "package"])
def test_a_save_as_with_nothing_unsaved_moves_the_document_for_every_holder(sandbox, daemon, kind) -> None:
    """A save as changes no flag when nothing was unsaved, but the document's file is another one
    now: the other holders hear it (`saved` with the new `uri`, §8.16) and follow it."""
    if kind == "text":
        source, copy = sandbox.docs / "clean.txt", sandbox.docs / "clean copy.txt"
        source.write_text("clean\n")
    else:
        source, copy = sandbox.docs / "clean.textbundle", sandbox.docs / "clean copy.textbundle"
        source.mkdir()
        (source / "text.md").write_text("clean\n")
    alpha, beta = daemon.client("alpha"), daemon.client("beta")
    handle = alpha.call("document/open", {"uri": uri(source)})["document"]
    assert beta.call("document/open", {"uri": uri(source)})["document"] == handle
    assert alpha.save(handle, to=uri(copy)).result["uri"] == uri(copy)
    # The one who saved hears it before the answer, as every holder does.
    assert [n["params"]["uri"] for n in alpha.notifications
            if n["method"] == "document/stateChanged" and n["params"]["reason"] == "saved"] == [uri(copy)]

    def moved() -> bool:
        beta.request("document/state", {"document": handle})
        return any(n["method"] == "document/stateChanged" and n["params"]["reason"] == "saved" and n["params"]["uri"] == uri(copy)
                   for n in beta.notifications)

    wait_until(moved, what="the other holder's saved notification with the new uri")
    [saved] = [n["params"] for n in beta.notifications if n["method"] == "document/stateChanged"]
    assert saved["state"] == saved["previousState"] == [] and saved["hasUnsavedChanges"] is False
    assert beta.call("document/state", {"document": handle})["uri"] == uri(copy)
    assert beta.call("document/open", {"uri": uri(copy)})["document"] == handle


class Typist:
    """A client that types into a shared document the way an editor would over a slow link:
    bursts of pipelined edits, each at the version it predicts, against its own copy of the text.
    Its `confirmed` text is the server's at `version`, kept up to date by its own accepted edits and
    the `document/didChange` of the others, taken in the order the connection delivers them."""

    def __init__(self, server: Server, handle: str, text: str, version: int, encoding: str, tag: str, seed: int) -> None:
        self.server, self.handle, self.encoding, self.tag = server, handle, encoding, tag
        self.confirmed, self.version = text, version
        self.random = random.Random(seed)
        self.accepted = self.refused = self.heard = 0

    def burst(self, size: int) -> None:
        rpc = self.server.rpc
        local, version = self.confirmed, self.version
        sent: dict[int, dict] = {}
        for _ in range(size):
            at = self.random.randint(0, len(local))
            piece = self.random.choice([self.tag, self.tag + "é", self.tag + "😀", "\n" + self.tag])
            where = position(local, at, self.encoding)
            edit = {"range": {"start": where, "end": where}, "text": piece}
            request_id = rpc.next_id
            rpc.next_id += 1
            rpc.send({"jsonrpc": "2.0", "id": request_id, "method": "document/edit",
                      "params": {"document": self.handle, "version": version, "edits": [edit]}})
            sent[request_id] = edit
            local = local[:at] + piece + local[at:]
            version += 1
        while sent:
            message = rpc.read_message(timeout=60)
            if "id" in message and message["id"] in sent:
                edit = sent.pop(message["id"])
                if "error" in message:
                    # Stale (another client's edit came first); or, behind a refused edit, an edit
                    # whose predicted version another client's edit happened to make current, with
                    # a range that no longer fits the text. Neither changed anything.
                    assert message["error"]["code"] in (-32801, -32602), message
                    self.refused += 1
                    continue
                # Accepted: the server applied it to the text it had, which is ours (clamped as
                # the server clamps, when it was computed behind a refused edit). The edits the
                # others send are never clamped: they must be exact.
                assert message["result"]["version"] == self.version + 1, (message, self.version)
                self.confirmed = apply(self.confirmed, [edit], self.encoding, clamp=True)
                self.version += 1
                self.accepted += 1
            elif message.get("method") == "document/didChange":
                self.hear(message["params"])

    def hear(self, change: dict) -> None:
        assert change["document"] == self.handle
        assert change["version"] == self.version + 1, (change["version"], self.version)
        self.confirmed = apply(self.confirmed, change["edits"], self.encoding)
        self.version = change["version"]
        self.heard += 1

    def settle(self, version: int) -> None:
        """Takes in what the others did until the document's `version`."""
        while self.version < version:
            message = self.server.rpc.read_message(timeout=60)
            if message.get("method") == "document/didChange":
                self.hear(message["params"])


def test_three_clients_typing_at_once_under_load_end_with_one_text(sandbox, daemon) -> None:
    path = sandbox.docs / "typed.txt"
    path.write_text("start\n")
    load = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    try:
        encodings = ("utf-16", "utf-8", "utf-32")
        servers = [daemon.client(name, encoding) for name, encoding in zip(("alpha", "beta", "gamma"), encodings)]
        infos = [server.open(path, includeText=True) for server in servers]
        handle = infos[0]["document"]
        observer = daemon.client("observer")
        observer.open(path)
        typists = [Typist(server, handle, info["text"], info["version"], encoding, tag, seed)
                   for server, info, encoding, tag, seed in zip(servers, infos, encodings, "ABC", (1, 2, 3))]
        import threading
        errors: list[BaseException] = []

        def type_into(typist: Typist, rounds: int) -> None:
            try:
                for _ in range(rounds):
                    typist.burst(typist.random.randint(1, 12))
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=type_into, args=(typist, 40)) for typist in typists]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not errors, errors
        # Asked of a client that does not type (a request's answer is read past the typists'
        # notifications, which their own reading must see).
        final = observer.state(handle)["version"]
        for typist in typists:
            typist.settle(final)
        text = observer.read(handle)
        for typist, server in zip(typists, servers):
            assert typist.version == final
            assert typist.confirmed == text, typist.tag
            assert server.read(handle) == text
        assert sum(t.accepted for t in typists) > 40
        servers[1].save(handle).result
        assert path.read_text() == text
        for tag in "ABC":
            assert tag in text
    finally:
        for process in load:
            process.kill()


def test_one_client_killed_while_typing_leaves_the_others_in_step(sandbox, daemon) -> None:
    path = sandbox.docs / "killed.txt"
    path.write_text("start\n")
    servers = [daemon.client(name, encoding) for name, encoding in (("alpha", "utf-16"), ("beta", "utf-8"), ("gamma", "utf-32"))]
    infos = [server.open(path, includeText=True) for server in servers]
    handle = infos[0]["document"]
    observer = daemon.client("observer")
    observer.open(path)
    alpha, beta, gamma = (Typist(s, handle, i["text"], i["version"], e, t, n)
                          for s, i, e, t, n in zip(servers, infos, ("utf-16", "utf-8", "utf-32"), "ABC", (4, 5, 6)))
    # gamma sends a burst and is killed before reading its answers.
    rpc = gamma.server.rpc
    for count in range(20):
        rpc.send({"jsonrpc": "2.0", "id": 10_000 + count, "method": "document/edit",
                  "params": {"document": handle, "version": gamma.version + count,
                             "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "C"}]}})
    gamma.server.kill()
    for _ in range(10):
        alpha.burst(5)
        beta.burst(5)
    final = observer.state(handle)["version"]
    alpha.settle(final)
    beta.settle(final)
    text = observer.read(handle)
    assert alpha.confirmed == beta.confirmed == text


def test_a_coordinated_command_reaches_a_server_that_is_not_the_daemon(sandbox) -> None:
    """An editor with its own stdio server (not a client of the daemon): `docsession coordinate`
    reaches it through its socket under servers/. `--read` saves its unsaved text before the
    command runs; `--write` disables its editing while the command runs (an edit and a save are
    refused), and then it reads the file again: a conflict over its unsaved edits."""
    path = sandbox.docs / "own.txt"
    path.write_text("disk\n")
    runtime = sandbox.root / "run-own"
    editor = sandbox.start(args=("serve", "--no-journal", "--runtime-dir", str(runtime)))
    handle = editor.open_and_edit(path, "editor's unsaved text\n")
    wait_until(lambda: list((runtime / "servers").glob("*.sock")), timeout=30, what="the server's coordination socket")
    # A killed server's socket, which nobody listens on: coordinate removes it and goes on.
    import socket as sockets
    stale = runtime / "servers" / "999999.sock"
    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(str(stale))
    listener.close()
    seen = sandbox.root / "seen"
    done = subprocess.run([faultkit.BIN, "coordinate", "--read", str(path), "--runtime-dir", str(runtime), "--",
                           "sh", "-c", f"cat {path} > {seen}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert seen.read_text() == "editor's unsaved text\n"
    assert editor.state(handle)["hasUnsavedChanges"] is False
    assert not stale.exists()
    version = editor.replace_text(handle, editor.state(handle)["version"], "edited again\n")

    started, go = sandbox.root / "started", sandbox.root / "go"
    script = f"touch {started}; while [ ! -e {go} ]; do sleep 0.01; done; printf 'written by the command\\n' > {path}"
    command = subprocess.Popen([faultkit.BIN, "coordinate", "--write", str(path), "--runtime-dir", str(runtime), "--",
                                "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(started.exists, timeout=30, what="the command to start under its lease")
        assert "editingDisabled" in editor.state(handle)["state"]
        refused = editor.request("document/edit", {"document": handle, "version": version, "edits": [{"text": "x"}]})
        assert refused.error["code"] == -32012 and refused.error["data"]["reason"] == "coordinated", refused.error
        assert editor.save(handle).error["code"] == -32012
        assert path.read_text() == "editor's unsaved text\n"
        go.touch()
        assert command.wait(timeout=60) == 0, command.stderr.read()
        conflict = wait_until(lambda: "inConflict" in editor.state(handle)["state"], timeout=30, what="the conflict after the lease")
        assert conflict
        assert editor.read(handle) == "edited again\n"
        assert path.read_text() == "written by the command\n"
    finally:
        if command.poll() is None:
            command.kill()


def test_saves_waiting_for_locks_held_elsewhere_leave_the_server_working(sandbox) -> None:
    """Saves whose files another program holds locked (issue 19.3's locks, as another editor's
    server or `docsession coordinate` holds them) wait without holding a thread of the server: more
    of them than it runs threads for file work (at least eight) wait at once, and meanwhile another
    file opens, takes an edit and saves, and a waiting save can be cancelled. When the locks go,
    every other waiting save writes its text."""
    runtime = sandbox.root / "run-locks"
    server = sandbox.start(args=("serve", "--no-journal", "--runtime-dir", str(runtime)))
    count = 4 * max(2, os.cpu_count() or 1) + 4
    locks = runtime / "locks"
    handles, lock_files = [], []
    for index in range(count):
        path = sandbox.docs / f"locked{index}.txt"
        path.write_text(f"old {index}\n")
        before = set(locks.glob("*.lock")) if locks.exists() else set()
        handle = server.open_and_edit(path, f"first {index}\n")
        assert server.save(handle).ok
        # The file's lock file is the one its first save made.
        (made,) = set(locks.glob("*.lock")) - before
        handles.append(handle)
        lock_files.append(made)
    # The other program takes every file's lock (a POSIX record lock conflicts with the server's
    # open file description locks).
    held = [os.open(made, os.O_RDWR) for made in lock_files]
    for descriptor in held:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        saves = []
        for index, handle in enumerate(handles):
            version = server.state(handle)["version"]
            server.replace_text(handle, version, f"second {index}\n")
            saves.append(server.send_save(handle))
        answers: dict[int, dict] = {}

        def answer(request_id: int, timeout: float = 60.0) -> dict:
            while request_id not in answers:
                message = server.rpc.read_message(timeout=timeout)
                if isinstance(message, dict) and "method" not in message:
                    answers[message["id"]] = message
            return answers.pop(request_id)

        def call(method: str, params: dict) -> dict:
            request_id = server.rpc.next_id
            server.rpc.next_id += 1
            server.rpc.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            response = answer(request_id)
            assert "result" in response, response
            return response["result"]

        other = sandbox.docs / "other.txt"
        other.write_text("other\n")
        opened = call("document/open", {"uri": uri(other), "includeText": False})
        call("document/edit", {"document": opened["document"], "version": opened["version"], "edits": [{"text": "saved\n"}]})
        call("document/save", {"document": opened["document"]})
        assert other.read_text() == "saved\n"
        assert not any(request_id in answers for request_id in saves), answers
        for index in range(count):
            assert (sandbox.docs / f"locked{index}.txt").read_text() == f"first {index}\n"
        # A waiting save is cancellable: -32800, nothing written.
        server.rpc.notify("$/cancelRequest", {"id": saves[-1]})
        cancelled = answer(saves[-1])
        assert cancelled.get("error", {}).get("code") == -32800, cancelled
    finally:
        for descriptor in held:
            os.close(descriptor)
    # Every answer first: a request of the Server helper drops the responses it reads past.
    responses = [answer(request_id) for request_id in saves[:-1]]
    last = count - 1
    assert (sandbox.docs / f"locked{last}.txt").read_text() == f"first {last}\n"
    assert server.state(handles[last])["hasUnsavedChanges"] is True
    for index, response in enumerate(responses):
        assert "result" in response, response
        assert (sandbox.docs / f"locked{index}.txt").read_text() == f"second {index}\n"
        assert server.state(handles[index])["hasUnsavedChanges"] is False


def test_a_writer_coordinating_while_two_clients_type(sandbox, daemon) -> None:
    """A third client takes a write lease while two others hold the document and type: their edits
    during the lease get -32012 and change nothing; the writer's change reaches both at the end (a
    reload of the clean document); their edits made again after it land; nothing typed is lost."""
    path = sandbox.docs / "typed-under-lease.txt"
    path.write_text("one\n")
    alpha, beta, writer = daemon.client("alpha", "utf-16"), daemon.client("beta", "utf-8"), daemon.client("formatter")
    info = alpha.open(path)
    handle, version = info["document"], info["version"]
    beta.open(path)
    end = lambda line: {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}}
    version = alpha.call("document/edit", {"document": handle, "version": version, "edits": [{**end(1), "text": "alpha 1\n"}]})["version"]
    version = beta.call("document/edit", {"document": handle, "version": version, "edits": [{**end(2), "text": "beta 1\n"}]})["version"]
    alpha.save(handle).result
    lease = writer.call("workspace/coordinate", {"uri": uri(path), "intent": "write"})
    assert lease["documents"] == [handle]
    for client, text in ((alpha, "alpha 2\n"), (beta, "beta 2\n")):
        refused = client.request("document/edit", {"document": handle, "version": version, "edits": [{**end(0), "text": text}]})
        assert refused.error["code"] == -32012 and refused.error["data"]["reason"] == "coordinated", refused.error
    assert alpha.read(handle) == "one\nalpha 1\nbeta 1\n"
    # The formatter rewrites the file meanwhile, and ends its lease: both holders take its text.
    path.write_text("ONE\nALPHA 1\nBETA 1\n")
    ended = writer.call("workspace/endCoordination", {"lease": lease["lease"]})
    assert ended == {"documents": [{"document": handle, "outcome": "reloaded"}]}
    for client in (alpha, beta):
        [change] = notes(client, "document/didChange", document=handle, reason="external")
        assert change["version"] == version + 1
        assert client.read(handle) == "ONE\nALPHA 1\nBETA 1\n"
    # The edits refused during the lease, made again on the new text, land.
    version += 1
    version = alpha.call("document/edit", {"document": handle, "version": version, "edits": [{**end(3), "text": "alpha 2\n"}]})["version"]
    version = beta.call("document/edit", {"document": handle, "version": version, "edits": [{**end(4), "text": "beta 2\n"}]})["version"]
    beta.save(handle).result
    assert path.read_text() == "ONE\nALPHA 1\nBETA 1\nalpha 2\nbeta 2\n"
    assert alpha.read(handle) == beta.read(handle) == path.read_text()


def test_the_lsp_mode_is_refused_by_the_daemon(sandbox, daemon) -> None:
    from rpc_client import RpcClient
    rpc = RpcClient(faultkit.BIN, args=("connect", "--runtime-dir", str(daemon.runtime), "--state-dir", str(daemon.state)))
    try:
        response, _ = rpc.request("initialize", {"capabilities": {"textDocument": {}}})
        assert response["error"]["code"] == -32600
        assert response["error"]["data"] == {"field": "params.capabilities.textDocument"}
        # Nothing changed: the session can still initialize without it.
        response, _ = rpc.request("initialize", {"capabilities": {}})
        assert "result" in response, response
    finally:
        rpc.kill()


@pytest.mark.parametrize("how", ["saveAs", "move", "external"])
def test_a_document_moved_outside_a_holders_roots_leaves_that_holder(sandbox, daemon, how) -> None:
    """Issue 34.9: alpha's roots are `inside`; beta (no roots of its own) takes the document they
    share to `outside`, by a save as or a move, or another program moves it there and the watcher
    follows. Alpha's hold ends there: it hears
    `document/stateChanged` with reason `outsideRoots` (its last uri, state `closed`), and nothing
    about the document after that; its requests naming the handle are -32011, saying why. Before
    the fix alpha went on holding it, heard of the new uri, and read what another program wrote
    there."""
    inside, outside = sandbox.docs / "inside", sandbox.docs / "outside"
    inside.mkdir()
    outside.mkdir()
    source = inside / "shared.txt"
    source.write_text("inside\n")
    alpha = daemon.client("alpha", initializationOptions={"roots": [uri(inside)]})
    beta = daemon.client("beta")
    info = alpha.call("document/open", {"uri": uri(source)})
    handle = info["document"]
    assert beta.call("document/open", {"uri": uri(source)})["document"] == handle
    target = outside / "moved.txt"
    if how == "saveAs":
        assert beta.save(handle, to=uri(target)).ok
    elif how == "move":
        assert beta.request("document/move", {"document": handle, "to": uri(target)}).ok
    else:
        # Another program moves the file; the watcher follows it (beta watches `outside` through a
        # document of its own there).
        (outside / "other.txt").write_text("other\n")
        beta.call("document/open", {"uri": uri(outside / "other.txt")})
        os.rename(source, target)
        wait_until(lambda: beta.call("document/state", {"document": handle})["uri"] == uri(target), what="the move followed")
    # Another program writes the file outside alpha's roots; beta (which holds it) reloads it.
    target.write_text("outside content\n")
    wait_until(lambda: beta.read(handle) == "outside content\n", what="beta's reload of the outside file")
    refused = alpha.request("document/read", {"document": handle})
    assert "error" in refused.response, f"alpha read the file outside its roots: {refused.response}"
    assert refused.error["code"] == -32011, refused.response
    [left] = notes(alpha, "document/stateChanged", reason="outsideRoots")
    assert left == {"document": handle, "uri": uri(source), "version": info["version"], "state": ["closed"],
                    "previousState": [], "reason": "outsideRoots", "hasUnsavedChanges": False}, left
    assert refused.error["data"] == {"document": handle, "reason": "outsideRoots"}, refused.response
    assert "outside this connection's roots" in refused.error["message"], refused.response
    # Nothing of the outside file reached alpha: no notification names it or holds its text.
    heard = [n for n in alpha.notifications if n["params"].get("document") == handle]
    assert all(uri(target) not in str(n) and "outside content" not in str(n) for n in heard), heard
    # Alpha still works in its roots, and cannot name the outside file.
    assert alpha.request("document/open", {"uri": uri(target)}).error["code"] == -32022
