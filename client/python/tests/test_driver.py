"""tests/conformance/driver_python.py, driven by hand through its
commands (tests/conformance/README.md, "The driver protocol"), every
effect checked over a connection of the test's own."""

from __future__ import annotations

import json
import os
import queue as queues
import subprocess
import sys
import threading
from typing import Any, Dict, Iterator, List

import pytest

from servers import DEADLINE, ROOT, Emqd

import echomq

DRIVER = os.path.join(ROOT, "tests", "conformance", "driver_python.py")


class Driver:
    """The driver as a child process: one command in, its result out;
    events seen on the way are kept in order."""

    def __init__(self, emqd: Emqd, token: str = "") -> None:
        env = dict(os.environ, EMQ_HOST="127.0.0.1", EMQ_PORT=str(emqd.port))
        env.pop("EMQ_TOKEN", None)
        if token:
            env["EMQ_TOKEN"] = token
        self.p = subprocess.Popen([sys.executable, DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.lines: "queues.Queue[bytes]" = queues.Queue()
        self.events: List[Dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def next_line(self) -> Dict[str, Any]:
        line = self.lines.get(timeout=DEADLINE)
        assert line, "the driver closed its stdout"
        obj: Dict[str, Any] = json.loads(line)
        return obj

    def __call__(self, do: str, **args: Any) -> Dict[str, Any]:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(dict(do=do, **args), ensure_ascii=False).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            obj = self.next_line()
            if "event" in obj:
                self.events.append(obj)
                continue
            return obj

    def ok(self, do: str, **args: Any) -> Dict[str, Any]:
        r = self(do, **args)
        assert r.get("ok") is True, (do, r)
        return r

    def event(self, kind: str, job: str) -> Dict[str, Any]:
        """Wait for an event (seen already, or to come)."""
        while True:
            for e in self.events:
                if e["event"] == kind and e.get("job") == job:
                    return e
            self.events.append(self.next_line())


@pytest.fixture
def driver(emqd: Emqd) -> Iterator[Driver]:
    d = Driver(emqd)
    yield d
    if d.p.poll() is None:
        d.p.kill()
        d.p.wait()


def test_commands(driver: Driver, other: echomq.Client, queue: str) -> None:
    d = driver
    assert d("ping")["error"] == "ECONN"  # not connected yet
    d.ok("connect", name="selftest")
    d.ok("ping")
    e = d.ok("enqueue", queue=queue, payload={"s": "ü😀"}, group="TENa")
    assert e["verdict"] == "enqueued" and e["job"].startswith("JOB")
    assert d.ok("enqueue", queue=queue, payload=1, job=e["job"])["verdict"] == "duplicate"
    many = d.ok("enqueue_many", queue=queue, group="TENb",
                items=[{"payload": 1, "job": "JOBm1"}, {"payload": 2, "group": "bad"}, {"payload": 3}])["results"]
    assert many[0] == {"job": "JOBm1", "verdict": "enqueued"} and many[1]["error"] == "EBRAND"
    assert many[1]["class"] == "BrandError" and many[2]["verdict"] == "enqueued"
    jobs = d.ok("claim", queue=queue, count=3, lease_ms=60000)["jobs"]
    assert [j["attempt"] for j in jobs] == [1, 1, 1] and jobs[0]["payload"] == {"s": "ü😀"}
    a, b, c = (j["job"] for j in jobs)
    stale = d("complete", queue=queue, job=a, lease="999999")
    assert (stale["ok"], stale["error"], stale["class"]) == (False, "ELEASE", "LeaseError")
    until = d.ok("extend", queue=queue, job=a, lease_ms=90000)["lease_until"]
    assert other.job(queue, a).lease_until == until
    assert d.ok("complete", queue=queue, job=a)["state"] == "completed"
    assert d.ok("fail", queue=queue, job=b, error="nope", retry_ms=0)["state"] == "pending"
    assert d.ok("release", queue=queue, job=c)["state"] == "pending"
    assert other.job(queue, c).attempts == 0
    assert d("complete", queue=queue, job="JOBnever")["error"] == "EUSAGE"
    assert d("nosuch")["error"] == "UNSUPPORTED"
    bad = d("claim", queue="bad queue")
    assert (bad["error"], bad["class"]) == ("EQUEUE", "QueueNameError")
    d.ok("close")
    d.ok("connect")
    assert other.stats(queue).active == 0  # what the first connection held was settled
    assert d.ok("quit") == {"ok": True}
    assert d.p.wait(DEADLINE) == 0


def test_stream_and_pipeline(driver: Driver, other: echomq.Client, queue: str) -> None:
    d = driver
    d.ok("connect")
    res = d.ok("pipeline", ops=[{"do": "enqueue", "queue": queue, "payload": i, "group": "TENa", "job": f"JOBq{i}"}
                                for i in range(3)] + [{"do": "claim", "queue": queue} for _ in range(3)])["results"]
    assert [r["job"] for r in res[:3]] == ["JOBq0", "JOBq1", "JOBq2"]
    assert [[j["job"] for j in r["jobs"]] for r in res[3:]] == [["JOBq0"], ["JOBq1"], ["JOBq2"]]
    res = d.ok("pipeline", ops=[{"do": "complete", "queue": queue, "job": "JOBq0"},
                                {"do": "fail", "queue": queue, "job": "JOBq1", "dead": True, "error": "x"},
                                {"do": "complete", "queue": queue, "job": "JOBq2", "lease": "1"}])["results"]
    assert res[0] == {"ok": True, "state": "completed"} and res[1] == {"ok": True, "state": "dead"}
    assert (res[2]["ok"], res[2]["error"]) == (False, "ELEASE")
    d.ok("stream", queue=queue, credit=1, flat=True)
    job = other.enqueue(queue, "pushed!").job
    ev = d.event("pushed", job)
    assert (ev["payload"], ev["attempt"]) == ("pushed!", 1)
    assert d.ok("complete", queue=queue, job=job)["state"] == "completed"
    d.ok("quit")


def test_worker(driver: Driver, other: echomq.Client, queue: str) -> None:
    d = driver
    ids = {name: other.enqueue(queue, name, group="TENa", job=f"JOB{name}").job
           for name in ("ok", "boom", "long", "hung")}
    d.ok("worker_start", queue=queue, concurrency=4, lease_ms=1000,
         behave={"JOBboom": "raise", "JOBlong": "sleep:1500", "JOBhung": "hang"}, default_behave="complete")
    assert d.event("completed", ids["ok"])
    failed = d.event("failed", ids["boom"])
    assert other.job(queue, ids["boom"]).error == failed["error"] == "RuntimeError: raised by JOBboom"
    d.event("started", ids["hung"])
    d.event("started", ids["long"])
    d.ok("worker_stop", grace_ms=2000)
    assert d.event("completed", ids["long"])  # past its 1 s lease, extended
    long, hung = other.job(queue, ids["long"]), other.job(queue, ids["hung"])
    assert (long.state, long.attempts) == ("completed", 1)
    assert (hung.state, hung.attempts) == ("pending", 0)  # released after the grace, attempt returned
    d.ok("quit")
    assert d.p.wait(DEADLINE) == 0


def test_wrong_token(redis: Any) -> None:
    e = Emqd(redis, "--token", "right")
    d = Driver(e, token="right")
    try:
        d.ok("connect")
        r = d("connect", token="wrong")
        assert (r["ok"], r["error"], r["class"]) == (False, "EAUTH", "AuthError")
        d.ok("quit")
    finally:
        d.p.kill()
        d.p.wait()
        e.stop()
