"""pytest setup of the safe-save fault tests: the protocol client on sys.path, and a `sandbox` per
test (a fresh directory under /tmp, and every server and strace it starts, all ended at teardown)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import faultkit  # noqa: E402  (needs the paths above)
from faultkit import Server, Tracer  # noqa: E402


TOOLS = ("strace", "setfattr", "setfacl", "getfacl", "chattr", "setpriv", "prlimit", "unshare", "nsenter")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not os.access(faultkit.BIN, os.X_OK):
        raise pytest.UsageError(f"no server binary at {faultkit.BIN}: build it (swift build) or set DOCSESSION_BIN")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fault tests need root (chown, setpriv, chattr, mounts, ptrace) and the tools of
    scripts/bootstrap; without them they skip, saying why."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    reason = ("the fault tests run as root (chown to other users, setpriv, chattr, mounts, ptrace)" if os.geteuid() != 0
              else f"missing tools (scripts/bootstrap installs them): {' '.join(missing)}" if missing else None)
    if reason:
        here = Path(__file__).resolve().parent
        for item in items:
            if here in Path(str(item.fspath)).resolve().parents:
                item.add_marker(pytest.mark.skip(reason=reason))


class Sandbox:
    """One test's directory and processes."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="docsession-faults-", dir="/tmp"))
        # Traversable by anyone: the privilege-dropping tests run the server as nobody.
        os.chmod(self.root, 0o755)
        # The documents live here; strace logs and other scaffolding stay outside.
        self.docs = self.root / "docs"
        self.docs.mkdir()
        self.servers: list[Server] = []
        self.tracers: list[Tracer] = []
        self.immutable: list[Path] = []
        self._logs = 0

    def start(self, prefix: tuple[str, ...] = (), **options) -> Server:
        server = Server(prefix, **options)
        self.servers.append(server)
        return server

    def trace(self, server: Server, inject: tuple[str, ...] = (), trace: tuple[str, ...] = faultkit.SAVE_SYSCALLS) -> Tracer:
        """strace attached to `server` (see faultkit.Tracer), logging to a file of the sandbox."""
        self._logs += 1
        tracer = Tracer(server.pid, self.root / f"strace-{self._logs}.log", trace=trace, inject=inject)
        self.tracers.append(tracer)
        return tracer

    def make_immutable(self, path: Path) -> bool:
        """`chattr +i`; False when the file system refuses (the flag is cleared at teardown)."""
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode == 0:
            self.immutable.append(path)
        return done.returncode == 0

    def close(self) -> None:
        for tracer in self.tracers:
            tracer.stop()
        for server in self.servers:
            server.kill()
        for path in self.immutable:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    try:
        yield box
    finally:
        box.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    """Prints why each fault test was skipped, even under -q (README.md: which tests skip where)."""
    lines = []
    for report in terminalreporter.stats.get("skipped", []):
        if "faults" not in str(getattr(report, "fspath", "")):
            continue
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        lines.append(f"{report.nodeid}: {reason}")
    if lines:
        terminalreporter.write_sep("-", "fault tests skipped")
        for line in lines:
            terminalreporter.write_line(line)
