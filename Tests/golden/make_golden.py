#!/usr/bin/env python3
"""Makes the golden sessions of Tests/golden: each SESSION below is driven against a server started
with `serve --record`, and its recording is written as NAME.jsonl (with NAME.files/, the fixtures
the session starts with, when it has any).

    python3 Tests/golden/make_golden.py            # every session
    python3 Tests/golden/make_golden.py versions   # only these

The server runs in a fresh temporary directory holding the fixtures, with `--state-dir DIR/.state`
(as `docsession replay` starts it); every occurrence of that directory in the recording is then
written as ${ROOT}. The client here is strictly sequential: after a request it waits for the
response, after a raw body or a batch for the responses it says it expects, so that a replay sees
the same order. Nothing here depends on timing: no changes on disk by other programs, no
cancellation of running work, no autosave; `wait_versions` waits (outside the protocol) until the
server has written the earlier versions of the saves in the background.

After regenerating, check: `for i in 1 2 3; do python3 -m pytest -q Tests/golden; done`.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BINARY = Path(os.environ.get("DOCSESSION_BIN") or REPO / ".build" / "debug" / "docsession")
if not BINARY.is_absolute():
    BINARY = REPO / BINARY
ROOT = "${ROOT}"

NOTES = b"Hello, world!\nSecond line\n"


# ------------------------------------------------------------------------------------------------
# The sessions. A step is a tuple:
#   ("req", method, params)            a request with the next integer id; params None: left out
#   ("req_id", id, method, params)     a request with this id
#   ("note", method, params)           a notification
#   ("raw", text, responses)           this body as it is; `responses` responses expected
#   ("batch", [message, ...], responses)
#   ("wait_versions", n)               wait until the server has kept n versions in all
# Strings may hold ${ROOT}, replaced by the session's directory when sent.

INIT = ("req", "initialize", {})
STARTED = [INIT, ("note", "initialized", None)]
ENDED = [("req", "shutdown", None), ("note", "exit", None)]


def uri(name: str) -> str:
    return f"file://{ROOT}/{name}"


def edit(document: str, version: int, line: int, character: int, text: str, **more: Any) -> tuple:
    position = {"line": line, "character": character}
    params = {"document": document, "version": version, "edits": [{"range": {"start": position, "end": position}, "text": text}]}
    return ("req", "document/edit", params | more)


SESSIONS: dict[str, dict[str, Any]] = {
    # The lifecycle and JSON-RPC itself: every error the connection and the lifecycle answer.
    "lifecycle": {
        "fixtures": {},
        "steps": [
            ("req", "shutdown", None),  # -32002: not initialized
            ("req", "document/read", {"document": "d1"}),  # -32002
            ("note", "initialized", None),  # dropped before initialize
            ("req", "initialize", {
                "processId": None, "clientInfo": {"name": "golden", "version": "1"}, "trace": "off",
                "capabilities": {"general": {"positionEncodings": ["utf-32", "utf-8"]}},
            }),
            ("req", "initialize", {}),  # -32600: a second initialize
            ("note", "initialized", None),
            ("req", "no/such/method", {}),  # -32601
            ("req", "initialized", None),  # -32600: a notification sent with an id
            ("note", "document/read", {"document": "d1"}),  # a request without an id: ignored
            ("note", "no/such/notification", {}),  # ignored
            ("note", "$/cancelRequest", {"id": 999}),  # nothing to cancel
            ("req_id", "a string id", "document/state", {"document": "d1"}),  # -32011, under a string id
            ("note", "$/setTrace", {"value": "messages"}),
            ("req", "document/state", {"document": "d1"}),  # traced: $/logTrace twice
            ("note", "$/setTrace", {"value": "verbose"}),
            ("req", "document/versions", {"document": "d1"}),  # traced with params and error
            ("note", "$/setTrace", {"value": "off"}),
            ("note", "$/setTrace", {"value": "loud"}),  # ignored (a notification cannot be answered)
            ("raw", '{"jsonrpc":"2.0","id":', 1),  # -32700, with the offset
            ("raw", "[]", 1),  # -32600: empty batch
            ("raw", "42", 1),  # -32600: not an object
            ("raw", '{"jsonrpc":"1.0","id":7,"method":"shutdown"}', 1),  # -32600 under id 7
            ("raw", '{"jsonrpc":"2.0","id":8,"method":"document/read","params":"d1"}', 1),  # -32600: params
            ("raw", '{"jsonrpc":"2.0","id":[1],"method":"shutdown"}', 1),  # -32600: id
            ("batch", [
                {"jsonrpc": "2.0", "id": 20, "method": "document/state", "params": {"document": "d9"}},
                {"jsonrpc": "2.0", "method": "no/such/notification"},
                {"jsonrpc": "2.0", "id": 21, "method": "no/such/method"},
            ], 2),
            ("req", "shutdown", []),  # shutdown takes no params: an empty array is accepted
            ("req", "shutdown", None),
            ("req", "document/state", {"document": "d1"}),  # -32600: after shutdown
            ("note", "exit", None),
        ],
    },
    # initialize's params, refused field by field, then accepted with options.
    "initialize": {
        "fixtures": {},
        "steps": [
            ("req", "initialize", []),  # -32602: an array
            ("req", "initialize", {"capabilities": {"general": {"positionEncodings": [1]}}}),  # -32602 names the field
            ("req", "initialize", {"trace": "loud"}),  # -32602
            ("req", "initialize", {"processId": "me"}),  # -32602
            ("req", "initialize", {"initializationOptions": {"autosave": {"policy": "sometimes"}}}),  # -32602
            ("req", "initialize", {
                "trace": "messages", "capabilities": {"general": {"positionEncodings": ["utf-16"]}},
                "initializationOptions": {"autosave": {"policy": "afterDelay", "delay": 60000}},
            }),
            ("note", "initialized", None),
            ("req", "shutdown", None),
            ("note", "exit", None),
        ],
    },
    # Opening, reading, editing, undo and redo, state, save, revert, create, close: results and errors.
    "documents": {
        "fixtures": {"notes.txt": NOTES, "broken.txt": b"abc\xc3\x28def\n", "latin1.txt": b"caf\xe9\n"},
        "steps": STARTED + [
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": True}),  # d1
            ("req", "document/open", {"uri": uri("notes.txt")}),  # the same document again
            ("req", "document/open", {"uri": uri("missing.txt")}),  # -32010 ENOENT
            ("req", "document/open", {"uri": f"file://{ROOT}"}),  # -32016: a directory
            ("req", "document/open", {"uri": uri("broken.txt")}),  # -32014: not UTF-8
            ("req", "document/open", {"uri": 5}),  # -32602 params.uri
            ("req", "document/open", {"uri": "http://example.com/notes.txt"}),  # -32602: not a file URI
            ("req", "document/open", {"uri": uri("notes.txt"), "encoding": "ebcdic"}),  # -32602
            ("req", "document/open", {}),  # -32602: uri missing
            ("req", "document/open", {"uri": uri("latin1.txt"), "encoding": "iso-8859-1", "includeText": True}),  # d2
            ("req", "document/read", {"document": "d1"}),
            ("req", "document/read", {"document": "d1", "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 6}}}),
            ("req", "document/read", {"document": "d99"}),  # -32011
            ("req", "document/read", {}),  # -32602: document missing
            edit("d1", 1, 2, 0, "Third line\n", undo={"label": "Add a line"}),  # version 2
            edit("d1", 1, 0, 0, "stale"),  # -32801
            ("req", "document/edit", {"document": "d1", "version": 2, "edits": [{"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}, "text": ""}]}),  # -32602 field path
            ("req", "document/edit", {"document": "d1", "version": 2, "edits": [{"text": 5}]}),  # -32602
            ("req", "document/edit", {"document": "d1", "version": "2", "edits": []}),  # -32602
            edit("d99", 1, 0, 0, "x"),  # -32011
            ("req", "document/state", {"document": "d1"}),
            ("req", "document/undo", {"document": "d1"}),  # version 3
            ("req", "document/undo", {"document": "d1"}),  # nothing to undo
            ("req", "document/redo", {"document": "d1", "version": 3}),  # version 4
            ("req", "document/redo", {"document": "d1"}),  # nothing to redo
            ("req", "document/undo", {"document": "d1", "version": 1}),  # -32801
            ("req", "document/redo", {"document": "d99"}),  # -32011
            ("req", "document/state", {"document": "d1"}),
            ("req", "document/save", {"document": "d1"}),
            ("req", "document/state", {"document": "d1"}),
            ("req", "document/save", {"document": "d99"}),  # -32011
            ("req", "document/save", {"document": "d1", "to": uri("latin1.txt")}),  # -32013: another open document's file
            edit("d1", 4, 0, 0, "Unsaved: "),  # version 5
            ("req", "document/revert", {"document": "d1", "includeText": True}),
            ("req", "document/revert", {"document": "d99"}),  # -32011
            ("req", "document/resolveConflict", {"document": "d1", "resolution": "mine"}),  # -32019
            ("req", "document/resolveConflict", {"document": "d1", "resolution": "neither"}),  # -32602
            edit("d2", 1, 0, 0, "\U0001F600 "),  # an emoji in an ISO-8859-1 document
            ("req", "document/save", {"document": "d2"}),  # -32018: unencodable
            ("req", "document/close", {"document": "d2", "save": "never"}),
            ("req", "document/create", {"uri": uri("new.txt"), "text": "New file\n"}),  # d3
            ("req", "document/create", {"uri": uri("notes.txt"), "text": "x"}),  # -32013
            ("req", "document/create", {"uri": uri("no/such/dir/new.txt")}),  # -32010 ENOENT
            ("req", "document/save", {"document": "d3", "to": uri("copy.txt")}),  # save as
            ("req", "document/save", {"document": "d3", "to": uri("notes.txt")}),  # -32013: open elsewhere
            edit("d3", 1, 0, 0, "Edited "),
            ("req", "document/close", {"document": "d3"}),  # saves first
            ("req", "document/close", {"document": "d3"}),  # -32011
            ("req", "document/close", {"document": "d1", "save": "sometimes"}),  # -32602
            ("req", "document/close", {"document": "d1"}),
        ] + ENDED,
    },
    # Positions in UTF-8 and UTF-32 (the emoji counts 4 and 1).
    "positions": {
        "fixtures": {"fruit.txt": "a\U0001F350b\ncrlf\r\nend".encode()},
        "steps": [
            ("req", "initialize", {"capabilities": {"general": {"positionEncodings": ["utf-8"]}}}),
            ("note", "initialized", None),
            ("req", "document/open", {"uri": uri("fruit.txt"), "includeText": True}),
            edit("d1", 1, 0, 5, "!"),  # after the pear: byte 5
            ("req", "document/read", {"document": "d1", "range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 5}}}),
            edit("d1", 2, 0, 3, "x"),  # inside the pear's bytes: clamped or refused, as the server says
            ("req", "document/read", {"document": "d1"}),
            ("req", "document/read", {"document": "d1", "range": {"start": {"line": 9, "character": 0}, "end": {"line": 99, "character": 0}}}),
            ("req", "document/undo", {"document": "d1"}),
            ("req", "document/undo", {"document": "d1"}),
            ("req", "document/read", {"document": "d1"}),
        ] + ENDED,
    },
    # The workspace (README §11): roots narrowed by initialize, naming rules, a query, and the
    # coordinated operations with their refusals (-32022, -32023, -32024).
    "workspace": {
        "fixtures": {"inside/a.txt": b"alpha\n", "inside/sub/keep.txt": b"keep\n", "outside.txt": b"out\n"},
        "steps": [
            ("req", "initialize", {"initializationOptions": {"roots": [uri("inside")]}}),
            ("note", "initialized", None),
            ("req", "document/open", {"uri": uri("outside.txt")}),  # -32022
            ("req", "document/open", {"uri": uri("inside/../outside.txt")}),  # -32022: '..' out
            ("req", "document/create", {"directory": uri("inside"), "naming": {"prefix": "Note", "extension": "txt"}, "text": "one\n"}),
            ("req", "document/create", {"directory": uri("inside"), "naming": {"prefix": "Note", "extension": "txt"}, "text": "two\n"}),
            ("req", "document/create", {"directory": uri("inside"), "naming": {"extension": "md", "nameFrom": "firstLine"}, "text": "Shopping list\nmilk\n"}),
            ("req", "document/create", {"directory": uri("inside"), "naming": {"prefix": "a/b"}}),  # -32602 names the prefix
            ("req", "workspace/query", {"root": uri("inside"), "glob": "**/*.txt"}),
            ("req", "workspace/query", {"root": uri("inside"), "recursive": False, "watch": True}),
            ("req", "workspace/stopQuery", {"query": "q1"}),
            ("req", "workspace/stopQuery", {"query": "q1"}),  # -32024: stopped already
            edit("d1", 1, 0, 0, "edited "),
            ("req", "document/delete", {"document": "d1"}),  # -32023: unsaved changes
            ("req", "document/delete", {"document": "d1", "discard": True}),
            ("req", "document/rename", {"document": "d2", "name": "Second.txt"}),
            ("req", "document/move", {"document": "d2", "to": uri("inside/sub/Second.txt")}),
            ("req", "document/move", {"uri": uri("inside/a.txt"), "to": uri("inside/sub/keep.txt")}),  # -32013
            ("req", "workspace/import", {"from": uri("inside/a.txt"), "directory": uri("inside/sub")}),
            ("req", "workspace/import", {"from": uri("inside/a.txt"), "directory": uri("inside/sub")}),  # a 2.txt
            ("req", "workspace/export", {"document": "d3", "to": uri("inside/export.md")}),
            ("req", "workspace/export", {"document": "d3", "to": uri("inside/export.md")}),  # -32013
            ("req", "workspace/export", {"document": "d3", "to": uri("outside-export.md")}),  # -32022
        ] + ENDED,
    },
    # Storage locations (README §11.8): initialize with storage, one document moved there and
    # back, every document moved with one open and edited, a taken name (-32013), bad params.
    "storage": {
        "fixtures": {"local/notes.txt": b"notes\n", "local/sub/a.txt": b"alpha\n", "synced/keep.txt": b"keep\n", "outside.txt": b"out\n"},
        "steps": [
            ("req", "initialize", {"initializationOptions": {"storage": {"local": uri("local"), "synced": uri("local")}}}),  # -32602: the same
            ("req", "initialize", {"initializationOptions": {"storage": {"local": uri("local"), "synced": uri("synced")}}}),
            ("note", "initialized", None),
            ("req", "document/open", {"uri": uri("local/sub/a.txt"), "includeText": False}),
            edit("d1", 1, 0, 0, "edited "),
            ("req", "document/moveToStorage", {"document": "d1", "storage": "synced"}),
            ("req", "document/moveToStorage", {"document": "d1", "storage": "local"}),
            ("req", "document/moveToStorage", {"uri": uri("outside.txt"), "storage": "synced"}),  # -32602: in neither
            ("req", "document/moveToStorage", {"document": "d1", "storage": "cloud"}),  # -32602
            ("req", "workspace/moveAllToStorage", {"storage": "synced"}),
            ("req", "workspace/moveAllToStorage", {"storage": "local"}),
            ("req", "document/save", {"document": "d1"}),
            ("req", "document/moveToStorage", {"uri": uri("local/keep.txt"), "storage": "synced"}),
            ("req", "document/moveToStorage", {"uri": uri("local/notes.txt"), "storage": "synced"}),
            ("req", "workspace/moveAllToStorage", {"storage": "local"}),
            ("req", "document/moveToStorage", {"uri": uri("outside.txt"), "storage": "local"}),  # -32602
            ("req", "workspace/moveAllToStorage", {}),  # -32602: missing
        ] + ENDED,
    },
    # Earlier versions: listed, read, restored; unknown ids.
    "versions": {
        "fixtures": {"notes.txt": NOTES},
        "steps": STARTED + [
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": False}),
            ("req", "document/versions", {"document": "d1"}),  # none yet
            edit("d1", 1, 2, 0, "Third line\n"),
            ("req", "document/save", {"document": "d1"}),
            ("req", "document/edit", {"document": "d1", "version": 2, "edits": [{"text": "Gone\n"}]}),
            ("req", "document/save", {"document": "d1"}),
            ("wait_versions", 2),
            ("req", "document/versions", {"document": "d1"}),
            ("read_version", 1),  # document/readVersion of the second (older) listed
            ("restore_version", 1, 3),  # document/restoreVersion of it, at version 3
            ("req", "document/state", {"document": "d1"}),
            ("req", "document/undo", {"document": "d1"}),
            ("req", "document/readVersion", {"document": "d1", "id": "no-such-version"}),  # -32020
            ("req", "document/restoreVersion", {"document": "d1", "id": "no-such-version"}),  # -32020
            ("req", "document/readVersion", {"document": "d1"}),  # -32602: id missing
            ("req", "document/versions", {"document": "d99"}),  # -32011
            ("diff_versions", 1, 0),  # document/diffVersions from the older listed to the newer
            ("diff_versions", 1, None),  # from the older to the current text
            ("delete_version", 1),  # document/deleteVersion of the older
            ("req", "document/versions", {"document": "d1"}),  # one left
            ("req", "document/deleteVersion", {"document": "d1", "id": "no-such-version"}),  # -32020
            ("req", "document/diffVersions", {"document": "d1", "from": "no-such-version"}),  # -32020
            ("req", "document/diffVersions", {"document": "d1"}),  # -32602: from missing
            ("req", "document/close", {"document": "d1", "save": "never"}),
        ] + ENDED,
    },
    # The journal: nothing waits to be recovered in a fresh state directory, and the requests about
    # recovery say so (-32025); a document's own journal is not offered back to it.
    "journal": {
        "fixtures": {"notes.txt": NOTES},
        "steps": STARTED + [
            ("req", "workspace/recoverable", None),
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": False}),
            edit("d1", 1, 2, 0, "Third line\n"),
            ("req", "workspace/recoverable", {}),
            ("req", "document/recover", {"document": "d1"}),  # -32025
            ("req", "document/discardRecovery", {"document": "d1"}),  # -32025
            ("req", "document/recover", {"document": "d99"}),  # -32011
            ("req", "document/discardRecovery", {}),  # -32602: document missing
            ("req", "workspace/recoverable", [1]),  # -32602: takes no params
            ("req", "document/close", {"document": "d1", "save": "never"}),
            ("req", "workspace/recoverable", None),
        ] + ENDED,
    },
    # Handoff: a client state kept, a snapshot of unsaved work, the document closed without saving,
    # the snapshot restored (the work and the state back), and the refusals (README §8.23).
    # "${SNAPSHOT}" in params is the token of the last session/snapshot answer.
    "handoff": {
        "fixtures": {"notes.txt": NOTES},
        "steps": STARTED + [
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": False}),
            edit("d1", 1, 0, 0, "Draft: "),
            ("req", "document/setClientState", {"document": "d1", "state": {"cursor": {"line": 0, "character": 7}}}),
            ("req", "document/setClientState", {"document": "d1"}),  # -32602: state missing
            ("req", "document/setClientState", {"document": "d99", "state": None}),  # -32011
            ("req", "session/snapshot", [1]),  # -32602: takes no params
            ("req", "session/snapshot", None),
            ("req", "document/close", {"document": "d1", "save": "never"}),
            ("req", "session/restore", {"snapshot": "${SNAPSHOT}", "includeText": True}),
            ("req", "document/undo", {"document": "d2"}),
            ("req", "session/restore", {"snapshot": "${SNAPSHOT}"}),  # -32026: restored already
            ("req", "session/restore", {"snapshot": "../journal"}),  # -32602: not a token
            ("req", "session/discardSnapshot", {"snapshot": "0" * 32}),  # -32026
            ("req", "session/snapshot", {}),
            ("req", "session/discardSnapshot", {"snapshot": "${SNAPSHOT}"}),
            ("req", "document/close", {"document": "d2", "save": "never"}),
        ] + ENDED,
    },
    # The LSP mode (protocol/README.md §12): an editor's LSP client synchronises a buffer, saves it
    # by the command and by itself, and gets the command's refusals; bad notifications change
    # nothing (they are logged). The server's own requests (reloads, conflicts, recovery) depend on
    # changes on disk and are in Tests/protocol/test_lsp_mode.py.
    "lsp": {
        "fixtures": {"notes.txt": NOTES},
        "steps": [
            ("req", "initialize", {"capabilities": {"textDocument": {"synchronization": {"didSave": True}}}}),
            ("note", "initialized", None),
            ("note", "textDocument/didOpen", {"textDocument": {"uri": uri("notes.txt"), "languageId": "plaintext", "version": 1, "text": "Hello, world!\nSecond line\n"}}),
            ("note", "textDocument/didChange", {"textDocument": {"uri": uri("notes.txt"), "version": 2}, "contentChanges": [
                {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "text": "Third line\n"}]}),
            # A buffer never opened: logged, nothing changes.
            ("note", "textDocument/didChange", {"textDocument": {"uri": uri("other.txt"), "version": 3}, "contentChanges": [{"text": "x"}]}),
            ("note", "textDocument/willSave", {"textDocument": {"uri": uri("notes.txt")}, "reason": 1}),
            ("req", "workspace/executeCommand", {"command": "docsession.save", "arguments": [uri("notes.txt")]}),
            ("note", "textDocument/didSave", {"textDocument": {"uri": uri("notes.txt")}}),
            ("req", "workspace/executeCommand", {"command": "docsession.fly", "arguments": [uri("notes.txt")]}),  # -32602
            ("req", "workspace/executeCommand", {"command": "docsession.restoreVersion", "arguments": [uri("notes.txt")]}),  # -32602
            ("req", "workspace/executeCommand", {"command": "docsession.versions", "arguments": [uri("other.txt")]}),  # -32602
            ("note", "textDocument/didClose", {"textDocument": {"uri": uri("notes.txt")}}),
            ("req", "workspace/recoverable", None),
        ] + ENDED,
    },
    # Package and managed documents (protocol/README.md §13): entries written, read, deleted, undone,
    # redone and saved; a managed store migrated, written, queried, undone and saved; the refusals
    # (-32028 entries, -32029 SQLite, -32030 the authorizer, -32031 the wrong kind).
    "packages": {
        "fixtures": {"notes.txt": NOTES},
        "steps": STARTED + [
            ("req", "document/create", {"uri": uri("notes.textbundle"), "kind": "package"}),
            ("req", "document/writeEntry", {"document": "p1", "path": "text.md", "text": "# Notes\n", "version": 1}),
            ("req", "document/writeEntry", {"document": "p1", "path": "assets/pixel.png", "base64": "iVBORw0KGgo=", "label": "Add the image"}),
            ("req", "document/readEntry", {"document": "p1", "path": "text.md"}),
            ("req", "document/readEntry", {"document": "p1", "path": "assets/pixel.png", "as": "base64"}),
            ("req", "document/readEntry", {"document": "p1", "path": "assets/pixel.png", "as": "text"}),  # -32014
            ("req", "document/readEntry", {"document": "p1", "path": "missing.md"}),  # -32028
            ("req", "document/writeEntry", {"document": "p1", "path": "text.md/inner", "text": "x"}),  # -32028
            ("req", "document/writeEntry", {"document": "p1", "path": "../escape.md", "text": "x"}),  # -32602
            ("req", "document/deleteEntry", {"document": "p1", "path": "text.md", "version": 3}),
            ("req", "document/undo", {"document": "p1"}),
            ("req", "document/redo", {"document": "p1", "version": 4}),
            ("req", "document/undo", {"document": "p1", "version": 5}),
            ("req", "document/state", {"document": "p1"}),
            ("req", "document/save", {"document": "p1"}),
            ("req", "document/save", {"document": "p1", "to": uri("copy.textbundle")}),  # save as: p1 moves there
            ("req", "document/save", {"document": "p1", "to": "copy.textbundle"}),  # -32602: not a file URI
            ("req", "document/save", {"document": "p1", "to": uri("notes.txt")}),  # -32013: something is there
            ("req", "document/revert", {"document": "p1"}),
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": False}),
            ("req", "document/readEntry", {"document": "d1", "path": "text.md"}),  # -32031
            ("req", "store/query", {"document": "p1", "sql": "SELECT 1"}),  # -32031
            ("req", "document/create", {"uri": uri("library.docpackage"), "kind": "managed", "storeOptions": {"migrations": [
                "CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, body TEXT, data BLOB)"]}}),
            ("req", "store/execute", {"document": "p2", "sql": "INSERT INTO notes(title, body, data) VALUES (?, ?, ?)",
                                      "params": ["one", "First", {"base64": "AAE="}], "version": 1, "label": "Add a note"}),
            ("req", "store/execute", {"document": "p2", "sql": "UPDATE notes SET body = :body WHERE id = 1", "params": {"body": "Changed"}}),
            ("req", "store/query", {"document": "p2", "sql": "SELECT id, title, body, data FROM notes ORDER BY id"}),
            ("req", "document/undo", {"document": "p2"}),
            ("req", "store/query", {"document": "p2", "sql": "SELECT body FROM notes WHERE id = ?", "params": [1]}),
            ("req", "store/execute", {"document": "p2", "sql": "INSERT INTO notes(title) VALUES ('two'); INSERT INTO notes(title) VALUES ('one')"}),  # -32029
            ("req", "store/execute", {"document": "p2", "sql": "ATTACH DATABASE 'other.db' AS other"}),  # -32030
            ("req", "store/query", {"document": "p2", "sql": "DELETE FROM notes"}),  # -32030
            ("req", "document/writeEntry", {"document": "p2", "path": "StoreContent/AdditionalContent/cover.txt", "text": "cover\n"}),
            ("req", "document/save", {"document": "p2"}),
            ("req", "document/close", {"document": "p2"}),
            ("req", "document/open", {"uri": uri("library.docpackage"), "storeOptions": {"migrations": [
                "CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, body TEXT, data BLOB)",
                "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"]}}),
            ("req", "document/close", {"document": "p1", "save": "never"}),
        ] + ENDED,
    },
    # Coordination (protocol/README.md §14.3): leases to read (a save first; a failed save -32032)
    # and to write, delete and move (nothing changes on disk here), unknown leases -32033, bad params.
    "coordination": {
        "fixtures": {"notes.txt": NOTES, "latin1.txt": b"caf\xe9\n"},
        "steps": STARTED + [
            ("req", "document/open", {"uri": uri("notes.txt"), "includeText": False}),
            edit("d1", 1, 2, 0, "Third line\n"),
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "read"}),  # saved first
            ("req", "workspace/endCoordination", {"lease": "l1"}),
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "write"}),
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "delete"}),
            ("req", "workspace/endCoordination", {"lease": "l2"}),  # held by l3
            ("req", "workspace/endCoordination", {"lease": "l3"}),
            ("req", "workspace/endCoordination", {"lease": "l3"}),  # -32033: ended already
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "move", "destination": uri("notes.md")}),
            ("req", "workspace/endCoordination", {"lease": "l4"}),  # not moved: unchanged
            ("req", "workspace/coordinate", {"uri": uri("nothing.txt"), "intent": "write"}),  # no document
            ("req", "workspace/endCoordination", {"lease": "l5"}),
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "append"}),  # -32602
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "write", "destination": uri("notes.md")}),  # -32602
            ("req", "workspace/coordinate", {"uri": uri("notes.txt"), "intent": "move"}),  # -32602
            ("req", "workspace/endCoordination", {}),  # -32602
            ("req", "document/open", {"uri": uri("latin1.txt"), "encoding": "iso-8859-1", "includeText": False}),
            edit("d2", 1, 0, 4, " \U0001F600"),
            ("req", "workspace/coordinate", {"uri": uri("latin1.txt"), "intent": "read"}),  # -32032 (-32018 inside)
            ("req", "workspace/endCoordination", {"lease": "l6"}),  # -32033: refused
            ("req", "document/close", {"document": "d2", "save": "never"}),
        ] + ENDED,
    },
}


# ------------------------------------------------------------------------------------------------
# The client


class Server:
    def __init__(self, root: Path, record: Path) -> None:
        self.process = subprocess.Popen(
            [str(BINARY), "serve", "--state-dir", str(root / ".state"), "--record", str(record)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buffer = b""

    def send_body(self, body: bytes) -> None:
        assert self.process.stdin
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self, timeout: float = 10) -> Any:
        assert self.process.stdout
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            header_end = self.buffer.find(b"\r\n\r\n")
            if header_end >= 0:
                length = int(self.buffer[:header_end].split(b":")[1])
                if len(self.buffer) >= header_end + 4 + length:
                    body = self.buffer[header_end + 4:header_end + 4 + length]
                    self.buffer = self.buffer[header_end + 4 + length:]
                    return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError("no message from the server")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("the server closed its output")
            self.buffer += chunk

    def responses(self, count: int) -> list[Any]:
        found: list[Any] = []
        while len(found) < count:
            message = self.receive()
            for element in message if isinstance(message, list) else [message]:
                if "method" not in element:
                    found.append(element)
        return found

    def response_to(self, id: Any) -> Any:
        while True:
            message = self.receive()
            if isinstance(message, dict) and "method" not in message and message.get("id") == id:
                return message


def substitute(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [substitute(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, old, new) for k, v in value.items()}
    return value


# Notifications the server sends when background work ends (README §8.21), at no fixed place.
ASYNCHRONOUS_NOTIFICATIONS = {"document/didChangeVersions"}


def count_versions(state: Path) -> int:
    return sum(1 for p in (state / "versions").rglob("*") if p.is_file() and p.name.endswith((".saved", ".conflict", ".syncConflict")))


def make(name: str, session: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="docsession-golden-") as temporary:
        root = Path(temporary) / "root"
        root.mkdir()
        for file, content in session["fixtures"].items():
            (root / file).parent.mkdir(parents=True, exist_ok=True)
            (root / file).write_bytes(content)
        record = Path(temporary) / "record.jsonl"
        server = Server(root, record)
        live = str(root)
        next_id = 1
        last_versions: list[Any] = []
        last_snapshot = "${SNAPSHOT}"
        try:
            for step in session["steps"]:
                kind = step[0]
                if kind in ("req", "req_id", "read_version", "restore_version", "diff_versions", "delete_version"):
                    if kind == "req_id":
                        id, method, params = step[1], step[2], step[3]
                    else:
                        id = next_id
                        next_id += 1
                        if kind == "req":
                            method, params = step[1], step[2]
                        elif kind == "read_version":
                            method, params = "document/readVersion", {"document": "d1", "id": last_versions[step[1]]["id"]}
                        elif kind == "delete_version":
                            method, params = "document/deleteVersion", {"document": "d1", "id": last_versions[step[1]]["id"]}
                        elif kind == "diff_versions":
                            method, params = "document/diffVersions", {"document": "d1", "from": last_versions[step[1]]["id"]}
                            if step[2] is not None:
                                params["to"] = last_versions[step[2]]["id"]
                        else:
                            method = "document/restoreVersion"
                            params = {"document": "d1", "id": last_versions[step[1]]["id"], "version": step[2]}
                    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
                    if params is not None:
                        message["params"] = substitute(substitute(params, ROOT, live), "${SNAPSHOT}", last_snapshot)
                    server.send_body(json.dumps(message).encode())
                    response = server.response_to(id)
                    if method == "document/versions" and "result" in response:
                        last_versions = response["result"]["versions"]
                    if method == "session/snapshot" and "result" in response:
                        last_snapshot = response["result"]["snapshot"]
                elif kind == "note":
                    message = {"jsonrpc": "2.0", "method": step[1]}
                    if step[2] is not None:
                        message["params"] = substitute(step[2], ROOT, live)
                    server.send_body(json.dumps(message).encode())
                    if step[1] == "$/setTrace" or step[1] == "exit":
                        time.sleep(0.05)  # let the server act on it before the next message
                elif kind == "raw":
                    server.send_body(step[1].encode())
                    server.responses(step[2])
                elif kind == "batch":
                    server.send_body(json.dumps(step[1]).encode())
                    server.responses(step[2])
                elif kind == "wait_versions":
                    deadline = time.monotonic() + 10
                    while count_versions(root / ".state") < step[1]:
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"{name}: the server did not keep {step[1]} versions")
                        time.sleep(0.02)
                else:
                    raise ValueError(f"unknown step {step!r}")
            server.process.stdin.close()  # type: ignore[union-attr]
            server.process.wait(timeout=10)
        finally:
            if server.process.poll() is None:
                server.process.kill()
        lines = []
        for line in record.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            # Sent when a version's background write ends, at no fixed place: not part of a golden
            # session (`docsession replay` leaves it out too).
            if entry.get("type") == "receive-notification" and entry["message"].get("method") in ASYNCHRONOUS_NOTIFICATIONS:
                continue
            lines.append(json.dumps(substitute(entry, live, ROOT), ensure_ascii=False, separators=(",", ":")))
        (HERE / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        files = HERE / f"{name}.files"
        if files.exists():
            shutil.rmtree(files)
        if session["fixtures"]:
            files.mkdir()
            for file, content in session["fixtures"].items():
                (files / file).parent.mkdir(parents=True, exist_ok=True)
                (files / file).write_bytes(content)
        print(f"{name}.jsonl: {len(lines)} records")


def main(argv: list[str]) -> int:
    if not BINARY.is_file():
        print(f"build first: {BINARY} is missing (swift build)", file=sys.stderr)
        return 2
    names = argv or list(SESSIONS)
    for name in names:
        make(name, SESSIONS[name])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
