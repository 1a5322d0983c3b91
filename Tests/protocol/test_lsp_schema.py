"""The LSP mode's traffic against LSP 3.17's own schema (issue 21.3): a third client, a small driver
built on lsprotocol (PyPI: the types Microsoft generates from LSP's meta-model, as pygls uses them),
runs the LSP mode's scenarios over stdio with the built binary and checks that every message the
server sends is valid LSP: each request and notification structures into lsprotocol's class for its
method, each response into the response class of the request it answers, each error into
ResponseError. lsprotocol's converter refuses a missing required member, a member of the wrong
type and an enumeration value LSP does not define.

The scenarios: initialize; didOpen, didChange, willSave, didSave; another program's rewrite of a
clean buffer (workspace/applyEdit); a conflict (publishDiagnostics, window/showMessageRequest, the
merge's applyEdit, the diagnostics cleared); a merge whose sides overlap (window/showMessage); a
deletion on disk (publishDiagnostics); workspace/executeCommand with each command and a refused one;
kill -9 during unsaved edits and the recovery offered at the next didOpen; shutdown.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from rpc_client import RpcClient, wait_until
from test_lsp_mode import apply_lsp_edits, need_binary, place, rewrite, uri  # noqa: F401 (place: a fixture)

lsprotocol = pytest.importorskip(
    "lsprotocol", reason="lsprotocol is not installed (scripts/bootstrap --tests installs it from PyPI)")
from lsprotocol import types  # noqa: E402
from lsprotocol.converters import get_converter  # noqa: E402

CONVERTER = get_converter()

# Members the server sends that LSP does not define, by where they are: the initialize result's
# capabilities of our own protocol (protocol/README.md §5.1), beside LSP's, for our own clients; an
# LSP client ignores members it does not know.
OWN_CAPABILITIES = {"maxMessageSize", "batches", "cancellation", "autosave", "watchFiles", "versions", "roots",
                    "journal", "flushDelay", "hotExit", "persistUndo", "handoff", "storage"}


def differences(original: Any, again: Any, path: str, extra: list[str]) -> list[str]:
    """Where `again` (a message structured by lsprotocol and unstructured back) differs from
    `original`: a value the converter had to coerce (a string for a number) or that it dropped as
    not LSP. Members LSP does not define are collected in `extra`."""
    if isinstance(original, dict) and isinstance(again, dict):
        found = []
        for key, value in original.items():
            if key not in again:
                if value is not None:
                    extra.append(f"{path}.{key}")
                continue
            found += differences(value, again[key], f"{path}.{key}", extra)
        found += [f"{path}.{key}: added" for key in again if key not in original and again[key] is not None]
        return found
    if isinstance(original, list) and isinstance(again, (list, tuple)):
        if len(original) != len(again):
            return [f"{path}: {len(original)} elements, {len(again)} after the round trip"]
        return [d for index, (a, b) in enumerate(zip(original, again)) for d in differences(a, b, f"{path}[{index}]", extra)]
    if type(original) is not type(again) or original != again:
        return [f"{path}: {original!r} became {again!r}"]
    return []


def check_lsp(message: dict[str, Any], cls: type, allowed_extra: set[str] = frozenset()) -> None:
    """Raises unless `message` is valid LSP as `cls`: lsprotocol structures it (no member missing, no
    unknown enumeration value), and unstructures it back to the same values (nothing coerced), with
    no member LSP does not define but those `allowed_extra` names."""
    try:
        structured = CONVERTER.structure(message, cls)
    except Exception as error:  # cattrs' ClassValidationError and friends
        raise AssertionError(f"not valid LSP 3.17 as {cls.__name__}: {message}\n{error!r}") from None
    extra: list[str] = []
    found = differences(message, CONVERTER.unstructure(structured), "$", extra)
    unknown = [path for path in extra if path not in allowed_extra]
    assert not found and not unknown, f"not valid LSP 3.17 as {cls.__name__}: {found + [p + ': not LSP' for p in unknown]}\n{message}"


class Checked:
    """An editor's LSP client that checks every message the server sends against LSP's schema."""

    def __init__(self, place: Path):
        self.client = RpcClient(need_binary(), args=("serve", "--state-dir", str(place / "state")))
        self.sent_methods: dict[Any, str] = {}
        self.checked: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.answers: list[str] = []
        self.asked: list[dict[str, Any]] = []
        self.shown: list[dict[str, Any]] = []
        self.diagnostics: dict[str, list] = {}
        self.next_id = 1
        result = self.request("initialize", {
            "processId": os.getpid(), "rootUri": None,
            "capabilities": {"textDocument": {"synchronization": {"didSave": True, "willSave": True}},
                             "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}},
                             "window": {"showMessage": {"messageActionItem": {"additionalPropertiesSupport": False}}}},
        })
        self.capabilities = result["capabilities"]
        self.notify("initialized", {})

    # -- checking

    def check(self, message: dict[str, Any]) -> None:
        """Structures `message` into lsprotocol's class for it (raises when it is not valid LSP)."""
        if "method" in message:
            method = message["method"]
            assert method in types.METHOD_TO_TYPES, f"not an LSP method: {method}"
            cls = types.METHOD_TO_TYPES[method][0]
            kind = method
        else:
            method = self.sent_methods.pop(message["id"])
            if "error" in message:
                cls, kind = types.ResponseErrorMessage, f"{method} (error)"
            else:
                cls, kind = types.METHOD_TO_TYPES[method][1], f"{method} (response)"
        check_lsp(message, cls, allowed_extra={f"$.result.capabilities.{name}" for name in OWN_CAPABILITIES}
                  if kind == "initialize (response)" else set())
        self.checked[kind] = self.checked.get(kind, 0) + 1

    # -- sending

    def request(self, method: str, params: Any) -> Any:
        request_id = self.next_id
        self.next_id += 1
        self.sent_methods[request_id] = method
        self.client.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    return message
                return message["result"]

    def notify(self, method: str, params: Any) -> None:
        self.client.send({"jsonrpc": "2.0", "method": method, "params": params})

    def receive(self, timeout: float = 60.0) -> dict[str, Any]:
        """The next message, checked, and handled as an editor would: applyEdit applied, a message
        request answered from `answers`, diagnostics and shown messages kept."""
        message = self.client.read_message(timeout=timeout)
        self.check(message)
        method = message.get("method")
        if method == "workspace/applyEdit":
            for change in message["params"]["edit"]["documentChanges"]:
                document = change["textDocument"]["uri"]
                assert change["textDocument"]["version"] == self.versions[document], change
                new = apply_lsp_edits(self.texts[document], change["edits"])
                self.client.send({"jsonrpc": "2.0", "id": message["id"], "result": {"applied": True}})
                self.change(document, [{"range": edit["range"], "text": edit["newText"]} for edit in change["edits"]], new)
        elif method == "window/showMessageRequest":
            self.asked.append(message["params"])
            choice = self.answers.pop(0) if self.answers else None
            action = next((a for a in message["params"]["actions"] if a["title"] == choice), None)
            self.client.send({"jsonrpc": "2.0", "id": message["id"], "result": action})
        elif method == "window/showMessage":
            self.shown.append(message["params"])
        elif method == "textDocument/publishDiagnostics":
            self.diagnostics[message["params"]["uri"]] = message["params"]["diagnostics"]
        return message

    def sync(self) -> None:
        """A request answered after every notification before it: the server has taken them."""
        self.request("workspace/executeCommand", {"command": "docsession.versions", "arguments": [next(iter(self.texts))]})

    def until(self, condition, what: str) -> None:
        """Handles messages until `condition()` holds."""
        while not condition():
            try:
                self.receive(timeout=60.0)
            except TimeoutError:
                raise AssertionError(f"timed out waiting for {what}") from None

    # -- buffers

    def open(self, path: Path, text: str | None = None) -> str:
        document = uri(path)
        self.texts[document] = path.read_text() if text is None else text
        self.versions[document] = 1
        self.notify("textDocument/didOpen", {"textDocument": {"uri": document, "languageId": "plaintext", "version": 1,
                                                              "text": self.texts[document]}})
        return document

    def change(self, document: str, changes: list[dict[str, Any]], new_text: str) -> None:
        self.versions[document] += 1
        self.texts[document] = new_text
        self.notify("textDocument/didChange", {"textDocument": {"uri": document, "version": self.versions[document]},
                                               "contentChanges": changes})

    def type_at_end(self, document: str, typed: str) -> None:
        text = self.texts[document]
        lines = text.split("\n")
        end = {"line": len(lines) - 1, "character": len(lines[-1].encode("utf-16-le")) // 2}
        self.change(document, [{"range": {"start": end, "end": end}, "text": typed}], text + typed)

    def save(self, path: Path, document: str) -> None:
        self.notify("textDocument/willSave", {"textDocument": {"uri": document}, "reason": 1})
        path.write_text(self.texts[document])
        self.notify("textDocument/didSave", {"textDocument": {"uri": document}})


def test_every_message_of_the_lsp_mode_is_valid_lsp(place: Path) -> None:
    notes = place / "notes.txt"
    notes.write_text("one\ntwo\nthree\n")
    editor = Checked(place)
    try:
        assert editor.capabilities["textDocumentSync"]["change"] == 2
        document = editor.open(notes)
        editor.type_at_end(document, "four é😀\n")
        editor.save(notes, document)
        editor.sync()

        # Another program's rewrite of the clean buffer: reloaded with workspace/applyEdit.
        rewrite(notes, "ONE\ntwo\nthree\nfour é😀\n")
        editor.until(lambda: editor.texts[document] == "ONE\ntwo\nthree\nfour é😀\n", "the reload")
        editor.sync()

        # A conflict, merged: diagnostics, the message request, the merge's edit, diagnostics cleared.
        editor.type_at_end(document, "mine\n")
        editor.sync()
        editor.answers = ["Merge"]
        rewrite(notes, "ONE\ntwo, theirs\nthree\nfour é😀\n")
        editor.until(lambda: editor.texts[document] == "ONE\ntwo, theirs\nthree\nfour é😀\nmine\n", "the merge")
        editor.until(lambda: editor.diagnostics.get(document) == [], "the diagnostics cleared")
        assert editor.asked and editor.asked[-1]["actions"] == [{"title": "Keep mine"}, {"title": "Take theirs"}, {"title": "Merge"}]

        # A merge whose sides overlap: window/showMessage, nothing changed.
        editor.change(document, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}},
                                   "text": "uno"}], "uno" + editor.texts[document][3:])
        editor.sync()
        editor.answers = ["Merge"]
        before = editor.texts[document]
        rewrite(notes, "eins\ntwo, theirs\nthree\nfour é😀\n")
        editor.until(lambda: editor.shown, "the overlapping merge's message")
        assert editor.texts[document] == before
        # The conflict stays; the file's text is taken by the command an editor would bind.
        response = editor.request("workspace/executeCommand", {"command": "docsession.revert", "arguments": [document]})
        assert response == {"applied": True}, response
        editor.until(lambda: editor.texts[document] == "eins\ntwo, theirs\nthree\nfour é😀\n", "the revert")
        editor.sync()

        # The commands: versions, save, restoreVersion, and a refused one.
        versions = wait_until(
            lambda: editor.request("workspace/executeCommand", {"command": "docsession.versions", "arguments": [document]})["versions"],
            20, "a kept version")
        editor.type_at_end(document, "five\n")
        saved = editor.request("workspace/executeCommand", {"command": "docsession.save", "arguments": [document]})
        assert saved["uri"] == document, saved
        restored = editor.request("workspace/executeCommand", {"command": "docsession.restoreVersion",
                                                               "arguments": [document, versions[-1]["id"]]})
        assert restored == {"applied": True}, restored
        refused = editor.request("workspace/executeCommand", {"command": "docsession.nothing", "arguments": [document]})
        assert refused["error"]["code"] == -32602, refused

        # A deletion on disk: a diagnostic.
        other = place / "other.txt"
        other.write_text("other\n")
        other_document = editor.open(other)
        editor.sync()
        other.unlink()
        editor.until(lambda: editor.diagnostics.get(other_document), "the deletion's diagnostic")
        editor.notify("textDocument/didClose", {"textDocument": {"uri": other_document}})
        editor.until(lambda: editor.diagnostics.get(other_document) == [], "the diagnostic cleared at the close")

        # kill -9 during unsaved edits; the next didOpen offers the recovery, which is applied.
        editor.type_at_end(document, "unsaved ✓\n")
        editor.sync()
        wait_until(lambda: any("unsaved ✓".encode() in f.read_bytes() for f in (place / "state" / "journal").glob("*.journal")),
                   20, "the journal")
        unsaved = editor.texts[document]
        os.kill(editor.client.process.pid, signal.SIGKILL)
        editor.client.process.wait()
        editor.client.kill()
        counts = editor.checked

        again = Checked(place)
        again.answers = ["Recover"]
        recovered = again.open(notes)
        again.until(lambda: again.texts[recovered] == unsaved, "the recovery")
        assert "recover unsaved edits" in again.asked[0]["message"]
        again.sync()
        assert again.request("shutdown", None) is None
        again.notify("exit", None)
        assert again.client.wait() == 0
        for kind, count in again.checked.items():
            counts[kind] = counts.get(kind, 0) + count
    finally:
        editor.client.kill()

    print("checked:", counts)
    # Every kind of message the LSP mode sends was seen and checked.
    for kind in ("initialize (response)", "workspace/applyEdit", "window/showMessageRequest", "window/showMessage",
                 "textDocument/publishDiagnostics", "workspace/executeCommand (response)", "workspace/executeCommand (error)",
                 "shutdown (response)"):
        assert counts.get(kind, 0) > 0, f"no {kind} was checked: {counts}"


def test_the_check_refuses_what_is_not_lsp() -> None:
    """The converter the check relies on refuses a missing member, a wrong type and an unknown
    enumeration value (so the test above can fail)."""
    good = {"jsonrpc": "2.0", "id": "ds-1", "method": "workspace/applyEdit",
            "params": {"label": "x", "edit": {"documentChanges": [{"textDocument": {"uri": "file:///a", "version": 2}, "edits": [
                {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "y"}]}]}}}
    CONVERTER.structure(good, types.ApplyWorkspaceEditRequest)
    bad_messages = [
        ({**good, "params": {"label": "x"}}, types.ApplyWorkspaceEditRequest),  # edit missing
        ({**good, "params": {"edit": {"documentChanges": [{"textDocument": {"uri": "file:///a", "version": "2"}, "edits": []}]}}},
         types.ApplyWorkspaceEditRequest),  # a version that is a string
        ({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///a", "diagnostics": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "severity": 7, "message": "m"}]}},
         types.PublishDiagnosticsNotification),  # no such severity
        ({"jsonrpc": "2.0", "id": "ds-2", "method": "window/showMessageRequest", "params": {"type": 2}},
         types.ShowMessageRequest),  # message missing
    ]
    check_lsp(good, types.ApplyWorkspaceEditRequest)
    for message, cls in bad_messages:
        with pytest.raises(AssertionError):
            check_lsp(message, cls)
    # A member LSP does not define.
    with pytest.raises(AssertionError):
        check_lsp({**good, "params": {**good["params"], "labels": "x"}}, types.ApplyWorkspaceEditRequest)
