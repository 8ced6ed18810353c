"""One connection to emqd: the line framing, the matching of replies to
requests, and the pushes, for the blocking and the asyncio client.

:class:`Router` is the bookkeeping both share. Every request gets a
``ref`` (a counter) and a :class:`Slot`; slots wait in wire order, since
the daemon answers strictly in request order (PROTOCOL.md 2.2). A reply
goes to the slot its ``ref`` names; the only reply without one,
``ETOOBIG`` for an over-long line, goes to the oldest slot, whose place it
takes. A push (2.3: a line with ``push``, never ``ok``) is not a reply: a
``"job"`` push becomes a :class:`~echomq.LeasedJob` for ``next_job``;
kinds this client does not know are skipped, as the protocol asks.

A request that times out is abandoned, not forgotten: its slot stays in
line and its late reply is dropped, so the connection stays usable.
Because replies come in order, a request's deadline is never earlier than
that of a request sent before it (a parked ``claim`` holds back every
reply after it).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import socket
import ssl as _ssl
import struct
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple, TypeVar

from . import _ops
from ._ops import Call
from .errors import ConnectionLost, EmqError, Timeout
from .types import LeasedJob

T = TypeVar("T")
log = logging.getLogger("echomq")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7711
READ_LIMIT = 1 << 28  # the longest line read: far above any reply emqd sends
# How long close() waits for quit's reply.
QUIT_WAIT = 2.0


class Address:
    """Where emqd listens: TCP ``host``:``port``, or a unix socket."""

    __slots__ = ("host", "port", "unix", "tls")

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, unix: Optional[str] = None, tls: bool = False) -> None:
        self.host = host
        self.port = port
        self.unix = unix
        self.tls = tls  # "tls://HOST:PORT": speak TLS (the client's ssl context, or the default)

    def __str__(self) -> str:
        if self.unix is not None:
            return f"unix:{self.unix}"
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        return "tls://" + where if self.tls else where


def parse_addr(addr: str) -> Address:
    """Read ``HOST:PORT``, ``[V6]:PORT``, ``PORT``, ``tls://HOST:PORT`` or
    ``unix:PATH`` (a path starting with ``/`` too), as emqctl does with
    ``$EMQ_ADDR``."""
    if addr.startswith("tls://"):
        a = parse_addr(addr[6:])
        if a.unix is not None or ":" not in addr[6:]:
            raise ValueError(f"bad address {addr!r}: expected tls://HOST:PORT")
        a.tls = True
        return a
    if addr.startswith("unix:"):
        return Address(unix=addr[5:])
    if addr.startswith("/"):
        return Address(unix=addr)
    host, port = DEFAULT_HOST, addr
    if addr.startswith("["):
        end = addr.find("]:")
        if end < 0:
            raise ValueError(f"bad address {addr!r}: expected [V6]:PORT")
        host, port = addr[1:end], addr[end + 2 :]
    elif ":" in addr:
        host, _, port = addr.rpartition(":")
        if ":" in host:
            raise ValueError(f"bad address {addr!r}: an IPv6 literal needs brackets")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad address {addr!r}: expected HOST:PORT")
    return Address(host or DEFAULT_HOST, int(port))


def resolve(host: Optional[str], port: Optional[int], unix: Optional[str]) -> Address:
    """The address a client was given; what is not given comes from
    ``$EMQ_ADDR``, else 127.0.0.1:7711."""
    if unix is not None:
        return Address(unix=unix)
    if host is None and port is None:
        env = os.environ.get("EMQ_ADDR", "")
        return parse_addr(env) if env else Address()
    return Address(host if host is not None else DEFAULT_HOST, port if port is not None else DEFAULT_PORT)


def resolve_token(token: Optional[str]) -> Optional[str]:
    """The token given, else ``$EMQ_TOKEN`` (unset or empty: none)."""
    if token is not None:
        return token
    return os.environ.get("EMQ_TOKEN") or None


def encode(request: Dict[str, Any], ref: int) -> bytes:
    """One request line: compact JSON in UTF-8, ``ref`` added, ``\\n``
    ended. Raises ValueError / TypeError for what JSON cannot carry (NaN,
    lone surrogates, objects of other types)."""
    r = dict(request)
    r["ref"] = ref
    return json.dumps(r, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


class Slot:
    """A request awaiting its reply."""

    __slots__ = ("call", "ref", "deadline", "reply", "received", "error", "abandoned", "waiter")

    def __init__(self, call: Call[Any], ref: int, deadline: float) -> None:
        self.call = call
        self.ref = ref
        self.deadline = deadline
        self.reply: Optional[Dict[str, Any]] = None
        self.received = 0.0
        self.error: Optional[EmqError] = None
        self.abandoned = False
        self.waiter: Any = None  # the asyncio future, for the async connection

    @property
    def done(self) -> bool:
        """Answered, or failed with the connection."""
        return self.reply is not None or self.error is not None

    def outcome(self) -> Any:
        """The op's result, or raise its error."""
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.call.result(self.reply, self.received)


class Router:
    """The refs, the slots in wire order and the sorting of lines (see the
    module's docstring). Not locked: each connection serialises its use."""

    def __init__(self, timeout: Optional[float]) -> None:
        self.timeout = timeout
        self.pending: "collections.OrderedDict[int, Slot]" = collections.OrderedDict()
        self.next_ref = 1
        self.lost: Optional[ConnectionLost] = None

    def register(self, calls: Sequence[Call[Any]]) -> Tuple[bytes, List[Slot]]:
        """The lines for calls and their slots, in order (all encoded
        before any is registered, so a call JSON cannot carry registers
        nothing)."""
        if self.lost is not None:
            raise self.lost
        lines = [encode(c.request, self.next_ref + i) for i, c in enumerate(calls)]
        now = time.monotonic()
        horizon = next(reversed(self.pending.values())).deadline if self.pending else 0.0
        slots = []
        for c in calls:
            own = now + self.timeout + c.wait_ms / 1000.0 if self.timeout is not None else float("inf")
            horizon = max(own, horizon)
            s = Slot(c, self.next_ref, horizon)
            self.pending[s.ref] = s
            self.next_ref += 1
            slots.append(s)
        return b"".join(lines), slots

    def on_line(self, line: bytes, now: float) -> "Tuple[Optional[Slot], Optional[LeasedJob]]":
        """Sort one line: the slot it answers (taken out of line), or the
        job it pushes, or neither. Raises ConnectionLost for a line that is
        not JSON (the stream cannot be trusted after it)."""
        line = line.rstrip(b"\r\n")
        if not line:
            return None, None
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ConnectionLost(f"the server sent a line that is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise ConnectionLost("the server sent a line that is not a JSON object")
        if "push" in obj:
            if obj.get("push") == "job":
                return None, LeasedJob.from_wire(obj, now)
            log.debug("skipping a push of kind %r", obj.get("push"))
            return None, None
        ref = obj.get("ref")
        if isinstance(ref, int) and ref in self.pending:
            slot = self.pending.pop(ref)
        elif "ref" not in obj and self.pending:
            slot = self.pending.popitem(last=False)[1]  # ETOOBIG: in its place
        else:
            log.warning("dropping a reply that matches no request (ref %r)", ref)
            return None, None
        slot.reply, slot.received = obj, now
        return slot, None

    def fail_all(self, exc: ConnectionLost) -> List[Slot]:
        """Mark the connection lost; every slot waiting fails with exc."""
        if self.lost is None:
            self.lost = exc
        slots = list(self.pending.values())
        self.pending.clear()
        for s in slots:
            s.error = exc
        return slots


def timed_out(slot: Slot) -> Timeout:
    """The error of a slot whose deadline passed; its reply will be dropped."""
    slot.abandoned = True
    op = slot.call.request.get("op")
    return Timeout(f"no reply to {op!r} in time")


def tls_context(addr: Address, ctx: Optional[_ssl.SSLContext]) -> Optional[_ssl.SSLContext]:
    """The TLS context to connect with: the one given, else the default
    (the system's CAs, the host name checked) for a ``tls://`` address,
    else none (plain)."""
    if ctx is not None and addr.unix is not None:
        raise ValueError("TLS is for TCP: a unix socket is plain")
    if ctx is None and addr.tls:
        return _ssl.create_default_context()
    return ctx


class _TlsSocket:
    """TLS on a connected socket through two ssl.MemoryBIOs. The blocking
    client's reader thread receives while callers send, and an SSLSocket
    must not be used by two threads at once: here one lock guards the
    SSLObject, the socket is read by the reader alone and written under
    wlock. The rest of the socket's methods are the socket's."""

    def __init__(self, sock: socket.socket, ctx: _ssl.SSLContext, server_hostname: str) -> None:
        self.sock = sock
        self.inc, self.out = _ssl.MemoryBIO(), _ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=server_hostname)
        self.lock = threading.Lock()
        self.wlock = threading.Lock()
        while True:  # the handshake, within the socket's connect timeout
            try:
                self.obj.do_handshake()
                break
            except _ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                data = self.sock.recv(1 << 16)
                if not data:
                    raise ConnectionResetError("the server closed the connection during the TLS handshake")
                self.inc.write(data)
        self.sock.sendall(self.out.read())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)

    def recv(self, n: int) -> bytes:
        while True:
            with self.lock:
                try:
                    return self.obj.read(n)
                except _ssl.SSLWantReadError:
                    pass
                except _ssl.SSLZeroReturnError:
                    return b""
                pending = self.out.pending
            # TLS records to send from reading (rare): sent unless a
            # caller is writing, which sends them with its own.
            if pending and self.wlock.acquire(blocking=False):
                try:
                    with self.lock:
                        data = self.out.read()
                    self.sock.sendall(data)
                finally:
                    self.wlock.release()
            data = self.sock.recv(n)
            if not data:
                return b""
            with self.lock:
                self.inc.write(data)

    def sendall(self, data: bytes) -> None:
        with self.wlock:
            with self.lock:
                self.obj.write(data)
                records = self.out.read()
            self.sock.sendall(records)


class SyncConn:
    """The blocking client's connection: a reader thread sorts the lines;
    callers in any thread wait on one condition."""

    def __init__(self, addr: Address, timeout: Optional[float], tls: Optional[_ssl.SSLContext] = None) -> None:
        self.addr = addr
        sock: Any
        try:
            if addr.unix is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                sock.connect(addr.unix)
            else:
                sock = socket.create_connection((addr.host, addr.port), timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls is not None:
                    sock = _TlsSocket(sock, tls, addr.host)
        except OSError as e:
            raise ConnectionLost(f"cannot connect to {addr}: {e.strerror or e}") from None
        sock.settimeout(None)  # the reader blocks; replies are timed by their slots
        if timeout is not None:  # a server that stops reading for that long is gone
            sec = max(timeout, 0.001)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(sec), int(sec % 1 * 1e6)))
        self.sock = sock
        self.router = Router(timeout)
        self.cond = threading.Condition()
        self.wlock = threading.Lock()
        self.pushes: Deque[LeasedJob] = collections.deque()
        self.reader = threading.Thread(target=self._read, name=f"echomq-reader-{addr}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        buf = bytearray()
        scan = 0
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionLost(f"the connection to {self.addr} was closed")
                buf += chunk
                start = 0
                while True:
                    nl = buf.find(b"\n", scan)
                    if nl < 0:
                        break
                    line = bytes(buf[start : nl + 1])
                    start = scan = nl + 1
                    with self.cond:
                        slot, job = self.router.on_line(line, time.monotonic())
                        if job is not None:
                            self.pushes.append(job)
                        if slot is not None or job is not None:
                            self.cond.notify_all()
                del buf[:start]
                scan = len(buf)
                if scan > READ_LIMIT:
                    raise ConnectionLost("the server sent a line longer than the client reads")
        except ConnectionLost as e:
            self._lose(e)
        except OSError as e:
            self._lose(ConnectionLost(f"the connection to {self.addr} broke: {e.strerror or e}"))

    def _lose(self, exc: ConnectionLost) -> None:
        with self.cond:
            self.router.fail_all(exc)
            self.cond.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @property
    def lost(self) -> Optional[ConnectionLost]:
        """Why the connection is gone, or None while it works."""
        return self.router.lost

    def send(self, calls: Sequence[Call[Any]]) -> List[Slot]:
        """Write the calls' lines (all at once) and return their slots."""
        with self.wlock:
            with self.cond:
                data, slots = self.router.register(calls)
            try:
                self.sock.sendall(data)
            except OSError as e:
                self._lose(ConnectionLost(f"the connection to {self.addr} broke: {e.strerror or e}"))
        return slots

    def wait(self, slot: Slot) -> Any:
        """The result of a slot's call, once answered (or raise)."""
        with self.cond:
            while not slot.done:
                left = slot.deadline - time.monotonic()
                if left <= 0:
                    raise timed_out(slot)
                self.cond.wait(min(left, 3600.0))
        return slot.outcome()

    def call(self, call: Call[T]) -> T:
        """Send one call and wait for its result."""
        result: T = self.wait(self.send([call])[0])
        return result

    def next_job(self, timeout: Optional[float]) -> Optional[LeasedJob]:
        """The oldest pushed job, waiting up to timeout (None: forever);
        None when none came in time. Raises ConnectionLost once the
        connection is gone and every job pushed before was taken."""
        end = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while not self.pushes:
                if self.router.lost is not None:
                    raise self.router.lost
                left = 3600.0 if end is None else end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 3600.0))
            return self.pushes.popleft()

    def close(self, say_quit: bool = True) -> None:
        """Say quit (waiting a little for its reply), then close."""
        if say_quit and self.router.lost is None:
            try:
                slots = self.send([_QUIT])
                slots[0].deadline = min(slots[0].deadline, time.monotonic() + QUIT_WAIT)
                self.wait(slots[0])
            except (EmqError, OSError):
                pass
        self._lose(ConnectionLost("the client closed the connection"))
        self.sock.close()
        if threading.current_thread() is not self.reader:
            self.reader.join(QUIT_WAIT)


_QUIT = _ops.quit()


class AsyncConn:
    """The asyncio client's connection: a reader task sorts the lines and
    resolves each slot's future."""

    def __init__(self, addr: Address, timeout: Optional[float], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.addr = addr
        self.router = Router(timeout)
        self.reader = reader
        self.writer = writer
        self.drain_lock = asyncio.Lock()
        self.pushes: "asyncio.Queue[Optional[LeasedJob]]" = asyncio.Queue()
        self.task = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, addr: Address, timeout: Optional[float], tls: Optional[_ssl.SSLContext] = None) -> "AsyncConn":
        """Connect to addr (with TLS when tls is a context)."""
        try:
            if addr.unix is not None:
                conn = asyncio.open_unix_connection(addr.unix, limit=READ_LIMIT)
            elif tls is not None:
                conn = asyncio.open_connection(addr.host, addr.port, limit=READ_LIMIT, ssl=tls, server_hostname=addr.host)
            else:
                conn = asyncio.open_connection(addr.host, addr.port, limit=READ_LIMIT)
            reader, writer = await asyncio.wait_for(conn, timeout)
        except (OSError, asyncio.TimeoutError) as e:
            why = "timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or str(e))
            raise ConnectionLost(f"cannot connect to {addr}: {why}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(addr, timeout, reader, writer)

    async def _read(self) -> None:
        try:
            while True:
                try:
                    line = await self.reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    raise ConnectionLost(f"the connection to {self.addr} was closed") from None
                except asyncio.LimitOverrunError:
                    raise ConnectionLost("the server sent a line longer than the client reads") from None
                slot, job = self.router.on_line(line, time.monotonic())
                if job is not None:
                    self.pushes.put_nowait(job)
                if slot is not None and slot.waiter is not None and not slot.waiter.done():
                    slot.waiter.set_result(None)
        except ConnectionLost as e:
            self._lose(e)
        except OSError as e:
            self._lose(ConnectionLost(f"the connection to {self.addr} broke: {e.strerror or e}"))
        except asyncio.CancelledError:
            self._lose(ConnectionLost("the client closed the connection"))
            raise

    def _lose(self, exc: ConnectionLost) -> None:
        for s in self.router.fail_all(exc):
            if s.waiter is not None and not s.waiter.done():
                s.waiter.set_result(None)
        self.pushes.put_nowait(None)
        self.writer.close()

    @property
    def lost(self) -> Optional[ConnectionLost]:
        """Why the connection is gone, or None while it works."""
        return self.router.lost

    async def send(self, calls: Sequence[Call[Any]]) -> List[Slot]:
        """Write the calls' lines (all at once) and return their slots."""
        data, slots = self.router.register(calls)
        loop = asyncio.get_running_loop()
        for s in slots:
            s.waiter = loop.create_future()
        self.writer.write(data)
        try:
            async with self.drain_lock:
                await self.writer.drain()
        except OSError as e:
            self._lose(ConnectionLost(f"the connection to {self.addr} broke: {e.strerror or e}"))
        return slots

    async def wait(self, slot: Slot) -> Any:
        """The result of a slot's call, once answered (or raise)."""
        if not slot.done:
            left = slot.deadline - time.monotonic()
            try:
                await asyncio.wait_for(asyncio.shield(slot.waiter), None if left == float("inf") else max(left, 0))
            except asyncio.TimeoutError:
                raise timed_out(slot) from None
        return slot.outcome()

    async def call(self, call: Call[T]) -> T:
        """Send one call and wait for its result."""
        result: T = await self.wait((await self.send([call]))[0])
        return result

    async def next_job(self, timeout: Optional[float]) -> Optional[LeasedJob]:
        """As SyncConn.next_job."""
        if self.router.lost is not None and self.pushes.empty():
            raise self.router.lost
        if not self.pushes.empty():
            job = self.pushes.get_nowait()
        elif timeout is None:
            job = await self.pushes.get()  # cancelling this loses nothing
        elif timeout <= 0:
            return None
        else:
            try:
                job = await asyncio.wait_for(self.pushes.get(), timeout)
            except asyncio.TimeoutError:
                return None
        if job is None:
            self.pushes.put_nowait(None)  # for the next caller
            assert self.router.lost is not None
            raise self.router.lost
        return job

    async def close(self, say_quit: bool = True) -> None:
        """Say quit (waiting a little for its reply), then close."""
        if say_quit and self.router.lost is None:
            try:
                slots = await self.send([_QUIT])
                slots[0].deadline = min(slots[0].deadline, time.monotonic() + QUIT_WAIT)
                await self.wait(slots[0])
            except (EmqError, OSError):
                pass
        if self.router.lost is None:
            self._lose(ConnectionLost("the client closed the connection"))
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass
        try:
            await self.writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass

