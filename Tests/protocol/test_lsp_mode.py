"""The LSP mode (protocol/README.md §12, issue 21), end to end over stdio with the built binary,
the way an editor's own LSP client uses it: `initialize` with `capabilities.textDocument`, the
buffers synchronised with `textDocument/did*`, and the server's own requests answered as an
editor answers them (`workspace/applyEdit` applied to the test's copy of the buffer, whose change
goes back as `didChange`; `window/showMessageRequest` answered with one of its actions).

The texts are ASCII, so LSP's UTF-16 positions are byte offsets within a line.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest

from rpc_client import RpcClient, binary_path, wait_until
from test_openrpc import validate_server_message

LSP_CAPABILITIES = {
    "textDocument": {"synchronization": {"didSave": True, "willSave": True, "dynamicRegistration": False}},
    "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}},
    "window": {"showMessage": {"messageActionItem": {"additionalPropertiesSupport": False}}},
}


def need_binary() -> Path:
    path = binary_path()
    if not path.is_file():
        pytest.skip(f"server binary {path} is missing: run `swift build` or set DOCSESSION_BIN")
    return path


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory of the test's own: `docs/` for the files, `state/` for the servers' state."""
    root = Path(tempfile.mkdtemp(prefix="docsession-lsp-test-"))
    (root / "docs").mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def uri(path: Path) -> str:
    return "file://" + str(path)


def rewrite(path: Path, text: str) -> None:
    """Another program writes `text` over the file in place, in one write (no O_TRUNC, a truncation
    after only when shorter), so the watcher never sees an empty file in between."""
    with open(path, "r+b") as out:
        out.write(text.encode())
        out.truncate()


def offset(text: str, position: dict[str, int]) -> int:
    """A position's offset in `text`, its character counted in UTF-16 code units (LSP's default)."""
    lines = text.split("\n")
    line = position["line"]
    if line >= len(lines):
        return len(text)
    start = sum(len(l) + 1 for l in lines[:line])
    units = 0
    for index, character in enumerate(lines[line]):
        if units >= position["character"]:
            return start + index
        units += 2 if ord(character) > 0xFFFF else 1
    return start + len(lines[line])


def apply_lsp_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """LSP's TextEdit[]: every range against the text before them all."""
    spans = sorted(((offset(text, e["range"]["start"]), offset(text, e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


class Editor:
    """An editor's LSP client, reduced to what the tests need: its buffers and their versions."""

    def __init__(self, place: Path, extra_args: tuple[str, ...] = ()):
        self.client = RpcClient(need_binary(), args=("--state-dir", str(place / "state"), *extra_args))
        # Every message the server sends is checked against protocol/openrpc.json as it is read:
        # the server's requests and notifications of the LSP mode by their params' schemas.
        read = self.client.read_message

        def read_and_validate(timeout: float | None = None) -> Any:
            message = read(timeout)
            validate_server_message(message)
            return message

        self.client.read_message = read_and_validate  # type: ignore[method-assign]
        self.result = self.client.initialize({"processId": None, "clientInfo": {"name": "test-editor"}, "capabilities": LSP_CAPABILITIES})
        self.client.notify("initialized", {})
        self.buffers: dict[str, tuple[str, int]] = {}
        self.seen: list[Any] = []

    def open(self, path: Path, text: str | None = None) -> None:
        text = path.read_text() if text is None else text
        self.buffers[uri(path)] = (text, 1)
        self.client.notify("textDocument/didOpen", {"textDocument": {"uri": uri(path), "languageId": "plaintext", "version": 1, "text": text}})

    def text(self, path: Path) -> str:
        return self.buffers[uri(path)][0]

    def change(self, path: Path, changes: list[dict[str, Any]], new_text: str) -> None:
        old, version = self.buffers[uri(path)]
        self.buffers[uri(path)] = (new_text, version + 1)
        self.client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri(path), "version": version + 1}, "contentChanges": changes})

    def type_at_end(self, path: Path, typed: str) -> None:
        text = self.text(path)
        lines = text.split("\n")
        end = {"line": len(lines) - 1, "character": len(lines[-1])}
        self.change(path, [{"range": {"start": end, "end": end}, "text": typed}], text + typed)

    def next_request(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        """Reads until the server's request `method`; keeps what came before in `seen`."""
        while True:
            message = self.client.read_message(timeout)
            if message.get("method") == method and "id" in message:
                return message
            self.seen.append(message)

    def next_notification(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        while True:
            message = self.client.read_message(timeout)
            if message.get("method") == method and "id" not in message:
                return message
            self.seen.append(message)

    def answer(self, request: dict[str, Any], result: Any) -> None:
        self.client.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def apply(self, request: dict[str, Any]) -> None:
        """Applies a `workspace/applyEdit` as an editor does: the buffer changes, the change goes
        back as one `didChange` (the whole new text, as a client without incremental sync would),
        and the request is answered."""
        (change,) = request["params"]["edit"]["documentChanges"]
        target = change["textDocument"]["uri"]
        text, version = self.buffers[target]
        assert change["textDocument"]["version"] == version
        new_text = apply_lsp_edits(text, change["edits"])
        self.answer(request, {"applied": True})
        self.buffers[target] = (new_text, version + 1)
        self.client.notify("textDocument/didChange", {"textDocument": {"uri": target, "version": version + 1}, "contentChanges": [{"text": new_text}]})

    def write(self, path: Path) -> None:
        """The editor writes its buffer to the file and says so (`didSave`)."""
        rewrite(path, self.text(path))
        self.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})

    def command(self, name: str, *arguments: Any) -> dict[str, Any]:
        request_id = self.client.next_id
        self.client.next_id += 1
        self.client.send({"jsonrpc": "2.0", "id": request_id, "method": "workspace/executeCommand", "params": {"command": name, "arguments": list(arguments)}})
        while True:
            message = self.client.read_message(20)
            if message.get("method") == "workspace/applyEdit" and "id" in message:
                self.apply(message)
            elif "method" not in message and message.get("id") == request_id:
                return message
            else:
                self.seen.append(message)

    def accept_recovery(self) -> str:
        """Answers the recovery question with "Recover", applies the edit it brings, and waits
        until the dead server's journal has gone; answers the question's message."""
        question = self.next_request("window/showMessageRequest")
        assert [a["title"] for a in question["params"]["actions"]] == ["Recover", "Discard", "Not now"], question
        self.answer(question, {"title": "Recover"})
        request = self.next_request("workspace/applyEdit")
        assert request["params"]["label"] == "Recovered unsaved edits", request
        self.apply(request)
        self.sync()
        wait_until(lambda: self.client.call("workspace/recoverable")["journals"] == [], 20, "the dead journal to go")
        return question["params"]["message"]

    def kill_server(self) -> None:
        """kill -9 of the server (a crash: nothing flushed, nothing said)."""
        os.kill(self.client.process.pid, signal.SIGKILL)
        self.client.kill()

    def sync(self) -> None:
        """Waits until the server has handled everything sent so far (a request is answered in
        order, after the notifications before it)."""
        response, others = self.client.request("workspace/recoverable")
        assert "result" in response, response
        self.seen.extend(others)


def test_initialize_answers_lsp_capabilities_only_to_an_lsp_client(place: Path) -> None:
    editor = Editor(place)
    capabilities = editor.result["capabilities"]
    assert capabilities["textDocumentSync"] == {"openClose": True, "change": 2, "willSave": True, "save": {"includeText": False}}
    assert capabilities["executeCommandProvider"] == {
        "commands": ["docsession.save", "docsession.revert", "docsession.versions", "docsession.restoreVersion", "docsession.showVersion"]}
    assert capabilities["positionEncoding"] == "utf-16"
    assert editor.result["serverInfo"]["name"] == "docsession"
    # Everything answered to our own clients is still there.
    for member in ("maxMessageSize", "batches", "cancellation", "autosave", "watchFiles", "versions", "journal", "hotExit", "persistUndo"):
        assert member in capabilities
    assert editor.client.shutdown_and_exit() == 0
    editor.client.kill()

    plain = RpcClient(need_binary(), args=("--state-dir", str(place / "state")))
    try:
        result = plain.initialize({"capabilities": {"positionEncodings": ["utf-8"]}})
        assert "textDocumentSync" not in result["capabilities"] and "executeCommandProvider" not in result["capabilities"]
        assert result["capabilities"]["positionEncoding"] == "utf-8"
    finally:
        plain.kill()


def test_typing_is_mirrored_and_saved_by_the_command(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("one\ntwo\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.type_at_end(path, "three\n")
        # A change with a range in the middle, and one without a range (the whole text).
        editor.change(path, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}, "text": "ONE"}], "ONE\ntwo\nthree\n")
        editor.sync()
        response = editor.command("docsession.save", uri(path))
        assert response["result"]["uri"] == uri(path), response
        assert path.read_text() == "ONE\ntwo\nthree\n"
        editor.change(path, [{"text": "replaced\n"}], "replaced\n")
        editor.sync()
        editor.command("docsession.save", uri(path))
        assert path.read_text() == "replaced\n"
        # No document/* notification reaches an LSP client about its buffers.
        assert not [m for m in editor.seen if str(m.get("method", "")).startswith("document/")]
    finally:
        editor.client.kill()


def test_bad_notifications_are_logged_naming_the_field_and_change_nothing(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("abc\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(path), "version": 2}, "contentChanges": [{"range": {"start": {"line": 0, "character": -1}, "end": {"line": 0, "character": 1}}, "text": "x"}]})
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(path)}, "contentChanges": []})
        editor.client.notify("textDocument/didOpen", {"textDocument": {"uri": "http://example.com/x", "languageId": "x", "version": 1, "text": ""}})
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(place / "docs" / "other.txt"), "version": 2}, "contentChanges": [{"text": "x"}]})
        # An answer to a request the server never sent.
        editor.client.send({"jsonrpc": "2.0", "id": "ds-999", "result": None})
        editor.sync()
        stderr = wait_until(lambda: editor.client.stderr if "ds-999" in editor.client.stderr else None, what="the warnings")
        assert "params.contentChanges[0].range.start.character" in stderr
        assert "params.textDocument.version" in stderr
        assert "params.textDocument.uri" in stderr
        assert "is not open (no didOpen)" in stderr
        # Nothing changed: the buffer saved is the text opened.
        editor.command("docsession.save", uri(path))
        assert path.read_text() == "abc\n"
        bad = editor.command("docsession.save", "file:///nowhere/open.txt")
        assert bad["error"]["code"] == -32602 and bad["error"]["data"]["field"] == "params.arguments[0]"
        bad = editor.command("docsession.fly", uri(path))
        assert bad["error"]["code"] == -32602 and bad["error"]["data"]["field"] == "params.command"
    finally:
        editor.client.kill()


def test_an_external_rewrite_of_a_clean_buffer_comes_as_apply_edit(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("alpha\nbeta\ngamma\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        rewrite(path, "alpha\nBETA\ngamma\ndelta\n")
        request = editor.next_request("workspace/applyEdit")
        assert request["id"].startswith("ds-")
        assert request["params"]["label"] == "Reloaded from disk"
        edits = request["params"]["edit"]["documentChanges"][0]["edits"]
        # The minimal edits: line 1 and the new last line, not the whole text.
        assert len(edits) == 2 and all(e["range"]["start"]["line"] >= 1 for e in edits)
        editor.apply(request)
        assert editor.text(path) == "alpha\nBETA\ngamma\ndelta\n"
        editor.sync()
        # The buffer took the file as synced: a second rewrite is a reload again, not a conflict.
        rewrite(path, "alpha\nBETA\ngamma\ndelta\nepsilon\n")
        request = editor.next_request("workspace/applyEdit")
        editor.apply(request)
        assert editor.text(path) == path.read_text()
        assert not [m for m in editor.seen if m.get("method") == "window/showMessageRequest"]
    finally:
        editor.client.kill()


def test_the_editors_own_save_is_not_an_external_change(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("first\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.type_at_end(path, "second\n")
        editor.sync()
        rewrite(path, editor.text(path))  # the editor writes the file itself
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        editor.sync()
        # Clean again: another program's rewrite is reloaded, without a question.
        rewrite(path, "first\nsecond\nthird\n")
        request = editor.next_request("workspace/applyEdit")
        assert request["params"]["label"] == "Reloaded from disk"
        editor.apply(request)
        assert not [m for m in editor.seen if m.get("method") in ("window/showMessageRequest", "textDocument/publishDiagnostics")]
        # The save was kept as a version.
        wait_until(lambda: len(editor.command("docsession.versions", uri(path))["result"]["versions"]) >= 1, 20, "the saved version")
    finally:
        editor.client.kill()


def conflict(place: Path, editor: Editor, path: Path, mine: str, theirs: str) -> dict[str, Any]:
    editor.open(path)
    editor.change(path, [{"text": mine}], mine)
    editor.sync()
    rewrite(path, theirs)
    diagnostics = editor.next_notification("textDocument/publishDiagnostics")
    assert diagnostics["params"]["uri"] == uri(path)
    (diagnostic,) = diagnostics["params"]["diagnostics"]
    assert diagnostic["severity"] == 2 and diagnostic["range"]["start"] == {"line": 0, "character": 0}
    question = editor.next_request("window/showMessageRequest")
    assert [a["title"] for a in question["params"]["actions"]] == ["Keep mine", "Take theirs", "Merge"]
    return question


def test_a_conflict_is_resolved_through_the_message_request(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("a\nb\nc\nd\ne\n")
    editor = Editor(place)
    try:
        question = conflict(place, editor, path, "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n")
        editor.answer(question, {"title": "Merge"})
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "A\nb\nc\nd\nE\n"
        cleared = editor.next_notification("textDocument/publishDiagnostics")
        assert cleared["params"]["diagnostics"] == []
        # Resolved: unsaved (the merge is not the file's text), and saving writes it.
        response = editor.command("docsession.save", uri(path))
        assert "result" in response, response
        assert path.read_text() == "A\nb\nc\nd\nE\n"
    finally:
        editor.client.kill()


def test_an_overlapping_merge_says_so_and_changes_nothing(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("same line\n")
    editor = Editor(place)
    try:
        question = conflict(place, editor, path, "my line\n", "their line\n")
        editor.answer(question, {"title": "Merge"})
        shown = editor.next_notification("window/showMessage")
        assert "nothing was changed" in shown["params"]["message"] and shown["params"]["type"] == 2
        editor.sync()
        assert not [m for m in editor.seen if m.get("method") == "workspace/applyEdit"]
        # Still in conflict: a save is refused rather than overwriting the file.
        response = editor.command("docsession.save", uri(path))
        assert "error" in response and path.read_text() == "their line\n"
    finally:
        editor.client.kill()


def test_take_theirs_makes_the_buffer_clean(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("x\n")
    editor = Editor(place)
    try:
        question = conflict(place, editor, path, "mine\n", "theirs\n")
        editor.answer(question, {"title": "Take theirs"})
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "theirs\n"
        assert editor.next_notification("textDocument/publishDiagnostics")["params"]["diagnostics"] == []
        rewrite(path, "theirs again\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "theirs again\n"
    finally:
        editor.client.kill()


def journal_holds(place: Path, text: str) -> bool:
    directory = place / "state" / "journal"
    return directory.is_dir() and any(text.encode() in p.read_bytes() for p in directory.iterdir() if p.name.endswith(".journal"))


def typed_and_journaled(place: Path, path: Path, typed: str, text: str | None = None) -> Editor:
    """An editor with `path` open (holding `text`, else the file's), `typed` typed at its end, and
    the server's journal holding it."""
    editor = Editor(place)
    editor.open(path, text)
    editor.type_at_end(path, typed)
    editor.sync()
    wait_until(lambda: journal_holds(place, typed), 20, "the journal to hold the typed text")
    return editor


def test_a_killed_servers_edits_are_offered_at_the_next_open(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("saved line\n")
    typed_and_journaled(place, path, "unsaved line\n").kill_server()

    again = Editor(place)
    try:
        again.open(path)
        message = again.accept_recovery()
        assert message.startswith("notes.txt: recover unsaved edits from ") and message.endswith("(1 edit)?"), message
        assert again.text(path) == "saved line\nunsaved line\n"
        # The dead server's journal is gone once the buffer holds its text; the buffer's own
        # journal has it now.
        wait_until(lambda: journal_holds(place, "unsaved line"), 20, "the new journal")
        again.command("docsession.save", uri(path))
        assert path.read_text() == "saved line\nunsaved line\n"
    finally:
        again.client.kill()


def test_did_close_drops_the_journal_of_discarded_edits(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("kept\n")
    editor = typed_and_journaled(place, path, "discarded\n")
    try:
        editor.client.notify("textDocument/didClose", {"textDocument": {"uri": uri(path)}})
        editor.sync()
        wait_until(lambda: not journal_holds(place, "discarded"), 20, "the journal to go")
        assert editor.client.shutdown_and_exit() == 0
    finally:
        editor.client.kill()
    # Nothing is offered at the next open.
    again = Editor(place)
    try:
        again.open(path)
        again.sync()
        assert again.client.call("workspace/recoverable")["journals"] == []
    finally:
        again.client.kill()


def wait_for_no_diagnostic(editor: "Editor") -> bool:
    """Waits (20 s at most) for a `publishDiagnostics` that clears the buffer's diagnostic, after the
    editor wrote its file again. The write is a creation, then the text: on a busy machine the
    watcher may look between the two and see an empty file that differs from the buffer (a
    conflict, shown) before the file holds the buffer's text and the diagnostic goes. What must
    hold: it goes. Answers whether such a passing conflict was seen."""
    deadline = time.monotonic() + 20
    transient = False
    while True:
        diagnostics = editor.next_notification(
            "textDocument/publishDiagnostics", timeout=max(0.1, deadline - time.monotonic()))["params"]["diagnostics"]
        if diagnostics == []:
            return transient
        assert [d["message"] for d in diagnostics] == [
            "The file changed on disk while this buffer has unsaved edits: keep yours, take the file's or merge."], diagnostics
        transient = True


def test_a_file_deleted_on_disk_is_a_diagnostic_until_the_editor_writes_it_again(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("kept text\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        path.unlink()
        diagnostics = editor.next_notification("textDocument/publishDiagnostics")
        (diagnostic,) = diagnostics["params"]["diagnostics"]
        assert "deleted on disk" in diagnostic["message"] and diagnostic["severity"] == 2
        # The editor writes the file again: the diagnostic goes.
        path.write_text(editor.text(path))
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        transient = wait_for_no_diagnostic(editor)
        offers = [m for m in editor.seen if m.get("method") in ("workspace/applyEdit", "window/showMessageRequest")]
        # Nothing is proposed, unless the file was seen empty for a moment (then a conflict's offer).
        assert not offers or (transient and [m["method"] for m in offers] == ["window/showMessageRequest"]), offers
    finally:
        editor.client.kill()


def test_revert_and_restore_version_go_through_apply_edit(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("version one\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.change(path, [{"text": "version two\n"}], "version two\n")
        editor.sync()
        editor.write(path)
        editor.sync()
        editor.change(path, [{"text": "unsaved three\n"}], "unsaved three\n")
        response = editor.command("docsession.revert", uri(path))  # applies the applyEdit on the way
        assert response["result"] == {"applied": True}, response
        assert editor.text(path) == "version two\n"
        assert [m for m in editor.client.sent if m.get("id") == "ds-1"] == [{"jsonrpc": "2.0", "id": "ds-1", "result": {"applied": True}}]
        # Reverted is clean: another program's rewrite is reloaded without a question.
        editor.sync()
        rewrite(path, "version two, from elsewhere\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "version two, from elsewhere\n"
        # The saved version kept by didSave comes back by restoreVersion.
        versions = wait_until(lambda: editor.command("docsession.versions", uri(path))["result"]["versions"], 20, "a kept version")
        response = editor.command("docsession.restoreVersion", uri(path), versions[0]["id"])
        assert response["result"] == {"applied": True}, response
        assert editor.text(path) == "version two\n"
        bad = editor.command("docsession.restoreVersion", uri(path), "no-such-version")
        assert bad["error"]["code"] == -32020, bad
    finally:
        editor.client.kill()


def test_a_recovery_can_be_discarded_or_put_off(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("base\n")
    typed_and_journaled(place, path, "lost?\n").kill_server()

    later = Editor(place)
    try:
        later.open(path)
        later.answer(later.next_request("window/showMessageRequest"), {"title": "Not now"})
        later.sync()
        assert later.text(path) == "base\n" and len(later.client.call("workspace/recoverable")["journals"]) == 1
    finally:
        later.client.kill()
    discard = Editor(place)
    try:
        discard.open(path)
        discard.answer(discard.next_request("window/showMessageRequest"), {"title": "Discard"})
        wait_until(lambda: discard.client.call("workspace/recoverable")["journals"] == [], 20, "the journal to go")
        assert not [m for m in discard.seen if m.get("method") == "workspace/applyEdit"]
    finally:
        discard.client.kill()


def test_without_the_lsp_mode_the_text_document_notifications_are_ignored(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("plain\n")
    client = RpcClient(need_binary(), args=("--state-dir", str(place / "state")))
    try:
        client.initialize({})
        client.notify("initialized")
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri(path), "languageId": "plaintext", "version": 1, "text": "other\n"}})
        opened = client.call("document/open", {"uri": uri(path)})
        assert opened["text"] == "plain\n" and opened["hasUnsavedChanges"] is False
        assert "the client did not ask for the LSP mode" in wait_until(lambda: client.stderr if "LSP mode" in client.stderr else None)
    finally:
        client.kill()


def test_changes_sent_in_batches_still_take_the_reload_and_the_save(place: Path) -> None:
    """An editor holds its changes back for a while (Neovim: 150 ms) and sends them together: the
    reload applied and a line typed after it come in one didChange, and a didSave may come before
    the changes it wrote."""
    path = place / "docs" / "notes.txt"
    path.write_text("one\ntwo\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        rewrite(path, "one\ntwo\nthree\n")
        request = editor.next_request("workspace/applyEdit")
        reloaded = apply_lsp_edits(editor.text(path), request["params"]["edit"]["documentChanges"][0]["edits"])
        editor.answer(request, {"applied": True})
        # One didChange: the reload's edit, then a line typed after it.
        editor.change(path, [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "text": "three\n"},
                             {"range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}}, "text": "typed\n"}],
                      reloaded + "typed\n")
        editor.sync()
        # The file is the synced one: the server's save writes over it without a conflict.
        response = editor.command("docsession.save", uri(path))
        assert "result" in response, response
        assert path.read_text() == "one\ntwo\nthree\ntyped\n"

        # didSave before the changes it wrote: the editor typed, wrote the file, and its change
        # comes after the didSave.
        typed = editor.text(path) + "four\n"
        rewrite(path, typed)
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        editor.change(path, [{"range": {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": 0}}, "text": "four\n"}], typed)
        editor.sync()
        # Clean: another program's rewrite is a reload, not a conflict.
        rewrite(path, typed + "five\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == typed + "five\n"
        assert not [m for m in editor.seen if m.get("method") in ("window/showMessageRequest", "textDocument/publishDiagnostics")]
    finally:
        editor.client.kill()


def test_after_a_refused_change_the_whole_text_or_a_save_brings_the_mirror_back(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("abc\n")
    editor = Editor(place)
    try:
        editor.open(path)
        # A change the server cannot apply (a position inside nothing it knows: an encoding the
        # editor got wrong), then changes made against the editor's text.
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(path), "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": "x"}}, "text": "X"}]})
        editor.buffers[uri(path)] = ("Xbc\n", 2)
        editor.type_at_end(path, "more\n")
        editor.sync()
        stderr = wait_until(lambda: editor.client.stderr if "waiting for the whole text" in editor.client.stderr else None, what="the warnings")
        assert "params.contentChanges[0].range.end.character" in stderr and "not mirrored exactly" in stderr
        # The editor writes its text: didSave makes the file the buffer's text.
        rewrite(path, editor.text(path))
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        editor.type_at_end(path, "after\n")
        editor.sync()
        editor.command("docsession.save", uri(path))
        assert path.read_text() == "Xbc\nmore\nafter\n"
        # A whole text brings it back too.
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(path), "version": 9}, "contentChanges": [
            {"range": {"start": {"line": 9, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "backwards"}]})
        editor.change(path, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "lost "},
                             {"text": "whole\n"}, {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "text": "end\n"}],
                      "whole\nend\n")
        editor.sync()
        editor.command("docsession.save", uri(path))
        assert path.read_text() == "whole\nend\n"
    finally:
        editor.client.kill()


def test_a_move_is_a_deletion_for_a_buffer_and_attributes_go_to_the_log(place: Path) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("text\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        os.chmod(path, 0o600)
        logged = editor.next_notification("window/logMessage")
        assert logged["params"] == {"type": 2, "message": "notes.txt: the file's permissions or attributes changed"}
        # Renamed by another program: the buffer is its file by name, so the file is gone for it.
        path.rename(place / "docs" / "renamed.txt")
        (diagnostic,) = editor.next_notification("textDocument/publishDiagnostics")["params"]["diagnostics"]
        assert "deleted on disk" in diagnostic["message"]
        # The editor writes the buffer where its name says: the file is back.
        path.write_text(editor.text(path))
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        wait_for_no_diagnostic(editor)
        assert (place / "docs" / "renamed.txt").read_text() == "text\n"
    finally:
        editor.client.kill()


def test_a_rewrite_that_truncates_first_ends_in_the_whole_new_text(place: Path) -> None:
    """`echo text > file` truncates the file, then writes: the watcher may see the empty file. The
    editor gets the text the file ends with, not an empty buffer."""
    path = place / "docs" / "notes.txt"
    path.write_text("old text\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        for text in ("new text\n", "newer text\n", "newest text\n"):
            with open(path, "w") as out:  # O_TRUNC, then the write, as a slow writer makes them
                out.flush()
                time.sleep(0.08)  # the writer's pace, not a wait for the server
                out.write(text)
            while editor.text(path) != text:
                editor.apply(editor.next_request("workspace/applyEdit"))
        assert not [m for m in editor.seen if m.get("method") == "window/showMessageRequest"]
    finally:
        editor.client.kill()


def test_a_reload_waits_for_the_change_that_follows_the_one_applied_before(place: Path) -> None:
    """An editor answers `workspace/applyEdit` at once but sends the change that follows later
    (Neovim holds changes back 150 ms): a second rewrite meanwhile must not be proposed against the
    version the editor has left (an editor skips such an edit)."""
    path = place / "docs" / "notes.txt"
    path.write_text("first\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.sync()
        rewrite(path, "second\n")
        request = editor.next_request("workspace/applyEdit")
        (change,) = request["params"]["edit"]["documentChanges"]
        text, version = editor.buffers[uri(path)]
        applied = apply_lsp_edits(text, change["edits"])
        editor.answer(request, {"applied": True})
        editor.buffers[uri(path)] = (applied, version + 1)
        rewrite(path, "third\n")
        time.sleep(0.5)  # the editor's debounce, before its change goes out
        editor.client.notify("textDocument/didChange", {"textDocument": {"uri": uri(path), "version": version + 1}, "contentChanges": [{"text": applied}]})
        # The next proposal is against the editor's version now (Editor.apply checks it).
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "third\n"
    finally:
        editor.client.kill()


@pytest.mark.parametrize("answer", [
    {"result": None},
    {"error": {"code": -32603, "message": "the editor could not show it"}},
    None,  # never answered
], ids=["null", "error", "no answer"])
def test_a_question_not_answered_with_an_action_changes_nothing(place: Path, answer: dict[str, Any] | None) -> None:
    path = place / "docs" / "notes.txt"
    path.write_text("x\n")
    editor = Editor(place)
    try:
        question = conflict(place, editor, path, "mine\n", "theirs\n")
        if answer is not None:
            editor.client.send({"jsonrpc": "2.0", "id": question["id"], **answer})
        # The server goes on serving; nothing is applied, and the conflict stays (a save is
        # refused rather than overwriting the file).
        editor.sync()
        response = editor.command("docsession.save", uri(path))
        assert response["error"]["code"] == -32017, response
        assert path.read_text() == "theirs\n"
        assert not [m for m in editor.seen if m.get("method") == "workspace/applyEdit"]
        if answer is None:
            # Answered late, it is still taken.
            editor.answer(question, {"title": "Keep mine"})
            assert editor.next_notification("textDocument/publishDiagnostics")["params"]["diagnostics"] == []
    finally:
        editor.client.kill()


def test_a_sync_tools_conflict_copy_is_a_diagnostic_and_a_question(place: Path) -> None:
    """Issue 20 (README §8.24, §12): a Syncthing copy beside a buffer is a diagnostic naming it and a
    `window/showMessageRequest`; "Take theirs" comes as `workspace/applyEdit`, and once the buffer
    holds it the copy is removed and the diagnostic goes."""
    path = place / "docs" / "notes.txt"
    path.write_text("one\ntwo\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.type_at_end(path, "three\n")
        editor.sync()
        copy = place / "docs" / "notes.sync-conflict-20261128-101502-ABCDEFG.txt"
        temp = place / "docs" / ".syncthing.notes.txt.tmp"
        temp.write_text("one\ntwo (laptop)\n")
        os.rename(temp, copy)
        diagnostics = editor.next_notification("textDocument/publishDiagnostics")
        (diagnostic,) = diagnostics["params"]["diagnostics"]
        assert copy.name in diagnostic["message"] and "syncthing, ABCDEFG" in diagnostic["message"], diagnostic
        question = editor.next_request("window/showMessageRequest")
        assert copy.name in question["params"]["message"] and "syncthing (ABCDEFG)" in question["params"]["message"]
        assert [a["title"] for a in question["params"]["actions"]] == ["Keep mine", "Take theirs", "Merge", "Not now"]
        editor.answer(question, {"title": "Take theirs"})
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "one\ntwo (laptop)\n"
        assert editor.next_notification("textDocument/publishDiagnostics")["params"]["diagnostics"] == []
        wait_until(lambda: not copy.exists(), 20, "the settled copy removed")
    finally:
        editor.client.kill()


def test_a_version_is_shown_on_a_read_only_copy(place: Path) -> None:
    """Issue 21: `docsession.showVersion` writes the version's text to a read-only file under the
    state directory and asks the editor to show it (`window/showDocument`)."""
    path = place / "docs" / "notes.md"
    path.write_text("first\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.change(path, [{"text": "second\n"}], "second\n")
        editor.sync()
        editor.write(path)
        versions = wait_until(lambda: editor.command("docsession.versions", uri(path))["result"]["versions"], 20, "a kept version")
        request_id = editor.client.next_id
        editor.client.next_id += 1
        editor.client.send({"jsonrpc": "2.0", "id": request_id, "method": "workspace/executeCommand",
                            "params": {"command": "docsession.showVersion", "arguments": [uri(path), versions[0]["id"]]}})
        show = editor.next_request("window/showDocument")
        shown = Path(urllib.parse.unquote(show["params"]["uri"][len("file://"):]))
        assert show["params"]["takeFocus"] is True
        assert shown.read_text() == "second\n" and shown.name.startswith("notes (version ") and shown.suffix == ".md", shown
        assert shown.stat().st_mode & 0o777 == 0o444, oct(shown.stat().st_mode)
        assert not shown.is_relative_to(path.parent), "the copy is not beside the document"
        editor.answer(show, {"success": True})
        while True:
            message = editor.client.read_message(20)
            if message.get("id") == request_id and "method" not in message:
                break
        assert message["result"] == {"shown": True, "uri": show["params"]["uri"]}, message
        bad = editor.command("docsession.showVersion", uri(path), "no-such-version")
        assert bad["error"]["code"] == -32020, bad
    finally:
        editor.client.kill()


def test_a_new_files_buffer_is_journaled_and_recovered_after_a_crash(place: Path) -> None:
    """`nvim new.txt`: a buffer of a file not written yet is mirrored like any (issue 21: a crash
    loses nothing). Its typing is journaled, a killed server's journal is offered at the next open of
    the (still unwritten) file, and the editor's first write makes it clean, a kept version, no
    conflict."""
    path = place / "docs" / "new.txt"
    editor = typed_and_journaled(place, path, "first line of a new file\n", text="")
    # No diagnostic: a new buffer is not a deleted file.
    assert not [m for m in editor.seen if m.get("method") == "textDocument/publishDiagnostics"], editor.seen
    assert not path.exists(), "the server wrote the file the editor did not"
    editor.kill_server()

    again = Editor(place)
    try:
        again.open(path, "")
        message = again.accept_recovery()
        assert message.startswith("new.txt: recover unsaved edits from ") and message.endswith("(1 edit)?"), message
        assert again.text(path) == "first line of a new file\n"
        wait_until(lambda: journal_holds(place, "first line of a new file"), 20, "the buffer's own journal")
        assert not path.exists()
        # The editor writes the file (a creation) and says so: clean (its journal goes), kept as a
        # saved version, and neither a conflict nor a reload is proposed.
        path.write_text(again.text(path))
        again.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        again.sync()
        wait_until(lambda: not journal_holds(place, "first line of a new file"), 20, "the journal to go after the write")
        versions = wait_until(lambda: again.command("docsession.versions", uri(path))["result"]["versions"], 20, "a kept version")
        assert versions[0]["kind"] == "saved", versions
        again.sync()
        proposed = [m for m in again.seen if m.get("method") in ("workspace/applyEdit", "window/showMessageRequest")]
        assert proposed == [], proposed
        assert again.client.call("workspace/recoverable")["journals"] == []
    finally:
        again.client.kill()


def test_a_new_files_buffer_is_written_by_the_save_command(place: Path) -> None:
    path = place / "docs" / "made.txt"
    editor = Editor(place)
    try:
        editor.open(path, "")
        editor.type_at_end(path, "made by docsession.save\n")
        response = editor.command("docsession.save", uri(path))
        assert "result" in response, response
        assert path.read_text() == "made by docsession.save\n"
        wait_until(lambda: not journal_holds(place, "made by docsession.save"), 20, "the journal to go after the save")
        # The file is the buffer's now: another program's rewrite of it is a reload.
        editor.sync()
        rewrite(path, "made by docsession.save, then changed\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "made by docsession.save, then changed\n"
    finally:
        editor.client.kill()


def test_a_new_files_empty_buffer_takes_a_file_another_program_makes(place: Path) -> None:
    """An untouched new buffer has nothing unsaved: a file another program makes at its name is a
    reload, not a conflict."""
    path = place / "docs" / "late.txt"
    editor = Editor(place)
    try:
        editor.open(path, "")
        editor.sync()
        path.write_text("made elsewhere\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "made elsewhere\n"
        editor.sync()
        assert not [m for m in editor.seen if m.get("method") == "window/showMessageRequest"], editor.seen
    finally:
        editor.client.kill()


def test_a_new_buffer_in_a_directory_not_made_yet_is_journaled_and_watched_once_written(place: Path) -> None:
    """`nvim notes/new.txt` before `notes/` exists (made before the editor writes: `mkdir -p`, Neovim 0.8's `:write ++p`): the buffer is
    journaled all the same; once the editor has made the directory and written the file, the file
    is watched like any."""
    path = place / "docs" / "missing" / "new.txt"
    editor = Editor(place)
    try:
        editor.open(path, "")
        editor.type_at_end(path, "in a directory to come\n")
        editor.sync()
        wait_until(lambda: journal_holds(place, "in a directory to come"), 20, "the journal")
        assert not path.parent.exists()
        path.parent.mkdir()
        path.write_text(editor.text(path))
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        editor.sync()
        wait_until(lambda: not journal_holds(place, "in a directory to come"), 20, "the journal to go after the write")
        rewrite(path, "in a directory to come, and changed\n")
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == "in a directory to come, and changed\n"
        # A path under a file is no buffer of a file to come: not mirrored, logged with the reason.
        under = place / "docs" / "missing" / "new.txt" / "below.txt"
        editor.open(under, "x\n")
        editor.sync()
        wait_until(lambda: "ENOTDIR" in editor.client.stderr or "Not a directory" in editor.client.stderr, 20, "the log line")
        response = editor.command("docsession.save", uri(under))
        assert response["error"]["code"] == -32602 and "no didOpen" in response["error"]["message"], response
    finally:
        editor.client.kill()


def test_shutdown_ends_the_mirrors_and_their_journals_the_end_of_input_keeps_them(place: Path) -> None:
    """An editor's client says shutdown when the editor quits (its user saved or discarded each
    buffer) or stops the server while keeping its buffers: nothing of a mirrored buffer is offered
    later. A crash says nothing: the end of input keeps the journal, offered at the next open."""
    path = place / "docs" / "notes.txt"
    path.write_text("saved\n")
    editor = typed_and_journaled(place, path, "discarded by :qa!\n")
    try:
        assert editor.client.shutdown_and_exit() == 0
    finally:
        editor.client.kill()
    assert not journal_holds(place, "discarded by :qa!")
    crashed = Editor(place)
    try:
        crashed.open(path)
        crashed.sync()
        assert crashed.client.call("workspace/recoverable")["journals"] == []
        crashed.type_at_end(path, "kept through a crash\n")
        crashed.sync()
        wait_until(lambda: journal_holds(place, "kept through a crash"), 20, "the journal")
        crashed.client.close_input()
        assert crashed.client.process.wait(timeout=30) == 1
    finally:
        crashed.client.kill()
    later = Editor(place)
    try:
        later.open(path)
        question = later.next_request("window/showMessageRequest")
        assert question["params"]["message"].startswith("notes.txt: recover unsaved edits"), question
    finally:
        later.client.kill()


def test_vims_empty_buffer_of_a_new_file_is_nothing_unsaved(place: Path) -> None:
    """Neovim's client sends "\\n" for the one empty line of a new buffer (and of an empty file),
    whose write makes an empty file: nothing unsaved, so nothing journaled or offered after a crash,
    and the empty file the editor writes is the buffer's."""
    path = place / "docs" / "empty.txt"
    editor = Editor(place)
    editor.open(path, "\n")
    editor.sync()
    editor.type_at_end(path, "x")
    editor.sync()
    journals = lambda: list((place / "state" / "journal").glob("*.journal"))
    wait_until(journals, 20, "the journal of the typed character")
    editor.change(path, [{"text": "\n"}], "\n")
    editor.sync()
    wait_until(lambda: not journals(), 20, "the journal to go once the buffer is empty again")
    editor.kill_server()
    again = Editor(place)
    try:
        again.open(path, "\n")
        again.sync()
        assert again.client.call("workspace/recoverable")["journals"] == []
        opened = again.client.call("document/open", {"uri": uri(path)})
        assert opened["text"] == "\n" and opened["hasUnsavedChanges"] is False, opened
        assert not [m for m in again.seen if m.get("method") == "window/showMessageRequest"], again.seen
        # The editor writes the empty buffer: an empty file, clean.
        path.write_bytes(b"")
        again.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        again.sync()
        # The session (seen through document/open, which answers the open session) is clean.
        session = again.client.call("document/open", {"uri": uri(path)})
        assert session["text"] == "\n" and session["hasUnsavedChanges"] is False, session
        assert not [m for m in again.seen if m.get("method") in ("window/showMessageRequest", "workspace/applyEdit")], again.seen
    finally:
        again.client.kill()


def test_typing_into_vims_empty_buffer_of_a_new_file_is_recovered_whole(place: Path) -> None:
    """The first change of Vim's empty buffer ("\\n", taken as the new file's empty text) is
    journaled against the text the buffer had, not the file's: the recovery brings back the
    buffer's text exactly."""
    path = place / "docs" / "new.txt"
    editor = Editor(place)
    editor.open(path, "\n")
    editor.change(path, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "typed ✓"}],
                  "typed ✓\n")
    editor.sync()
    wait_until(lambda: journal_holds(place, "typed ✓"), 20, "the journal")
    editor.kill_server()
    again = Editor(place)
    try:
        again.open(path, "\n")
        again.accept_recovery()
        assert again.text(path) == "typed ✓\n"
    finally:
        again.client.kill()


def test_the_editors_write_of_vims_empty_buffer_is_its_text_not_a_change(place: Path) -> None:
    """Every line deleted, Neovim's buffer is one empty line ("\\n"), and its write makes an empty
    file: when the watcher sees that file before the editor's didSave comes, it is the buffer's
    text (the session is clean), not another program's change (no conflict, no question)."""
    path = place / "docs" / "notes.txt"
    path.write_text("every line of it\ngoes\n")
    editor = Editor(place)
    try:
        editor.open(path)
        editor.change(path, [{"text": "\n"}], "\n")
        editor.sync()
        path.write_bytes(b"")  # the editor's write; its didSave comes later
        wait_until(lambda: editor.client.call("document/open", {"uri": uri(path)})["hasUnsavedChanges"] is False, 20,
                   "the session to take the empty file as the buffer's text")
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        editor.sync()
        asked = [m for m in editor.seen if m.get("method") in ("window/showMessageRequest", "workspace/applyEdit")]
        diagnostics = [m for m in editor.seen if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["diagnostics"]]
        assert asked == [] and diagnostics == [], editor.seen
    finally:
        editor.client.kill()


def test_with_roots_a_new_buffer_inside_is_journaled_and_a_link_at_its_name_is_never_followed(place: Path) -> None:
    inside = place / "docs" / "new.txt"
    outside = place / "outside"
    outside.mkdir()
    editor = Editor(place, extra_args=("--root", str(place / "docs")))
    try:
        editor.open(inside, "")
        editor.type_at_end(inside, "journaled under roots\n")
        editor.sync()
        wait_until(lambda: journal_holds(place, "journaled under roots"), 20, "the journal")
        # A new buffer outside the roots is not mirrored.
        editor.open(outside / "new.txt", "")
        # Nor is one whose name is a dangling link leading out (it is never opened by path).
        (place / "docs" / "link.txt").symlink_to(outside / "target.txt")
        editor.open(place / "docs" / "link.txt", "")
        editor.type_at_end(place / "docs" / "link.txt", "must not leave the roots\n")
        editor.sync()
        for path in (outside / "new.txt", place / "docs" / "link.txt"):
            response = editor.command("docsession.save", uri(path))
            assert response["error"]["code"] == -32602 and "no didOpen" in response["error"]["message"], response
        assert not (outside / "target.txt").exists() and not (outside / "new.txt").exists()
        assert not journal_holds(place, "must not leave the roots")
    finally:
        editor.client.kill()


def conflict_sizes(editor: Editor, path: Path) -> list[int]:
    """The sizes of the buffer's kept conflict versions (`docsession.versions`)."""
    versions = editor.command("docsession.versions", uri(path))["result"]["versions"]
    return [version["size"] for version in versions if version["kind"] == "conflict"]


def test_a_buffer_that_differs_from_the_file_at_did_open_is_a_conflict_not_edits_to_write(place: Path) -> None:
    """Issue 34 point 11 (found by the pytest-lsp client): another program writes the file between
    the editor's read and its `didOpen`, so the editor's text is the old one and the server reads
    the new. The difference was taken as the user's unsaved edits, and `docsession.save` wrote the
    old text over the other program's (20 of 20). It is a conflict: diagnostic, question, the save
    refused, the file's text kept as a conflict version."""
    path = place / "docs" / "notes.txt"
    theirs = "their new text\n"
    path.write_text(theirs)  # written after the editor read "the old text"
    editor = Editor(place)
    try:
        editor.open(path, "the old text\n")
        question = editor.next_request("window/showMessageRequest", timeout=20)
        assert [a["title"] for a in question["params"]["actions"]] == ["Keep mine", "Take theirs", "Merge"]
        published = [m for m in editor.seen if m.get("method") == "textDocument/publishDiagnostics"]
        assert published and published[-1]["params"]["diagnostics"], published
        refused = editor.command("docsession.save", uri(path))
        assert refused.get("error", {}).get("code") == -32017, refused
        assert path.read_text() == theirs
        wait_until(lambda: len(theirs) in conflict_sizes(editor, path), 20, "the file's text kept as a conflict version")
        editor.answer(question, {"title": "Take theirs"})
        editor.apply(editor.next_request("workspace/applyEdit"))
        assert editor.text(path) == theirs
        assert editor.next_notification("textDocument/publishDiagnostics")["params"]["diagnostics"] == []
    finally:
        editor.client.kill()


THEIRS = "one\ntheirs, written by another program\n"


def reload_proposed_as_the_user_types(editor: "Editor", path: Path) -> dict:
    """`path` ("one\\n") open in `editor`; another program writes THEIRS over it, the server
    proposes the reload (`workspace/applyEdit`, answered here), and the user types "mine\\n" before
    the editor answers it."""
    path.write_text("one\n")
    editor.open(path)
    editor.sync()
    rewrite(path, THEIRS)
    proposal = editor.next_request("workspace/applyEdit")
    editor.type_at_end(path, "mine\n")
    return proposal


def test_a_reload_the_editor_refuses_is_a_conflict_at_once_and_its_own_save_keeps_their_text(place: Path) -> None:
    """Issue 34 point 11: the server proposes a reload, the user types meanwhile and the editor
    answers `{applied: false}` (as VS Code does). Nothing was said until `docsession.save` failed,
    and when the editor wrote the file itself (`didSave`) the other program's text was gone without
    a trace. Now the refusal is a conflict at once (diagnostic and question), and the other
    program's text is a conflict version when the editor writes over it."""
    path = place / "docs" / "notes.txt"
    editor = Editor(place)
    try:
        proposal = reload_proposed_as_the_user_types(editor, path)
        assert proposal["params"]["label"] == "Reloaded from disk"
        editor.answer(proposal, {"applied": False, "failureReason": "the document changed"})
        question = editor.next_request("window/showMessageRequest", timeout=20)
        assert [a["title"] for a in question["params"]["actions"]] == ["Keep mine", "Take theirs", "Merge"]
        published = [m for m in editor.seen if m.get("method") == "textDocument/publishDiagnostics"]
        assert published and published[-1]["params"]["diagnostics"], published
        editor.write(path)  # the editor writes its buffer over the file itself
        editor.sync()
        assert path.read_text() == "one\nmine\n"
        wait_until(lambda: len(THEIRS) in conflict_sizes(editor, path), 20, "the other program's text kept as a conflict version")
    finally:
        editor.client.kill()


def test_the_editors_own_write_racing_did_open_is_not_a_conflict(place: Path) -> None:
    """The other side of the test above, as Neovim does it: the editor writes a buffer it has just
    attached and sends didSave at once, so the server reads the file after the write and sees the
    editor's new text against the old one of didOpen. The didSave explains the difference: nothing
    is asked, and the only version kept is the save's."""
    path = place / "docs" / "notes.txt"
    path.write_text("written by the editor\n")  # the editor's write, before the server read the file
    editor = Editor(place)
    try:
        editor.open(path, "one\n")
        editor.change(path, [{"text": "written by the editor\n"}], "written by the editor\n")
        editor.client.notify("textDocument/didSave", {"textDocument": {"uri": uri(path)}})
        # docsession.save settles a difference of didOpen at once (without the didSave, a conflict
        # that refuses it: the test above): after the didSave there is none left.
        response = editor.command("docsession.save", uri(path))
        assert "result" in response, response
        assert path.read_text() == "written by the editor\n"
        wait_until(lambda: editor.command("docsession.versions", uri(path))["result"]["versions"], 20, "the saved version")
        assert [v["kind"] for v in editor.command("docsession.versions", uri(path))["result"]["versions"]] == ["saved"]
        assert not [m for m in editor.seen if m.get("method") == "window/showMessageRequest"]
        published = [m for m in editor.seen if m.get("method") == "textDocument/publishDiagnostics"]
        assert not [m for m in published if m["params"]["diagnostics"]], published
    finally:
        editor.client.kill()


def test_the_editors_save_before_it_answers_a_reload_keeps_their_text(place: Path) -> None:
    """Issue 34 point 11: the editor writes its buffer (`didSave`) while the server's reload
    proposal still waits for its answer: the other program's text it wrote over is kept as a
    conflict version (before, it was gone without a trace); the refusal that follows is no
    conflict any more (the editor's file is the buffer's)."""
    path = place / "docs" / "notes.txt"
    editor = Editor(place)
    try:
        proposal = reload_proposed_as_the_user_types(editor, path)
        editor.write(path)  # before answering the proposal
        editor.sync()
        wait_until(lambda: len(THEIRS) in conflict_sizes(editor, path), 20, "the other program's text kept as a conflict version")
        editor.answer(proposal, {"applied": False, "failureReason": "the document changed"})
        response = editor.command("docsession.save", uri(path))  # in order after the answer: nothing to refuse
        assert "result" in response, response
        assert path.read_text() == "one\nmine\n"
        assert not [m for m in editor.seen if m.get("method") == "window/showMessageRequest"]
    finally:
        editor.client.kill()
