"""Helpers of the safe-save fault tests: servers, strace, files, and what the protocol promises.

Everything here drives the built binary over stdio through Tests/protocol/rpc_client.py (conftest.py
puts that directory on sys.path). Standard library only.

strace, as used here (strace 6.1; see README.md for why):
- Injection happens only for syscalls that are traced: `-e trace=none` switches it off, so every
  injected syscall is also in the `trace=` set.
- The `when=N` counters are per thread, not per process, and every save runs on a thread of its
  own: `when=1` hits the first call *of every save*. So a fault is made to go away by detaching
  strace (``Tracer.detach``), not by counting.
- strace is attached to a server that has already opened and edited its document (``Tracer``,
  `strace -p`), so the counters start in the save's own thread and loads, sweeps and hashes do not
  use them up. The log (`-y`: fds with their paths) is checked to prove the fault hit the intended
  call of the save; a test never passes because the fault missed.
- A thread's first malloc may open and close `/sys/devices/system/cpu/online` (glibc computing its
  arena limit), which would shift those counts in a save that starts on a new pool thread: servers
  run with the limit given (``allocator_tunables``), so glibc never reads it.
"""

from __future__ import annotations

import errno as errno_module
import glob
import hashlib
import os
import re
import signal
import stat
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from rpc_client import RpcClient, binary_path

BIN = str(binary_path())
TEMP_PREFIX = ".docsession-save-"
BACKUP_PREFIX = ".docsession-backup-"

FILE_SYSTEM_ERROR = -32010
CHANGED_ON_DISK = -32017

# A user 1234:4321 that the process is not: makes the save call fchown.
OTHER_OWNER = (1234, 4321)
NOBODY = 65534


# -- waiting ---------------------------------------------------------------------------------------


# How long a test waits for a condition before it fails: generous (as the Swift tests' 60 s), since a
# machine kept busy (CI's run under load, with builds or disk-heavy work beside it) stretches the
# server's background work: versions are written at nice 10, each flushed, behind whatever else the
# disk is writing back (a clean-clone run failed a 20 s wait for two kept versions so). A test that
# passes waits only as long as its condition takes. DOCSESSION_TEST_DEADLINE overrides it.
DEADLINE = float(os.environ.get("DOCSESSION_TEST_DEADLINE", "60"))


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "a condition", interval: float = 0.01) -> Any:
    """Polls `predicate` until it answers something true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# -- texts and files -------------------------------------------------------------------------------


def text(tag: str, size: int) -> str:
    """About `size` bytes of ASCII lines that all carry `tag`: two texts with different tags differ
    everywhere, so a file mixing them (torn) matches neither."""
    line_count = max(1, size // 48)
    return "".join(f"{tag} {index:08d} abcdefghijklmnopqrstuvwxyz0123\n" for index in range(line_count))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def uri(path: Path | str) -> str:
    return "file://" + urllib.parse.quote(str(path))


def write_file(path: Path, content: str | bytes, mode: int | None = None, owner: tuple[int, int] | None = None,
               xattrs: dict[str, bytes] | None = None) -> Path:
    """A file with `content` and, if given, this mode, owner and user xattrs (applied in that order)."""
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    if owner is not None:
        os.chown(path, *owner)
    if mode is not None:
        os.chmod(path, mode)
    for name, value in (xattrs or {}).items():
        os.setxattr(path, name, value)
    return path


def leftovers(directory: Path) -> list[str]:
    """Our temp and backup files in `directory`."""
    return sorted(name for name in os.listdir(directory) if name.startswith((TEMP_PREFIX, BACKUP_PREFIX)))


def temp_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith(TEMP_PREFIX))


@dataclass(frozen=True)
class Metadata:
    """What a save must keep of a file: everything but content, inode and times."""

    mode: str
    uid: int
    gid: int
    nlink: int
    xattrs: tuple[tuple[str, bytes], ...]

    def __repr__(self) -> str:
        return f"Metadata(mode={self.mode}, owner={self.uid}:{self.gid}, nlink={self.nlink}, xattrs={dict(self.xattrs)})"


def metadata(path: Path) -> Metadata:
    """The metadata of the file `path` names (following symlinks), xattrs and ACLs included."""
    status = os.stat(path)
    names = sorted(os.listxattr(path))
    return Metadata(
        mode=oct(stat.S_IMODE(status.st_mode)), uid=status.st_uid, gid=status.st_gid, nlink=status.st_nlink,
        xattrs=tuple((name, os.getxattr(path, name)) for name in names))


def getfacl(path: Path) -> str:
    """The ACL as `getfacl` shows it (without the header)."""
    return subprocess.run(["getfacl", "-c", "-p", str(path)], check=True, capture_output=True, text=True).stdout


# -- the server ------------------------------------------------------------------------------------


@dataclass
class Reply:
    """A response and the notifications that arrived before it."""

    response: dict
    notifications: list[dict]

    @property
    def ok(self) -> bool:
        return "result" in self.response

    @property
    def result(self) -> dict:
        assert "result" in self.response, f"expected success, got {self.response}"
        return self.response["result"]

    @property
    def error(self) -> dict:
        assert "error" in self.response, f"expected an error, got {self.response}"
        return self.response["error"]


def allocator_tunables() -> str:
    """GLIBC_TUNABLES for a server under test: the user's, and glibc's own arena limit made explicit.

    glibc's malloc gives a new thread an arena of its own on its first malloc. Its limit on arenas
    (8 per online CPU on 64-bit) is computed once, when a thread needs an arena while more than 8
    exist: that thread's malloc then opens, reads and closes `/sys/devices/system/cpu/online`
    (`__get_nprocs`). When that thread is the pool thread a save starts on, its openat and close
    come before the save's and shift strace's per-thread `when=N` counts: `close:when=1` kills the
    close of that file instead of the temp file's. With `glibc.malloc.arena_max` set, glibc takes
    the limit from it and never reads the file; set to the value glibc would compute, the server's
    allocator behaves as without it (the same limit, the same arenas) and its threads make only
    their own system calls. The server still puts its `glibc.malloc.tcache_count` first
    (MallocTuning); an `arena_max` in the environment is left alone."""
    given = os.environ.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.arena_max" in given:
        return given
    # What glibc's arena_get2 computes: NARENAS_FROM_NCORES(__get_nprocs()), and sysconf answers
    # from __get_nprocs (the online CPUs); 2 CPUs when it knows nothing.
    online = os.sysconf("SC_NPROCESSORS_ONLN")
    setting = f"glibc.malloc.arena_max={8 * (online if online >= 1 else 2)}"
    return f"{given}:{setting}" if given else setting


class Server:
    """A docsession server on stdio, started as `*prefix BIN` (prefix: a wrapper such as
    `prlimit --fsize=1024 --`, `setpriv ...` or `sh -c 'umask 077 && exec "$0"'`, which must exec the
    server so that its pid is the server's), under `env GLIBC_TUNABLES=...` (``allocator_tunables``:
    glibc's arena limit given, so that no thread of the server reads the CPU count in the middle of
    a traced save)."""

    def __init__(self, prefix: Iterable[str] = (), timeout: float = 30.0, initialization: dict | None = None,
                 args: Iterable[str] = ()):
        # `args`: the server's own arguments, after BIN (e.g. `serve --state-dir DIR`). Without
        # them the server runs without its journal (`serve --no-journal`): the save protocol's tests
        # trace and inject into system calls across every thread of the server (strace -f, calls
        # counted by name), and the journal's thread makes some of the same calls (openat to create
        # a journal, fsync of its directory) at moments of its own, ~150 ms after an edit, which
        # then land in a save's window (seen in a clean-clone run under load: an injected openat
        # counted twice; a stop at an fsync that was not the save's). The journal's own tests
        # (test_journal.py) pass their arguments, with a state directory, and run it. Likewise
        # `--no-file-locks`: a save's first calls would otherwise open and lock its file's lock
        # under the runtime directory (issue 19), shifting the counts of the save's own calls that
        # these tests name; the locks are tested in test_sharing.py.
        argv = ["env", f"GLIBC_TUNABLES={allocator_tunables()}", *prefix, BIN, *(args or ("serve", "--no-journal", "--no-file-locks"))]
        self.rpc = RpcClient(binary=argv[0], args=tuple(argv[1:]), timeout=timeout)
        self.notifications: list[dict] = []
        # The `initialize` result (its `capabilities`).
        self.initialized: dict = self.rpc.initialize({} if initialization is None else initialization)

    @property
    def pid(self) -> int:
        return self.rpc.process.pid

    def alive(self) -> bool:
        return self.rpc.process.poll() is None

    def request(self, method: str, params: dict, timeout: float | None = None) -> Reply:
        response, before = self.rpc.request(method, params, timeout=timeout)
        notes = [message for message in before if isinstance(message, dict) and "method" in message]
        self.notifications += notes
        return Reply(response, notes)

    def call(self, method: str, params: dict) -> dict:
        reply = self.request(method, params)
        return reply.result

    def open(self, path: Path | str, **params: Any) -> dict:
        return self.call("document/open", {"uri": uri(path), "includeText": False, **params})

    def replace_text(self, document: str, version: int, new_text: str) -> int:
        return self.call("document/edit", {"document": document, "version": version, "edits": [{"text": new_text}]})["version"]

    def open_and_edit(self, path: Path | str, new_text: str) -> str:
        """Opens `path` and replaces its whole text: a document with unsaved changes. Answers its handle."""
        info = self.open(path)
        self.replace_text(info["document"], info["version"], new_text)
        return info["document"]

    def save(self, document: str, timeout: float | None = None, **params: Any) -> Reply:
        return self.request("document/save", {"document": document, **params}, timeout=timeout)

    def send_save(self, document: str, **params: Any) -> int:
        """Sends a save without waiting for its response (the server may die on the way)."""
        request_id = self.rpc.next_id
        self.rpc.next_id += 1
        self.rpc.send({"jsonrpc": "2.0", "id": request_id, "method": "document/save", "params": {"document": document, **params}})
        return request_id

    def read(self, document: str) -> str:
        return self.call("document/read", {"document": document})["text"]

    def state(self, document: str) -> dict:
        return self.call("document/state", {"document": document})

    def state_change(self, reply: Reply, reason: str, timeout: float = 5.0) -> dict:
        """The params of the `document/stateChanged` with this reason sent for the request of `reply`
        (before its response, or shortly after it)."""
        for note in reply.notifications:
            if note.get("method") == "document/stateChanged" and note["params"].get("reason") == reason:
                return note["params"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.rpc.read_message(timeout=max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                break
            if isinstance(message, dict) and "method" in message:
                self.notifications.append(message)
                reply.notifications.append(message)
                if message["method"] == "document/stateChanged" and message["params"].get("reason") == reason:
                    return message["params"]
        raise AssertionError(f"no document/stateChanged with reason {reason!r}; got {reply.notifications}")

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.rpc.wait(timeout)

    def shutdown(self) -> None:
        if self.alive():
            self.rpc.shutdown_and_exit()
        self.rpc.kill()

    def kill(self) -> None:
        self.rpc.kill()


def umask_prefix(mask: int) -> tuple[str, ...]:
    """A prefix that starts the server with this umask (inherited, as from a shell)."""
    return ("sh", "-c", f'umask {mask:03o} && exec "$0" "$@"')


# -- strace ----------------------------------------------------------------------------------------


def tracer_pids(pid: int) -> set[int]:
    """The TracerPid of every thread of `pid` (0: not traced)."""
    found = set()
    for status_path in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status_path) as status_file:
                for line in status_file:
                    if line.startswith("TracerPid:"):
                        found.add(int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended meanwhile
    return found


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (state T, or t under a tracer)."""
    states = []
    for stat_path in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            with open(stat_path) as stat_file:
                states.append(stat_file.read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return bool(states) and all(state in "tT" for state in states)


# Everything a save does that the tests look at.
SAVE_SYSCALLS = ("openat", "pwrite64", "pwritev", "fchown", "fchmod", "fsetxattr", "fsync", "close", "renameat", "renameat2",
                 "unlinkat", "flock", "ftruncate")


class Tracer:
    """strace attached to a running server: all its threads and every thread it starts (`-f -p`),
    with a log (`-y`, so fds show their paths), injecting `inject` (strace `-e inject=` specs)."""

    def __init__(self, pid: int, log: Path, trace: Iterable[str] = SAVE_SYSCALLS, inject: Iterable[str] = ()):
        self.pid = pid
        self.log_path = log
        command = ["strace", "-f", "-qq", "-I1", "-y", "-o", str(log), "-e", "trace=" + ",".join(trace)]
        for spec in inject:
            command += ["-e", "inject=" + spec]
        command += ["-p", str(pid)]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: self.process.poll() is not None or tracer_pids(pid) == {self.process.pid},
                       what=f"strace to attach to every thread of {pid}")
        except AssertionError:
            self.stop()
            raise
        if self.process.poll() is not None:
            raise AssertionError(f"strace ended at once: {self.process.stderr.read().decode(errors='replace')}")

    def detach(self) -> None:
        """Ends tracing (and so every fault); the server runs on."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        wait_until(lambda: self.process.pid not in tracer_pids(self.pid), what="strace to detach")
        # A fault injected into a thread other than the one a test aimed at can stop the server
        # too: a SIGSTOP at `fsync` counts per thread, and the file presenter's conflict version,
        # written on the version queue's thread, makes an fsync of its own at a moment of its own.
        # Landing while strace detached (a loaded machine: CI run 54, load 16), it left the server
        # stopped with nobody to continue it, and the next request timed out. The server runs on.
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 20.0) -> None:
        """Waits for strace to end (after its tracee died)."""
        self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()

    def calls(self) -> list["Call"]:
        return parse_strace(self.log_path.read_text(errors="replace"))


@dataclass
class Call:
    """One system call in an strace log (an `<unfinished ...>` line joined with its `resumed` one)."""

    pid: int
    name: str
    args: str
    result: str
    line: str
    index: int = 0

    @property
    def injected(self) -> bool:
        return "(INJECTED)" in self.result

    @property
    def killed(self) -> bool:
        """Entered but never returned (the process died in it: `= ?`)."""
        return self.result.startswith("?")

    @property
    def value(self) -> int | None:
        match = re.match(r"-?\d+", self.result)
        return int(match.group()) if match else None

    def arg(self, index: int) -> str:
        return split_args(self.args)[index]

    def fd_path(self, index: int = 0) -> str | None:
        """The path strace printed for an fd argument (`7</tmp/x>`)."""
        match = re.fullmatch(r"-?\d+<(.*)>", self.arg(index))
        return match.group(1) if match else None

    def fd(self, index: int = 0) -> int:
        return int(re.match(r"-?\d+", self.arg(index)).group())

    @property
    def result_fd_path(self) -> str | None:
        match = re.match(r"\d+<(.*?)>", self.result)
        return match.group(1) if match else None


def split_args(args: str) -> list[str]:
    """The top-level comma-separated arguments of an strace call (quotes and brackets respected)."""
    parts, depth, quoted, escaped, current = [], 0, False, False, []
    for char in args:
        if quoted:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"':
            quoted = True
        elif char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if current or parts:
        parts.append("".join(current).strip())
    return parts


_LINE = re.compile(r"^(\d+)\s+(.*)$")
# The arguments and the result of a call: up to the last `)` followed by ` = ` (or padding and `= `).
_RESULT = re.compile(r"^(.*)\) += (.*)$", re.DOTALL)


def parse_strace(log: str) -> list[Call]:
    calls: list[Call] = []
    pending: dict[int, str] = {}
    for raw in log.splitlines():
        match = _LINE.match(raw)
        if not match:
            continue
        pid, rest = int(match.group(1)), match.group(2)
        if rest.startswith(("+++", "---")):
            continue
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = re.match(r"<\.\.\. (\w+) resumed>\s?(.*)$", rest)
        if resumed:
            rest = pending.pop(pid, resumed.group(1) + "(") + resumed.group(2)
        head = re.match(r"(\w+)\((.*)$", rest)
        if not head:
            continue
        name, tail = head.group(1), head.group(2)
        # strace pads short lines to its result column: a resumed call reads `<... close resumed>)
        # = ?` with many spaces before the `=`, and its args must not keep them.
        ending = _RESULT.match(tail)
        if ending:
            args, result = ending.group(1), ending.group(2)
        else:
            args, result = tail.rstrip(")"), "?"
        calls.append(Call(pid, name, args, result.strip(), raw, len(calls)))
    return calls


def save_thread_calls(calls: list[Call], directory: Path) -> list[Call]:
    """The calls of the thread that ran the save: the one that opened `directory` (and so took the
    directory lock) and then created a temp file in it."""
    creators = {call.pid for call in calls if call.name == "openat" and TEMP_PREFIX in call.args and call.fd_path(0) == str(directory)}
    assert len(creators) == 1, f"expected one save thread creating a temp file in {directory}, found {creators}"
    pid = creators.pop()
    own = [call for call in calls if call.pid == pid]
    # The thread is a pooled one: after the save it may run other work (the write of the version the
    # save keeps, at the same priority). The save ends where it lets go of the directory's lock
    # and closes the directory.
    created = next(index for index, call in enumerate(own) if call.name == "openat" and TEMP_PREFIX in call.args)
    opens = [(index, call.value) for index, call in enumerate(own)
             if index < created and call.name == "openat" and call.arg(1) == f'"{directory}"' and "O_DIRECTORY" in call.args]
    if opens:
        directory_fd = opens[-1][1]
        unlocks = [index for index, call in enumerate(own)
                   if index > created and call.name == "flock" and "LOCK_UN" in call.args and call.fd(0) == directory_fd]
        if unlocks:
            closes = [index for index, call in enumerate(own)
                      if index > unlocks[0] and call.name == "close" and call.fd(0) == directory_fd]
            own = own[: (closes[0] if closes else unlocks[0]) + 1]
    return own


# -- what a failed save must look like -------------------------------------------------------------

# What a user is told to do, per errno (recoverable, a suggestion that must be among them).
ADVICE = {
    "ENOSPC": (True, "freeSpace"), "EDQUOT": (True, "freeSpace"), "EIO": (True, "retry"),
    "EFBIG": (False, "saveAs"), "EACCES": (False, "checkPermissions"), "EPERM": (False, "checkPermissions"),
    "EROFS": (False, "saveAs"), "ELOOP": (False, "checkPath"),
}


def check_error_detail(detail: dict, code: str, syscall: str | None = None, path_under: Path | None = None) -> None:
    """A file-system error detail: errno by name and number, the call, the path, a sentence, advice."""
    assert detail["code"] == code, detail
    assert detail["errno"] == getattr(errno_module, code), detail
    if syscall is not None:
        assert detail["syscall"] == syscall, detail
    assert isinstance(detail["path"], str) and detail["path"].startswith("/"), detail
    if path_under is not None:
        assert detail["path"].startswith(str(path_under)), detail
    assert isinstance(detail["message"], str) and code in detail["message"], detail
    assert isinstance(detail["recoverable"], bool), detail
    assert isinstance(detail["suggestions"], list) and all(isinstance(item, str) for item in detail["suggestions"]), detail
    if code in ADVICE:
        recoverable, suggestion = ADVICE[code]
        assert detail["recoverable"] is recoverable, detail
        assert suggestion in detail["suggestions"], detail


def check_failed_save(server: Server, reply: Reply, document: str, code: str, syscall: str | None,
                      edited_text: str, path_under: Path | None = None) -> dict:
    """Everything a failed save promises about the session: -32010 with the detail, a stateChanged
    (saveFailed, savingError, the same detail), the buffer kept with its unsaved changes. Answers
    the detail."""
    error = reply.error
    assert error["code"] == FILE_SYSTEM_ERROR, error
    detail = error["data"]
    check_error_detail(detail, code, syscall, path_under)
    assert error["message"] == detail["message"]
    change = server.state_change(reply, "saveFailed")
    assert "savingError" in change["state"], change
    assert change["hasUnsavedChanges"] is True, change
    assert change["error"] == detail, change
    assert server.read(document) == edited_text
    state = server.state(document)
    assert state["hasUnsavedChanges"] is True and "savingError" in state["state"], state
    return detail


def check_saved(server: Server, reply: Reply, method: str = "rename") -> dict:
    """A successful save: the result, and a stateChanged `saved` that leaves no flag set."""
    result = reply.result
    assert result["method"] == method, result
    change = server.state_change(reply, "saved")
    assert change["state"] == [], change
    assert change["hasUnsavedChanges"] is False, change
    return result
