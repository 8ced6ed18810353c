"""Pipelines: every request written before any reply is read, results in
request order (PROTOCOL.md 2.2), errors in place."""

from __future__ import annotations

import pytest

import echomq
from echomq import Client


def test_enqueues_then_claims_in_order(client: Client, other: Client, queue: str) -> None:
    with client.pipeline() as p:
        ids = [p.enqueue(queue, {"n": i}, group="TENa", job=f"JOBp{i}") for i in range(3)]
        claims = [p.claim(queue, lease_ms=60000) for _ in range(3)]
    assert [e.result().job for e in ids] == ["JOBp0", "JOBp1", "JOBp2"]
    got = [c.result() for c in claims]
    assert [[j.job for j in js] for js in got] == [["JOBp0"], ["JOBp1"], ["JOBp2"]]
    assert p.results[:3] == [e.result() for e in ids] and len(p.results) == 6
    s = other.stats(queue)
    assert (s.active, s.pending) == (3, 0)
    assert [other.job(queue, f"JOBp{i}").attempts for i in range(3)] == [1, 1, 1]


def test_a_weight_applies_to_the_claims_pipelined_after_it(client: Client, queue: str) -> None:
    for g in ("TENa", "TENb"):
        for i in range(4):
            client.enqueue(queue, i, group=g, job=f"JOB{g}{i}")
    with client.pipeline() as p:
        p.weight(queue, "TENb", 2)
        first = p.claim(queue, 3)
        p.weight(queue, "TENb", None)
        second = p.claim(queue, 3)
    assert [j.group for j in first.result()] == ["TENa", "TENb", "TENb"]
    assert [j.group for j in second.result()] == ["TENa", "TENb", "TENa"]


def test_all_written_before_any_reply_is_read(client: Client, queue: str) -> None:
    # The claim parks (it finds nothing) and holds its reply back; only an
    # enqueue written behind it, before that reply was read, can serve it.
    with client.pipeline() as p:
        claim = p.claim(queue, wait_ms=20000)
        p.enqueue(queue, "late", group="TENa")
    (j,) = claim.result()
    assert j.payload == "late"


def test_settles_in_a_pipeline(client: Client, other: Client, queue: str) -> None:
    for i in range(2):
        client.enqueue(queue, i, group="TENa")
    a, b = client.claim(queue, 2)
    with client.pipeline() as p:
        p.complete(a)
        p.fail(b, "nope", retry_ms=0)
        c = p.claim(queue)
    assert p.results[:2] == ["completed", "pending"]
    (again,) = c.result()
    assert again.job == b.job and again.attempt == 2
    assert other.job(queue, a.job).state == "completed"


def test_errors_in_place(client: Client, queue: str) -> None:
    p = client.pipeline(raise_on_error=False)
    p.enqueue(queue, 1)
    bad = p.job(queue, "JOBnone")
    p.stats("bad queue")
    p.enqueue(queue, 2)
    res = p.execute()
    assert [type(r).__name__ for r in res] == ["Enqueued", "NoJobError", "QueueNameError", "Enqueued"]
    with pytest.raises(echomq.NoJobError):
        bad.result()
    p2 = client.pipeline()
    p2.job(queue, "JOBnone")
    last = p2.ping()
    with pytest.raises(echomq.NoJobError):
        p2.execute()
    assert last.done and last.result() is None  # every reply was read all the same
    with pytest.raises(RuntimeError):
        p2.ping()  # a pipeline runs once


def test_nothing_sent_when_one_request_cannot_be_encoded(client: Client, queue: str) -> None:
    p = client.pipeline()
    p.enqueue(queue, 1, job="JOBenc")
    p.enqueue(queue, float("nan"))
    with pytest.raises(ValueError):
        p.execute()
    assert client.enqueue(queue, 1, job="JOBenc").verdict == "enqueued"


def test_a_block_that_raises_sends_nothing(client: Client, queue: str) -> None:
    with pytest.raises(KeyError):
        with client.pipeline() as p:
            p.enqueue(queue, 1, job="JOBnot")
            raise KeyError("stop")
    assert client.enqueue(queue, 1, job="JOBnot").verdict == "enqueued"
