"""The protocol specification's tests: protocol/openrpc.json and protocol/README.md against the server.

(a) openrpc.json is a well-formed OpenRPC 1.3 document whose schemas are valid Draft 7;
(b) every example validates against its method's schemas;
(c) the examples of every request are fixtures: the built server must answer them exactly;
(d) real traffic of a scripted session validates against the document's schemas;
and the README's error-code table and wire transcripts agree with the document and the server.

Run: `python3 -m pytest -q Tests/protocol` (after `swift build`; $DOCSESSION_BIN overrides the binary).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft7Validator

from rpc_client import REPO_ROOT, RpcClient, binary_path, encode, frame

PROTOCOL = REPO_ROOT / "protocol"
DOCUMENT: dict[str, Any] = json.loads((PROTOCOL / "openrpc.json").read_text(encoding="utf-8"))
README = (PROTOCOL / "README.md").read_text(encoding="utf-8")

# The messages this part of the protocol consists of, by direction (the brief of this part).
CLIENT_TO_SERVER = {"initialize", "initialized", "shutdown", "exit", "$/cancelRequest", "$/setTrace"}
SERVER_TO_CLIENT = {"$/logTrace"}

# The named params types in components.schemas, which must say the same as the content descriptors.
PARAMS_TYPES = {
    "initialize": "InitializeParams",
    "$/setTrace": "SetTraceParams",
    "$/cancelRequest": "CancelParams",
    "$/logTrace": "LogTraceParams",
}

TIMING = re.compile(r"Processing request took [0-9.e+-]+ms")


def need_binary() -> Path:
    path = binary_path()
    if not path.is_file():
        pytest.skip(f"server binary {path} is missing: run `swift build` or set DOCSESSION_BIN")
    return path


def normalise_timing(text: str) -> str:
    """Trace messages carry a measured time; everything else in the server's output is deterministic."""
    return TIMING.sub("Processing request took <ms>ms", text)


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
    return [(name, e) for name, e in examples() if not is_notification(method(name))]


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
            assert "result" not in example, "a notification's example has no result"
    else:
        assert "x-notification" not in m or m["x-notification"] is False
        assert "result" in m, "a request has a result"
        assert m.get("examples"), "every request has examples: they are the fixtures of (c)"
        for example in m["examples"]:
            assert "result" in example, "a request's example has a result"
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
        assert m["x-direction"] == "server-to-client" and is_notification(m), message
        assert set(message) <= {"jsonrpc", "method", "params"}, message
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
    with RpcClient(need_binary()) as client:
        if name != "initialize":
            client.initialize({})
            client.notify("initialized")
        params = example_params(example)
        response, before = client.request(name, params) if params else client.request(name)
        for message in before + [response]:
            validate_server_message(message)
        assert "result" in response, f"{name} failed: {response.get('error')}"
        expected = example["result"]["value"]
        assert response["result"] == expected
        # Exactly: the same members in the same order (json.loads keeps the server's order).
        assert encode(response["result"]) == encode(expected)
        validate_result(name, response["result"])
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


def replay(lines: list[str]) -> None:
    """Runs one transcript against a fresh server; every server message must match a `<--` line."""
    args: list[str] = []
    if lines and lines[0].startswith("$ docsession"):
        args = lines[0].split()[2:]
        lines = lines[1:]
    with RpcClient(need_binary(), args=tuple(args)) as client:
        pending = b""

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
            if line == "(initialized)":
                client.initialize({})
                client.notify("initialized")
            elif line.startswith("--> "):
                pending += frame(line[4:].encode("utf-8"))
            elif line.startswith("==> "):
                pending += unescape_raw(line[4:])
            elif line.startswith("<-- "):
                flush()
                try:
                    got = client.read_frame()
                except (TimeoutError, EOFError) as error:
                    raise AssertionError(f"{where}: {error}") from None
                validate_server_message(got.message)
                assert normalise_timing(got.body.decode("utf-8")) == normalise_timing(line[4:]), where
            elif line == "(end of input)":
                flush()
                client.close_input()
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
