"""A pipelining client predicts every version (README §8.5): each accepted `document/edit` raises
the version by exactly one, whatever its edits do to the text.

A client that sends its edits without waiting for the answers (as LSP's clients send
`didChange`) names in each request the version it expects: the one before plus one. Real editing
histories contain edits that replace text by the same text, and clients send empty lists; with a
rule that kept the version for those, every request pipelined behind one was refused with -32801.
Here 1,000 edits go out at once, same-text replacements and empty lists among them, in each
position encoding, over stdio to the built server; every one must be accepted with the predicted
version, the text must be the model's, and the undo history must hold exactly the requests that
changed something (a step that changes nothing is still not a step).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from rpc_client import RpcClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
from docsession_client import apply_text_edits, offset_to_position  # noqa: E402

EDITS = 1000
TIMEOUT = 120.0  # generous: a busy machine, a debug build
ALPHABET = "abc xyz\né€ü😀🍐\n"
START = "Grüße, wörld 😀\nsecond line\n\nfourth: ✓ done\n"


def make_request(rng: random.Random, text: str, encoding: str) -> tuple[list[dict], bool]:
    """One request's edits against `text`, and whether they are meant to change it."""
    kind = rng.random()
    if kind < 0.1:
        return [], False
    edits: list[dict] = []
    current = text
    changes = False
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        start = rng.randint(0, len(current))
        end = rng.randint(start, min(len(current), start + 8))
        if rng.random() < 0.35:
            new = current[start:end]  # the same text: changes nothing
        elif rng.random() < 0.5:
            new = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 5)))
        else:
            new = ""
        # Positions in the request's encoding; a position between \r and \n is never made (LF only).
        edit = {"range": {"start": offset_to_position(current, start, encoding),
                          "end": offset_to_position(current, end, encoding)},
                "text": new}
        edits.append(edit)
        after = apply_text_edits(current, [edit], encoding)
        changes = changes or after != current
        current = after
    return edits, changes


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_a_thousand_pipelined_edits_each_raise_the_version_by_one(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(START, encoding="utf-8")
    rng = random.Random(f"pipelined-{encoding}")
    with RpcClient(args=("--no-watch",), timeout=TIMEOUT) as client:
        result = client.initialize({"capabilities": {"general": {"positionEncodings": [encoding]}}})
        assert result["capabilities"]["positionEncoding"] == encoding
        info = client.call("document/open", {"uri": path.as_uri()})
        handle, version = info["document"], info["version"]
        assert version == 1

        # Every request is written before any answer is read: the versions are predicted.
        model = START
        changing = 0
        same_text = empty = 0
        first_id = client.next_id
        # The first two change nothing: at the clean point they must not report unsaved changes.
        plan: list[tuple[list[dict], bool]] = [([], False)]
        plan.append(([{"range": {"start": offset_to_position(model, 0, encoding),
                                  "end": offset_to_position(model, 5, encoding)},
                        "text": model[:5]}], False))
        while len(plan) < EDITS:
            edits, changes = make_request(rng, model, encoding)
            plan.append((edits, changes))
            model = apply_text_edits(model, edits, encoding)
        model = START
        for n, (edits, changes) in enumerate(plan):
            client.send({"jsonrpc": "2.0", "id": first_id + n, "method": "document/edit",
                         "params": {"document": handle, "version": version + n, "edits": edits}})
            model = apply_text_edits(model, edits, encoding)
            changing += changes
            empty += not edits
            same_text += bool(edits) and not changes
        client.next_id = first_id + len(plan)
        assert empty >= 50 and same_text >= 100, (empty, same_text)

        for n in range(len(plan)):
            response, notes = client.read_until_response(first_id + n)
            assert "error" not in response, f"edit {n} (sent against version {version + n}): {response['error']}"
            assert response["result"] == {"version": version + n + 1}, n
            if n < 2:
                # Nothing changed at the clean point: no `document/stateChanged` before the answer.
                assert [m for m in notes if m.get("method") == "document/stateChanged"] == [], notes

        read = client.call("document/read", {"document": handle})
        assert read == {"text": model, "version": version + len(plan)}
        state = client.call("document/state", {"document": handle})
        assert state["hasUnsavedChanges"] is (model != START or changing > 0)

        # One undo step per request that changed the text; none for the others.
        steps = 0
        while True:
            result = client.call("document/undo", {"document": handle})
            if not result["edits"]:
                break
            steps += 1
            assert steps <= len(plan)
        assert steps == changing
        read = client.call("document/read", {"document": handle})
        assert read["text"] == START
        assert client.call("document/state", {"document": handle})["hasUnsavedChanges"] is False
        assert client.shutdown_and_exit() == 0


def test_pipelined_edits_and_saves_with_autosave_racing_them(tmp_path: Path) -> None:
    """Saves that wait for another save (an autosave due every millisecond, a `document/save`
    after every fifth edit, all pipelined) each get their turn: the server trapped here when a
    waiting save found the document's lock let go just before it queued (the load soak's finding).
    Five rounds: the race showed in about one run of two."""
    for round in range(5):
        path = tmp_path / f"doc{round}.txt"
        path.write_text("hello\n", encoding="utf-8")
        with RpcClient(timeout=TIMEOUT) as client:
            client.initialize({"capabilities": {},
                               "initializationOptions": {"autosave": {"policy": "afterDelay", "delay": 1}}})
            info = client.call("document/open", {"uri": path.as_uri()})
            handle, version = info["document"], info["version"]
            ids, edit_ids = [], []
            for n in range(3000):
                request_id = client.next_id
                client.next_id += 1
                client.send({"jsonrpc": "2.0", "id": request_id, "method": "document/edit",
                             "params": {"document": handle, "version": version + n,
                                        "edits": [{"range": {"start": {"line": 0, "character": 0},
                                                             "end": {"line": 0, "character": 0}},
                                                   "text": "x"}]}})
                ids.append(request_id)
                edit_ids.append(request_id)
                if n % 5 == 4:
                    request_id = client.next_id
                    client.next_id += 1
                    client.send({"jsonrpc": "2.0", "id": request_id, "method": "document/save",
                                 "params": {"document": handle}})
                    ids.append(request_id)
            # A save is answered when it is done, after the edits sent behind it: collect by id.
            answers: dict = {}
            while len(answers) < len(ids):
                message = client.read_message()
                if "method" not in message:
                    answers[message["id"]] = message
            for request_id in ids:
                assert "error" not in answers[request_id], answers[request_id]
            assert [answers[i]["result"] for i in edit_ids] == [{"version": version + n + 1} for n in range(3000)]
            assert client.call("document/read", {"document": handle})["version"] == version + 3000
            client.call("document/save", {"document": handle})
            assert path.read_text(encoding="utf-8") == "x" * 3000 + "hello\n"
            assert client.shutdown_and_exit() == 0



def send(client: RpcClient, method: str, params: dict) -> int:
    """Sends a request without waiting for its answer; answers its id."""
    request_id = client.next_id
    client.next_id += 1
    client.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return request_id


def insertion(text: str) -> list[dict]:
    """Edits inserting `text` at the start of the document."""
    return [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": text}]


def answers_in_arrival_order(client: RpcClient, ids: list[int]) -> list[dict]:
    """The responses to `ids`, in the order the server wrote them (others are read past); none
    may be an error."""
    waited, answered = set(ids), []
    while len(answered) < len(ids):
        message = client.read_message()
        if "method" not in message and message["id"] in waited:
            assert "error" not in message, message
            answered.append(message)
    return answered


def test_saves_and_reverts_of_one_document_are_answered_in_request_order(tmp_path: Path) -> None:
    """Saves and reverts of one document run one at a time in the order asked, and their answers
    come in that order (README §4.7): a client that pipelines them can read each answer as the one
    of the oldest it waits for. The server let go of a save's turn before its answer was written,
    and under load the next save of the document could be answered first (the 30-second load
    soak's finding, CI run 52). 60 rounds, each pipelined whole: ten times an edit and a save, then
    save, revert, revert, save (edits are refused while a revert runs, so none follow one). Each
    round: the answers' order, the versions they name, the file."""
    path = tmp_path / "doc.txt"
    path.write_text("start\n", encoding="utf-8")
    with RpcClient(timeout=TIMEOUT) as client:
        client.initialize()
        info = client.call("document/open", {"uri": path.as_uri()})
        handle, version = info["document"], info["version"]
        text = "start\n"
        for round in range(60):
            ordered = []  # (id, method, the version the document has when it is asked for)
            for n in range(10):
                send(client, "document/edit", {"document": handle, "version": version, "edits": insertion(f"{round}.{n} ")})
                version += 1
                text = f"{round}.{n} " + text
                ordered.append((send(client, "document/save", {"document": handle}), "document/save", version))
            for method in ("document/save", "document/revert", "document/revert", "document/save"):
                ordered.append((send(client, method, {"document": handle}), method, version))
            answered = answers_in_arrival_order(client, [request_id for request_id, _, _ in ordered])
            assert [m["id"] for m in answered] == [request_id for request_id, _, _ in ordered], round
            for message, (_, method, expected) in zip(answered, ordered):
                # A save answers the version it wrote; a revert of the saved file changes no text.
                assert message["result"]["version"] == expected, (method, message)
            assert path.read_text(encoding="utf-8") == text
        assert client.call("document/read", {"document": handle})["text"] == text
        assert client.shutdown_and_exit() == 0


def test_saves_moves_and_closes_of_one_document_are_answered_in_request_order(tmp_path: Path) -> None:
    """The same for `document/move` and `document/close` (§4.7): 40 documents, each sent edit,
    save, move, edit, save, close at once; the four answers come in that order, each file ends at
    its new name with the second edit, and nothing is left at the old one."""
    with RpcClient(timeout=TIMEOUT) as client:
        client.initialize()
        for round in range(40):
            path, moved = tmp_path / f"doc{round}.txt", tmp_path / f"moved{round}.txt"
            path.write_text("start\n", encoding="utf-8")
            info = client.call("document/open", {"uri": path.as_uri()})
            handle, version = info["document"], info["version"]
            ordered = []
            for step, (method, params) in (("a", ("document/move", {"to": moved.as_uri()})), ("b", ("document/close", {}))):
                send(client, "document/edit", {"document": handle, "version": version, "edits": insertion(step)})
                version += 1
                ordered.append(send(client, "document/save", {"document": handle}))
                ordered.append(send(client, method, {"document": handle, **params}))
            answered = [message["id"] for message in answers_in_arrival_order(client, ordered)]
            assert answered == ordered, round
            assert not path.exists() and moved.read_text(encoding="utf-8") == "bastart\n"
        assert client.shutdown_and_exit() == 0
