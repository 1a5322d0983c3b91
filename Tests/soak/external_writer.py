#!/usr/bin/env python3
"""The other program of the load soak (load_soak.py): rewrites files that no writer of the soak edits.

It reads the list of files (one path a line) from --list, then, until --seconds have passed, picks one
at random about --rate times a second and rewrites it: a line or two replaced, inserted or deleted (the
new text always differs from the old), written either as most programs write (a temp file beside it,
renamed over it) or in place (O_TRUNC and one write(2), as `>` in a shell). A read that catches an
in-place write halfway sees a prefix of whole pages (the file's size grows a page at a time), so a text
is written in place only when no 4096-byte boundary falls inside a UTF-8 sequence: whatever the server
reads is then text, and it reloads it (the rest comes with the next reload); otherwise it is renamed. It keeps its own copy of
every file's text, so it never reads what the server wrote (the server writes none of these files: they
have no unsaved edits, so nothing saves them).

At the end it writes --manifest, JSON: {"writes": N, "renames": N, "inPlace": N, "files": {path:
{"sha256": hex of the last bytes written, "writes": n}}} for every file it wrote, and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time

WORDS = ("rewritten", "by", "another", "program", "sync", "checkout", "formatter", "élan", "Grüße", "数据", "🙂")


def new_line(rng: random.Random, serial: int) -> str:
    return f"external {serial}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))


def rewrite(text: str, rng: random.Random, serial: int) -> str:
    lines = text.split("\n")
    kind = rng.random()
    index = rng.randrange(len(lines))
    if kind < 0.5:
        lines[index] = new_line(rng, serial)
    elif kind < 0.8 or len(lines) < 4:
        lines.insert(index, new_line(rng, serial))
    else:
        del lines[index]
        lines.insert(rng.randrange(len(lines) + 1), new_line(rng, serial))
    return "\n".join(lines)


def write_renamed(path: str, data: bytes, serial: int) -> None:
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f".soak-external-{os.getpid()}-{serial}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(temp, path)


def page_prefixes_are_text(data: bytes) -> bool:
    """Whether every prefix of whole 4096-byte pages ends between two UTF-8 sequences."""
    return all(not (0x80 <= data[offset] <= 0xBF) for offset in range(4096, len(data), 4096))


def write_in_place(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        written = os.write(fd, data)
        if written != len(data):  # not expected for 10 KB on a local file system; finish anyway
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--rate", type=float, default=10.0, help="rewrites a second, all files together")
    parser.add_argument("--in-place", type=float, default=0.3, help="the share written in place")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    with open(args.list, encoding="utf-8") as listing:
        paths = [line.rstrip("\n") for line in listing if line.strip()]
    texts = {}
    for path in paths:
        with open(path, "rb") as file:
            texts[path] = file.read().decode("utf-8")
    counts = {path: 0 for path in paths}
    totals = {"writes": 0, "renames": 0, "inPlace": 0}
    start = time.monotonic()
    deadline = start + args.seconds
    serial = 0
    while paths:
        now = time.monotonic()
        if now >= deadline:
            break
        due = start + serial / args.rate if args.rate > 0 else deadline
        if due > now:
            time.sleep(min(due, deadline) - now)  # pacing: the next rewrite's moment
            continue
        serial += 1
        path = rng.choice(paths)
        text = rewrite(texts[path], rng, serial)
        data = text.encode("utf-8")
        if rng.random() < args.in_place and page_prefixes_are_text(data):
            write_in_place(path, data)
            totals["inPlace"] += 1
        else:
            write_renamed(path, data, serial)
            totals["renames"] += 1
        texts[path] = text
        counts[path] += 1
        totals["writes"] += 1

    files = {
        path: {"sha256": hashlib.sha256(texts[path].encode("utf-8")).hexdigest(), "writes": counts[path]}
        for path in paths if counts[path]
    }
    with open(args.manifest + ".tmp", "w", encoding="utf-8") as out:
        json.dump(dict(totals, files=files), out)
    os.replace(args.manifest + ".tmp", args.manifest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
