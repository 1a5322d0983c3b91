#!/usr/bin/env python3
"""Saving a managed document of 100,000 rows, as a ratio to SQLite's own backup API (issue 18.5).

The server: a managed document (README §13) whose store holds `t(id INTEGER PRIMARY KEY, name TEXT,
n REAL)` with 100,000 rows of about 60 bytes (a 6 MB database); each round changes one row
(`store/execute`) and times `document/save` over stdio, request to response: the working copy
published with the backup API into a staged copy of the package, every file and directory flushed,
swapped in with `renameat2(RENAME_EXCHANGE)`, the parent flushed, the old tree removed.

The floor, in the same run, alternating with the server's rounds: what any correct publication of
that store needs, done with SQLite's own backup API from Python's sqlite3 module (which calls
`sqlite3_backup_init/step/finish`): a WAL-mode copy of the same store is backed up into a new file
beside the destination (no journal, no syncs of SQLite's own: the file is new), set back to a
rollback journal, flushed, renamed over the destination, and the directory flushed.

Prints each round, then `table|` lines (median, the spread of the rounds, goal, verdict) for
scripts/bench. Run: `python3 Benchmarks/managed_save.py --server .build/release/docsession`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

from docsession_client import Client  # noqa: E402

ROWS = 100_000
GOAL = 1.3


def floor_publish(source: sqlite3.Connection, destination: Path) -> float:
    """SQLite's backup API into a new file, flushed, renamed over `destination`, directory flushed."""
    started = time.perf_counter()
    temporary = destination.with_name(destination.name + ".tmp")
    target = sqlite3.connect(temporary)
    # The cheapest correct way to SQLite: the new file needs no journal of its own and is flushed
    # once, below, before it is renamed in (the server's publish does the same).
    target.execute("PRAGMA journal_mode=OFF")
    target.execute("PRAGMA synchronous=OFF")
    source.backup(target)
    # The copy of a WAL store says WAL in its header (bytes 18 and 19): back to a rollback journal.
    target.execute("PRAGMA journal_mode=DELETE")
    target.close()
    descriptor = os.open(temporary, os.O_RDONLY)
    os.fsync(descriptor)
    os.close(descriptor)
    os.rename(temporary, destination)
    directory = os.open(destination.parent, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(directory)
    os.close(directory)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="the docsession binary (release)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--directory", default=None, help="where the documents go (default: a temp dir under /tmp)")
    arguments = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="docsession-managed-bench-", dir=arguments.directory))
    try:
        client = Client(["--state-dir", str(root / "state")], binary=arguments.server)
        client.initialize()
        package = root / "library.docpackage"
        document = client.create_managed(package, ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n REAL)"])
        document.execute(
            "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
            "INSERT INTO t(name, n) SELECT printf('row %06d of the managed store benchmark, padded', i), i * 0.5 FROM k",
            [ROWS], timeout=300)
        document.save(timeout=300)
        published = package / "StoreContent" / "persistentStore"
        size = published.stat().st_size

        # The floor's source: the same store, in WAL mode as the server's working copy is.
        floor_dir = root / "floor"
        floor_dir.mkdir()
        shutil.copy(published, floor_dir / "working.sqlite")
        source = sqlite3.connect(floor_dir / "working.sqlite")
        source.execute("PRAGMA journal_mode=WAL")
        floor_destination = floor_dir / "persistentStore"
        floor_publish(source, floor_destination)  # warm-up of each side
        document.execute("UPDATE t SET n = n + 1 WHERE id = 1")
        document.save()

        ratios, saves, floors = [], [], []
        for round_number in range(1, arguments.rounds + 1):
            document.execute("UPDATE t SET n = n + 1 WHERE id = ?", [round_number])
            source.execute("UPDATE t SET n = n + 1 WHERE id = ?", (round_number,))
            source.commit()
            # The floor reads a checkpointed store (the pages in the database file, not the WAL's),
            # untimed: the strongest floor.
            source.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            started = time.perf_counter()
            result = document.save(timeout=300)
            save = time.perf_counter() - started
            floor = floor_publish(source, floor_destination)
            ratios.append(save / floor)
            saves.append(save)
            floors.append(floor)
            print(f"round {round_number}: save {save * 1000:.1f} ms ({result['method']}), floor {floor * 1000:.1f} ms, ratio {save / floor:.3f}")
        assert sorted(os.listdir(package / "StoreContent")) == ["persistentStore"], "no -wal or -shm beside the published store"
        client.shutdown()

        median = statistics.median(ratios)
        print(f"store: {ROWS} rows, {size} bytes; save median {statistics.median(saves) * 1000:.1f} ms "
              f"(worst {max(saves) * 1000:.1f}), floor median {statistics.median(floors) * 1000:.1f} ms (worst {max(floors) * 1000:.1f})")
        print(f"table| managed save of {ROWS:,} rows ({size / 1e6:.1f} MB) / SQLite backup API + flush + rename | "
              f"{median:.3f} | {min(ratios):.3f}-{max(ratios):.3f} | <= {GOAL} | {'met' if median <= GOAL else 'MISSED'}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
