"""Batches bounded (issue 34, point 5): the elements of a batch and the bytes of the array answering
it (README §4.6), driven over stdio through the built binary.

A batch of a million empty objects (3 MB) used to be answered with a million errors: 8 s here (186 s
on a machine short of memory), 2.7 GB at its peak and 2.3 GB kept. Each response was held as a
`JSONValue` and then as a json-c tree until the whole array was serialised. Now a batch over the
element limit is refused whole, with one error, after a scan of its text; the array answering a
batch is built as text, response by response, and a response that would take it past the largest
message (`maxMessageSize`) is replaced by an error under its id.

The limit is read from the server's own error (`data.maximum`), not written here. Figures are
ratios measured in the same run, never fixed times."""

from __future__ import annotations

import time
from pathlib import Path

from faultkit import DEADLINE, uri
from rpc_client import RpcClient, encode, frame

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


def started(*args: str) -> RpcClient:
    client = RpcClient(args=("serve", "--no-journal", "--no-file-locks", *args), timeout=DEADLINE)
    client.initialize({})
    client.notify("initialized")
    return client


def peak_bytes(client: RpcClient) -> int:
    """The server's peak resident memory so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{client.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def send_body(client: RpcClient, body: bytes) -> None:
    client.send_raw(frame(body))


def batch_of(elements: list[bytes]) -> bytes:
    return b"[" + b",".join(elements) + b"]"


def requests(count: int, first: int = 0) -> list[bytes]:
    """`count` requests of a method that does not exist: each answered with -32601 at once."""
    return [b'{"jsonrpc":"2.0","id":%d,"method":"x"}' % (first + number) for number in range(count)]


def element_limit(client: RpcClient) -> int:
    """The element limit, as the server states it refusing a batch far over any sane limit."""
    send_body(client, batch_of([b"{}"] * 1_000_000))
    answer = client.read_message(timeout=DEADLINE)
    assert isinstance(answer, dict), f"a batch of 1,000,000 elements was answered with {type(answer).__name__} of {len(answer)}"
    return answer["error"]["data"]["maximum"]


def check_still_serving(client: RpcClient) -> None:
    """An ordinary request is answered as before the batch (not as after `shutdown`)."""
    response, _ = client.request("x", request_id="after")
    assert response["error"]["code"] == METHOD_NOT_FOUND, response


def test_a_million_empty_objects_get_one_error_at_once() -> None:
    """The red team's message: one error under id null naming the limit, with nothing of the batch
    built. Before: a million errors in one array, after 8 s, the server's peak 2.7 GB."""
    with started() as client:
        body = batch_of([b"{}"] * 1_000_000)
        before = peak_bytes(client)
        send_body(client, body)
        answer = client.read_message(timeout=DEADLINE)
        assert isinstance(answer, dict), f"answered with an array of {len(answer)} responses, not one error"
        assert answer["id"] is None
        error = answer["error"]
        assert error["code"] == INVALID_REQUEST, error
        assert error["data"]["limit"] == "batchElements", error
        assert error["data"]["elements"] == 1_000_000, error
        assert error["data"]["maximum"] < 1_000_000, error
        # Refused after a scan of the text: the server's peak grew by less than a few bodies.
        grown = peak_bytes(client) - before
        assert grown < 8 * len(body), f"the peak grew by {grown} bytes for a body of {len(body)}"
        check_still_serving(client)


def test_a_batch_over_the_limit_is_refused_whole_and_one_at_it_answered() -> None:
    """One element over the limit: one error, and none of it handled (its first element is
    `shutdown`, after which every request would be refused). At the limit: every element answered."""
    with started() as client:
        limit = element_limit(client)
        over = [b'{"jsonrpc":"2.0","id":"s","method":"shutdown"}'] + requests(limit)
        send_body(client, batch_of(over))
        answer = client.read_message(timeout=DEADLINE)
        assert isinstance(answer, dict), f"answered with an array of {len(answer)} responses"
        assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST, answer
        assert answer["error"]["data"] == {"limit": "batchElements", "maximum": limit, "elements": limit + 1}
        check_still_serving(client)

        send_body(client, batch_of(requests(limit)))
        answer = client.read_message(timeout=DEADLINE)
        assert isinstance(answer, list), answer
        assert [response["id"] for response in answer] == list(range(limit))
        assert all(response["error"]["code"] == METHOD_NOT_FOUND for response in answer)
        check_still_serving(client)


def test_a_batch_at_the_limit_costs_time_in_proportion() -> None:
    """Ten times the elements cost at most twenty times the time (the fastest of three runs of
    each, in the same server)."""
    with started() as client:
        limit = element_limit(client)

        def fastest(count: int) -> float:
            body = batch_of(requests(count))
            times = []
            for _ in range(3):
                start = time.monotonic()
                send_body(client, body)
                answer = client.read_message(timeout=DEADLINE)
                times.append(time.monotonic() - start)
                assert isinstance(answer, list) and len(answer) == count
            return min(times)

        small = fastest(limit // 10)
        large = fastest(limit)
        assert large <= 20 * small, f"{limit // 10} elements: {small * 1000:.1f} ms; {limit}: {large * 1000:.1f} ms"
        check_still_serving(client)


def test_a_batchs_answers_take_memory_in_proportion_to_their_bytes() -> None:
    """The memory the answers of a batch take, beyond what reading the batch takes: a batch of as
    many notifications (no answers) first, then of requests (an error each). Before, every answer
    was a `JSONValue` and a json-c tree until the array was written: 22 times the answer's bytes;
    now its text, and one response at a time being serialised. 5,000 elements: under the limit
    (the test at the limit checks that one is answered), and enough to dwarf the allocator's noise."""
    limit = 5000
    with started() as client:
        notifications = batch_of([b'{"jsonrpc":"2.0","method":"x/%07d"}' % number for number in range(limit)])
        calls = batch_of(requests(limit))
        assert len(notifications) <= len(calls)
        base = peak_bytes(client)
        send_body(client, notifications)
        check_still_serving(client)
        reading = peak_bytes(client)
        send_body(client, calls)
        answer = client.read_frame(timeout=DEADLINE)
        assert isinstance(answer.message, list) and len(answer.message) == limit
        answering = peak_bytes(client) - reading
        assert answering <= 6 * len(answer.body), (
            f"reading {limit} elements: +{reading - base} bytes; answering them ({len(answer.body)} bytes): +{answering} more")


def test_a_response_past_the_batch_answer_limit_is_replaced_by_an_error(tmp_path: Path) -> None:
    """The array answering a batch stays within maxMessageSize (here 256 KiB): reads of a 100 KiB
    document fit twice; the later ones are replaced by an error under their id naming the limit,
    and a small response after them still fits. Before: every read answered, 600 KiB in one array."""
    path = tmp_path / "a.txt"
    content = "".join(f"line {number:07d} of a long document\n" for number in range(3000))
    path.write_text(content)
    with RpcClient(args=("serve", "--no-journal", "--no-file-locks", "--max-message-size", "256K"), timeout=DEADLINE) as client:
        capabilities = client.initialize({})["capabilities"]
        client.notify("initialized")
        maximum = capabilities["maxMessageSize"]
        document = client.call("document/open", {"uri": uri(path), "includeText": False})["document"]
        reads = [{"jsonrpc": "2.0", "id": f"r{number}", "method": "document/read", "params": {"document": document}}
                 for number in range(6)]
        state = {"jsonrpc": "2.0", "id": "state", "method": "document/state", "params": {"document": document}}
        client.send_raw(frame(encode(reads + [state])))
        answer = client.read_frame(timeout=DEADLINE)
        responses = answer.message
        assert [response["id"] for response in responses] == [f"r{number}" for number in range(6)] + ["state"]
        kept = [response for response in responses[:6] if "result" in response]
        dropped = [response for response in responses[:6] if "error" in response]
        assert kept and dropped, f"{len(kept)} reads answered, {len(dropped)} dropped"
        assert responses[:len(kept)] == kept, "the responses kept are the first ones"
        assert all(response["result"]["text"] == content for response in kept)
        for response in dropped:
            error = response["error"]
            assert error["code"] == INVALID_REQUEST, error
            assert error["data"]["limit"] == "batchAnswerBytes" and error["data"]["maximum"] == maximum, error
            # The size of the response dropped: a whole read's.
            assert error["data"]["size"] > len(content), error
        assert "result" in responses[-1], responses[-1]
        # As many reads as fit were kept: one more would have passed the limit.
        kept_bytes = 1 + sum(len(encode(response)) + 1 for response in kept)
        assert kept_bytes + dropped[0]["error"]["data"]["size"] > maximum
        errors = sum(len(encode(response)) + 1 for response in dropped)
        assert len(answer.body) <= maximum + errors, f"{len(answer.body)} bytes answered, limit {maximum}"
        # Alone, a read is answered whole.
        assert client.call("document/read", {"document": document})["text"] == content
