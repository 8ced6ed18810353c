"""AsyncClient: the same surface as Client (checked name by name and
signature by signature), and the same behaviour against a real emqd."""

from __future__ import annotations

import asyncio
import inspect
import signal
from typing import Any, Awaitable, Callable, TypeVar

import pytest

import echomq
from echomq import AsyncClient, Client, Item
from servers import Emqd

T = TypeVar("T")


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro_fn())  # type: ignore[arg-type]


def public(cls: type) -> dict:
    return {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_")}


def test_same_surface() -> None:
    sync, aio = public(Client), public(AsyncClient)
    assert set(sync) - {"connect"} == set(aio) - {"connect"}
    for name, f in sync.items():
        if not callable(f) or isinstance(f, type):
            continue
        a = aio[name]
        assert inspect.signature(f).parameters == inspect.signature(a).parameters, name
        assert inspect.iscoroutinefunction(a) or inspect.isasyncgenfunction(a) or name == "pipeline", name
        assert f.__doc__ and a.__doc__, name
    assert public(echomq.Pipeline).keys() - {"execute"} == public(echomq.AsyncPipeline).keys() - {"execute"}


def test_ops(emqd: Emqd, other: Client, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient("127.0.0.1", emqd.port) as c:
            assert c.server is not None and c.server.protocol == 1
            await c.ping()
            r = await c.enqueue(queue, {"to": "ü"}, group="TENa", job="JOBa1")
            assert r.verdict == "enqueued"
            res = await c.enqueue_many(queue, [Item(2), {"payload": 3, "group": "x"}], group="TENa")
            assert isinstance(res[0], echomq.Enqueued) and isinstance(res[1], echomq.BrandError)
            b, a = await c.claim(queue, 2, lease_ms=60000)  # in id order: JOB0... < JOBa1
            assert (a.job, a.payload, b.payload) == ("JOBa1", {"to": "ü"}, 2)
            assert await c.extend(a, 90000) == a.lease_until
            assert await c.complete(a) == "completed"
            assert await c.release(b) == "pending"
            assert (await c.job(queue, b.job)).attempts == 0
            assert await c.pause(queue, "TENa") is True and await c.resume(queue, "TENa") is True
            await c.limit(queue, "TENa", 2)
            assert (await c.groups(queue)).groups[0].limit == 2
            assert await c.depth(queue, "TENa") == 1
            assert (await c.stats(queue)).pending == 1
            assert await c.check(queue) == []
            with pytest.raises(echomq.LeaseError):
                await c.fail(a, "late")
            with pytest.raises(echomq.NoJobError):
                await c.job(queue, "JOBnone")
            assert await c.drain(queue, "TENa") == 1
            assert await c.reap(queue) == 0
            assert await c.dead_list(queue) == [] and await c.dead_retry(queue) == 0 and await c.dead_purge(queue) == 0
            assert (await c.request("depth", queue=queue))["depth"] == 0
        assert c.closed

    run(main)
    assert other.job(queue, "JOBa1").state == "completed"


def test_pipeline_and_pushes(emqd: Emqd, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient("127.0.0.1", emqd.port) as c:
            async with c.pipeline() as p:
                ids = [p.enqueue(queue, i, group="TENa") for i in range(3)]
                claims = [p.claim(queue) for _ in range(3)]
            assert [[j.job for j in cl.result()] for cl in claims] == [[e.result().job] for e in ids]
            p2 = c.pipeline()
            parked = p2.claim(queue, wait_ms=20000, flat=True)
            p2.enqueue(queue, "late")
            await p2.execute()
            assert [j.payload for j in parked.result()] == ["late"]
            await c.stream(queue, 1, flat=True)
            job = await c.enqueue(queue, "pushed")
            got = await c.next_job(20)
            assert got is not None and got.job == job.job
            assert await c.next_job(0) is None
            await c.complete(got)

    run(main)


def test_errors_and_connection_loss(fresh_emqd: Emqd, queue: str) -> None:
    async def main() -> None:
        c = AsyncClient("127.0.0.1", fresh_emqd.port, timeout=0.3)
        with pytest.raises(echomq.ConnectionLost):
            await c.ping()  # not connected yet
        await c.connect()
        assert fresh_emqd.proc is not None
        fresh_emqd.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(echomq.Timeout):
                await c.enqueue(queue, 1, job="JOBlate")
        finally:
            fresh_emqd.proc.send_signal(signal.SIGCONT)
        c.timeout = None
        assert (await c.enqueue(queue, 1, job="JOBlate")).duplicate
        await c.stream(queue, 1)
        fresh_emqd.kill()
        with pytest.raises(echomq.ConnectionLost):
            await c.next_job(20)
        with pytest.raises(echomq.ConnectionLost):
            await c.ping()
        await c.close()

    run(main)


def test_auth_refused(redis: Any) -> None:
    d = Emqd(redis, "--token", "t0k")
    try:
        async def main() -> None:
            with pytest.raises(echomq.AuthError):
                await AsyncClient("127.0.0.1", d.port, token="bad").connect()
            async with AsyncClient("127.0.0.1", d.port, token="t0k") as c:
                await c.ping()

        run(main)
    finally:
        d.stop()


def test_worker_inside_a_running_loop(emqd: Emqd, other: Client, queue: str) -> None:
    done = []

    async def main() -> None:
        async def handler(job: echomq.LeasedJob) -> None:
            done.append(job.job)
            if len(done) == 2:
                w.stop()  # from the worker's own loop: only asks

        w = echomq.Worker(queue, handler, host="127.0.0.1", port=emqd.port, grace=5)
        task = asyncio.ensure_future(w.run_async())
        async with AsyncClient("127.0.0.1", emqd.port) as c:
            ids = [(await c.enqueue(queue, i, group="TENa")).job for i in range(2)]
        await asyncio.wait_for(task, 20)
        assert done == ids

    run(main)
    assert other.stats(queue).active == 0 and other.stats(queue).pending == 0
