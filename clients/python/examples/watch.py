#!/usr/bin/env python3
"""Open a file and print what happens when another program changes, moves or deletes it.

    python3 clients/python/examples/watch.py PATH [--seconds N] [--state-dir DIR]

Try, from another shell: `echo more >> PATH`, `mv PATH PATH.md`, `rm PATH.md`. The document has no
unsaved changes, so a change on disk is taken as it is (document/didChange, whose edits this client
applies to its copy of the text); a move is followed (document/didMove); a deletion leaves the text
open as unsaved (document/stateChanged, reason deletedOnDisk). Ctrl-C (or --seconds) stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from docsession_client import Client, Notification, RpcError  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    ap.add_argument("--state-dir")
    args = ap.parse_args()

    server_args = ["--state-dir", args.state_dir] if args.state_dir else []
    with Client(server_args) as client:
        client.initialize(position_encoding="utf-32")
        try:
            doc = client.open(args.path)
        except RpcError as e:
            print(f"cannot open {args.path}: {e.message} (code {e.code})", file=sys.stderr)
            return 1

        def show(note: Notification) -> None:
            p = note.params
            if note.method == "document/didChange":
                # The Document applied the edits already (on the reader thread, in order).
                print(f"changed on disk: version {p['version']}, {len(p['edits'])} edit(s)")
                for e in p["edits"]:
                    r = e["range"]
                    print(f"  {r['start']['line']}:{r['start']['character']}-"
                          f"{r['end']['line']}:{r['end']['character']} -> {e['text']!r}")
                print(f"  text now: {doc.text!r}")
            elif note.method == "document/didMove":
                print(f"moved: {p['oldUri']} -> {p['uri']} ({p['fileType']})")
            elif note.method == "document/stateChanged":
                err = p.get("error")
                print(f"state: {p['reason']} {p['state']} unsaved={p['hasUnsavedChanges']}"
                      + (f": {err['message']}" if err else ""))
            else:
                print(f"{note.method}: {p}")
            sys.stdout.flush()

        client.on_notification = show
        print(f"watching {doc.path} ({doc.handle}, {len(doc.text)} characters); Ctrl-C to stop",
              flush=True)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        try:
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.05 if deadline else 1)
        except KeyboardInterrupt:
            pass
        if not doc.closed:
            doc.close(save="never")
    return 0


if __name__ == "__main__":
    sys.exit(main())
