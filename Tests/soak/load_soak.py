#!/usr/bin/env python3
"""Load and soak (issue 15, point 6): many open documents, pipelined writers, autosave and another program.

One `docsession` server, autosave on (afterDelay, 2000 ms), a --state-dir in the temp dir:

1. opening: --documents files of --size bytes each (generated in a temp dir under /var/tmp, not a
   tmpfs), opened with pipelined `document/open` requests (a window of 64);
2. writing, for --seconds: --writers writers, each owning --docs-per-writer documents no one else
   touches, send `document/edit` requests without waiting for the answers (--window requests in
   flight each), each naming the version it expects (every accepted edit raises the version by one;
   what an edit that changes nothing does is probed first, and the model follows it): inserts,
   deletes, replacements, same-text replacements, requests of several edits, whole-text
   replacements, now and then an empty `edits` list and a deliberately stale edit (expected to be
   refused with -32801 and the right `data.version`). A writer works on one of its documents for a
   burst, then switches; now and then it saves (`document/save`). After about --lifetime edits it
   closes the document and opens it again, as an editor closes and reopens a file: mostly once
   autosave has saved it (the close then has nothing to save: `saved` must be false), a quarter of
   the time at once, with unsaved edits (the close saves them). Closing also bounds each document's
   undo history, which keeps every edit of a session (64 MiB per document): without it the
   history alone grows RSS by ~260 bytes per edit. Autosave saves the documents a writer has left
   alone for two seconds. Meanwhile another program (external_writer.py, a process of its own)
   rewrites --external-docs files that no writer edits, about --external-rate times a second; the
   server reloads them (`document/didChange`, reason `external`), and the driver applies the notified
   edits to its copy. No file a writer edits is changed by another program: a conflict would stop
   autosave until resolved, which this model does not follow.
3. checking: the writers stop, every answer is awaited, the reloads are awaited (each external
   document's notified text reaches the other program's last text), autosave is awaited (every
   written document without unsaved changes), every document is read (`document/read`) and compared
   with the model (the writers' texts and versions, the external program's texts, the generated
   text of the rest at version 1), and every file on disk likewise; then shutdown, and exit 0.

Checked along the way: every answer (each edit's version; each save's version, size, uri and what the
file holds right after; each close's `saved` and the file after it, exactly; each reopen's text),
every notification (only the expected reasons for each kind of document, reload versions one by one,
the file after each `saved`), and every error response is a failure unless the model expected it.

The server's RSS (/proc/PID/status VmRSS) is sampled every second and drawn (rss_plot.py). Reported:
memory per open document (RSS after opening minus RSS before, over the count) and "no growth at
steady state": every RSS sample of the last third of the writing phase within 5% of the first sample
of the steady state, which begins after a warm-up, the first third of writing (the written
documents' working set grows then by 8 to 10 MiB, whatever the run's length). Exit status 1 when
anything failed.
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import os
import random
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CONTENT_MODIFIED = -32801
RING = 64  # versions of a written document whose text can be rebuilt, to check a file after a save

WORDS = (
    "the", "of", "document", "session", "edit", "version", "save", "autosave", "watcher", "reload",
    "conflict", "buffer", "rope", "undo", "redo", "clean", "point", "file", "disk", "rename", "temp",
    "fsync", "inode", "server", "client", "pipeline", "window", "request", "answer", "soak", "load",
    "café", "naïve", "Straße", "Ærø", "señal", "数据", "文档", "ключ", "λόγος", "😀", "🍐", "a", "is", "to",
)
SNIPPET_ALPHABET = "abcdefghijklmnopqrstuvwxyz      ABCXYZ0123456789.,;:-_()é中ß\n"
SNIPPET_RARE = ("😀", "🍐", "𝄞", "e\u0301", "\t", "\"", "\\", "}", "{")


def log(message: str) -> None:
    print(f"[soak-load {time.strftime('%H:%M:%S')}] {message}", flush=True)


def mib(kib: float) -> float:
    return kib / 1024.0


# ----------------------------------------------------------------------------------------------
# Text and positions (utf-32: a position's character counts Unicode scalars, as Python's str does)


def position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, line_start), offset - line_start


def range_json(text: str, start: int, end: int) -> str:
    sl, sc = position(text, start)
    if end == start:
        el, ec = sl, sc
    else:
        el, ec = position(text, end)
    return '{"start":{"line":%d,"character":%d},"end":{"line":%d,"character":%d}}' % (sl, sc, el, ec)


def offset_of(text: str, line: int, character: int) -> int:
    start = 0
    for _ in range(line):
        found = text.find("\n", start)
        if found < 0:
            raise ValueError(f"line {line} is past the end of the text")
        start = found + 1
    end = text.find("\n", start)
    length = (end if end >= 0 else len(text)) - start
    if character > length:
        raise ValueError(f"character {character} is past the end of line {line} ({length})")
    return start + character


def apply_text_edits(text: str, edits: list) -> str:
    for edit in edits:
        rng = edit.get("range")
        if rng is None:
            text = edit["text"]
            continue
        start = offset_of(text, rng["start"]["line"], rng["start"]["character"])
        end = offset_of(text, rng["end"]["line"], rng["end"]["character"])
        text = text[:start] + edit["text"] + text[end:]
    return text


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


# ----------------------------------------------------------------------------------------------
# Failures and counters


class Failures:
    def __init__(self) -> None:
        self.count = 0
        self.shown: list[str] = []
        self.kinds: collections.Counter = collections.Counter()

    def add(self, kind: str, message: str) -> None:
        self.count += 1
        self.kinds[kind] += 1
        if len(self.shown) < 40:
            self.shown.append(f"{kind}: {message}")
        if self.kinds[kind] <= 3:
            log(f"FAILURE {kind}: {message}")


# ----------------------------------------------------------------------------------------------
# The connection: one pipe each way, non-blocking, polled by the one thread that drives everything


class ServerGone(Exception):
    pass


class Connection:
    def __init__(self, process: subprocess.Popen, on_notification, failures: Failures) -> None:
        self.process = process
        self.write_fd = process.stdin.fileno()
        self.read_fd = process.stdout.fileno()
        os.set_blocking(self.write_fd, False)
        os.set_blocking(self.read_fd, False)
        self.poller = select.poll()
        self.poller.register(self.read_fd, select.POLLIN)
        self.polling_write = False
        self.out = bytearray()
        self.inbuf = bytearray()
        self.next_id = 1
        self.pending: dict[int, object] = {}
        self.on_notification = on_notification
        self.failures = failures
        self.closed = False
        self.messages_in = 0

    def request(self, method: str, params: str, callback) -> int:
        rid = self.next_id
        self.next_id = rid + 1
        body = ('{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}' % (rid, method, params)).encode("utf-8")
        self.out += b"Content-Length: %d\r\n\r\n" % len(body)
        self.out += body
        self.pending[rid] = callback
        return rid

    def notify(self, method: str, params: str) -> None:
        body = ('{"jsonrpc":"2.0","method":"%s","params":%s}' % (method, params)).encode("utf-8")
        self.out += b"Content-Length: %d\r\n\r\n" % len(body)
        self.out += body

    def _write(self) -> None:
        try:
            written = os.write(self.write_fd, self.out)
        except BlockingIOError:
            return
        except BrokenPipeError:
            raise ServerGone("the server closed its input")
        del self.out[:written]

    def pump(self, timeout: float) -> None:
        """Writes what it can, waits up to `timeout` seconds for input, reads and dispatches it."""
        if self.out:
            self._write()
        want_write = bool(self.out)
        if want_write != self.polling_write:
            if want_write:
                self.poller.register(self.write_fd, select.POLLOUT)
            else:
                self.poller.unregister(self.write_fd)
            self.polling_write = want_write
        events = self.poller.poll(max(0, int(timeout * 1000)))
        for fd, mask in events:
            if fd == self.write_fd:
                if mask & (select.POLLERR | select.POLLHUP):
                    raise ServerGone("the server closed its input")
                self._write()
            elif fd == self.read_fd:
                self._read()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                self.closed = True
                self.poller.unregister(self.read_fd)
                break
            self.inbuf += chunk
            if len(chunk) < (1 << 20):
                break
        self._parse()

    def _parse(self) -> None:
        buf = self.inbuf
        pos = 0
        size = len(buf)
        while True:
            header_end = buf.find(b"\r\n\r\n", pos)
            if header_end < 0:
                break
            header = bytes(buf[pos:header_end])
            length = -1
            for line in header.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length < 0:
                self.failures.add("framing", f"a header without Content-Length: {header!r}")
                pos = header_end + 4
                continue
            start = header_end + 4
            if size - start < length:
                break
            body = bytes(buf[start:start + length])
            pos = start + length
            self.messages_in += 1
            self._dispatch(body)
        if pos:
            del buf[:pos]

    def _dispatch(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError as error:
            self.failures.add("json", f"the server wrote a body that is not JSON ({error}): {body[:200]!r}")
            return
        if "id" in message and ("result" in message or "error" in message):
            callback = self.pending.pop(message["id"], None)
            if callback is None:
                self.failures.add("rpc", f"an answer to no request: {body[:300]!r}")
                return
            callback(message)
        elif "method" in message and "id" not in message:
            self.on_notification(message)
        else:
            self.failures.add("rpc", f"an unexpected message: {body[:300]!r}")


# ----------------------------------------------------------------------------------------------
# The model


class Doc:
    """One file, and the driver's model of its document."""

    __slots__ = (
        "index", "path", "uri", "kind", "handle", "version", "text", "original_sha", "writer", "busy",
        "closing", "retiring", "clean_version", "changed_version", "edits_left", "history", "opens", "reloads",
        "last_save_answered",
    )

    def __init__(self, index: int, path: str, kind: str, original_sha: str) -> None:
        self.index = index
        self.path = path
        self.uri = "file://" + path
        self.kind = kind  # "writer", "external" or "still"
        self.handle = ""
        self.version = 1
        self.text = ""  # writers' and external documents' text, as the server must hold it
        self.original_sha = original_sha
        self.writer = None
        self.busy = False  # no more edits for now: retiring, closing or reopening
        self.closing = False  # a close (and the reopen after it) is on its way
        self.retiring = False  # waiting to be clean (autosaved) to close without a save
        self.clean_version = 1  # the version of the last `saved` notification without unsaved changes
        self.changed_version = 0  # the version made by the last request that changed the text
        self.edits_left = 0
        # (version, start, removed, inserted) of the last RING changes, newest last: with the text,
        # the text of each of those versions can be rebuilt (a no-op request leaves a None entry).
        self.history: collections.deque = collections.deque(maxlen=RING)
        self.opens = 0
        self.reloads = 0
        self.last_save_answered = (None, 0)  # (handle, version) of the last save answered

    def texts_back(self):
        """Yields (version, text) for the current version and each remembered one, newest first."""
        text = self.text
        version = self.version
        yield version, text
        for (entry_version, start, removed, inserted) in reversed(self.history):
            # entry_version is the version this change produced: undo it to get version - 1
            if entry_version != version:
                return
            if start is not None:
                text = text[:start] + removed + text[start + len(inserted):] if start >= 0 else removed
            version -= 1
            yield version, text

    def oldest_known_version(self) -> int:
        return self.history[0][0] - 1 if self.history else self.version


# ----------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, args) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.failures = Failures()
        self.counts: collections.Counter = collections.Counter()
        self.docs: list[Doc] = []
        self.by_handle: dict[str, Doc] = {}
        self.phase = "starting"
        self.phases: list[tuple[str, float, float]] = []
        # t, VmRSS KiB, RssAnon KiB, phase, edits acknowledged, documents opened, threads
        self.samples: list[tuple[float, int, int, str, int, int, int]] = []
        self.t0 = time.monotonic()
        self.stopping = False
        self.noop_bumps = {"empty": True, "same": True}
        self.snippets = []
        self.process = None
        self.conn = None

    # -- phases and sampling ------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def enter(self, phase: str) -> None:
        t = self.now()
        if self.phases:
            name, start, _ = self.phases[-1]
            self.phases[-1] = (name, start, t)
        self.phases.append((phase, t, t))
        self.phase = phase
        log(f"phase: {phase} (t = {t:.1f} s)")

    def rss(self) -> tuple[int, int, int]:
        rss = anon = threads = 0
        try:
            with open(f"/proc/{self.process.pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"VmRSS:"):
                        rss = int(line.split()[1])
                    elif line.startswith(b"RssAnon:"):
                        anon = int(line.split()[1])
                    elif line.startswith(b"Threads:"):
                        threads = int(line.split()[1])
        except OSError:
            pass
        return rss, anon, threads

    def sampler(self, stop: threading.Event) -> None:
        tick = time.monotonic()
        while True:
            rss, anon, threads = self.rss()
            if rss:
                self.samples.append((self.now(), rss, anon, self.phase, self.counts["edits acknowledged"],
                                     self.counts["opens"], threads))
            tick += 1.0
            if stop.wait(max(0.0, tick - time.monotonic())):
                return

    # -- files --------------------------------------------------------------------------------

    def generate(self, root: str) -> None:
        args = self.args
        rng = random.Random(args.seed * 7919 + 1)
        lines = []
        total = 0
        while total < 600_000:
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
            lines.append(line)
            total += len(line) + 1
        corpus = "\n".join(lines) + "\n"
        per_dir = 100
        made_dirs = set()
        for index in range(args.documents):
            directory = os.path.join(root, "docs", f"d{index // per_dir:03d}")
            if directory not in made_dirs:
                os.makedirs(directory, exist_ok=True)
                made_dirs.add(directory)
            path = os.path.join(directory, f"f{index:05d}.txt")
            header = f"document {index:05d}\n"
            start = corpus.find("\n", rng.randrange(0, len(corpus) - 2 * args.size)) + 1
            take = args.size - len(header)
            data = (header + corpus[start:start + take]).encode("utf-8")
            while len(data) > args.size:
                take -= max(1, (len(data) - args.size) // 2)
                data = (header + corpus[start:start + take]).encode("utf-8")
            with open(path, "wb") as file:
                file.write(data)
            self.docs.append(Doc(index, path, "still", sha1(data)))
        # Who does what: writers' documents and external ones spread over all directories.
        order = list(range(args.documents))
        rng.shuffle(order)
        wanted = args.writers * args.docs_per_writer
        for i in order[:wanted]:
            self.docs[i].kind = "writer"
        for i in order[wanted:wanted + args.external_docs]:
            self.docs[i].kind = "external"
        for doc in self.docs:
            if doc.kind != "still":
                with open(doc.path, encoding="utf-8") as file:
                    doc.text = file.read()
        # Inserted texts: a pool, JSON-encoded once.
        for _ in range(4096):
            n = rng.choice((1, 1, 1, 2, 3, 5, 8, 13, 30))
            chars = [rng.choice(SNIPPET_ALPHABET) for _ in range(n)]
            if rng.random() < 0.1:
                chars.insert(rng.randrange(len(chars) + 1), rng.choice(SNIPPET_RARE))
            snippet = "".join(chars)
            self.snippets.append((snippet, json.dumps(snippet, ensure_ascii=False)))

    # -- the server ---------------------------------------------------------------------------

    def start_server(self, root: str) -> None:
        binary = self.args.binary
        state_dir = self.args.state_dir or os.path.join(root, "state")
        self.stderr_path = os.path.join(root, "server-stderr.log")
        stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [binary, "--state-dir", state_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        )
        stderr.close()
        self.conn = Connection(self.process, self.on_notification, self.failures)

    def call(self, method: str, params: str, deadline: float = 60.0):
        """A request whose answer is awaited (pumping everything else meanwhile)."""
        box = []
        self.conn.request(method, params, box.append)
        self.wait_for(lambda: box, deadline, f"the answer to {method}")
        return box[0]

    def wait_for(self, condition, seconds: float, what: str) -> bool:
        deadline = time.monotonic() + seconds
        while not condition():
            self.check_alive()
            left = deadline - time.monotonic()
            if left <= 0:
                self.failures.add("timeout", f"{what}: not within {seconds:.0f} s")
                return False
            self.conn.pump(min(0.2, left))
        return True

    def check_alive(self) -> None:
        if self.conn.closed:
            raise ServerGone("the server closed its output" + (
                f" and exited with status {self.process.poll()}" if self.process.poll() is not None else ""))
        if self.process.poll() is not None:
            raise ServerGone(f"the server exited with status {self.process.returncode}")

    def initialize(self) -> None:
        delay = self.args.autosave_delay
        answer = self.call("initialize", json.dumps({
            "processId": os.getpid(),
            "clientInfo": {"name": "load-soak"},
            "capabilities": {"general": {"positionEncodings": ["utf-32"]}},
            "initializationOptions": {"autosave": {"policy": "afterDelay", "delay": delay}},
        }))
        if "error" in answer:
            raise SystemExit(f"initialize failed: {answer['error']}")
        capabilities = answer["result"]["capabilities"]
        expected = {"positionEncoding": "utf-32", "autosave": {"policy": "afterDelay", "delay": delay},
                    "watchFiles": True, "versions": not self.args.state_dir}
        for key, value in expected.items():
            if capabilities.get(key) != value:
                self.failures.add("initialize", f"capabilities.{key} is {capabilities.get(key)!r}, expected {value!r}")
        self.conn.notify("initialized", "{}")

    def probe_noop_rule(self, root: str) -> None:
        """Whether an edit that changes nothing raises the version (the rule of issue 15) or keeps it
        (the rule before it): the model follows what the server does, and says which."""
        path = os.path.join(root, "probe.txt")
        with open(path, "w", encoding="utf-8") as file:
            file.write("probe\n")
        opened = self.call("document/open", json.dumps({"uri": "file://" + path, "includeText": False}))
        handle = opened["result"]["document"]
        probe = Doc(-1, path, "probe", "")
        self.by_handle[handle] = probe
        empty = self.call("document/edit", '{"document":"%s","version":1,"edits":[]}' % handle)
        after_empty = empty["result"]["version"]
        same = self.call("document/edit", '{"document":"%s","version":%d,"edits":[{"range":%s,"text":"p"}]}'
                         % (handle, after_empty, range_json("probe\n", 0, 1)))
        after_same = same["result"]["version"]
        self.noop_bumps = {"empty": after_empty == 2, "same": after_same == after_empty + 1}
        closed = self.call("document/close", '{"document":"%s","save":"never"}' % handle)
        if "error" in closed:
            self.failures.add("probe", f"closing the probe document: {closed['error']}")
        rule = ("raises the version by one (issue 15's rule)" if all(self.noop_bumps.values()) else
                f"keeps the version for {[k for k, v in self.noop_bumps.items() if not v]} (the rule before issue 15)")
        self.noop_rule = rule
        log(f"an edit that changes nothing {rule}")

    # -- phase 1: opening ----------------------------------------------------------------------

    def open_all(self) -> None:
        window = 64
        self.open_started = time.monotonic()
        for doc in self.docs:
            while len(self.conn.pending) >= window:
                self.conn.pump(0.5)
                self.check_alive()
            self.conn.request("document/open", '{"uri":"%s","includeText":false}' % doc.uri,
                              functools.partial(self.on_first_open, doc))
        self.wait_for(lambda: not self.conn.pending, 300, "the opens' answers")
        self.open_seconds = time.monotonic() - self.open_started

    def on_first_open(self, doc: Doc, message) -> None:
        if "error" in message:
            self.failures.add("open", f"{doc.path}: {message['error']}")
            return
        result = message["result"]
        doc.handle = result["document"]
        doc.opens = 1
        if result.get("version") != 1 or result.get("hasUnsavedChanges") or result.get("state") != [] \
                or result.get("uri") != doc.uri:
            self.failures.add("open", f"{doc.path}: unexpected document info {result}")
        if doc.handle in self.by_handle:
            self.failures.add("open", f"{doc.path}: handle {doc.handle} already names {self.by_handle[doc.handle].path}")
        self.by_handle[doc.handle] = doc
        self.counts["opens"] += 1

    # -- notifications --------------------------------------------------------------------------

    def on_notification(self, message) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        handle = params.get("document")
        doc = self.by_handle.get(handle)
        if doc is None:
            self.failures.add("notification", f"{method} about an unknown handle: {json.dumps(message)[:300]}")
            return
        if method == "document/stateChanged":
            self.on_state_changed(doc, params)
        elif method == "document/didChange":
            self.on_did_change(doc, params)
        elif method == "document/didChangeVersions":
            self.on_versions_changed(doc, params)
        else:
            self.failures.add("notification", f"unexpected {method} about {doc.kind} {doc.path}: {json.dumps(params)[:300]}")

    def on_versions_changed(self, doc: Doc, params) -> None:
        """A save keeps the text as a version, written in the background and told when it is
        (README §8.21); versions the byte budget or the thinning drop are told as `removed`. Only
        saved versions of the document's own file may be added, and nothing is resolved here."""
        added = params.get("added") or []
        if params.get("uri") != doc.uri or params.get("resolved") or any(
                v.get("kind") != "saved" or v.get("resolved") is not True for v in added):
            self.failures.add("notification", f"unexpected versions change about {doc.kind} {doc.path}: {json.dumps(params)[:300]}")
        self.counts["versions kept"] += len(added)

    def on_state_changed(self, doc: Doc, params) -> None:
        reason = params.get("reason")
        if doc.kind == "probe":
            if reason == "closed":
                self.by_handle.pop(params["document"], None)
            return
        self.counts[f"stateChanged {reason}"] += 1
        if doc.kind != "writer":
            self.failures.add("notification", f"stateChanged {reason} about {doc.kind} document {doc.path}: {json.dumps(params)[:400]}")
            return
        if "error" in params:
            self.failures.add("notification", f"stateChanged {reason} with an error about {doc.path}: {json.dumps(params)[:400]}")
            return
        state = params.get("state")
        if reason == "edited":
            if state != [] or not params.get("hasUnsavedChanges"):
                self.failures.add("notification", f"edited: {json.dumps(params)[:300]}")
        elif reason == "saved":
            if params.get("autosave"):
                self.counts["autosaves (saved notifications)"] += 1
            # A save that ends while a close waits for it leaves the close's editingDisabled set.
            if state != [] and not (doc.closing and state == ["editingDisabled"]):
                self.failures.add("notification", f"saved with state {state}: {doc.path} ({json.dumps(params)[:300]})")
            # The file holds a version saved by now: the one of this notification (when clean) or
            # a later one, if a later save ended before the driver read it.
            if not doc.closing and params.get("document") == doc.handle:
                floor = params["version"] if not params.get("hasUnsavedChanges") else 0
                self.check_file_recent(doc, floor, "after a saved notification")
                if not params.get("hasUnsavedChanges"):
                    doc.clean_version = max(doc.clean_version, params["version"])
                    if doc.retiring and doc.changed_version <= doc.clean_version and not self.stopping:
                        doc.writer.close(doc, expect_saved=False)
        elif reason == "closing":
            if state != ["editingDisabled"]:
                self.failures.add("notification", f"closing with state {state}: {doc.path}")
        elif reason == "closed":
            if state != ["closed"]:
                self.failures.add("notification", f"closed with state {state}: {doc.path}")
            self.by_handle.pop(params["document"], None)
        else:
            self.failures.add("notification", f"stateChanged {reason} about written document {doc.path}: {json.dumps(params)[:400]}")

    def on_did_change(self, doc: Doc, params) -> None:
        self.counts["reloads (didChange)"] += 1
        if doc.kind != "external" or params.get("reason") != "external":
            self.failures.add("notification", f"didChange about {doc.kind} document {doc.path}: {json.dumps(params)[:400]}")
            return
        if params.get("version") != doc.version + 1:
            self.failures.add("reload", f"{doc.path}: didChange version {params.get('version')} after {doc.version}")
        doc.version = params.get("version", doc.version + 1)
        doc.reloads += 1
        try:
            doc.text = apply_text_edits(doc.text, params["edits"])
        except (ValueError, KeyError, TypeError) as error:
            self.failures.add("reload", f"{doc.path}: the edits of didChange do not apply to the text before it: {error}")

    # -- files after saves ---------------------------------------------------------------------

    def read_file(self, doc: Doc):
        try:
            with open(doc.path, "rb") as file:
                data = file.read()
        except OSError as error:
            self.failures.add("disk", f"{doc.path}: {error}")
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            self.failures.add("disk", f"{doc.path}: not UTF-8 ({error})")
            return None

    def check_file_recent(self, doc: Doc, floor: int, when: str, saved_text: str | None = None) -> None:
        """The file must hold the text of a version >= floor that the model remembers."""
        on_disk = self.read_file(doc)
        if on_disk is None:
            return
        if saved_text is not None and on_disk == saved_text:
            self.counts["files checked after a save"] += 1
            return
        for version, text in doc.texts_back():
            if version < floor:
                break
            if text == on_disk:
                self.counts["files checked after a save"] += 1
                return
        if floor < doc.oldest_known_version():
            self.counts["files not checkable after a save (too many versions since)"] += 1
            return
        # An older version than the floor: the file went back (a save answered later wrote an older
        # text). Said as such, to tell it from a text that was never a version.
        older = next((version for version, text in doc.texts_back() if version < floor and text == on_disk), None)
        if older is not None:
            self.failures.add("disk", f"{doc.path} {when}: the file went back to version {older} (handle {doc.handle})")
            return
        self.failures.add("disk", f"{doc.path} {when}: the file holds {len(on_disk)} characters that are the text of no "
                                  f"version from {doc.oldest_known_version()} to {doc.version} (handle {doc.handle})")

    # -- phase 2: writing ------------------------------------------------------------------------

    def write(self) -> None:
        args = self.args
        writer_docs = [doc for doc in self.docs if doc.kind == "writer"]
        self.writers = []
        for number in range(args.writers):
            mine = writer_docs[number * args.docs_per_writer:(number + 1) * args.docs_per_writer]
            writer = Writer(self, number, mine, random.Random(args.seed * 1000 + number))
            for doc in mine:
                doc.writer = writer
                doc.edits_left = writer.lifetime()
            self.writers.append(writer)
        external_docs = [doc for doc in self.docs if doc.kind == "external"]
        self.external = None
        if external_docs and args.external_rate > 0:
            listing = os.path.join(self.root, "external-files.txt")
            with open(listing, "w", encoding="utf-8") as file:
                file.write("".join(doc.path + "\n" for doc in external_docs))
            self.manifest_path = os.path.join(self.root, "external-manifest.json")
            self.external = subprocess.Popen([
                sys.executable, os.path.join(HERE, "external_writer.py"), "--list", listing,
                "--manifest", self.manifest_path, "--seconds", str(args.seconds),
                "--rate", str(args.external_rate), "--seed", str(args.seed),
            ])
        self.write_started = time.monotonic()
        try:
            self.write_loop(self.write_started + args.seconds)
        finally:
            self.write_seconds = time.monotonic() - self.write_started
            self.acked_at_stop = self.counts["edits acknowledged"]
            self.stopping = True

    def write_loop(self, end: float) -> None:
        next_report = self.write_started + 30
        conn = self.conn
        loops = 0
        while True:
            now = time.monotonic()
            if now >= end:
                break
            for writer in self.writers:
                writer.fill()
            conn.pump(0.05)
            loops += 1
            if loops % 256 == 0:
                self.check_alive()
            if now >= next_report:
                next_report += 30
                elapsed = now - self.write_started
                log(f"writing: {elapsed:.0f} s, {self.counts['edits acknowledged']} edits acknowledged "
                    f"({self.counts['edits acknowledged'] / elapsed:.0f}/s), {self.failures.count} failures")

    # -- phase 3: checking -----------------------------------------------------------------------

    def check(self) -> None:
        # Every answer.
        self.wait_for(lambda: not self.conn.pending, 300, "the answers to the requests in flight")
        # The other program ends on its own deadline; its manifest is the model of its files.
        manifest = {"writes": 0, "renames": 0, "inPlace": 0, "files": {}}
        if self.external is not None:
            try:
                status = self.external.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.external.kill()
                status = "killed after 120 s"
            if status != 0:
                self.failures.add("external", f"the external writer ended with {status}")
            else:
                with open(self.manifest_path, encoding="utf-8") as file:
                    manifest = json.load(file)
        self.manifest = manifest
        by_path = {doc.path: doc for doc in self.docs}
        # The reloads: each external document's notified text reaches the program's last text.
        expected_external = {}
        for path, entry in manifest["files"].items():
            expected_external[by_path[path]] = entry["sha256"]

        def external_converged() -> bool:
            return all(hashlib.sha256(doc.text.encode("utf-8")).hexdigest() == digest
                       for doc, digest in expected_external.items())
        self.wait_for(external_converged, 120, "the reloads of the external program's last texts")
        # Autosave: every written document ends without unsaved changes.
        delay = self.args.autosave_delay / 1000.0
        writer_docs = [doc for doc in self.docs if doc.kind == "writer"]
        deadline = time.monotonic() + delay + 120
        dirty = list(writer_docs)
        while dirty:
            answers = {}
            for doc in dirty:
                self.conn.request("document/state", '{"document":"%s"}' % doc.handle,
                                  functools.partial(lambda d, m: answers.__setitem__(d.index, m), doc))
            self.wait_for(lambda: not self.conn.pending, 120, "document/state answers")
            still = []
            for doc in dirty:
                message = answers.get(doc.index)
                if message is None or "error" in message:
                    self.failures.add("state", f"{doc.path}: {message and message.get('error')}")
                    continue
                result = message["result"]
                if result.get("version") != doc.version:
                    self.failures.add("state", f"{doc.path}: version {result.get('version')}, the model says {doc.version}")
                if result.get("hasUnsavedChanges") or result.get("state"):
                    still.append(doc)
            dirty = still
            if dirty:
                if time.monotonic() > deadline:
                    self.failures.add("autosave", f"{len(dirty)} written documents still have unsaved changes "
                                                  f"{delay + 120:.0f} s after the last edit, e.g. {dirty[0].path}")
                    break
                # Autosave is due `delay` after each document's last change: look again shortly.
                end = time.monotonic() + 0.5
                while time.monotonic() < end:
                    self.conn.pump(end - time.monotonic())
        self.settle_seconds = time.monotonic() - self.write_started - self.write_seconds
        # Every document's text, through the server.
        window = 64
        for doc in self.docs:
            while len(self.conn.pending) >= window:
                self.conn.pump(0.5)
                self.check_alive()
            self.conn.request("document/read", '{"document":"%s"}' % doc.handle, functools.partial(self.on_final_read, doc))
        self.wait_for(lambda: not self.conn.pending, 300, "the final reads")
        # Every file on disk.
        for doc in self.docs:
            if doc.kind == "writer":
                on_disk = self.read_file(doc)
                if on_disk is not None and on_disk != doc.text:
                    self.failures.add("final disk", f"{doc.path}: the file is not the last text of the document (autosaved)")
            elif doc.kind == "external" and doc in expected_external:
                with open(doc.path, "rb") as file:
                    if hashlib.sha256(file.read()).hexdigest() != expected_external[doc]:
                        self.failures.add("final disk", f"{doc.path}: the file is not the external program's last text")
            else:
                with open(doc.path, "rb") as file:
                    if sha1(file.read()) != doc.original_sha:
                        self.failures.add("final disk", f"{doc.path}: a file nobody should write changed")
            self.counts["files checked at the end"] += 1

    def on_final_read(self, doc: Doc, message) -> None:
        if "error" in message:
            self.failures.add("final read", f"{doc.path}: {message['error']}")
            return
        result = message["result"]
        text = result["text"]
        self.counts["documents read at the end"] += 1
        if doc.kind == "still":
            if sha1(text.encode("utf-8")) != doc.original_sha or result["version"] != 1:
                self.failures.add("final read", f"{doc.path}: an untouched document changed (version {result['version']})")
        elif text != doc.text or result["version"] != doc.version:
            self.failures.add("final read", f"{doc.kind} {doc.path}: the server has version {result['version']} "
                                            f"({len(text)} characters), the model version {doc.version} ({len(doc.text)} characters)")

    def shutdown(self) -> None:
        answer = self.call("shutdown", "null")
        if "error" in answer:
            self.failures.add("shutdown", str(answer["error"]))
        self.conn.notify("exit", "null")
        try:
            while self.conn.out and not self.conn.closed:
                self.conn.pump(0.2)
        except ServerGone:
            pass
        try:
            status = self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = "killed: no exit within 120 s of exit"
        if status != 0:
            self.failures.add("shutdown", f"the server's exit status is {status}")


class Writer:
    """One pipelined writer over its own documents."""

    def __init__(self, soak: Soak, number: int, docs: list[Doc], rng: random.Random) -> None:
        self.soak = soak
        self.number = number
        self.docs = docs
        self.rng = rng
        self.in_flight = 0
        self.current = None
        self.burst_left = 0
        self.window = soak.args.window

    def lifetime(self) -> int:
        base = self.soak.args.lifetime
        return self.rng.randint(max(1, base // 2), max(1, base * 3 // 2))

    def fill(self) -> None:
        soak = self.soak
        while self.in_flight < self.window and not soak.stopping:
            doc = self.current
            if doc is None or doc.busy or self.burst_left <= 0:
                if doc is not None and not doc.busy and doc.edits_left <= 0:
                    self.retire(doc)
                free = [d for d in self.docs if not d.busy]
                if not free:
                    return
                doc = self.current = self.rng.choice(free)
                self.burst_left = int(self.rng.expovariate(1 / soak.args.burst)) + 1
            self.burst_left -= 1
            r = self.rng.random()
            if r < soak.args.save_rate:
                self.save(doc)
            elif r < soak.args.save_rate + 0.002:
                self.stale_edit(doc)
            else:
                self.edit(doc)

    # The edits ---------------------------------------------------------------------------------

    def edit(self, doc: Doc) -> None:
        soak = self.soak
        rng = self.rng
        text = doc.text
        n = len(text)
        r = rng.random()
        size_bias = 0.15 if n > soak.args.size * 1.2 else (-0.15 if n < soak.args.size * 0.8 else 0.0)
        changes = []  # (start, removed, inserted); start -1: the whole text
        if r < 0.02:
            kind = "empty"
            edits_json = ""
        elif r < 0.10:
            kind = "same"
            a = rng.randrange(n) if n else 0
            b = min(n, a + rng.randint(1, 20))
            edits_json = '{"range":%s,"text":%s}' % (range_json(text, a, b), json.dumps(text[a:b], ensure_ascii=False))
        elif r < 0.18:
            kind = "several"
            parts = []
            for _ in range(rng.randint(2, 4)):
                part, change, text = self.one_change(text, size_bias)
                parts.append(part)
                changes.append(change)
            edits_json = ",".join(parts)
        elif r < 0.185:
            kind = "whole"
            lines = text.split("\n")
            cut = rng.randrange(len(lines))
            new = "\n".join(lines[cut:] + lines[:cut])  # the same lines, rotated
            if new == text:
                new = text + "\n"
            edits_json = '{"text":%s}' % json.dumps(new, ensure_ascii=False)
            changes.append((-1, text, new))
            text = new
        else:
            edits_json, change, text = self.one_change(text, size_bias)
            changes.append(change)
            kind = change[3]
        noop = kind in ("empty", "same")
        undo = ""
        u = rng.random()
        if u < 0.25:
            undo = ',"undo":{"merge":true}'
        elif u < 0.30:
            undo = ',"undo":{"label":"Soak %d","merge":false}' % self.number
        expected_before = doc.version
        bumps = (not noop) or soak.noop_bumps["empty" if kind == "empty" else "same"]
        expected = expected_before + 1 if bumps else expected_before
        params = '{"document":"%s","version":%d,"edits":[%s]%s}' % (doc.handle, expected_before, edits_json, undo)
        soak.conn.request("document/edit", params, functools.partial(self.on_edit, doc, doc.handle, expected, kind))
        self.in_flight += 1
        soak.counts["edits sent"] += 1
        soak.counts[f"edits sent: {kind}"] += 1
        if bumps:
            # Record the change for rebuilding earlier texts: several changes fold into one entry
            # (the whole text before and after) to keep the rebuild simple.
            if noop:
                doc.history.append((expected, None, None, None))
            elif len(changes) == 1 and changes[0][0] >= 0:
                start, removed, inserted = changes[0][:3]
                doc.history.append((expected, start, removed, inserted))
            else:
                doc.history.append((expected, -1, doc.text, text))
            doc.version = expected
        doc.text = text
        if not noop:
            doc.changed_version = expected
        doc.edits_left -= 1

    def one_change(self, text: str, size_bias: float):
        """One non-empty change: (its JSON, (start, removed, inserted, kind), the new text)."""
        rng = self.rng
        n = len(text)
        r = rng.random() + size_bias
        if n == 0 or r < 0.45:
            a = rng.randint(0, n)
            snippet, encoded = rng.choice(self.soak.snippets)
            return ('{"range":%s,"text":%s}' % (range_json(text, a, a), encoded),
                    (a, "", snippet, "insert"), text[:a] + snippet + text[a:])
        a = rng.randrange(n)
        b = min(n, a + rng.randint(1, 24))
        if r < 0.75:
            return ('{"range":%s,"text":""}' % range_json(text, a, b),
                    (a, text[a:b], "", "delete"), text[:a] + text[b:])
        snippet, encoded = rng.choice(self.soak.snippets)
        if snippet == text[a:b]:
            snippet, encoded = snippet + "x", json.dumps(snippet + "x", ensure_ascii=False)
        return ('{"range":%s,"text":%s}' % (range_json(text, a, b), encoded),
                (a, text[a:b], snippet, "replace"), text[:a] + snippet + text[b:])

    def on_edit(self, doc: Doc, handle: str, expected: int, kind: str, message) -> None:
        self.in_flight -= 1
        soak = self.soak
        if "error" in message:
            soak.failures.add("edit", f"{kind} edit of {doc.path} (handle {handle}) expecting version {expected}: {message['error']}")
            return
        soak.counts["edits acknowledged"] += 1
        version = message["result"].get("version")
        if version != expected:
            soak.failures.add("edit", f"{kind} edit of {doc.path} (handle {handle}): version {version}, expected {expected}")

    def stale_edit(self, doc: Doc) -> None:
        soak = self.soak
        current = doc.version
        stale = self.rng.choice([v for v in (current - 1, current + 1, current + 7) if v >= 1])
        params = '{"document":"%s","version":%d,"edits":[{"range":%s,"text":"stale"}]}' % (
            doc.handle, stale, range_json(doc.text, 0, 0))
        soak.conn.request("document/edit", params, functools.partial(self.on_stale, doc, doc.handle, current, stale))
        self.in_flight += 1
        soak.counts["stale edits sent"] += 1

    def on_stale(self, doc: Doc, handle: str, current: int, stale: int, message) -> None:
        self.in_flight -= 1
        soak = self.soak
        error = message.get("error")
        if error is None:
            soak.failures.add("stale edit", f"an edit of {doc.path} against version {stale} (current {current}) was accepted: {message}")
        elif error.get("code") != CONTENT_MODIFIED or (error.get("data") or {}).get("version") != current:
            soak.failures.add("stale edit", f"an edit of {doc.path} against version {stale}: {error}, expected -32801 with version {current}")
        else:
            soak.counts["stale edits refused as expected"] += 1

    # Saves, closes, reopens ------------------------------------------------------------------------

    def save(self, doc: Doc) -> None:
        soak = self.soak
        soak.conn.request("document/save", '{"document":"%s"}' % doc.handle,
                          functools.partial(self.on_save, doc, doc.handle, doc.version, doc.text))
        self.in_flight += 1
        soak.counts["saves sent"] += 1

    def on_save(self, doc: Doc, handle: str, version: int, text: str, message) -> None:
        self.in_flight -= 1
        soak = self.soak
        if "error" in message:
            soak.failures.add("save", f"{doc.path} at version {version}: {message['error']}")
            return
        result = message["result"]
        soak.counts["saves answered"] += 1
        # Saves of a document run one at a time in the order asked: their answers come in that order.
        if doc.last_save_answered[0] == handle and version < doc.last_save_answered[1]:
            soak.failures.add("save", f"{doc.path}: the save of version {version} answered after the save of version "
                                      f"{doc.last_save_answered[1]} (handle {handle})")
        doc.last_save_answered = (handle, version)
        size = len(text.encode("utf-8"))
        # `unchanged`: the file held these bytes already (a save with no edit since the last), and
        # nothing was written (README §8.14); the check of the file below holds either way.
        if result.get("version") != version or result.get("size") != size or result.get("uri") != doc.uri \
                or result.get("method") not in ("rename", "unchanged"):
            soak.failures.add("save", f"{doc.path}: answer {result}, expected version {version}, size {size}")
        if result.get("method") == "unchanged":
            soak.counts["saves that wrote nothing"] += 1
        if not doc.closing and doc.handle == handle:
            soak.check_file_recent(doc, version, f"after the save of version {version}", saved_text=text)

    def retire(self, doc: Doc) -> None:
        """The document has had its edits for this session: close it, as an editor closes a file.
        Mostly once autosave has saved it (the close then has nothing to save: `saved` must be
        false), sometimes at once, with unsaved edits (the close saves them)."""
        doc.busy = True
        if self.rng.random() < self.soak.args.close_dirty:
            self.close(doc, expect_saved=None)
        else:
            doc.retiring = True
            if doc.changed_version <= doc.clean_version:
                self.close(doc, expect_saved=False)

    def close(self, doc: Doc, expect_saved) -> None:
        soak = self.soak
        doc.busy = doc.closing = True
        doc.retiring = False
        soak.conn.request("document/close", '{"document":"%s"}' % doc.handle,
                          functools.partial(self.on_close, doc, doc.handle, doc.text, expect_saved))
        soak.counts["closes sent (clean)" if expect_saved is False else "closes sent (with unsaved edits)"] += 1

    def on_close(self, doc: Doc, handle: str, text: str, expect_saved, message) -> None:
        soak = self.soak
        if "error" in message:
            soak.failures.add("close", f"{doc.path} (handle {handle}): {message['error']}")
            return  # the document stays busy: no more edits to it
        saved = message["result"].get("saved")
        soak.counts["closes that saved" if saved else "closes with nothing to save"] += 1
        if expect_saved is False and saved:
            soak.failures.add("close", f"{doc.path}: the close saved, though the server had reported the document "
                                       f"clean at version {doc.clean_version} and nothing changed its text since")
        on_disk = soak.read_file(doc)
        if on_disk is not None and on_disk != text:
            soak.failures.add("close", f"{doc.path}: after the close the file is not the document's last text")
        soak.conn.request("document/open", '{"uri":"%s","includeText":true}' % doc.uri,
                          functools.partial(self.on_reopen, doc, text))

    def on_reopen(self, doc: Doc, text: str, message) -> None:
        soak = self.soak
        if "error" in message:
            soak.failures.add("reopen", f"{doc.path}: {message['error']}")
            return  # the document stays busy: no more edits to it
        result = message["result"]
        soak.counts["reopens"] += 1
        if result.get("text") != text or result.get("version") != 1 or result.get("hasUnsavedChanges"):
            soak.failures.add("reopen", f"{doc.path}: reopened at version {result.get('version')} with "
                                        f"{len(result.get('text') or '')} characters, not the text closed")
        doc.handle = result["document"]
        soak.by_handle[doc.handle] = doc
        doc.version = 1
        doc.text = text
        doc.history.clear()
        doc.clean_version = 1
        doc.changed_version = 0
        doc.opens += 1
        doc.edits_left = self.lifetime()
        doc.busy = doc.closing = False


# ----------------------------------------------------------------------------------------------
# Report


def steady_state(soak: Soak):
    writing = [(t, rss) for (t, rss, _, phase, *_) in soak.samples if phase == "writing"]
    if len(writing) < 3:
        return None
    _, start, end = next(p for p in soak.phases if p[0] == "writing")
    # The steady state follows a warm-up, the first third of writing: the written documents gain
    # undo histories and the pipelines their buffers (8 to 10 MiB, 5 to 6% at 10,000 documents,
    # whatever the run's length). Its first sample is the reference.
    warm = start + (end - start) / 3
    first_t, first = next(((t, rss) for (t, rss) in writing if t >= warm), writing[-1])
    cut = start + (end - start) * 2 / 3
    last_third = [(t, rss) for (t, rss) in writing if t >= cut]
    if not last_third:
        return None
    low, high = first * 0.95, first * 1.05
    outside = [(t, rss) for (t, rss) in last_third if not (low <= rss <= high)]
    first_third = [rss for (t, rss) in writing if t < warm]
    # For information: the drift across the last third (a least-squares slope), which tells growth at
    # steady state from a rise at the start of writing (the written documents' working set).
    slope = None
    if len(last_third) >= 2:
        mean_t = sum(t for t, _ in last_third) / len(last_third)
        mean_r = sum(r for _, r in last_third) / len(last_third)
        var = sum((t - mean_t) ** 2 for t, _ in last_third)
        if var > 0:
            slope = sum((t - mean_t) * (r - mean_r) for t, r in last_third) / var  # KiB per second
    return {
        "slope_kib_per_s": slope,
        "first_t": first_t, "first_kib": first, "from_t": cut, "to_t": end, "n": len(last_third),
        "min_kib": min(rss for _, rss in last_third), "max_kib": max(rss for _, rss in last_third),
        "low_kib": low, "high_kib": high, "first_third_max_kib": max(first_third) if first_third else first, "writing_first_kib": writing[0][1], "outside": len(outside), "met": not outside and bool(last_third),
    }


def tree_state() -> str:
    """The commit of the repository the driver runs from, and how many tracked files differ from it."""
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
        changed = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + (f" with uncommitted changes in {len(changed)} tracked files" if changed else " (clean)")


def main() -> int:
    parser = argparse.ArgumentParser(description="Load and soak: many open documents, pipelined writers, autosave, another program.")
    parser.add_argument("--seconds", type=float, default=600, help="the writing phase (default 600)")
    parser.add_argument("--documents", type=int, default=10_000, help="open documents (default 10000)")
    parser.add_argument("--writers", type=int, default=8, help="pipelined writers (default 8)")
    parser.add_argument("--size", type=int, default=10_240, help="bytes per generated file (default 10240)")
    parser.add_argument("--docs-per-writer", type=int, default=16, help="documents each writer switches among (default 16)")
    parser.add_argument("--window", type=int, default=32, help="requests in flight per writer (default 32)")
    parser.add_argument("--burst", type=float, default=150, help="mean edits to one document before switching (default 150)")
    parser.add_argument("--lifetime", type=int, default=150, help="mean edits before a document is closed and reopened (default 150)")
    parser.add_argument("--close-dirty", type=float, default=0.25,
                        help="share of closes made with unsaved edits (the close saves); the others wait for autosave (default 0.25)")
    parser.add_argument("--save-rate", type=float, default=0.003, help="share of a writer's requests that are document/save (default 0.003)")
    parser.add_argument("--external-docs", type=int, default=100, help="files the external program rewrites (default 100)")
    parser.add_argument("--external-rate", type=float, default=10, help="external rewrites a second (default 10)")
    parser.add_argument("--autosave-delay", type=int, default=2000, help="autosave delay in ms (default 2000)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--state-dir", default=None,
                        help="for diagnosis only: the server's --state-dir instead of one in the temp dir (a path that "
                             "cannot be made, such as /proc/none, turns earlier versions off)")
    parser.add_argument("--binary", default=os.environ.get("DOCSESSION_BIN"), help="the server (default $DOCSESSION_BIN)")
    parser.add_argument("--out", default=os.path.join(REPO, ".build", "soak-load"), help="where the PNG, CSV and summary go")
    parser.add_argument("--tmp", default="/var/tmp", help="where the temp dir of files goes (not a tmpfs; default /var/tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (it is kept anyway when something fails)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    if not args.binary or not os.access(args.binary, os.X_OK):
        print("load_soak.py: no server: pass --binary or set DOCSESSION_BIN", file=sys.stderr)
        return 2
    needed = args.writers * args.docs_per_writer + args.external_docs
    if args.documents < needed:
        print(f"load_soak.py: --documents {args.documents} is fewer than the {needed} the writers and the external program use",
              file=sys.stderr)
        return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.documents + 1024
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(want, soft), hard), hard))
        except (ValueError, OSError):
            pass
    os.makedirs(args.out, exist_ok=True)

    soak = Soak(args)
    soak.tree = tree_state()
    root = tempfile.mkdtemp(prefix="docsession-soak-load-", dir=args.tmp)
    soak.root = root
    log(f"seed {args.seed}; {args.documents} documents of {args.size} bytes in {root}; {args.writers} writers x "
        f"{args.docs_per_writer} documents, window {args.window}; {args.external_docs} external files; "
        f"writing for {args.seconds:.0f} s; server {args.binary}")
    soak.generate(root)
    log(f"files generated (t = {soak.now():.1f} s)")
    soak.start_server(root)
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=soak.sampler, args=(stop_sampling,), daemon=True)
    crashed = None
    soak.open_seconds = soak.write_seconds = soak.settle_seconds = 0.0
    soak.acked_at_stop = 0
    soak.manifest = {"writes": 0, "renames": 0, "inPlace": 0, "files": {}}
    soak.noop_rule = "not probed"
    try:
        soak.initialize()
        soak.probe_noop_rule(root)
        soak.enter("idle")
        sampler.start()
        # A first sample, and RSS before opening, once the server has settled after initialize.
        soak.rss_before = soak.rss()[0]
        soak.enter("opening")
        soak.open_all()
        soak.rss_after = soak.rss()[0]
        log(f"{soak.counts['opens']} documents opened in {soak.open_seconds:.1f} s; RSS {mib(soak.rss_before):.1f} -> "
            f"{mib(soak.rss_after):.1f} MiB")
        soak.enter("writing")
        soak.write()
        soak.enter("checking")
        soak.check()
        soak.enter("shutdown")
        soak.shutdown()
    except ServerGone as error:
        crashed = str(error)
        soak.failures.add("server", crashed)
    finally:
        if soak.phases:
            name, start, _ = soak.phases[-1]
            soak.phases[-1] = (name, start, soak.now())
        stop_sampling.set()
        if sampler.is_alive():
            sampler.join()
        if soak.process.poll() is None:
            soak.process.kill()
            soak.process.wait()
        if getattr(soak, "external", None) is not None and soak.external.poll() is None:
            soak.external.kill()

    return report(soak, root, crashed)


def report(soak: Soak, root: str, crashed) -> int:
    args = soak.args
    counts = soak.counts
    rss_values = [sample[1] for sample in soak.samples]
    before = getattr(soak, "rss_before", 0)
    after = getattr(soak, "rss_after", 0)
    per_doc = (after - before) * 1024 / args.documents if after else 0
    steady = steady_state(soak)
    writing_rss = [sample[1] for sample in soak.samples if sample[3] == "writing"]
    edits_per_second = soak.acked_at_stop / soak.write_seconds if soak.write_seconds else 0
    stderr_lines = []
    try:
        with open(soak.stderr_path, encoding="utf-8", errors="replace") as file:
            stderr_lines = file.read().splitlines()
    except OSError:
        pass

    # The plot.
    png = os.path.join(args.out, "rss.png")
    plot_error = None
    try:
        sys.path.insert(0, HERE)
        import rss_plot
        rss_plot.draw(png, soak.samples, soak.phases, steady, title_extra=(
            f"{args.documents} documents of {args.size // 1024} KB, {args.writers} pipelined writers, "
            f"{soak.write_seconds:.0f} s of writing, {edits_per_second:,.0f} edits/s"))
    except Exception as error:  # noqa: BLE001 - a missing plot is a failure, reported with the rest
        plot_error = f"{type(error).__name__}: {error}"
        soak.failures.add("plot", plot_error)
    with open(os.path.join(args.out, "rss.csv"), "w", encoding="utf-8") as csv:
        csv.write("seconds,vmrss_kib,rssanon_kib,phase,edits_acknowledged,documents_opened,threads\n")
        for (t, rss, anon, phase, acked, opened, threads) in soak.samples:
            csv.write(f"{t:.2f},{rss},{anon},{phase},{acked},{opened},{threads}\n")

    lines = []
    add = lines.append
    add("")
    add("=" * 100)
    add("load soak summary")
    add("=" * 100)
    add(f"server            {args.binary}, built from {soak.tree}")
    add(f"seed              {args.seed}")
    add(f"documents         {args.documents} of {args.size} bytes ({counts['opens']} opened in {soak.open_seconds:.1f} s); "
        f"{args.writers} writers x {args.docs_per_writer} documents, window {args.window}; {args.external_docs} external files")
    add(f"no-op edits       {soak.noop_rule}")
    add(f"writing           {soak.write_seconds:.1f} s; then {soak.settle_seconds:.1f} s until every written document was autosaved")
    kinds = ", ".join(f"{k.split(': ')[1]} {v}" for k, v in sorted(counts.items()) if k.startswith("edits sent: "))
    add(f"edits             {counts['edits sent']} sent, {counts['edits acknowledged']} acknowledged "
        f"({edits_per_second:,.0f}/s over the writing phase); {kinds}")
    add(f"stale edits       {counts['stale edits sent']} sent, {counts['stale edits refused as expected']} refused with -32801 as expected")
    add(f"saves             {counts['saves sent']} document/save sent, {counts['saves answered']} answered; "
        f"{counts['autosaves (saved notifications)']} autosaves (saved notifications with autosave: true); "
        f"{counts['closes that saved']} closes that saved, {counts['closes with nothing to save']} with nothing to save "
        f"({counts['closes sent (clean)']} sent once autosave had saved the document, {counts['closes sent (with unsaved edits)']} with unsaved edits); "
        f"{counts['reopens']} reopens")
    add(f"files checked     {counts['files checked after a save']} right after a save or saved notification "
        f"({counts['files not checkable after a save (too many versions since)']} not checkable: over {RING} versions since); "
        f"every file at the end: {counts['files checked at the end']}")
    add(f"external program  {soak.manifest['writes']} rewrites ({soak.manifest['renames']} renamed over, "
        f"{soak.manifest['inPlace']} in place) of {len(soak.manifest['files'])} files; "
        f"{counts['reloads (didChange)']} reloads (document/didChange, reason external)")
    add(f"final reads       {counts['documents read at the end']} documents read and compared with the model")
    if rss_values:
        add(f"RSS               first {mib(rss_values[0]):.1f} MiB, last {mib(rss_values[-1]):.1f} MiB, "
            f"max {mib(max(rss_values)):.1f} MiB ({len(rss_values)} samples, one a second)")
    if writing_rss:
        add(f"RSS writing       first {mib(writing_rss[0]):.1f} MiB, last {mib(writing_rss[-1]):.1f} MiB, "
            f"min {mib(min(writing_rss)):.1f}, max {mib(max(writing_rss)):.1f} MiB")
        writing_threads = [sample[6] for sample in soak.samples if sample[3] == "writing"]
        add(f"threads writing   first {writing_threads[0]}, last {writing_threads[-1]}, "
            f"min {min(writing_threads)}, max {max(writing_threads)} (each its own allocator cache)")
    add(f"per document      RSS after opening {mib(after):.1f} MiB - before {mib(before):.1f} MiB = "
        f"{mib(after - before):.1f} MiB over {args.documents} documents = {per_doc / 1024:.1f} KiB each "
        f"(the text itself: {args.size / 1024:.1f} KiB)")
    if steady:
        add(f"steady state      compared: every RSS sample of the last third of the writing phase "
            f"(t = {steady['from_t']:.0f}-{steady['to_t']:.0f} s, {steady['n']} samples: "
            f"{mib(steady['min_kib']):.1f}-{mib(steady['max_kib']):.1f} MiB) with the first sample of the steady state, after the first third of writing "
            f"(t = {steady['first_t']:.0f} s: {mib(steady['first_kib']):.1f} MiB), allowed within 5%: "
            f"{mib(steady['low_kib']):.1f}-{mib(steady['high_kib']):.1f} MiB: "
            f"{'met' if steady['met'] else 'MISSED (%d samples outside)' % steady['outside']}")
        if steady["slope_kib_per_s"] is not None:
            add(f"  (information)   drift across that last third: {steady['slope_kib_per_s'] * 60 / 1024:+.2f} MiB a minute "
                f"(least squares); the first third of writing (the warm-up) rose from {mib(steady['writing_first_kib']):.1f} MiB to "
                f"{mib(steady['first_third_max_kib']):.1f} MiB")
        if not steady["met"]:
            soak.failures.add("growth", "RSS samples of the last third of the writing phase are not within 5% of the steady state's first sample")
    else:
        add("steady state      not measured (too few samples of the writing phase)")
        soak.failures.add("growth", "no steady-state measurement")
    add(f"server stderr     {len(stderr_lines)} lines" + (f"; last: {stderr_lines[-1][:160]}" if stderr_lines else ""))
    add(f"plot              {png}" + (f" (not drawn: {plot_error})" if plot_error else ""))
    if crashed:
        add(f"server            {crashed}")
    if soak.failures.count:
        add(f"failures          {soak.failures.count}: " + ", ".join(f"{k} {v}" for k, v in soak.failures.kinds.items()))
        for item in soak.failures.shown:
            add(f"  - {item}")
    verdict = "PASS" if not soak.failures.count else "FAIL"
    add(f"verdict           {verdict}")
    add("=" * 100)
    print("\n".join(lines), flush=True)

    summary = {
        "verdict": verdict, "seed": args.seed, "tree": soak.tree, "binary": args.binary, "documents": args.documents, "size": args.size, "writers": args.writers,
        "docsPerWriter": args.docs_per_writer, "window": args.window, "seconds": soak.write_seconds,
        "editsPerSecond": edits_per_second, "counts": dict(counts), "rssBeforeOpeningKiB": before,
        "rssAfterOpeningKiB": after, "bytesPerDocument": per_doc, "steadyState": steady,
        "rssFirstKiB": rss_values[0] if rss_values else None, "rssLastKiB": rss_values[-1] if rss_values else None,
        "rssMaxKiB": max(rss_values) if rss_values else None, "noopRule": soak.noop_rule,
        "external": {k: v for k, v in soak.manifest.items() if k != "files"},
        "failures": soak.failures.shown, "failureCount": soak.failures.count,
    }
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=1)
    with open(os.path.join(args.out, "summary.txt"), "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    if soak.failures.count or args.keep:
        if stderr_lines:
            shutil.copy(soak.stderr_path, os.path.join(args.out, "server-stderr.log"))
        log(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
