"""The blocking Client against a real emqd: every op of PROTOCOL.md
section 5, the errors mapped to their classes, pushes kept apart from
replies, refs, timeouts. Effects are checked over a second connection."""

from __future__ import annotations

import json
import signal
import socket
import threading

import pytest

import echomq
from echomq import Client, Item, LeasedJob
from echomq._codes import CODES
from servers import Emqd, wait_until


def test_hello_and_ping(client: Client) -> None:
    assert client.server.server == "emqd" and client.server.protocol == 1
    assert client.hello(name="again").protocol == 1
    assert client.ping() is None


def test_enqueue_verdicts_and_minted_ids(client: Client, other: Client, queue: str) -> None:
    r = client.enqueue(queue, {"to": "a@b.c"}, group="TENacme")
    assert r.verdict == "enqueued" and not r.duplicate
    assert r.job.startswith("JOB") and len(r.job) == 29
    assert client.enqueue(queue, 1, job="JOBmine").verdict == "enqueued"
    again = client.enqueue(queue, 2, job="JOBmine")
    assert again.duplicate and again.job == "JOBmine"
    row = other.job(queue, r.job)
    assert (row.state, row.group, row.payload, row.attempts) == ("pending", "TENacme", {"to": "a@b.c"}, 0)
    assert other.job(queue, "JOBmine").payload == 1  # the duplicate changed nothing


def test_enqueue_options(client: Client, other: Client, queue: str) -> None:
    d = client.enqueue(queue, None, group="TENa", delay_ms=3600000, max_attempts=7)
    row = other.job(queue, d.job)
    assert (row.state, row.max_attempts, row.payload, row.has_payload) == ("delayed", 7, None, True)
    assert other.stats(queue).delayed == 1


def test_enqueue_many_per_item_results(client: Client, other: Client, queue: str) -> None:
    res = client.enqueue_many(queue, [Item({"n": 1}), {"payload": 2, "group": "bad"}, Item(3, job="JOBm3"),
                                      {"payload": 4, "job": "nope"}, Item(5, job="JOBm3")], group="TENb")
    assert [type(r).__name__ for r in res] == ["Enqueued", "BrandError", "Enqueued", "KindError", "Enqueued"]
    assert isinstance(res[1], echomq.BrandError) and res[1].code == "EBRAND"
    assert isinstance(res[0], echomq.Enqueued) and isinstance(res[4], echomq.Enqueued)
    assert res[4].duplicate
    assert other.depth(queue, "TENb") == 2
    with pytest.raises(echomq.EmptyBatchError):
        client.enqueue_many(queue, [])


def test_claim_complete_fail_release_extend(client: Client, other: Client, queue: str) -> None:
    ids = [client.enqueue(queue, i, group="TENa").job for i in range(4)]
    jobs = client.claim(queue, 4, lease_ms=60000)
    assert [j.job for j in jobs] == ids and all(isinstance(j, LeasedJob) for j in jobs)
    a, b, c, d = jobs
    assert (a.queue, a.group, a.attempt, a.payload) == (queue, "TENa", 1, 0)
    before = a.lease_until
    until = client.extend(a, 120000)
    assert until == a.lease_until and until > before
    assert other.job(queue, a.job).lease_until == until
    assert client.complete(a) == "completed"
    assert client.complete(a) == "completed"  # a resend answers again
    assert client.fail(b, "SMTP 451") == "delayed"
    assert client.fail(c, "now", retry_ms=0) == "pending"
    assert client.release(d, "giving back") == "pending"
    rows = {j.job: other.job(queue, j.job) for j in jobs}
    assert rows[a.job].state == "completed" and not rows[a.job].has_payload
    assert (rows[b.job].state, rows[b.job].error) == ("delayed", "SMTP 451")
    assert (rows[d.job].state, rows[d.job].attempts, rows[d.job].error) == ("pending", 0, "giving back")


def test_fencing_stale_token(client: Client, other: Client, queue: str) -> None:
    client.enqueue(queue, "x", group="TENa")
    (j,) = client.claim(queue)
    stale = echomq.LeaseRef(queue, j.job, "999999")
    for call in (client.complete, client.release, lambda s: client.fail(s, "e"), lambda s: client.extend(s, 1000)):
        with pytest.raises(echomq.LeaseError) as ei:
            call(stale)
        assert ei.value.code == "ELEASE"
    row = other.job(queue, j.job)
    assert (row.state, row.attempts) == ("active", 1)


def test_dead_letters(client: Client, other: Client, queue: str) -> None:
    a = client.enqueue(queue, 1, group="TENa", max_attempts=1).job
    b = client.enqueue(queue, 2, group="TENa").job
    ja, jb = client.claim(queue, 2)
    assert client.fail(ja, "spent") == "dead"
    assert client.fail(jb, "poison", dead=True) == "dead"
    dead = other.dead_list(queue)
    assert [(d.job, d.group, d.error) for d in dead] == [(a, "TENa", "spent"), (b, "TENa", "poison")]
    assert other.dead_list(queue, job=b)[0].job == b
    assert client.dead_retry(queue, job=a) == 1
    assert other.job(queue, a).state == "pending" and other.job(queue, a).attempts == 0
    assert client.dead_purge(queue) == 1
    with pytest.raises(echomq.NoJobError):
        other.job(queue, b)


def test_tenant_levers(client: Client, other: Client, queue: str) -> None:
    for i in range(3):
        client.enqueue(queue, i, group="TENa")
    flat = client.enqueue(queue, "flat").job
    assert client.depth(queue, "TENa") == 3 and client.depth(queue) == 1
    assert client.limit(queue, "TENa", 1) is None
    assert len(client.claim(queue, 3)) == 1  # the ceiling
    client.limit(queue, "TENa", None)
    assert client.pause(queue, "TENa") is True and client.pause(queue, "TENa") is False
    assert client.claim(queue, 3) == []
    page = client.groups(queue)
    assert page.done and [(g.group, g.depth, g.active, g.paused) for g in page.groups] == [("TENa", 2, 1, True)]
    assert client.resume(queue, "TENa") is True
    assert client.reassign(queue, flat, "TENb") is None
    assert client.reassign(queue, flat, "TENb") == "TENb"
    assert client.drain(queue, "TENa") == 2
    s = other.stats(queue)
    assert (s.pending, s.active, s.flat) == (1, 1, 0)
    assert client.reap(queue) == 0 and client.reap(queue, "TENa") == 0
    assert client.check(queue) == []
    with pytest.raises(echomq.StateError):
        (j,) = client.claim(queue)
        client.reassign(queue, j.job, "TENc")


def test_peek_remove_and_the_flat_drain(client: Client, other: Client, queue: str) -> None:
    ids = [client.enqueue(queue, i, group="TENa").job for i in range(3)]
    flat = [client.enqueue(queue, "f%d" % i).job for i in range(2)]
    page = client.peek(queue, "TENa", count=2)
    assert [j.job for j in page.jobs] == ids[:2] and page.cursor == ids[1] and not page.done
    rest = client.peek(queue, "TENa", cursor=page.cursor)
    assert [j.job for j in rest.jobs] == ids[2:] and rest.done
    assert [j.payload for j in client.peek(queue).jobs] == ["f0", "f1"]
    with pytest.raises(echomq.ArgumentError):
        client.peek(queue, "TENa", state="dead")
    assert client.remove(queue, ids[0]) == "pending"
    with pytest.raises(echomq.NoJobError):
        client.remove(queue, ids[0])
    (j,) = client.claim(queue)
    assert client.peek(queue, state="active").jobs[0].job == j.job
    with pytest.raises(echomq.StateError):
        client.remove(queue, j.job)
    assert client.drain(queue) == 2
    assert other.depth(queue) == 0 and other.depth(queue, "TENa") == 1
    for f in flat:  # drained rows are deleted
        with pytest.raises(echomq.NoJobError):
            other.job(queue, f)
    assert client.check(queue) == []


def test_rate_holds_a_group_to_its_leases(client: Client, other: Client, queue: str) -> None:
    for i in range(3):
        client.enqueue(queue, i, group="TENa", job=f"JOBa{i}")
        client.enqueue(queue, i, group="TENb", job=f"JOBb{i}")
    assert client.rate(queue, "TENa", 1, 60000) is None
    with pytest.raises(echomq.ArgumentError):
        client.rate(queue, "TENa", 1)
    assert [j.job for j in client.claim(queue, 6)] == ["JOBa0", "JOBb0", "JOBb1", "JOBb2"]
    held = {g.group: (g.rate_max, g.rate_per_ms, g.throttled) for g in other.groups(queue).groups}
    assert held == {"TENa": (1, 60000, True), "TENb": (None, None, False)}
    client.rate(queue, "TENa", None)
    assert [j.job for j in client.claim(queue, 6)] == ["JOBa1", "JOBa2"]
    assert client.check(queue) == []


def test_weight_gives_a_group_more_turns(client: Client, other: Client, queue: str) -> None:
    for i in range(4):
        client.enqueue(queue, i, group="TENa", job=f"JOBa{i}")
        client.enqueue(queue, i, group="TENb", job=f"JOBb{i}")
    assert client.weight(queue, "TENa", 3) is None
    with pytest.raises(echomq.ArgumentError):
        client.weight(queue, "TENa", 1001)
    assert sorted((g.group, g.weight) for g in other.groups(queue).groups) == [("TENa", 3), ("TENb", 1)]
    assert [j.job for j in client.claim(queue, 5)] == ["JOBa0", "JOBa1", "JOBa2", "JOBb0", "JOBa3"]
    client.weight(queue, "TENa", None)
    assert [g.weight for g in other.groups(queue).groups] == [1, 1]
    assert client.check(queue) == []


def test_queues_pages_the_registry_with_totals(client: Client, queue: str) -> None:
    # The session's daemon holds other tests' queues too: page through
    # all of them, one at a time, and find this test's two.
    client.enqueue(queue, 1, group="TENa")
    client.enqueue(queue, 2, group="TENb")
    client.pause(queue, "TENb")
    client.enqueue(queue + "x", 3, delay_ms=600000)
    found = {}
    page = client.queues(count=1)
    for _ in range(10000):
        found.update({q.queue: q for q in page.queues})
        if page.done:
            break
        page = client.queues(page.cursor, count=1)
    assert page.done
    a, b = found[queue], found[queue + "x"]
    assert (a.pending, a.active, a.delayed, a.dead, a.groups, a.paused) == (2, 0, 0, 0, 2, 1)
    assert (b.pending, b.delayed, b.groups) == (0, 1, 0)
    with pytest.raises(echomq.ArgumentError):
        client.queues("x")


def test_forget_refuses_a_queue_with_jobs_then_forgets_it(client: Client, queue: str) -> None:
    job = client.enqueue(queue, 1, group="TENa").job
    with pytest.raises(echomq.StateError):
        client.forget(queue)
    client.remove(queue, job)
    assert client.forget(queue) is None
    page = client.queues(count=1000)
    while True:
        assert queue not in [q.queue for q in page.queues]
        if page.done:
            break
        page = client.queues(page.cursor, count=1000)


def test_clients_shows_names_streams_and_held_leases(client: Client, other: Client, queue: str) -> None:
    client.enqueue(queue, 1, group="TENa")
    (j,) = other.claim(queue, lease_ms=600000)
    me = [c for c in other.clients(count=1000).clients if c.self]
    assert len(me) == 1 and me[0].leases == 1 and me[0].held is None
    row = client.client(me[0].id)
    assert row.held is not None and [(h.queue, h.job, h.group) for h in row.held] == [(queue, j.job, "TENa")]
    assert row.held[0].deadline_ms == j.lease_until and not row.self
    with pytest.raises(echomq.NotFoundError):
        client.client(me[0].id + 100000)
    with pytest.raises(echomq.ArgumentError):
        client.clients("x")


def test_defaults_apply_to_groups_without_their_own(client: Client, other: Client, queue: str) -> None:
    for i in range(3):
        client.enqueue(queue, i, group="TENa", job=f"JOBa{i}")
        client.enqueue(queue, i, group="TENb", job=f"JOBb{i}")
    assert client.limit(queue, None, 1) is None
    client.limit(queue, "TENb", 2)
    client.weight(queue, None, 2)
    with pytest.raises(echomq.ArgumentError):
        client.weight(queue, None, 0)
    assert client.stats(queue).defaults == {"limit": 1, "weight": 2, "rate": None, "cap": None}
    got = sorted((g.group, g.limit, g.limit_from, g.weight_from) for g in other.groups(queue).groups)
    assert got == [("TENa", 1, "queue", "queue"), ("TENb", 2, "group", "queue")]
    assert [j.group for j in client.claim(queue, 6)] == ["TENa", "TENb", "TENb"]
    client.limit(queue, None, None)
    client.weight(queue, None, None)
    assert client.stats(queue).defaults == {"limit": None, "weight": None, "rate": None, "cap": None}
    assert client.check(queue) == []


def test_cap_refuses_a_full_lane_with_full_error(client: Client, other: Client, queue: str) -> None:
    assert client.cap(queue, "TENa", 2) is None
    client.enqueue(queue, 1, group="TENa")
    client.enqueue(queue, 2, group="TENa", delay_ms=60000)
    with pytest.raises(echomq.FullError) as e:
        client.enqueue(queue, 3, group="TENa", job="JOBfull")
    assert (e.value.cap, e.value.group, e.value.job) == (2, "TENa", "JOBfull")
    with pytest.raises(echomq.ArgumentError):
        client.cap(queue, "TENa", 0)
    client.cap(queue, None, 5)
    assert client.stats(queue).defaults["cap"] == 5
    info = {g.group: g for g in other.groups(queue).groups}
    assert (info["TENa"].cap, info["TENa"].cap_from, info["TENa"].depth, info["TENa"].delayed) == (2, "group", 1, 1)
    client.cap(queue, "TENa", None)
    client.cap(queue, None, None)
    assert client.enqueue(queue, 3, group="TENa", job="JOBfull").job == "JOBfull"
    assert client.check(queue) == []


def test_reap_recovers_an_expired_lease(client: Client, other: Client, queue: str) -> None:
    job = client.enqueue(queue, 1, group="TENa").job
    client.claim(queue, lease_ms=1)
    wait_until(lambda: other.reap(queue, "TENa") == 1 or other.job(queue, job).state == "pending", "the lease to be reaped")
    assert other.job(queue, job).state == "pending"


def test_flat_and_grouped_are_apart(client: Client, queue: str) -> None:
    g = client.enqueue(queue, 1, group="TENa").job
    f = client.enqueue(queue, 2).job
    assert [j.job for j in client.claim(queue, 5)] == [g]
    (j,) = client.claim(queue, 5, flat=True)
    assert j.job == f and j.group is None


def test_every_error_code_maps_to_its_class(client: Client, queue: str) -> None:
    cases = {
        "ENOJOB": lambda: client.job(queue, "JOBnothing"),
        "ELEASE": lambda: client.complete(echomq.LeaseRef(queue, client.enqueue(queue, 1, group="TENa").job, "1")),
        "EARG": lambda: client.claim(queue, 0),
        "EQUEUE": lambda: client.stats("bad queue!"),
        "EKIND": lambda: client.job(queue, "nojob"),
        "EBRAND": lambda: client.depth(queue, "lowercase"),
        "EUNKNOWN": lambda: client.request("frobnicate"),
        "EEMPTY": lambda: client.enqueue_many(queue, []),
        "ESTATE": lambda: client.reassign(queue, client.enqueue(queue, 1, group="TENa", delay_ms=99999).job, "TENb"),
    }
    for code, call in cases.items():
        with pytest.raises(echomq.EmqError) as ei:
            call()
        e = ei.value
        assert (e.code, type(e).__name__) == (code, CODES[code][2])
        assert isinstance(e, getattr(echomq, CODES[code][2])) and e.message


def test_error_classes_from_the_one_table() -> None:
    for code, (_n, _summary, name) in CODES.items():
        cls = getattr(echomq, name)
        assert issubclass(cls, echomq.EmqError) and cls.code == code and cls.__doc__
        assert echomq.error_class(code) is cls
    assert echomq.error_class("ENEWER") is echomq.EmqError
    assert issubclass(echomq.ConnectionLost, ConnectionError) and echomq.ConnectionLost.code == "ECONN"
    assert issubclass(echomq.Timeout, TimeoutError) and echomq.Timeout.code == "ETIMEOUT"


def test_enqueue_error_carries_the_job_to_retry_with(client: Client, queue: str) -> None:
    with pytest.raises(echomq.TooBigError) as ei:
        client.enqueue(queue, "x" * (600 * 1024), job="JOBbig")
    assert ei.value.job == "JOBbig"


def test_payloads_byte_exact(client: Client, other: Client, queue: str) -> None:
    big = {"blob": "é" * (250 * 1024)}  # 500 KiB of UTF-8
    uni = {"t": "naïve café ✓ 😀 \u2028", "esc": "quote\" back\\ nl\n tab\t nul-free \u0001", "n": [1, 2.5, -3, True, None]}
    for p in (big, uni):
        job = client.enqueue(queue, p).job
        assert other.job(queue, job).payload == p
        (j,) = client.claim(queue, flat=True)
        assert j.payload == p
        client.complete(j)


def test_pushes_apart_from_replies(client: Client, other: Client, queue: str) -> None:
    client.stream(queue, 2, lease_ms=60000)
    ids = [client.enqueue(queue, i, group="TENa").job for i in range(3)]
    # The pushes came between the enqueue replies; the replies were still matched.
    got = [client.next_job(20), client.next_job(20)]
    assert [j.job for j in got if j] == ids[:2]
    assert client.next_job(0.05) is None  # credit 2: the third waits
    assert client.stats(queue).active == 2
    client.complete(got[0])  # type: ignore[arg-type]
    third = client.next_job(20)
    assert third is not None and third.job == ids[2] and third.attempt == 1
    assert client.stream(queue, 0) is None


def test_refs_match_replies_across_threads(client: Client, queue: str) -> None:
    out: dict = {}

    def work(i: int) -> None:
        out[i] = [client.enqueue(queue, {"t": i, "k": k}, job=f"JOBt{i}-{k}").job for k in range(20)]

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(8):
        assert out[i] == [f"JOBt{i}-{k}" for k in range(20)]


def test_a_line_over_the_limit_gets_its_reply_in_place(redis, queue: str) -> None:
    d = Emqd(redis, "--max-line", "1000")
    try:
        with Client("127.0.0.1", d.port) as c:
            with pytest.raises(echomq.TooBigError):  # answered without a ref
                c.enqueue(queue, "x" * 2000)
            assert c.enqueue(queue, 1).verdict == "enqueued"
    finally:
        d.stop()


def test_a_token_outside_its_role_raises_permission_denied(redis, queue: str, tmp_path) -> None:
    """EPERM (PROTOCOL.md 7) is PermissionDeniedError, from the one table."""
    import hashlib

    tokens = tmp_path / "tokens"
    tokens.write_text("mailer producer " + hashlib.sha256(b"p-secret").hexdigest() + "\n")
    d = Emqd(redis, "--tokens-file", str(tokens))
    try:
        with Client("127.0.0.1", d.port, token="p-secret") as c:
            assert c.enqueue(queue, 1).verdict == "enqueued"
            with pytest.raises(echomq.PermissionDeniedError) as e:
                c.claim(queue)
            assert e.value.code == "EPERM"
            assert c.stats(queue).pending == 1, "the refusal changed nothing"
    finally:
        d.stop()


def test_auth(redis, queue: str) -> None:
    d = Emqd(redis, "--token", "s3cret")
    try:
        with pytest.raises(echomq.AuthError):
            Client("127.0.0.1", d.port, token="wrong")
        with pytest.raises(echomq.AuthError):
            Client("127.0.0.1", d.port)
        with Client("127.0.0.1", d.port, token="s3cret") as c:
            c.ping()
            assert c.enqueue(queue, 1).verdict == "enqueued"
    finally:
        d.stop()


def test_address_from_the_environment(emqd: Emqd, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQ_ADDR", emqd.addr)
    with Client() as c:
        assert c.address.port == emqd.port
        c.ping()
    assert echomq.parse_addr("[::1]:9").host == "::1" and echomq.parse_addr("unix:/x").unix == "/x"
    with pytest.raises(ValueError):
        echomq.parse_addr("nope:")


def test_cannot_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening
        with pytest.raises(echomq.ConnectionLost) as ei:
            Client("127.0.0.1", port)
    assert ei.value.code == "ECONN"


def test_timeout_then_the_late_reply_is_dropped(fresh_emqd: Emqd, queue: str) -> None:
    c = Client("127.0.0.1", fresh_emqd.port, timeout=0.3)
    try:
        assert fresh_emqd.proc is not None
        fresh_emqd.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(echomq.Timeout):
                c.enqueue(queue, 1, job="JOBlate")
        finally:
            fresh_emqd.proc.send_signal(signal.SIGCONT)
        # The connection still works; the late reply went to no one.
        c.timeout = None
        assert c.enqueue(queue, 2, job="JOBlate").duplicate
        assert c.stats(queue).pending == 1
    finally:
        c.close()


def test_parked_claim_holds_later_replies_without_timing_them_out(emqd: Emqd, queue: str) -> None:
    # The ping's reply comes after the parked claim's (1 s), past the
    # client's 0.3 s timeout: its deadline is the claim's, so it waits.
    with Client("127.0.0.1", emqd.port, timeout=0.3) as c:
        with c.pipeline() as p:
            p.claim(queue, wait_ms=1000)
            p.ping()
        assert p.results == [[], None]


def test_connection_lost_and_closed(fresh_emqd: Emqd, queue: str) -> None:
    c = Client("127.0.0.1", fresh_emqd.port)
    c.stream(queue, 1)
    fresh_emqd.kill()
    with pytest.raises(echomq.ConnectionLost):
        c.next_job(20)
    assert c.closed
    with pytest.raises(echomq.ConnectionLost):
        c.ping()
    c.close()


def test_quit_and_close(emqd: Emqd, other: Client, queue: str) -> None:
    c = Client("127.0.0.1", emqd.port)
    job = c.enqueue(queue, 1, group="TENa").job
    c.claim(queue)
    c.quit()
    assert c.closed
    c.close()  # twice is fine
    # Released once the daemon saw the close, attempt counted (6.4).
    row = wait_until(lambda: (lambda r: r if r.state != "active" else None)(other.job(queue, job)), "the release")
    assert (row.state, row.attempts, row.error) == ("pending", 1, "connection closed")


def test_request_escape_hatch(client: Client, queue: str) -> None:
    r = client.request("stats", queue=queue)
    assert r["ok"] is True and "pending" in r
    assert json.loads(json.dumps(r)) == r
