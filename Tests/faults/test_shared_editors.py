"""The real editors through the daemon (issue 19.4): the Emacs mode and the Neovim plugin, headless,
each attached to one file through `docsession connect` (their only change: the command), while
`docsession coordinate --write FILE -- sed -i ...` rewrites it; both buffers take the change. Then
a typed line in one editor reaches the other's buffer.

Each editor runs a small script that attaches, says it is ready (a file), waits for its buffer to
hold the text the test expects (a file it is given), and writes what it saw; the test waits on
those files with generous deadlines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import faultkit
from rpc_client import end_daemons

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("emacs") is None or shutil.which("nvim") is None,
                                reason="emacs and nvim are needed (scripts/bootstrap --tests installs them)")


EMACS_SCRIPT = r"""
(require 'docsession)
(setq docsession-program (getenv "DS_BIN")
      docsession-program-args (list "connect" "--runtime-dir" (getenv "DS_RUN") "--state-dir" (getenv "DS_STATE")))
(defun ds-test-file (name) (expand-file-name name (getenv "DS_DIR")))
(defun ds-test-read (name) (with-temp-buffer (insert-file-contents (ds-test-file name)) (buffer-string)))
(defun ds-test-wait (predicate seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall predicate)))
(let ((buffer (find-file-noselect (getenv "DS_FILE"))))
  (with-current-buffer buffer
    (docsession-mode 1)
    (write-region "ready" nil (ds-test-file "emacs.ready") nil 'silent)
    ;; 1. The coordinated rewrite reaches the buffer.
    (ds-test-wait (lambda () (file-exists-p (ds-test-file "expect1"))) 120)
    (let ((expected (ds-test-read "expect1")))
      (ds-test-wait (lambda () (string= (buffer-string) expected)) 60)
      (write-region (buffer-string) nil (ds-test-file "emacs.saw1") nil 'silent))
    ;; 2. Emacs types a line at the end (once editing is enabled again).
    (ds-test-wait (lambda () (not buffer-read-only)) 30)
    (goto-char (point-max))
    (insert "typed in emacs\n")
    (ds-test-wait (lambda () (file-exists-p (ds-test-file "expect2"))) 120)
    (let ((expected (ds-test-read "expect2")))
      (ds-test-wait (lambda () (string= (buffer-string) expected)) 60)
      (write-region (buffer-string) nil (ds-test-file "emacs.saw2") nil 'silent))
    (set-buffer-modified-p nil)
    (docsession-shutdown)))
"""

NVIM_SCRIPT = r"""
local dir = os.getenv('DS_DIR')
local function path(name) return dir .. '/' .. name end
local function exists(name) return vim.loop.fs_stat(path(name)) ~= nil end
local function read(name) local f = io.open(path(name), 'rb'); local s = f:read('*a'); f:close(); return s end
local function write(name, s) local f = io.open(path(name), 'wb'); f:write(s); f:close() end
local function text(buf)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local s = table.concat(lines, '\n')
  if vim.bo[buf].eol then s = s .. '\n' end
  return s
end
local ds = require('docsession')
ds.setup({ cmd = { os.getenv('DS_BIN'), 'connect', '--runtime-dir', os.getenv('DS_RUN'), '--state-dir', os.getenv('DS_STATE') },
  timeout = 20000 })
vim.cmd('silent edit ' .. vim.fn.fnameescape(os.getenv('DS_FILE')))
local buf = vim.api.nvim_get_current_buf()
assert(ds.attach(buf), 'attach failed')
write('nvim.ready', 'ready')
vim.wait(120000, function() return exists('expect1') end, 20)
local expected = read('expect1')
vim.wait(60000, function() return text(buf) == expected end, 20)
write('nvim.saw1', text(buf))
vim.wait(120000, function() return exists('expect2') end, 20)
expected = read('expect2')
vim.wait(60000, function() return text(buf) == expected end, 20)
write('nvim.saw2', text(buf))
vim.bo[buf].modified = false
ds.shutdown()
vim.cmd('qall!')
"""


CHECK_SCRIPT = r"""
import os, sys
sys.path.insert(0, os.path.join(os.environ["DS_REPO"], "clients", "python"))
from docsession_client import Client
client = Client(command=[os.environ["DS_BIN"], "connect", "--runtime-dir", os.environ["DS_RUN"]])
client.initialize(client_name="lease check")
document = client.open(os.environ["DS_FILE"])
state = client.request("document/state", {"document": document.handle})
assert "editingDisabled" in state["state"], state
client.close(timeout=10)
"""


def wait_for(path: Path, timeout: float, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for process in processes:
            if process.poll() is not None and not path.exists():
                out, err = process.communicate()
                raise AssertionError(f"{process.args[0]} exited with {process.returncode} before {path.name}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"no {path.name} within {timeout} s"
        time.sleep(0.05)


def test_emacs_and_neovim_take_a_coordinated_rewrite_and_each_others_typing(sandbox) -> None:
    directory = sandbox.root / "editors"
    directory.mkdir()
    runtime, state = sandbox.root / "run", sandbox.root / "state"
    shared = sandbox.docs / "shared.txt"
    shared.write_text("first line\nold words here\nlast line\n")
    (directory / "test.el").write_text(EMACS_SCRIPT)
    (directory / "test.lua").write_text(NVIM_SCRIPT)
    environment = {**os.environ, "DS_BIN": faultkit.BIN, "DS_RUN": str(runtime), "DS_STATE": str(state),
                   "DS_DIR": str(directory), "DS_FILE": str(shared), "DS_REPO": str(REPO)}
    editors = [
        subprocess.Popen(["emacs", "--batch", "-Q", "-L", str(REPO / "clients" / "emacs"), "-l", str(directory / "test.el")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment),
        subprocess.Popen(["nvim", "--headless", "-u", "NONE", "-i", "NONE", "--cmd", f"set rtp+={REPO / 'clients' / 'neovim'}",
                          "-c", f"luafile {directory / 'test.lua'}"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment),
    ]
    try:
        wait_for(directory / "emacs.ready", 60, editors)
        wait_for(directory / "nvim.ready", 60, editors)
        # Both hold the file through one daemon; sed rewrites it under a write lease. Before sed,
        # the command checks through a third client that the lease is real: the document, held by
        # both editors, is not editable.
        (directory / "check.py").write_text(CHECK_SCRIPT)
        command = f"python3 {directory / 'check.py'} && sed -i 's/old words/new words/' {shared}"
        done = subprocess.run([faultkit.BIN, "coordinate", "--write", str(shared), "--runtime-dir", str(runtime), "--",
                               "sh", "-c", command], capture_output=True, text=True, timeout=120, env=environment)
        assert done.returncode == 0, done.stderr
        rewritten = "first line\nnew words here\nlast line\n"
        assert shared.read_text() == rewritten
        (directory / "expect1").write_text(rewritten)
        wait_for(directory / "emacs.saw1", 90, editors)
        wait_for(directory / "nvim.saw1", 90, editors)
        assert (directory / "emacs.saw1").read_text() == rewritten
        assert (directory / "nvim.saw1").read_text() == rewritten
        # Emacs typed a line: Neovim's buffer takes it.
        typed = rewritten + "typed in emacs\n"
        (directory / "expect2").write_text(typed)
        wait_for(directory / "emacs.saw2", 90, editors)
        wait_for(directory / "nvim.saw2", 90, editors)
        assert (directory / "emacs.saw2").read_text() == typed
        assert (directory / "nvim.saw2").read_text() == typed
        for editor in editors:
            editor.wait(timeout=60)
    finally:
        for editor in editors:
            if editor.poll() is None:
                editor.kill()
                editor.wait(timeout=60)
        end_daemons(runtime)
