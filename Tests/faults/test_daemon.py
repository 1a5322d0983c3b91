"""The per-user daemon (issue 19): `docsession daemon`, `docsession connect` and the no-daemon and
refused paths of `docsession coordinate`, driven through the built binary.

Each test has runtime and state directories of its own (under pytest's tmp_path, or a directory
under /tmp that another user can traverse for the SO_PEERCRED test), and the `runtime` fixture
kills every daemon a test caused at its end (the pid in daemon.lock, and any process still running
`daemon --runtime-dir` on one of its directories). Every wait is for a condition, with a generous
deadline."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest

from faultkit import BIN, NOBODY, uri, wait_until
from rpc_client import FrameReader, RpcClient, daemons_on, encode, frame

DEADLINE = 60.0
ALREADY_RUNNING = 75


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return text[text.rindex(")") + 2] not in "ZX"


def lock_pid(directory: Path) -> int:
    return int((directory / "daemon.lock").read_text())


def lock_held(directory: Path) -> bool:
    """Whether a process holds daemon.lock (its flock cannot be taken here)."""
    try:
        descriptor = os.open(directory / "daemon.lock", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)


class Runtime:
    """One test's runtime and state directories, and the daemons started on them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.directories: list[Path] = []
        self.removable: list[Path] = []
        self.processes: list[subprocess.Popen] = []
        self.clients: list[RpcClient] = []
        self.state = tmp_path / "state"
        self.state.mkdir(exist_ok=True)

    def directory(self, name: str = "run", parent: Path | None = None) -> Path:
        """A runtime directory's path (not made: the daemon makes it)."""
        path = (parent or self.tmp_path) / name
        self.directories.append(path)
        return path

    def traversable_parent(self) -> Path:
        """A directory under /tmp that every user can traverse (pytest's tmp_path is 0700)."""
        parent = Path(tempfile.mkdtemp(prefix="docsession-daemon-test-", dir="/tmp"))
        os.chmod(parent, 0o755)
        self.removable.append(parent)
        return parent

    def connect(self, directory: Path, *extra: str) -> RpcClient:
        client = RpcClient(BIN, args=("connect", "--runtime-dir", str(directory), "--state-dir", str(self.state), *extra),
                           timeout=DEADLINE)
        self.clients.append(client)
        return client

    def daemon(self, directory: Path, *extra: str) -> subprocess.Popen:
        process = subprocess.Popen([BIN, "daemon", "--runtime-dir", str(directory), "--state-dir", str(self.state), *extra],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.processes.append(process)
        return process

    def run(self, *args: str, stdin: bytes = b"", cwd: Path | None = None, timeout: float = DEADLINE) -> subprocess.CompletedProcess:
        return subprocess.run([BIN, *args], input=stdin, capture_output=True, cwd=cwd, timeout=timeout)

    def close(self) -> None:
        for client in self.clients:
            client.kill()
        for directory in self.directories:
            pids = set(daemons_on(directory))
            try:
                pids.add(lock_pid(directory))
            except (OSError, ValueError):
                pass
            for pid in pids:
                if alive(pid) and pid in daemons_on(directory):
                    os.kill(pid, signal.SIGKILL)
            for pid in pids:
                wait_until(lambda: not alive(pid), timeout=DEADLINE, what=f"daemon {pid} to die")
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=DEADLINE)
        for parent in self.removable:
            shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    box = Runtime(tmp_path)
    try:
        yield box
    finally:
        box.close()


def check_served(client: RpcClient) -> None:
    """initialize answered with the server's capabilities, then shutdown and exit; the bridge ends 0."""
    result = client.initialize({"processId": os.getpid(), "clientInfo": {"name": "test_daemon"}})
    assert "capabilities" in result, result
    client.call("shutdown")
    client.notify("exit")
    assert client.wait(timeout=DEADLINE) == 0, client.stderr


def test_connect_starts_a_daemon(runtime: Runtime) -> None:
    directory = runtime.directory()
    client = runtime.connect(directory)
    check_served(client)
    assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
    assert stat.S_ISDIR(os.lstat(directory).st_mode)
    socket_status = os.lstat(directory / "daemon.sock")
    assert stat.S_ISSOCK(socket_status.st_mode)
    assert stat.filemode(socket_status.st_mode) == "srw-------"
    pid = lock_pid(directory)
    assert (directory / "daemon.lock").read_text() == f"{pid}\n"
    assert stat.S_IMODE(os.lstat(directory / "daemon.lock").st_mode) == 0o600
    assert daemons_on(directory) == [pid]
    assert lock_held(directory)
    # Its own session: the editor's terminal and process group do not reach it.
    assert os.getsid(pid) == pid
    # The daemon holds none of the connect's pipes: those ended with the connect.
    for descriptor in range(3):
        target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        assert target == "/dev/null", (descriptor, target)

    # A second daemon on the same directory finds it running: status 75, naming pid and socket.
    second = runtime.run("daemon", "--runtime-dir", str(directory), "--state-dir", str(runtime.state))
    assert second.returncode == ALREADY_RUNNING, second.stderr
    assert second.stderr.decode().strip() == (
        f"docsession daemon: a daemon is already running (pid {pid}) on {directory}/daemon.sock")

    # The same connect again reaches the same daemon.
    check_served(runtime.connect(directory, "--no-start"))
    assert daemons_on(directory) == [pid]

    # The end of the editor's input reaches the daemon, whose answers still come back; the
    # bridge ends when the daemon closes the connection.
    client = runtime.connect(directory, "--no-start")
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    client.close_input()
    response, _ = client.read_until_response(1)
    assert "capabilities" in response["result"]
    assert client.wait(timeout=DEADLINE) == 0, client.stderr
    assert daemons_on(directory) == [pid]


def test_no_start_without_a_daemon(runtime: Runtime) -> None:
    directory = runtime.directory()
    done = runtime.run("connect", "--runtime-dir", str(directory), "--no-start")
    assert done.returncode == 1
    assert f"no daemon is listening on {directory}/daemon.sock" in done.stderr.decode()
    assert not directory.exists()


def test_three_connects_at_once_share_one_daemon(runtime: Runtime) -> None:
    directory = runtime.directory()
    log = runtime.tmp_path / "daemon.log"
    clients = [runtime.connect(directory, "--log-file", str(log), "--log-level", "info") for _ in range(3)]
    for client in clients:
        result = client.initialize({"processId": os.getpid()})
        assert "capabilities" in result
    pid = lock_pid(directory)
    wait_until(lambda: daemons_on(directory) == [pid], timeout=DEADLINE, what="the losing daemons to exit")
    # One daemon served all three: it alone logged (the losers exit before logging anything).
    text = log.read_text()
    assert text.count("daemon started") == 1, text
    assert text.count(f"daemon started: pid {pid},") == 1, text
    for number in (1, 2, 3):
        assert f"connection c{number} from process" in text, text
    for client in clients:
        client.call("shutdown")
        client.notify("exit")
    for client in clients:
        assert client.wait(timeout=DEADLINE) == 0, client.stderr


def test_a_killed_daemon_is_replaced_without_a_prompt(runtime: Runtime) -> None:
    directory = runtime.directory()
    first = runtime.connect(directory)
    first.initialize({"processId": os.getpid()})
    old = lock_pid(directory)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), timeout=DEADLINE, what="the daemon to die")
    # The killed daemon's socket and lock file stay behind; the bridge ends with its connection.
    assert stat.S_ISSOCK(os.lstat(directory / "daemon.sock").st_mode)
    assert (directory / "daemon.lock").exists()
    # Released once every thread of it is gone (its main thread shows as a zombie a little earlier).
    wait_until(lambda: not lock_held(directory), timeout=DEADLINE, what="the killed daemon's lock to be released")
    first.wait(timeout=DEADLINE)

    second = runtime.connect(directory)
    check_served(second)
    new = lock_pid(directory)
    assert new != old
    assert daemons_on(directory) == [new]


@pytest.mark.parametrize("fault", ["mode", "owner"])
def test_an_unsafe_runtime_directory_is_refused(runtime: Runtime, fault: str) -> None:
    directory = runtime.directory()
    directory.mkdir(mode=0o700)
    if fault == "mode":
        os.chmod(directory, 0o755)
        expected = f"the runtime directory {directory} has mode 0755: group or others can enter it; it must be 0700"
    else:
        os.chown(directory, NOBODY, NOBODY)
        expected = f"the runtime directory {directory} is owned by uid {NOBODY}, not {os.geteuid()}"
    for command in ("daemon", "connect"):
        done = runtime.run(command, "--runtime-dir", str(directory), "--state-dir", str(runtime.state))
        assert done.returncode == 1, (command, done.stderr)
        assert done.stderr.decode().strip() == f"docsession {command}: {expected}"
        assert os.listdir(directory) == []
    # Refused, never repaired.
    status = os.lstat(directory)
    assert stat.S_IMODE(status.st_mode) == (0o755 if fault == "mode" else 0o700)
    assert status.st_uid == (NOBODY if fault == "owner" else os.geteuid())


@pytest.mark.parametrize("fault", ["squatted", "others-writable"])
def test_serve_refuses_an_unsafe_runtime_directory_as_connect_does(runtime: Runtime, fault: str) -> None:
    """Issue 34.10: a runtime directory another user made (the `/tmp/docsession-<uid>` squat:
    theirs, mode 0777), or one of this user's that others can write, is refused by `serve` as by
    `connect`: nothing is made in it (no servers/, no locks/), and the server says so and serves.
    Before the fix, `serve` refused it for its locks but made servers/<pid>.sock in it."""
    directory = runtime.directory()
    directory.mkdir()
    os.chmod(directory, 0o777)
    if fault == "squatted":
        os.chown(directory, NOBODY, NOBODY)
        expected = f"the runtime directory {directory} is owned by uid {NOBODY}, not {os.geteuid()}"
    else:
        expected = f"the runtime directory {directory} has mode 0777: group or others can enter it; it must be 0700"
    refused = runtime.run("connect", "--runtime-dir", str(directory), "--state-dir", str(runtime.state))
    assert refused.returncode == 1 and refused.stderr.decode().strip() == f"docsession connect: {expected}"
    server = RpcClient(BIN, args=("serve", "--runtime-dir", str(directory), "--state-dir", str(runtime.state), "--no-journal"),
                       timeout=DEADLINE)
    runtime.clients.append(server)
    result = server.initialize({"processId": os.getpid()})
    assert "capabilities" in result, result
    # serve makes servers/<pid>.sock before it reads its first message: by now it would be there.
    assert os.listdir(directory) == [], os.listdir(directory)
    wait_until(lambda: server.stderr.count(expected) >= 2, timeout=DEADLINE, what="the refusals on stderr")
    for consequence in ("saves do not take their file's lock across processes",
                        "coordinated commands do not reach this server"):
        assert f"{consequence}: {expected}" in server.stderr, server.stderr
    # It serves: a file is opened, edited and saved without the directory.
    target = runtime.tmp_path / "file.txt"
    target.write_text("one\n")
    opened = server.call("document/open", {"uri": "file://" + urllib.parse.quote(str(target))})
    server.call("document/edit", {"document": opened["document"], "version": opened["version"], "edits": [{"text": "two\n"}]})
    server.call("document/save", {"document": opened["document"]})
    assert target.read_text() == "two\n"
    assert server.shutdown_and_exit() == 0
    assert os.listdir(directory) == []
    status = os.lstat(directory)
    assert stat.S_IMODE(status.st_mode) == 0o777 and status.st_uid == (NOBODY if fault == "squatted" else os.geteuid())


def test_a_symbolic_link_runtime_directory_is_refused(runtime: Runtime) -> None:
    real = runtime.tmp_path / "real"
    real.mkdir(mode=0o700)
    directory = runtime.directory()
    directory.symlink_to(real)
    for command in ("daemon", "connect"):
        done = runtime.run(command, "--runtime-dir", str(directory))
        assert done.returncode == 1
        assert f"the runtime directory {directory} is a symbolic link" in done.stderr.decode()
    assert os.listdir(real) == []


# Connects as another user, sends an initialize and reads: prints what came back and how it ended.
OTHER_USER_CLIENT = r"""
import json, socket, sys
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connection.settimeout(30)
connection.connect(sys.argv[1])
ending = "eof"
received = b""
try:
    connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    while True:
        data = connection.recv(65536)
        if not data:
            break
        received += data
except (ConnectionResetError, BrokenPipeError) as error:
    ending = type(error).__name__
print(json.dumps({"ending": ending, "received": received.decode("utf-8", "replace")}))
"""


def test_another_user_is_refused_by_peer_credentials(runtime: Runtime) -> None:
    directory = runtime.directory(parent=runtime.traversable_parent())
    log = runtime.tmp_path / "daemon.log"
    daemon = runtime.daemon(directory, "--log-file", str(log), "--log-level", "info")
    socket_path = directory / "daemon.sock"
    wait_until(lambda: socket_path.exists() or daemon.poll() is not None, timeout=DEADLINE, what="the socket")
    assert daemon.poll() is None, daemon.communicate()
    # The directory's 0700 and the socket's 0600 would stop another user already; opened up here so
    # that the peer check is what refuses (some systems ignore a socket file's permissions).
    os.chmod(directory, 0o711)
    os.chmod(socket_path, 0o666)
    other = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", OTHER_USER_CLIENT,
         str(socket_path)],
        capture_output=True, timeout=DEADLINE)
    assert other.returncode == 0, other.stderr
    outcome = json.loads(other.stdout)
    assert outcome["received"] == "", outcome
    warning = f"refused a connection from uid {NOBODY} (pid "
    wait_until(lambda: warning in log.read_text(), timeout=DEADLINE, what="the refusal in the log")
    line = next(line for line in log.read_text().splitlines() if warning in line)
    assert "warning" in line and f"this daemon serves uid {os.geteuid()} only" in line, line
    # This user is still served (once the directory is private again: connect refuses it as it is).
    refused = runtime.run("connect", "--runtime-dir", str(directory), "--no-start")
    assert refused.returncode == 1 and "has mode 0711" in refused.stderr.decode()
    os.chmod(directory, 0o700)
    check_served(runtime.connect(directory, "--no-start"))
    assert daemon.poll() is None


def test_coordinate_without_a_daemon_runs_the_command(runtime: Runtime) -> None:
    directory = runtime.directory()
    target = runtime.tmp_path / "file.txt"
    target.write_text("x\n")
    done = runtime.run("coordinate", "--write", str(target), "--runtime-dir", str(directory), "--", "sh", "-c", "exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stderr == b""
    # Its stdio is ours; with --verbose it says that no lease was taken.
    done = runtime.run("coordinate", "--read", str(target), "--runtime-dir", str(directory), "--verbose", "--",
                       "sh", "-c", "cat; echo out; echo err >&2", stdin=b"in\n")
    assert done.returncode == 0
    assert done.stdout == b"in\nout\n"
    assert done.stderr.decode().startswith(f"docsession coordinate: no daemon is listening on {directory}/daemon.sock")
    assert done.stderr.decode().endswith("err\n")
    # Killed by a signal: 128 + its number, as a shell says.
    done = runtime.run("coordinate", "--delete", str(target), "--runtime-dir", str(directory), "--", "sh", "-c", "kill -TERM $$")
    assert done.returncode == 128 + signal.SIGTERM
    # A command that does not exist: 127.
    done = runtime.run("coordinate", "--write", str(target), "--runtime-dir", str(directory), "--", "docsession-no-such-command")
    assert done.returncode == 127
    assert "cannot run docsession-no-such-command" in done.stderr.decode()
    # coordinate made the directory for the file's lock (the lock of every save, issue 19.3).
    assert (directory / "locks").is_dir() and directory.stat().st_mode & 0o777 == 0o700
    # A dead daemon's socket left behind is no daemon either.
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(directory / "daemon.sock"))
    listener.close()
    done = runtime.run("coordinate", "--move", str(runtime.tmp_path / "moved.txt"), str(target), "--runtime-dir", str(directory),
                       "--", "sh", "-c", "exit 5")
    assert done.returncode == 5
    assert not directory.joinpath("daemon.lock").exists()
    # Usage: exactly one intent, and a command.
    assert runtime.run("coordinate", "--read", "--write", str(target), "--", "true").returncode == 64
    assert runtime.run("coordinate", "--read", str(target)).returncode == 64


def test_coordinate_refused_does_not_run_the_command(runtime: Runtime) -> None:
    directory = runtime.directory()
    root = runtime.tmp_path / "root"
    root.mkdir()
    daemon = runtime.daemon(directory, "--root", str(root))
    wait_until(lambda: (directory / "daemon.sock").exists() or daemon.poll() is not None, timeout=DEADLINE, what="the socket")
    assert daemon.poll() is None, daemon.communicate()
    # Outside the daemon's root (and, until the coordination methods are in, an unknown method):
    # the lease is refused, the error printed, the command not run.
    outside = runtime.tmp_path / "outside.txt"
    outside.write_text("x\n")
    marker = runtime.tmp_path / "ran"
    done = runtime.run("coordinate", "--write", str(outside), "--runtime-dir", str(directory), "--",
                       "sh", "-c", f"touch {marker}")
    assert done.returncode == 1, done.stderr
    assert not marker.exists()
    message = done.stderr.decode()
    assert message.startswith(f"docsession coordinate: the lease on {outside} (the daemon) refused ("), message
    assert daemon.poll() is None


def test_idle_exit(runtime: Runtime) -> None:
    directory = runtime.directory()
    daemon = runtime.daemon(directory, "--idle-exit", "1")
    socket_path = directory / "daemon.sock"
    wait_until(lambda: socket_path.exists() or daemon.poll() is not None, timeout=DEADLINE, what="the socket")
    client = runtime.connect(directory, "--no-start")
    client.initialize({"processId": os.getpid()})
    # While a client is connected, the daemon stays, well past the idle time.
    started = time.monotonic()
    wait_until(lambda: time.monotonic() - started > 2.5, timeout=DEADLINE, what="time to pass")
    assert daemon.poll() is None
    client.call("shutdown")
    client.notify("exit")
    assert client.wait(timeout=DEADLINE) == 0
    # Then it leaves by itself, removing its socket.
    assert daemon.wait(timeout=DEADLINE) == 0, daemon.communicate()
    assert not socket_path.exists()
    assert (directory / "daemon.lock").exists()
    wait_until(lambda: not lock_held(directory), timeout=DEADLINE, what="the lock to be released")


def test_sigterm_removes_the_socket(runtime: Runtime) -> None:
    directory = runtime.directory()
    daemon = runtime.daemon(directory)
    socket_path = directory / "daemon.sock"
    wait_until(lambda: socket_path.exists() or daemon.poll() is not None, timeout=DEADLINE, what="the socket")
    client = runtime.connect(directory, "--no-start")
    client.initialize({"processId": os.getpid()})
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=DEADLINE) == 128 + signal.SIGTERM
    assert not socket_path.exists()
    # The bridge ends with the daemon's end.
    client.wait(timeout=DEADLINE)


class FakeDaemon:
    """A socket in a runtime directory answering as the daemon will once `workspace/coordinate` is
    in: what `coordinate` sends, in order, and what it does with what it gets (a notification and a
    request of the daemon's among the answers)."""

    def __init__(self, directory: Path, marker: Path, vanish_at: str | None = None) -> None:
        directory.mkdir(mode=0o700)
        self.marker = marker
        self.vanish_at = vanish_at
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(directory / "daemon.sock"))
        self.listener.listen()
        self.received: list[dict] = []
        self.marker_at: dict[str, bool] = {}
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        connection, _ = self.listener.accept()
        reader = FrameReader()

        def send(message: dict) -> None:
            connection.sendall(frame(encode({"jsonrpc": "2.0", **message})))

        with connection:
            while True:
                data = connection.recv(65536)
                if not data:
                    return
                for item in reader.feed(data):
                    message = item.message
                    self.received.append(message)
                    method = message.get("method")
                    if method:
                        self.marker_at[method] = self.marker.exists()
                    if method is not None and method == self.vanish_at:
                        return
                    if method == "initialize":
                        send({"method": "window/logMessage", "params": {"type": 3, "message": "hello"}})
                        send({"id": message["id"], "result": {"capabilities": {}}})
                    elif method == "workspace/coordinate":
                        send({"id": "s1", "method": "window/showMessageRequest", "params": {"type": 3, "message": "?"}})
                        send({"id": message["id"], "result": {"lease": "lease-1", "documents": []}})
                    elif method in ("workspace/endCoordination", "shutdown"):
                        send({"id": message["id"], "result": None})
                    elif method == "exit":
                        return

    def close(self) -> None:
        self.listener.close()


def test_coordinate_under_a_lease_speaks_the_protocol(runtime: Runtime) -> None:
    directory = runtime.directory()
    marker = runtime.tmp_path / "ran"
    daemon = FakeDaemon(directory, marker)
    source = runtime.tmp_path / "my file.txt"
    source.write_text("x\n")
    destination = runtime.tmp_path / "dir" / "é.txt"
    # Relative paths, made absolute against the working directory.
    done = runtime.run("coordinate", "--move", "dir/é.txt", "./my file.txt", "--runtime-dir", str(directory), "--",
                       "sh", "-c", f"touch '{marker}'; echo out; exit 4", cwd=runtime.tmp_path)
    assert done.returncode == 4, done.stderr
    assert done.stdout == b"out\n"
    assert done.stderr == b""
    daemon.thread.join(timeout=DEADLINE)
    daemon.close()
    methods = [message.get("method") for message in daemon.received]
    assert methods == ["initialize", "initialized", "workspace/coordinate", None, "workspace/endCoordination", "shutdown", "exit"]
    initialize, _, coordinate, answer, end, _, _ = daemon.received
    assert initialize["params"]["clientInfo"] == {"name": "docsession coordinate"}
    assert isinstance(initialize["params"]["processId"], int)
    quoted = urllib.parse.quote
    assert coordinate["params"] == {"uri": "file://" + quoted(str(source)), "intent": "move",
                                    "destination": "file://" + quoted(str(destination))}
    # The daemon's request is answered (nothing is offered); its notification ignored.
    assert answer["id"] == "s1" and answer["error"]["code"] == -32601
    assert end["params"] == {"lease": "lease-1"}
    # The command ran under the lease: after it was granted, before it ended.
    assert daemon.marker_at["workspace/coordinate"] is False
    assert daemon.marker_at["workspace/endCoordination"] is True


def test_coordinate_keeps_the_commands_status_when_the_daemon_vanishes(runtime: Runtime) -> None:
    directory = runtime.directory()
    marker = runtime.tmp_path / "ran"
    daemon = FakeDaemon(directory, marker, vanish_at="workspace/endCoordination")
    target = runtime.tmp_path / "file.txt"
    done = runtime.run("coordinate", "--write", str(target), "--runtime-dir", str(directory), "--",
                       "sh", "-c", f"touch '{marker}'; exit 6")
    daemon.thread.join(timeout=DEADLINE)
    daemon.close()
    assert done.returncode == 6
    assert marker.exists()
    assert done.stderr.decode().startswith("docsession coordinate: ending the lease: the daemon closed the connection")


def test_connect_passes_the_log_file_on(runtime: Runtime) -> None:
    directory = runtime.directory()
    log = runtime.tmp_path / "daemon.log"
    client = runtime.connect(directory, "--log-file", str(log), "--log-level", "info")
    check_served(client)
    pid = lock_pid(directory)
    assert f"daemon started: pid {pid}, socket {directory}/daemon.sock" in log.read_text()
    # Its stdout and stderr go to the log too; stdin is /dev/null.
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == str(log)
    assert os.readlink(f"/proc/{pid}/fd/2") == str(log)
    assert "connection c1 from process" in log.read_text()


def test_a_connect_while_an_idle_daemon_ends_is_served_by_a_new_one(runtime: Runtime) -> None:
    directory = runtime.directory()
    daemon = runtime.daemon(directory, "--idle-exit", "1")
    socket_path = directory / "daemon.sock"
    wait_until(lambda: socket_path.exists() or daemon.poll() is not None, timeout=DEADLINE, what="the socket")
    old = daemon.pid
    # The idle daemon removes its socket first and ends a moment later, holding its lock until
    # then: a connect in between starts a daemon that finds the lock held (status 75), and starts
    # one again once nobody listens.
    wait_until(lambda: not socket_path.exists(), timeout=DEADLINE, what="the idle daemon to remove its socket")
    client = runtime.connect(directory)
    check_served(client)
    assert daemon.wait(timeout=DEADLINE) == 0
    new = lock_pid(directory)
    assert new != old
    assert daemons_on(directory) == [new]


def test_a_daemon_that_cannot_start_is_reported(runtime: Runtime) -> None:
    directory = runtime.directory()
    missing = runtime.tmp_path / "no-such-root"
    done = runtime.run("connect", "--runtime-dir", str(directory), "--root", str(missing))
    assert done.returncode == 1
    message = done.stderr.decode()
    assert "exited with status 64 before listening on" in message, message
    assert f"daemon --runtime-dir {directory} --root {missing}" in message
    assert daemons_on(directory) == []


# -- fairness between clients (issue 34, point 6) ------------------------------------------------------


class SocketClient:
    """A client of the daemon's socket, speaking the protocol directly (no `connect` bridge)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.settimeout(DEADLINE)
        self.socket.connect(str(socket_path))
        self.reader = FrameReader()
        self.frames: list = []
        self.next_id = 0

    def send(self, method: str, params: dict) -> int:
        self.next_id += 1
        self.socket.sendall(frame(encode({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})))
        return self.next_id

    def call(self, method: str, params: dict) -> dict:
        request_id = self.send(method, params)
        while True:
            while not self.frames:
                data = self.socket.recv(1 << 20)
                assert data, "the daemon closed the connection"
                self.frames += self.reader.feed(data)
            message = self.frames.pop(0).message
            if message.get("id") == request_id:
                assert "result" in message, message
                return message["result"]

    def close(self) -> None:
        self.socket.close()


# Client A: it opens the large document, then its burst, run as a process of its own so that its reading takes nothing from B's timing (one
# interpreter would share its lock between them): it sends every read at once, then reads the
# answers, counting frames by their Content-Length without parsing them, and checks each holds
# the document's text (its length). It prints the burst's duration.
BURST = r"""
import json, socket, sys, time
path, uri, reads, length = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connection.connect(path)
def send(number, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode()
    connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
buffer = bytearray()
def frames(count):
    bodies = []
    while len(bodies) < count:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            size = int(bytes(buffer[16:end]))
            if len(buffer) >= end + 4 + size:
                bodies.append(bytes(buffer[end + 4:end + 4 + size]))
                del buffer[:end + 4 + size]
                continue
        data = connection.recv(1 << 20)
        if not data:
            sys.exit("the daemon closed the connection")
        buffer.extend(data)
    return bodies
send(0, "initialize", {})
frames(1)
send(0, "document/open", {"uri": uri, "includeText": False})
document = json.loads(frames(1)[0])["result"]["document"]
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.readline()
start = time.monotonic()
for number in range(1, reads + 1):
    send(number, "document/read", {"document": document})
for body in frames(reads):
    if b'"result":{"text":' not in body[:60] or len(body) < length:
        sys.exit("not a whole read: %r" % body[:200])
print(time.monotonic() - start)
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def test_a_client_reading_a_large_document_again_and_again_does_not_hold_up_another(runtime: Runtime) -> None:
    """Client A sends 100 `document/read` of a 2 MB document at once; client B edits another
    document meanwhile, one edit at a time. The daemon serves its connections in turn (a request of
    each ready connection before a second of any) and serialises and writes large answers on the
    client's own output thread, not on the loop. So B's edits wait for no more than about one of A's
    reads: B's worst latency during the burst is a small part of the burst (it was the whole burst,
    0.6 to 1.1 s, B's first edit answered after A's last read), and its median stays within twice
    its median before the burst, measured in the same run."""
    directory = runtime.directory()
    runtime.daemon(directory)
    socket_path = directory / "daemon.sock"
    wait_until(socket_path.exists, timeout=DEADLINE, what="the daemon's socket")
    big = runtime.tmp_path / "big.txt"
    big.write_text("".join(f"line {number:08d} of a large document, read again and again\n" for number in range(33_000)))
    small = runtime.tmp_path / "small.txt"
    small.write_text("hello\n")

    b = SocketClient(socket_path)
    try:
        b.call("initialize", {})
        opened = b.call("document/open", {"uri": uri(small), "includeText": False})
        edited, version = opened["document"], opened["version"]

        def edit() -> float:
            nonlocal version
            start = time.perf_counter()
            version = b.call("document/edit", {"document": edited, "version": version, "edits": [
                {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]})["version"]
            return time.perf_counter() - start

        burst = subprocess.Popen([sys.executable, "-c", BURST, str(socket_path), uri(big), "100", str(big.stat().st_size)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert burst.stdout.readline() == "ready\n", burst.stderr.read()
            for _ in range(50):
                edit()
            baseline = [edit() for _ in range(300)]
            burst.stdin.write("go\n")
            burst.stdin.flush()
            during: list[float] = []
            while burst.poll() is None or len(during) < 50:
                during.append(edit())
            out, err = burst.communicate(timeout=DEADLINE)
        finally:
            if burst.poll() is None:
                burst.kill()
        assert burst.returncode == 0, err
        duration = float(out)
        # The floor: B's edits while two processes that send the daemon nothing keep both
        # processors busy for as long as A's burst took. B's p99 during A's burst is compared with
        # it in the note of issue 34.6 (printed with -s, not asserted).
        burners = [subprocess.Popen([sys.executable, "-c", f"import time\nend = time.monotonic() + {duration}\nwhile time.monotonic() < end: pass"])
                   for _ in range(2)]
        control: list[float] = []
        while any(burner.poll() is None for burner in burners) or len(control) < 50:
            control.append(edit())
        figures = (f"B's baseline p50 {percentile(baseline, 0.5) * 1000:.2f} ms, p99 {percentile(baseline, 0.99) * 1000:.2f} ms; "
                   f"during A's burst of {duration * 1000:.0f} ms p50 {percentile(during, 0.5) * 1000:.2f} ms, "
                   f"p99 {percentile(during, 0.99) * 1000:.2f} ms, worst {max(during) * 1000:.2f} ms ({len(during)} edits); "
                   f"beside two busy processes and no other client p50 {percentile(control, 0.5) * 1000:.2f} ms, "
                   f"p99 {percentile(control, 0.99) * 1000:.2f} ms, worst {max(control) * 1000:.2f} ms")
        print(figures)
        # B waits for about one of A's reads at a time, never for the burst (each of A's reads takes
        # the loop 0.1 ms or less; its 2 MB answer is built and written on threads of its own).
        assert max(during) <= duration / 10, figures
        # The typical edit is not slowed. (B's p99 is reported, not asserted: on two cores shared
        # with A's reader, the threads serialising A's answers and whatever else the machine runs,
        # it measures the scheduler as much as the daemon; 1 to 4 ms here, baseline 0.1 to 3 ms.)
        assert percentile(during, 0.5) <= 2 * percentile(baseline, 0.5), figures
    finally:
        b.close()
