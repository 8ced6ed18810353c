"""The typed results of echomq's calls (PROTOCOL.md sections 5 and 6.7).

Fields keep their wire names. Times ending in ``_ms`` are milliseconds on
the backend's clock; ``received`` is this process' ``time.monotonic()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

__all__ = [
    "Hello",
    "Enqueued",
    "Item",
    "LeaseRef",
    "LeasedJob",
    "Stats",
    "GroupInfo",
    "GroupsPage",
    "QueueInfo",
    "QueuesPage",
    "StreamInfo",
    "HeldLease",
    "ClientInfo",
    "ClientsPage",
    "JobInfo",
    "DeadJob",
]


def _int(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    """An integer field of a reply (default when absent)."""
    v = d.get(key, default)
    return v if isinstance(v, int) else default


def _opt_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _opt_str(d: Mapping[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class Hello:
    """The reply to ``hello`` (5.1)."""

    server: str
    """Always ``"emqd"``."""
    version: str
    """The daemon's version."""
    protocol: int
    """The protocol version, 1."""

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "Hello":
        """Read a ``hello`` reply."""
        return cls(str(r.get("server", "")), str(r.get("version", "")), _int(r, "protocol"))


@dataclass(frozen=True)
class Enqueued:
    """One admitted job: the reply to ``enqueue`` (5.4) or one
    ``enqueue_many`` item's result (5.5)."""

    job: str
    """The job id, given or minted."""
    verdict: str
    """``"enqueued"`` (a new row) or ``"duplicate"`` (a row with this id
    existed; nothing was changed)."""

    @property
    def duplicate(self) -> bool:
        """True when the verdict is ``"duplicate"``."""
        return self.verdict == "duplicate"

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "Enqueued":
        """Read an ``enqueue`` reply or item result."""
        return cls(str(r.get("job", "")), str(r.get("verdict", "")))


@dataclass(frozen=True)
class Item:
    """One item of an ``enqueue_many`` batch (5.5). ``None`` fields take
    the daemon's defaults (and the batch's ``group``)."""

    payload: Any
    """Any JSON value."""
    job: Optional[str] = None
    """The job id (idempotency key); ``None``: the daemon mints one."""
    group: Optional[str] = None
    """The group id; ``None``: the batch's group, else ungrouped."""
    delay_ms: Optional[int] = None
    """Start delayed by this much."""
    max_attempts: Optional[int] = None
    """Leases before the job is dead (0: unlimited)."""

    def to_wire(self) -> Dict[str, Any]:
        """The item as the protocol spells it."""
        d: Dict[str, Any] = {"payload": self.payload}
        for k in ("job", "group", "delay_ms", "max_attempts"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return d


@dataclass
class LeaseRef:
    """What a settle (``complete``, ``fail``, ``release``, ``extend``)
    needs: the queue, the job id and the lease token. A :class:`LeasedJob`
    is one; make one by hand to settle a lease known only by its token."""

    queue: str
    """The queue."""
    job: str
    """The job id."""
    lease: str
    """The fencing token, sent back exactly (opaque)."""


@dataclass
class LeasedJob(LeaseRef):
    """A leased job (6.7), from ``claim`` or a ``stream`` push."""

    group: Optional[str] = None
    """The group; ``None`` for an ungrouped (flat) job."""
    attempt: int = 1
    """Leases so far, this one included (1 on first delivery)."""
    lease_until: int = 0
    """The lease deadline, ms on the backend's clock (advisory); ``extend``
    through the client updates it."""
    payload: Any = None
    """The payload, decoded."""
    received: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the client read the job: a worker's own
    lease timer starts here (the protocol's advice, 6.1)."""

    @classmethod
    def from_wire(cls, j: Mapping[str, Any], received: float) -> "LeasedJob":
        """Read a leased job of a ``claim`` reply or a ``"job"`` push."""
        return cls(
            queue=str(j.get("queue", "")),
            job=str(j.get("job", "")),
            lease=str(j.get("lease", "")),
            group=_opt_str(j, "group"),
            attempt=_int(j, "attempt", 1),
            lease_until=_int(j, "lease_until"),
            payload=j.get("payload"),
            received=received,
        )


@dataclass(frozen=True)
class Stats:
    """Queue-wide counts, the reply to ``stats`` (5.19)."""

    pending: int
    """Pending jobs in every lane and the flat set."""
    active: int
    """Leased jobs."""
    delayed: int
    """Jobs waiting for their time (delay or backoff)."""
    dead: int
    """Dead-lettered jobs."""
    ring: int
    """Lanes serviceable now."""
    groups: int
    """Registered groups."""
    paused: int
    """Paused groups."""
    flat: int
    """Pending ungrouped jobs."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The queue-wide defaults (6.14): ``limit``, ``weight``, ``rate``
    (``{"max", "per_ms"}``), ``cap``, each ``None`` when not set; empty from a daemon
    without defaults."""

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "Stats":
        """Read a ``stats`` reply."""
        d = r.get("defaults")
        n = [_int(r, k) for k in ("pending", "active", "delayed", "dead", "ring", "groups", "paused", "flat")]
        return cls(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], dict(d) if isinstance(d, dict) else {})


@dataclass(frozen=True)
class GroupInfo:
    """One group of a ``groups`` page (5.20)."""

    group: str
    """The group id."""
    depth: int
    """Pending jobs in its lane."""
    active: int
    """Its leased jobs."""
    limit: Optional[int]
    """Its ceiling; ``None`` without one."""
    paused: bool
    """Whether it is paused."""
    weight: int = 1
    """Its jobs per turn of the ring (1 unless set; 1 from a daemon without weights)."""
    rate_max: Optional[int] = None
    """Its rate: at most this many leases per ``rate_per_ms`` ms; ``None`` without one."""
    rate_per_ms: Optional[int] = None
    """The period of its rate, ms; ``None`` without one."""
    throttled: bool = False
    """Whether it is off the ring until its rate allows a lease."""
    limit_from: Optional[str] = None
    """Where ``limit`` comes from: ``"group"``, ``"queue"`` (the default) or ``None``."""
    weight_from: Optional[str] = None
    """Where ``weight`` comes from, as ``limit_from``."""
    rate_from: Optional[str] = None
    """Where the rate comes from, as ``limit_from``."""
    delayed: int = 0
    """Its delayed jobs: with ``depth``, what its cap counts."""
    cap: Optional[int] = None
    """The most pending + delayed jobs its lane admits (6.15); ``None`` without one."""
    cap_from: Optional[str] = None
    """Where ``cap`` comes from, as ``limit_from``."""

    @classmethod
    def from_wire(cls, g: Mapping[str, Any]) -> "GroupInfo":
        """Read one entry of a ``groups`` reply."""
        r = g.get("rate")
        rate: Mapping[str, Any] = r if isinstance(r, dict) else {}
        return cls(str(g.get("group", "")), _int(g, "depth"), _int(g, "active"), _opt_int(g, "limit"), g.get("paused") is True,
                   _int(g, "weight", 1), _opt_int(rate, "max"), _opt_int(rate, "per_ms"), g.get("throttled") is True,
                   _opt_str(g, "limit_from"), _opt_str(g, "weight_from"), _opt_str(g, "rate_from"),
                   _int(g, "delayed"), _opt_int(g, "cap"), _opt_str(g, "cap_from"))


@dataclass(frozen=True)
class GroupsPage:
    """One page of the group registry (5.20)."""

    groups: List[GroupInfo]
    """The groups of this page."""
    cursor: str
    """Pass it back for the next page; ``"0"``: this was the last."""

    @property
    def done(self) -> bool:
        """True on the last page."""
        return self.cursor == "0"

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "GroupsPage":
        """Read a ``groups`` reply."""
        gs = r.get("groups")
        return cls([GroupInfo.from_wire(g) for g in gs] if isinstance(gs, list) else [], str(r.get("cursor", "0")))


@dataclass(frozen=True)
class QueueInfo:
    """One queue of a ``queues`` page (5.28); the counts mean what
    :class:`Stats`' do."""

    queue: str
    """The queue name."""
    pending: int
    """Pending jobs in every lane and the flat set."""
    active: int
    """Leased jobs."""
    delayed: int
    """Jobs waiting for their time."""
    dead: int
    """Dead-lettered jobs."""
    groups: int
    """Registered groups."""
    paused: int
    """Paused groups."""

    @classmethod
    def from_wire(cls, q: Mapping[str, Any]) -> "QueueInfo":
        """Read one entry of a ``queues`` reply."""
        return cls(str(q.get("queue", "")), *(_int(q, k) for k in ("pending", "active", "delayed", "dead", "groups", "paused")))


@dataclass(frozen=True)
class QueuesPage:
    """One page of the queue registry (5.28)."""

    queues: List[QueueInfo]
    """The queues of this page (in no order)."""
    cursor: str
    """Pass it back for the next page; ``"0"``: this was the last."""

    @property
    def done(self) -> bool:
        """True on the last page."""
        return self.cursor == "0"

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "QueuesPage":
        """Read a ``queues`` reply."""
        qs = r.get("queues")
        return cls([QueueInfo.from_wire(q) for q in qs] if isinstance(qs, list) else [], str(r.get("cursor", "0")))


@dataclass(frozen=True)
class StreamInfo:
    """One stream of a connection (5.29)."""

    queue: str
    """Its queue."""
    flat: bool
    """It takes ungrouped jobs (else grouped ones)."""
    credit: int
    """Its credit, as last set."""
    outstanding: int
    """Jobs pushed on it and not settled yet."""


@dataclass(frozen=True)
class HeldLease:
    """One lease a connection holds (5.29): never its token."""

    queue: str
    """Its queue."""
    job: str
    """The job id."""
    group: Optional[str]
    """The job's group; ``None`` when ungrouped."""
    deadline_ms: int
    """Its ``lease_until``, ms on the backend clock."""


@dataclass(frozen=True)
class ClientInfo:
    """One connection of the daemon, a row of ``clients`` (5.29)."""

    id: int
    """The daemon's number for the connection."""
    addr: str
    """The peer's address."""
    name: Optional[str]
    """The name its ``hello`` gave; ``None`` without one."""
    age_ms: int
    """Since it was accepted."""
    idle_ms: int
    """Since its last request."""
    self: bool
    """It is the connection that asked."""
    authed: bool
    """It may use every op."""
    streams: List[StreamInfo]
    """Its streams."""
    parked: int
    """Its parked claims."""
    leases: int
    """The jobs leased to it."""
    held: Optional[List[HeldLease]] = None
    """The leases it holds: only from :meth:`~echomq.Client.client`."""

    @classmethod
    def from_wire(cls, c: Mapping[str, Any]) -> "ClientInfo":
        """Read one row of a ``clients`` reply."""
        ss = c.get("streams")
        hs = c.get("held")
        streams = [StreamInfo(str(s.get("queue", "")), s.get("flat") is True, _int(s, "credit"), _int(s, "outstanding"))
                   for s in ss] if isinstance(ss, list) else []
        held = [HeldLease(str(h.get("queue", "")), str(h.get("job", "")), _opt_str(h, "group"), _int(h, "deadline_ms"))
                for h in hs] if isinstance(hs, list) else None
        return cls(_int(c, "id"), str(c.get("addr", "")), _opt_str(c, "name"), _int(c, "age_ms"), _int(c, "idle_ms"),
                   c.get("self") is True, c.get("authed") is True, streams, _int(c, "parked"), _int(c, "leases"), held)


@dataclass(frozen=True)
class ClientsPage:
    """One page of the daemon's connections, newest first (5.29)."""

    clients: List[ClientInfo]
    """The connections of this page."""
    cursor: str
    """Pass it back for the next page; ``"0"``: this was the last."""

    @property
    def done(self) -> bool:
        """True on the last page."""
        return self.cursor == "0"

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "ClientsPage":
        """Read a ``clients`` reply."""
        cs = r.get("clients")
        return cls([ClientInfo.from_wire(c) for c in cs] if isinstance(cs, list) else [], str(r.get("cursor", "0")))


@dataclass(frozen=True)
class JobInfo:
    """One job's row, the reply to ``job`` (5.21). Fields the row does not
    have are ``None`` (``raw`` has the row exactly as sent)."""

    job: str
    """The job id."""
    state: str
    """``pending``, ``active``, ``delayed``, ``dead`` or ``completed``."""
    group: Optional[str]
    """The group; ``None`` when ungrouped."""
    payload: Any
    """The payload; ``None`` once completed (see :attr:`has_payload`)."""
    attempts: int
    """Leases so far (a ``release`` gives one back)."""
    max_attempts: int
    """Its attempt bound (0: unlimited)."""
    created_ms: Optional[int]
    """When it was enqueued."""
    ready_ms: Optional[int]
    """When it last became claimable other than by its enqueue."""
    lease_until: Optional[int]
    """Its lease deadline, while active."""
    error: Optional[str]
    """The last failure's reason."""
    finished_ms: Optional[int]
    """When it completed or died."""
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The row as the daemon sent it."""

    @property
    def has_payload(self) -> bool:
        """Whether the row still holds a payload (a completed one does not)."""
        return "payload" in self.raw

    @classmethod
    def from_wire(cls, j: Mapping[str, Any]) -> "JobInfo":
        """Read the ``job`` object of a ``job`` reply."""
        return cls(
            job=str(j.get("job", "")),
            state=str(j.get("state", "")),
            group=_opt_str(j, "group"),
            payload=j.get("payload"),
            attempts=_int(j, "attempts"),
            max_attempts=_int(j, "max_attempts"),
            created_ms=_opt_int(j, "created_ms"),
            ready_ms=_opt_int(j, "ready_ms"),
            lease_until=_opt_int(j, "lease_until"),
            error=_opt_str(j, "error"),
            finished_ms=_opt_int(j, "finished_ms"),
            raw=dict(j),
        )


@dataclass(frozen=True)
class PeekPage:
    """One page of ``peek`` (5.24): jobs in service order with their rows."""

    jobs: List[JobInfo]
    """The jobs of this page, in the order they would be served."""
    cursor: Optional[str]
    """Pass it back for the next page; ``None``: no job follows."""

    @property
    def done(self) -> bool:
        """True on the last page."""
        return self.cursor is None

    @classmethod
    def from_wire(cls, r: Mapping[str, Any]) -> "PeekPage":
        """Read a ``peek`` reply."""
        js = r.get("jobs")
        cur = r.get("cursor")
        return cls([JobInfo.from_wire(j) for j in js] if isinstance(js, list) else [],
                   cur if isinstance(cur, str) else None)


@dataclass(frozen=True)
class DeadJob:
    """One entry of a ``dead`` ``list`` (5.22)."""

    job: str
    """The job id."""
    group: Optional[str]
    """The group; ``None`` when ungrouped."""
    attempts: int
    """Leases it had."""
    error: str
    """Why it died (the last reason)."""
    died_ms: int
    """When it died."""

    @classmethod
    def from_wire(cls, j: Mapping[str, Any]) -> "DeadJob":
        """Read one entry of a ``dead`` ``list`` reply."""
        return cls(str(j.get("job", "")), _opt_str(j, "group"), _int(j, "attempts"), str(j.get("error", "")), _int(j, "died_ms"))
