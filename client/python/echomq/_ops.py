"""Every op of PROTOCOL.md section 5, once: the request it sends and how
its reply is read.

Each function here builds a :class:`Call` (a request object and a reader
for its reply). :class:`~echomq.Client`, :class:`~echomq.AsyncClient` and
both pipelines bind these same functions as their methods (``bind_*`` in
their modules), so the signature, the docstring and the reading of each
op exist in one place, and the blocking and asyncio surfaces cannot drift
apart.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, TypeVar, Union

from .errors import EmqError, error_class, error_from_reply
from .types import (ClientInfo, ClientsPage, DeadJob, Enqueued, GroupsPage, Hello, Item, JobInfo, LeasedJob, LeaseRef, PeekPage,
                    QueuesPage, Stats)

T = TypeVar("T")
Reply = Dict[str, Any]

PROTOCOL = 1
"""The protocol version this client speaks."""


class Call(Generic[T]):
    """One request and the reader of its reply.

    ``parse(reply, received)`` turns a successful reply into the op's
    result (``received``: ``time.monotonic()`` when it was read);
    ``wait_ms`` is how long the daemon may hold the reply back on purpose
    (a parked ``claim``), added to the client's timeout."""

    __slots__ = ("request", "parse", "wait_ms")

    def __init__(self, request: Reply, parse: Callable[[Reply, float], T], wait_ms: int = 0) -> None:
        self.request = request
        self.parse = parse
        self.wait_ms = wait_ms

    def result(self, reply: Reply, received: float) -> T:
        """The op's result for its reply, or raise the reply's error."""
        if reply.get("ok") is not True:
            raise error_from_reply(reply)
        return self.parse(reply, received)


def _req(op: str, **args: Any) -> Reply:
    """A request object; arguments given as None are left out."""
    r: Reply = {"op": op}
    for k, v in args.items():
        if v is not None:
            r[k] = v
    return r


def _none(r: Reply, at: float) -> None:
    return None


def _field(name: str, kind: type) -> Callable[[Reply, float], Any]:
    """A reader of one field of the reply, of the given type."""

    def parse(r: Reply, at: float) -> Any:
        v = r.get(name)
        if not isinstance(v, kind):
            raise error_class("EPROTO")(f"reply field {name!r} missing or not {kind.__name__}", code="EPROTO")
        return v

    return parse


def _lease(job: LeaseRef) -> Dict[str, str]:
    return {"queue": job.queue, "job": job.job, "lease": job.lease}


# ---- Connection (5.1-5.3) ---------------------------------------------


def hello(token: Optional[str] = None, name: Optional[str] = None) -> Call[Hello]:
    """Say ``hello`` (5.1): authenticate with ``token`` (when the daemon
    has one) and name the client (``name``, informational). The client
    says it on connecting; call it again only to authenticate anew.
    Raises :class:`~echomq.AuthError` for a wrong token."""

    def parse(r: Reply, at: float) -> Hello:
        h = Hello.from_wire(r)
        if h.protocol != PROTOCOL:
            raise error_class("EPROTO")(f"the server speaks protocol {h.protocol}, not {PROTOCOL}", code="EPROTO")
        return h

    return Call(_req("hello", protocol=PROTOCOL, token=token, name=name), parse)


def ping() -> Call[None]:
    """``ping`` (5.2): a round trip that changes nothing (keeps an idle
    connection open)."""
    return Call(_req("ping"), _none)


def quit() -> Call[None]:
    """``quit`` (5.3): the daemon answers every request still owed, then
    closes the connection (releasing its leases, attempt counted, 6.4).
    The client is closed afterwards."""
    return Call(_req("quit"), _none)


# ---- Producing (5.4, 5.5) ---------------------------------------------


def enqueue(
    queue: str,
    payload: Any,
    *,
    job: Optional[str] = None,
    group: Optional[str] = None,
    delay_ms: Optional[int] = None,
    max_attempts: Optional[int] = None,
) -> Call[Enqueued]:
    """Admit one job (5.4), idempotently per ``job`` id.

    ``payload`` is any JSON value (``None`` is JSON ``null``). Without
    ``group`` the job is ungrouped: only ``flat`` claims and streams get
    it. Without ``job`` the daemon mints an id (``JOB`` + a ULID).
    ``delay_ms`` > 0 starts it delayed; ``max_attempts`` bounds its leases
    (0: unlimited; default the daemon's, 5). Returns the id and the
    verdict (``enqueued`` or ``duplicate``). An error raised after the
    arguments passed their checks carries ``.job``: retry with that id."""
    r = _req("enqueue", queue=queue, job=job, group=group, delay_ms=delay_ms, max_attempts=max_attempts)
    r["payload"] = payload  # kept when None: that is JSON null
    return Call(r, lambda r, at: Enqueued.from_wire(r))


def _item(it: Union[Item, Mapping[str, Any]]) -> Dict[str, Any]:
    return it.to_wire() if isinstance(it, Item) else dict(it)


def enqueue_many(
    queue: str,
    items: Iterable[Union[Item, Mapping[str, Any]]],
    *,
    group: Optional[str] = None,
) -> Call[List[Union[Enqueued, EmqError]]]:
    """Admit a batch (5.5): one independent enqueue per item, in order;
    not a transaction. Each item is an :class:`~echomq.Item` or a mapping
    with the same keys (``payload`` required). ``group`` is the default of
    items without one. Returns one result per item, in input order: an
    :class:`~echomq.Enqueued`, or the item's error as an
    :class:`~echomq.EmqError` instance (returned, not raised; ``.job`` set
    when the item passed its own checks). Raises only when the whole batch
    is refused (:class:`~echomq.EmptyBatchError`, ``LimitError``,
    ``BrandError`` for ``group``)."""

    def parse(r: Reply, at: float) -> List[Union[Enqueued, EmqError]]:
        res = r.get("results")
        if not isinstance(res, list):
            raise error_class("EPROTO")("reply field 'results' missing", code="EPROTO")
        out: List[Union[Enqueued, EmqError]] = []
        for x in res:
            x = x if isinstance(x, dict) else {}
            out.append(error_from_reply(x) if "error" in x else Enqueued.from_wire(x))
        return out

    return Call(_req("enqueue_many", queue=queue, jobs=[_item(i) for i in items], group=group), parse)


# ---- Consuming (5.6-5.11) ---------------------------------------------


def _jobs(r: Reply, at: float) -> List[LeasedJob]:
    js = r.get("jobs")
    if not isinstance(js, list):
        raise error_class("EPROTO")("reply field 'jobs' missing", code="EPROTO")
    return [LeasedJob.from_wire(j, at) for j in js if isinstance(j, dict)]


def claim(
    queue: str,
    count: Optional[int] = None,
    *,
    lease_ms: Optional[int] = None,
    wait_ms: Optional[int] = None,
    flat: bool = False,
) -> Call[List[LeasedJob]]:
    """Lease up to ``count`` jobs (5.6; default 1), each for ``lease_ms``
    (default the daemon's, 30000). ``flat=False`` takes grouped work only,
    in the ring's rotation order; ``flat=True`` ungrouped work only.
    ``wait_ms`` > 0 parks the claim until a job comes or the time passes
    (the client's timeout is extended by it); a parked claim holds back the
    replies to later requests on the same connection. Returns the leased
    jobs, possibly none."""
    return Call(
        _req("claim", queue=queue, count=count, lease_ms=lease_ms, wait_ms=wait_ms, flat=True if flat else None),
        _jobs,
        wait_ms or 0,
    )


def stream(queue: str, credit: int, *, lease_ms: Optional[int] = None, flat: bool = False) -> Call[None]:
    """Open (or re-credit) the connection's stream of ``queue`` (5.7): the
    daemon pushes leased jobs, never more than ``credit`` unsettled at
    once (6.8; 0 stops the pushes). ``flat`` chooses the ungrouped set
    instead of the grouped lanes; a connection has one stream of each.
    Read the pushed jobs with ``next_job`` and settle each one."""
    return Call(_req("stream", queue=queue, credit=credit, lease_ms=lease_ms, flat=True if flat else None), _none)


def complete(job: LeaseRef) -> Call[str]:
    """Settle a lease as done (5.8). Returns ``"completed"``. Safe to
    resend (answers ``completed`` again). Raises
    :class:`~echomq.LeaseError` when the token is not current (the lease
    ran out and the job went elsewhere) and ``NoJobError`` when the row is
    gone."""
    return Call(_req("complete", **_lease(job)), _field("state", str))


def fail(job: LeaseRef, error: Optional[str] = None, *, retry_ms: Optional[int] = None, dead: bool = False) -> Call[str]:
    """Settle a lease as failed (5.9), recording ``error`` on the row.
    Without ``retry_ms`` the job is retried after the backoff (1 s x
    2^(attempt-1), at most 1 h); ``retry_ms`` > 0 after that long, 0 at
    once; ``dead=True`` dead-letters it now. Returns the new state:
    ``delayed``, ``pending`` or ``dead`` (also when its attempts are
    spent)."""
    return Call(
        _req("fail", **_lease(job), error=error, retry_ms=retry_ms, dead=True if dead else None),
        _field("state", str),
    )


def release(job: LeaseRef, error: Optional[str] = None) -> Call[str]:
    """Give a lease back unfinished (5.10): the job is pending again at
    once and its attempt is **returned**, so a job given back (a worker
    stopping) is never dead-lettered by it. ``error`` is recorded on the
    row (default ``"released by the worker"``). Returns ``"pending"``."""
    return Call(_req("release", **_lease(job), error=error), _field("state", str))


def extend(job: LeaseRef, lease_ms: int) -> Call[int]:
    """Heartbeat a lease (5.11): its deadline becomes now + ``lease_ms``
    (server clock). Returns the new ``lease_until`` and, for a
    :class:`~echomq.LeasedJob`, stores it in ``job.lease_until``."""

    def parse(r: Reply, at: float) -> int:
        until: int = _field("lease_until", int)(r, at)
        if isinstance(job, LeasedJob):
            job.lease_until = until
        return until

    return Call(_req("extend", **_lease(job), lease_ms=lease_ms), parse)


# ---- Tenant levers (5.12-5.18) ----------------------------------------


def limit(queue: str, group: Optional[str], max: Optional[int]) -> Call[None]:
    """Set one group's concurrency ceiling (5.12): at most ``max`` of its
    jobs active at once; ``None`` (or 0) removes the ceiling. ``group``
    ``None`` sets the queue-wide default instead (6.14), as for ``weight``
    and ``rate``: it applies to every group without its own."""
    return Call(_req("limit", queue=queue, group=group, max=max or 0), _none)


def weight(queue: str, group: Optional[str], weight: Optional[int]) -> Call[None]:
    """Set one group's weight (5.26): its lane is served ``weight`` jobs
    (1..1000) per turn of the ring; ``None`` removes it (the queue
    default, else 1, applies). ``group`` ``None``: the queue default."""
    r = _req("weight", queue=queue, group=group)
    r["weight"] = weight  # None goes on the wire as null: the reset
    return Call(r, _none)


def rate(queue: str, group: Optional[str], max: Optional[int], per_ms: Optional[int] = None) -> Call[None]:
    """Hold one group to at most ``max`` leases per ``per_ms`` ms (5.27),
    on the backend's clock; ``max`` ``None`` removes the rate. ``group``
    ``None``: the queue default."""
    r = _req("rate", queue=queue, group=group, per_ms=per_ms if max is not None else None)
    r["max"] = max  # None goes on the wire as null: the removal
    return Call(r, _none)


def cap(queue: str, group: Optional[str], max_pending: Optional[int]) -> Call[None]:
    """Bound one group's lane to ``max_pending`` pending + delayed jobs
    (5.32, 6.15): an enqueue into a lane that holds them raises
    ``FullError`` with ``cap`` and ``group`` set, and writes nothing.
    ``None`` removes the cap; ``group`` ``None``: the queue default."""
    r = _req("cap", queue=queue, group=group)
    r["max_pending"] = max_pending  # None goes on the wire as null: the removal
    return Call(r, _none)


def pause(queue: str, group: str) -> Call[bool]:
    """Pause one group (5.13): its lane leaves the ring; enqueues and
    in-flight jobs are untouched. Returns whether it was not paused
    before."""
    return Call(_req("pause", queue=queue, group=group), _field("changed", bool))


def resume(queue: str, group: str) -> Call[bool]:
    """Resume one group (5.14). Returns whether it was paused."""
    return Call(_req("resume", queue=queue, group=group), _field("changed", bool))


def reassign(queue: str, job: str, group: str) -> Call[Optional[str]]:
    """Move one pending job to ``group``'s lane (5.15). Returns the group
    it came from, ``None`` when it was ungrouped. Raises
    :class:`~echomq.StateError` unless the job is pending."""

    def parse(r: Reply, at: float) -> Optional[str]:
        v = r.get("from")
        return v if isinstance(v, str) else None

    return Call(_req("reassign", queue=queue, job=job, group=group), parse)


def drain(queue: str, group: Optional[str] = None) -> Call[int]:
    """Delete one group's pending backlog, or without ``group`` the flat
    (ungrouped) one (5.16). Returns how many jobs were deleted."""
    return Call(_req("drain", queue=queue, group=group), _field("drained", int))


def depth(queue: str, group: Optional[str] = None) -> Call[int]:
    """Pending jobs in ``group``'s lane, or without ``group`` in the flat
    set (5.17)."""
    return Call(_req("depth", queue=queue, group=group), _field("depth", int))


def reap(queue: str, group: Optional[str] = None) -> Call[int]:
    """Recover expired leases now (5.18), of one group or queue-wide.
    Returns how many."""
    return Call(_req("reap", queue=queue, group=group), _field("reaped", int))


# ---- Looking inside (5.19-5.23) ---------------------------------------


def stats(queue: str) -> Call[Stats]:
    """Queue-wide counts (5.19)."""
    return Call(_req("stats", queue=queue), lambda r, at: Stats.from_wire(r))


def groups(queue: str, cursor: Optional[str] = None, count: Optional[int] = None) -> Call[GroupsPage]:
    """One page of the group registry (5.20), from ``cursor`` (the
    previous page's; default the start). ``count`` is a page-size hint.
    The last page has ``cursor`` ``"0"``."""
    return Call(_req("groups", queue=queue, cursor=cursor, count=count), lambda r, at: GroupsPage.from_wire(r))


def queues(cursor: Optional[str] = None, count: Optional[int] = None) -> Call[QueuesPage]:
    """One page of the queue registry with each queue's totals (5.28),
    from ``cursor`` (the previous page's; default the start). ``count``
    is a page-size hint. The last page has ``cursor`` ``"0"``."""
    return Call(_req("queues", cursor=cursor, count=count), lambda r, at: QueuesPage.from_wire(r))


def forget(queue: str) -> Call[None]:
    """Remove a queue that holds no job from the registry, the store and
    the daemon (5.30); raises :class:`~echomq.StateError` while it has
    jobs, or while the daemon's connections use it."""
    return Call(_req("forget", queue=queue), _none)


def clients(cursor: Optional[str] = None, count: Optional[int] = None) -> Call[ClientsPage]:
    """One page of the daemon's connections, newest first (5.29), from
    ``cursor`` (the previous page's; default the newest)."""
    return Call(_req("clients", cursor=cursor, count=count), lambda r, at: ClientsPage.from_wire(r))


def client(id: int) -> Call[ClientInfo]:
    """One connection by id with the leases it holds (5.29); raises
    :class:`~echomq.NotFoundError` when the daemon has none of that id."""

    def parse(r: Reply, at: float) -> ClientInfo:
        c = r.get("client")
        if not isinstance(c, dict):
            raise error_class("EPROTO")("reply field 'client' missing", code="EPROTO")
        return ClientInfo.from_wire(c)

    return Call(_req("clients", id=id), parse)


def job(queue: str, job: str) -> Call[JobInfo]:
    """One job's row (5.21). Raises :class:`~echomq.NoJobError` when it
    has none."""

    def parse(r: Reply, at: float) -> JobInfo:
        j = r.get("job")
        if not isinstance(j, dict):
            raise error_class("EPROTO")("reply field 'job' missing", code="EPROTO")
        return JobInfo.from_wire(j)

    return Call(_req("job", queue=queue, job=job), parse)


def dead_list(queue: str, job: Optional[str] = None, limit: Optional[int] = None) -> Call[List[DeadJob]]:
    """The dead-letter set (5.22 ``list``), oldest death first: the
    ``limit`` oldest (default 100), or only ``job``."""

    def parse(r: Reply, at: float) -> List[DeadJob]:
        js = r.get("jobs")
        return [DeadJob.from_wire(j) for j in js if isinstance(j, dict)] if isinstance(js, list) else []

    return Call(_req("dead", queue=queue, action="list", job=job, limit=limit), parse)


def dead_retry(queue: str, job: Optional[str] = None, limit: Optional[int] = None) -> Call[int]:
    """Send dead jobs back to work (5.22 ``retry``), attempts reset to 0:
    the ``limit`` oldest, or only ``job``. Returns how many moved."""
    return Call(_req("dead", queue=queue, action="retry", job=job, limit=limit), _field("count", int))


def dead_purge(queue: str, job: Optional[str] = None, limit: Optional[int] = None) -> Call[int]:
    """Delete dead jobs (5.22 ``purge``): the ``limit`` oldest, or only
    ``job``. Returns how many."""
    return Call(_req("dead", queue=queue, action="purge", job=job, limit=limit), _field("count", int))


def check(queue: str) -> Call[List[str]]:
    """Verify the queue's store invariants (5.23; admin and tests: it
    scans every row). Returns the violations, empty when all hold."""
    return Call(_req("check", queue=queue), _field("violations", list))


def peek(queue: str, group: Optional[str] = None, state: Optional[str] = None,
         cursor: Optional[str] = None, count: Optional[int] = None) -> Call[PeekPage]:
    """One page of jobs in service order with their rows (5.24): a lane
    (``group``), the flat set, or with ``state`` ``"active"`` (also per
    group), ``"delayed"`` or ``"dead"``. ``cursor`` is the previous page's;
    the last page has ``cursor`` ``None``. Changes nothing."""
    return Call(_req("peek", queue=queue, group=group, state=state, cursor=cursor, count=count),
                lambda r, at: PeekPage.from_wire(r))


def remove(queue: str, job: str) -> Call[str]:
    """Delete one pending or delayed job (5.25). Returns the state it was
    in; raises :class:`~echomq.StateError` for a job in any other state."""
    return Call(_req("remove", queue=queue, job=job), _field("state", str))


def request(op: str, **args: Any) -> Call[Reply]:
    """Send any op with the given arguments (``None`` ones left out) and
    return the whole reply object: the escape hatch for what the typed
    calls do not cover. Error replies still raise."""
    return Call(_req(op, **args), lambda r, at: r)


OPS: List[Callable[..., Call[Any]]] = [
    hello, ping, quit, enqueue, enqueue_many, claim, stream, complete, fail, release, extend,
    limit, pause, resume, reassign, drain, depth, reap, stats, groups, job,
    dead_list, dead_retry, dead_purge, check, peek, remove, weight, rate, request,
]
"""Every op, in the order of PROTOCOL.md section 5 (and ``request``)."""
