#!/usr/bin/env python3
"""`workspace/query` of a large folder (issue 20's figure left open): 10,000 files in 100
directories of a synced folder (a Syncthing marker, 1% of the files with a conflict copy beside
them), listed once, against a C floor in the same run.

- **Ours:** one `workspace/query` request (`root` the folder, recursive) over stdio to the release
  server, from send to the answer's last byte read (parsed after the clock stops): every file's
  name, size, time, document kind, open state, sync tool and conflict count.
- **Floor:** `find ROOT -type f -printf '%s %T@ %p\\n'`, which reads every directory and stats every
  file (the system calls any listing of the folder makes), its output read by this process through
  a pipe as ours is; one process start included (about 1 ms).

The rounds alternate (ours, floor, floor, ours, ...), the first of each discarded (a warm-up: the
kernel's caches). Reported: the median of the per-round ratios, their spread, and the worst round's
time of each. Prints the figures, then `table|` lines for scripts/bench. Run:
`python3 Benchmarks/query.py --server .build/release/docsession`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def frame(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Server:
    def __init__(self, binary: str, state: Path) -> None:
        self.process = subprocess.Popen(
            [binary, "serve", "--state-dir", str(state), "--no-journal"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 1

    def read(self) -> dict:
        return json.loads(self.read_frame())

    def read_frame(self) -> bytes:
        length = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return self.process.stdout.read(length)

    def timed_call(self, method: str, params: dict) -> tuple[float, dict]:
        """The request's time from send to its answer's last byte read (parsed after the clock
        stops: the client's JSON parsing is not the server's time), and the answer's result."""
        request_id = self.next_id
        self.next_id += 1
        start = time.perf_counter()
        self.process.stdin.write(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        self.process.stdin.flush()
        frames = []
        while True:
            body = self.read_frame()
            if b'"id":%d' % request_id in body:
                elapsed = time.perf_counter() - start
                message = json.loads(body)
                if message.get("id") == request_id and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return elapsed, message["result"]
            frames.append(body)

    def call(self, method: str, params: dict) -> dict:
        request_id = self.next_id
        self.next_id += 1
        self.process.stdin.write(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        self.process.stdin.flush()
        while True:
            message = self.read()
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def close(self) -> None:
        try:
            self.call("shutdown", {})
            self.process.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
            self.process.stdin.close()
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()


def make_folder(root: Path, directories: int, per_directory: int) -> int:
    """The synced folder: `directories` x `per_directory` text files of about 1 KB, a Syncthing
    marker, and a conflict copy beside every hundredth file. Answers the number of files."""
    (root / ".stfolder").mkdir(parents=True)
    line = "A line of a note in a synced folder, long enough to look like prose.\n"
    count = 0
    for d in range(directories):
        directory = root / f"folder {d:03}"
        directory.mkdir()
        for f in range(per_directory):
            (directory / f"note {f:03}.md").write_text(f"# Note {d}-{f}\n" + line * 14)
            count += 1
            if f % 100 == 0:
                copy = directory / f"note {f:03}.sync-conflict-20261128-101500-ABCDEFG.md"
                copy.write_text(f"# Note {d}-{f}, theirs\n" + line * 14)
                count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=".build/release/docsession")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--directories", type=int, default=100)
    parser.add_argument("--files", type=int, default=100, help="files per directory")
    parser.add_argument("--dir", default="/var/tmp", help="where the folder goes (disk-backed)")
    args = parser.parse_args()

    place = Path(tempfile.mkdtemp(prefix="docsession-query-bench-", dir=args.dir))
    try:
        root = place / "Synced"
        files = make_folder(root, args.directories, args.files)
        server = Server(args.server, place / "state")
        try:
            server.call("initialize", {"processId": None, "capabilities": {}})
            server.process.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            params = {"root": "file://" + str(root)}

            def ours() -> float:
                elapsed, result = server.timed_call("workspace/query", params)
                listed = result["files"]
                if len(listed) != files:
                    raise RuntimeError(f"the query listed {len(listed)} files, {files} expected")
                if not all(f.get("syncTool") == "syncthing" for f in listed[:5]):
                    raise RuntimeError(f"no sync tool named: {listed[0]}")
                return elapsed

            def floor() -> float:
                start = time.perf_counter()
                out = subprocess.run(["find", str(root), "-type", "f", "-printf", "%s %T@ %p\\n"],
                                     stdout=subprocess.PIPE, check=True).stdout
                elapsed = time.perf_counter() - start
                # The marker directory holds no file: every line is a listed file.
                lines = out.count(b"\n")
                if lines != files:
                    raise RuntimeError(f"find listed {lines} files, {files} expected")
                return elapsed

            ours_times: list[float] = []
            floor_times: list[float] = []
            for round_ in range(args.rounds + 1):
                pair = (ours(), floor()) if round_ % 2 == 0 else tuple(reversed((floor(), ours())))
                if round_ == 0:
                    continue  # the warm-up
                ours_times.append(pair[0])
                floor_times.append(pair[1])
        finally:
            server.close()
    finally:
        shutil.rmtree(place, ignore_errors=True)

    ratios = [o / f for o, f in zip(ours_times, floor_times)]
    median = statistics.median(ratios)
    ms = lambda values: f"{statistics.median(values) * 1e3:.1f} ms (worst {max(values) * 1e3:.1f} ms)"
    print(f"workspace/query of {files} files in {args.directories} directories, {args.rounds} rounds after a warm-up:")
    print(f"  ours  {ms(ours_times)}")
    print(f"  find  {ms(floor_times)}")
    print(f"  ours / find: median {median:.2f}, rounds {min(ratios):.2f}-{max(ratios):.2f}")
    print(f"table| workspace/query of {files} files / find -printf of them (worst: ours, find) | {median:.2f} | "
          f"{min(ratios):.2f}-{max(ratios):.2f}; worst {max(ours_times) * 1e3:.0f} ms, {max(floor_times) * 1e3:.0f} ms | - | -")


if __name__ == "__main__":
    main()
