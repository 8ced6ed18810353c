"""The Worker against a real emqd: concurrency, automatic extend, raise ->
fail, Retry / Dead, reconnect after emqd restarts, graceful stop. Every
wait is for an event, with a generous deadline; nothing is timed."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

import pytest

import echomq
from echomq import Client, LeasedJob, Worker
from servers import DEADLINE, Emqd, env_with, wait_until


class Events:
    """What a worker reported through its hooks, for the test to wait on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.completed: List[str] = []
        self.failed: List[tuple] = []
        self.released: List[str] = []

    def hooks(self) -> Dict[str, Callable[..., None]]:
        def done(j: LeasedJob) -> None:
            with self.lock:
                self.completed.append(j.job)

        def failed(j: LeasedJob, error: str, state: str) -> None:
            with self.lock:
                self.failed.append((j.job, j.attempt, error, state))

        def released(j: LeasedJob) -> None:
            with self.lock:
                self.released.append(j.job)

        return dict(on_complete=done, on_fail=failed, on_release=released)


class Running:
    """A worker in a thread of its own, stopped at the end of the test."""

    def __init__(self, emqd: Emqd, queue: str, handler: Any, **kw: Any) -> None:
        self.events = Events()
        self.error: Optional[BaseException] = None
        kw = {**self.events.hooks(), **kw}
        self.worker = Worker(queue, handler, host="127.0.0.1", port=emqd.port, backoff=(0.05, 0.5), **kw)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:
            self.error = e

    def stop(self, grace: float = 5.0) -> None:
        self.worker.stop(grace)
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


@pytest.fixture
def workers() -> Iterator[List[Running]]:
    started: List[Running] = []
    yield started
    for w in started:
        if w.thread.is_alive():
            w.stop(0)


def start(workers: List[Running], emqd: Emqd, queue: str, handler: Any, **kw: Any) -> Running:
    w = Running(emqd, queue, handler, **kw)
    workers.append(w)
    return w


def settled(other: Client, queue: str) -> bool:
    s = other.stats(queue)
    return s.pending == 0 and s.active == 0 and s.delayed == 0


def test_concurrency_is_the_credit(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    gate = threading.Event()
    lock = threading.Lock()
    now = [0, 0]  # running, most at once

    def handler(job: LeasedJob) -> None:
        with lock:
            now[0] += 1
            now[1] = max(now[1], now[0])
        gate.wait(DEADLINE)
        with lock:
            now[0] -= 1

    ids = [other.enqueue(queue, i, group=f"TEN{i % 2}x").job for i in range(7)]
    w = start(workers, emqd, queue, handler, concurrency=3)
    wait_until(lambda: now[0] == 3, "three handlers at once")
    s = other.stats(queue)
    assert (s.active, s.pending) == (3, 4)  # the daemon pushed no more than the credit
    gate.set()
    wait_until(lambda: len(w.events.completed) == 7, "every job completed")
    assert sorted(w.events.completed) == sorted(ids) and now[1] == 3
    assert settled(other, queue)
    w.stop()


def test_flat_takes_ungrouped_work_too(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    seen: List[Optional[str]] = []
    grouped = start(workers, emqd, queue, lambda j: seen.append(j.group))
    other.enqueue(queue, 1)
    other.enqueue(queue, 2, group="TENa")
    wait_until(lambda: len(grouped.events.completed) == 1, "the grouped job")
    grouped.stop()
    assert seen == ["TENa"] and other.depth(queue) == 1
    both = start(workers, emqd, queue, lambda j: seen.append(j.group), flat=True)
    wait_until(lambda: len(both.events.completed) == 1, "the flat job")
    assert seen == ["TENa", None]
    both.stop()


def test_lease_extended_while_the_handler_runs(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    def handler(job: LeasedJob) -> None:
        # Runs well past its 1 s lease: returns once the row's lease_until
        # has moved twice (seen by another connection).
        seen = {job.lease_until}

        def moved() -> bool:
            seen.add(other.job(queue, job.job).lease_until or 0)
            return len(seen) >= 3

        wait_until(moved, "the lease to move twice")

    job = other.enqueue(queue, "long", group="TENa").job
    w = start(workers, emqd, queue, handler, lease_ms=1000)
    wait_until(lambda: w.events.completed == [job], "the completion")
    row = other.job(queue, job)
    assert (row.state, row.attempts) == ("completed", 1)  # never reaped, never leased again
    assert other.dead_list(queue) == [] and w.events.failed == []
    w.stop()


def test_raise_fails_with_the_exception_text(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    def handler(job: LeasedJob) -> None:
        raise ValueError(f"boom ü {job.payload}")

    job = other.enqueue(queue, 7, group="TENa", max_attempts=2).job
    w = start(workers, emqd, queue, handler)
    wait_until(lambda: len(w.events.failed) == 2, "two failures (the retry after the backoff)")
    assert w.events.failed == [(job, 1, "ValueError: boom ü 7", "delayed"), (job, 2, "ValueError: boom ü 7", "dead")]
    row = other.job(queue, job)
    assert (row.state, row.error) == ("dead", "ValueError: boom ü 7")
    w.stop()


def test_retry_and_dead(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    def handler(job: LeasedJob) -> None:
        if job.payload == "again" and job.attempt == 1:
            raise echomq.Retry(0, "not yet")
        if job.payload == "poison":
            raise echomq.Dead("cannot be done")

    again = other.enqueue(queue, "again", group="TENa").job
    poison = other.enqueue(queue, "poison", group="TENb").job
    w = start(workers, emqd, queue, handler, concurrency=2)
    wait_until(lambda: w.events.completed == [again] and len(w.events.failed) == 2, "the retry and the dead letter")
    assert sorted(w.events.failed) == sorted([(again, 1, "not yet", "pending"), (poison, 1, "cannot be done", "dead")])
    assert other.job(queue, again).attempts == 2
    assert [(d.job, d.error) for d in other.dead_list(queue)] == [(poison, "cannot be done")]
    w.stop()


def test_async_handlers_run_as_tasks(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    state: Dict[str, Any] = {"running": 0, "most": 0, "threads": set()}

    async def handler(job: LeasedJob) -> None:
        if "all" not in state:
            state["all"] = asyncio.Event()
        state["threads"].add(threading.get_ident())
        state["running"] += 1
        state["most"] = max(state["most"], state["running"])
        if state["running"] == 3:
            state["all"].set()
        await state["all"].wait()  # only three tasks running at once get past this
        state["running"] -= 1

    for i in range(6):
        other.enqueue(queue, i, group="TENa")
    w = start(workers, emqd, queue, handler, concurrency=3)
    wait_until(lambda: len(w.events.completed) == 6, "six completions")
    assert state["most"] == 3 and len(state["threads"]) == 1  # one loop, tasks
    w.stop()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["crash", "stop"])
def test_reconnect_after_emqd_restarts_with_work_in_hand(fresh_emqd: Emqd, queue: str, workers: List[Running], sig: int) -> None:
    restarted = threading.Event()
    started: List[str] = []

    def handler(job: LeasedJob) -> None:
        started.append(job.job)
        if job.payload == "in hand":
            restarted.wait(DEADLINE)

    with Client("127.0.0.1", fresh_emqd.port) as c:
        held = c.enqueue(queue, "in hand", group="TENa").job
    w = start(workers, fresh_emqd, queue, handler, lease_ms=5000)
    wait_until(lambda: held in started, "the job in hand")
    fresh_emqd.restart(sig)
    wait_until(lambda: w.worker.connected, "the worker to reconnect")
    with Client("127.0.0.1", fresh_emqd.port) as c:
        after = [c.enqueue(queue, i, group="TENb").job for i in range(3)]
        restarted.set()
        wait_until(lambda: set(after + [held]) <= set(w.events.completed), "every job completed")
        wait_until(lambda: settled(c, queue), "nothing pending or active")
        assert c.check(queue) == []
        # A crash left the lease current: the job in hand was completed
        # through the new connection. A stop released it (attempt counted).
        assert c.job(queue, held).attempts == (1 if sig == signal.SIGKILL else 2)
    w.stop()


def test_graceful_stop_releases_what_did_not_finish(emqd: Emqd, other: Client, queue: str, workers: List[Running]) -> None:
    def handler(job: LeasedJob) -> None:
        in_hand.add(job.job)
        if job.payload == "finishes":
            w.worker.wait_for_stop(DEADLINE)  # finishes once asked to stop, within the grace
        else:
            forever.wait(DEADLINE)  # ignores the stop

    forever = threading.Event()
    in_hand: Set[str] = set()
    w = start(workers, emqd, queue, handler, concurrency=2)
    a = other.enqueue(queue, "finishes", group="TENa").job
    b = other.enqueue(queue, "hangs", group="TENb").job
    rest = [other.enqueue(queue, i, group="TENc").job for i in range(3)]
    # In the handlers, not only leased: the daemon leases a pushed job
    # before the push reaches the worker, and one that arrives after the
    # stop is given back unstarted.
    wait_until(lambda: in_hand == {a, b}, "two jobs in hand")
    assert other.stats(queue).active == 2
    # A grace long enough for any machine, cut short once the finishing
    # handler is done: a fixed short one would time the handler.
    w.worker.stop(DEADLINE, wait=False)
    wait_until(lambda: w.events.completed == [a], "the job that finishes within the grace")
    w.stop(grace=0)
    forever.set()
    assert w.events.completed == [a] and w.events.released == [b]
    rb = other.job(queue, b)
    assert (rb.state, rb.attempts) == ("pending", 0)  # released, its attempt returned
    assert [other.job(queue, j).attempts for j in rest] == [0, 0, 0]
    s = other.stats(queue)
    assert (s.pending, s.active, s.dead) == (4, 0, 0)


def worker_process(emqd: Emqd, queue: str, code: str) -> "subprocess.Popen[str]":
    """A worker in a process of its own (code gets the queue as argv[1])."""
    return subprocess.Popen([sys.executable, "-c", code, queue], env=env_with(emqd), stdout=subprocess.PIPE, text=True)


def started(p: "subprocess.Popen[str]") -> List[str]:
    """The first line it printed ("started JOB..."), as words."""
    assert p.stdout is not None
    return p.stdout.readline().split()


def test_sigterm_stops_a_worker_process(emqd: Emqd, other: Client, queue: str) -> None:
    code = (
        "import echomq, sys\n"
        "def h(job):\n"
        "    print('started', job.job, flush=True)\n"
        "    w.wait_for_stop()\n"
        "w = echomq.Worker(sys.argv[1], h, concurrency=1)\n"
        "w.run()\n"
        "print('stopped', flush=True)\n"
    )
    job = other.enqueue(queue, 1, group="TENa").job
    p = worker_process(emqd, queue, code)
    try:
        assert started(p) == ["started", job]
        p.send_signal(signal.SIGTERM)
        assert p.wait(DEADLINE) == 0
        assert p.stdout is not None and p.stdout.read().split() == ["stopped"]
    finally:
        p.kill()
        p.wait()
    assert other.job(queue, job).state == "completed"


def test_a_worker_killed_loses_no_job(emqd: Emqd, other: Client, queue: str) -> None:
    code = (
        "import echomq, sys, threading\n"
        "def h(job):\n"
        "    print('started', job.job, flush=True)\n"
        "    threading.Event().wait()\n"
        "echomq.Worker(sys.argv[1], h).run()\n"
    )
    job = other.enqueue(queue, 1, group="TENa").job
    p = worker_process(emqd, queue, code)
    try:
        assert started(p) == ["started", job]
    finally:
        p.kill()
        p.wait()
    row = wait_until(lambda: (lambda r: r if r.state == "pending" else None)(other.job(queue, job)), "the job back")
    assert row.attempts == 1 and row.error == "connection closed"


def test_fatal_errors_end_run(emqd: Emqd) -> None:
    w = Worker("bad queue name", lambda j: None, host="127.0.0.1", port=emqd.port)
    with pytest.raises(echomq.QueueNameError):
        w.run()
    with pytest.raises(ValueError):
        Worker("q", lambda j: None, concurrency=0)


def test_stop_before_run(emqd: Emqd) -> None:
    w = Worker("q", lambda j: None, host="127.0.0.1", port=emqd.port)
    w.stop()
    w.run()  # returns at once
    assert w.stopping and not w.connected
