"""Managed documents (issue 18.2-18.5, UIManagedDocument's role), end to end over stdio with the built
binary: a package holding a SQLite store at `StoreContent/persistentStore` and additional content
under `StoreContent/AdditionalContent/`. Migrations tracked by `PRAGMA user_version`; `store/execute`
in one transaction per request, each an undoable step (the session extension's changesets);
`store/query` answers typed rows; a save publishes the store and the additional content together,
with no `-wal` or `-shm` beside the published store; hostile SQL is refused.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sqlite3
from pathlib import Path

from faultkit import uri, wait_until
from test_packages import PACKAGE_SYSCALLS, error_of, kill_points, siblings, tree

STORE_ERROR = -32029
STATEMENT_REFUSED = -32030
WRONG_KIND = -32031
INVALID_PARAMS = -32602
CHANGED_ON_DISK = -32017

MIGRATIONS = [
    "CREATE TABLE notes(id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, body TEXT, score REAL, data BLOB)",
    "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
    "CREATE TABLE tags(note INTEGER NOT NULL REFERENCES notes(id), tag TEXT NOT NULL, PRIMARY KEY(note, tag))",
]


def store_path(package: Path) -> Path:
    return package / "StoreContent" / "persistentStore"


def rows(server, handle: str, sql: str = "SELECT id, title, body, score, pinned FROM notes ORDER BY id", params=None) -> list:
    return server.call("store/query", {"document": handle, "sql": sql, **({"params": params} if params is not None else {})})["rows"]


def create(server, package: Path, migrations=MIGRATIONS) -> dict:
    return server.call("document/create", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": migrations}})


def published_rows(package: Path) -> list:
    with sqlite3.connect(f"file:{store_path(package)}?mode=ro", uri=True) as connection:
        return connection.execute("SELECT id, title, body, score, pinned FROM notes ORDER BY id").fetchall()


def test_a_managed_document_is_created_migrated_edited_undone_and_saved_without_wal_files(sandbox):
    package = sandbox.docs / "library.docpackage"
    server = sandbox.start()
    info = create(server, package, MIGRATIONS[:1])
    assert info["kind"] == "managed" and info["store"] == {"userVersion": 1, "migrated": {"from": 0, "to": 1}, "readOnly": False}, info
    handle = info["document"]
    assert store_path(package).is_file() and sorted(os.listdir(package / "StoreContent")) == ["persistentStore"]
    server.call("document/close", {"document": handle})

    # Reopened with the chain 1 to 3: the two missing migrations run, each in its own transaction.
    info = server.call("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": MIGRATIONS}})
    assert info["store"] == {"userVersion": 3, "migrated": {"from": 1, "to": 3}, "readOnly": False}, info
    handle = info["document"]
    # The migrations ran in the working copy: unsaved until the next save (a close saves them).
    assert info["hasUnsavedChanges"] is True and info["canUndo"] is False

    first = server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title, body, score, data) VALUES (?, ?, ?, ?)",
                                          "params": ["one", "first body", 1.5, {"base64": base64.b64encode(b"\x00\x01").decode()}]})
    assert first["changes"] == 1 and first["lastInsertRowid"] == 1 and first["undoable"] is True and first["version"] == 2
    second = server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES (:title); UPDATE notes SET pinned = 1 WHERE id = 1",
                                           "params": {"title": "two"}, "version": 2})
    assert second["version"] == 3 and second["changes"] == 2, second  # rows changed by the whole request
    assert rows(server, handle) == [[1, "one", "first body", 1.5, 1], [2, "two", None, None, 0]]
    typed = server.call("store/query", {"document": handle, "sql": "SELECT data, typeof(score) FROM notes WHERE id = ?", "params": [1]})
    assert typed == {"columns": ["data", "typeof(score)"], "rows": [[{"base64": "AAE="}, "real"]]}

    update = server.call("store/execute", {"document": handle, "sql": "UPDATE notes SET body = 'edited' WHERE id = 2"})
    delete = server.call("store/execute", {"document": handle, "sql": "DELETE FROM notes WHERE id = 1"})
    assert (update["version"], delete["version"]) == (4, 5)
    assert rows(server, handle) == [[2, "two", "edited", None, 0]]

    # Undo and redo walk the changesets back and forth.
    assert server.call("document/undo", {"document": handle})["store"] is True
    assert rows(server, handle) == [[1, "one", "first body", 1.5, 1], [2, "two", "edited", None, 0]]
    server.call("document/undo", {"document": handle})
    assert rows(server, handle) == [[1, "one", "first body", 1.5, 1], [2, "two", None, None, 0]]
    server.call("document/undo", {"document": handle})
    assert rows(server, handle) == [[1, "one", "first body", 1.5, 0]]
    server.call("document/redo", {"document": handle})
    server.call("document/redo", {"document": handle})
    assert rows(server, handle) == [[1, "one", "first body", 1.5, 1], [2, "two", "edited", None, 0]]

    # A statement refused by a constraint: SQLite's code, message and statement; nothing changed.
    before = server.call("document/state", {"document": handle})
    error = error_of(server.request("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('three'); INSERT INTO notes(title) VALUES ('one')"}))
    assert error["code"] == STORE_ERROR and error["data"]["codeName"] == "SQLITE_CONSTRAINT_UNIQUE", error
    assert error["data"]["code"] == 2067 and "UNIQUE" in error["data"]["message"], error
    assert "'one'" in error["data"]["statement"], error
    assert rows(server, handle, "SELECT count(*) FROM notes") == [[2]], "the first statement of the failed request was rolled back"
    after = server.call("document/state", {"document": handle})
    assert (after["version"], after["canRedo"]) == (before["version"], before["canRedo"])

    # Additional content is written through the entry methods and saved with the store.
    server.call("document/writeEntry", {"document": handle, "path": "StoreContent/AdditionalContent/cover.txt", "text": "cover\n"})
    assert error_of(server.request("document/writeEntry", {"document": handle, "path": "StoreContent/persistentStore", "text": "x"}))["data"]["reason"] == "reserved"
    with sqlite3.connect(f"file:{store_path(package)}?mode=ro", uri=True) as connection:
        # Nothing is published before the save: not the rows, not the migrations of this open.
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        assert connection.execute("SELECT count(*) FROM notes").fetchone() == (0,)
    saved = server.save(handle).result
    assert saved["method"] == "exchange", saved
    assert sorted(os.listdir(package / "StoreContent")) == ["AdditionalContent", "persistentStore"], "no -wal, -shm or -journal"
    header = store_path(package).read_bytes()[:100]
    assert header[18] == 1 and header[19] == 1, "the published store is not in WAL mode"
    assert published_rows(package) == [(1, "one", "first body", 1.5, 1), (2, "two", "edited", None, 0)]
    assert (package / "StoreContent" / "AdditionalContent" / "cover.txt").read_text() == "cover\n"
    wait_until(lambda: siblings(package) == [], what="the old tree's removal")


def test_a_failing_migration_answers_which_and_why_and_leaves_the_store_as_it_was(sandbox):
    package = sandbox.docs / "library.docpackage"
    server = sandbox.start()
    handle = create(server, package, MIGRATIONS[:2])["document"]
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('kept')"})
    server.save(handle)
    server.call("document/close", {"document": handle})
    published = store_path(package).read_bytes()

    broken = MIGRATIONS[:2] + ["CREATE TABLE extra(id INTEGER PRIMARY KEY); INSERT INTO missing VALUES (1)"]
    error = error_of(server.request("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": broken}}))
    assert error["code"] == STORE_ERROR and error["data"]["migration"] == 3, error
    assert "missing" in error["data"]["message"], error
    assert store_path(package).read_bytes() == published, "the published store is untouched"
    info = server.call("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"migrations": MIGRATIONS[:2]}})
    assert info["store"]["userVersion"] == 2
    assert rows(server, info["document"], "SELECT name FROM sqlite_master WHERE name = 'extra'") == []
    assert rows(server, info["document"], "SELECT title FROM notes") == [["kept"]]


def test_hostile_sql_is_refused_and_changes_nothing(sandbox):
    package = sandbox.docs / "library.docpackage"
    outside = sandbox.root / "outside.db"
    server = sandbox.start()
    handle = create(server, package)["document"]
    hostile = [
        f"ATTACH DATABASE '{outside}' AS other",
        "SELECT load_extension('/tmp/evil.so')",
        f"VACUUM INTO '{outside}'",
        "PRAGMA writable_schema = 1",
        "CREATE TABLE sneaky(x)",
        "DROP TABLE notes",
        "BEGIN; DELETE FROM notes; COMMIT",
    ]
    for sql in hostile:
        error = error_of(server.request("store/execute", {"document": handle, "sql": sql}))
        assert error["code"] in (STATEMENT_REFUSED, STORE_ERROR), (sql, error)
        assert error["data"].get("statement"), (sql, error)
    for sql in hostile[:3]:
        error = error_of(server.request("store/query", {"document": handle, "sql": sql}))
        assert error["code"] in (STATEMENT_REFUSED, STORE_ERROR), (sql, error)
    assert not outside.exists()
    assert server.call("document/state", {"document": handle})["version"] == 1
    assert rows(server, handle, "SELECT count(*) FROM sqlite_master WHERE name = 'sneaky'") == [[0]]
    # Store methods on a plain package or a text document are the wrong kind.
    text = sandbox.docs / "t.txt"
    text.write_text("x\n")
    error = error_of(server.request("store/query", {"document": server.open(text)["document"], "sql": "SELECT 1"}))
    assert error["code"] == WRONG_KIND, error
    plain = server.call("document/create", {"uri": uri(sandbox.docs / "p.textbundle"), "kind": "package"})["document"]
    assert error_of(server.request("store/query", {"document": plain, "sql": "SELECT 1"}))["code"] == WRONG_KIND


def saved_then_changed(sandbox):
    """A managed document whose store holds 'saved', saved, and 'unsaved' since: (package, server, handle)."""
    package = sandbox.docs / "library.docpackage"
    server = sandbox.start()
    handle = create(server, package)["document"]
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('saved')"})
    server.save(handle)
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('unsaved')"})
    return package, server, handle


def test_an_external_rewrite_of_the_store_with_unsaved_changes_is_a_conflict(sandbox):
    package, server, handle = saved_then_changed(sandbox)

    # Another program rewrites the published store (as a sync tool would: a new file renamed in).
    replacement = package / "StoreContent" / ".incoming"
    shutil.copy(store_path(package), replacement)
    with sqlite3.connect(replacement) as connection:
        connection.execute("INSERT INTO notes(title) VALUES ('theirs')")
    os.replace(replacement, store_path(package))

    wait_until(lambda: "inConflict" in server.call("document/state", {"document": handle})["state"], what="the conflict")
    assert [r[0] for r in rows(server, handle, "SELECT title FROM notes ORDER BY id")] == ["saved", "unsaved"], "mine are kept"
    # Their store is kept as a conflict version, a copy a client can read. The conflict may be
    # found at the temporary file, before the store is renamed in: the copy comes with the store.
    versions = wait_until(lambda: server.call("document/versions", {"document": handle})["versions"], what="the conflict copy")
    assert [v["kind"] for v in versions] == ["conflict"] and versions[0]["size"] > 0, versions
    with sqlite3.connect(f"file:{versions[0]['uri'][len('file://'):]}?mode=ro", uri=True) as kept:
        assert [r[0] for r in kept.execute("SELECT title FROM notes ORDER BY id")] == ["saved", "theirs"]
    assert error_of(server.save(handle))["code"] == CHANGED_ON_DISK
    resolved = server.call("document/resolveConflict", {"document": handle, "resolution": "theirs"})
    assert resolved["hasUnsavedChanges"] is False and resolved["state"] == []
    assert [r[0] for r in rows(server, handle, "SELECT title FROM notes ORDER BY id")] == ["saved", "theirs"]


def test_a_conflict_found_at_a_temporary_file_copies_their_store_when_it_is_renamed_in(sandbox):
    """The conflict is found when the other program's temporary file appears; the store it renames
    in later is what the conflict copy holds (one copy, not one of the unchanged store)."""
    package, server, handle = saved_then_changed(sandbox)

    replacement = package / "StoreContent" / ".incoming"
    shutil.copy(store_path(package), replacement)
    wait_until(lambda: "inConflict" in server.call("document/state", {"document": handle})["state"], what="the conflict")
    assert server.call("document/versions", {"document": handle})["versions"] == [], "their store has not changed yet"
    connection = sqlite3.connect(replacement)
    connection.execute("INSERT INTO notes(title) VALUES ('theirs')")
    connection.commit()
    connection.close()
    os.replace(replacement, store_path(package))

    versions = wait_until(lambda: server.call("document/versions", {"document": handle})["versions"], what="the conflict copy")
    assert [v["kind"] for v in versions] == ["conflict"], versions
    with sqlite3.connect(f"file:{versions[0]['uri'][len('file://'):]}?mode=ro", uri=True) as kept:
        assert [r[0] for r in kept.execute("SELECT title FROM notes ORDER BY id")] == ["saved", "theirs"]
    server.call("document/resolveConflict", {"document": handle, "resolution": "theirs"})
    assert [r[0] for r in rows(server, handle, "SELECT title FROM notes ORDER BY id")] == ["saved", "theirs"]


def test_sigkill_at_each_system_call_of_a_managed_save_leaves_the_old_or_the_new_document_whole(sandbox):
    def prepare():
        package = sandbox.docs / "library.docpackage"
        if package.exists():
            shutil.rmtree(package)
        setup = sandbox.start()
        handle = create(setup, package)["document"]
        setup.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('old')"})
        setup.call("document/writeEntry", {"document": handle, "path": "StoreContent/AdditionalContent/a.txt", "text": "old\n"})
        setup.save(handle)
        setup.shutdown()
        server = sandbox.start()
        handle = server.call("document/open", {"uri": uri(package), "kind": "managed"})["document"]
        server.call("store/execute", {"document": handle, "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) "
                                                                 "INSERT INTO notes(title) SELECT 'new ' || i FROM n"})
        server.call("document/writeEntry", {"document": handle, "path": "StoreContent/AdditionalContent/a.txt", "text": "new\n"})
        return server, handle, package

    def check_whole(package: Path, point) -> str:
        entries = tree(package)
        assert not any(name.endswith(("-wal", "-shm", "-journal")) for name in entries), (point, sorted(entries))
        titles = [row[1] for row in published_rows(package)]
        additional = entries["StoreContent/AdditionalContent/a.txt"]
        if titles == ["old"]:
            assert additional == b"old\n", point
            return "old"
        assert len(titles) == 501 and additional == b"new\n", (point, len(titles), additional)
        return "new"

    kill_points(sandbox, prepare, check_whole)


def test_a_read_only_store_answers_queries_and_refuses_writes(sandbox):
    package = sandbox.docs / "library.docpackage"
    server = sandbox.start()
    handle = create(server, package)["document"]
    server.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('kept')"})
    server.save(handle)
    server.call("document/close", {"document": handle})
    info = server.call("document/open", {"uri": uri(package), "kind": "managed", "storeOptions": {"readOnly": True}})
    assert info["store"]["readOnly"] is True, info
    handle = info["document"]
    assert rows(server, handle, "SELECT title FROM notes") == [["kept"]]
    error = error_of(server.request("store/execute", {"document": handle, "sql": "DELETE FROM notes"}))
    assert error["code"] == STATEMENT_REFUSED and error["data"]["kind"] == "readOnly", error
    assert rows(server, handle, "SELECT title FROM notes") == [["kept"]]
    assert server.call("document/state", {"document": handle})["version"] == 1


def test_working_copies_are_made_only_for_managed_documents_and_a_dead_servers_are_swept(sandbox):
    # The working copies go under <state dir>/managed/server-XXXXXX/: nothing for a server that
    # opens no managed document; a killed server's directory is swept by the next one that opens one.
    state = sandbox.root / "state"
    arguments = ("serve", "--no-journal", "--state-dir", str(state))
    working = state / "managed"
    text = sandbox.docs / "plain.txt"
    text.write_text("text\n")
    plain = sandbox.start(args=arguments)
    plain.open(text)
    assert not working.exists(), "a server with no managed document makes no working directory"
    plain.shutdown()

    package = sandbox.docs / "library.docpackage"
    killed = sandbox.start(args=arguments)
    handle = create(killed, package)["document"]
    killed.call("store/execute", {"document": handle, "sql": "INSERT INTO notes(title) VALUES ('unsaved')"})
    (left,) = list(working.iterdir())
    assert left.name.startswith("server-") and "lock" in os.listdir(left), os.listdir(left)
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.wait_exit() == -signal.SIGKILL
    assert left.exists()

    second = sandbox.start(args=arguments)
    info = second.call("document/open", {"uri": uri(package), "kind": "managed"})
    assert rows(second, info["document"], "SELECT title FROM notes") == [], "unsaved changes of a managed document die with its server"
    (own,) = list(working.iterdir())
    assert own != left, "the dead server's directory was swept"
    second.shutdown()
    assert list(working.iterdir()) == []
