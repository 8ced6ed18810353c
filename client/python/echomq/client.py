"""The blocking client: :class:`Client`, its :class:`Pipeline`, and what
the asyncio client shares with it (:class:`PipelineBase`, :class:`Pending`).

Every op method is an op of :mod:`echomq._ops` bound to the class, so it
has that op's signature and docstring.
"""

from __future__ import annotations

import functools
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, List, Optional, Type, TypeVar

from . import _ops
from ._conn import Address, SyncConn, resolve, resolve_token, tls_context
from ._ops import Call
from .errors import EmqError
from .types import Hello, LeasedJob

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Concatenate, ParamSpec

    P = ParamSpec("P")

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
"""Seconds a call waits for its reply (and a connect for the connection)."""

__all__ = ["Client", "Pipeline", "PipelineBase", "Pending", "DEFAULT_TIMEOUT"]


def _blocking(op: "Callable[P, Call[T]]") -> "Callable[Concatenate[Client, P], T]":
    """The op as a method of Client: send it and wait for its result."""

    @functools.wraps(op)
    def method(self: "Client", /, *args: "P.args", **kwargs: "P.kwargs") -> T:
        return self._conn.call(op(*args, **kwargs))

    method.__qualname__ = f"Client.{op.__name__}"
    return method


class Pending(Generic[T]):
    """The result-to-be of a request queued in a pipeline: after the
    pipeline ran, :meth:`result` is the op's result (or raises its
    error)."""

    __slots__ = ("call", "_value", "_error", "_done")

    def __init__(self, call: Call[T]) -> None:
        self.call = call
        self._value: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._done = False

    def _settle(self, value: Any, error: Optional[BaseException]) -> None:
        self._value, self._error, self._done = value, error, True

    @property
    def done(self) -> bool:
        """Whether the pipeline has run and this request's reply is in."""
        return self._done

    def result(self) -> T:
        """The op's result; raises the op's error, or RuntimeError before
        the pipeline ran."""
        if not self._done:
            raise RuntimeError("the pipeline has not run yet")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def _queued(op: "Callable[P, Call[T]]") -> "Callable[Concatenate[PipelineBase, P], Pending[T]]":
    """The op as a method of a pipeline: queue it, to be sent later."""

    @functools.wraps(op)
    def method(self: "PipelineBase", /, *args: "P.args", **kwargs: "P.kwargs") -> Pending[T]:
        return self._add(op(*args, **kwargs))

    method.__qualname__ = f"PipelineBase.{op.__name__}"
    method.__doc__ = f"Queue ``{op.__name__}``; returns its :class:`Pending` result.\n\n{op.__doc__}"
    return method


class PipelineBase:
    """Requests queued to be written all at once, before any reply is read
    (PROTOCOL.md 2.2: the daemon answers in order, and requests naming the
    same queue take effect in order). Each op method queues its request and
    returns a :class:`Pending`; running the pipeline fills them, and
    :attr:`results` lists them in order: each op's result or, with
    ``raise_on_error=False``, its error as an exception instance."""

    def __init__(self, raise_on_error: bool = True) -> None:
        self._pending: List[Pending[Any]] = []
        self._ran = False
        self.results: List[Any] = []
        """After the run: one entry per request, in order."""
        self.raise_on_error = raise_on_error
        """Whether running it raises the first error (after every reply is
        in) instead of only listing it."""

    def _add(self, call: Call[T]) -> Pending[T]:
        if self._ran:
            raise RuntimeError("this pipeline has run; make a new one")
        p = Pending(call)
        self._pending.append(p)
        return p

    def __len__(self) -> int:
        return len(self._pending)

    def _calls(self) -> List[Call[Any]]:
        if self._ran:
            raise RuntimeError("this pipeline has run; make a new one")
        self._ran = True
        return [p.call for p in self._pending]

    def _finish(self, outcomes: List[Any], raise_on_error: bool) -> List[Any]:
        first: Optional[BaseException] = None
        for p, (value, error) in zip(self._pending, outcomes):
            p._settle(value, error)
            self.results.append(error if error is not None else value)
            if error is not None and first is None:
                first = error
        if first is not None and raise_on_error:
            raise first
        return self.results

    hello = _queued(_ops.hello)
    ping = _queued(_ops.ping)
    enqueue = _queued(_ops.enqueue)
    enqueue_many = _queued(_ops.enqueue_many)
    claim = _queued(_ops.claim)
    stream = _queued(_ops.stream)
    complete = _queued(_ops.complete)
    fail = _queued(_ops.fail)
    release = _queued(_ops.release)
    extend = _queued(_ops.extend)
    limit = _queued(_ops.limit)
    weight = _queued(_ops.weight)
    rate = _queued(_ops.rate)
    cap = _queued(_ops.cap)
    pause = _queued(_ops.pause)
    resume = _queued(_ops.resume)
    reassign = _queued(_ops.reassign)
    drain = _queued(_ops.drain)
    depth = _queued(_ops.depth)
    reap = _queued(_ops.reap)
    stats = _queued(_ops.stats)
    groups = _queued(_ops.groups)
    queues = _queued(_ops.queues)
    forget = _queued(_ops.forget)
    clients = _queued(_ops.clients)
    client = _queued(_ops.client)
    job = _queued(_ops.job)
    dead_list = _queued(_ops.dead_list)
    dead_retry = _queued(_ops.dead_retry)
    dead_purge = _queued(_ops.dead_purge)
    check = _queued(_ops.check)
    peek = _queued(_ops.peek)
    remove = _queued(_ops.remove)
    request = _queued(_ops.request)


def _outcome(conn: SyncConn, slot: Any) -> Any:
    try:
        return conn.wait(slot), None
    except EmqError as e:
        return None, e


class Pipeline(PipelineBase):
    """A pipeline of a :class:`Client` (``client.pipeline()``). Used as a
    context manager it runs on leaving the block (unless the block
    raised)::

        with client.pipeline() as p:
            p.enqueue("mail", {"n": 1}, group="TENacme")
            jobs = p.claim("mail")
        print(p.results, jobs.result())
    """

    def __init__(self, client: "Client", raise_on_error: bool = True) -> None:
        super().__init__(raise_on_error)
        self._client = client

    def execute(self) -> List[Any]:
        """Write every queued request at once, then read every reply.
        Returns :attr:`results`; raises the first error when
        ``raise_on_error`` (every request got its reply all the same)."""
        conn = self._client._conn
        slots = conn.send(self._calls())
        return self._finish([_outcome(conn, s) for s in slots], self.raise_on_error)

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: "Optional[TracebackType]") -> None:
        if et is None and not self._ran:
            self.execute()


class Client:
    """A blocking connection to emqd, safe to share between threads.

    Connects and says ``hello`` (with ``token`` and ``name``) at once;
    raises :class:`~echomq.ConnectionLost` when it cannot connect and
    :class:`~echomq.AuthError` for a refused token. With neither ``host``
    nor ``port`` the address is ``$EMQ_ADDR`` (``HOST:PORT``,
    ``unix:PATH``) when set, else 127.0.0.1:7711; ``token`` defaults to
    ``$EMQ_TOKEN``; ``unix`` connects to a unix socket instead. ``ssl`` (an
    :class:`ssl.SSLContext`, e.g. ``ssl.create_default_context(cafile=...)``)
    speaks TLS, verifying the server's certificate for ``host``; a
    ``tls://HOST:PORT`` address does too, with the default context. ``timeout``
    is in seconds, for the connection and for each reply (a ``claim`` with
    ``wait_ms`` gets that much more; ``None``: wait forever).

    Each op of the protocol is a method (``enqueue``, ``claim``, ...);
    server errors raise the :class:`~echomq.EmqError` subclass of their
    code. Jobs a ``stream`` pushes are read with :meth:`next_job`. When the
    connection breaks, calls raise :class:`~echomq.ConnectionLost` and the
    client is closed: make a new one. A reader thread sorts replies from
    pushes, so calls from several threads share the connection.
    """

    def __init__(
        self,
        host: Optional[str] = None,
        port: Optional[int] = None,
        token: Optional[str] = None,
        name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        *,
        unix: Optional[str] = None,
        ssl: Optional[SSLContext] = None,
    ) -> None:
        self.address: Address = resolve(host, port, unix)
        """Where the client is connected."""
        self._conn = SyncConn(self.address, timeout, tls_context(self.address, ssl))
        try:
            self.server: Hello = self.hello(resolve_token(token), name if name is not None else "echomq-python")
            """The daemon's ``hello`` reply."""
        except BaseException:
            self._conn.close(say_quit=False)
            raise

    hello = _blocking(_ops.hello)
    ping = _blocking(_ops.ping)
    enqueue = _blocking(_ops.enqueue)
    enqueue_many = _blocking(_ops.enqueue_many)
    claim = _blocking(_ops.claim)
    stream = _blocking(_ops.stream)
    complete = _blocking(_ops.complete)
    fail = _blocking(_ops.fail)
    release = _blocking(_ops.release)
    extend = _blocking(_ops.extend)
    limit = _blocking(_ops.limit)
    weight = _blocking(_ops.weight)
    rate = _blocking(_ops.rate)
    cap = _blocking(_ops.cap)
    pause = _blocking(_ops.pause)
    resume = _blocking(_ops.resume)
    reassign = _blocking(_ops.reassign)
    drain = _blocking(_ops.drain)
    depth = _blocking(_ops.depth)
    reap = _blocking(_ops.reap)
    stats = _blocking(_ops.stats)
    groups = _blocking(_ops.groups)
    queues = _blocking(_ops.queues)
    forget = _blocking(_ops.forget)
    clients = _blocking(_ops.clients)
    client = _blocking(_ops.client)
    job = _blocking(_ops.job)
    dead_list = _blocking(_ops.dead_list)
    dead_retry = _blocking(_ops.dead_retry)
    dead_purge = _blocking(_ops.dead_purge)
    check = _blocking(_ops.check)
    peek = _blocking(_ops.peek)
    remove = _blocking(_ops.remove)
    request = _blocking(_ops.request)

    def quit(self) -> None:
        """``quit`` (5.3): the daemon answers every request still owed,
        then closes the connection, releasing its leases (attempt counted,
        6.4); the client is closed. :meth:`close` does the same and never
        raises."""
        try:
            self._conn.call(_ops.quit())
        finally:
            self._conn.close(say_quit=False)

    def next_job(self, timeout: Optional[float] = None) -> Optional[LeasedJob]:
        """The oldest job a stream pushed that was not taken yet, waiting
        up to ``timeout`` seconds (``None``: until one comes). ``None``
        when none came in time. Raises :class:`~echomq.ConnectionLost` once
        the connection is gone and every job pushed before was taken."""
        return self._conn.next_job(timeout)

    def jobs(self) -> Iterator[LeasedJob]:
        """Every pushed job, as it comes (see :meth:`next_job`); ends with
        :class:`~echomq.ConnectionLost` when the connection goes."""
        while True:
            job = self._conn.next_job(None)
            if job is not None:
                yield job

    def pipeline(self, raise_on_error: bool = True) -> Pipeline:
        """A :class:`Pipeline` on this connection."""
        return Pipeline(self, raise_on_error)

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed or broken)."""
        return self._conn.lost is not None

    @property
    def timeout(self) -> Optional[float]:
        """Seconds each later call waits for its reply (``None``: forever)."""
        return self._conn.router.timeout

    @timeout.setter
    def timeout(self, value: Optional[float]) -> None:
        self._conn.router.timeout = value

    def close(self) -> None:
        """Say ``quit`` (waiting at most 2 s for its reply) and close. The
        daemon releases the leases this connection still holds. Safe to
        call twice."""
        self._conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: "Optional[TracebackType]") -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<echomq.Client {self.address}{' closed' if self.closed else ''}>"
