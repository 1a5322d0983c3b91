"""Test list 7: kill soak. A large document is saved again and again, each time by a fresh server
that gets SIGKILL at a random moment of the save, while a reader process reads the file in a loop.
Every read, and the file after every kill, is one whole version that was saved (compared by hash
with the set of all versions; versions differ on every line, so a mix matches none); the file never
goes missing; the next server's open sweeps the dead one's temp file.

DOCSESSION_SOAK_ROUNDS (default 10: a few seconds), DOCSESSION_SOAK_MB (document size, default 5),
DOCSESSION_SOAK_SEED (the random kill moments; printed on failure). README.md shows a long soak.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from faultkit import sha, temp_files, text, write_file

ROUNDS = int(os.environ.get("DOCSESSION_SOAK_ROUNDS", "10"))
SIZE = int(float(os.environ.get("DOCSESSION_SOAK_MB", "5")) * 1_000_000)
SEED = int(os.environ.get("DOCSESSION_SOAK_SEED") or random.randrange(1 << 32))

READER = r"""
import hashlib, json, os, sys
path, stop = sys.argv[1], sys.argv[2]
seen, errors = {}, []
while not os.path.exists(stop):
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        errors.append(repr(error))
        continue
    digest = hashlib.sha256(data).hexdigest()
    seen[digest] = seen.get(digest, 0) + 1
print(json.dumps({"seen": seen, "errors": errors[:20]}))
"""


def test_kill_soak(sandbox):
    rng = random.Random(SEED)
    where = f"(seed {SEED}; rerun with DOCSESSION_SOAK_SEED={SEED})"
    path = sandbox.docs / "big.txt"
    first = text("v0000", SIZE)
    write_file(path, first)
    saved = {sha(first.encode()): "v0000"}  # every version that may be on disk
    on_disk = sha(first.encode())
    stop = sandbox.root / "stop-reader"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop)], stdout=subprocess.PIPE, text=True)
    outcomes = {"old": 0, "new": 0}
    save_seconds = None
    try:
        for round_number in range(1, ROUNDS + 1):
            version = f"v{round_number:04d}"
            content = text(version, SIZE + round_number * 4096)
            digest = sha(content.encode())
            saved[digest] = version

            server = sandbox.start()
            info = server.open(path)
            assert temp_files(sandbox.docs) == [], f"the open did not sweep {where}"
            server.replace_text(info["document"], info["version"], content)
            started = time.monotonic()
            request_id = server.send_save(info["document"])
            if save_seconds is None:
                # The first round saves without a kill: how long a save takes here.
                response, _ = server.rpc.read_until_response(request_id, timeout=60)
                assert "result" in response, response
                save_seconds = time.monotonic() - started
            else:
                time.sleep(rng.uniform(0, save_seconds))
                os.kill(server.pid, signal.SIGKILL)
                assert server.wait_exit() == -signal.SIGKILL
            server.kill()

            found = sha(path.read_bytes())
            assert found in (on_disk, digest), f"round {round_number}: the file is neither the old nor the new version {where}"
            if round_number > 1:
                outcomes["new" if found == digest else "old"] += 1
            on_disk = found

        # The last kill's temp file goes with the next open.
        sandbox.start().open(path)
        assert temp_files(sandbox.docs) == []
    finally:
        stop.touch()
        output, _ = reader.communicate(timeout=60)
    report = json.loads(output)
    assert report["errors"] == [], f"the reader could not read the file: {report['errors']} {where}"
    unknown = set(report["seen"]) - set(saved)
    assert not unknown, f"the reader saw {len(unknown)} torn or unknown version(s) {where}"
    assert sum(report["seen"].values()) > 0
    print(f"kill soak: {ROUNDS} rounds of {SIZE / 1e6:.0f} MB, save {save_seconds:.3f} s, kills leaving the old "
          f"version {outcomes['old']}, the new {outcomes['new']}; {sum(report['seen'].values())} reads of "
          f"{len(report['seen'])} versions {where}")
