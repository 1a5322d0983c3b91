#!/usr/bin/env python3
"""Open a file, edit it, save it, and print every notification the server sends.

    python3 clients/python/examples/edit_and_save.py PATH [--text TEXT] [--encoding utf-32]

Appends TEXT (by default a line with the time) at the end of the file, reads the text back,
undoes and redoes the edit, saves, and closes. Pass --state-dir to keep earlier versions elsewhere
than the server's default ($XDG_STATE_HOME/docsession).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from docsession_client import Client, RpcError  # noqa: E402


def show(client: Client) -> None:
    """Print the notifications received so far. The server sends a request's notifications
    before its response, so after a request returns they are all here, in order."""
    for note in client.take_notifications():
        print(f"  <- {note.method} {json.dumps(note.params, ensure_ascii=False)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--text", default=f"edited by docsession_client at {time.strftime('%H:%M:%S')}\n")
    ap.add_argument("--encoding", default="utf-32", choices=["utf-8", "utf-16", "utf-32"])
    ap.add_argument("--state-dir")
    args = ap.parse_args()

    server_args = ["--state-dir", args.state_dir] if args.state_dir else []
    with Client(server_args) as client:
        client.initialize(position_encoding=args.encoding)
        print(f"server {client.server_info.get('version')}, positions in {client.position_encoding}")
        try:
            doc = client.open(args.path)
        except RpcError as e:
            print(f"cannot open {args.path}: {e.message} (code {e.code})", file=sys.stderr)
            return 1
        print(f"opened {doc.uri} as {doc.handle}, version {doc.version}, {len(doc.text)} characters")

        end = doc.position_at(len(doc.text))
        print(f"appending {args.text!r} at line {end['line']}, character {end['character']}")
        doc.replace(len(doc.text), len(doc.text), args.text, label="Append")
        show(client)
        assert doc.text == doc.read(), "the local copy is the server's text"
        print(f"version {doc.version}; unsaved changes: {doc.has_unsaved_changes}")

        undone = doc.undo()
        show(client)
        print(f"undo -> version {undone['version']}, edits {undone['edits']}")
        doc.redo()
        show(client)
        print(f"redo -> version {doc.version}")

        try:
            result = doc.save()
            show(client)
        except RpcError as e:
            print(f"save failed: {e.message} (code {e.code}, data {e.data})", file=sys.stderr)
            doc.close(save="never")
            return 1
        print(f"saved version {result['version']}: {result['size']} bytes, method {result['method']}")
        saved = doc.close()
        show(client)
        print(f"closed (saved again: {saved})")
    print(f"server exited with status {client.process.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
