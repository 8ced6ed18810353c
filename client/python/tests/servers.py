"""Real servers for the tests: a throwaway redis-server and emqd, each on
a free loopback port, killed by the pid this module started.

``$REDIS_SERVER`` names redis-server (default: the one on PATH) and
``$EMQD`` the daemon (default: the meson build's, ``build/daemon/emqd``
at the top of the tree)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEADLINE = 20.0  # seconds anything the tests wait for may take: generous


def wait_until(cond: Callable[[], object], what: str, deadline: float = DEADLINE) -> object:
    """Poll cond until it is truthy (returned) or the deadline passes (fail)."""
    end = time.monotonic() + deadline
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pdeathsig() -> None:
    """In the child: die with the test process, never outlive it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def emqd_binary() -> str:
    """The emqd under test."""
    path = os.environ.get("EMQD") or os.path.join(ROOT, "build", "daemon", "emqd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no emqd at {path}: build it (meson) or set $EMQD")
    return path


def _answers(port: int, probe: bytes, want: bytes) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1.0) as s:
            s.sendall(probe)
            got = b""
            while b"\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    return False
                got += chunk
            return want in got
    except OSError:
        return False


class Redis:
    """A redis-server of the test's own (no persistence)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="emq-pytest-redis-")
        bin_ = os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or "redis-server"
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [bin_, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--logfile", os.path.join(self.dir, "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_pdeathsig)
            # Ready when the server that answers on the port is this one.
            mine = f"process_id:{self.proc.pid}".encode()
            ok = wait_until(lambda: self.proc.poll() is not None or _answers(self.port, b"INFO server\r\n", mine),
                            "redis-server to start")
            if ok and self.proc.poll() is None:
                return
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """Kill it (by its pid) and remove its directory."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Emqd:
    """An emqd on a free loopback port, against ``redis``."""

    # What a plain ping gets from it once it is up (a tls-only daemon
    # answers its refusal instead).
    ready_reply = b'"ok":true'

    def __init__(self, redis: Redis, *extra: str) -> None:
        self.redis = redis
        self.extra: List[str] = list(extra)
        self.port = 0
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = tempfile.NamedTemporaryFile(prefix="emq-pytest-emqd-", suffix=".log", delete=False)
        for _ in range(5):
            self.port = free_port()
            if self.start():
                return
        raise RuntimeError(f"emqd did not start; its log: {self.log.name}")

    @property
    def addr(self) -> str:
        """``127.0.0.1:PORT``, as ``$EMQ_ADDR`` takes it."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> bool:
        """(Re)start on self.port; False if it exited (the port was taken)."""
        argv = [emqd_binary(), "--redis", f"redis://127.0.0.1:{self.redis.port}", "--listen", self.addr,
                "--log-level", "warn", *self.extra]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=_pdeathsig)
        proc = self.proc
        wait_until(lambda: proc.poll() is not None or _answers(self.port, b'{"op":"ping"}\n', self.ready_reply),
                   "emqd to start")
        return proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send sig to the emqd this started, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=DEADLINE)

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Kill it and start it again on the same port."""
        self.kill(sig)
        wait_until(self.start, "emqd to start again on its port")

    def stop(self) -> None:
        """Stop it for good (and remove its log)."""
        self.kill(signal.SIGTERM)
        self.log.close()
        os.unlink(self.log.name)


def env_with(emqd: Emqd, **more: str) -> dict:
    """The environment a child process of a test runs with: this client on
    its path, ``$EMQ_ADDR`` naming emqd."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "client", "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["EMQ_ADDR"] = emqd.addr
    env.pop("EMQ_TOKEN", None)
    env.update(more)
    return env


PYTHON = sys.executable
