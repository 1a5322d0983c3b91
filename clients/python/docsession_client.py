"""A small client for the `docsession` document server, using only Python's standard library.

`Client` starts ``docsession --stdio`` and speaks JSON-RPC 2.0 to it with LSP's framing
(``Content-Length: N\\r\\n\\r\\n`` and N bytes of UTF-8 JSON). A thread reads the server's stdout and
another drains its stderr in chunks, so the server never blocks on a full pipe.

`Document` is a handle on one open document that keeps a local copy of its text exactly in step
with the server's: it applies its own edits, the edits answered by undo, redo, conflict
resolution and restored versions, and the edits of ``document/didChange`` (another program changed
the file), and it follows ``document/didMove``. Edits are applied on the reader thread in the order
the server sent them, so by the time a request returns, the local copy is that of its answer.

Unsaved changes that a server took with it when it died (it keeps a journal of them) are offered
when their file is next opened: `Document.recovery`, then `Client.recover` or
`Client.discard_recovery`; `Client.recoverable` lists the journals waiting.

Positions are LSP's ``(line, character)``, with ``character`` counted in the encoding negotiated at
`Client.initialize` (``utf-8``, ``utf-16`` or ``utf-32``); `position_to_offset` and
`offset_to_position` convert them from and to indices into a Python ``str``.

    with Client(["--state-dir", "/tmp/state"]) as client:
        client.initialize(position_encoding="utf-32")
        doc = client.open("/tmp/notes.txt")
        doc.edit(doc.range(0, 0), "Hello ")
        doc.save()
"""

from __future__ import annotations

import base64
import collections
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

__all__ = [
    "Client", "Document", "RpcError", "ConnectionClosed", "Notification",
    "position_to_offset", "offset_to_position", "apply_text_edits", "make_range",
    "path_to_uri", "uri_to_path", "default_binary",
]

JSON = Any
Position = Mapping[str, int]
Range = Mapping[str, Position]
RangeLike = Union[Range, Sequence[Sequence[int]], None]
NotificationCallback = Callable[["Notification"], None]

ENCODINGS = ("utf-8", "utf-16", "utf-32")

# Error codes of protocol/README.md §10.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002
FILE_SYSTEM_ERROR = -32010
UNKNOWN_DOCUMENT = -32011
EDITING_DISABLED = -32012
ALREADY_EXISTS = -32013
NOT_TEXT = -32014
NOT_REGULAR_FILE = -32016
CHANGED_ON_DISK = -32017
UNENCODABLE = -32018
NOT_IN_CONFLICT = -32019
UNKNOWN_VERSION = -32020
VERSIONS_UNAVAILABLE = -32021
OUTSIDE_ROOTS = -32022
UNSAVED_CHANGES = -32023
UNKNOWN_QUERY = -32024
NO_RECOVERY = -32025
NO_SNAPSHOT = -32026
HANDOFF_UNAVAILABLE = -32027
ENTRY_ERROR = -32028
STORE_ERROR = -32029
STATEMENT_REFUSED = -32030
WRONG_KIND = -32031
COORDINATION_REFUSED = -32032
UNKNOWN_LEASE = -32033
REQUEST_CANCELLED = -32800
CONTENT_MODIFIED = -32801


def _store_options(migrations: Sequence[str], read_only: bool, time_limit: Optional[int],
                   memory_limit: Optional[int]) -> dict:
    """A managed document's ``storeOptions`` (protocol §13.5); the limits only when given."""
    options: dict = {"migrations": list(migrations), "readOnly": read_only}
    if time_limit is not None:
        options["timeLimit"] = time_limit
    if memory_limit is not None:
        options["memoryLimit"] = memory_limit
    return options


class RpcError(Exception):
    """An error response: ``code``, ``message`` and ``data`` as the server sent them."""

    def __init__(self, code: int, message: str, data: JSON = None, method: str = "") -> None:
        super().__init__(f"{method + ': ' if method else ''}{message} ({code})")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class ConnectionClosed(Exception):
    """The server's output ended (it exited) while a request was waiting for its answer."""


@dataclass
class Notification:
    """A notification from the server: ``method`` and ``params``."""

    method: str
    params: JSON
    received: float = field(default_factory=time.monotonic)


# --------------------------------------------------------------------------- positions

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _units(ch: str, encoding: str) -> int:
    """Code units of one character (a Unicode scalar) in a position encoding."""
    cp = ord(ch)
    if encoding == "utf-16":
        return 2 if cp > 0xFFFF else 1
    if encoding == "utf-8":
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    if encoding == "utf-32":
        return 1
    raise ValueError(f"unknown position encoding {encoding!r}")


def _line_bounds(text: str, line: int) -> Optional[tuple[int, int]]:
    """(start, end before the line break) of a line, or None past the last line."""
    start, n = 0, 0
    for m in _LINE_BREAK.finditer(text):
        if n == line:
            return start, m.start()
        start, n = m.end(), n + 1
    return (start, len(text)) if n == line else None


def position_to_offset(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """The index in ``text`` of an LSP position, with LSP's clamping.

    A character past the end of its line means the end of the line (before its break), a line past
    the last one the end of the text. Raises ValueError for a character inside one character's
    encoding (a surrogate pair, a UTF-8 sequence), as the server refuses it.
    """
    bounds = _line_bounds(text, line)
    if bounds is None:
        return len(text)
    start, end = bounds
    units = 0
    for i in range(start, end):
        if units == character:
            return i
        units += _units(text[i], encoding)
        if units > character:
            raise ValueError(f"character {character} of line {line} falls inside a character "
                             f"in {encoding}")
    return end


def offset_to_position(text: str, offset: int, encoding: str = "utf-16") -> dict[str, int]:
    """The LSP position ``{"line", "character"}`` of an index in ``text`` (0...len(text)).

    An offset between the ``\\r`` and ``\\n`` of a CRLF, where no position points, is taken as the
    end of its line.
    """
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} is outside the text (0...{len(text)})")
    line, start = 0, 0
    for m in _LINE_BREAK.finditer(text):
        if m.start() >= offset:
            break
        if m.end() > offset:        # inside a CRLF
            offset = m.start()
            break
        line, start = line + 1, m.end()
    return {"line": line, "character": sum(_units(c, encoding) for c in text[start:offset])}


def make_range(start_line: int, start_character: int, end_line: int, end_character: int) -> dict:
    """An LSP range from four numbers."""
    return {"start": {"line": start_line, "character": start_character},
            "end": {"line": end_line, "character": end_character}}


def _as_range(r: RangeLike) -> Optional[dict]:
    """Accept a range dict, ``((line, character), (line, character))`` or None."""
    if r is None:
        return None
    if isinstance(r, Mapping):
        return {"start": dict(r["start"]), "end": dict(r["end"])}
    (sl, sc), (el, ec) = r
    return make_range(sl, sc, el, ec)


def apply_text_edits(text: str, edits: Iterable[Mapping[str, Any]], encoding: str) -> str:
    """Apply LSP edits in order, each against the text left by the one before.

    An edit without ``range`` (or with ``None``) replaces the whole text.
    """
    for e in edits:
        r = e.get("range")
        if r is None:
            text = e["text"]
            continue
        s = position_to_offset(text, r["start"]["line"], r["start"]["character"], encoding)
        t = position_to_offset(text, r["end"]["line"], r["end"]["character"], encoding)
        text = text[:s] + e["text"] + text[max(s, t):]
    return text


# --------------------------------------------------------------------------- URIs

def path_to_uri(path: Union[str, os.PathLike]) -> str:
    """A ``file://`` URI for a path, percent-encoded as the server writes URIs."""
    p = os.path.abspath(os.fspath(path))
    return "file://" + urllib.parse.quote(p, safe="/")


def uri_to_path(uri: str) -> str:
    """The path of a ``file://`` URI."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme.lower() != "file":
        raise ValueError(f"not a file URI: {uri}")
    return urllib.parse.unquote(parsed.path)


def _to_uri(path_or_uri: Union[str, os.PathLike]) -> str:
    s = os.fspath(path_or_uri)
    return s if s.lower().startswith("file:") else path_to_uri(s)


def default_binary() -> str:
    """``$DOCSESSION_BIN``, else the repository's debug build, else ``docsession`` on PATH."""
    env = os.environ.get("DOCSESSION_BIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", ".build", "debug", "docsession")
    if os.access(built, os.X_OK):
        return os.path.normpath(built)
    return shutil.which("docsession") or "docsession"


# --------------------------------------------------------------------------- client

class _Pending:
    """A request waiting for its response; ``hook`` runs on the reader thread with the result."""

    __slots__ = ("method", "event", "result", "error", "hook")

    def __init__(self, method: str, hook: Optional[Callable[[JSON], None]]) -> None:
        self.method = method
        self.event = threading.Event()
        self.result: JSON = None
        self.error: Optional[BaseException] = None
        self.hook = hook


class Client:
    """A connection to one ``docsession`` process over its stdin and stdout.

    ``args`` are passed after ``--stdio`` (``["--state-dir", DIR]``, ``["--no-watch"]``, ...).
    ``command``, when given, is the whole command line instead: ``["docsession", "connect"]`` shares
    documents with every other client of the user's daemon (README §14), whose edits then arrive as
    ``document/didChange`` and are applied to the ``Document``s like any other.
    ``on_notification`` is called for every notification, on a dispatch thread of its own (it may
    send requests). Notifications are also kept for `wait_for_notification`; ``on_stderr`` gets
    the server's stderr in chunks (by default the last 64 KiB are kept in `stderr_tail`).
    ``on_message("-->" | "<--", message)`` sees every message sent and received (a wire log).
    """

    def __init__(self, args: Sequence[str] = (), *, binary: Optional[str] = None, command: Optional[Sequence[str]] = None,
                 on_notification: Optional[NotificationCallback] = None,
                 on_stderr: Optional[Callable[[bytes], None]] = None,
                 on_message: Optional[Callable[[str, dict], None]] = None,
                 env: Optional[Mapping[str, str]] = None, keep_notifications: int = 10000) -> None:
        self.binary = binary or default_binary()
        self.process = subprocess.Popen(
            list(command) if command is not None else [self.binary, "--stdio", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=dict(env) if env is not None else None)
        self.position_encoding = "utf-16"
        self.capabilities: dict = {}
        self.server_info: dict = {}
        self.on_notification = on_notification
        self.on_stderr = on_stderr
        self.on_message = on_message
        self.stderr_bytes = 0
        self._stderr_tail = bytearray()
        self._next_id = 1
        self._write_lock = threading.Lock()
        self._lock = threading.RLock()           # ids, pending requests, documents
        self._pending: dict[int, _Pending] = {}
        self._documents: dict[str, Document] = {}
        self._notes: collections.deque[Notification] = collections.deque(maxlen=keep_notifications)
        self._notes_cond = threading.Condition()
        self._dispatch: queue.Queue[Optional[Notification]] = queue.Queue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._read_loop, name="docsession-stdout", daemon=True),
            threading.Thread(target=self._stderr_loop, name="docsession-stderr", daemon=True),
            threading.Thread(target=self._dispatch_loop, name="docsession-dispatch", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # -- context manager ---------------------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float = 5.0) -> int:
        """Shut the server down (``shutdown`` then ``exit``) if it still runs; kill it if that
        fails. Returns the exit status."""
        if self.process.poll() is None:
            try:
                return self.shutdown(timeout=timeout)
            except Exception:
                self.process.kill()
        return self._reap(timeout)

    def _reap(self, timeout: float) -> int:
        """Wait for the process and the reader threads; close the pipes."""
        status = self.process.wait(timeout)
        for t in self._threads:
            t.join(timeout)
        if not any(t.is_alive() for t in self._threads[:2]):
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None and not stream.closed:
                    try:
                        stream.close()
                    except OSError:
                        pass
        return status

    # -- wire --------------------------------------------------------------------------

    def _write(self, message: Mapping[str, Any]) -> None:
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        with self._write_lock:
            if self.on_message is not None:
                self.on_message("-->", dict(message))
            if self.process.stdin is None or self.process.stdin.closed:
                raise ConnectionClosed("the server's input is closed")
            try:
                self.process.stdin.write(data)
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                raise ConnectionClosed(f"writing to the server failed: {e}") from e

    def send_request(self, method: str, params: JSON = None, *,
                     hook: Optional[Callable[[JSON], None]] = None) -> tuple[int, _Pending]:
        """Send a request without waiting; returns its id and a pending record (see `wait`)."""
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the server has exited")
            rid = self._next_id
            self._next_id += 1
            pending = _Pending(method, hook)
            self._pending[rid] = pending
        msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            self._write(msg)
        except ConnectionClosed:
            with self._lock:
                self._pending.pop(rid, None)
            raise
        return rid, pending

    def wait(self, rid: int, pending: _Pending, timeout: Optional[float] = 10.0) -> JSON:
        """Wait for a request sent with `send_request`; on timeout it is cancelled."""
        if not pending.event.wait(timeout):
            with self._lock:
                self._pending.pop(rid, None)
            try:
                self.notify("$/cancelRequest", {"id": rid})
            except ConnectionClosed:
                pass
            raise TimeoutError(f"{pending.method} (id {rid}) got no answer in {timeout} s")
        if pending.error is not None:
            raise pending.error
        return pending.result

    def request(self, method: str, params: JSON = None, timeout: Optional[float] = 10.0, *,
                hook: Optional[Callable[[JSON], None]] = None) -> JSON:
        """Send a request and return its result; raises `RpcError` for an error response,
        `TimeoutError` (after cancelling it) or `ConnectionClosed`.

        ``hook``, if given, is called with the result on the reader thread before any later
        message is handled (used by `Document` to keep its text in order with notifications).
        """
        rid, pending = self.send_request(method, params, hook=hook)
        return self.wait(rid, pending, timeout)

    def notify(self, method: str, params: JSON = None) -> None:
        """Send a notification."""
        msg: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)

    # -- reading -----------------------------------------------------------------------

    def _read_message(self) -> Optional[bytes]:
        out = self.process.stdout
        assert out is not None
        length: Optional[int] = None
        while True:
            line = out.readline()
            if not line:
                return None
            line = line.rstrip(b"\r\n")
            if not line:
                if length is None:
                    continue            # stray empty line between messages
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        body = out.read(length)
        return body if len(body) == length else None

    def _read_loop(self) -> None:
        try:
            while True:
                body = self._read_message()
                if body is None:
                    break
                try:
                    message = json.loads(body.decode("utf-8"))
                except ValueError:
                    continue
                if self.on_message is not None:
                    self.on_message("<--", message)
                for m in message if isinstance(message, list) else [message]:
                    if isinstance(m, dict):
                        self._handle(m)
        finally:
            with self._lock:
                self._closed = True
                pending, self._pending = self._pending, {}
            for p in pending.values():
                p.error = ConnectionClosed(f"the server exited before answering {p.method}")
                p.event.set()
            self._dispatch.put(None)
            with self._notes_cond:
                self._notes_cond.notify_all()

    def _handle(self, m: dict) -> None:
        if "method" in m and "id" not in m:
            note = Notification(m["method"], m.get("params"))
            with self._lock:
                doc = None
                if isinstance(note.params, dict):
                    doc = self._documents.get(note.params.get("document", ""))
                if doc is not None:
                    try:
                        doc._on_notification(note)
                    except Exception as exc:    # never kill the reader thread
                        doc.sync_error = exc
            with self._notes_cond:
                self._notes.append(note)
                self._notes_cond.notify_all()
            self._dispatch.put(note)
            return
        if "method" in m:               # a request from the server: none is defined; refuse it
            self._write({"jsonrpc": "2.0", "id": m["id"],
                         "error": {"code": METHOD_NOT_FOUND, "message": "not supported"}})
            return
        with self._lock:
            pending = self._pending.pop(m.get("id"), None) if isinstance(m.get("id"), int) else None
        if pending is None:
            return                      # a late answer to a timed-out request, or id null
        if "error" in m:
            e = m["error"] or {}
            pending.error = RpcError(e.get("code", 0), e.get("message", ""), e.get("data"),
                                     pending.method)
        else:
            pending.result = m.get("result")
            if pending.hook is not None:
                try:
                    with self._lock:
                        pending.hook(pending.result)
                except Exception as exc:   # never kill the reader thread
                    pending.error = exc
        pending.event.set()

    def _stderr_loop(self) -> None:
        err = self.process.stderr
        assert err is not None
        fd = err.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.stderr_bytes += len(chunk)
            if self.on_stderr is not None:
                try:
                    self.on_stderr(chunk)
                except Exception:
                    pass
            self._stderr_tail += chunk
            del self._stderr_tail[:-65536]

    @property
    def stderr_tail(self) -> str:
        """The last 64 KiB the server wrote to stderr."""
        return self._stderr_tail.decode("utf-8", "replace")

    def _dispatch_loop(self) -> None:
        while True:
            note = self._dispatch.get()
            if note is None:
                return
            if self.on_notification is not None:
                try:
                    self.on_notification(note)
                except Exception as e:
                    print(f"docsession_client: notification callback failed: {e!r}",
                          file=sys.stderr)

    # -- notifications -----------------------------------------------------------------

    def wait_for_notification(self, method: str,
                              predicate: Optional[Callable[[JSON], bool]] = None,
                              timeout: float = 10.0) -> Notification:
        """Remove and return the oldest kept notification of ``method`` whose params satisfy
        ``predicate``, waiting for one up to ``timeout`` seconds (TimeoutError)."""
        deadline = time.monotonic() + timeout
        with self._notes_cond:
            while True:
                for note in self._notes:
                    if note.method == method and (predicate is None or predicate(note.params)):
                        self._notes.remove(note)
                        return note
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {method} notification in {timeout} s")
                if self._closed:
                    raise ConnectionClosed(f"the server exited; no {method} notification")
                self._notes_cond.wait(left)

    def notifications(self) -> list[Notification]:
        """The notifications kept (received and not yet taken by `wait_for_notification`)."""
        with self._notes_cond:
            return list(self._notes)

    def take_notifications(self) -> list[Notification]:
        """Remove and return every notification kept so far, oldest first."""
        with self._notes_cond:
            notes = list(self._notes)
            self._notes.clear()
            return notes

    def clear_notifications(self) -> None:
        """Forget the notifications kept so far."""
        with self._notes_cond:
            self._notes.clear()

    # -- lifecycle ---------------------------------------------------------------------

    def initialize(self, position_encoding: Union[str, Sequence[str], None] = None, *,
                   autosave: Optional[Mapping[str, Any]] = None, trace: Optional[str] = None,
                   flush_delay: Optional[int] = None, hot_exit: Optional[bool] = None,
                   persist_undo: Optional[bool] = None,
                   client_name: str = "docsession_client.py", send_initialized: bool = True,
                   timeout: float = 10.0) -> dict:
        """``initialize`` (then ``initialized``). ``position_encoding`` is one encoding or a list,
        most preferred first; the server's choice is kept in `position_encoding`.

        ``flush_delay`` (milliseconds, 0 to 60000; the server's default is 200) bounds how long a
        change waits before the server writes it to its journal; ``hot_exit`` (default True)
        says whether `shutdown` keeps the journals of documents with unsaved changes, to be
        offered back at the next open, or deletes them. ``persist_undo`` (default False) asks the
        server to keep each document's undo history across closes and restarts, for as long as
        the file keeps the same bytes (`capabilities["persistUndo"]` answers whether it does).
        ``processId`` is this process: when it dies, the server flushes its journals and exits."""
        params: dict = {"processId": os.getpid(), "clientInfo": {"name": client_name},
                        "capabilities": {}}
        if position_encoding is not None:
            encs = [position_encoding] if isinstance(position_encoding, str) else list(position_encoding)
            params["capabilities"] = {"general": {"positionEncodings": encs}}
        options: dict = {}
        if autosave is not None:
            options["autosave"] = dict(autosave)
        if flush_delay is not None:
            options["flushDelay"] = flush_delay
        if hot_exit is not None:
            options["hotExit"] = hot_exit
        if persist_undo is not None:
            options["persistUndo"] = persist_undo
        if options:
            params["initializationOptions"] = options
        if trace is not None:
            params["trace"] = trace
        result = self.request("initialize", params, timeout)
        self.capabilities = result["capabilities"]
        self.server_info = result.get("serverInfo", {})
        self.position_encoding = self.capabilities["positionEncoding"]
        if send_initialized:
            self.notify("initialized", {})
        return result

    def shutdown(self, timeout: float = 10.0) -> int:
        """``shutdown``, then ``exit``; waits for the process and returns its exit status."""
        if self.process.poll() is None:
            try:
                self.request("shutdown", None, timeout)
                self.notify("exit")
            except ConnectionClosed:
                pass
            if self.process.stdin is not None:
                with self._write_lock:
                    try:
                        self.process.stdin.close()
                    except OSError:
                        pass
        return self._reap(timeout)

    # -- documents ---------------------------------------------------------------------

    def open(self, path: Union[str, os.PathLike], *, encoding: Optional[str] = None,
             timeout: float = 30.0) -> "Document":
        """``document/open``: a `Document` holding the file's text. ``encoding`` is the file's
        (``auto`` by default). Opening a file already open answers the same Document."""
        params: dict = {"uri": _to_uri(path)}
        if encoding is not None:
            params["encoding"] = encoding
        return self._adopt(self.request("document/open", params, timeout, hook=self._adopt))

    def create(self, path: Union[str, os.PathLike], text: str = "", *,
               timeout: float = 10.0) -> "Document":
        """``document/create``: a new file (never overwriting one), open as a `Document`."""
        info = self.request("document/create", {"uri": _to_uri(path), "text": text}, timeout,
                            hook=self._adopt)
        return self._adopt(info)

    def open_package(self, path: Union[str, os.PathLike], *, kind: Optional[str] = None,
                     migrations: Sequence[str] = (), read_only: bool = False,
                     time_limit: Optional[int] = None, memory_limit: Optional[int] = None,
                     timeout: float = 60.0) -> "PackageDocument":
        """``document/open`` of a directory that is one document: a `PackageDocument`, or a
        `ManagedDocument` for a managed one (``kind`` ``"package"`` or ``"managed"``; without it
        the server goes by the extension, ``.textbundle`` and the like, or the managed layout).
        ``migrations``, ``read_only``, ``time_limit`` (milliseconds) and ``memory_limit`` (bytes)
        are a managed document's ``storeOptions``."""
        params: dict = {"uri": _to_uri(path)}
        if kind is not None:
            params["kind"] = kind
        if migrations or read_only or time_limit is not None or memory_limit is not None:
            params["kind"] = "managed"
            params["storeOptions"] = _store_options(migrations, read_only, time_limit, memory_limit)
        return self._adopt(self.request("document/open", params, timeout, hook=self._adopt))

    def create_package(self, path: Union[str, os.PathLike], *, timeout: float = 30.0) -> "PackageDocument":
        """``document/create`` with ``kind: "package"``: a new, empty package directory."""
        info = self.request("document/create", {"uri": _to_uri(path), "kind": "package"}, timeout,
                            hook=self._adopt)
        return self._adopt(info)

    def create_managed(self, path: Union[str, os.PathLike], migrations: Sequence[str] = (), *,
                       read_only: bool = False, time_limit: Optional[int] = None,
                       memory_limit: Optional[int] = None, timeout: float = 60.0) -> "ManagedDocument":
        """``document/create`` with ``kind: "managed"``: a new package holding an empty SQLite
        store with ``migrations`` applied (UIManagedDocument's layout), published at once.
        ``time_limit`` (milliseconds per request's statements; the server's default is 10 s) and
        ``memory_limit`` (bytes per value and per query's answer; 64 MiB) bound its SQL."""
        info = self.request("document/create", {
            "uri": _to_uri(path), "kind": "managed",
            "storeOptions": _store_options(migrations, read_only, time_limit, memory_limit)}, timeout, hook=self._adopt)
        return self._adopt(info)

    def open_managed(self, path: Union[str, os.PathLike], migrations: Sequence[str] = (), *,
                     read_only: bool = False, time_limit: Optional[int] = None,
                     memory_limit: Optional[int] = None, timeout: float = 60.0) -> "ManagedDocument":
        """``document/open`` with ``kind: "managed"``: the migrations beyond the store's
        ``PRAGMA user_version`` run, each in its own transaction (limits as `create_managed`)."""
        params = {"uri": _to_uri(path), "kind": "managed",
                  "storeOptions": _store_options(migrations, read_only, time_limit, memory_limit)}
        return self._adopt(self.request("document/open", params, timeout, hook=self._adopt))

    def document(self, handle: str) -> Optional["Document"]:
        """The open `Document` with this handle, if any."""
        with self._lock:
            return self._documents.get(handle)

    # -- recovery ----------------------------------------------------------------------

    def _handle_of(self, document: Union["Document", str]) -> tuple[str, Optional["Document"]]:
        if isinstance(document, (Document, PackageDocument)):
            return document.handle, document
        return document, self.document(document)

    def recover(self, document: Union["Document", str], *, timeout: float = 10.0) -> dict:
        """``document/recover``: brings back the unsaved changes a dead server left in its journal
        of the document's file (offered as `Document.recovery` by `open`), with their undo
        history: `Document.undo` goes back, step by step, to the file's text.

        ``document`` is a `Document` or a handle. The local copy takes the recovered text and the
        new version before this returns. Returns ``{version, edits, inConflict,
        hasUnsavedChanges}``; ``inConflict`` is True when the file changed since the journal's
        base (resolve with `Document.resolve_conflict`). Raises `RpcError`: ``NO_RECOVERY``
        (-32025) when nothing is offered, ``UNSAVED_CHANGES`` (-32023) when the document has
        unsaved changes of its own or is in conflict, ``UNKNOWN_DOCUMENT`` (-32011)."""
        handle, doc = self._handle_of(document)
        if isinstance(doc, PackageDocument):
            return doc.recover(timeout)
        sent = doc.version if doc is not None else None

        def hook(result: dict) -> None:
            if doc is None:
                return
            if doc.version != sent:
                raise RuntimeError(f"{handle}: local version {doc.version} moved from {sent} "
                                   "before document/recover was answered; call sync()")
            doc._apply(result["edits"], result["version"])
            doc.has_unsaved_changes = result["hasUnsavedChanges"]
            doc.recovery = None

        return self.request("document/recover", {"document": handle}, timeout, hook=hook)

    def discard_recovery(self, document: Union["Document", str], *,
                         timeout: float = 10.0) -> None:
        """``document/discardRecovery``: deletes the journal a dead server left of the document's
        file (offered as `Document.recovery`); its unsaved changes are gone for good, and the
        document is not touched. ``document`` is a `Document` or a handle. Raises `RpcError`
        ``NO_RECOVERY`` (-32025) when nothing is offered."""
        handle, doc = self._handle_of(document)

        def hook(result: None) -> None:
            if doc is not None:
                doc.recovery = None

        self.request("document/discardRecovery", {"document": handle}, timeout, hook=hook)

    def recoverable(self, *, timeout: float = 10.0) -> list[dict]:
        """``workspace/recoverable``: the journals that could be recovered, newest first, each
        ``{uri, date, edits, version, open}``: ``open`` True for the offer of a document open in
        this session, False for a dead server's journal of a file not offered here (open the
        file to have it offered)."""
        return self.request("workspace/recoverable", None, timeout)["journals"]

    # -- handoff ------------------------------------------------------------------------

    def set_client_state(self, document: Union["Document", str], state: Any, *,
                         timeout: float = 10.0) -> None:
        """``document/setClientState``: keeps ``state`` (any JSON value: a cursor, a selection, a
        scroll position; at most 1 MiB as JSON) for the document, to have it back from `restore`;
        ``None`` clears it."""
        handle, _ = self._handle_of(document)
        self.request("document/setClientState", {"document": handle, "state": state}, timeout)

    def snapshot(self, *, timeout: float = 30.0) -> dict:
        """``session/snapshot``: writes the open documents, their client states and their unsaved
        work (a copy of each journal) into a snapshot under the server's state directory. Returns
        ``{snapshot, documents}``: the token for `restore`, and each document's ``{uri, version,
        hasUnsavedChanges}``. Raises `RpcError` ``HANDOFF_UNAVAILABLE`` (-32027) without a usable
        state directory."""
        return self.request("session/snapshot", None, timeout)

    def restore(self, snapshot: str, *, timeout: float = 60.0) -> list[dict]:
        """``session/restore``: opens the snapshot's documents again (in this server or another with
        the same state directory), recovers their unsaved work with its undo history, and removes
        the snapshot. Returns one dict per document, in the snapshot's order: ``{uri, document,
        clientState, recovered, error}``, ``document`` being a `Document` (None when the file could
        not be opened: ``error`` says why, and its unsaved work waits in `recoverable`). Raises
        `RpcError` ``NO_SNAPSHOT`` (-32026), ``HANDOFF_UNAVAILABLE`` (-32027)."""

        def hook(result: dict) -> None:
            for entry in result["documents"]:
                if entry.get("document") is not None:
                    self._adopt(entry["document"])

        result = self.request("session/restore", {"snapshot": snapshot}, timeout, hook=hook)
        entries = []
        for entry in result["documents"]:
            entry = dict(entry)
            if entry.get("document") is not None:
                entry["document"] = self._adopt(entry["document"])
            entries.append(entry)
        return entries

    def discard_snapshot(self, snapshot: str, *, timeout: float = 10.0) -> None:
        """``session/discardSnapshot``: removes a snapshot not restored, with the unsaved work it
        holds. Raises `RpcError` ``NO_SNAPSHOT`` (-32026)."""
        self.request("session/discardSnapshot", {"snapshot": snapshot}, timeout)

    # -- coordination ---------------------------------------------------------------------

    def coordinate(self, path: Union[str, os.PathLike], intent: str, *,
                   destination: Union[str, os.PathLike, None] = None, timeout: float = 30.0) -> dict:
        """``workspace/coordinate``: a lease on a file for another party (NSFileCoordinator).
        ``intent`` is ``read`` (open documents of the file save their unsaved changes first),
        ``write``, ``delete`` or ``move`` (they stop editing and saving until the lease ends);
        ``destination`` (a path or URI) for ``move`` only. Returns ``{lease, intent, documents,
        saved}``. Raises `RpcError` ``COORDINATION_REFUSED`` (-32032, a save failed: ``data`` has
        ``document``, ``uri`` and the save's ``error``)."""
        params: dict[str, Any] = {"uri": _to_uri(path), "intent": intent}
        if destination is not None:
            params["destination"] = _to_uri(destination)
        return self.request("workspace/coordinate", params, timeout)

    def end_coordination(self, lease: Union[str, Mapping[str, Any]], *, timeout: float = 30.0) -> dict[str, str]:
        """``workspace/endCoordination``: ends a lease (its id, or what `coordinate` returned); the
        documents it held check their file and edit again. Returns each document's outcome by
        handle: ``unchanged``, ``reloaded``, ``conflict``, ``deleted``, ``moved``, ``closed`` or
        ``held`` (another lease still holds it). The local copies follow the notifications.
        Raises `RpcError` ``UNKNOWN_LEASE`` (-32033)."""
        lease_id = lease if isinstance(lease, str) else lease["lease"]
        result = self.request("workspace/endCoordination", {"lease": lease_id}, timeout)
        return {entry["document"]: entry["outcome"] for entry in result["documents"]}

    def _adopt(self, info: dict) -> "Document":
        # Runs first as a hook on the reader thread (so notifications that follow find the
        # document), then again in the caller, which finds it registered.
        with self._lock:
            doc = self._documents.get(info["document"])
            if doc is None:
                kind = info.get("kind", "text")
                doc = (ManagedDocument if kind == "managed" else PackageDocument if kind == "package" else Document)(self, info)
                self._documents[doc.handle] = doc
            return doc


# --------------------------------------------------------------------------- documents

class Document:
    """One open document, with a local copy of its text kept in step with the server's.

    Attributes: ``handle``, ``uri``, ``version``, ``text``, ``flags`` (the state flags, from
    ``document/stateChanged``), ``has_unsaved_changes``,
    ``info`` (the last document info), ``closed``, ``recovery`` (the unsaved changes of a dead
    server offered by `Client.open`, or None) and ``edited_elsewhere`` (another running server has
    unsaved changes to the file). Methods send requests against the local version, and update the
    local copy from the answers.
    """

    def __init__(self, client: Client, info: dict) -> None:
        self.client = client
        self.handle: str = info["document"]
        self.uri: str = info["uri"]
        self.version: int = info["version"]
        self.text: str = info.get("text", "")
        self.flags: list[str] = list(info.get("state", []))
        self.has_unsaved_changes: bool = info.get("hasUnsavedChanges", False)
        self.info: dict = info
        self.closed = False
        #: ``{date, edits, version, fileMatchesBase, cut}``: a dead server's journal of the file,
        #: offered by ``document/open`` until `recover` or `discard_recovery`; else None.
        self.recovery: Optional[dict] = info.get("recovery")
        #: Whether another running server had unsaved changes to the file when it was opened.
        self.edited_elsewhere: bool = info.get("editedElsewhere", False)
        #: Set when a notification's edits could not be applied; `sync` clears it.
        self.sync_error: Optional[Exception] = None

    def __repr__(self) -> str:
        return f"<Document {self.handle} {self.uri} v{self.version}>"

    @property
    def path(self) -> str:
        """The file's path (follows moves and saves as)."""
        return uri_to_path(self.uri)

    @property
    def encoding(self) -> str:
        """The session's position encoding."""
        return self.client.position_encoding

    # -- positions ---------------------------------------------------------------------

    def offset_at(self, line: int, character: int) -> int:
        """The index in `text` of a position in the session's encoding."""
        return position_to_offset(self.text, line, character, self.encoding)

    def position_at(self, offset: int) -> dict[str, int]:
        """The position, in the session's encoding, of an index in `text`."""
        return offset_to_position(self.text, offset, self.encoding)

    def range(self, start: int, end: Optional[int] = None) -> dict:
        """The range between two indices in `text` (an empty range when ``end`` is None)."""
        return {"start": self.position_at(start),
                "end": self.position_at(start if end is None else end)}

    # -- local copy (called with the client's lock held, on the reader thread) --------

    def _apply(self, edits: Iterable[Mapping[str, Any]], version: int) -> None:
        self.text = apply_text_edits(self.text, edits, self.encoding)
        self.version = version

    def _on_notification(self, note: Notification) -> None:
        p = note.params
        if note.method == "document/didChange":
            self._apply(p["edits"], p["version"])
            self.uri = p.get("uri", self.uri)
        elif note.method == "document/didMove":
            self.uri = p["uri"]
            self.info = {**self.info, "uri": p["uri"], "displayName": p.get("displayName"),
                         "fileType": p.get("fileType")}
        elif note.method == "document/stateChanged":
            self.flags = list(p.get("state", []))
            self.has_unsaved_changes = p.get("hasUnsavedChanges", self.has_unsaved_changes)
            self.uri = p.get("uri", self.uri)
            if p.get("reason") == "closed":
                self._forget()

    def _forget(self) -> None:
        self.closed = True
        self.client._documents.pop(self.handle, None)

    def _undo_like(self, method: str, params: dict, timeout: float) -> dict:
        sent = self.version

        def hook(result: dict) -> None:
            if self.version != sent:
                raise RuntimeError(f"{self.handle}: local version {self.version} moved from "
                                   f"{sent} before {method} was answered")
            if result.get("resolved", True):
                self._apply(result.get("edits", []), result["version"])

        return self.client.request(method, {"document": self.handle, **params,
                                            "version": sent}, timeout, hook=hook)

    # -- requests ----------------------------------------------------------------------

    def snapshot(self) -> tuple[str, int]:
        """The local text and its version, taken together (the reader thread may change both
        when another program changes the file)."""
        with self.client._lock:
            return self.text, self.version

    def replace(self, start: int, end: int, text: str, *, label: Optional[str] = None,
                merge: bool = False, timeout: float = 10.0) -> int:
        """Replace ``text[start:end]`` of the local copy by ``text``: the positions and the
        version are taken together, so a reload in between makes the server refuse the edit
        (-32801) rather than apply it at the wrong place."""
        with self.client._lock:
            r, version = self.range(start, end), self.version
        return self.edit(r, text, label=label, merge=merge, version=version, timeout=timeout)

    def edit(self, range: RangeLike, text: str, *, label: Optional[str] = None,
             merge: bool = False, version: Optional[int] = None, timeout: float = 10.0) -> int:
        """Replace ``range`` (None: the whole text) by ``text``; returns the new version.
        ``range`` is an LSP range or ``((line, character), (line, character))``; ``version`` the
        one it was computed against (the local version by default)."""
        return self.apply_edits([{"range": _as_range(range), "text": text}], label=label,
                                merge=merge, version=version, timeout=timeout)

    def apply_edits(self, edits: Sequence[Mapping[str, Any]], *, label: Optional[str] = None,
                    merge: bool = False, version: Optional[int] = None,
                    timeout: float = 10.0) -> int:
        """Several edits in one request, each against the text left by the one before."""
        wire = []
        for e in edits:
            r = _as_range(e.get("range"))
            wire.append({"text": e["text"]} if r is None else {"range": r, "text": e["text"]})
        sent = self.version if version is None else version
        params: dict = {"document": self.handle, "version": sent, "edits": wire}
        if label is not None or merge:
            params["undo"] = {"merge": merge, **({"label": label} if label is not None else {})}

        def hook(result: dict) -> None:
            if self.version != sent:
                raise RuntimeError(f"{self.handle}: local version {self.version} moved from "
                                   f"{sent} before the edit was answered; call sync()")
            self._apply(wire, result["version"])

        return self.client.request("document/edit", params, timeout, hook=hook)["version"]

    def pipeline(self, requests: Sequence[Sequence[Mapping[str, Any]]], *,
                 timeout: float = 30.0) -> int:
        """Send several `document/edit` requests at once, without waiting for each answer, and
        return the last version.

        ``requests`` holds each request's edits (as for `apply_edits`), each request against the
        text the one before left. Every accepted edit raises the version by exactly one, even one
        that changes nothing (README §8.5), so request *n* is sent against the local version plus
        *n*: one round trip for the lot. The local copy takes each answer in order. If one is
        refused (say a reload from disk came in between), the requests after it are refused too
        (-32801); the first error is raised, and `sync()` brings the local copy back.
        """
        with self.client._lock:
            base = self.version
        sent = []
        for n, edits in enumerate(requests):
            wire = []
            for e in edits:
                r = _as_range(e.get("range"))
                wire.append({"text": e["text"]} if r is None else {"range": r, "text": e["text"]})

            def hook(result: dict, wire: list = wire, expected: int = base + n) -> None:
                if self.version == expected:
                    self._apply(wire, result["version"])

            params = {"document": self.handle, "version": base + n, "edits": wire}
            sent.append(self.client.send_request("document/edit", params, hook=hook))
        last, first_error = base, None
        for rid, pending in sent:
            try:
                last = self.client.wait(rid, pending, timeout)["version"]
            except RpcError as error:
                first_error = first_error or error
        if first_error is not None:
            raise first_error
        return last

    def read(self, range: RangeLike = None, *, timeout: float = 10.0) -> str:
        """The server's text (of ``range``, or whole); does not touch the local copy."""
        params: dict = {"document": self.handle}
        r = _as_range(range)
        if r is not None:
            params["range"] = r
        return self.client.request("document/read", params, timeout)["text"]

    def sync(self, timeout: float = 10.0) -> None:
        """Replace the local copy by the server's text and version."""
        def hook(result: dict) -> None:
            self.text, self.version = result["text"], result["version"]
            self.sync_error = None
        self.client.request("document/read", {"document": self.handle}, timeout, hook=hook)

    def undo(self, timeout: float = 10.0) -> dict:
        """``document/undo``; returns ``{version, edits}`` (edits already applied locally)."""
        return self._undo_like("document/undo", {}, timeout)

    def redo(self, timeout: float = 10.0) -> dict:
        """``document/redo``; returns ``{version, edits}`` (edits already applied locally)."""
        return self._undo_like("document/redo", {}, timeout)

    def state(self, timeout: float = 10.0) -> dict:
        """``document/state``: flags, ``hasUnsavedChanges``, ``canUndo``, ``canRedo``, labels, etag."""
        result = self.client.request("document/state", {"document": self.handle}, timeout)
        self.flags = list(result["state"])
        self.has_unsaved_changes = result["hasUnsavedChanges"]
        return result

    def save(self, to: Union[str, os.PathLike, None] = None, force: bool = False, *,
             timeout: float = 60.0) -> dict:
        """``document/save`` (to another file with ``to``, a path or URI); returns its result."""
        params: dict = {"document": self.handle}
        if to is not None:
            params["to"] = _to_uri(to)
        if force:
            params["force"] = True

        def hook(result: dict) -> None:
            self.uri = result["uri"]

        return self.client.request("document/save", params, timeout, hook=hook)

    def revert(self, timeout: float = 60.0) -> dict:
        """``document/revert``: the file's text again (one undo step); returns the document info."""
        def hook(info: dict) -> None:
            self.text, self.version, self.uri = info["text"], info["version"], info["uri"]
            self.info = info

        return self.client.request("document/revert", {"document": self.handle}, timeout,
                                   hook=hook)

    def close(self, save: str = "ifChanged", timeout: float = 60.0) -> bool:
        """``document/close`` (``save``: ``ifChanged`` or ``never``); True if it saved first."""
        def hook(result: dict) -> None:
            self._forget()

        return self.client.request("document/close", {"document": self.handle, "save": save},
                                   timeout, hook=hook)["saved"]

    def resolve_conflict(self, resolution: str, text: Optional[str] = None, *,
                         timeout: float = 10.0) -> dict:
        """``document/resolveConflict`` (``mine``, ``theirs`` or ``merge``, with ``text`` for a
        merge of the client's own). A merge with overlapping changes answers ``resolved: False``
        and its ``conflicts``, and changes nothing."""
        params: dict = {"resolution": resolution}
        if text is not None:
            params["text"] = text
        return self._undo_like("document/resolveConflict", params, timeout)

    def versions(self, timeout: float = 10.0) -> list[dict]:
        """``document/versions``: the earlier versions kept of the file, newest first."""
        return self.client.request("document/versions", {"document": self.handle},
                                   timeout)["versions"]

    def read_version(self, id: str, timeout: float = 10.0) -> str:
        """``document/readVersion``: an earlier version's text."""
        return self.client.request("document/readVersion", {"document": self.handle, "id": id},
                                   timeout)["text"]

    def restore_version(self, id: str, timeout: float = 10.0) -> dict:
        """``document/restoreVersion``: an earlier version's text as an unsaved, undoable change."""
        return self._undo_like("document/restoreVersion", {"id": id}, timeout)

    def delete_version(self, id: str, timeout: float = 10.0) -> None:
        """``document/deleteVersion``: removes one kept version (``document/didChangeVersions``
        then lists it in ``removed``)."""
        self.client.request("document/deleteVersion", {"document": self.handle, "id": id}, timeout)

    def diff_versions(self, from_id: str, to_id: Optional[str] = None, timeout: float = 10.0) -> list[dict]:
        """``document/diffVersions``: the edits (in order, each against the text the ones before it
        made) that turn version ``from_id``'s text into ``to_id``'s, or into the current text."""
        params: dict = {"document": self.handle, "from": from_id}
        if to_id is not None:
            params["to"] = to_id
        return self.client.request("document/diffVersions", params, timeout)["edits"]

    def recover(self, timeout: float = 10.0) -> dict:
        """`Client.recover` of this document: the unsaved changes offered in `recovery`."""
        return self.client.recover(self, timeout=timeout)

    def discard_recovery(self, timeout: float = 10.0) -> None:
        """`Client.discard_recovery` of this document."""
        self.client.discard_recovery(self, timeout=timeout)

    def set_client_state(self, state: Any, timeout: float = 10.0) -> None:
        """`Client.set_client_state` of this document."""
        self.client.set_client_state(self, state, timeout=timeout)


# --------------------------------------------------------------------------- packages

def _sql_value(value: Any) -> Any:
    """A Python value as an SQL param: bytes go as ``{"base64": ...}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _python_value(value: Any) -> Any:
    """An SQL value from a row: ``{"base64": ...}`` becomes bytes."""
    if isinstance(value, dict) and set(value) == {"base64"}:
        return base64.b64decode(value["base64"])
    return value


class PackageDocument:
    """A directory that is one document (README §13): entries read and changed one by one, each
    change one undoable step and one version, saved together by `save` (a staged tree swapped in
    whole). Attributes: ``handle``, ``uri``, ``kind``, ``version``, ``flags``,
    ``has_unsaved_changes``, ``entries`` (``[{path, kind, size}]``, as last reported), ``info``,
    ``closed``, ``changes`` (the ``document/didChange`` params of reloads, oldest first),
    ``recovery`` (a dead server's journal of the package offered by ``open``, README §13.7, or
    None: `recover` or `discard_recovery`).
    Requests carry the local version, so they can be pipelined; the answers update it."""

    def __init__(self, client: Client, info: dict) -> None:
        self.client = client
        self.handle: str = info["document"]
        self.uri: str = info["uri"]
        self.kind: str = info.get("kind", "package")
        self.version: int = info["version"]
        self.flags: list[str] = list(info.get("state", []))
        self.has_unsaved_changes: bool = info.get("hasUnsavedChanges", False)
        self.entries: list[dict] = list(info.get("entries", []))
        self.info: dict = info
        self.closed = False
        self.changes: list[dict] = []
        self.recovery: Optional[dict] = info.get("recovery")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.handle} {self.uri} v{self.version}>"

    @property
    def path(self) -> str:
        return uri_to_path(self.uri)

    def _on_notification(self, note: Notification) -> None:
        p = note.params
        if note.method == "document/didChange":
            self.version = p["version"]
            self.changes.append(p)
        elif note.method == "document/stateChanged":
            self.flags = list(p.get("state", []))
            self.has_unsaved_changes = p.get("hasUnsavedChanges", self.has_unsaved_changes)
            self.uri = p.get("uri", self.uri)  # a save as moves the document
            if p.get("reason") == "closed":
                self._forget()

    def _forget(self) -> None:
        self.closed = True
        self.client._documents.pop(self.handle, None)

    def _versioned(self, method: str, params: dict, timeout: float) -> dict:
        def hook(result: dict) -> None:
            self.version = result["version"]

        return self.client.request(method, {"document": self.handle, **params, "version": self.version},
                                   timeout, hook=hook)

    def _take_info(self, info: dict) -> None:
        self.info = info
        self.version = info["version"]
        self.flags = list(info.get("state", []))
        self.has_unsaved_changes = info.get("hasUnsavedChanges", False)
        self.entries = list(info.get("entries", []))

    def read_entry(self, path: str, timeout: float = 30.0) -> bytes:
        """``document/readEntry``: the entry's bytes (the unsaved ones when it was written)."""
        result = self.client.request("document/readEntry", {"document": self.handle, "path": path, "as": "base64"}, timeout)
        return base64.b64decode(result["base64"])

    def read_text(self, path: str, timeout: float = 30.0) -> str:
        """``document/readEntry`` as text (``RpcError`` NOT_TEXT when it is not UTF-8)."""
        return self.client.request("document/readEntry", {"document": self.handle, "path": path, "as": "text"}, timeout)["text"]

    def write_entry(self, path: str, content: Union[str, bytes], *, label: Optional[str] = None,
                    timeout: float = 30.0) -> int:
        """``document/writeEntry``: text (as UTF-8) or bytes; one undoable step. Returns the version."""
        params: dict = {"path": path}
        if isinstance(content, str):
            params["text"] = content
        else:
            params["base64"] = base64.b64encode(bytes(content)).decode("ascii")
        if label is not None:
            params["label"] = label
        return self._versioned("document/writeEntry", params, timeout)["version"]

    def delete_entry(self, path: str, *, label: Optional[str] = None, timeout: float = 30.0) -> int:
        """``document/deleteEntry``: a file, a symbolic link or an empty directory."""
        params: dict = {"path": path}
        if label is not None:
            params["label"] = label
        return self._versioned("document/deleteEntry", params, timeout)["version"]

    def undo(self, timeout: float = 30.0) -> dict:
        """``document/undo``: ``{version, entries, store}``."""
        return self._versioned("document/undo", {}, timeout)

    def redo(self, timeout: float = 30.0) -> dict:
        """``document/redo``: ``{version, entries, store}``."""
        return self._versioned("document/redo", {}, timeout)

    def state(self, timeout: float = 10.0) -> dict:
        """``document/state``: the package's info now (entries, flags, undo)."""
        info = self.client.request("document/state", {"document": self.handle}, timeout)
        self._take_info(info)
        return info

    def save(self, to: Union[str, os.PathLike, None] = None, force: bool = False, *, timeout: float = 120.0) -> dict:
        """``document/save``: ``{version, uri, durable, method, entries}``. With ``to`` (a path or
        URI), a save as: the package is saved there and the document moves there (``uri``); the
        package it was saved from is left as it was. ``force`` replaces a directory at ``to``."""
        params: dict = {"document": self.handle}
        if to is not None:
            params["to"] = _to_uri(to)
        if force:
            params["force"] = True

        def hook(result: dict) -> None:
            self.uri = result["uri"]

        return self.client.request("document/save", params, timeout, hook=hook)

    def revert(self, timeout: float = 60.0) -> dict:
        """``document/revert``: the package as it is on disk; the history is dropped."""
        info = self.client.request("document/revert", {"document": self.handle}, timeout)
        self._take_info(info)
        return info

    def resolve_conflict(self, resolution: str, *, timeout: float = 60.0) -> dict:
        """``document/resolveConflict`` with ``mine`` or ``theirs``."""
        info = self._versioned("document/resolveConflict", {"resolution": resolution}, timeout)
        self._take_info(info)
        return info

    def recover(self, timeout: float = 60.0) -> dict:
        """``document/recover``: the unsaved changes of a dead server's journal of the package
        (``recovery``), with their undo history. Returns ``{version, entries, inConflict,
        hasUnsavedChanges}``; ``entries`` names what the recovery wrote or deleted. Raises
        `RpcError` ``NO_RECOVERY`` (-32025) or ``UNSAVED_CHANGES`` (-32023)."""
        def hook(result: dict) -> None:
            self.version = result["version"]
            self.has_unsaved_changes = result["hasUnsavedChanges"]
            self.recovery = None

        result = self.client.request("document/recover", {"document": self.handle}, timeout, hook=hook)
        self.state()
        return result

    def discard_recovery(self, timeout: float = 10.0) -> None:
        """``document/discardRecovery``: deletes the journal offered as ``recovery``."""
        def hook(result: None) -> None:
            self.recovery = None

        self.client.request("document/discardRecovery", {"document": self.handle}, timeout, hook=hook)

    def close(self, save: str = "ifChanged", timeout: float = 120.0) -> bool:
        """``document/close``; True if it saved first."""
        def hook(result: dict) -> None:
            self._forget()

        return self.client.request("document/close", {"document": self.handle, "save": save},
                                   timeout, hook=hook)["saved"]


class ManagedDocument(PackageDocument):
    """A managed document (UIManagedDocument's role): a package holding a SQLite store, changed
    by `execute` (one transaction per call, one undoable step) and read by `query`; `save`
    publishes the store and the additional content together. ``store`` is ``{userVersion,
    migrated: {from, to}, readOnly}``."""

    def __init__(self, client: Client, info: dict) -> None:
        super().__init__(client, info)
        self.store: dict = info.get("store", {})

    def execute(self, sql: str, params: Union[Sequence[Any], Mapping[str, Any], None] = None, *,
                label: Optional[str] = None, timeout: float = 60.0) -> dict:
        """``store/execute``: ``{version, changes, lastInsertRowid, undoable}``. ``params``: a
        sequence (``?``) or a mapping (``:name``); bytes go as blobs. Raises `RpcError`
        ``STORE_ERROR`` (SQLite's code and message in ``data``) or ``STATEMENT_REFUSED``."""
        payload: dict = {"sql": sql}
        if isinstance(params, Mapping):
            payload["params"] = {name: _sql_value(value) for name, value in params.items()}
        elif params is not None:
            payload["params"] = [_sql_value(value) for value in params]
        if label is not None:
            payload["label"] = label
        return self._versioned("store/execute", payload, timeout)

    def query(self, sql: str, params: Union[Sequence[Any], Mapping[str, Any], None] = None, *,
              timeout: float = 60.0) -> list[tuple]:
        """``store/query``: the rows as tuples (blobs as bytes). `columns` holds the last names."""
        payload: dict = {"document": self.handle, "sql": sql}
        if isinstance(params, Mapping):
            payload["params"] = {name: _sql_value(value) for name, value in params.items()}
        elif params is not None:
            payload["params"] = [_sql_value(value) for value in params]
        result = self.client.request("store/query", payload, timeout)
        self.columns: list[str] = result["columns"]
        return [tuple(_python_value(value) for value in row) for row in result["rows"]]

    def _take_info(self, info: dict) -> None:
        super()._take_info(info)
        self.store = info.get("store", self.store)
