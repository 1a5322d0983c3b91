"""The journal of unsaved changes (issue 17), end to end over stdio with the built binary.

Every server runs with a state directory of the test's own (`serve --state-dir DIR`); journals live
in `DIR/journal/`. The tests read journal files with a parser of their own (the format of
protocol/README.md §8.22 and /work/journal-brief.md: magic `DSJRNL1\\n`, then records `crc32c u32 LE | length u32 LE | type u8 |
payload`), so that "the journal holds the record" is awaited, not slept for.

1. SIGKILL at random moments of real editing histories replayed pipelined (DOCSESSION_JOURNAL_TRIALS,
   default 50; DOCSESSION_JOURNAL_SEED; DOCSESSION_JOURNAL_SLACK_MS, default 50): the text recovered
   is the model's text at the version recovered, and every edit acknowledged more than flushDelay +
   50 ms before the kill is in it; undo goes back to the file's text. The same with SIGTERM (a fifth
   as many trials): every edit acknowledged before the signal is kept.
2. A torn tail (cut at every byte of the last record) and a corrupt record in the middle (each of its
   bytes in turn): recovery up to the record before, with the cut reported.
3. The file changed on disk after the kill: recovery comes back in conflict, a merge keeps both.
4. Two servers on one file: a live server's journal is `editedElsewhere`, a dead one's is offered.
5. A journal directory that cannot be written: the server serves without a journal, and says so.
6. ENOSPC (a tiny tmpfs in a mount namespace of the server's own) and EFBIG (`prlimit --fsize`)
   while journaling: `journalFailed` with the detail, once until a journal is written again;
   editing goes on.
7. Hot exit: shutdown keeps the journal (or, with hotExit false, deletes it); close without saving
   deletes it; SIGTERM/SIGHUP/SIGINT and the end of input flush at once; the client's death too.
8. discardRecovery, and the errors of recover.
More: a dead journal whose text the file holds now is deleted quietly; of several the newest is
offered; a recovered journal is appended to and survives the next kill; recovering writes no new
journal; the version after a recovery never goes back; a merge after a recovery in conflict is
journaled against the new base; the journal follows a moved document; a journal grown past its
bound starts again (a `text` record) and recovers the same.

A long soak: DOCSESSION_JOURNAL_TRIALS=1000 python3 -m pytest -q -s Tests/faults/test_journal.py -k trace_replay
"""

from __future__ import annotations

import ctypes
import datetime
import functools
import glob
import gzip
import json
import os
import random
import re
import shlex
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from faultkit import CHANGED_ON_DISK, Server, check_error_detail, check_saved, text, uri, wait_until, write_file
from rpc_client import RpcClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
from docsession_client import apply_text_edits  # noqa: E402

TRIALS = int(os.environ.get("DOCSESSION_JOURNAL_TRIALS", "50"))
SEED = int(os.environ.get("DOCSESSION_JOURNAL_SEED") or random.randrange(1 << 32))
TRACE_DIR = Path(os.environ.get("DOCSESSION_TRACES", "/work/shared/data/editing-traces"))
# The traces replayed (automerge-paper is left out: 260,000 patches of a 100 KB text take seconds to
# replay in Python, and the others are as good for this).
TRACE_NAMES = ("sveltecomponent", "rustcode", "seph-blog1")

FLUSH_DELAY = 0.200  # the server's default, in seconds
# What the flush may take beyond the delay before a change is on disk (the brief: 50 ms). A machine
# much busier than a loaded 2-core CI box may need more: DOCSESSION_JOURNAL_SLACK_MS.
SLACK = int(os.environ.get("DOCSESSION_JOURNAL_SLACK_MS", "50")) / 1000

NO_RECOVERY = -32025
UNSAVED_CHANGES = -32023
UNKNOWN_DOCUMENT = -32011
INVALID_PARAMS = -32602

DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
JOURNAL_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.journal$")

ORIGINAL = "alpha\nbeta\ngamma\ndelta\nepsilon\n"


# -- the journal's format ----------------------------------------------------------------------------

MAGIC = b"DSJRNL1\n"
HEADER, BASE, TEXT, CHANGE, MOVED = 1, 2, 3, 4, 5


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


@dataclass
class Record:
    offset: int
    type: int
    payload: bytes

    @property
    def end(self) -> int:
        return self.offset + 9 + len(self.payload)

    @property
    def version(self) -> int | None:
        """The version a `change` or `text` record leaves the document at."""
        return struct.unpack_from("<q", self.payload)[0] if self.type in (CHANGE, TEXT) else None


def parse_journal(data: bytes, verify: bool = True) -> tuple[list[Record], tuple[int, str] | None]:
    """The whole records of a journal file whose checksums hold, and where and why reading stopped
    before the end (None when it did not). `verify` False: the lengths only (this CRC-32C in Python
    takes seconds for megabytes; a record being appended shows as torn by its length anyway)."""
    if not data.startswith(MAGIC):
        return [], (0, "torn" if len(data) < len(MAGIC) and MAGIC.startswith(data) else "notAJournal")
    records, offset = [], len(MAGIC)
    while offset < len(data):
        if len(data) - offset < 9:
            return records, (offset, "torn")
        crc, length, kind = struct.unpack_from("<IIB", data, offset)
        if len(data) - offset - 9 < length:
            return records, (offset, "torn")
        payload = data[offset + 9: offset + 9 + length]
        if verify and crc32c(bytes([kind]) + payload) != crc:
            return records, (offset, "checksum")
        records.append(Record(offset, kind, payload))
        offset += 9 + length
    return records, None


def decode_change(payload: bytes) -> dict:
    version, op, unsaved = struct.unpack_from("<qBB", payload)
    at = 10

    def string() -> str:
        nonlocal at
        (length,) = struct.unpack_from("<I", payload, at)
        value = payload[at + 4: at + 4 + length].decode()
        at += 4 + length
        return value

    label = string()
    (count,) = struct.unpack_from("<I", payload, at)
    at += 4
    edits = []
    for _ in range(count):
        (start,) = struct.unpack_from("<Q", payload, at)
        at += 8
        edits.append((start, string(), string()))
    assert at == len(payload), "trailing bytes in a change record"
    return {"version": version, "op": op, "unsaved": bool(unsaved), "label": label, "edits": edits}


def journal_dir(state: Path) -> Path:
    return state / "journal"


def journal_files(state: Path) -> list[Path]:
    directory = journal_dir(state)
    if not directory.is_dir():
        return []
    return sorted(directory / name for name in os.listdir(directory) if name.endswith(".journal") and not name.startswith("."))


def last_version(data: bytes) -> int | None:
    """The version the whole records of a journal leave the document at (None: no change yet)."""
    records, _ = parse_journal(data, verify=False)
    versions = [record.version for record in records if record.version is not None]
    return versions[-1] if versions else None


def wait_for_journal(state: Path, version: int, timeout: float = 20.0) -> tuple[Path, bytes]:
    """Waits until the state directory holds one journal, whose whole records end at `version`."""
    found: list = []

    def ready():
        files = journal_files(state)
        if len(files) != 1:
            return False
        try:
            data = files[0].read_bytes()
        except FileNotFoundError:
            return False
        records, cut = parse_journal(data, verify=False)
        if cut is None and last_version(data) == version:
            found[:] = [files[0], data]
            return True
        return False

    try:
        wait_until(ready, timeout=timeout)
    except AssertionError:
        raise AssertionError(f"timed out after {timeout} s waiting for a journal in {journal_dir(state)} holding "
                             f"version {version}; there are (name, version): {describe_journals(state)}") from None
    return found[0], found[1]


def describe_journals(state: Path) -> list[tuple[str, int | None]]:
    described = []
    for path in journal_files(state):
        try:
            described.append((path.name, last_version(path.read_bytes())))
        except FileNotFoundError:
            pass
    return described


def wait_for_no_journal(state: Path, timeout: float = 20.0) -> None:
    try:
        wait_until(lambda: journal_files(state) == [], timeout=timeout)
    except AssertionError:
        raise AssertionError(f"timed out after {timeout} s waiting for the journal to be deleted; there are (name, "
                             f"version): {describe_journals(state)}") from None


def install_journal(state: Path, name: str, data: bytes) -> Path:
    """Puts a journal file in place at once (written beside it under a name the server skips, then
    renamed)."""
    directory = journal_dir(state)
    temp = directory / f".test-{name}"
    temp.write_bytes(data)
    os.chmod(temp, 0o600)
    os.replace(temp, directory / name)
    return directory / name


def another_name(name: str) -> str:
    """A journal name of the same document (same key), never used before."""
    key = JOURNAL_NAME.match(name).group(1)
    return f"{key}-{random.getrandbits(64):016x}.journal"


# -- servers -----------------------------------------------------------------------------------------


def serve(sandbox, state: Path, prefix: tuple[str, ...] = (), *, flush_delay: int | None = None,
          hot_exit: bool | None = None, encoding: str | None = None) -> Server:
    options: dict = {}
    if flush_delay is not None:
        options["flushDelay"] = flush_delay
    if hot_exit is not None:
        options["hotExit"] = hot_exit
    initialization: dict = {"initializationOptions": options} if options else {}
    if encoding is not None:
        initialization["capabilities"] = {"general": {"positionEncodings": [encoding]}}
    return sandbox.start(prefix, args=("serve", "--state-dir", str(state)), initialization=initialization)


def capabilities(server: Server) -> dict:
    return server.initialized["capabilities"]


def sigkill(server: Server) -> None:
    os.kill(server.pid, signal.SIGKILL)
    assert server.wait_exit() == -signal.SIGKILL
    server.kill()


def span(line: int, character: int, end_line: int | None = None, end_character: int | None = None) -> dict:
    return {"start": {"line": line, "character": character},
            "end": {"line": line if end_line is None else end_line, "character": character if end_character is None else end_character}}


class Editor:
    """A document open in a server, and the model of its text by version."""

    def __init__(self, server: Server, path: Path, encoding: str = "utf-16"):
        self.server = server
        self.encoding = encoding
        self.info = server.open(path)
        self.document = self.info["document"]
        self.version = self.info["version"]
        self.text = path.read_text()
        self.texts = {self.version: self.text}

    def edit(self, edits: list[dict]) -> int:
        reply = self.server.request("document/edit", {"document": self.document, "version": self.version, "edits": edits})
        assert reply.result == {"version": self.version + 1}, reply.response
        self.version += 1
        self.text = apply_text_edits(self.text, edits, self.encoding)
        self.texts[self.version] = self.text
        return self.version

    def insert(self, line: int, character: int, new: str) -> int:
        return self.edit([{"range": span(line, character), "text": new}])

    def replace_all(self, new: str) -> int:
        return self.edit([{"text": new}])


def check_offer(offer: dict, *, version: int, edits: int, matches: bool = True, cut: dict | None = None,
                journal: Path | None = None) -> None:
    assert offer is not None, "no recovery offered"
    assert set(offer) == {"date", "edits", "version", "fileMatchesBase", "cut"}, offer
    assert DATE.match(offer["date"]), offer
    assert offer["version"] == version, offer
    assert offer["edits"] == edits, offer
    assert offer["fileMatchesBase"] is matches, offer
    assert offer["cut"] == cut, offer
    if journal is not None:
        # The date is the journal file's modification time.
        date = datetime.datetime.strptime(offer["date"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        assert abs(date.timestamp() - journal.stat().st_mtime) < 0.002, (offer["date"], journal.stat().st_mtime)


def recover(server: Server, document: str):
    reply = server.request("document/recover", {"document": document})
    return reply, reply.result


def make_dead_journal(sandbox, state: Path, path: Path, inserts: list[tuple[int, int, str]], **options) -> tuple[Editor, Path, bytes]:
    """A server that made these insertions and was killed once its journal held them all."""
    server = serve(sandbox, state, **options)
    editor = Editor(server, path)
    for line, character, new in inserts:
        editor.insert(line, character, new)
    journal, data = wait_for_journal(state, editor.version)
    sigkill(server)
    return editor, journal, data


# -- 1. SIGKILL during a trace replay ----------------------------------------------------------------


@dataclass
class Trace:
    name: str
    txns: list
    snapshots: dict[int, str]  # the text before txn i, for every 200th i


@functools.lru_cache(maxsize=None)
def load_trace(name: str) -> Trace:
    with gzip.open(TRACE_DIR / f"{name}.json.gz") as file:
        data = json.load(file)
    txns = data["txns"]
    current = data["startContent"]
    snapshots = {}
    for index, txn in enumerate(txns):
        if index % 200 == 0:
            snapshots[index] = current
        for position, deleted, inserted in txn["patches"]:
            current = current[:position] + inserted + current[position + deleted:]
    assert current == data["endContent"], f"replaying {name} does not give its endContent"
    return Trace(name, txns, snapshots)


def position(text_: str, offset: int) -> dict:
    """A utf-32 position (characters are code points, as Python's)."""
    line = text_.count("\n", 0, offset)
    return {"line": line, "character": offset - (text_.rfind("\n", 0, offset) + 1)}


def journal_thread_state(pid: int) -> str:
    """The state of the server's journal thread (`ds-journal`): R running or runnable (waiting for a
    CPU), S sleeping (in poll: waiting for the flush delay or for work), D in the disk (fdatasync);
    its kernel wait channel; and how long it has waited for a CPU in all (schedstat)."""
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            if Path(task, "comm").read_text().strip() != "ds-journal":
                continue
            state = Path(task, "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(task, "wchan").read_text().strip()
            run, wait, _ = Path(task, "schedstat").read_text().split()
            return f"state {state}, wchan {wchan or '-'}, on CPU {int(run) / 1e9:.3f} s, waited for a CPU {int(wait) / 1e9:.3f} s"
        except (OSError, ValueError):
            continue
    return "no ds-journal thread found"


@dataclass
class Plan:
    trace: str
    start: int
    texts: list[str]  # texts[n]: after the first n requests
    changes: list[int]  # changes[n]: how many of the first n requests changed the text
    requests: list[list[dict]]
    gaps: list[float]  # the pause before each request is sent


# The traces are almost all ASCII, where UTF-8 offsets (the journal's) equal code points (the
# client's positions). Half the trials replace some letters by non-ASCII ones, one code point for
# one, so that every position of the trace stays valid: 2-, 3- and 4-byte UTF-8.
TRANSLITERATION = str.maketrans({"e": "é", "o": "ö", "t": "€", "x": "😀", "E": "𝔈"})


def make_plan(trace: Trace, rng: random.Random) -> Plan:
    count = rng.randint(30, 200)
    start = rng.choice([index for index in trace.snapshots if index + count <= len(trace.txns)])
    table = TRANSLITERATION if rng.random() < 0.5 else {}
    current = trace.snapshots[start].translate(table)
    texts, changes, requests, gaps = [current], [0], [], []
    for txn in trace.txns[start: start + count]:
        edits, changed = [], False
        for offset, deleted, inserted in txn["patches"]:
            inserted = inserted.translate(table)
            edits.append({"range": {"start": position(current, offset), "end": position(current, offset + deleted)},
                          "text": inserted})
            changed = changed or current[offset: offset + deleted] != inserted
            current = current[:offset] + inserted + current[offset + deleted:]
        requests.append(edits)
        texts.append(current)
        changes.append(changes[-1] + changed)
        # A typist's bursts: most requests right after the one before, some after a pause.
        gaps.append(0.0 if rng.random() < 0.5 else rng.uniform(0, 0.015))
    return Plan(trace.name + (" (non-ASCII)" if table else ""), start, texts, changes, requests, gaps)


def test_sigkill_at_random_moments_of_a_trace_replay_loses_at_most_the_flush_window(sandbox):
    missing = [name for name in TRACE_NAMES if not (TRACE_DIR / f"{name}.json.gz").exists()]
    if missing:
        pytest.skip(f"editing traces missing in {TRACE_DIR}: {missing}")
    rng = random.Random(SEED)
    where = f"(seed {SEED}; rerun with DOCSESSION_JOURNAL_SEED={SEED})"
    traces = [load_trace(name) for name in TRACE_NAMES]
    stats = {"offered": 0, "none": 0, "mid-stream": 0, "undone": 0, "oldest lost ack": 0.0, "required": 0}
    started = time.monotonic()
    for trial in range(TRIALS):
        plan = make_plan(rng.choice(traces), rng)
        one_trial(sandbox, trial, plan, rng, f"trial {trial}, {plan.trace} from txn {plan.start} {where}", stats)
    print(f"journal kill trials: {TRIALS} in {time.monotonic() - started:.1f} s; recovery offered {stats['offered']}, "
          f"none {stats['none']}; killed while sending {stats['mid-stream']}; trials with an edit that had to be "
          f"kept {stats['required']}; undone to the file's text {stats['undone']}; oldest acknowledged edit lost: "
          f"{stats['oldest lost ack'] * 1000:.0f} ms before the kill {where}")


def test_sigterm_at_random_moments_of_a_trace_replay_loses_no_acknowledged_edit(sandbox):
    # SIGTERM flushes at once: every edit acknowledged before the signal was sent is kept.
    missing = [name for name in TRACE_NAMES if not (TRACE_DIR / f"{name}.json.gz").exists()]
    if missing:
        pytest.skip(f"editing traces missing in {TRACE_DIR}: {missing}")
    seed = SEED + 1
    rng = random.Random(seed)
    where = f"(seed {seed}; rerun with DOCSESSION_JOURNAL_SEED={SEED})"
    traces = [load_trace(name) for name in TRACE_NAMES]
    stats = {"offered": 0, "none": 0, "mid-stream": 0, "undone": 0, "oldest lost ack": 0.0, "required": 0}
    trials = max(5, TRIALS // 5)
    for trial in range(trials):
        plan = make_plan(rng.choice(traces), rng)
        one_trial(sandbox, trial, plan, rng, f"SIGTERM trial {trial}, {plan.trace} from txn {plan.start} {where}", stats,
                  signum=signal.SIGTERM)
    print(f"journal SIGTERM trials: {trials}; recovery offered {stats['offered']}, none {stats['none']}; "
          f"signalled while sending {stats['mid-stream']} {where}")


def one_trial(sandbox, trial: int, plan: Plan, rng: random.Random, where: str, stats: dict,
              signum: int = signal.SIGKILL) -> None:
    state = sandbox.root / f"state-{trial}"
    path = write_file(sandbox.docs / f"trace-{trial}.txt", plan.texts[0])
    server = serve(sandbox, state, encoding="utf-32")
    assert capabilities(server)["positionEncoding"] == "utf-32"
    assert capabilities(server)["journal"] is True and capabilities(server)["flushDelay"] == 200, capabilities(server)
    info = server.open(path)
    document, first_version = info["document"], info["version"]
    first_id = server.rpc.next_id
    server.rpc.next_id += len(plan.requests)

    acks: dict[int, float] = {}  # request n -> when its answer arrived (monotonic)
    problems: list[str] = []
    sent = [0]
    killed = threading.Event()

    def read() -> None:
        while True:
            try:
                message = server.rpc.read_message(timeout=120)
            except BaseException as error:  # end of output after the kill (maybe inside a frame)
                if not killed.is_set():
                    problems.append(f"reading before the kill: {error!r}")
                return
            arrived = time.monotonic()
            if "method" in message:
                continue
            n = message.get("id", -1) - first_id
            if message.get("result") != {"version": first_version + n + 1}:
                problems.append(f"request {n} (version {first_version + n}) answered {message}")
            else:
                acks[n] = arrived

    def send() -> None:
        for n, edits in enumerate(plan.requests):
            if plan.gaps[n]:
                time.sleep(plan.gaps[n])
            try:
                server.rpc.send({"jsonrpc": "2.0", "id": first_id + n, "method": "document/edit",
                                 "params": {"document": document, "version": first_version + n, "edits": edits}})
            except OSError as error:
                if not killed.is_set():
                    problems.append(f"sending request {n}: {error!r}")
                return
            sent[0] = n + 1

    reader = threading.Thread(target=read, daemon=True)
    sender = threading.Thread(target=send, daemon=True)
    begun = time.monotonic()
    reader.start()
    sender.start()
    # The kill: half the time while the requests go out, else up to 0.6 s after the last is sent
    # (when all of it must be kept once the flush delay is over).
    sending = sum(plan.gaps)
    after = rng.uniform(0.02, sending) if rng.random() < 0.5 else rng.uniform(sending, sending + 0.6)
    time.sleep(max(0.0, begun + after - time.monotonic()))
    writer = journal_thread_state(server.pid)  # for the message of a failure: what the writer was doing
    killed.set()
    kill_time = time.monotonic()  # before the kill: an ack's age is never overstated
    kill_wall = time.time()
    os.kill(server.pid, signum)
    assert server.wait_exit() == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signum)
    sender.join(30)
    reader.join(30)
    server.kill()
    assert not problems, f"{problems[:5]} {where}"
    if sent[0] < len(plan.requests):
        stats["mid-stream"] += 1
    assert path.read_text() == plan.texts[0], f"the file changed: nothing was saved {where}"

    # Every edit acknowledged more than the flush delay + 50 ms before the kill must be kept.
    # After SIGTERM: every edit acknowledged before it.
    window = FLUSH_DELAY + SLACK if signum == signal.SIGKILL else 0.0
    required = max((n + 1 for n, at in acks.items() if at < kill_time - window), default=0)
    stats["required"] += required > 0

    recovering = serve(sandbox, state, encoding="utf-32")
    info = recovering.open(path)
    offer = info.get("recovery")
    if offer is None:
        stats["none"] += 1
        # Nothing whole in the journal, or its text is the file's (deleted quietly).
        assert required == 0 or any(plan.texts[n] == plan.texts[0] for n in range(required, sent[0] + 1)), (
            f"no recovery offered, but request {required - 1} (version {first_version + required}) was acknowledged "
            f"{kill_time - acks[required - 1]:.3f} s before the kill; the journal's thread then: {writer} {where}")
        assert recovering.read(info["document"]) == plan.texts[0]
        recovering.kill()
        return
    stats["offered"] += 1
    n = offer["version"] - first_version
    written = datetime.datetime.strptime(offer["date"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    assert required <= n <= sent[0], (
        f"recovered version {offer['version']}, but version {first_version + required} was acknowledged "
        f"{kill_time - acks[required - 1]:.3f} s before the kill (window {window:.3f} s; the first edit lost, version "
        f"{offer['version'] + 1}, {kill_time - acks.get(n, kill_time):.3f} s before) and {first_version + sent[0]} was "
        f"the last sent; the journal was last written {kill_wall - written.timestamp():.3f} s before the kill; "
        f"the journal's thread then: {writer} {where}")
    lost = [kill_time - at for m, at in acks.items() if m + 1 > n]
    stats["oldest lost ack"] = max([stats["oldest lost ack"], *lost])
    assert offer["edits"] == plan.changes[n], (offer, plan.changes[n], where)
    assert offer["fileMatchesBase"] is True, (offer, where)
    # A SIGKILL in the middle of a large write(2) may leave a torn record: it is cut off, never used.
    assert offer["cut"] is None or offer["cut"]["reason"] == "torn", (offer, where)
    assert DATE.match(offer["date"]), offer

    handle = info["document"]
    reply, result = recover(recovering, handle)
    assert result["version"] == offer["version"] and result["inConflict"] is False and result["hasUnsavedChanges"] is True, (result, where)
    assert apply_text_edits(plan.texts[0], result["edits"], "utf-32") == plan.texts[n], f"the recover edits {where}"
    read = recovering.call("document/read", {"document": handle})
    assert read["version"] == offer["version"], (read["version"], where)
    assert read["text"] == plan.texts[n], (
        f"recovered text differs from the model at version {offer['version']} {where}")
    change = recovering.state_change(reply, "recovered")
    assert change["hasUnsavedChanges"] is True and change["version"] == offer["version"], change

    # The undo history came back: undoing every step gives the file's text, clean.
    if trial % 2 == 0 and offer["edits"] <= 300:
        first = recovering.rpc.next_id
        count = offer["edits"] + 1
        recovering.rpc.next_id += count
        for k in range(count):
            recovering.rpc.send({"jsonrpc": "2.0", "id": first + k, "method": "document/undo", "params": {"document": handle}})
        for k in range(count):
            response, _ = recovering.rpc.read_until_response(first + k, timeout=60)
            assert "result" in response, (response, where)
            assert bool(response["result"]["edits"]) is (k < count - 1), (
                f"undo {k + 1} of {offer['edits']} recovered steps: {response['result']} {where}")
        assert recovering.read(handle) == plan.texts[0], f"undoing every recovered step {where}"
        assert recovering.state(handle)["hasUnsavedChanges"] is False, where
        stats["undone"] += 1
    recovering.kill()


# -- 2. a torn tail, a corrupt record ----------------------------------------------------------------


INSERTS = [(line, 0, f"edit {line}\n") for line in range(6)]


def test_a_torn_tail_and_a_corrupt_record_are_cut_off(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    editor, journal, data = make_dead_journal(sandbox, state, path, INSERTS)

    # The file is as the brief says: 0600 in a 0700 directory, named <key>-<random>.journal; the
    # header, the base (the file's text), then one change per edit, each with its version and edit.
    assert JOURNAL_NAME.match(journal.name), journal.name
    assert oct(journal.stat().st_mode & 0o777) == "0o600" and oct(journal.parent.stat().st_mode & 0o777) == "0o700"
    records, cut = parse_journal(data)
    assert cut is None
    assert [record.type for record in records] == [HEADER, BASE] + [CHANGE] * len(INSERTS), [r.type for r in records]
    assert records[1].payload.decode() == ORIGINAL
    changes = [decode_change(record.payload) for record in records[2:]]
    versions = [change["version"] for change in changes]
    assert versions == sorted(editor.texts)[1:], versions
    text_before = ORIGINAL
    for change in changes:
        assert change["op"] == 1 and change["unsaved"] is True, change
        [(start, removed, inserted)] = change["edits"]
        assert text_before.encode()[start: start + len(removed.encode())].decode() == removed
        text_before = (text_before.encode()[:start] + inserted.encode() + text_before.encode()[start + len(removed.encode()):]).decode()
        assert text_before == editor.texts[change["version"]]

    journal.unlink()  # each case below puts its own version of it in place
    server = serve(sandbox, state, flush_delay=0)

    def offered_and_recovered(data_: bytes, expected_version: int, edits: int, cut_: dict | None, what: str) -> None:
        name = another_name(journal.name)
        install_journal(state, name, data_)
        info = server.open(path)
        try:
            check_offer(info.get("recovery"), version=expected_version, edits=edits, cut=cut_)
        except AssertionError as error:
            raise AssertionError(f"{what}: {error}") from None
        handle = info["document"]
        _, result = recover(server, handle)
        assert result["version"] == expected_version, (what, result)
        assert server.read(handle) == editor.texts[expected_version], what
        # The recovered journal is this server's now, its bad tail cut off (appending goes on from
        # the last whole record).
        good = cut_["offset"] if cut_ else len(data_)
        wait_until(lambda: (journal_dir(state) / name).exists() and (journal_dir(state) / name).stat().st_size == good,
                   what=f"{what}: the recovered journal cut to {good} bytes")
        assert server.call("document/close", {"document": handle, "save": "never"}) == {"saved": False}
        wait_for_no_journal(state)  # closed without saving: the journal goes

    last = records[-1]
    # Ending exactly before the last record: all but the last, nothing cut.
    offered_and_recovered(data[: last.offset], versions[-2], len(INSERTS) - 1, None, "cut before the last record")
    # Every length inside the last record: torn.
    for length in range(last.offset + 1, last.end):
        offered_and_recovered(data[:length], versions[-2], len(INSERTS) - 1,
                              {"offset": last.offset, "bytes": length - last.offset, "reason": "torn"},
                              f"cut at {length} of {len(data)} (last record {last.offset}..{last.end})")

    # One byte of a record in the middle corrupted (its checksum, type or payload; the length field
    # is left alone, since a longer length makes it torn instead): recovery up to the record before.
    middle = records[4]  # the third change
    assert middle.type == CHANGE
    before = records.index(middle) - 1
    positions = [0, 1, 2, 3] + list(range(8, 9 + len(middle.payload)))
    for at in positions:
        corrupt = bytearray(data)
        corrupt[middle.offset + at] ^= 0xFF
        assert parse_journal(bytes(corrupt))[1] == (middle.offset, "checksum")
        offered_and_recovered(bytes(corrupt), records[before].version, before - 1,
                              {"offset": middle.offset, "bytes": len(data) - middle.offset, "reason": "checksum"},
                              f"byte {at} of the record at {middle.offset} corrupted")

    server.call("workspace/recoverable", {})
    assert journal_failures(server) == [], "a recovered journal could not be written"

    # Cut inside the base: nothing whole to recover, nothing offered.
    for length in (len(MAGIC), records[1].offset + 5, records[1].end - 1):
        install_journal(state, another_name(journal.name), data[:length])
        info = server.open(path)
        assert "recovery" not in info, (length, info)
        assert server.call("workspace/recoverable", {}) == {"journals": []}
        server.call("document/close", {"document": info["document"], "save": "never"})


# -- 3. the disk changed in between ------------------------------------------------------------------


def test_file_changed_on_disk_after_the_kill_recovers_in_conflict_and_merges(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    editor = Editor(server, path)
    editor.edit([{"range": span(0, 0, 0, 5), "text": "ALPHA (mine)"}])
    editor.insert(2, 0, "mine too\n")
    mine = editor.text
    wait_for_journal(state, editor.version)
    sigkill(server)

    # Another program changes another line, replacing the file.
    theirs = ORIGINAL.replace("epsilon", "EPSILON (theirs)")
    temp = sandbox.docs / "other-editor.tmp"
    temp.write_text(theirs)
    os.replace(temp, path)

    recovering = serve(sandbox, state)
    info = recovering.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=2, matches=False)
    handle = info["document"]
    assert recovering.read(handle) == theirs
    reply, result = recover(recovering, handle)
    assert result["inConflict"] is True and result["hasUnsavedChanges"] is True, result
    assert result["version"] == editor.version
    assert apply_text_edits(theirs, result["edits"], "utf-16") == mine
    change = recovering.state_change(reply, "recovered")
    assert "inConflict" in change["state"], change
    assert recovering.read(handle) == mine
    assert "inConflict" in recovering.state(handle)["state"]

    resolved = recovering.call("document/resolveConflict", {"document": handle, "resolution": "merge"})
    assert resolved["resolved"] is True, resolved
    merged = "ALPHA (mine)\nbeta\nmine too\ngamma\ndelta\nEPSILON (theirs)\n"
    assert recovering.read(handle) == merged
    state_now = recovering.state(handle)
    assert "inConflict" not in state_now["state"] and state_now["hasUnsavedChanges"] is True, state_now
    check_saved(recovering, recovering.save(handle))
    assert path.read_text() == merged
    wait_for_no_journal(state)  # saved: nothing unsaved, no journal



def test_a_recovery_in_conflict_refuses_a_plain_save_and_keeps_the_files_text(sandbox):
    """Issue 34 point 3: a recovery whose file changed since the journal's base is a conflict, but
    the document's identity is the file's (read at the open), so the save's check of the file could
    not refuse: a save without force wrote the recovered text over the other program's. Now it is
    refused (-32017) like any save in conflict, and the file's text is a conflict version."""
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    editor = Editor(server, path)
    editor.edit([{"range": span(0, 0, 0, 5), "text": "ALPHA (mine)"}])
    mine = editor.text
    wait_for_journal(state, editor.version)
    sigkill(server)
    theirs = ORIGINAL.replace("epsilon", "EPSILON (theirs)")
    path.write_text(theirs)  # another program, after the kill

    recovering = serve(sandbox, state)
    handle = recovering.open(path)["document"]
    _, result = recover(recovering, handle)
    assert result["inConflict"] is True and recovering.read(handle) == mine, result
    refused = recovering.save(handle)
    assert refused.error["code"] == CHANGED_ON_DISK, refused.response
    assert path.read_text() == theirs  # not overwritten
    assert "inConflict" in recovering.state(handle)["state"]

    def kept() -> list[str]:
        return [recovering.call("document/readVersion", {"document": handle, "id": version["id"]})["text"]
                for version in recovering.call("document/versions", {"document": handle})["versions"] if version["kind"] == "conflict"]

    wait_until(lambda: theirs in kept(), timeout=20, what="the file's text kept as a conflict version")
    # The ways out are as for any conflict: a forced save writes the recovered text.
    check_saved(recovering, recovering.save(handle, force=True))
    assert path.read_text() == mine


# -- 4. two servers on one file ----------------------------------------------------------------------


def test_a_live_servers_journal_is_edited_elsewhere_and_a_dead_ones_is_offered(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    first = serve(sandbox, state)
    editor = Editor(first, path)
    editor.insert(0, 0, "from the first server\n")
    wait_for_journal(state, editor.version)

    second = serve(sandbox, state)
    info = second.open(path)
    assert "recovery" not in info, info
    assert info.get("editedElsewhere") is True, info
    assert second.call("workspace/recoverable", {}) == {"journals": []}  # a live server's journal is not
    handle = info["document"]
    error = second.request("document/recover", {"document": handle}).error
    assert error["code"] == NO_RECOVERY, error

    sigkill(first)
    assert second.call("document/close", {"document": handle}) == {"saved": False}
    info = second.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=1, journal=journal_files(state)[0])
    assert "editedElsewhere" not in info, info
    # While offered, the journal is locked by the server that offers it: a third server is told
    # the file is edited elsewhere, and offered nothing.
    third = serve(sandbox, state)
    elsewhere = third.open(path)
    assert "recovery" not in elsewhere and elsewhere.get("editedElsewhere") is True, elsewhere
    recover(second, info["document"])
    assert second.read(info["document"]) == editor.text


# -- 5. a journal directory that cannot be written ---------------------------------------------------


def unwritable_journal_file(sandbox, state: Path) -> None:
    state.mkdir()
    (state / "journal").write_text("not a directory\n")


def unwritable_immutable_directory(sandbox, state: Path) -> None:
    (state / "journal").mkdir(parents=True)
    if not sandbox.make_immutable(state / "journal"):
        pytest.skip(f"chattr +i refused on {state} (no immutable flag on this file system)")


def unwritable_state_under_a_file(sandbox, state: Path) -> Path:
    blocker = sandbox.root / "a-file"
    blocker.write_text("x")
    return blocker / "state"


@pytest.mark.parametrize("how", ["journal is a regular file", "journal directory immutable", "state directory under a file"])
def test_a_journal_directory_that_cannot_be_written_leaves_a_working_server(sandbox, how):
    state = sandbox.root / "state"
    if how == "journal is a regular file":
        unwritable_journal_file(sandbox, state)
    elif how == "journal directory immutable":
        unwritable_immutable_directory(sandbox, state)
    else:
        state = unwritable_state_under_a_file(sandbox, state)
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    assert capabilities(server)["journal"] is False, capabilities(server)
    wait_until(lambda: "journal" in server.rpc.stderr.lower(), what="a warning about the journal on stderr")
    assert "warning" in server.rpc.stderr.lower(), server.rpc.stderr

    editor = Editor(server, path)
    editor.insert(0, 0, "still editing\n")
    editor.insert(1, 0, "and again\n")
    assert server.read(editor.document) == editor.text
    check_saved(server, server.save(editor.document))
    assert path.read_text() == editor.text
    assert server.call("workspace/recoverable", {}) == {"journals": []}
    assert not [note for note in server.notifications if note["params"].get("reason") == "journalFailed"]
    assert server.alive()


# -- 6. ENOSPC and EFBIG while journaling ------------------------------------------------------------

_namespace_refusal: list[str] = []


def namespaces_refused() -> str | None:
    if not _namespace_refusal:
        probe = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
            capture_output=True, text=True)
        _namespace_refusal.append("" if probe.returncode == 0 else
                                  f"unshare -m / mount is forbidden here: {probe.stderr.strip() or probe.returncode}")
    return _namespace_refusal[0] or None


def journal_failures(server: Server) -> list[dict]:
    return [note["params"] for note in server.notifications
            if note.get("method") == "document/stateChanged" and note["params"].get("reason") == "journalFailed"]


def wait_journal_failures(server: Server, count: int, timeout: float = 20.0, why: str = "") -> dict:
    """Waits (reading notifications) until `count` journalFailed notifications have come."""
    deadline = time.monotonic() + timeout
    while len(journal_failures(server)) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{len(journal_failures(server))} journalFailed notification(s) in {timeout} s, expected "
                                 f"{count} {why}: {journal_failures(server)}")
        try:
            message = server.rpc.read_message(timeout=left)
        except TimeoutError:
            continue
        if isinstance(message, dict) and "method" in message:
            server.notifications.append(message)
    return journal_failures(server)[count - 1]


def journal_again(editor: Editor, seen_state: Path, timeout: float = 15.0) -> float:
    """Changes (edits that change nothing: each raises the version) until the journal, started again,
    holds the document; answers how long it took. (protocol/README.md §8.22: "each later change
    tries again"; the server now waits 5 s after a failure before it tries, which this allows.)"""
    started = time.monotonic()
    while True:
        editor.edit([{"range": span(0, 0), "text": ""}])
        try:
            wait_for_journal(seen_state, editor.version, timeout=0.5)
            return time.monotonic() - started
        except AssertionError:
            if time.monotonic() - started > timeout:
                raise AssertionError(f"no journal {timeout} s after the disk had room again, changes made every 0.5 s") from None


def told_before_the_journal_came_back(server: Server, count: int) -> None:
    """Called once a journal was written again (`journal_again` waited for it): every failure of the
    changes before it was told by then (the writer tells a failure when the batch that failed ends,
    at least 5 s before a new journal is tried), so exactly `count` journalFailed came, not one per
    change. A round trip collects the notifications sent so far."""
    server.call("workspace/recoverable", {})
    assert len(journal_failures(server)) == count, journal_failures(server)


def test_enospc_while_journaling_is_told_once_and_editing_goes_on(sandbox):
    reason = namespaces_refused()
    if reason:
        pytest.skip(reason)
    state = sandbox.root / "state"
    state.mkdir()
    quoted = shlex.quote(str(state))
    prefix = ("unshare", "-m", "--propagation", "private", "sh", "-c",
              f'set -e; mount -t tmpfs -o size=64k tmpfs {quoted}; exec "$0" "$@"')
    path = write_file(sandbox.docs / "doc.txt", "old\n")
    server = serve(sandbox, state, prefix)
    assert capabilities(server)["journal"] is True
    seen = Path(f"/proc/{server.pid}/root{state}")  # the server's tmpfs, from outside
    editor = Editor(server, path)

    big = text("big", 256 * 1024)
    editor.replace_all(big)  # the change record cannot fit in 64 KiB
    failure = wait_journal_failures(server, 1)
    assert failure["document"] == editor.document and failure["hasUnsavedChanges"] is True, failure
    check_error_detail(failure["error"], "ENOSPC", None, path_under=journal_dir(state))
    assert journal_files(seen) == [], "a journal that could not be written is left"

    # Editing goes on; the journal, started again, fails again, and that is not told again.
    editor.insert(0, 0, "after the failure\n")
    assert server.read(editor.document) == editor.text

    # Room again: the next change starts a journal that holds everything.
    subprocess.run(["nsenter", "-t", str(server.pid), "-m", "mount", "-o", "remount,size=4m", str(state)], check=True)
    editor.insert(0, 0, "room again\n")
    journal_again(editor, seen)
    told_before_the_journal_came_back(server, 1)
    _, data = wait_for_journal(seen, editor.version)
    records, _ = parse_journal(data)
    assert records[1].payload.decode() == "old\n"

    # Full again: told again, since a journal was written in between.
    with open(seen / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    editor.insert(0, 0, text("full again", 64 * 1024))  # more than the page the journal's end has room in
    editor.insert(0, 0, "and on\n")
    assert server.read(editor.document) == editor.text
    assert server.alive()
    failure = wait_journal_failures(server, 2, timeout=10, why="after a journal of the document was written again")
    check_error_detail(failure["error"], "ENOSPC", None, path_under=journal_dir(state))


def test_efbig_while_journaling_is_told_once_and_editing_goes_on(sandbox):
    # An unprivileged way to make journal writes fail: a file-size limit (EFBIG; the server ignores
    # SIGXFSZ).
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", "old\n")
    server = serve(sandbox, state, ("prlimit", "--fsize=65536:unlimited", "--"))
    editor = Editor(server, path)
    big = text("big", 100_000)

    editor.replace_all(big)
    failure = wait_journal_failures(server, 1)
    check_error_detail(failure["error"], "EFBIG", None, path_under=journal_dir(state))
    assert journal_files(state) == []
    editor.insert(0, 0, "after the failure\n")  # editing goes on
    assert server.read(editor.document) == editor.text

    # A small text again: the journal starts again from it, and holds it.
    editor.replace_all("small\n")
    journal_again(editor, state)
    told_before_the_journal_came_back(server, 1)
    # Too big again: told again (checked last, below).
    editor.replace_all(big + "second\n")
    editor.replace_all("small at the end\n")
    journal_again(editor, state)
    try:
        wait_journal_failures(server, 2, timeout=2)
    except AssertionError:
        pass
    told = len(journal_failures(server))
    sigkill(server)

    recovering = serve(sandbox, state)
    info = recovering.open(path)
    offer = info.get("recovery")
    assert offer is not None and offer["version"] == editor.version, offer
    recover(recovering, info["document"])
    assert recovering.read(info["document"]) == "small at the end\n"
    assert told == 2, (f"journalFailed told {told} time(s); expected 2: the journal of a text too big failed again "
                       f"after a journal of the document had been written again (sent once, until a journal of the "
                       f"document is written again): {journal_failures(server)}")


# -- 7. hot exit, close, signals, the end of input ---------------------------------------------------


def test_shutdown_keeps_the_journal_for_the_next_server(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    assert capabilities(server)["hotExit"] is True
    editor = Editor(server, path)
    editor.insert(0, 0, "one\n")
    editor.insert(1, 0, "two\n")
    assert server.rpc.shutdown_and_exit() == 0
    [journal] = journal_files(state)
    assert last_version(journal.read_bytes()) == editor.version
    assert path.read_text() == ORIGINAL

    after = serve(sandbox, state)
    listed = after.call("workspace/recoverable", None)["journals"]
    assert len(listed) == 1, listed
    entry = listed[0]
    assert entry["uri"] == uri(path) and entry["edits"] == 2 and entry["version"] == editor.version and entry["open"] is False, entry
    assert DATE.match(entry["date"]), entry
    info = after.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=2, journal=journal)
    [entry] = after.call("workspace/recoverable", {})["journals"]
    assert entry["open"] is True and entry["uri"] == uri(path), entry
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text


def test_shutdown_without_hot_exit_deletes_the_journal(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state, hot_exit=False)
    assert capabilities(server)["hotExit"] is False
    editor = Editor(server, path)
    editor.insert(0, 0, "one\n")
    wait_for_journal(state, editor.version)
    assert server.rpc.shutdown_and_exit() == 0
    assert journal_files(state) == []
    after = serve(sandbox, state)
    assert "recovery" not in after.open(path)
    assert after.call("workspace/recoverable", {}) == {"journals": []}


@pytest.mark.parametrize("policy", ["never", "ifChanged"])
def test_close_deletes_the_journal(sandbox, policy):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state)
    editor = Editor(server, path)
    editor.insert(0, 0, "one\n")
    wait_for_journal(state, editor.version)
    assert server.call("document/close", {"document": editor.document, "save": policy}) == {"saved": policy == "ifChanged"}
    wait_for_no_journal(state)
    assert path.read_text() == (ORIGINAL if policy == "never" else editor.text)
    sigkill(server)
    after = serve(sandbox, state)
    assert "recovery" not in after.open(path)


def test_journal_lives_exactly_while_there_are_unsaved_changes(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state, flush_delay=0)
    editor = Editor(server, path)
    # A change that changes nothing starts no journal.
    assert server.call("document/edit", {"document": editor.document, "version": editor.version,
                                         "edits": [{"range": span(0, 0, 0, 5), "text": "alpha"}]}) == {"version": editor.version + 1}
    editor.version += 1
    editor.texts[editor.version] = editor.text
    editor.insert(0, 0, "one\n")
    wait_for_journal(state, editor.version)
    undone = server.call("document/undo", {"document": editor.document})
    assert server.read(editor.document) == ORIGINAL and undone["version"] == editor.version + 1
    wait_for_no_journal(state)  # back at the file's text
    redone = server.call("document/redo", {"document": editor.document})
    _, data = wait_for_journal(state, redone["version"])
    assert server.read(editor.document) == editor.text
    check_saved(server, server.save(editor.document))
    wait_for_no_journal(state)


SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_flushes_the_journal_at_once(sandbox, signum):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state, flush_delay=60000)
    assert capabilities(server)["flushDelay"] == 60000
    editor = Editor(server, path)
    editor.insert(0, 0, "unsaved\n")
    server.call("document/state", {"document": editor.document})
    assert journal_files(state) == [], "written before the flush delay (60 s) was up"
    os.kill(server.pid, signum)
    assert server.wait_exit() == 128 + signum
    [journal] = journal_files(state)
    assert last_version(journal.read_bytes()) == editor.version

    after = serve(sandbox, state)
    info = after.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=1, journal=journal)
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text


@pytest.mark.parametrize("how", ["end of input", "exit without shutdown"])
def test_end_of_input_keeps_the_journal_flushed(sandbox, how):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    server = serve(sandbox, state, flush_delay=60000)
    editor = Editor(server, path)
    editor.insert(0, 0, "unsaved\n")
    assert journal_files(state) == []
    if how == "exit without shutdown":
        server.rpc.notify("exit")
    server.rpc.close_input()
    assert server.wait_exit() == 1
    [journal] = journal_files(state)
    assert last_version(journal.read_bytes()) == editor.version
    after = serve(sandbox, state)
    info = after.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=1)
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text


PARENT = """
import subprocess, sys
subprocess.Popen(sys.argv[1:]).wait()
"""


class _Client:
    """A bare RpcClient in the sandbox's list (ended at teardown)."""

    def __init__(self, rpc: RpcClient):
        self.rpc = rpc

    def kill(self) -> None:
        self.rpc.kill()


def test_the_death_of_the_client_process_flushes_the_journal(sandbox):
    # The server runs under a parent process (the "client"), whose pid it is given as processId:
    # when that process dies, the server flushes its journals and exits with status 1.
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    PR_SET_CHILD_SUBREAPER = 36
    assert prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0  # the orphaned server comes to us: its status
    try:
        from faultkit import BIN, allocator_tunables
        rpc = RpcClient(binary="env", args=(f"GLIBC_TUNABLES={allocator_tunables()}", sys.executable, "-c", PARENT,
                                            BIN, "serve", "--state-dir", str(state)), timeout=30)
        sandbox.servers.append(_Client(rpc))
        parent = rpc.process.pid
        rpc.initialize({"processId": parent, "initializationOptions": {"flushDelay": 60000}})
        children = wait_until(lambda: open(f"/proc/{parent}/task/{parent}/children").read().split(), what="the server process")
        child = int(children[0])
        info = rpc.call("document/open", {"uri": uri(path), "includeText": False})
        assert rpc.call("document/edit", {"document": info["document"], "version": info["version"],
                                          "edits": [{"range": span(0, 0), "text": "unsaved\n"}]}) == {"version": info["version"] + 1}
        assert journal_files(state) == []
        os.kill(parent, signal.SIGKILL)
        rpc.process.wait(20)
        _, status = os.waitpid(child, 0)  # blocks until the server exits
        assert os.waitstatus_to_exitcode(status) == 1
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    [journal] = journal_files(state)
    assert last_version(journal.read_bytes()) == info["version"] + 1
    after = serve(sandbox, state)
    offer = after.open(path).get("recovery")
    check_offer(offer, version=info["version"] + 1, edits=1)


# -- 8. discardRecovery and the errors of recover ----------------------------------------------------


def test_discard_recovery_deletes_the_journal(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    make_dead_journal(sandbox, state, path, INSERTS[:2])
    server = serve(sandbox, state)
    info = server.open(path)
    assert info.get("recovery") is not None
    assert server.call("document/discardRecovery", {"document": info["document"]}) is None
    assert journal_files(state) == []
    assert server.read(info["document"]) == ORIGINAL
    for method in ("document/recover", "document/discardRecovery"):
        error = server.request(method, {"document": info["document"]}).error
        assert error["code"] == NO_RECOVERY and error["data"] == {"document": info["document"]}, error
    server.call("document/close", {"document": info["document"]})
    assert "recovery" not in server.open(path)
    assert "recovery" not in serve(sandbox, state).open(path)


def test_recover_errors(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    other = write_file(sandbox.docs / "other.txt", "nothing to recover\n")
    make_dead_journal(sandbox, state, path, INSERTS[:2])
    server = serve(sandbox, state)

    # Nothing offered for this one.
    handle = server.open(other)["document"]
    error = server.request("document/recover", {"document": handle}).error
    assert error["code"] == NO_RECOVERY and error["data"] == {"document": handle}, error
    # An unknown document.
    for method in ("document/recover", "document/discardRecovery"):
        assert server.request(method, {"document": "d999"}).error["code"] == UNKNOWN_DOCUMENT
    # Unsaved changes of its own: recovering would replace them.
    editor = Editor(server, path)
    assert editor.info.get("recovery") is not None
    editor.insert(0, 0, "my own\n")
    error = server.request("document/recover", {"document": editor.document}).error
    assert error["code"] == UNSAVED_CHANGES and error["data"] == {"document": editor.document, "uri": uri(path)}, error
    assert server.read(editor.document) == editor.text
    # workspace/recoverable takes no params.
    assert server.request("workspace/recoverable", {"x": 1}).error["code"] == INVALID_PARAMS


# -- more: what the offer picks, and the recovered journal going on ----------------------------------


def test_a_journal_whose_text_the_file_now_holds_is_deleted_quietly(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    editor, _, _ = make_dead_journal(sandbox, state, path, INSERTS[:2])
    path.write_text(editor.text)  # someone saved the same text
    server = serve(sandbox, state)
    info = server.open(path)
    assert "recovery" not in info, info
    assert journal_files(state) == []


def test_of_several_dead_journals_the_newest_is_offered(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    older, older_journal, _ = make_dead_journal(sandbox, state, path, [(0, 0, "older\n")])
    # Distinct modification times, set rather than waited for: the older journal a minute back.
    back = time.time() - 60
    os.utime(older_journal, (back, back))
    newer_server = serve(sandbox, state)
    newer = Editor(newer_server, path)
    newer.insert(0, 0, "newer\n")
    newer.insert(0, 0, "newest\n")
    wait_until(lambda: len(journal_files(state)) == 2 and any(
        last_version(p.read_bytes()) == newer.version and p != older_journal for p in journal_files(state)),
        what="the second server's journal")
    sigkill(newer_server)

    server = serve(sandbox, state)
    info = server.open(path)
    check_offer(info.get("recovery"), version=newer.version, edits=2)
    # workspace/recoverable: the offer first (open: true), then the older journal, not offered. Its
    # `open` is left alone: the brief leaves it out ("dead servers' journals of files not open
    # here"), protocol/README.md says false ("a dead server's journal that is not offered here"),
    # the server says true (its file is open here).
    listed = server.call("workspace/recoverable", {})["journals"]
    assert [(entry["uri"], entry["edits"]) for entry in listed] == [(uri(path), 2), (uri(path), 1)], listed
    assert listed[0]["open"] is True, listed
    server.call("document/discardRecovery", {"document": info["document"]})
    server.call("document/close", {"document": info["document"]})
    info = server.open(path)
    check_offer(info.get("recovery"), version=older.version, edits=1, journal=older_journal)
    recover(server, info["document"])
    assert server.read(info["document"]) == older.text


def test_a_recovered_journal_goes_on_and_survives_the_next_kill(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    first, journal, _ = make_dead_journal(sandbox, state, path, INSERTS[:3])

    second = serve(sandbox, state)
    info = second.open(path)
    _, result = recover(second, info["document"])
    editor = Editor.__new__(Editor)
    editor.server, editor.encoding, editor.document = second, "utf-16", info["document"]
    editor.version, editor.text, editor.texts = result["version"], first.text, {result["version"]: first.text}
    editor.insert(5, 0, "after recovery\n")
    editor.insert(0, 0, "more\n")
    # Appended to the same file (it is this server's journal now).
    assert wait_for_journal(state, editor.version)[0] == journal
    sigkill(second)

    third = serve(sandbox, state)
    info = third.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=5)
    recover(third, info["document"])
    assert third.read(info["document"]) == editor.text
    # Undo goes back through both lives to the file's text.
    for _ in range(5):
        assert third.call("document/undo", {"document": info["document"]})["edits"]
    assert third.read(info["document"]) == ORIGINAL


def test_recover_makes_the_dead_journal_its_own_without_writing_another(sandbox):
    # "The dead journal becomes the document's journal (appended to from then on)": recovering
    # writes no new journal file (a copy of the whole text, and, if the process dies before the
    # copy is deleted again, a second dead journal of the file).
    from faultkit import Tracer

    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    _, journal, _ = make_dead_journal(sandbox, state, path, INSERTS[:3])
    server = serve(sandbox, state)
    info = server.open(path)
    tracer = Tracer(server.pid, sandbox.root / "strace.log", trace=("openat", "unlink", "unlinkat", "ftruncate"))
    sandbox.tracers.append(tracer)
    recover(server, info["document"])
    # The adopted journal cut to its whole records: the writer's last step of the recovery.
    wait_until(lambda: any(call.name == "ftruncate" and str(journal) in call.args for call in tracer.calls()),
               what="the recovered journal to be reopened for appending")
    tracer.detach()
    created = [call.line for call in tracer.calls()
               if call.name == "openat" and str(journal_dir(state)) in call.args and "O_CREAT" in call.args]
    assert created == [], f"recovering created journal files: {created}"
    assert journal_files(state) == [journal]


def test_recover_after_the_version_moved_past_the_journals(sandbox):
    # The version becomes max(journal's version, current + 1): versions never go back.
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    dead, _, _ = make_dead_journal(sandbox, state, path, INSERTS[:2])
    server = serve(sandbox, state)
    editor = Editor(server, path)
    for _ in range(10):  # edits that change nothing: only the version moves
        editor.edit([{"range": span(0, 0, 0, 5), "text": "alpha"}])
    assert editor.version > dead.version
    _, result = recover(server, editor.document)
    assert result["version"] == editor.version + 1, (result, editor.version)
    read = server.call("document/read", {"document": editor.document})
    assert read == {"text": dead.text, "version": editor.version + 1}
    editor.version, editor.text = read["version"], read["text"]
    editor.insert(0, 0, "on top\n")
    wait_for_journal(state, editor.version)
    sigkill(server)
    after = serve(sandbox, state)
    info = after.open(path)
    check_offer(info.get("recovery"), version=editor.version, edits=3)
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text


def test_a_merged_conflict_is_journaled_against_the_new_base(sandbox):
    # After a recovery in conflict resolved by a merge, the journal starts again from the file's
    # text (the new base) and the merged text: killed then, the next server offers the merged text
    # with fileMatchesBase true, and one undo goes back to the file's text.
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    make_dead_journal(sandbox, state, path, [(0, 0, "mine\n")])
    theirs = ORIGINAL.replace("epsilon", "EPSILON (theirs)")
    path.write_text(theirs)
    server = serve(sandbox, state)
    info = server.open(path)
    assert info["recovery"]["fileMatchesBase"] is False
    handle = info["document"]
    assert recover(server, handle)[1]["inConflict"] is True
    resolved = server.call("document/resolveConflict", {"document": handle, "resolution": "merge"})
    assert resolved["resolved"] is True, resolved
    merged = "mine\n" + theirs
    assert server.read(handle) == merged
    version = server.state(handle)["version"]
    _, data = wait_for_journal(state, version)
    records, _ = parse_journal(data)
    assert records[1].payload.decode() == theirs, "the journal's base is not the file's text"
    sigkill(server)

    after = serve(sandbox, state)
    info = after.open(path)
    check_offer(info.get("recovery"), version=version, edits=1, matches=True)
    assert recover(after, info["document"])[1]["inConflict"] is False
    assert after.read(info["document"]) == merged
    after.call("document/undo", {"document": info["document"]})
    assert after.read(info["document"]) == theirs
    assert after.state(info["document"])["hasUnsavedChanges"] is False


def test_the_journal_follows_a_moved_document(sandbox):
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "doc.txt", ORIGINAL)
    moved = sandbox.docs / "moved.txt"
    server = serve(sandbox, state)
    editor = Editor(server, path)
    editor.insert(0, 0, "before the move\n")
    [before] = [p.name for p in [wait_for_journal(state, editor.version)[0]]]
    server.call("document/move", {"document": editor.document, "to": uri(moved)})
    editor.insert(0, 0, "after the move\n")
    journal, data = wait_for_journal(state, editor.version)
    assert journal.name.split("-")[0] != before.split("-")[0], "the journal's name still has the old path's key"
    records, _ = parse_journal(data)
    assert [record.type for record in records] == [HEADER, BASE, CHANGE, MOVED, CHANGE], [r.type for r in records]
    sigkill(server)
    assert moved.read_text() == ORIGINAL and not path.exists()

    after = serve(sandbox, state)
    info = after.open(moved)
    check_offer(info.get("recovery"), version=editor.version, edits=2)
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text


def test_a_journal_grown_past_its_bound_starts_again_and_recovers(sandbox):
    # Past 8 MiB + 3 x the base, the journal starts again from the file's text and the current
    # text (a `text` record): its size stays bounded, and what it recovers is the same.
    state = sandbox.root / "state"
    original = text("base", 20_000)
    path = write_file(sandbox.docs / "doc.txt", original)
    server = serve(sandbox, state)
    editor = Editor(server, path)
    for round_number in range(6):  # 2 MB a record (removed and inserted): past the bound at the 6th
        editor.replace_all(text(f"r{round_number}", 1_000_000))
    editor.insert(0, 0, "last\n")
    journal, data = wait_for_journal(state, editor.version)
    assert len(data) < (8 << 20) + 3 * len(original) + 2 * 1_100_000, len(data)
    records, _ = parse_journal(data, verify=False)
    assert TEXT in [record.type for record in records], "the journal never started again"
    assert records[1].payload.decode() == original
    sigkill(server)

    after = serve(sandbox, state)
    info = after.open(path)
    offer = info.get("recovery")
    assert offer is not None and offer["version"] == editor.version, offer
    recover(after, info["document"])
    assert after.read(info["document"]) == editor.text
    # Undo goes back to the file's text.
    for _ in range(offer["edits"]):
        assert after.call("document/undo", {"document": info["document"]})["edits"]
    assert after.read(info["document"]) == original


# -- issue 34.9: nothing from outside the roots -----------------------------------------------------


def test_recoverable_lists_only_the_journals_of_files_beneath_the_roots(sandbox):
    """A server started with --root R lists in workspace/recoverable only the journals of files (and
    packages) beneath R. Before issue 34.9 it listed every journal of the state directory: the URI,
    date and edit count of files outside R."""
    state = sandbox.root / "state"
    inside, outside = sandbox.docs / "inside", sandbox.docs / "outside"
    inside.mkdir()
    outside.mkdir()
    paths = {name: write_file(directory / f"{name}.txt", ORIGINAL) for name, directory in (("in", inside), ("out", outside))}
    packages = {}
    for name, directory in (("in", inside), ("out", outside)):
        package = directory / f"{name}.textbundle"
        package.mkdir()
        (package / "text.md").write_text("saved\n")
        packages[name] = package
    # A server without roots edits all four and exits keeping their journals (hot exit).
    first = serve(sandbox, state)
    for path in paths.values():
        Editor(first, path).insert(0, 0, "unsaved\n")
    for package in packages.values():
        handle = first.call("document/open", {"uri": uri(package)})["document"]
        first.call("document/writeEntry", {"document": handle, "path": "text.md", "text": "unsaved\n"})
    assert first.rpc.shutdown_and_exit() == 0
    unrestricted = serve(sandbox, state)
    everything = {entry["uri"] for entry in unrestricted.call("workspace/recoverable", {})["journals"]}
    assert everything == {uri(p) for p in [*paths.values(), *packages.values()]}, everything
    unrestricted.shutdown()

    rooted = sandbox.start(args=("serve", "--state-dir", str(state), "--root", str(inside)))
    listed = {entry["uri"] for entry in rooted.call("workspace/recoverable", {})["journals"]}
    assert listed == {uri(paths["in"]), uri(packages["in"])}, listed
    # Narrowed by initialize too: a client whose roots exclude `inside` hears of none.
    narrowed = sandbox.start(args=("serve", "--state-dir", str(state)),
                             initialization={"initializationOptions": {"roots": [uri(outside)]}})
    listed = {entry["uri"] for entry in narrowed.call("workspace/recoverable", {})["journals"]}
    assert listed == {uri(paths["out"]), uri(packages["out"])}, listed


def test_a_save_killed_after_its_rename_leaves_a_journal_replayed_onto_its_own_base(sandbox):
    """Issue 34.4's check for text journals: the journal carries its base text and replays its
    edits onto that, never onto the file. A save killed after its rename (at the directory's fsync,
    before the answer and the journal's deletion) leaves the old journal beside the new file: its
    text is the file's, so nothing is offered and it is deleted quietly; had the file been changed
    after, the offer's three sides would be the journal's base, its text and the file's."""
    state = sandbox.root / "state"
    path = write_file(sandbox.docs / "notes.txt", "alpha\nbeta\n")
    server = serve(sandbox, state)
    editor = Editor(server, path)
    editor.edit([{"range": span(0, 0, 0, 5), "text": "gamma"}])
    version = editor.edit([{"range": span(1, 0, 1, 4), "text": ""}])
    wait_for_journal(state, version)
    tracer = sandbox.trace(server, inject=("fsync:signal=SIGKILL:when=2",))
    server.send_save(editor.document)
    assert server.wait_exit() == -signal.SIGKILL
    tracer.wait()
    assert path.read_text() == editor.text, "the kill did not come after the rename"
    assert len(journal_files(state)) == 1  # the old journal stayed

    again = serve(sandbox, state)
    info = again.open(path)
    assert "recovery" not in info, info
    assert journal_files(state) == []

    # The same journal beside a file another program changed after the save: offered in conflict,
    # recovered to the journal's own text, with the journal's base as the merge's base.
    sigkill(again)
    editor = Editor(serve(sandbox, state), path)
    editor.edit([{"range": span(0, 0, 0, 5), "text": "delta"}])
    wait_for_journal(state, editor.version)
    sigkill(editor.server)
    path.write_text("gamma\nepsilon\n")
    third = serve(sandbox, state)
    info = third.open(path)
    check_offer(info["recovery"], version=editor.version, edits=1, matches=False)
    reply, result = recover(third, info["document"])
    assert result["inConflict"] is True, reply.response
    assert third.read(info["document"]) == editor.text
