"""The :class:`Worker`: streams a queue and runs a handler for each job.

What it does, in the protocol's terms (PROTOCOL.md 6):

* one ``stream`` of the queue's grouped lanes with credit ``concurrency``
  (and, with ``flat=True``, a second one of the ungrouped set, with the
  same credit), so the daemon never hands it more than it runs;
* each pushed job runs at once: a plain function in a thread of its own,
  a coroutine function as a task on the worker's event loop;
* while a handler runs, its lease is extended by ``lease_ms`` each time
  half of it is gone (timed from when the job was read, as 6.1 advises);
* the handler returning completes the job; raising :class:`Retry` fails
  it for a retry after ``after_ms`` (or the daemon's backoff), raising
  :class:`Dead` dead-letters it, raising anything else fails it with the
  exception's text (``ValueError: boom``), retried with backoff until its
  attempts are spent;
* when the connection goes (emqd restarted, the network broke) it
  reconnects with jittered exponential backoff and streams again; a
  handler that was running goes on, and its job is settled through the
  new connection (a lease that is still current can be settled through
  any connection);
* on SIGTERM / SIGINT (with :meth:`run` in the main thread) or
  :meth:`stop`: the streams' credit goes to 0 (no more work), running
  handlers get the grace period to finish and settle, and every job not
  finished by then is released, its attempt returned (5.10), so stopping
  never uses up a job's attempts. A second signal ends the grace at once.

No job is lost when a worker stops or crashes: what it does not settle,
the daemon releases when the connection closes (6.4) or reaps when the
lease runs out.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Tuple, Type, Union

from .aio import AsyncClient
from .client import DEFAULT_TIMEOUT
from .errors import ConnectionLost, EmqError, ERROR_CLASSES, Timeout
from .types import LeasedJob

__all__ = ["Worker", "Retry", "Dead", "Handler", "error_text"]

log = logging.getLogger("echomq.worker")

Handler = Union[Callable[[LeasedJob], Any], Callable[[LeasedJob], Awaitable[Any]]]
"""A job handler: a function or a coroutine function of the leased job.
Its return value is ignored."""

ERROR_MAX = 4096  # bytes of error text the daemon records (5.9)
_LOST = (ERROR_CLASSES["ELEASE"], ERROR_CLASSES["ENOJOB"])  # the lease is not ours any more
# Worth trying again (ELIMIT: too many connections or queues, for now).
_PASSING: Tuple[Type[EmqError], ...] = (ConnectionLost, Timeout, *(ERROR_CLASSES[c] for c in ("EUNAVAILABLE", "EINTERNAL", "ELIMIT")))
RETRY_PAUSE = 0.2  # seconds between tries of a settle or an extend that met a passing error


class Retry(Exception):
    """Raise from a handler to fail the job for a retry: after ``after_ms``
    milliseconds (0: at once), or ``None`` for the daemon's backoff.
    ``reason`` is recorded as the job's error."""

    def __init__(self, after_ms: Optional[int] = None, reason: str = "retry requested by the handler") -> None:
        super().__init__(reason)
        self.after_ms = after_ms
        """When to retry, ms from now (``None``: the backoff)."""
        self.reason = reason
        """The error text recorded on the job."""


class Dead(Exception):
    """Raise from a handler to dead-letter the job now, whatever its
    attempts; ``reason`` is recorded as its error."""

    def __init__(self, reason: str = "dead-lettered by the handler") -> None:
        super().__init__(reason)
        self.reason = reason
        """The error text recorded on the job."""


def error_text(exc: BaseException) -> str:
    """The text a failed job records for the exception its handler raised:
    ``"ValueError: boom"`` (the last line Python prints for it), cut to
    the protocol's 4096 bytes."""
    text = traceback.format_exception_only(type(exc), exc)[-1].strip()
    raw = text.encode("utf-8")
    if len(raw) > ERROR_MAX:
        text = raw[:ERROR_MAX].decode("utf-8", "ignore")
    return text


@dataclass(eq=False)
class _Run:
    """One job in hand: from its push until it is settled or released."""

    job: LeasedJob
    gen: int  # the connection it came through
    lease_start: float  # monotonic; the lease's own timer
    task: "Optional[asyncio.Task[None]]" = None
    phase: str = "handling"  # then "settling", "done"
    lost: bool = False  # extend said ELEASE/ENOJOB: the job is someone else's
    released: bool = False  # given back at shutdown


class Worker:
    """Runs ``handler`` for each job of ``queue`` (see the module's
    docstring for the full behaviour).

    ``concurrency``: jobs run at once (the stream's credit); ``flat``:
    also take the queue's ungrouped jobs, on a second stream with the same
    credit (grouped jobs only otherwise); ``lease_ms``: the lease asked for
    and renewed; ``grace``: seconds a stop waits for running handlers
    (``stop(grace)`` can say otherwise); ``backoff``: the first and the
    longest pause, in seconds, between reconnects. ``host``, ``port``,
    ``token``, ``name``, ``unix`` and ``timeout`` are as for
    :class:`~echomq.Client`. ``on_complete(job)``, ``on_fail(job, error,
    state)`` and ``on_release(job)`` are called (in the worker's loop; keep
    them short) after each settle the daemon confirmed.

    Errors that reconnecting cannot fix (a refused token, a malformed
    queue name, a bad argument) end :meth:`run` with their exception.
    """

    def __init__(
        self,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        flat: bool = False,
        lease_ms: int = 30000,
        grace: float = 25.0,
        host: Optional[str] = None,
        port: Optional[int] = None,
        token: Optional[str] = None,
        name: Optional[str] = None,
        unix: Optional[str] = None,
        ssl: Optional[SSLContext] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        backoff: Tuple[float, float] = (0.1, 5.0),
        on_complete: Optional[Callable[[LeasedJob], Any]] = None,
        on_fail: Optional[Callable[[LeasedJob, str, str], Any]] = None,
        on_release: Optional[Callable[[LeasedJob], Any]] = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease_ms < 2:
            raise ValueError("lease_ms must be at least 2")
        self.queue = queue
        """The queue worked."""
        self.handler = handler
        """The job handler."""
        self.concurrency = concurrency
        """Jobs run at once, per stream."""
        self.flat = flat
        """Whether ungrouped jobs are taken too."""
        self.lease_ms = lease_ms
        """The lease asked for, and renewed while a handler runs."""
        self.grace = grace
        """Seconds a stop waits for running handlers by default."""
        self.backoff = backoff
        """(first, longest) pause between reconnects, in seconds."""
        self.on_complete = on_complete
        self.on_fail = on_fail
        self.on_release = on_release
        self._client_args: Dict[str, Any] = dict(host=host, port=port, token=token, name=name or f"echomq-worker {queue}", unix=unix, ssl=ssl, timeout=timeout)
        self._is_async = _is_coroutine_function(handler)
        self._kinds = [False, True] if flat else [False]
        self._stop_flag = threading.Event()  # a stop was asked for (any thread may look)
        self._done = threading.Event()  # run() has returned
        self._online = threading.Event()  # connected and streaming
        self._ran = False
        self._early_grace: Optional[float] = None  # stop() before the loop ran
        self._ctl = threading.Lock()  # stop() against run_async's start
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[int] = None
        self._client: Optional[AsyncClient] = None
        self._gen = 0
        self._runs: Set[_Run] = set()
        self._orphans: Dict[bool, int] = {False: 0, True: 0}
        self._stopping = False
        self._deadline = 0.0  # monotonic end of the grace, once stopping
        # Made in run_async, on the worker's loop:
        self._stop_evt: asyncio.Event  # a stop was asked for
        self._grace_evt: asyncio.Event  # the grace changed, or began
        self._conn_evt: asyncio.Event  # a client is attached
        self._quiet: asyncio.Event  # stopping, and the streams' credit is 0

    # ---- public control ------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for. A long handler may look at it to
        finish early (its job is released if it does not finish in the
        grace)."""
        return self._stop_flag.is_set()

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        """Block (a thread handler) until a stop is asked for or
        ``timeout`` seconds pass; returns :attr:`stopping`."""
        return self._stop_flag.wait(timeout)

    @property
    def connected(self) -> bool:
        """Whether the worker is connected and streaming now."""
        return self._online.is_set()

    @property
    def running(self) -> int:
        """Jobs in hand now (handlers running or settling)."""
        return len(self._runs)

    def stop(self, grace: Optional[float] = None, wait: bool = True) -> None:
        """Stop gracefully: take no more work, give running handlers
        ``grace`` seconds (default :attr:`grace`) to finish, release the
        rest with their attempts returned, then close. Safe from any
        thread and from a signal handler. Called from another thread with
        ``wait`` it returns once :meth:`run` has; from the worker's own
        loop it only asks. Calling it again can shorten the grace."""
        g = self.grace if grace is None else max(0.0, grace)
        self._stop_flag.set()
        with self._ctl:
            loop = self._loop
            if loop is None:  # run_async will see it
                self._early_grace = g if self._early_grace is None else min(g, self._early_grace)
                return
        try:
            loop.call_soon_threadsafe(self._request_stop, g)  # wakes the loop, also from a signal handler
        except RuntimeError:  # the loop has closed: run() is over
            return
        if wait and threading.get_ident() != self._loop_thread:
            self._done.wait()

    def run(self, install_signals: bool = True) -> None:
        """Work until stopped (blocking): connect, stream, run handlers,
        reconnect as needed. In the main thread with ``install_signals``,
        SIGTERM and SIGINT stop it gracefully (a second one ends the grace
        at once). Raises what reconnecting cannot fix."""
        asyncio.run(self._main(install_signals and threading.current_thread() is threading.main_thread()))

    async def run_async(self) -> None:
        """:meth:`run` as a coroutine, on the running event loop (no
        signal handlers are installed: call :meth:`stop`)."""
        if self._ran:
            raise RuntimeError("a Worker runs once; make a new one")
        self._ran = True
        self._stop_evt = asyncio.Event()
        self._grace_evt = asyncio.Event()
        self._conn_evt = asyncio.Event()
        self._quiet = asyncio.Event()
        with self._ctl:  # from here on, stop() reaches the loop
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            early = self._early_grace
        try:
            if early is not None:
                self._request_stop(early)
            await self._serve()
        finally:
            self._online.clear()
            self._done.set()

    # ---- the loop ------------------------------------------------------

    async def _main(self, signals: bool) -> None:
        loop = asyncio.get_running_loop()
        sigs = (signal.SIGTERM, signal.SIGINT) if signals else ()
        for s in sigs:
            loop.add_signal_handler(s, self._on_signal, s)
        try:
            await self.run_async()
        finally:
            for s in sigs:
                loop.remove_signal_handler(s)

    def _on_signal(self, sig: int) -> None:
        if self._stopping:
            log.info("%s again: releasing the jobs still running", signal.Signals(sig).name)
            self._request_stop(0.0)
        else:
            log.info("%s: stopping (grace %.3g s)", signal.Signals(sig).name, self.grace)
            self._stop_flag.set()
            self._request_stop(self.grace)

    def _request_stop(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        if not self._stopping:
            self._stopping = True
            self._deadline = deadline
            self._stop_flag.set()
            self._stop_evt.set()
        elif deadline < self._deadline:
            self._deadline = deadline
        self._grace_evt.set()

    async def _serve(self) -> None:
        pause = self.backoff[0]
        streamed = False
        while not self._stopping:
            client = AsyncClient(**self._client_args)
            try:
                await client.connect()
                self._attach(client)
                for kind in self._kinds:
                    await client.stream(self.queue, self._credit(kind), lease_ms=self.lease_ms, flat=kind)
                self._online.set()
                log.info("%sconnected to %s, streaming queue %s (concurrency %d%s)", "re" if streamed else "",
                         client.address, self.queue, self.concurrency, ", flat too" if self.flat else "")
                streamed = True
                pause = self.backoff[0]
                await self._consume(client)
            except _PASSING as e:
                log.warning("%s; reconnecting", e)
            except BaseException:
                await self._detach(client)
                await self._shutdown()
                raise
            if self._stopping:
                break
            await self._detach(client)
            try:
                await asyncio.wait_for(self._stop_evt.wait(), pause * random.uniform(0.5, 1.0))
            except asyncio.TimeoutError:
                pass
            pause = min(pause * 2, self.backoff[1])
        await self._shutdown()

    def _attach(self, client: AsyncClient) -> None:
        """A new connection: every job in hand came through an older one,
        so it does not count against the new streams' credit."""
        self._gen += 1
        self._client = client
        self._orphans = {k: sum(1 for r in self._runs if (r.job.group is None) == k) for k in (False, True)}
        self._conn_evt.set()

    async def _detach(self, client: AsyncClient) -> None:
        self._online.clear()
        if self._client is client:
            self._client = None
            self._conn_evt.clear()
        if not client.closed:
            await client.close()

    def _credit(self, kind: bool) -> int:
        return max(0, self.concurrency - self._orphans[kind])

    async def _consume(self, client: AsyncClient) -> None:
        """Start a run for each pushed job, until a stop is asked for."""
        stop = asyncio.ensure_future(self._stop_evt.wait())
        try:
            while True:
                get = asyncio.ensure_future(client.next_job())
                done, _ = await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    return
                job = get.result()
                assert job is not None
                self._start(job)
        finally:
            stop.cancel()

    def _start(self, job: LeasedJob) -> None:
        run = _Run(job, self._gen, job.received)
        self._runs.add(run)
        run.task = asyncio.ensure_future(self._run(run))

    # ---- one job -------------------------------------------------------

    async def _run(self, run: _Run) -> None:
        keeper = asyncio.ensure_future(self._keep_lease(run))
        try:
            how: Tuple[str, Optional[str], Optional[int]]
            try:
                await self._handle(run.job)
                how = ("complete", None, None)
            except Retry as r:
                how = ("fail", r.reason, r.after_ms)
            except Dead as d:
                how = ("dead", d.reason, None)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # also SystemExit from a handler's thread: a failure of the job
                text = error_text(e)
                log.warning("%s %s (attempt %d) failed: %s", self.queue, run.job.job, run.job.attempt, text, exc_info=e)
                how = ("fail", text, None)
            finally:
                keeper.cancel()
            if not (run.lost or run.released):
                run.phase = "settling"
                await self._settle(run, *how)
        finally:
            self._finish(run)

    async def _handle(self, job: LeasedJob) -> None:
        if self._is_async:
            await self.handler(job)
            return
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[Any]" = loop.create_future()

        def deliver(value: Any, error: Optional[BaseException]) -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(value)

        def target() -> None:
            try:
                value, error = self.handler(job), None
            except BaseException as e:
                value, error = None, e
            try:
                loop.call_soon_threadsafe(deliver, value, error)
            except RuntimeError:
                pass  # the loop is gone: the worker stopped without this job

        threading.Thread(target=target, name=f"echomq-job-{job.job}", daemon=True).start()
        value = await fut
        if inspect.isawaitable(value):
            await value

    async def _client_until(self, until: float) -> Optional[AsyncClient]:
        """The live client, waiting for a reconnect until ``until``
        (monotonic) or the end of the grace; None if none by then."""
        while self._client is None or self._client.closed:
            end = min(until, self._deadline) if self._stopping else until
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self._conn_evt.wait(), left)
            except asyncio.TimeoutError:
                return None
            if self._client is not None and self._client.closed:
                await asyncio.sleep(RETRY_PAUSE)  # the loop has yet to notice
        return self._client

    async def _keep_lease(self, run: _Run) -> None:
        """Extend the lease each time half of it is gone, until cancelled."""
        half = self.lease_ms / 2000.0
        while True:
            await asyncio.sleep(max(0.0, run.lease_start + half - time.monotonic()))
            sent = time.monotonic()
            client = await self._client_until(run.lease_start + 2 * half)
            if client is None:
                log.warning("%s %s: no connection before its lease ran out", self.queue, run.job.job)
                return
            try:
                await client.extend(run.job, self.lease_ms)
                run.lease_start = sent
            except _LOST as e:
                run.lost = True
                log.warning("%s %s: lost its lease (%s); its handler's outcome will be dropped", self.queue, run.job.job, e)
                return
            except _PASSING:
                await asyncio.sleep(RETRY_PAUSE)

    async def _settle(self, run: _Run, how: str, text: Optional[str], retry_ms: Optional[int]) -> None:
        """Complete or fail the job, through whichever connection is up,
        until the daemon answered or the lease has surely run out."""
        job, tried = run.job, False
        if self._stopping and not self._quiet.is_set():
            # A settle frees a credit: the daemon must not refill it with
            # a job that would only be released again.
            await self._quiet.wait()
        while True:
            client = await self._client_until(run.lease_start + self.lease_ms / 1000.0)
            if client is None:
                log.warning("%s %s: no connection to settle it before its lease ran out; the daemon will retry it", self.queue, job.job)
                return
            try:
                if how == "complete":
                    await client.complete(job)
                    self._hook(self.on_complete, job)
                else:
                    state = await client.fail(job, text, retry_ms=retry_ms, dead=how == "dead")
                    self._hook(self.on_fail, job, text or "", state)
                return
            except _LOST as e:
                # After a lost reply, ELEASE may just mean the first try took effect.
                if not tried:
                    log.warning("%s %s: not ours any more (%s)", self.queue, job.job, e)
                return
            except _PASSING:
                tried = True
                await asyncio.sleep(RETRY_PAUSE)

    def _finish(self, run: _Run) -> None:
        run.phase = "done"
        self._runs.discard(run)
        if run.gen < self._gen:  # an orphan of an older connection: its credit comes back
            kind = run.job.group is None
            self._orphans[kind] = max(0, self._orphans[kind] - 1)
            client = self._client
            if client is not None and not client.closed and not self._stopping:
                asyncio.ensure_future(self._recredit(client, kind))

    async def _recredit(self, client: AsyncClient, kind: bool) -> None:
        try:
            await client.stream(self.queue, self._credit(kind), lease_ms=self.lease_ms, flat=kind)
        except EmqError as e:
            log.debug("re-credit failed: %s", e)

    def _hook(self, hook: Optional[Callable[..., Any]], *args: Any) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("a worker hook raised")

    # ---- stopping ------------------------------------------------------

    async def _release(self, client: Optional[AsyncClient], job: LeasedJob, why: str) -> None:
        if client is None or client.closed:
            return  # the daemon released it when the connection closed
        try:
            await client.release(job, why)
            self._hook(self.on_release, job)
        except EmqError as e:
            log.warning("%s %s: release failed: %s", self.queue, job.job, e)

    async def _release_unstarted(self, client: Optional[AsyncClient]) -> None:
        while client is not None and not client.closed:
            try:
                job = await client.next_job(0)
            except ConnectionLost:
                return
            if job is None:
                return
            await self._release(client, job, "worker stopping: not started")

    async def _shutdown(self) -> None:
        """Credit 0, release what was pushed and not started, give running
        handlers the grace, release the rest, close."""
        self._stopping = True
        self._stop_flag.set()
        client = self._client
        if client is not None and not client.closed:
            for kind in self._kinds:
                try:
                    await client.stream(self.queue, 0, lease_ms=self.lease_ms, flat=kind)
                except EmqError:
                    break
        self._quiet.set()
        await self._release_unstarted(client)
        while any(r.phase == "handling" for r in self._runs):
            left = self._deadline - time.monotonic()
            if left <= 0:
                break
            self._grace_evt.clear()
            tasks: List["asyncio.Future[Any]"] = [r.task for r in self._runs if r.task is not None]
            waiter = asyncio.ensure_future(self._grace_evt.wait())
            await asyncio.wait(tasks + [waiter], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        late = [r for r in self._runs if r.phase == "handling"]
        for r in late:
            r.released = True
            if r.task is not None:
                r.task.cancel()
        for r in late:
            log.info("%s %s: still running after the grace; released", self.queue, r.job.job)
            await self._release(self._client, r.job, "worker stopped before the handler finished")
        settling = [r.task for r in self._runs if r.task is not None]
        if settling:  # settles under way: let them end (each is bounded by the lease)
            await asyncio.wait(settling, timeout=self._client_args["timeout"])
        await self._release_unstarted(self._client)
        if self._client is not None:
            await self._detach(self._client)


def _is_coroutine_function(f: Any) -> bool:
    return inspect.iscoroutinefunction(f) or inspect.iscoroutinefunction(getattr(f, "__call__", None))
