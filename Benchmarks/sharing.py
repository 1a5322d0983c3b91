#!/usr/bin/env python3
"""Several clients on one daemon (issue 19.5): an edit's fan-out to 8 clients, and 8 clients
pipelining edits on 8 documents against 1 client.

The daemon is started directly (`docsession daemon --runtime-dir R --state-dir S`) and every client
is a raw Unix-socket connection of this process (no `connect` bridge in the measured path; the
bridge copies bytes and adds the same to every figure).

1. **Fan-out.** One writer and 8 listeners hold one document. The writer sends one edit at a time
   (a one-character insertion at the end, waiting for its answer); a thread per listener notes when
   each `document/didChange` arrives. An edit's fan-out time: from the moment the writer sent it to
   the moment the last of the 8 listeners has its `didChange`. Beside it, in the same run and
   alternating edit by edit, the floor: the writer's own round trip for the same edit when nobody
   else holds the document. One Python thread sends and waits on all nine sockets at once, noting
   arrival times before it parses anything. Goal: p99 of the fan-out under 1 ms.
2. **Scaling.** Each of 8 clients pipelines edits on a document of its own (64 in flight), against
   1 client doing the same alone: edits answered per second in all, as a ratio. The request path is
   one thread (docs/Architecture.md), so on two processors the ratio shows what the other threads
   (each connection's writer, the kernel's socket work) add, not a parallel request path.

Prints the figures, then `table|` lines for scripts/bench. Run:
`python3 Benchmarks/sharing.py --server .build/release/docsession`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def frame(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Connection:
    """A raw JSON-RPC connection to the daemon's socket."""

    def __init__(self, path: Path) -> None:
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.connect(str(path))
        self.buffer = b""
        self.next_id = 1

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def read(self) -> dict:
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                length = int(self.buffer[:end].split(b":")[1])
                if len(self.buffer) >= end + 4 + length:
                    body = self.buffer[end + 4:end + 4 + length]
                    self.buffer = self.buffer[end + 4 + length:]
                    return json.loads(body)
            chunk = self.socket.recv(1 << 16)
            if not chunk:
                raise EOFError("the daemon closed the connection")
            self.buffer += chunk

    def call(self, method: str, params: dict) -> dict:
        request_id = self.next_id
        self.next_id += 1
        self.send(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        while True:
            message = self.read()
            if message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def start(self, name: str) -> None:
        self.call("initialize", {"clientInfo": {"name": name}, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}})
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def close(self) -> None:
        self.socket.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def fan_out(socket_path: Path, directory: Path, edits: int, rounds: int) -> tuple[list[float], list[float]]:
    """Fan-out times to 8 listeners and the floor (the writer alone), in microseconds.

    One thread does everything: it sends the edit, then waits on all nine sockets at once
    (`selectors`), noting the time each one's bytes arrive and parsing only afterwards, so that no
    Python thread's wake-up or lock is in the figure."""
    import selectors
    shared = directory / "shared.txt"
    alone = directory / "alone.txt"
    shared.write_text("x\n")
    alone.write_text("x\n")
    writer = Connection(socket_path)
    writer.start("writer")
    handle = writer.call("document/open", {"uri": shared.as_uri()})["document"]
    version = writer.call("document/state", {"document": handle})["version"]
    solo = writer.call("document/open", {"uri": alone.as_uri()})["document"]
    solo_version = writer.call("document/state", {"document": solo})["version"]
    listeners = [Connection(socket_path) for _ in range(8)]
    for listener in listeners:
        listener.start("listener")
        listener.call("document/open", {"uri": shared.as_uri()})
    selector = selectors.DefaultSelector()
    for index, listener in enumerate(listeners):
        listener.socket.setblocking(False)
        selector.register(listener.socket, selectors.EVENT_READ, index)

    def frames_in(connection: Connection) -> list[dict]:
        messages = []
        while True:
            end = connection.buffer.find(b"\r\n\r\n")
            if end < 0:
                return messages
            length = int(connection.buffer[:end].split(b":")[1])
            if len(connection.buffer) < end + 4 + length:
                return messages
            messages.append(json.loads(connection.buffer[end + 4:end + 4 + length]))
            connection.buffer = connection.buffer[end + 4 + length:]

    spread: list[float] = []
    floor: list[float] = []
    column = 1
    request_id = 10_000
    for _ in range(rounds):
        for _ in range(edits):
            edit = {"range": {"start": {"line": 0, "character": column}, "end": {"line": 0, "character": column}}, "text": "y"}
            request_id += 1
            body = frame({"jsonrpc": "2.0", "id": request_id, "method": "document/edit",
                          "params": {"document": handle, "version": version, "edits": [edit]}})
            arrived: dict[int, int] = {}
            sent = time.perf_counter_ns()
            writer.send(body)
            while len(arrived) < 8:
                for key, _ in selector.select(timeout=10):
                    connection = listeners[key.data]
                    chunk = connection.socket.recv(1 << 16)
                    now = time.perf_counter_ns()
                    if not chunk:
                        raise RuntimeError("a listener's connection closed")
                    connection.buffer += chunk
                    for message in frames_in(connection):
                        if message.get("method") == "document/didChange" and message["params"]["version"] == version + 1:
                            arrived[key.data] = now
            spread.append((max(arrived.values()) - sent) / 1000)
            while True:
                message = writer.read()
                if message.get("id") == request_id:
                    version = message["result"]["version"]
                    break
            # The floor: the same edit's round trip on a document nobody else holds.
            sent = time.perf_counter_ns()
            answer = writer.call("document/edit", {"document": solo, "version": solo_version, "edits": [edit]})
            floor.append((time.perf_counter_ns() - sent) / 1000)
            solo_version = answer["version"]
            column += 1
    for listener in listeners:
        listener.close()
    writer.close()
    return spread, floor


def pipelined(socket_path: Path, directory: Path, clients: int, edits: int, window: int = 64) -> float:
    """Edits answered per second in all, `clients` clients each pipelining `edits` edits on a
    document of its own."""
    connections = []
    for index in range(clients):
        path = directory / f"pipe-{clients}-{index}.txt"
        path.write_text("x\n")
        connection = Connection(socket_path)
        connection.start(f"typist {index}")
        handle = connection.call("document/open", {"uri": path.as_uri()})["document"]
        version = connection.call("document/state", {"document": handle})["version"]
        requests = [frame({"jsonrpc": "2.0", "id": 1000 + n, "method": "document/edit", "params": {
            "document": handle, "version": version + n,
            "edits": [{"range": {"start": {"line": 0, "character": 1 + n}, "end": {"line": 0, "character": 1 + n}}, "text": "y"}]}})
            for n in range(edits)]
        connections.append((connection, requests))
    barrier = threading.Barrier(clients + 1)
    failures: list[str] = []

    def type_in(connection: Connection, requests: list[bytes]) -> None:
        barrier.wait()
        sent = answered = 0
        while answered < len(requests):
            while sent < len(requests) and sent - answered < window:
                connection.send(requests[sent])
                sent += 1
            message = connection.read()
            if "id" in message:
                if "error" in message:
                    failures.append(str(message["error"]))
                answered += 1

    threads = [threading.Thread(target=type_in, args=pair) for pair in connections]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for connection, _ in connections:
        connection.close()
    if failures:
        raise RuntimeError(f"refused edits: {failures[:3]}")
    return clients * edits / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=".build/release/docsession")
    parser.add_argument("--edits", type=int, default=500, help="fan-out edits per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pipelined", type=int, default=5000, help="edits per client in the scaling figure")
    arguments = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="docsession-bench-sharing-"))
    runtime = directory / "run"
    daemon = subprocess.Popen([arguments.server, "daemon", "--runtime-dir", str(runtime), "--state-dir", str(directory / "state")],
                              stdin=subprocess.DEVNULL)
    try:
        socket_path = runtime / "daemon.sock"
        deadline = time.monotonic() + 20
        while True:
            try:
                probe = Connection(socket_path)
                probe.close()
                break
            except OSError:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise RuntimeError("the daemon did not start")
                time.sleep(0.02)
        documents = directory / "docs"
        documents.mkdir()
        spread, floor = fan_out(socket_path, documents, arguments.edits, arguments.rounds)
        p50, p99, worst = percentile(spread, 0.5), percentile(spread, 0.99), max(spread)
        f50, f99 = percentile(floor, 0.5), percentile(floor, 0.99)
        print(f"fan-out to 8 clients: p50 {p50:.0f} µs, p99 {p99:.0f} µs, max {worst:.0f} µs ({len(spread)} edits)")
        print(f"the writer alone (floor): p50 {f50:.0f} µs, p99 {f99:.0f} µs, max {max(floor):.0f} µs")
        one = [pipelined(socket_path, documents, 1, arguments.pipelined) for _ in range(3)]
        eight = [pipelined(socket_path, documents, 8, arguments.pipelined) for _ in range(3)]
        ratio = statistics.median(eight) / statistics.median(one)
        print(f"pipelined edits answered per second: 1 client {statistics.median(one):,.0f}, 8 clients on 8 documents "
              f"{statistics.median(eight):,.0f} in all (x{ratio:.2f}); rounds {[round(x) for x in one]} / {[round(x) for x in eight]}")
        verdict = "met" if p99 < 1000 else "missed"
        print(f"table| fan-out of an edit to 8 clients, p99 (max) | {p99:.0f} µs ({worst:.0f} µs) | p50 {p50:.0f} µs; the writer alone p99 {f99:.0f} µs | under 1 ms | {verdict}")
        print(f"table| 8 clients pipelining on 8 documents / 1 client, edits per second | x{ratio:.2f} | "
              f"{min(eight) / statistics.median(one):.2f}-{max(eight) / statistics.median(one):.2f} | (how it scales on {os.cpu_count()} processors) | measured")
        return 0
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
