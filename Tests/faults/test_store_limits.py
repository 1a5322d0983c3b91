"""Managed stores against hostile SQL (issue 34.1, 34.2), end to end over stdio and the daemon's socket
with the built binary: SQLite's "Defense Against the Dark Arts" item by item (a function allow-list,
virtual table modules allowed by name, FTS3's tokenizer registration off, no file reached), and a
statement that never ends: stopped by `storeOptions.timeLimit`, by `$/cancelRequest`, by its client
going away; answers bounded by `storeOptions.memoryLimit`; other documents served meanwhile.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import base64
import time
from pathlib import Path

import pytest

from faultkit import BIN, DEADLINE, uri, wait_until
from rpc_client import RpcClient

STORE_ERROR = -32029
STATEMENT_REFUSED = -32030
CANCELLED = -32800
INVALID_PARAMS = -32602

TABLE = "CREATE TABLE t(id INTEGER PRIMARY KEY, x)"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
ENDLESS_WRITE = ("INSERT INTO t(x) SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                 "SELECT x FROM c WHERE x > 0)")


def create(server, path: Path, migrations=(TABLE,), **options) -> str:
    info = server.call("document/create", {"uri": uri(path), "kind": "managed",
                                           "storeOptions": {"migrations": list(migrations), **options}})
    return info["document"]


def error(reply) -> dict:
    assert not reply.ok, reply.result
    return reply.error


# -- 34.1: no pointer, no file, no code ---------------------------------------------------------------

def test_the_fts3_tokenizer_attack_is_refused_at_each_step_and_the_server_lives(sandbox):
    """The red team's crash: leak an address with fts3_tokenizer('simple'), register a tokenizer at a
    chosen address with fts3_tokenizer('evil', blob), then a migration makes FTS3 call through it
    (SIGSEGV before the fix)."""
    server = sandbox.start()
    handle = create(server, sandbox.docs / "a.docpackage")
    leak = error(server.request("store/query", {"document": handle, "sql": "SELECT fts3_tokenizer('simple')"}))
    assert leak["code"] == STATEMENT_REFUSED and "fts3_tokenizer" in leak["message"], leak
    assert leak["data"]["kind"] == "refused" and leak["data"]["statement"] == "SELECT fts3_tokenizer('simple')"
    pointer = {"base64": base64.b64encode(struct.pack("<Q", 0x4141414141)).decode()}
    register = error(server.request("store/execute", {"document": handle, "sql": "SELECT fts3_tokenizer('evil', ?)", "params": [pointer]}))
    assert register["code"] == STATEMENT_REFUSED and "fts3_tokenizer" in register["message"], register
    server.call("document/close", {"document": handle})
    # All in one migration: registration and use on the same connection.
    attack = [TABLE, "SELECT fts3_tokenizer('evil', X'4141414141000000'); CREATE VIRTUAL TABLE v USING fts3(content, tokenize=evil)"]
    reply = server.request("document/open", {"uri": uri(sandbox.docs / "a.docpackage"), "kind": "managed", "storeOptions": {"migrations": attack}})
    refused = error(reply)
    assert refused["code"] == STATEMENT_REFUSED and refused["data"]["migration"] == 2 and "fts3_tokenizer" in refused["message"], refused
    assert server.alive()
    # And the server still serves: the store opens with its first migration only.
    info = server.call("document/open", {"uri": uri(sandbox.docs / "a.docpackage"), "kind": "managed", "storeOptions": {"migrations": [TABLE]}})
    assert info["store"]["userVersion"] == 1


@pytest.mark.parametrize("sql, named", [
    ("SELECT load_extension('/tmp/x.so')", "load_extension"),
    ("SELECT fts3_tokenizer('porter')", "fts3_tokenizer"),
    ("SELECT fts5(NULL)", "fts5"),
    ("SELECT sqlite_log(1, 'x')", "sqlite_log"),
    ("SELECT rtreenode(2, X'00')", "rtreenode"),
])
def test_functions_off_the_allow_list_are_refused_naming_them(sandbox, sql, named):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "f.docpackage")
    refused = error(server.request("store/query", {"document": handle, "sql": sql}))
    assert refused["code"] == STATEMENT_REFUSED and f"function {named} is not allowed" in refused["message"], refused


def test_the_built_in_functions_a_store_needs_still_work(sandbox):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "ok.docpackage")
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO t(x) VALUES (json_object('a', 1)), (upper('b')), (abs(-3))"})
    result = server.call("store/query", {"document": handle, "sql":
        "SELECT count(*), group_concat(typeof(x)), json_extract((SELECT x FROM t WHERE id = 1), '$.a'), "
        "round(pi(), 2), date('2026-12-07', '+1 day'), (SELECT x FROM t WHERE id = 1) ->> '$.a', "
        "max(length(hex(randomblob(4)))), printf('%05d', 42) FROM t"})
    assert result["rows"] == [[3, "text,text,integer", 1, 3.14, "2026-12-08", 1, 8, "00042"]], result


def test_virtual_tables_only_of_the_allowed_modules(sandbox):
    server = sandbox.start()
    path = sandbox.docs / "v.docpackage"
    fts = [TABLE, "CREATE VIRTUAL TABLE notes USING fts5(body); INSERT INTO notes(rowid, body) VALUES (1, 'hello crash states')"]
    handle = create(server, path, fts)
    found = server.call("store/query", {"document": handle, "sql": "SELECT rowid, highlight(notes, 0, '[', ']') FROM notes WHERE notes MATCH 'crash'"})
    assert found["rows"] == [[1, "hello [crash] states"]], found
    server.call("document/close", {"document": handle, "save": "never"})
    for module in ("fts3tokenize", "dbstat", "sqlite_stmt", "json_each"):
        other = sandbox.docs / f"{module}.docpackage"
        reply = server.request("document/create", {"uri": uri(other), "kind": "managed", "storeOptions": {
            "migrations": [TABLE, f"CREATE VIRTUAL TABLE x USING {module}(simple)"]}})
        refused = error(reply)
        assert refused["code"] == STATEMENT_REFUSED and f"module {module} is not allowed" in refused["message"], (module, refused)


def hostile_store(path: Path, schema: str) -> None:
    store = path / "StoreContent" / "persistentStore"
    store.parent.mkdir(parents=True)
    connection = sqlite3.connect(store)
    connection.executescript(f"CREATE TABLE t(id INTEGER PRIMARY KEY, x); {schema} PRAGMA user_version = 1;")
    connection.close()


def test_a_hostile_published_store_cannot_call_through_its_schema(sandbox):
    """Stores written by another program whose views and triggers call refused functions: a view that
    calls fts3_tokenizer keeps the store from opening (trusted_schema off: SQLite calls the use unsafe);
    a trigger that calls load_extension refuses the write that fires it. Nothing runs."""
    server = sandbox.start()
    leaking = sandbox.docs / "view.docpackage"
    hostile_store(leaking, "CREATE VIEW leak AS SELECT fts3_tokenizer('simple') AS p;")
    refused = error(server.request("document/open", {"uri": uri(leaking), "kind": "managed", "storeOptions": {"migrations": [TABLE]}}))
    assert refused["code"] == STORE_ERROR and "unsafe use of fts3_tokenizer" in refused["message"], refused
    arming = sandbox.docs / "trigger.docpackage"
    hostile_store(arming, "CREATE TRIGGER arm AFTER INSERT ON t BEGIN SELECT load_extension('/tmp/evil.so'); END;")
    handle = server.call("document/open", {"uri": uri(arming), "kind": "managed", "storeOptions": {"migrations": [TABLE]}})["document"]
    trigger = error(server.request("store/execute", {"document": handle, "sql": "INSERT INTO t(x) VALUES (1)"}))
    assert trigger["code"] == STATEMENT_REFUSED and "load_extension" in trigger["message"], trigger
    assert server.call("store/query", {"document": handle, "sql": "SELECT count(*) FROM t"})["rows"] == [[0]]


# -- 34.2: statements that never end --------------------------------------------------------------------

def answer_of(server, request_id, before: list, timeout: float = DEADLINE) -> dict:
    """The response to `request_id`, whether it came among `before` or later."""
    for message in before:
        if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
            return message
    response, _ = server.rpc.read_until_response(request_id, timeout=timeout)
    return response


def test_an_endless_query_holds_no_other_document(sandbox):
    """Before the fix nothing else was answered until the query ended: never."""
    server = sandbox.start()
    handle = create(server, sandbox.docs / "slow.docpackage", timeLimit=3_600_000)
    server.rpc.send({"jsonrpc": "2.0", "id": "endless", "method": "store/query", "params": {"document": handle, "sql": ENDLESS}})
    # Another document opens, is edited and saved while the statement runs.
    other = sandbox.docs / "other.txt"
    other.write_text("before\n")
    opened, before = server.rpc.request("document/open", {"uri": uri(other)})
    edited, more = server.rpc.request("document/edit", {"document": opened["result"]["document"], "version": 1,
                                                         "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 6}}, "text": "after"}]})
    saved, rest = server.rpc.request("document/save", {"document": opened["result"]["document"]})
    assert "result" in saved and other.read_text() == "after\n", saved
    assert not [m for m in before + more + rest if isinstance(m, dict) and m.get("id") == "endless"]
    server.rpc.notify("$/cancelRequest", {"id": "endless"})
    response = answer_of(server, "endless", [])
    assert response["error"]["code"] == CANCELLED, response


def test_an_endless_query_is_stopped_at_the_time_limit(sandbox):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "slow.docpackage", timeLimit=1500)
    started = time.monotonic()
    reply = server.request("store/query", {"document": handle, "sql": ENDLESS})
    elapsed = time.monotonic() - started
    refused = error(reply)
    assert refused["code"] == STORE_ERROR, refused
    assert refused["data"]["kind"] == "timeLimit" and refused["data"]["limit"] == "storeOptions.timeLimit", refused
    assert "1500 ms" in refused["message"] and elapsed >= 1.5, (refused, elapsed)
    # The document is as it was and serves the next query.
    assert server.call("store/query", {"document": handle, "sql": "SELECT count(*) FROM t"})["rows"] == [[0]]


def test_an_endless_write_is_rolled_back_at_the_time_limit(sandbox):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "w.docpackage", timeLimit=500)
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO t(x) VALUES ('kept')"})
    reply = server.request("store/execute", {"document": handle, "sql": ENDLESS_WRITE, "version": 2})
    assert error(reply)["code"] == STORE_ERROR and reply.error["data"]["kind"] == "timeLimit", reply.error
    state = server.call("document/state", {"document": handle})
    assert state["version"] == 2 and state["canUndo"] is True, state
    assert server.call("store/query", {"document": handle, "sql": "SELECT x FROM t"})["rows"] == [["kept"]]
    # Requests after it, in order: the write asked for with version 2 runs.
    assert server.call("store/execute", {"document": handle, "sql": "INSERT INTO t(x) VALUES ('next')", "version": 2})["version"] == 3


def test_a_cancelled_query_answers_minus_32800_at_once(sandbox):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "c.docpackage", timeLimit=3_600_000)
    server.rpc.send({"jsonrpc": "2.0", "id": 41, "method": "store/query", "params": {"document": handle, "sql": ENDLESS}})
    # Wait until it runs (a request after it on another document is answered), then cancel.
    server.call("workspace/recoverable", {})
    server.rpc.notify("$/cancelRequest", {"id": 41})
    response, _ = server.rpc.read_until_response(41, timeout=DEADLINE)
    assert response["error"]["code"] == CANCELLED, response
    # The document's next request runs (the statement gave its turn back).
    assert server.call("store/query", {"document": handle, "sql": "SELECT 1"})["rows"] == [[1]]


def test_requests_of_the_same_document_wait_for_the_statement_in_order(sandbox):
    """Pipelined: execute (slow, stopped), write entry, state: answered in request order and each sees
    the ones before it."""
    server = sandbox.start()
    handle = create(server, sandbox.docs / "order.docpackage", timeLimit=800)
    rpc = server.rpc
    rpc.send({"jsonrpc": "2.0", "id": 1, "method": "store/execute", "params": {"document": handle, "sql": "INSERT INTO t(x) VALUES (1)", "version": 1}})
    rpc.send({"jsonrpc": "2.0", "id": 2, "method": "store/query", "params": {"document": handle, "sql": ENDLESS}})
    rpc.send({"jsonrpc": "2.0", "id": 3, "method": "document/writeEntry", "params": {"document": handle, "path": "StoreContent/AdditionalContent/a.txt", "text": "a", "version": 2}})
    rpc.send({"jsonrpc": "2.0", "id": 4, "method": "document/state", "params": {"document": handle}})
    answers = {}
    order = []
    while len(answers) < 4:
        message = rpc.read_message(timeout=DEADLINE)
        if isinstance(message, dict) and message.get("id") in (1, 2, 3, 4) and "method" not in message:
            answers[message["id"]] = message
            order.append(message["id"])
    assert order == [1, 2, 3, 4], order
    assert answers[1]["result"]["version"] == 2 and answers[2]["error"]["data"]["kind"] == "timeLimit"
    assert answers[3]["result"]["version"] == 3 and answers[4]["result"]["version"] == 3, answers


def test_answers_and_values_are_bounded_by_the_memory_limit(sandbox):
    server = sandbox.start()
    handle = create(server, sandbox.docs / "m.docpackage", memoryLimit=1 << 20)
    big = error(server.request("store/query", {"document": handle, "sql": "SELECT zeroblob(2000000)"}))
    assert big["code"] == STORE_ERROR and big["data"]["kind"] == "memoryLimit" and big["data"]["limit"] == "storeOptions.memoryLimit", big
    many = error(server.request("store/query", {"document": handle, "sql":
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT printf('%100d', x) FROM c"}))
    assert many["code"] == STORE_ERROR and many["data"]["kind"] == "memoryLimit" and "1048576 bytes" in many["message"], many
    fits = server.call("store/query", {"document": handle, "sql":
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT printf('%100d', x) FROM c"})
    assert len(fits["rows"]) == 1000


@pytest.mark.parametrize("field, value, why", [
    ("timeLimit", 0, "timeLimit"), ("timeLimit", "1s", "timeLimit"), ("memoryLimit", 1024, "memoryLimit"),
    ("memoryLimit", 1 << 31, "memoryLimit"),
])
def test_limits_out_of_range_are_refused_naming_the_field(sandbox, field, value, why):
    server = sandbox.start()
    reply = server.request("document/create", {"uri": uri(sandbox.docs / "bad.docpackage"), "kind": "managed",
                                               "storeOptions": {"migrations": [TABLE], field: value}})
    refused = error(reply)
    assert refused["code"] == INVALID_PARAMS and f"params.storeOptions.{why}" in refused["message"] + str(refused.get("data")), refused
    assert not (sandbox.docs / "bad.docpackage").exists()


def test_daemon_clients_that_leave_endless_queries_do_not_hold_the_server(tmp_path):
    """Twelve clients each start a query that would run an hour and disconnect; before the fix each held
    one of the pool's eight threads for ever and no one could open a file."""
    runtime_dir = tmp_path / "run"
    state = tmp_path / "state"
    state.mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    clients: list[RpcClient] = []

    def connect() -> RpcClient:
        client = RpcClient(BIN, args=("connect", "--runtime-dir", str(runtime_dir), "--state-dir", str(state)), timeout=DEADLINE)
        clients.append(client)
        client.initialize({"processId": os.getpid()})
        return client

    try:
        for index in range(12):
            client = connect()
            handle = client.call("document/create", {"uri": uri(docs / f"q{index}.docpackage"), "kind": "managed",
                                                     "storeOptions": {"migrations": [TABLE], "timeLimit": 3_600_000}})["document"]
            client.send({"jsonrpc": "2.0", "id": "endless", "method": "store/query", "params": {"document": handle, "sql": ENDLESS}})
            client.call("workspace/recoverable", {})  # the query has started
            client.close_input()
            client.wait()
        user = connect()
        path = docs / "note.txt"
        path.write_text("one\n")
        opened = user.call("document/open", {"uri": uri(path)})
        user.call("document/edit", {"document": opened["document"], "version": 1,
                                    "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}, "text": "two"}]})
        user.call("document/save", {"document": opened["document"]})
        assert path.read_text() == "two\n"
        user.call("shutdown")
        user.notify("exit")
    finally:
        for client in clients:
            client.kill()
        from test_daemon import daemons_on, alive
        import signal
        for pid in daemons_on(runtime_dir):
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not alive(pid), what=f"daemon {pid} to die")


def test_an_undo_waiting_for_a_long_query_of_its_document_holds_no_other_document(sandbox):
    """Undo, revert, close... of a managed document wait for its store calls in its line, off the
    queue: before, they waited in the queue and every other document waited with them."""
    server = sandbox.start()
    handle = create(server, sandbox.docs / "u.docpackage", timeLimit=3_600_000)
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO t(x) VALUES (1)"})
    rpc = server.rpc
    rpc.send({"jsonrpc": "2.0", "id": "q", "method": "store/query", "params": {"document": handle, "sql": ENDLESS}})
    rpc.send({"jsonrpc": "2.0", "id": "u", "method": "document/undo", "params": {"document": handle, "version": 2}})
    rpc.send({"jsonrpc": "2.0", "id": "s", "method": "document/state", "params": {"document": handle}})
    other = sandbox.docs / "other.txt"
    other.write_text("text\n")
    opened, before = rpc.request("document/open", {"uri": uri(other)})
    assert "result" in opened, opened
    early = [m.get("id") for m in before if isinstance(m, dict) and "method" not in m]
    assert early == [], early
    rpc.notify("$/cancelRequest", {"id": "q"})
    answers = {}
    order = []
    while len(answers) < 3:
        message = rpc.read_message(timeout=DEADLINE)
        if isinstance(message, dict) and message.get("id") in ("q", "u", "s") and "method" not in message:
            answers[message["id"]] = message
            order.append(message["id"])
    assert order == ["q", "u", "s"], order
    assert answers["q"]["error"]["code"] == CANCELLED
    assert answers["u"]["result"]["version"] == 3 and answers["u"]["result"]["store"] is True, answers["u"]
    assert answers["s"]["result"]["version"] == 3 and answers["s"]["result"]["canUndo"] is False, answers["s"]
    assert server.call("store/query", {"document": handle, "sql": "SELECT count(*) FROM t"})["rows"] == [[0]]
