"""Issue 20 part 3, the life of kept versions, end to end (protocol/README.md §8.21): a save keeps a
version and `document/didChangeVersions` says so (`added`); the same text saved twice is kept once;
`document/deleteVersion` removes one (`removed`); `document/diffVersions` answers edits that, applied
in order, turn one version's text into another's or into the current text (checked by applying them
here, in UTF-16 and UTF-8 positions); a conflict version starts unresolved and is resolved by
`document/resolveConflict` or a forced save (`resolved`). The notification comes when a version's
background write ends, at no fixed place: the client holds it apart (rpc_client.ASYNCHRONOUS_NOTIFICATIONS)
and the tests take it with a deadline, never a fixed sleep."""

from __future__ import annotations


import pytest

from faultkit import CHANGED_ON_DISK, Server, uri, wait_until, write_file
from rpc_client import end_daemons

UNKNOWN_VERSION = -32020
INVALID_PARAMS = -32602


def serve(sandbox, encoding: str | None = None, watch: bool = True) -> Server:
    initialization: dict = {}
    if encoding is not None:
        initialization["capabilities"] = {"general": {"positionEncodings": [encoding]}}
    return sandbox.start(args=("serve", "--no-file-locks", "--state-dir", str(sandbox.root / "state"), *(() if watch else ("--no-watch",))),
                         initialization=initialization)


def versions_changed(server: Server, document: str, timeout: float = 10.0) -> dict:
    """The params of the next `document/didChangeVersions` of `document` (waited for, up to `timeout`)."""
    frame = server.rpc.take_asynchronous(
        lambda message: message.get("method") == "document/didChangeVersions" and message["params"]["document"] == document,
        timeout=timeout)
    return frame.message["params"]


def no_more_changes(server: Server, document: str) -> None:
    """No `document/didChangeVersions` of `document` is held (call after one that came later)."""
    held = [f.message for f in server.rpc.asynchronous if f.message["params"]["document"] == document]
    assert held == [], held


def versions(server: Server, document: str) -> list[dict]:
    return server.call("document/versions", {"document": document})["versions"]


def save(server: Server, document: str, **params) -> None:
    assert server.save(document, **params).ok


def set_text(server: Server, document: str, text: str) -> None:
    version = server.state(document)["version"]
    server.replace_text(document, version, text)


def offset(text: str, position: dict, encoding: str) -> int:
    """The index in `text` of an LSP position (line breaks are LF here), counted in `encoding`'s units."""
    index = 0
    for _ in range(position["line"]):
        index = text.index("\n", index) + 1
    units = position["character"]
    while units > 0:
        character = text[index]
        units -= len(character.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(character.encode("utf-8"))
        index += 1
    assert units == 0, f"position {position} falls inside a character"
    return index


def apply(text: str, edits: list[dict], encoding: str) -> str:
    """Applies the edits in order, each against the text the ones before it made."""
    for edit in edits:
        start = offset(text, edit["range"]["start"], encoding)
        end = offset(text, edit["range"]["end"], encoding)
        text = text[:start] + edit["text"] + text[end:]
    return text


def test_a_save_keeps_a_version_once_per_text_and_says_so(sandbox):
    path = write_file(sandbox.docs / "notes.txt", "first\n")
    server = serve(sandbox)
    document = server.open(path)["document"]
    set_text(server, document, "second\n")
    save(server, document)
    change = versions_changed(server, document)
    assert change["uri"] == uri(path) and change["removed"] == [] and change["resolved"] == [], change
    [kept] = change["added"]
    assert kept["kind"] == "saved" and kept["resolved"] is True and kept["size"] == len("second\n") and "origin" not in kept, kept
    assert versions(server, document) == [kept]

    # The same text saved again keeps nothing and tells nothing: the next notification is the
    # next text's.
    save(server, document)
    set_text(server, document, "third\n")
    save(server, document)
    change = versions_changed(server, document)
    [newer] = change["added"]
    assert newer["id"] != kept["id"] and newer["size"] == len("third\n"), change
    assert versions(server, document) == [newer, kept]
    no_more_changes(server, document)
    assert server.call("document/readVersion", {"document": document, "id": kept["id"]})["text"] == "second\n"


def test_delete_version_removes_it_and_says_so(sandbox):
    path = write_file(sandbox.docs / "notes.txt", "one\n")
    server = serve(sandbox)
    document = server.open(path)["document"]
    set_text(server, document, "two\n")
    save(server, document)
    [kept] = versions_changed(server, document)["added"]

    # Refusals change nothing.
    missing = server.request("document/deleteVersion", {"document": document}).error
    assert missing["code"] == INVALID_PARAMS and missing["data"]["field"] == "params.id", missing
    unknown = server.request("document/deleteVersion", {"document": document, "id": "1-2-3.saved"}).error
    assert unknown["code"] == UNKNOWN_VERSION and unknown["data"] == {"id": "1-2-3.saved"}, unknown
    assert versions(server, document) == [kept]

    reply = server.request("document/deleteVersion", {"document": document, "id": kept["id"]})
    assert reply.response["result"] is None, reply.response
    change = versions_changed(server, document)
    assert change["removed"] == [kept["id"]] and change["added"] == [] and change["resolved"] == [], change
    assert versions(server, document) == []
    again = server.request("document/deleteVersion", {"document": document, "id": kept["id"]}).error
    assert again["code"] == UNKNOWN_VERSION and again["data"] == {"id": kept["id"]}, again
    gone = server.request("document/readVersion", {"document": document, "id": kept["id"]}).error
    assert gone["code"] == UNKNOWN_VERSION, gone


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
def test_diff_versions_edits_lead_from_one_text_to_the_other(sandbox, encoding):
    first = "Grüße 😀 aus Köln\nzweite Zeile\nEnde\n"
    second = "Grüße 😀😀 aus Bonn\nzweite Zeile, länger\n"
    current = "Hallo 🌍\nzweite Zeile, länger\nneu: ß\n"
    path = write_file(sandbox.docs / "text.txt", "start\n")
    server = serve(sandbox, encoding)
    assert server.initialized["capabilities"]["positionEncoding"] == encoding
    document = server.open(path)["document"]
    set_text(server, document, first)
    save(server, document)
    [one] = versions_changed(server, document)["added"]
    set_text(server, document, second)
    save(server, document)
    [two] = versions_changed(server, document)["added"]
    set_text(server, document, current)
    state = server.state(document)

    def diff(**params) -> list[dict]:
        return server.call("document/diffVersions", {"document": document, **params})["edits"]

    assert apply(first, diff(**{"from": one["id"], "to": two["id"]}), encoding) == second
    assert apply(second, diff(**{"from": two["id"], "to": one["id"]}), encoding) == first
    assert apply(second, diff(**{"from": two["id"]}), encoding) == current
    assert apply(first, diff(**{"from": one["id"], "to": None}), encoding) == current
    assert diff(**{"from": one["id"], "to": one["id"]}) == []

    # Refusals name the field or the id; nothing changes.
    missing = server.request("document/diffVersions", {"document": document, "to": one["id"]}).error
    assert missing["code"] == INVALID_PARAMS and missing["data"]["field"] == "params.from", missing
    wrong = server.request("document/diffVersions", {"document": document, "from": one["id"], "to": 3}).error
    assert wrong["code"] == INVALID_PARAMS and wrong["data"]["field"] == "params.to", wrong
    unknown = server.request("document/diffVersions", {"document": document, "from": one["id"], "to": "9-9-9.saved"}).error
    assert unknown["code"] == UNKNOWN_VERSION and unknown["data"] == {"id": "9-9-9.saved"}, unknown
    assert server.read(document) == current
    assert server.state(document) == state
    assert versions(server, document) == [two, one]
    no_more_changes(server, document)


@pytest.mark.parametrize("settle", ["resolveConflict", "forcedSave"])
def test_a_conflict_version_is_resolved_when_the_conflict_is_settled(sandbox, settle):
    path = write_file(sandbox.docs / "shared.txt", "base\n")
    server = serve(sandbox)
    document = server.open(path)["document"]
    set_text(server, document, "mine\n")
    path.write_text("theirs\n")  # another program, while the document has unsaved edits
    change = versions_changed(server, document)
    [conflict] = change["added"]
    assert conflict["kind"] == "conflict" and conflict["resolved"] is False and conflict["size"] == len("theirs\n"), conflict
    assert "inConflict" in server.state(document)["state"]
    assert versions(server, document) == [conflict]

    if settle == "resolveConflict":
        result = server.call("document/resolveConflict", {"document": document, "resolution": "mine"})
        assert result["resolved"] is True, result
    else:
        save(server, document, force=True)
        [saved] = versions_changed(server, document)["added"]
        assert saved["kind"] == "saved", saved
    change = versions_changed(server, document)
    assert change["resolved"] == [conflict["id"]] and change["added"] == [] and change["removed"] == [], change
    listed = {version["id"]: version for version in versions(server, document)}
    assert listed[conflict["id"]]["resolved"] is True
    assert server.call("document/readVersion", {"document": document, "id": conflict["id"]})["text"] == "theirs\n"


def test_every_holder_of_a_shared_document_hears_of_its_versions(sandbox):
    """Through a daemon (`docsession connect`, README §14): the version one client's save keeps, and
    its deletion by the other, reach both holders (the Hub routes the event to every holder)."""
    runtime, state = sandbox.root / "run", sandbox.root / "state"

    def client(name: str) -> Server:
        return sandbox.start(
            args=("connect", "--runtime-dir", str(runtime), "--state-dir", str(state), "--log-file", str(sandbox.root / "daemon.log")),
            initialization={"clientInfo": {"name": name}})

    try:
        path = write_file(sandbox.docs / "shared.txt", "one\n")
        alpha, beta = client("alpha"), client("beta")
        document = alpha.open(path)["document"]
        assert beta.open(path)["document"] == document
        set_text(alpha, document, "two\n")
        save(alpha, document)
        [kept] = versions_changed(alpha, document)["added"]
        assert versions_changed(beta, document)["added"] == [kept]
        assert beta.call("document/deleteVersion", {"document": document, "id": kept["id"]}) is None
        for holder in (alpha, beta):
            assert versions_changed(holder, document)["removed"] == [kept["id"]]
        assert versions(alpha, document) == []
    finally:
        for server in sandbox.servers:
            server.kill()
        end_daemons(runtime)


def test_versions_are_thinned_when_the_file_is_opened_again_long_after_its_last_save(sandbox):
    """§8.21: thinning by age also runs at an open, not only when a version is kept, so a file
    saved four times in a minute and opened again two days later keeps only the newest. Two days
    pass by renaming the version files of the store as a server two days earlier would have named
    them (`<date ns>-<pid>-<n>-<hash>.<kind>`)."""
    path = write_file(sandbox.docs / "diary.txt", "start\n")
    server = serve(sandbox)
    document = server.open(path)["document"]
    for n in range(4):
        set_text(server, document, f"entry {n}\n")
        save(server, document)
        # Each written before the next save (the queue keeps only the newest of a file not yet written).
        wait_until(lambda: len(versions(server, document)) == n + 1, what=f"saved version {n + 1}")
    newest = versions(server, document)[0]["id"]
    server.shutdown()

    two_days = 2 * 24 * 3600 * 10**9
    aged = 0
    for slot in (sandbox.root / "state" / "versions").iterdir():
        if not slot.is_dir():
            continue
        for entry in slot.iterdir():
            date, _, rest = entry.name.partition("-")
            if date.isdigit() and entry.name.endswith(".saved"):
                entry.rename(slot / f"{int(date) - two_days}-{rest}")
                aged += 1
    assert aged == 4

    again = serve(sandbox)
    reopened = again.open(path)["document"]
    wait_until(lambda: len(versions(again, reopened)) == 1, what="the versions thinned to the newest at the open")
    [kept] = versions(again, reopened)
    assert kept["id"].split("-", 1)[1] == newest.split("-", 1)[1], (kept, newest)
    assert again.call("document/readVersion", {"document": reopened, "id": kept["id"]})["text"] == "entry 3\n"


def conflict_versions(server: Server, document: str) -> dict[str, dict]:
    """The document's kept conflict versions, by their text."""
    return {server.call("document/readVersion", {"document": document, "id": version["id"]})["text"]: version
            for version in versions(server, document) if version["kind"] == "conflict"}


ROUNDS = 10


@pytest.mark.parametrize("way_out", ["resolveConflict mine", "save force"])
@pytest.mark.parametrize("watch", [False, True], ids=["no-watch", "watch"])
def test_every_text_a_way_out_of_a_conflict_overwrites_is_kept_first(sandbox, watch, way_out):
    """Issue 34 point 3 (§8.21): whichever way the conflict was found (the save's -32017, always
    without the watcher, and with it when the client saves at once; or the watcher), the file's
    text is kept as a conflict version before `resolveConflict mine` and a save, or a forced save,
    overwrites it. Each round another program writes the file twice (the second time after the
    save was refused), the client saves at once, and settles; every text its successful save
    replaced must be among the conflict versions, all resolved. Before, without the watcher no
    round kept anything, and `mine` took the file as it was then, unseen."""
    path = write_file(sandbox.docs / "shared.txt", "base\n")
    server = serve(sandbox, watch=watch)
    document = server.open(path)["document"]
    overwritten: list[str] = []
    for round in range(ROUNDS):
        set_text(server, document, f"mine {round}\n")
        path.write_text(f"theirs {round}\n")  # another program, while the document has unsaved edits
        refused = server.save(document)  # at once: the save may find the change before the watcher
        assert refused.error["code"] == CHANGED_ON_DISK, refused.response
        assert "inConflict" in server.state(document)["state"]
        path.write_text(f"theirs {round} again\n")  # and once more, before the client settles
        for _ in range(5):
            before = path.read_text()
            if way_out == "save force":
                reply = server.save(document, force=True)
            else:
                if "inConflict" in server.state(document)["state"]:
                    assert server.call("document/resolveConflict", {"document": document, "resolution": "mine"})["resolved"] is True
                reply = server.save(document)  # refused again only if the file changed after the resolution
            if reply.ok:
                overwritten.append(before)
                break
            assert reply.error["code"] == CHANGED_ON_DISK, reply.response
        else:
            raise AssertionError(f"round {round}: no save went through")
        assert path.read_text() == f"mine {round}\n"

    def all_kept_and_resolved() -> bool:
        kept = conflict_versions(server, document)
        return all(text in kept for text in overwritten) and all(version["resolved"] for version in kept.values())

    wait_until(all_kept_and_resolved, timeout=20,
               what=f"a resolved conflict version of each text overwritten: {overwritten}; kept {sorted(conflict_versions(server, document))}")


def test_a_forced_save_over_a_file_changed_unseen_keeps_the_files_text(sandbox):
    """Issue 34 point 3: without the watcher nothing reports the change; a forced save of the
    (clean) document overwrites the other program's text, which is kept first, resolved."""
    path = write_file(sandbox.docs / "shared.txt", "base\n")
    server = serve(sandbox, watch=False)
    document = server.open(path)["document"]
    path.write_text("theirs, never seen\n")
    save(server, document, force=True)
    assert path.read_text() == "base\n"
    # Kept, then marked resolved by the forced save (both written in the background, in order).
    wait_until(lambda: conflict_versions(server, document).get("theirs, never seen\n", {}).get("resolved") is True, timeout=20,
               what=f"the overwritten text kept as a resolved conflict version: {conflict_versions(server, document)}")
