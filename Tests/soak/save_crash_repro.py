#!/usr/bin/env python3
"""Reproduces the load soak's finding 1 (Tests/soak/README.md): with autosave on, a `document/save` that
finds another save of its document running can crash the server in `DocumentStore.acquire(_:)`
(a force-unwrap of the document's lock after the lock was released again).

One document, autosave after 1 ms, N pipelined `document/edit` requests with a `document/save` after
every K-th. Prints the server's exit status (-4: SIGILL, the crash) and the first line of its stderr;
exits 1 when the server crashed. It crashed in 4 of 8 runs with the defaults on the 2-core VM (it is a
race: run it a few times).

    DOCSESSION_BIN=.build/debug/docsession python3 Tests/soak/save_crash_repro.py [--edits 3000] [--every 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_soak import Connection, Failures, ServerGone  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=3000)
    parser.add_argument("--every", type=int, default=5, help="a save after every this many edits")
    parser.add_argument("--delay", type=int, default=1, help="the autosave delay, ms")
    args = parser.parse_args()
    binary = os.environ.get("DOCSESSION_BIN")
    if not binary:
        print("set DOCSESSION_BIN", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="docsession-save-crash-", dir="/var/tmp")
    path = os.path.join(root, "a.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write("hello\n" * 100)
    with open(os.path.join(root, "stderr"), "wb") as stderr:
        server = subprocess.Popen([binary, "--state-dir", os.path.join(root, "state")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    conn = Connection(server, lambda message: None, Failures())

    def call(method: str, params: dict):
        box = []
        conn.request(method, json.dumps(params), box.append)
        while not box:
            conn.pump(0.2)
        return box[0]

    call("initialize", {"initializationOptions": {"autosave": {"policy": "afterDelay", "delay": args.delay}}})
    handle = call("document/open", {"uri": "file://" + path, "includeText": False})["result"]["document"]
    version = 1
    for i in range(args.edits):
        conn.request("document/edit", json.dumps({"document": handle, "version": version, "edits": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]}),
            lambda message: None)
        version += 1
        if i % args.every == 0:
            conn.request("document/save", json.dumps({"document": handle}), lambda message: None)
        conn.pump(0)
    deadline = time.monotonic() + 60
    try:
        while conn.pending and time.monotonic() < deadline and server.poll() is None and not conn.closed:
            conn.pump(0.2)
    except ServerGone:
        pass
    if server.poll() is None and not conn.pending:
        call("shutdown", {})
        conn.notify("exit", "null")
        conn.pump(0.2)
    status = server.wait(timeout=60)
    with open(os.path.join(root, "stderr"), encoding="utf-8", errors="replace") as stderr:
        first = stderr.readline().strip()
    print(f"server exit status {status}; {len(conn.pending)} requests unanswered; stderr: {first or '(empty)'}")
    print(f"files in {root}")
    return 1 if status not in (0, None) else 0


if __name__ == "__main__":
    raise SystemExit(main())
