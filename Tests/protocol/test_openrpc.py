"""The protocol specification's tests: protocol/openrpc.json and protocol/README.md against the server.

(a) openrpc.json is a well-formed OpenRPC 1.3 document whose schemas are valid Draft 7;
(b) every example validates against its method's schemas;
(c) the examples of every request are fixtures: the built server must answer them exactly;
(d) real traffic of scripted sessions validates against the document's schemas, including the
    behaviours whose message order depends on timing (a save and an edit sent together, a save
    cancelled while it writes, an edit sent during a revert), where responses are matched by id;
and the README's error-code table and wire transcripts agree with the document and the server.

Run: `python3 -m pytest -q Tests/protocol` (after `swift build`; $DOCSESSION_BIN overrides the binary).

How the examples of (c) run. Each example gets a fresh server and a fresh fixture directory,
/tmp/docsession-protocol-fixtures/ (its files are listed in fixtures.py and in README §8.1). The test
sends `initialize` (params `{}`, or the example's `x-initialize`) and `initialized`, then the requests
of the example's `x-setup`, in order, each of which must succeed (an example of `document/edit`
first opens the file it edits, so its handle is "d1"), then the example's own request. The
notifications the server sends before the response must be exactly the example's
`x-notifications` (none when absent), and the result exactly the example's result, member order
included. Extensions of an example pairing:

    "x-initialize":    the params of `initialize` (default {}), e.g. to choose utf-32 positions;
    "x-setup":         [{"method": "document/open", "params": {...}}, ...], requests sent first;
    "x-notifications": [{"method": "$/progress", "params": {...}}, ...], sent before the response;
    "x-error":         {"code": ..., "message": ..., "data": ...}, in place of `result`: the error
                       the server answers (for methods whose only deterministic example is a
                       failure: resolving a conflict needs another program to change a file, and
                       the ids of versions differ from run to run; README §8.19 and §8.21 show
                       the successes in transcripts).

Volatile values. Some members depend on the machine and the moment: `etag` and `expectedEtag`
(opaque etags, made from a file's inode and times: a -32017 error and the `error` of its
`document/stateChanged` hold both), `modificationDate` (the fixture files all have FIXTURE_DATE,
but a file that `document/create` makes, a save writes or a revert reads after another program
changed it has the time of that write), and the `date` and `id` of an earlier version (README
§8.21: an id is made of the time, the server's process id and a counter; VERSION_ID is its
format). Nothing else varies for a client that waits for each answer
before its next request, as the examples and transcripts do: handles, versions, sizes, messages and
the order of the notifications before a response are deterministic, so no other member is
normalised. Before comparing, a value
of a volatile member, wherever it is (results, notifications, error data), is checked against its
format (ETAG, TIMESTAMP, VERSION_ID) and replaced by the example's value (`normalise_volatile`). The
same is done to the server's output and to the `<--` lines of the README's transcripts, as are the
timings of `$/logTrace` (`normalise_timing`). A transcript shows the version ids of one run: where a
`<--` line shows one, the runner pairs it with the server's id at the same place, and sends the
server's id wherever a later `-->` line names the transcript's (`match_version_ids`); the same for
the token of a session snapshot (32 lowercase hexadecimal digits, README §8.23).

Transcripts. Each ```transcript block of the README runs against a fresh server. Besides the wire
lines it may hold these directives: `$ docsession ARGS` (first line: the server's arguments),
`(fixtures)` (the fixture directory is created afresh here; the document transcripts start with
it), `(initialized)`, `(end of input)`, `(exit status N)`, and `(file NAME now holds "TEXT")` and
`(file NAME deleted)` (another program changes a fixture file behind the server's back), `(file
NAME moved to NAME2)` (it renames one), `(file NAME mode MODE)` (it chmods one), and `(the server
has kept N versions)` (the runner waits until the server's version store holds N versions: they are
written in the background); see README §1. The notifications the watcher sends after a `(file ...)`
directive are read as the `<--` lines after it, before the next `-->` line is sent, so they are in a
deterministic place. `document/didChangeVersions` comes when a version's background write ends, at
no fixed place: the client holds those apart (rpc_client.ASYNCHRONOUS_NOTIFICATIONS); a `<--` line
showing one takes the next one held (waiting for it), and those a transcript does not show are not
compared.
Each server runs with its own empty XDG_STATE_HOME (rpc_client.py), so its versions are its own
and nothing is written into the user's home.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft7Validator

from fixtures import BIG_TEXT, FIXTURE_DATE, ROOT as FIXTURES, change_fixture, chmod_fixture, create_fixture, delete_fixture, make_fixtures, move_fixture, uri
from rpc_client import ASYNCHRONOUS_NOTIFICATIONS, REPO_ROOT, RpcClient, binary_path, encode, end_daemons, frame, wait_until

PROTOCOL = REPO_ROOT / "protocol"
DOCUMENT: dict[str, Any] = json.loads((PROTOCOL / "openrpc.json").read_text(encoding="utf-8"))
README = (PROTOCOL / "README.md").read_text(encoding="utf-8")

# The messages the protocol consists of so far, by direction.
CLIENT_TO_SERVER = {
    "initialize", "initialized", "shutdown", "exit", "$/cancelRequest", "$/setTrace",
    "document/open", "document/create", "document/read", "document/edit", "document/undo",
    "document/redo", "document/state", "document/close", "document/save", "document/revert",
    "document/resolveConflict", "document/versions", "document/readVersion", "document/restoreVersion",
    "document/deleteVersion", "document/diffVersions",
    "document/delete", "document/move", "document/rename", "workspace/import", "workspace/export",
    "workspace/query", "workspace/stopQuery", "document/recover", "document/discardRecovery",
    "workspace/recoverable", "document/setClientState", "session/snapshot", "session/restore",
    "session/discardSnapshot",
    # Package and managed documents (README §13).
    "document/readEntry", "document/writeEntry", "document/deleteEntry", "store/execute", "store/query",
    # The LSP mode (README §12).
    "textDocument/didOpen", "textDocument/didChange", "textDocument/willSave", "textDocument/didSave",
    "textDocument/didClose", "workspace/executeCommand",
    # Coordination (README §14.3).
    "workspace/coordinate", "workspace/endCoordination",
    # Storage locations (README §11.8).
    "document/moveToStorage", "workspace/moveAllToStorage",
}
SERVER_TO_CLIENT = {
    "$/logTrace", "$/progress", "document/stateChanged", "document/didChange", "document/didMove",
    "document/didChangeVersions", "workspace/didChangeFiles",
    # The LSP mode (README §12): two requests of the server's and two notifications.
    "workspace/applyEdit", "window/showMessageRequest", "textDocument/publishDiagnostics", "window/showMessage",
    "window/logMessage", "window/showDocument",
}

# The named params types in components.schemas, which must say the same as the content descriptors.
PARAMS_TYPES = {
    "initialize": "InitializeParams",
    "$/setTrace": "SetTraceParams",
    "$/cancelRequest": "CancelParams",
    "$/logTrace": "LogTraceParams",
    "$/progress": "ProgressParams",
    "document/open": "OpenDocumentParams",
    "document/create": "CreateDocumentParams",
    "document/read": "ReadDocumentParams",
    "document/edit": "EditDocumentParams",
    "document/undo": "UndoRedoParams",
    "document/redo": "UndoRedoParams",
    "document/state": "DocumentStateParams",
    "document/close": "CloseDocumentParams",
    "document/save": "SaveDocumentParams",
    "document/revert": "RevertDocumentParams",
    "document/resolveConflict": "ResolveConflictParams",
    "document/versions": "VersionsParams",
    "document/readVersion": "ReadVersionParams",
    "document/restoreVersion": "RestoreVersionParams",
    "document/deleteVersion": "DeleteVersionParams",
    "document/diffVersions": "DiffVersionsParams",
    "document/recover": "RecoverParams",
    "document/discardRecovery": "DiscardRecoveryParams",
    "document/delete": "DeleteDocumentParams",
    "document/move": "MoveDocumentParams",
    "document/rename": "RenameDocumentParams",
    "workspace/import": "ImportParams",
    "workspace/export": "ExportParams",
    "document/readEntry": "ReadEntryParams",
    "document/writeEntry": "WriteEntryParams",
    "document/deleteEntry": "DeleteEntryParams",
    "store/execute": "ExecuteStoreParams",
    "store/query": "QueryStoreParams",
    "document/stateChanged": "StateChangedParams",
    "document/didChange": "DidChangeParams",
    "document/didMove": "DidMoveParams",
    "document/didChangeVersions": "DidChangeVersionsParams",
    "workspace/query": "QueryParams",
    "document/moveToStorage": "MoveToStorageParams",
    "workspace/moveAllToStorage": "MoveAllToStorageParams",
    "workspace/stopQuery": "StopQueryParams",
    "workspace/coordinate": "CoordinateParams",
    "workspace/endCoordination": "EndCoordinationParams",
    "workspace/didChangeFiles": "DidChangeFilesParams",
    "textDocument/didOpen": "DidOpenTextDocumentParams",
    "textDocument/didChange": "DidChangeTextDocumentParams",
    "textDocument/willSave": "WillSaveTextDocumentParams",
    "textDocument/didSave": "DidSaveTextDocumentParams",
    "textDocument/didClose": "DidCloseTextDocumentParams",
    "workspace/executeCommand": "ExecuteCommandParams",
    "workspace/applyEdit": "ApplyWorkspaceEditParams",
    "window/showMessageRequest": "ShowMessageRequestParams",
    "window/showDocument": "ShowDocumentParams",
    "textDocument/publishDiagnostics": "PublishDiagnosticsParams",
    "window/showMessage": "ShowMessageParams",
    "window/logMessage": "LogMessageParams",
}

TIMING = re.compile(r"Processing request took [0-9.e+-]+ms")

# The formats of the volatile members (see the module's docstring).
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
ETAG = re.compile(r"[0-9a-f]+(-[0-9a-f]+)*")
# The ids of kept versions (opaque to clients; the server makes them of the time, its process id and
# a counter, so they differ from run to run). The dates of versions are TIMESTAMPs.
VERSION_ID = re.compile(r"[0-9]+-[0-9]+-[0-9]+(?:-[0-9a-f]{16})?\.(?:saved|conflict|syncConflict)")
# A session snapshot's token (README §8.23): random, paired like version ids.
SNAPSHOT_TOKEN = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
VOLATILE = {"modificationDate": TIMESTAMP, "etag": ETAG, "expectedEtag": ETAG, "date": TIMESTAMP}
VOLATILE_TEXT = re.compile(r'"(modificationDate|etag|expectedEtag|date)":"([^"\\]*)"')


def need_binary() -> Path:
    path = binary_path()
    if not path.is_file():
        pytest.skip(f"server binary {path} is missing: run `swift build` or set DOCSESSION_BIN")
    return path


def normalise_timing(text: str) -> str:
    """Trace messages carry a measured time; everything else in the server's output is deterministic
    (but for the volatile members of document results, see normalise_volatile)."""
    return TIMING.sub("Processing request took <ms>ms", text)


def normalise_volatile(value: Any, expected: Any) -> Any:
    """`value` (a result the server sent) with each volatile member checked against its format and
    replaced by the member at the same place in `expected`, where there is one. (An `id` inside a
    result is a version's: volatile too, as is a `snapshot` token. Responses' own ids are never passed
    here.)"""
    if isinstance(value, dict):
        result = {}
        for key, member in value.items():
            wanted = expected.get(key) if isinstance(expected, dict) else None
            if key in VOLATILE and isinstance(member, str):
                assert VOLATILE[key].fullmatch(member), f"{key} {member!r} does not have its format"
                result[key] = wanted if isinstance(wanted, str) else member
            elif key == "id" and isinstance(member, str) and VERSION_ID.fullmatch(member):
                result[key] = wanted if isinstance(wanted, str) and VERSION_ID.fullmatch(wanted) else member
            elif key == "snapshot" and isinstance(member, str) and SNAPSHOT_TOKEN.fullmatch(member):
                # A session snapshot's token (README §8.23): random.
                result[key] = wanted if isinstance(wanted, str) and SNAPSHOT_TOKEN.fullmatch(wanted) else member
            else:
                result[key] = normalise_volatile(member, wanted)
        return result
    if isinstance(value, list):
        others = expected if isinstance(expected, list) else []
        return [normalise_volatile(v, others[i] if i < len(others) else None) for i, v in enumerate(value)]
    return value


def normalise_volatile_text(text: str) -> str:
    """The volatile members of JSON text replaced by placeholders, their formats checked."""

    def replace(match: re.Match[str]) -> str:
        key, member = match.group(1), match.group(2)
        assert VOLATILE[key].fullmatch(member), f"{key} {member!r} does not have its format"
        return f'"{key}":"<{key}>"'

    return VOLATILE_TEXT.sub(replace, text)


# ------------------------------------------------------------------------------------------------
# Reading the document


def methods() -> list[dict[str, Any]]:
    return DOCUMENT["methods"]


def method(name: str) -> dict[str, Any]:
    (found,) = [m for m in methods() if m["name"] == name]
    return found


def is_notification(m: dict[str, Any]) -> bool:
    return m.get("x-notification") is True


def resolve(ref: str) -> Any:
    """The target of a local `$ref` such as `#/components/schemas/RequestId`."""
    assert ref.startswith("#/"), f"only local references are used: {ref}"
    node: Any = DOCUMENT
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            raise KeyError(f"$ref {ref} does not resolve (no {token!r})")
        node = node[token]
    return node


def inline(node: Any, seen: tuple[str, ...] = ()) -> Any:
    """A copy of a schema with every `$ref` replaced by its target, so it validates on its own."""
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            assert ref not in seen, f"$ref cycle through {ref}"
            # Draft 7 ignores the siblings of $ref (here only descriptions).
            return inline(resolve(ref), seen + (ref,))
        return {key: inline(value, seen) for key, value in node.items()}
    if isinstance(node, list):
        return [inline(item, seen) for item in node]
    return node


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def validator(schema: Any) -> Draft7Validator:
    return Draft7Validator(inline(schema))


def assert_valid(schema: Any, value: Any, what: str) -> None:
    errors = sorted(validator(schema).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{what}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors)


def params_schema(m: dict[str, Any]) -> dict[str, Any]:
    """The by-name params of a method as one object schema (what OpenRPC's descriptors mean)."""
    descriptors = [inline(p) for p in m["params"]]
    return {
        "type": "object",
        "properties": {d["name"]: d["schema"] for d in descriptors},
        "required": [d["name"] for d in descriptors if d.get("required")],
    }


def example_params(example: dict[str, Any]) -> dict[str, Any]:
    return {p["name"]: p["value"] for p in (inline(p) for p in example["params"])}


def examples() -> list[tuple[str, dict[str, Any]]]:
    return [(m["name"], inline(e)) for m in methods() for e in m.get("examples", [])]


def request_examples() -> list[tuple[str, dict[str, Any]]]:
    """The examples of the client's requests (the server's own requests, README §12.3, are
    checked against their schemas only)."""
    return [(name, e) for name, e in examples()
            if not is_notification(method(name)) and method(name)["x-direction"] == "client-to-server"]


def example_id(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[0]}: {item[1]['name']}"


# ------------------------------------------------------------------------------------------------
# (a) The document is well-formed OpenRPC 1.3

# The parts of the OpenRPC 1.3 meta-schema this document uses, written from the specification.
# Objects that the specification lets carry `x-` extensions allow them and nothing else unknown.
EXTENSIONS = {"^x-": {}}
REFERENCE = {"type": "object", "required": ["$ref"], "properties": {"$ref": {"type": "string"}}, "additionalProperties": False}
OPENRPC_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["openrpc", "info", "methods"],
    "additionalProperties": False,
    "patternProperties": EXTENSIONS,
    "properties": {
        "openrpc": {"type": "string", "pattern": r"^1\.3\.\d+$"},
        "info": {
            "type": "object",
            "required": ["title", "version"],
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "title": {"type": "string"},
                "description": {"type": "string"},
                "version": {"type": "string"},
                "termsOfService": {"type": "string"},
                "contact": {"type": "object"},
                "license": {"type": "object"},
            },
        },
        "servers": {"type": "array"},
        "externalDocs": {"type": "object"},
        "methods": {"type": "array", "items": {"$ref": "#/definitions/method"}},
        "components": {
            "type": "object",
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "schemas": {"type": "object", "additionalProperties": {"type": ["object", "boolean"]}},
                "errors": {"type": "object", "additionalProperties": {"$ref": "#/definitions/error"}},
                "contentDescriptors": {"type": "object", "additionalProperties": {"$ref": "#/definitions/contentDescriptor"}},
                "examples": {"type": "object", "additionalProperties": {"$ref": "#/definitions/example"}},
                "examplePairings": {"type": "object", "additionalProperties": {"$ref": "#/definitions/examplePairing"}},
                "links": {"type": "object"},
                "tags": {"type": "object"},
            },
        },
    },
    "definitions": {
        "method": {
            "type": "object",
            "required": ["name", "params"],
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "summary": {"type": "string"},
                "description": {"type": "string"},
                "tags": {"type": "array"},
                "externalDocs": {"type": "object"},
                "paramStructure": {"enum": ["by-name", "by-position", "either"]},
                "params": {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/contentDescriptor"}, REFERENCE]}},
                "result": {"anyOf": [{"$ref": "#/definitions/contentDescriptor"}, REFERENCE]},
                "deprecated": {"type": "boolean"},
                "servers": {"type": "array"},
                "errors": {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/error"}, REFERENCE]}},
                "links": {"type": "array"},
                "examples": {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/examplePairing"}, REFERENCE]}},
            },
        },
        "contentDescriptor": {
            "type": "object",
            "required": ["name", "schema"],
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "summary": {"type": "string"},
                "description": {"type": "string"},
                "required": {"type": "boolean"},
                "schema": {"type": ["object", "boolean"]},
                "deprecated": {"type": "boolean"},
            },
        },
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "additionalProperties": False,
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
        },
        "example": {
            "type": "object",
            "required": ["name", "value"],
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "summary": {"type": "string"},
                "description": {"type": "string"},
                "value": {},
            },
        },
        "examplePairing": {
            "type": "object",
            # OpenRPC 1.3: an example pairing without a result shows a notification.
            "required": ["name", "params"],
            "additionalProperties": False,
            "patternProperties": EXTENSIONS,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "summary": {"type": "string"},
                "description": {"type": "string"},
                "params": {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/example"}, REFERENCE]}},
                "result": {"anyOf": [{"$ref": "#/definitions/example"}, REFERENCE]},
            },
        },
    },
}


def test_document_has_the_shape_of_openrpc_1_3() -> None:
    Draft7Validator.check_schema(OPENRPC_SHAPE)
    errors = list(Draft7Validator(OPENRPC_SHAPE).iter_errors(DOCUMENT))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert DOCUMENT["openrpc"] == "1.3.2"


def test_method_names_are_unique() -> None:
    names = [m["name"] for m in methods()]
    assert len(names) == len(set(names)), names


def test_every_ref_resolves() -> None:
    found = list(refs(DOCUMENT))
    assert found, "the document uses $ref for its shared types"
    for ref in found:
        resolve(ref)
    # And every schema can be fully inlined (no cycles).
    inline(DOCUMENT["methods"])


def all_schemas() -> Iterator[tuple[str, Any]]:
    for name, schema in DOCUMENT["components"]["schemas"].items():
        yield f"components.schemas.{name}", schema
    for m in methods():
        for descriptor in m["params"]:
            descriptor = inline(descriptor)
            yield f"{m['name']} params.{descriptor['name']}", descriptor["schema"]
        if "result" in m:
            yield f"{m['name']} result", inline(m["result"])["schema"]


@pytest.mark.parametrize("where,schema", list(all_schemas()), ids=[w for w, _ in all_schemas()])
def test_every_schema_is_valid_draft_7(where: str, schema: Any) -> None:
    Draft7Validator.check_schema(schema)
    Draft7Validator.check_schema(inline(schema))


def test_methods_are_exactly_this_part_of_the_protocol() -> None:
    directions = {m["name"]: m.get("x-direction") for m in methods()}
    assert {n for n, d in directions.items() if d == "client-to-server"} == CLIENT_TO_SERVER
    assert {n for n, d in directions.items() if d == "server-to-client"} == SERVER_TO_CLIENT
    assert set(directions) == CLIENT_TO_SERVER | SERVER_TO_CLIENT


@pytest.mark.parametrize("m", methods(), ids=lambda m: m["name"])
def test_method_marks_are_consistent(m: dict[str, Any]) -> None:
    assert m.get("paramStructure") == "by-name"
    assert m.get("x-direction") in ("client-to-server", "server-to-client")
    if is_notification(m):
        assert "result" not in m, "a notification has no result"
        assert "errors" not in m, "a notification cannot be answered with an error"
        for example in m.get("examples", []):
            assert "result" not in example and "x-error" not in example, "a notification's example has no result"
    else:
        assert "x-notification" not in m or m["x-notification"] is False
        assert "result" in m, "a request has a result"
        assert m.get("examples"), "every request has examples: they are the fixtures of (c)"
        for example in m["examples"]:
            assert ("result" in example) != ("x-error" in example), "a request's example has a result or an x-error"
    names = [inline(p)["name"] for p in m["params"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name,type_name", sorted(PARAMS_TYPES.items()))
def test_params_types_say_what_the_descriptors_say(name: str, type_name: str) -> None:
    named = inline(DOCUMENT["components"]["schemas"][type_name])
    described = params_schema(method(name))
    assert named["type"] == "object"
    assert set(named["properties"]) == set(described["properties"])
    assert sorted(named.get("required", [])) == sorted(described["required"])
    for key, schema in described["properties"].items():
        assert inline(named["properties"][key]) == schema, key


def test_method_errors_are_known_codes() -> None:
    known = {e["code"] for e in DOCUMENT["x-error-codes"]}
    for m in methods():
        for error in m.get("errors", []):
            assert inline(error)["code"] in known, (m["name"], error)


def test_error_codes_agree_with_components_errors() -> None:
    listed = [(e["name"], e["code"], e["message"]) for e in DOCUMENT["x-error-codes"]]
    components = [(name, e["code"], e["message"]) for name, e in DOCUMENT["components"]["errors"].items()]
    assert listed == components
    codes = [code for _, code, _ in listed]
    assert len(codes) == len(set(codes))


def test_info_version_is_the_servers_version() -> None:
    binary = need_binary()
    printed = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert printed.stdout.strip() == DOCUMENT["info"]["version"]


# ------------------------------------------------------------------------------------------------
# (b) The examples validate against their method's schemas


@pytest.mark.parametrize("item", examples(), ids=example_id)
def test_example_validates(item: tuple[str, dict[str, Any]]) -> None:
    name, example = item
    m = method(name)
    schema = params_schema(m)
    params = example_params(example)
    unknown = set(params) - set(schema["properties"])
    assert not unknown, f"example params not described by the method: {unknown}"
    assert_valid({**schema, "additionalProperties": False}, params, f"{name} example params")
    if name in PARAMS_TYPES:
        assert_valid(DOCUMENT["components"]["schemas"][PARAMS_TYPES[name]], params, f"{name} params type")
    if "result" in example:
        assert_valid(inline(m["result"])["schema"], example["result"]["value"], f"{name} example result")
    if "x-error" in example:
        assert_valid(DOCUMENT["components"]["schemas"]["ResponseError"], example["x-error"], f"{name} x-error")
        assert example["x-error"]["code"] in {inline(e)["code"] for e in m.get("errors", [])}, f"{name}: not one of its errors"
    if "x-initialize" in example:
        assert_valid(DOCUMENT["components"]["schemas"]["InitializeParams"], example["x-initialize"], "x-initialize")
    for step in example.get("x-setup", []):
        assert set(step) <= {"method", "params"}, step
        setup = method(step["method"])
        assert setup["x-direction"] == "client-to-server" and not is_notification(setup), step
        assert_valid(params_schema(setup), step.get("params", {}), f"x-setup {step['method']} params")
    for notification in example.get("x-notifications", []):
        validate_server_message({"jsonrpc": "2.0", **notification})


# ------------------------------------------------------------------------------------------------
# Checking traffic against the document


def validate_server_message(message: Any) -> None:
    """A message the server sent: a response (any result schema checked by the caller), an error
    response, or a notification the document describes as server-to-client. A batch's answer is
    a non-empty array of responses."""
    if isinstance(message, list):
        assert message, "an empty array is never an answer"
        for element in message:
            assert isinstance(element, dict) and "method" not in element, element
            validate_server_message(element)
        return
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" in message:
        m = method(message["method"])
        # A notification, or one of the server's requests of the LSP mode (README §12.3), whose
        # ids are strings of their own (`ds-N`).
        assert m["x-direction"] == "server-to-client", message
        if is_notification(m):
            assert set(message) <= {"jsonrpc", "method", "params"}, message
        else:
            assert set(message) <= {"jsonrpc", "id", "method", "params"} and re.fullmatch(r"ds-[1-9][0-9]*", message["id"]), message
        assert_valid(params_schema(m) | {"additionalProperties": False}, message.get("params", {}), message["method"])
        if message["method"] in PARAMS_TYPES:
            assert_valid(DOCUMENT["components"]["schemas"][PARAMS_TYPES[message["method"]]], message.get("params", {}), message["method"])
        return
    assert "id" in message, message
    assert ("result" in message) != ("error" in message), message
    assert set(message) <= {"jsonrpc", "id", "result", "error"}, message
    assert_valid(DOCUMENT["components"]["schemas"]["ResponseId"], message["id"], "response id")
    if "error" in message:
        assert_valid(DOCUMENT["components"]["schemas"]["ResponseError"], message["error"], "error")
        assert message["error"]["code"] in {e["code"] for e in DOCUMENT["x-error-codes"]}, message


def validate_result(method_name: str, result: Any) -> None:
    assert_valid(inline(method(method_name)["result"])["schema"], result, f"{method_name} result")


# ------------------------------------------------------------------------------------------------
# (c) The examples of every request are fixtures


@pytest.mark.parametrize("item", request_examples(), ids=example_id)
def test_example_is_what_the_server_answers(item: tuple[str, dict[str, Any]]) -> None:
    name, example = item
    make_fixtures()
    with RpcClient(need_binary()) as client:
        if name != "initialize":
            client.initialize(example.get("x-initialize", {}))
            client.notify("initialized")
        for step in example.get("x-setup", []):
            response, before = client.request(step["method"], step.get("params", {}))
            assert "result" in response, f"x-setup {step['method']} failed: {response.get('error')}"
            for message in before + [response]:
                validate_server_message(message)
        params = example_params(example)
        response, before = client.request(name, params) if params else client.request(name)
        for message in before + [response]:
            validate_server_message(message)
        expected_notifications = [{"jsonrpc": "2.0", **n} for n in example.get("x-notifications", [])]
        assert normalise_volatile(before, expected_notifications) == expected_notifications
        if "x-error" in example:
            assert "error" in response, f"{name} should have failed: {response}"
            expected = example["x-error"]
            got = normalise_volatile(response["error"], expected)
        else:
            assert "result" in response, f"{name} failed: {response.get('error')}"
            expected = example["result"]["value"]
            got = normalise_volatile(response["result"], expected)
            validate_result(name, response["result"])
        assert got == expected
        # Exactly: the same members in the same order (json.loads keeps the server's order).
        assert encode(got) == encode(expected)
        if name != "shutdown":
            client.call("shutdown")
        client.notify("exit")
        assert client.wait() == 0
        assert client.drain() == []


# ------------------------------------------------------------------------------------------------
# (d) Real traffic validates against the document


def test_scripted_session_traffic_validates() -> None:
    with RpcClient(need_binary()) as client:
        traffic: list[Any] = []
        response, before = client.request("initialize", {
            "processId": 1,
            "clientInfo": {"name": "protocol tests", "version": "1"},
            "capabilities": {"general": {"positionEncodings": ["utf-8"]}},
        })
        traffic += before + [response]
        validate_result("initialize", response["result"])
        client.notify("initialized")
        client.notify("$/setTrace", {"value": "verbose"})
        response, before = client.request("shutdown")
        traffic += before + [response]
        validate_result("shutdown", response["result"])
        client.notify("exit")
        traffic += client.drain()
        assert client.wait() == 0

        for message in traffic:
            validate_server_message(message)
        traces = [normalise_timing(encode(m["params"]).decode()) for m in traffic if m.get("method") == "$/logTrace"]
        assert traces == [
            '{"message":"Received request \'shutdown - (2)\'.","verbose":"null"}',
            '{"message":"Sending response \'shutdown - (2)\'. Processing request took <ms>ms","verbose":"null"}',
            '{"message":"Received notification \'exit\'.","verbose":"null"}',
        ]
        # The verbose examples of $/logTrace are taken from this session.
        for example in method("$/logTrace")["examples"]:
            params = example_params(example)
            if "verbose" in params:
                assert normalise_timing(encode(params).decode()) in traces, example["name"]


def test_error_responses_validate() -> None:
    """One error of every kind the server answers today, validated against ResponseError."""
    with RpcClient(need_binary()) as client:
        answers = []
        answers.append(client.request("shutdown")[0])  # -32002
        client.send_raw(frame(b'{"jsonrpc":"2.0","id":2,"method":"initialize",}'))  # -32700
        answers.append(client.read_message())
        answers.append(client.request("initialize", {"trace": "loud"})[0])  # -32602
        client.initialize({})
        answers.append(client.request("document/frobnicate", {"document": "d1"})[0])  # -32601
        client.send({"jsonrpc": "2.0", "id": 6, "method": 7})  # -32600
        answers.append(client.read_message())
        client.send_raw(
            frame(encode({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}))
            + frame(encode({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}))
        )  # -32800
        answers.append(client.read_message())
        codes = [a["error"]["code"] for a in answers]
        assert codes == [-32002, -32700, -32602, -32601, -32600, -32800]
        for answer in answers:
            validate_server_message(answer)
        assert answers[1]["error"]["data"] == {"offset": 46}
        assert answers[2]["error"]["data"] == {"field": "params.trace"}
        assert client.shutdown_and_exit() == 0


def read_responses(client: RpcClient, ids: set[Any], timeout: float = 30) -> tuple[dict[Any, Any], list[Any]]:
    """Reads until every id in `ids` is answered, whatever the order; answers the responses by id
    and every message read (for requests answered off the queue, whose order varies)."""
    responses: dict[Any, Any] = {}
    messages: list[Any] = []
    while set(responses) != ids:
        message = client.read_message(timeout)
        messages.append(message)
        if isinstance(message, dict) and "method" not in message and message.get("id") in ids:
            responses[message["id"]] = message
    return responses, messages


def state_changes(messages: list[Any], handle: str | None = None) -> list[dict[str, Any]]:
    """The params of the `document/stateChanged` notifications among `messages` (of one document)."""
    return [m["params"] for m in messages if isinstance(m, dict) and m.get("method") == "document/stateChanged"
            and (handle is None or m["params"]["document"] == handle)]


def expected_detail(response_error: dict[str, Any]) -> dict[str, Any]:
    """The `error` of the `document/stateChanged` that goes with an error response (README §10): a
    -32010's data as it is; otherwise code, message, the data's members, recoverable, suggestions."""
    if response_error["code"] == -32010:
        return response_error["data"]
    code, recoverable, suggestions = {
        -32013: ("alreadyExists", False, ["force", "saveAs"]),
        -32016: ("notRegularFile", False, ["saveAs"]),
        -32017: ("changedOnDisk", True, ["resolveConflict", "revert", "saveAs", "force"]),
        -32018: ("unencodable", False, ["saveAs"]),
        -32014: ("notText", False, ["openWithEncoding"]),
    }[response_error["code"]]
    return {"code": code, "message": response_error["message"], **response_error["data"],
            "recoverable": recoverable, "suggestions": suggestions}


def test_document_error_responses_validate() -> None:
    """One error of every kind the document methods answer, validated against ResponseError, whose
    `allOf` ties each code to the shape of its `data`; a failed save comes with a
    `document/stateChanged` whose `error` is the detail README §10 describes."""
    make_fixtures()
    range_0_0 = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        answers: dict[Any, Any] = {}
        notes_before: dict[Any, list[Any]] = {}

        def ask(key: Any, method_name: str, params: Any) -> None:
            answers[key], notes_before[key] = client.request(method_name, params)

        ask(-32010, "document/open", {"uri": uri("missing.txt")})
        ask(-32014, "document/open", {"uri": uri("latin1.txt")})
        ask(-32016, "document/open", {"uri": "file:///tmp/docsession-protocol-fixtures"})
        ask(-32013, "document/create", {"uri": uri("notes.txt"), "text": "x"})
        ask(-32011, "document/read", {"document": "d7"})
        assert client.call("document/open", {"uri": uri("emoji.txt"), "includeText": False})["document"] == "d1"
        assert client.call("document/edit", {"document": "d1", "version": 1, "edits": [{"range": range_0_0, "text": "x"}]}) == {"version": 2}
        ask(-32801, "document/edit", {"document": "d1", "version": 1, "edits": []})
        # The first edit makes the text "a\U0001F600"; in utf-16, character 2 is inside the emoji.
        ask(-32602, "document/edit", {"document": "d1", "version": 2, "edits": [
            {"text": "a\U0001F600"}, {"range": {"start": {"line": 0, "character": 2}, "end": {"line": 0, "character": 2}}, "text": "z"}]})
        assert client.call("document/read", {"document": "d1"}) == {"text": "xa\U0001F600b\ncaf\u00e9\n", "version": 2}

        # Saves that fail (README §8.14).
        assert client.call("document/open", {"uri": uri("notes.txt"), "includeText": False})["document"] == "d2"
        assert client.call("document/open", {"uri": uri("crlf.txt"), "includeText": False})["document"] == "d3"
        ask("save-as onto a file", "document/save", {"document": "d2", "to": uri("utf16.txt")})
        ask("save-as onto an open document", "document/save", {"document": "d2", "to": uri("crlf.txt"), "force": True})
        ask("save-as onto a directory", "document/save", {"document": "d2", "to": "file:///tmp/docsession-protocol-fixtures"})
        ask("save-as under a file", "document/save", {"document": "d2", "to": uri("notes.txt/inside.txt")})
        assert client.call("document/open", {"uri": uri("latin1.txt"), "encoding": "iso-8859-1", "includeText": False})["document"] == "d4"
        assert client.call("document/edit", {"document": "d4", "version": 1, "edits": [{"range": range_0_0, "text": "\U0001F600"}]}) == {"version": 2}
        ask(-32018, "document/save", {"document": "d4"})
        assert client.call("document/edit", {"document": "d2", "version": 1, "edits": [{"text": "Mine\n"}]}) == {"version": 2}
        known = client.call("document/state", {"document": "d2"})["etag"]
        change_fixture("notes.txt", "Theirs\n")
        # The watcher reports the change first (README §8.19); the save then is refused all the same.
        watched = client.read_message()
        validate_server_message(watched)
        assert (watched["method"], watched["params"]["reason"]) == ("document/stateChanged", "externalChange"), watched
        assert watched["params"]["state"] == ["inConflict", "savingError"], watched
        ask(-32017, "document/save", {"document": "d2"})
        assert client.call("document/state", {"document": "d2"})["state"] == ["inConflict", "savingError"]

        # A revert disables editing until it is done: an edit sent with it is refused. (The file is
        # 16 MiB, so that reading it again takes far longer than handling the edit.)
        (FIXTURES / "large.txt").write_bytes((b"z" * 1023 + b"\n") * 16384)
        assert client.call("document/open", {"uri": uri("large.txt"), "includeText": False})["document"] == "d5"
        client.send({"jsonrpc": "2.0", "id": "revert", "method": "document/revert", "params": {"document": "d5", "includeText": False}})
        client.send({"jsonrpc": "2.0", "id": "edit", "method": "document/edit", "params": {"document": "d5", "version": 1, "edits": [{"range": range_0_0, "text": "y"}]}})
        responses, messages = read_responses(client, {"revert", "edit"})
        answers[-32012] = responses["edit"]
        assert "result" in responses["revert"], responses["revert"]
        assert [c["reason"] for c in state_changes(messages, "d5")] == ["reverting", "reverted"]
        assert state_changes(messages, "d5")[0]["state"] == ["editingDisabled", "progressAvailable"]
        for message in messages:
            validate_server_message(message)

        for key, answer in answers.items():
            validate_server_message(answer)
            for message in notes_before.get(key, []):
                validate_server_message(message)
            if isinstance(key, int):
                assert answer["error"]["code"] == key, answer
        assert answers[-32010]["error"]["data"] == {
            "code": "ENOENT", "errno": 2, "syscall": "open", "path": "/tmp/docsession-protocol-fixtures/missing.txt",
            "message": "open failed for /tmp/docsession-protocol-fixtures/missing.txt: No such file or directory (ENOENT)",
            "recoverable": False, "suggestions": ["checkPath"]}
        assert answers[-32010]["error"]["message"] == answers[-32010]["error"]["data"]["message"]
        assert answers[-32014]["error"]["data"] == {"path": "/tmp/docsession-protocol-fixtures/latin1.txt", "offset": 3, "encoding": "utf-8"}
        assert answers[-32016]["error"]["data"] == {"path": "/tmp/docsession-protocol-fixtures", "kind": "directory"}
        assert answers[-32013]["error"]["data"] == {"uri": uri("notes.txt")}
        assert answers[-32011]["error"]["data"] == {"document": "d7"}
        assert answers[-32801]["error"]["data"] == {"version": 2}
        assert answers[-32602]["error"] == {
            "code": -32602, "message": "params.edits[1].range.start: character 2 of line 0 falls inside a surrogate pair",
            "data": {"field": "params.edits[1].range.start"}}
        assert answers[-32012]["error"] == {
            "code": -32012, "message": "Editing document d5 is disabled: the document is busy", "data": {"document": "d5"}}
        assert answers[-32018]["error"]["data"] == {"offset": 0, "character": "U+1F600", "encoding": "iso-8859-1"}
        conflict = answers[-32017]["error"]["data"]
        assert (conflict["path"], conflict["uri"], conflict["expectedEtag"]) == ("/tmp/docsession-protocol-fixtures/notes.txt", uri("notes.txt"), known)
        assert ETAG.fullmatch(conflict["etag"]) and conflict["etag"] != known
        assert answers["save-as onto a file"]["error"]["code"] == -32013
        assert answers["save-as onto a file"]["error"]["data"] == {"uri": uri("utf16.txt")}
        assert answers["save-as onto an open document"]["error"] == {
            "code": -32013, "message": "/tmp/docsession-protocol-fixtures/crlf.txt is open as document d3; close it first",
            "data": {"uri": uri("crlf.txt"), "document": "d3"}}
        assert answers["save-as onto a directory"]["error"]["code"] == -32016
        assert answers["save-as under a file"]["error"]["data"]["code"] == "ENOTDIR"

        # Each failed save is reported, with its error, before its response; the refusal to save
        # onto another open document changes nothing and is not reported.
        expected_reasons = {
            "save-as onto a file": ("saveFailed", []),
            "save-as onto a directory": ("saveFailed", ["savingError"]),
            "save-as under a file": ("saveFailed", ["savingError"]),
            -32018: ("saveFailed", ["savingError"]),
            -32017: ("externalChange", ["inConflict", "savingError"]),
        }
        assert notes_before["save-as onto an open document"] == []
        for key, (reason, state) in expected_reasons.items():
            (change,) = state_changes(notes_before[key])
            assert (change["reason"], change["state"]) == (reason, state), (key, change)
            assert change["error"] == expected_detail(answers[key]["error"]), key
        assert client.shutdown_and_exit() == 0
    # The code-to-data rules hold: a -32010 without data, or with another code's data, is refused.
    schema = DOCUMENT["components"]["schemas"]["ResponseError"]
    assert list(validator(schema).iter_errors({"code": -32010, "message": "m"}))
    assert list(validator(schema).iter_errors({"code": -32011, "message": "m", "data": {"version": 2}}))
    assert list(validator(schema).iter_errors({"code": -32601, "message": "m", "data": {"document": "d1"}}))
    assert list(validator(schema).iter_errors({"code": -32017, "message": "m", "data": {"uri": uri("a")}}))
    assert not list(validator(schema).iter_errors({"code": -32011, "message": "m", "data": {"document": "d1"}}))


def progress_of(messages: list[Any], token: Any) -> list[dict[str, Any]]:
    """The values of the `$/progress` notifications under `token`, checked to be one well-formed
    sequence: a begin, reports of growing percentage, an end."""
    values = [m["params"]["value"] for m in messages if m.get("method") == "$/progress" and m["params"]["token"] == token]
    assert values, f"no $/progress under {token!r}"
    assert values[0]["kind"] == "begin" and values[-1] == {"kind": "end"}, values
    percentages = [v["percentage"] for v in values[:-1]]
    assert all(v["kind"] == "report" for v in values[1:-1]), values
    assert percentages == sorted(set(percentages)), f"percentages must grow: {percentages}"
    return values


def test_scripted_document_session_traffic_validates() -> None:
    """open (with progress), create, edit, undo, redo, state, read, save (with progress, and to
    another file), revert, close: every message the server sends validates, and the results and
    state changes say what README §8 says."""
    make_fixtures()
    with RpcClient(need_binary()) as client:
        traffic: list[Any] = []

        def call(method_name: str, params: Any) -> Any:
            response, before = client.request(method_name, params)
            traffic.extend(before + [response])
            assert "result" in response, f"{method_name} failed: {response.get('error')}"
            validate_result(method_name, response["result"])
            return response["result"]

        def fail(method_name: str, params: Any) -> dict[str, Any]:
            response, before = client.request(method_name, params)
            traffic.extend(before + [response])
            assert "error" in response, f"{method_name} should have failed: {response}"
            return response["error"]

        client.initialize({"capabilities": {"general": {"positionEncodings": ["utf-32"]}}})
        client.notify("initialized")
        client.notify("$/setTrace", {"value": "verbose"})

        big = call("document/open", {"uri": uri("big.txt"), "workDoneToken": "p1", "includeText": False})
        begin, *reports, end = progress_of(traffic, "p1")
        assert begin["title"] == "Opening /tmp/docsession-protocol-fixtures/big.txt" and begin["cancellable"] is True
        assert [r["percentage"] for r in reports] == [80, 100] and begin["percentage"] == 40
        assert "text" not in big and big["modificationDate"] == FIXTURE_DATE and big["document"] == "d1"

        info = call("document/open", {"uri": uri("emoji.txt")})
        assert (info["document"], info["version"], info["text"], info["state"]) == ("d2", 1, "a\U0001F600b\ncaf\u00e9\n", [])
        handle = info["document"]
        # utf-32: the emoji is one character.
        assert call("document/edit", {"document": handle, "version": 1, "edits": [
            {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 2}}, "text": "\U0001F642"},
            {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}}, "text": "!"},
        ], "undo": {"label": "Smile"}}) == {"version": 2}
        assert call("document/read", {"document": handle}) == {"text": "a\U0001F642b\ncaf\u00e9!\n", "version": 2}
        state = call("document/state", {"document": handle})
        assert (state["hasUnsavedChanges"], state["canUndo"], state["canRedo"], state["undoLabel"]) == (True, True, False, "Smile")
        undone = call("document/undo", {"document": handle, "version": 2})
        assert undone == {"version": 3, "edits": [
            {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 5}}, "text": ""},
            {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 2}}, "text": "\U0001F600"},
        ]}
        assert call("document/state", {"document": handle})["hasUnsavedChanges"] is False
        redone = call("document/redo", {"document": handle})
        assert redone["version"] == 4 and len(redone["edits"]) == 2
        assert call("document/read", {"document": handle, "range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 2}}}) == {"text": "\U0001F642", "version": 4}

        # Save, edit, revert (an undo step), undo the revert, save to another file, close.
        etag_before = call("document/state", {"document": handle})["etag"]
        saved = call("document/save", {"document": handle})
        assert (saved["version"], saved["uri"], saved["size"], saved["durable"], saved["method"]) == (4, uri("emoji.txt"), len("a\U0001F642b\ncaf\u00e9!\n".encode()), True, "rename")
        assert (FIXTURES / "emoji.txt").read_bytes() == "a\U0001F642b\ncaf\u00e9!\n".encode()
        after = call("document/state", {"document": handle})
        assert after["etag"] == saved["etag"] != etag_before and after["hasUnsavedChanges"] is False and after["canUndo"] is True
        assert call("document/edit", {"document": handle, "version": 4, "edits": [{"text": "gone\n"}]}) == {"version": 5}
        reverted = call("document/revert", {"document": handle})
        assert (reverted["version"], reverted["text"], reverted["hasUnsavedChanges"], reverted["state"]) == (6, "a\U0001F642b\ncaf\u00e9!\n", False, [])
        assert call("document/state", {"document": handle})["undoLabel"] == "Revert"
        assert call("document/undo", {"document": handle})["version"] == 7
        copy = call("document/save", {"document": handle, "to": uri("emoji%20copy.txt")})
        assert (copy["version"], copy["uri"]) == (7, uri("emoji%20copy.txt"))
        assert (FIXTURES / "emoji copy.txt").read_bytes() == b"gone\n"
        assert (FIXTURES / "emoji.txt").read_bytes() == "a\U0001F642b\ncaf\u00e9!\n".encode()
        assert call("document/close", {"document": handle}) == {"saved": False}
        assert fail("document/state", {"document": handle})["code"] == -32011
        assert [(c["reason"], c["version"], c["state"], c["hasUnsavedChanges"]) for c in state_changes(traffic, handle)] == [
            ("edited", 2, [], True), ("undone", 3, [], False), ("redone", 4, [], True), ("saved", 4, [], False),
            ("edited", 5, [], True), ("reverting", 5, ["editingDisabled"], True), ("reverted", 6, [], False),
            ("undone", 7, [], True), ("saved", 7, [], False), ("closed", 7, ["closed"], False)]
        assert {c["uri"] for c in state_changes(traffic, handle)[-2:]} == {uri("emoji%20copy.txt")}

        # The large document: changed and saved with progress (a save of the file's own bytes writes
        # nothing, §8.14), then closed with an edit, which the close saves.
        assert call("document/edit", {"document": "d1", "version": 1, "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "text": "z"}]}) == {"version": 2}
        call("document/save", {"document": "d1", "workDoneToken": "p2"})
        # How many bytes each write takes depends on how the text is held (README §8.14): the
        # percentages are not pinned here (the transcript of §8.14 shows them), their order is.
        begin, *reports, end = progress_of(traffic, "p2")
        assert begin["title"] == "Saving" and begin["percentage"] < 100 and reports[-1]["percentage"] == 100
        assert call("document/edit", {"document": "d1", "version": 2, "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "y"}]}) == {"version": 3}
        assert call("document/close", {"document": "d1"}) == {"saved": True}
        assert (FIXTURES / "big.txt").read_bytes()[:3] == b"yzx"
        assert [(c["reason"], c["state"]) for c in state_changes(traffic, "d1")] == [
            ("edited", []), ("saving", ["progressAvailable"]), ("saved", []), ("edited", []), ("closing", ["editingDisabled"]),
            ("saving", ["editingDisabled", "progressAvailable"]), ("saved", []), ("closed", ["closed"])]

        created = call("document/create", {"uri": uri("made%20here.md"), "text": "# Made\r\n"})
        assert (created["document"], created["displayName"], created["fileType"], created["lineEnding"]) == ("d3", "made here.md", "markdown", "crlf")
        assert (FIXTURES / "made here.md").read_bytes() == b"# Made\r\n"
        assert call("document/close", {"document": "d3"}) == {"saved": False}
        assert client.shutdown_and_exit() == 0
        traffic += client.drain()

        for message in traffic:
            validate_server_message(message)
        # Verbose tracing: a receipt and a response line for each request (those answered off the
        # queue too), and the exit notification's receipt (initialize came before tracing;
        # shutdown's lines were read by shutdown_and_exit).
        traces = [m["params"]["message"] for m in traffic if m.get("method") == "$/logTrace"]
        requests = [m for m in client.sent if "id" in m and m["method"] not in ("initialize", "shutdown")]
        assert len(traces) == 2 * len(requests) + 1, traces
        for request in requests:
            label = f"'{request['method']} - ({json.dumps(request['id'])})'"
            assert f"Received request {label}." in traces
            assert any(t.startswith(f"Sending response {label}. Processing request took ") for t in traces)


def test_save_writes_the_text_as_of_its_request() -> None:
    """README §8.14: a save takes the text when its request is handled; an edit sent right after it
    applies while it writes, is a later version, and stays unsaved. (Their answers may come in
    either order: the save is answered off the queue.)"""
    make_fixtures()
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        assert client.call("document/open", {"uri": uri("big.txt"), "includeText": False})["document"] == "d1"
        client.send({"jsonrpc": "2.0", "id": "save", "method": "document/save", "params": {"document": "d1"}})
        client.send({"jsonrpc": "2.0", "id": "edit", "method": "document/edit", "params": {"document": "d1", "version": 1, "edits": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "later "}]}})
        responses, messages = read_responses(client, {"save", "edit"})
        for message in messages:
            validate_server_message(message)
        assert responses["edit"]["result"] == {"version": 2}
        saved = responses["save"]["result"]
        validate_result("document/save", saved)
        assert (saved["version"], saved["size"]) == (1, 2621440)
        assert (FIXTURES / "big.txt").read_bytes() == BIG_TEXT.encode()
        state = client.call("document/state", {"document": "d1"})
        assert (state["version"], state["hasUnsavedChanges"], state["state"]) == (2, True, [])
        # The clean point is the saved version: undoing the later edit reaches it.
        client.call("document/undo", {"document": "d1"})
        assert client.call("document/state", {"document": "d1"})["hasUnsavedChanges"] is False
        assert client.shutdown_and_exit() == 0


def test_a_cancelled_save_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """README §8.14: a save of a large document (64 MiB) cancelled while it writes answers -32800;
    the file, its inode and its directory are as they were, and `progressAvailable` goes again."""
    large = tmp_path / "large.txt"
    with open(large, "wb") as out:
        for _ in range(64):
            out.write((b"s" * 1023 + b"\n") * 1024)
    before = large.stat()
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        large_uri = "file://" + str(large)
        assert client.call("document/open", {"uri": large_uri, "includeText": False}, )["document"] == "d1"
        # A change, so that the save has something to write (the file's own bytes are not written again).
        client.call("document/edit", {"document": "d1", "version": 1, "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "text": "t"}]})
        client.send({"jsonrpc": "2.0", "id": "save", "method": "document/save", "params": {"document": "d1", "workDoneToken": "s"}})
        first = client.read_message(timeout=30)
        assert first["method"] == "document/stateChanged" and first["params"]["reason"] == "saving", first
        begin = client.read_message(timeout=30)
        assert begin["method"] == "$/progress" and begin["params"]["value"]["kind"] == "begin", begin
        client.notify("$/cancelRequest", {"id": "save"})
        response, others = client.read_until_response("save", timeout=60)
        messages = [first, begin] + others + [response]
        for message in messages:
            validate_server_message(message)
        progress_of(messages, "s")
        assert response["error"] == {"code": -32800, "message": 'Request "save" was cancelled'}, response
        assert [(c["reason"], c["state"]) for c in state_changes(messages)] == [("saving", ["progressAvailable"]), ("saveCancelled", [])]
        after = large.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["large.txt"], "the temp file is removed"
        state = client.call("document/state", {"document": "d1"})
        assert (state["state"], state["hasUnsavedChanges"]) == ([], True)
        assert client.shutdown_and_exit() == 0


def test_saves_keep_the_files_metadata_and_opens_sweep_stale_temp_files() -> None:
    """README §8.14 and §8.6: a save keeps the file's owner, mode and extended attributes (by the
    rename method: a new inode); opening a file removes the temp files of killed saves beside it,
    and leaves backups alone."""
    make_fixtures()
    notes = FIXTURES / "notes.txt"
    os.chmod(notes, 0o640)
    os.chown(notes, 1234, 4321)
    try:
        os.setxattr(notes, "user.docsession-test", b"kept")
        has_xattrs = True
    except OSError:
        has_xattrs = False  # a file system without user attributes: the rest still holds
    (FIXTURES / ".docsession-save-0123abcd").write_bytes(b"left by a killed save")
    (FIXTURES / ".docsession-backup-4567").write_bytes(b"Hello, world!\nSecond line\n")
    inode = notes.stat().st_ino
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        assert client.call("document/open", {"uri": uri("notes.txt"), "includeText": False})["document"] == "d1"
        assert not (FIXTURES / ".docsession-save-0123abcd").exists()
        assert (FIXTURES / ".docsession-backup-4567").exists()
        client.call("document/edit", {"document": "d1", "version": 1, "edits": [{"text": "Kept\n"}]})
        assert client.call("document/save", {"document": "d1"})["method"] == "rename"
        assert client.shutdown_and_exit() == 0
    status = notes.stat()
    assert (notes.read_bytes(), status.st_mode & 0o7777, status.st_uid, status.st_gid) == (b"Kept\n", 0o640, 1234, 4321)
    assert status.st_ino != inode
    if has_xattrs:
        assert os.getxattr(notes, "user.docsession-test") == b"kept"
    assert not [p.name for p in FIXTURES.iterdir() if p.name.startswith(".docsession-save-")]


def test_shutdown_refuses_params_naming_the_field_and_the_server_keeps_serving() -> None:
    """README §5.3: shutdown takes no params (its schema lists none): absent, null, {} and [] only.
    Anything else is -32602 naming the first param given (`params.NAME`, `params[0]`) and why;
    nothing changes: documents stay open and editable, autosave still runs, and a later shutdown
    without params shuts down (exit status 0)."""
    make_fixtures()
    with RpcClient(need_binary()) as client:
        client.initialize({"initializationOptions": {"autosave": {"policy": "afterDelay", "delay": 50}}})
        client.notify("initialized")
        assert client.call("document/open", {"uri": uri("notes.txt"), "includeText": False})["document"] == "d1"
        refusals = [
            ({"save": True}, "params.save", ""),
            ({"force": None, "save": 1}, "params.force", " (the first of 2 given)"),
            ([True], "params[0]", ""),
            ([{}, []], "params[0]", " (the first of 2 given)"),
            ([None], "params[0]", ""),
        ]
        for params, field, given in refusals:
            response, before = client.request("shutdown", params)
            assert before == [], before
            validate_server_message(response)
            assert response["error"] == {
                "code": -32602,
                "message": f"{field}: not a param of shutdown, which takes none{given}: send no params, or null, {{}} or []",
                "data": {"field": field},
            }, (params, response)
        # Still serving, and still running: an edit is autosaved as before.
        response, before = client.request("document/edit", {"document": "d1", "version": 1, "edits": [{"text": "After\n"}]})
        assert response["result"] == {"version": 2}, response
        seen = before
        while not any(m.get("method") == "document/stateChanged" and m["params"]["reason"] == "saved" for m in seen):
            seen.append(client.read_message())
        assert (FIXTURES / "notes.txt").read_bytes() == b"After\n"
        assert client.call("document/read", {"document": "d1"})["version"] == 2
        assert client.shutdown_and_exit() == 0


def test_a_file_touched_on_disk_is_not_a_conflict() -> None:
    """README §8.14, step 3: a file whose times changed but whose bytes did not (a `touch`) saves
    without `force`; one whose bytes changed is a conflict."""
    make_fixtures()
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        assert client.call("document/open", {"uri": uri("notes.txt"), "includeText": False})["document"] == "d1"
        # The server hashes the file it read just after reading it, off the queue; give it time.
        time.sleep(0.5)
        os.utime(FIXTURES / "notes.txt")
        client.call("document/edit", {"document": "d1", "version": 1, "edits": [{"text": "Mine\n"}]})
        response, before = client.request("document/save", {"document": "d1"})
        assert "result" in response, response
        # The touch was no change for the watcher either (README §8.18): nothing was reported.
        assert state_changes(before) == [{"document": "d1", "uri": uri("notes.txt"), "version": 2, "state": [],
                                          "previousState": [], "reason": "saved", "hasUnsavedChanges": False}], before
        client.call("document/edit", {"document": "d1", "version": 2, "edits": [{"text": "Mine again\n"}]})
        change_fixture("notes.txt", "Theirs\n")
        # The watcher reports the change (README §8.19) before the save is sent, which is refused.
        watched = client.read_message()
        assert (watched["method"], watched["params"]["reason"]) == ("document/stateChanged", "externalChange"), watched
        response, before = client.request("document/save", {"document": "d1"})
        assert response["error"]["code"] == -32017
        assert client.shutdown_and_exit() == 0


def test_open_is_answered_off_the_queue_and_can_be_cancelled_while_reading(tmp_path: Path) -> None:
    """A large file (64 MiB): a later request overtakes the open; a cancellation while reading ends
    the progress and answers -32800, opening nothing (the next open gets the first handle)."""
    large = tmp_path / "large.txt"
    line = b"y" * 1023 + b"\n"
    with open(large, "wb") as out:
        for _ in range(64):
            out.write(line * 1024)  # 64 MiB in all
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        large_uri = "file://" + str(large)
        client.send({"jsonrpc": "2.0", "id": "open", "method": "document/open",
                     "params": {"uri": large_uri, "workDoneToken": "t", "includeText": False}})
        client.send({"jsonrpc": "2.0", "id": "state", "method": "document/state", "params": {"document": "d1"}})
        # The state is answered while the open reads (its progress may begin before or after that
        # answer, depending on the machine's load), and the document does not exist yet.
        state, early = client.read_until_response("state")
        validate_server_message(state)
        assert state["error"]["code"] == -32011, state
        assert all(m.get("method") == "$/progress" for m in early), early
        begin = early[0] if early else client.read_message()
        assert begin["method"] == "$/progress" and begin["params"]["value"]["kind"] == "begin", begin
        client.notify("$/cancelRequest", {"id": "open"})
        response, before = client.read_until_response("open", timeout=60)
        messages = [begin] + early[1:] + before + [response]
        for message in messages:
            validate_server_message(message)
        progress_of(messages, "t")
        assert response["error"] == {"code": -32800, "message": 'Request "open" was cancelled'}, response
        # The cancelled open made no document: the next one gets the first handle.
        make_fixtures()
        assert client.call("document/open", {"uri": uri("notes.txt"), "includeText": False})["document"] == "d1"
        assert client.shutdown_and_exit() == 0


def test_end_of_input_waits_for_an_open_still_reading() -> None:
    """README §5.5: the open is answered before the server exits at the end of its input."""
    make_fixtures()
    with RpcClient(need_binary()) as client:
        client.initialize({})
        client.notify("initialized")
        client.send({"jsonrpc": "2.0", "id": 2, "method": "document/open",
                     "params": {"uri": uri("big.txt"), "includeText": False, "workDoneToken": "w"}})
        client.close_input()
        messages = client.drain()
        assert client.wait() == 1
        for message in messages:
            validate_server_message(message)
        progress_of(messages, "w")
        assert messages[-1]["id"] == 2 and messages[-1]["result"]["document"] == "d1", messages[-1]


def journal_files(state: Path) -> list[Path]:
    """The journals in a state directory (README §8.22)."""
    directory = state / "journal"
    return sorted(directory.glob("*.journal")) if directory.is_dir() else []


def wait_for_journal(state: Path, holding: bytes, timeout: float = 60) -> Path:
    """Waits until a journal in `state` holds `holding` (the writer flushes at most flushDelay ms
    after a change: polled, not slept for)."""
    def holder() -> Path | None:
        for path in journal_files(state):
            try:
                if holding in path.read_bytes():
                    return path
            except FileNotFoundError:
                pass
        return None

    return wait_until(holder, timeout, f"a journal in {state} holding {holding!r}")


def killed(client: RpcClient) -> None:
    """Ends a server as a crash would: SIGKILL, nothing flushed on the way out."""
    client.process.kill()
    client.process.wait()
    client.kill()


def test_recovery_traffic_validates(tmp_path: Path) -> None:
    """README §8.22: the messages of a real recovery, which the transcripts cannot show (a server is
    killed in between), validate against the document: the `recovery` of document/open (whole and
    cut), `editedElsewhere`, workspace/recoverable, document/recover (in step with the file, and
    in conflict), its stateChanged `recovered`, the -32023 and -32025 refusals, discardRecovery, and
    a `journalFailed`."""
    state = tmp_path / "state"
    args = ("--state-dir", str(state))
    options = {"initializationOptions": {"flushDelay": 0}}
    traffic: list[Any] = []
    notes = {"uri": uri("notes.txt"), "includeText": False}

    def call(client: RpcClient, method_name: str, params: Any = None) -> Any:
        response, before = client.request(method_name, params) if params is not None else client.request(method_name)
        traffic.extend(before + [response])
        assert "result" in response, f"{method_name} failed: {response.get('error')}"
        validate_result(method_name, response["result"])
        return response["result"]

    def fail(client: RpcClient, method_name: str, params: Any) -> dict[str, Any]:
        response, before = client.request(method_name, params)
        traffic.extend(before + [response])
        assert "error" in response, f"{method_name} should have failed: {response}"
        return response["error"]

    def crash_with(text: str) -> None:
        """A server that opens notes.txt, replaces its text and is killed once that is journaled."""
        with RpcClient(need_binary(), args=args) as first:
            first.initialize(options)
            first.notify("initialized")
            assert call(first, "document/open", notes)["document"] == "d1"
            call(first, "document/edit", {"document": "d1", "version": 1, "edits": [{"text": "Draft\n"}]})
            call(first, "document/edit", {"document": "d1", "version": 2, "edits": [{"text": text}]})
            wait_for_journal(state, text.encode())
            killed(first)

    make_fixtures()
    crash_with("Mine\n")
    with RpcClient(need_binary(), args=args) as client:
        capabilities = client.initialize(options)["capabilities"]
        assert (capabilities["journal"], capabilities["flushDelay"], capabilities["hotExit"]) == (True, 0, True)
        client.notify("initialized")
        (waiting,) = call(client, "workspace/recoverable")["journals"]
        assert (waiting["uri"], waiting["edits"], waiting["version"], waiting["open"]) == (uri("notes.txt"), 2, 3, False)
        info = call(client, "document/open", notes)
        assert info["recovery"] == {"date": waiting["date"], "edits": 2, "version": 3, "fileMatchesBase": True, "cut": None}
        # A second server meanwhile: the offered journal is held by a live server.
        with RpcClient(need_binary(), args=args) as other:
            other.initialize(options)
            other.notify("initialized")
            assert call(other, "document/open", notes)["editedElsewhere"] is True
            assert call(other, "workspace/recoverable") == {"journals": []}
            assert other.shutdown_and_exit() == 0
        assert call(client, "workspace/recoverable")["journals"][0]["open"] is True
        # Unsaved changes of its own: refused, nothing changes.
        call(client, "document/edit", {"document": "d1", "version": 1, "edits": [{"text": "Other\n"}]})
        refused = fail(client, "document/recover", {"document": "d1"})
        assert (refused["code"], refused["data"]) == (-32023, {"document": "d1", "uri": uri("notes.txt")}), refused
        call(client, "document/undo", {"document": "d1"})
        recovered = call(client, "document/recover", {"document": "d1"})
        # The version: the journal's (3), unless the document is there already (3 after the edit
        # and its undo): then one more.
        assert (recovered["version"], recovered["inConflict"], recovered["hasUnsavedChanges"]) == (4, False, True)
        assert call(client, "document/read", {"document": "d1"}) == {"text": "Mine\n", "version": 4}
        assert [c["reason"] for c in state_changes(traffic, "d1")][-1] == "recovered"
        assert fail(client, "document/recover", {"document": "d1"})["code"] == -32025
        assert fail(client, "document/discardRecovery", {"document": "d1"})["code"] == -32025
        # Undo goes back to the file's text, step by step.
        call(client, "document/undo", {"document": "d1"})
        call(client, "document/undo", {"document": "d1"})
        assert call(client, "document/read", {"document": "d1"})["text"] == "Hello, world!\nSecond line\n"
        assert call(client, "document/state", {"document": "d1"})["hasUnsavedChanges"] is False
        assert client.shutdown_and_exit() == 0

    # The file changed since: the recovery comes back in conflict. A torn end is cut, not guessed at.
    make_fixtures()
    crash_with("Mine again\n")
    journal = wait_for_journal(state, b"Mine again\n")
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-2])
    change_fixture("notes.txt", "Theirs\n")
    with RpcClient(need_binary(), args=args) as client:
        client.initialize(options)
        client.notify("initialized")
        offer = call(client, "document/open", notes)["recovery"]
        assert offer["fileMatchesBase"] is False and offer["version"] == 2, offer
        assert offer["cut"]["reason"] == "torn" and offer["cut"]["offset"] + offer["cut"]["bytes"] == len(whole) - 2, offer
        recovered = call(client, "document/recover", {"document": "d1"})
        assert (recovered["version"], recovered["inConflict"]) == (2, True)
        assert call(client, "document/read", {"document": "d1"})["text"] == "Draft\n"
        assert call(client, "document/state", {"document": "d1"})["state"] == ["inConflict"]
        assert call(client, "document/close", {"document": "d1", "save": "never"}) == {"saved": False}
        assert client.shutdown_and_exit() == 0

    # Discarded: the journal is deleted, and nothing is left to recover.
    make_fixtures()
    crash_with("Not wanted\n")
    with RpcClient(need_binary(), args=args) as client:
        client.initialize(options)
        client.notify("initialized")
        assert call(client, "document/open", notes)["recovery"]["fileMatchesBase"] is True
        assert fail(client, "document/discardRecovery", {"document": "d9"})["code"] == -32011
        assert call(client, "document/discardRecovery", {"document": "d1"}) is None
        assert journal_files(state) == []
        assert call(client, "workspace/recoverable") == {"journals": []}
        assert call(client, "document/read", {"document": "d1"}) == {"text": "Hello, world!\nSecond line\n", "version": 1}
        assert client.shutdown_and_exit() == 0

    # A journal that cannot be written: reported once, with the system call's detail.
    make_fixtures()
    with RpcClient(need_binary(), args=args) as client:
        client.initialize(options)
        client.notify("initialized")
        call(client, "document/open", notes)
        for path in journal_files(state):
            path.unlink()
        (state / "journal").rmdir()
        (state / "journal").write_bytes(b"not a directory")
        call(client, "document/edit", {"document": "d1", "version": 1, "edits": [{"text": "Unjournaled\n"}]})
        failed = client.read_message()
        traffic.append(failed)
        assert failed["method"] == "document/stateChanged" and failed["params"]["reason"] == "journalFailed", failed
        assert failed["params"]["error"]["code"] == "ENOTDIR" and failed["params"]["hasUnsavedChanges"] is True
        assert client.shutdown_and_exit() == 0
    for message in traffic:
        validate_server_message(message)


def test_package_recovery_traffic_validates(tmp_path: Path) -> None:
    """README §13.7: a package's journal recovered, whose messages the transcripts cannot show: the
    `recovery` of the package's info, workspace/recoverable, document/recover's PackageRecoverResult
    and its stateChanged `recovered` validate against the document."""
    state = tmp_path / "state"
    package = tmp_path / "notes.textbundle"
    package.mkdir()
    (package / "text.md").write_text("# Notes\n")
    args = ("--state-dir", str(state))
    options = {"initializationOptions": {"flushDelay": 0}}
    traffic: list[Any] = []
    package_uri = "file://" + str(package)

    def call(client: RpcClient, method_name: str, params: Any = None) -> Any:
        response, before = client.request(method_name, params) if params is not None else client.request(method_name)
        traffic.extend(before + [response])
        assert "result" in response, f"{method_name} failed: {response.get('error')}"
        validate_result(method_name, response["result"])
        return response["result"]

    def journaled() -> bool:
        """Whether the package's journal holds version 3 (its last record's version, whole)."""
        names = os.listdir(state / "journal") if (state / "journal").is_dir() else []
        for name in (n for n in names if n.endswith(".pjournal")):
            data, offset, last = (state / "journal" / name).read_bytes(), 8, None
            while offset + 9 <= len(data):
                length = int.from_bytes(data[offset + 4: offset + 8], "little")
                if offset + 9 + length > len(data):
                    break
                last = data[offset + 9: offset + 17]
                offset += 9 + length
            if last is not None and int.from_bytes(last, "little") == 3:
                return True
        return False

    with RpcClient(need_binary(), args=args) as first:
        first.initialize(options)
        first.notify("initialized")
        handle = call(first, "document/open", {"uri": package_uri})["document"]
        call(first, "document/writeEntry", {"document": handle, "path": "text.md", "text": "# Notes, unsaved\n", "label": "Type"})
        call(first, "document/writeEntry", {"document": handle, "path": "assets/a.bin", "base64": "AAE="})
        wait_until(journaled, what="a package journal holding version 3")
        killed(first)
    with RpcClient(need_binary(), args=args) as client:
        client.initialize(options)
        client.notify("initialized")
        (waiting,) = call(client, "workspace/recoverable")["journals"]
        assert (waiting["uri"], waiting["edits"], waiting["version"]) == (package_uri, 2, 3), waiting
        info = call(client, "document/open", {"uri": package_uri})
        assert info["recovery"]["fileMatchesBase"] is True and info["recovery"]["edits"] == 2, info
        recovered = call(client, "document/recover", {"document": info["document"]})
        assert recovered == {"version": 3, "inConflict": False, "hasUnsavedChanges": True,
                             "entries": [{"path": "assets/a.bin", "change": "written"}, {"path": "text.md", "change": "written"}]}
        assert [c["reason"] for c in state_changes(traffic, info["document"])][-1] == "recovered"
        undone = call(client, "document/undo", {"document": info["document"]})
        assert undone["entries"] == [{"path": "assets/a.bin", "change": "deleted"}]
        assert call(client, "document/state", {"document": info["document"]})["undoLabel"] == "Type"
        # Handed off (§8.23): the package's restore answers its info and its recovery.
        assert call(client, "document/setClientState", {"document": info["document"], "state": {"entry": "text.md"}}) is None
        token = call(client, "session/snapshot")["snapshot"]
        assert client.shutdown_and_exit() == 0
    with RpcClient(need_binary(), args=args) as client:
        client.initialize(options)
        client.notify("initialized")
        (restored,) = call(client, "session/restore", {"snapshot": token})["documents"]
        assert restored["error"] is None and restored["clientState"] == {"entry": "text.md"}, restored
        assert restored["document"]["kind"] == "package" and restored["recovered"]["entries"] == [
            {"path": "text.md", "change": "written"}], restored
        assert client.shutdown_and_exit() == 0
    for message in traffic:
        validate_server_message(message)


# ------------------------------------------------------------------------------------------------
# The README: its error-code table and its wire transcripts


def readme_error_table() -> list[dict[str, Any]]:
    section = README.split("\n## ")
    (errors,) = [s for s in section if s.startswith("Error codes") or re.match(r"\d+\. Error codes", s)]
    rows = []
    for line in errors.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(r"-?\d+", cells[0]):
            rows.append({"code": int(cells[0]), "name": cells[1].strip("`"), "message": cells[2]})
    return rows


def test_readme_error_table_is_x_error_codes() -> None:
    assert readme_error_table() == DOCUMENT["x-error-codes"]


def test_readme_has_a_section_per_method() -> None:
    headings = set(re.findall(r"^#+ .*?`([^`]+)`", README, flags=re.M))
    for m in methods():
        assert m["name"] in headings, f"README has no section for {m['name']}"


def transcripts() -> list[tuple[int, list[str]]]:
    """The ```transcript blocks of the README, with the line each starts on."""
    blocks = []
    lines = README.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```transcript":
            start = index + 1
            end = start
            while lines[end].strip() != "```":
                end += 1
            blocks.append((start + 1, lines[start:end]))
            index = end
        index += 1
    return blocks


RAW_ESCAPE = re.compile(rb"\\(r|n|t|\\|x[0-9A-Fa-f]{2})")


def unescape_raw(text: str) -> bytes:
    def replace(match: re.Match[bytes]) -> bytes:
        code = match.group(1)
        simple = {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"\\": b"\\"}
        return simple[code] if code in simple else bytes([int(code[1:], 16)])

    return RAW_ESCAPE.sub(replace, text.encode("utf-8"))


def kept_versions(directory: Path) -> int:
    """How many versions a server's version store (README §8.21) holds: the files of its slots named
    as versions (temp files, written before their rename into a slot, are not counted)."""
    if not directory.is_dir():
        return 0
    while True:
        try:
            return sum(1 for slot in directory.iterdir() if slot.is_dir() and not slot.name.startswith(".")
                       for entry in slot.iterdir() if entry.suffix in (".saved", ".conflict", ".syncConflict"))
        except FileNotFoundError:
            # A slot removed while it was listed (a save as moves the versions to the new file's
            # slot and removes the emptied one; seen in a clean-clone run under load): list again.
            continue


def wait_for_versions(directory: Path, count: int, timeout: float = 60) -> None:
    """Waits until the store holds `count` versions: they are written in the background, at idle
    priority, shortly after the save or change that keeps them (polled, not slept for)."""
    deadline = time.monotonic() + timeout
    while (found := kept_versions(directory)) != count:
        assert found < count, f"{found} versions kept, not {count}"
        if time.monotonic() > deadline:
            raise AssertionError(f"{found} versions kept after {timeout} s, not {count}")
        time.sleep(0.01)


def match_version_ids(expected: str, got: str, ids: dict[str, str], pattern: re.Pattern = VERSION_ID) -> str:
    """`got` (a line the server sent) with its version ids replaced by those at the same places in
    `expected` (a `<--` line), each pair recorded in `ids` (the transcript's id -> the server's), so
    that later `-->` lines send the server's ids; an id seen before must be the same version again.
    `pattern` SNAPSHOT_TOKEN: the same for snapshot tokens."""
    shown, sent = pattern.findall(expected), pattern.findall(got)
    if len(shown) != len(sent):
        return got  # the comparison fails, showing the difference
    for mine, theirs in zip(shown, sent):
        assert ids.setdefault(mine, theirs) == theirs, f"{mine} stands for {ids[mine]}, not {theirs}"
    mapping = dict(zip(sent, shown))
    return pattern.sub(lambda m: mapping.get(m.group(0), m.group(0)), got)


SHARED_LINE = re.compile(r"([a-z]+) (-->|<--) (.*)")


def replay_shared(lines: list[str]) -> None:
    """Runs a transcript of several clients of one daemon (`$ docsession connect`, README §14):
    each line names its client (`alpha --> {...}`, `beta <-- {...}`); every client is a
    `docsession connect` process of its own, started at its first line, all with one fresh runtime
    directory, so the first starts the daemon. Every server message must match a `<--` line of
    its client, in order; the daemon is ended afterwards."""
    import signal
    import tempfile
    runtime = Path(tempfile.mkdtemp(prefix="docsession-protocol-run-"))
    clients: dict[str, RpcClient] = {}
    pending: dict[str, bytes] = {}

    def flush() -> None:
        for name, data in pending.items():
            if data:
                clients[name].send_raw(data)
        pending.clear()

    try:
        for number, line in enumerate(lines, 1):
            where = f"transcript line {number}: {line[:80]}"
            if not line.strip() or line.startswith("#"):
                continue
            if line == "(fixtures)":
                make_fixtures()
                continue
            if m := re.fullmatch(r'\(file (\S+) now holds (".*")\)', line):
                flush()
                change_fixture(m.group(1), json.loads(m.group(2)))
                continue
            m = SHARED_LINE.fullmatch(line)
            assert m, f"{where}: not transcript notation for several clients"
            name, arrow, body = m.groups()
            if name not in clients:
                clients[name] = RpcClient(need_binary(), args=("connect", "--runtime-dir", str(runtime / "run")))
            if arrow == "-->":
                pending[name] = pending.get(name, b"") + frame(body.encode("utf-8"))
                continue
            flush()
            try:
                got = clients[name].take_asynchronous() if is_asynchronous_line(body) else clients[name].read_frame()
            except (TimeoutError, EOFError) as error:
                raise AssertionError(f"{where}: {error}") from None
            validate_server_message(got.message)
            got_text = normalise_volatile_text(normalise_timing(got.body.decode("utf-8")))
            assert got_text == normalise_volatile_text(normalise_timing(body)), where
        flush()
        for name, client in clients.items():
            client.close_input()
            client.wait()
            leftover = client.drain()
            assert leftover == [], f"messages to {name} the transcript does not show: {leftover}"
    finally:
        for client in clients.values():
            client.kill()
        end_daemons(runtime / "run")
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def is_asynchronous_line(text: str) -> bool:
    """Whether a `<--` line shows a notification that comes at no fixed place (README §1)."""
    message = json.loads(text)
    return isinstance(message, dict) and "id" not in message and message.get("method") in ASYNCHRONOUS_NOTIFICATIONS


def replay(lines: list[str]) -> None:
    """Runs one transcript against a fresh server; every server message must match a `<--` line."""
    if lines and lines[0] == "$ docsession connect":
        return replay_shared(lines[1:])
    args: list[str] = []
    if lines and lines[0].startswith("$ docsession"):
        args = lines[0].split()[2:]
        lines = lines[1:]
    with RpcClient(need_binary(), args=tuple(args)) as client:
        pending = b""
        # Where this server keeps versions: --state-dir, else $XDG_STATE_HOME/docsession.
        state = Path(args[args.index("--state-dir") + 1]) if "--state-dir" in args else client.state_home / "docsession"
        version_ids: dict[str, str] = {}

        def with_server_ids(text: str) -> str:
            text = VERSION_ID.sub(lambda m: version_ids.get(m.group(0), m.group(0)), text)
            return SNAPSHOT_TOKEN.sub(lambda m: version_ids.get(m.group(0), m.group(0)), text)

        def flush() -> None:
            nonlocal pending
            if pending:
                # One write, so that messages sent together are read together (cancellation).
                client.send_raw(pending)
                pending = b""

        status: int | None = None
        for number, line in enumerate(lines, 1):
            where = f"transcript line {number}: {line[:80]}"
            if not line.strip() or line.startswith("#"):
                continue
            if line == "(fixtures)":
                make_fixtures()
            elif line == "(initialized)":
                client.initialize({})
                client.notify("initialized")
            elif line.startswith("--> "):
                pending += frame(with_server_ids(line[4:]).encode("utf-8"))
            elif line.startswith("==> "):
                pending += unescape_raw(line[4:])
            elif line.startswith("<-- "):
                flush()
                try:
                    if is_asynchronous_line(line[4:]):
                        # Comes when background work ends, at no fixed place: the next one held.
                        got = client.take_asynchronous()
                    else:
                        got = client.read_frame()
                except (TimeoutError, EOFError) as error:
                    raise AssertionError(f"{where}: {error}") from None
                validate_server_message(got.message)
                got_text = match_version_ids(line[4:], got.body.decode("utf-8"), version_ids)
                got_text = match_version_ids(line[4:], got_text, version_ids, SNAPSHOT_TOKEN)
                got_text = normalise_volatile_text(normalise_timing(got_text))
                assert got_text == normalise_volatile_text(normalise_timing(line[4:])), where
            elif line == "(end of input)":
                flush()
                client.close_input()
            elif m := re.fullmatch(r'\(file (\S+) now holds (".*")\)', line):
                # Written at once, after the `<--` lines before it were read: the server has
                # answered what the transcript sent so far.
                flush()
                change_fixture(m.group(1), json.loads(m.group(2)))
            elif m := re.fullmatch(r"\(file (\S+) deleted\)", line):
                flush()
                delete_fixture(m.group(1))
            elif m := re.fullmatch(r'\(file (\S+) appears holding (".*")\)', line):
                flush()
                create_fixture(m.group(1), json.loads(m.group(2)))
            elif m := re.fullmatch(r"\(file (\S+) moved to (\S+)\)", line):
                flush()
                move_fixture(m.group(1), m.group(2))
            elif m := re.fullmatch(r"\(file (\S+) mode ([0-7]{3,4})\)", line):
                flush()
                chmod_fixture(m.group(1), int(m.group(2), 8))
            elif m := re.fullmatch(r"\(the server has kept (\d+) versions?\)", line):
                flush()
                wait_for_versions(state / "versions", int(m.group(1)))
            elif m := re.fullmatch(r"\(exit status (\d+)\)", line):
                flush()
                status = int(m.group(1))
                assert client.wait() == status, where
            else:
                raise AssertionError(f"{where}: not transcript notation")
        flush()
        if status is None:
            client.close_input()
            client.wait()
        leftover = client.drain()
        assert leftover == [], f"messages the transcript does not show: {leftover}"


@pytest.mark.parametrize("start,lines", transcripts(), ids=[f"README line {start}" for start, _ in transcripts()])
def test_readme_transcript(start: int, lines: list[str]) -> None:
    replay(lines)


def test_readme_has_transcripts() -> None:
    assert len(transcripts()) >= 10
