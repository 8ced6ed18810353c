"""The asyncio client: :class:`AsyncClient` and its :class:`AsyncPipeline`,
the same surface as the blocking :class:`~echomq.Client` with every call
awaited."""

from __future__ import annotations

import functools
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, List, Optional, Type, TypeVar

from . import _ops
from ._conn import Address, AsyncConn, resolve, resolve_token, tls_context
from ._ops import Call
from .client import DEFAULT_TIMEOUT, PipelineBase
from .errors import ConnectionLost, EmqError
from .types import Hello, LeasedJob

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Concatenate, ParamSpec

    P = ParamSpec("P")

T = TypeVar("T")

__all__ = ["AsyncClient", "AsyncPipeline"]


def _awaited(op: "Callable[P, Call[T]]") -> "Callable[Concatenate[AsyncClient, P], Awaitable[T]]":
    """The op as a coroutine method of AsyncClient."""

    @functools.wraps(op)
    async def method(self: "AsyncClient", /, *args: "P.args", **kwargs: "P.kwargs") -> T:
        return await self._live().call(op(*args, **kwargs))

    method.__qualname__ = f"AsyncClient.{op.__name__}"
    return method


class AsyncPipeline(PipelineBase):
    """A pipeline of an :class:`AsyncClient` (``client.pipeline()``): queue
    requests with the op methods (not awaited), then ``await
    p.execute()``, or leave an ``async with`` block::

        async with client.pipeline() as p:
            p.enqueue("mail", {"n": 1}, group="TENacme")
            jobs = p.claim("mail")
        print(p.results, jobs.result())
    """

    def __init__(self, client: "AsyncClient", raise_on_error: bool = True) -> None:
        super().__init__(raise_on_error)
        self._client = client

    async def execute(self) -> List[Any]:
        """Write every queued request at once, then read every reply. As
        :meth:`echomq.Pipeline.execute`."""
        conn = self._client._live()
        slots = await conn.send(self._calls())
        outcomes: List[Any] = []
        for s in slots:
            try:
                outcomes.append((await conn.wait(s), None))
            except EmqError as e:
                outcomes.append((None, e))
        return self._finish(outcomes, self.raise_on_error)

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: "Optional[TracebackType]") -> None:
        if et is None and not self._ran:
            await self.execute()


class AsyncClient:
    """An asyncio connection to emqd, with the surface of
    :class:`~echomq.Client` (same arguments, same methods, each a
    coroutine). Connect with ``await client.connect()`` (which returns
    the client) or ``async with AsyncClient(...) as client:``.
    Use it from one event loop."""

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
        """Where the client connects."""
        self._token = resolve_token(token)
        self._name = name if name is not None else "echomq-python"
        self._timeout = timeout
        self._tls = tls_context(self.address, ssl)
        self._conn: Optional[AsyncConn] = None
        self.server: Optional[Hello] = None
        """The daemon's ``hello`` reply, once connected."""

    def _live(self) -> AsyncConn:
        if self._conn is None:
            raise ConnectionLost("not connected: await client.connect() first")
        return self._conn

    async def connect(self) -> "AsyncClient":
        """Connect and say ``hello``. Raises as :class:`~echomq.Client`
        does. Returns the client."""
        if self._conn is not None:
            raise RuntimeError("already connected; an AsyncClient is one connection")
        self._conn = await AsyncConn.open(self.address, self._timeout, self._tls)
        try:
            self.server = await self.hello(self._token, self._name)
        except BaseException:
            await self._conn.close(say_quit=False)
            raise
        return self

    hello = _awaited(_ops.hello)
    ping = _awaited(_ops.ping)
    enqueue = _awaited(_ops.enqueue)
    enqueue_many = _awaited(_ops.enqueue_many)
    claim = _awaited(_ops.claim)
    stream = _awaited(_ops.stream)
    complete = _awaited(_ops.complete)
    fail = _awaited(_ops.fail)
    release = _awaited(_ops.release)
    extend = _awaited(_ops.extend)
    limit = _awaited(_ops.limit)
    weight = _awaited(_ops.weight)
    rate = _awaited(_ops.rate)
    cap = _awaited(_ops.cap)
    pause = _awaited(_ops.pause)
    resume = _awaited(_ops.resume)
    reassign = _awaited(_ops.reassign)
    drain = _awaited(_ops.drain)
    depth = _awaited(_ops.depth)
    reap = _awaited(_ops.reap)
    stats = _awaited(_ops.stats)
    groups = _awaited(_ops.groups)
    queues = _awaited(_ops.queues)
    forget = _awaited(_ops.forget)
    clients = _awaited(_ops.clients)
    client = _awaited(_ops.client)
    job = _awaited(_ops.job)
    dead_list = _awaited(_ops.dead_list)
    dead_retry = _awaited(_ops.dead_retry)
    dead_purge = _awaited(_ops.dead_purge)
    check = _awaited(_ops.check)
    peek = _awaited(_ops.peek)
    remove = _awaited(_ops.remove)
    request = _awaited(_ops.request)

    async def quit(self) -> None:
        """As :meth:`echomq.Client.quit`."""
        conn = self._live()
        try:
            await conn.call(_ops.quit())
        finally:
            await conn.close(say_quit=False)

    async def next_job(self, timeout: Optional[float] = None) -> Optional[LeasedJob]:
        """As :meth:`echomq.Client.next_job`."""
        return await self._live().next_job(timeout)

    async def jobs(self) -> AsyncIterator[LeasedJob]:
        """As :meth:`echomq.Client.jobs`: ``async for job in client.jobs()``."""
        while True:
            job = await self._live().next_job(None)
            if job is not None:
                yield job

    def pipeline(self, raise_on_error: bool = True) -> AsyncPipeline:
        """An :class:`AsyncPipeline` on this connection."""
        return AsyncPipeline(self, raise_on_error)

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (or was never made)."""
        return self._conn is None or self._conn.lost is not None

    @property
    def timeout(self) -> Optional[float]:
        """As :attr:`echomq.Client.timeout`."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: Optional[float]) -> None:
        self._timeout = value
        if self._conn is not None:
            self._conn.router.timeout = value

    async def close(self) -> None:
        """As :meth:`echomq.Client.close`."""
        if self._conn is not None:
            await self._conn.close()

    async def __aenter__(self) -> "AsyncClient":
        if self._conn is None:
            await self.connect()
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: "Optional[TracebackType]") -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<echomq.AsyncClient {self.address}{' closed' if self.closed else ''}>"
