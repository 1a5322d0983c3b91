"""A small JSON-RPC client over LSP's base-protocol framing, for the protocol tests.

It starts the server as a subprocess, writes framed messages to its stdin, and reads its stdout on a
thread that splits it into `Content-Length` frames. Every wait has a timeout, so a server that hangs
makes a test fail instead of blocking it forever. Standard library only.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT = 10.0

# Marks a message member that is left out (as opposed to sent as null).
ABSENT = object()

# Notifications the server sends when background work ends (a version written: README §8.21), at
# no fixed place among the other messages. The client holds them apart (`asynchronous`), so that
# the order of the rest stays deterministic; tests that look for them take them with
# `take_asynchronous`.
ASYNCHRONOUS_NOTIFICATIONS = {"document/didChangeVersions"}


# The server keeps earlier versions of documents under $XDG_STATE_HOME/docsession (README §8.21).
# The tests must not write into the user's home, and each server must start without versions
# kept by an earlier one (`document/versions` answers are fixtures): every server gets its own
# state directory, under one temporary directory of the test run, removed when the run ends.
_state_root: Path | None = None
_state_numbers = itertools.count(1)


def state_home() -> Path:
    """A fresh, empty directory for one server's XDG_STATE_HOME."""
    global _state_root
    if _state_root is None:
        _state_root = Path(tempfile.mkdtemp(prefix="docsession-protocol-state-"))
        atexit.register(shutil.rmtree, _state_root, True)
    path = _state_root / f"server-{next(_state_numbers)}"
    path.mkdir()
    return path


# Generous, as the Swift tests' 60 s: a busy machine stretches the server's background work; a test
# that passes waits only as long as its condition takes.
DEADLINE = float(os.environ.get("DOCSESSION_TEST_DEADLINE", "60"))


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "a condition") -> Any:
    """Polls `predicate` until it answers something true (answered), for at most `timeout` seconds
    (generous: the machine may be busy), then fails naming `what`. For conditions the server reaches
    in the background (a journal flushed, a version or an undo file written): waited for, never
    slept for."""
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return found


def daemons_on(runtime_dir: Path | str) -> list[int]:
    """The live processes running `docsession daemon --runtime-dir RUNTIME_DIR` (from /proc)."""
    found = []
    wanted = b"--runtime-dir\0" + str(runtime_dir).encode() + b"\0"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            status = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if b"\0daemon\0" in command and wanted in command and status[status.rindex(")") + 2] not in "ZX":
            found.append(int(entry))
    return found


def end_daemons(runtime_dir: Path | str, timeout: float = DEADLINE) -> None:
    """Kills (SIGKILL) every daemon started on `runtime_dir` and waits until none is left. Call it
    once the test's `connect` processes have ended. Not only the pid in `daemon.lock`: when two
    `connect`s start at once, each starts a daemon; the one that loses the lock exits (status 75),
    but a loser still starting up when the winner is killed takes the free lock and lives on."""
    def none_left() -> bool:
        pids = daemons_on(runtime_dir)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return not pids

    wait_until(none_left, timeout=timeout, what=f"every daemon on {runtime_dir} to die")


def binary_path() -> Path:
    """The server binary: $DOCSESSION_BIN, else .build/debug/docsession under the repository root."""
    configured = os.environ.get("DOCSESSION_BIN")
    path = Path(configured) if configured else Path(".build/debug/docsession")
    return path if path.is_absolute() else REPO_ROOT / path


def encode(message: Any) -> bytes:
    """A message as compact UTF-8 JSON, the way the server writes its own."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def frame(body: bytes) -> bytes:
    """One framed message: exactly the header the server writes, then the body."""
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@dataclass
class Frame:
    """One message the server wrote: its raw header block, raw body and parsed JSON."""

    header: bytes
    body: bytes
    message: Any


class FramingFault(Exception):
    """The server's output did not follow the framing the protocol promises."""


class FrameReader:
    """Splits a byte stream into frames; strict, because it checks the server's output.

    Linear in the stream's length, also for one body of many megabytes arriving in 64 KiB reads
    (a document's whole text): the buffer is a bytearray consumed from the front, and once a header
    has been read only the body's length is awaited."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        # The header block read and the body length it announced, while the body is incomplete.
        self.pending: tuple[bytes, int] | None = None

    def feed(self, data: bytes) -> list[Frame]:
        self.buffer += data
        frames = []
        while True:
            if self.pending is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buffer) > 200:
                        raise FramingFault(f"no header block end in {bytes(self.buffer[:200])!r}")
                    return frames
                header = bytes(self.buffer[: end + 4])
                lines = header[:-4].split(b"\r\n")
                if len(lines) != 1 or not lines[0].startswith(b"Content-Length: "):
                    raise FramingFault(f"unexpected header block {header!r}")
                del self.buffer[: end + 4]
                self.pending = (header, int(lines[0][len(b"Content-Length: ") :]))
            header, length = self.pending
            if len(self.buffer) < length:
                return frames
            body = bytes(self.buffer[:length])
            del self.buffer[:length]
            self.pending = None
            frames.append(Frame(header, body, json.loads(body.decode("utf-8"))))

    @property
    def at_boundary(self) -> bool:
        """Whether no frame is partly read."""
        return not self.buffer and self.pending is None


class RpcClient:
    """A running server and the frames it has written so far."""

    def __init__(self, binary: Path | str | None = None, args: tuple[str, ...] = (), timeout: float = DEFAULT_TIMEOUT):
        self.timeout = timeout
        self.binary = Path(binary) if binary else binary_path()
        self.state_home = state_home()
        self.process = subprocess.Popen(
            [str(self.binary), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "XDG_STATE_HOME": str(self.state_home)},
        )
        self.frames: queue.Queue[Frame | BaseException | None] = queue.Queue()
        self.received: list[Frame] = []
        self.sent: list[Any] = []
        self.stderr_chunks: list[bytes] = []
        self.next_id = 1
        # The asynchronous notifications received and not yet taken, in order.
        self.asynchronous: list[Frame] = []
        self._asynchronous_arrived = threading.Condition()
        self._stdout_thread = threading.Thread(target=self._read_stdout, daemon=True)
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stdout_thread.start()
        self._stderr_thread.start()

    # -- reading ---------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        reader = FrameReader()
        stream = self.process.stdout
        assert stream is not None
        try:
            while True:
                data = os.read(stream.fileno(), 65536)
                if not data:
                    break
                for item in reader.feed(data):
                    message = item.message
                    if isinstance(message, dict) and "id" not in message and message.get("method") in ASYNCHRONOUS_NOTIFICATIONS:
                        with self._asynchronous_arrived:
                            self.asynchronous.append(item)
                            self._asynchronous_arrived.notify_all()
                        continue
                    self.frames.put(item)
            if not reader.at_boundary:
                raise FramingFault(f"output ended inside a frame: {bytes(reader.buffer[:200])!r}")
        except BaseException as error:  # handed to the test thread, which raises it
            self.frames.put(error)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        # Read in chunks, not lines, so that a server writing without newlines cannot stall us.
        stream = self.process.stderr
        assert stream is not None
        while True:
            data = os.read(stream.fileno(), 65536)
            if not data:
                return
            self.stderr_chunks.append(data)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def read_frame(self, timeout: float | None = None) -> Frame:
        """The next frame the server writes; raises TimeoutError, EOFError or the reader's fault."""
        try:
            item = self.frames.get(timeout=self.timeout if timeout is None else timeout)
        except queue.Empty:
            raise TimeoutError(f"no message from the server within {timeout or self.timeout} s") from None
        if item is None:
            self.frames.put(None)  # stays at end of output for later reads
            raise EOFError("the server closed its output")
        if isinstance(item, BaseException):
            raise item
        self.received.append(item)
        return item

    def take_asynchronous(self, predicate: Callable[[Any], bool] = lambda _: True, timeout: float | None = None) -> Frame:
        """The first asynchronous notification held (or arriving within the timeout) whose message
        satisfies `predicate`, taken out of `asynchronous`; raises TimeoutError."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._asynchronous_arrived:
            while True:
                for index, item in enumerate(self.asynchronous):
                    if predicate(item.message):
                        return self.asynchronous.pop(index)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no such asynchronous notification within the timeout; held: {[f.message for f in self.asynchronous]}")
                self._asynchronous_arrived.wait(left)

    def read_message(self, timeout: float | None = None) -> Any:
        return self.read_frame(timeout).message

    def read_until_response(self, request_id: Any, timeout: float | None = None) -> tuple[Any, list[Any]]:
        """Reads until the response with this id; answers it and the notifications before it."""
        others = []
        while True:
            message = self.read_message(timeout)
            if isinstance(message, dict) and "method" not in message and message.get("id", ABSENT) == request_id:
                return message, others
            others.append(message)

    def drain(self, timeout: float | None = None) -> list[Any]:
        """Every message until the server closes its output."""
        messages = []
        while True:
            try:
                messages.append(self.read_message(timeout))
            except EOFError:
                return messages

    # -- writing ---------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send(self, message: Any) -> None:
        self.sent.append(message)
        self.send_raw(frame(encode(message)))

    def notify(self, method: str, params: Any = ABSENT) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.send(message)

    def request(self, method: str, params: Any = ABSENT, request_id: Any = ABSENT, timeout: float | None = None) -> tuple[Any, list[Any]]:
        """Sends a request and waits for its response; answers it and the notifications before it."""
        if request_id is ABSENT:
            request_id = self.next_id
            self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.send(message)
        return self.read_until_response(request_id, timeout)

    def call(self, method: str, params: Any = ABSENT) -> Any:
        """A request that must succeed: answers its result."""
        response, _ = self.request(method, params)
        if "error" in response:
            raise AssertionError(f"{method} failed: {response['error']}")
        return response["result"]

    def initialize(self, params: Any = None) -> Any:
        return self.call("initialize", {} if params is None else params)

    # -- ending ----------------------------------------------------------------------------------

    def close_input(self) -> None:
        stdin = self.process.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises TimeoutError if the server does not exit in time."""
        try:
            return self.process.wait(timeout=self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError("the server did not exit in time") from None

    def shutdown_and_exit(self) -> int:
        self.call("shutdown")
        self.notify("exit")
        return self.wait()

    def kill(self) -> None:
        """Stops the server if it still runs and releases its pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.close_input()
        # The readers see end of output once the process is gone; join them before closing the
        # descriptors they read.
        self._stdout_thread.join(timeout=2)
        self._stderr_thread.join(timeout=2)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> "RpcClient":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.kill()
