#!/usr/bin/env python3
"""driver_python: the conformance suite's driver for the Python client.

Reads commands as JSON lines on stdin and answers one result line per
command on stdout, with events between them (tests/conformance/README.md,
"The driver protocol"). Each command is one call of echomq's public API
(Client, Worker) and a translation of its result; jobs leased through a
command are kept by id, as the client's own LeasedJob objects, for the
settles that follow. Logs go to stderr.

Environment: EMQ_HOST, EMQ_PORT (where emqd listens), EMQ_TOKEN (the
token, when the check sets one). The client is imported from
client/python of this tree.
"""

import dataclasses
import json
import os
import ssl
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import echomq  # noqa: E402

_out = threading.Lock()


def emit(obj):
    """Write one line on stdout (results and events never interleave)."""
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    with _out:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


class Usage(Exception):
    """A command the driver cannot read (EUSAGE)."""


def failure(e):
    """The error part of a result for exception e."""
    if isinstance(e, echomq.EmqError):
        return {"error": e.code, "class": type(e).__name__, "message": e.message}
    if isinstance(e, (Usage, ValueError, TypeError, KeyError)):
        return {"error": "EUSAGE", "class": type(e).__name__, "message": str(e)}
    return {"error": "EUSAGE", "class": type(e).__name__, "message": "".join(traceback.format_exception_only(type(e), e)).strip()}


def leased(j):
    return {"job": j.job, "group": j.group, "attempt": j.attempt, "payload": j.payload, "lease": j.lease}


class Driver:
    def __init__(self):
        self.host = os.environ.get("EMQ_HOST", "127.0.0.1")
        self.port = int(os.environ.get("EMQ_PORT", "7711"))
        # EMQ_TLS_CA (run.py --tls): speak TLS, verifying emqd with that CA.
        ca = os.environ.get("EMQ_TLS_CA")
        self.tls = ssl.create_default_context(cafile=ca) if ca else None
        self.client = None
        self.jobs = {}  # job id -> the client's LeasedJob
        self.jobs_lock = threading.Lock()
        self.worker = None
        self.worker_thread = None
        self.worker_error = None
        self.pusher = None
        self.quitting = threading.Event()  # ends the "hang" handlers (daemon threads) at quit

    # ---- helpers -------------------------------------------------------

    def need_client(self):
        if self.client is None:
            raise echomq.ConnectionLost("not connected: send connect first")
        return self.client

    def keep(self, jobs):
        with self.jobs_lock:
            for j in jobs:
                self.jobs[j.job] = j

    def kept(self, cmd):
        """The kept LeasedJob of cmd["job"]; with "lease", a copy carrying it."""
        with self.jobs_lock:
            j = self.jobs.get(cmd.get("job"))
        if j is None:
            raise Usage(f"no job {cmd.get('job')!r} was leased through this driver")
        return dataclasses.replace(j, lease=cmd["lease"]) if "lease" in cmd else j

    def pump(self, client):
        """Turn the jobs the client's streams push into events."""
        while True:
            try:
                j = client.next_job()
            except echomq.ConnectionLost:
                return
            if j is not None:
                self.keep([j])
                emit(dict(event="pushed", **leased(j)))

    # ---- commands (one public API call each) ---------------------------

    def do_connect(self, c):
        token = c.get("token", os.environ.get("EMQ_TOKEN") or None)
        self.do_close(c)
        self.client = echomq.Client(self.host, self.port, token=token, name=c.get("name"), ssl=self.tls)
        return {}

    def do_close(self, c):
        if self.client is not None:
            self.client.close()
            self.client = None
        with self.jobs_lock:
            self.jobs.clear()
        return {}

    def do_ping(self, c):
        self.need_client().ping()
        return {}

    def do_enqueue(self, c):
        r = self.need_client().enqueue(c["queue"], c.get("payload"), job=c.get("job"), group=c.get("group"),
                                       delay_ms=c.get("delay_ms"), max_attempts=c.get("max_attempts"))
        return {"job": r.job, "verdict": r.verdict}

    def do_enqueue_many(self, c):
        items = [echomq.Item(it.get("payload"), job=it.get("job"), group=it.get("group"),
                             delay_ms=it.get("delay_ms"), max_attempts=it.get("max_attempts")) for it in c["items"]]
        res = self.need_client().enqueue_many(c["queue"], items, group=c.get("group"))
        return {"results": [failure(r) if isinstance(r, echomq.EmqError) else {"job": r.job, "verdict": r.verdict}
                            for r in res]}

    def do_claim(self, c):
        jobs = self.need_client().claim(c["queue"], c.get("count"), lease_ms=c.get("lease_ms"),
                                        wait_ms=c.get("wait_ms"), flat=bool(c.get("flat", False)))
        self.keep(jobs)
        return {"jobs": [leased(j) for j in jobs]}

    def do_complete(self, c):
        return {"state": self.need_client().complete(self.kept(c))}

    def do_fail(self, c):
        return {"state": self.need_client().fail(self.kept(c), c.get("error"), retry_ms=c.get("retry_ms"),
                                                 dead=bool(c.get("dead", False)))}

    def do_release(self, c):
        return {"state": self.need_client().release(self.kept(c), c.get("error"))}

    def do_extend(self, c):
        return {"lease_until": self.need_client().extend(self.kept(c), c["lease_ms"])}

    def do_stream(self, c):
        client = self.need_client()
        client.stream(c["queue"], c["credit"], lease_ms=c.get("lease_ms"), flat=bool(c.get("flat", False)))
        if self.pusher is None or self.pusher[0] is not client:
            t = threading.Thread(target=self.pump, args=(client,), daemon=True)
            self.pusher = (client, t)
            t.start()
        return {}

    def do_pipeline(self, c):
        client = self.need_client()
        p = client.pipeline(raise_on_error=False)
        claims = []
        for op in c["ops"]:
            name = op.get("do")
            if name == "enqueue":
                p.enqueue(op["queue"], op.get("payload"), job=op.get("job"), group=op.get("group"),
                          delay_ms=op.get("delay_ms"), max_attempts=op.get("max_attempts"))
            elif name == "claim":
                claims.append(p.claim(op["queue"], op.get("count"), lease_ms=op.get("lease_ms"),
                                      wait_ms=op.get("wait_ms"), flat=bool(op.get("flat", False))))
            elif name == "complete":
                p.complete(self.kept(op))
            elif name == "fail":
                p.fail(self.kept(op), op.get("error"), retry_ms=op.get("retry_ms"), dead=bool(op.get("dead", False)))
            else:
                raise Usage(f"pipeline: {name!r} is not enqueue, claim, complete or fail")
        results = p.execute()
        out = []
        for op, r in zip(c["ops"], results):
            if isinstance(r, echomq.EmqError):
                out.append(dict(ok=False, **failure(r)))
            elif op["do"] == "enqueue":
                out.append({"ok": True, "job": r.job, "verdict": r.verdict})
            elif op["do"] == "claim":
                self.keep(r)
                out.append({"ok": True, "jobs": [leased(j) for j in r]})
            else:
                out.append({"ok": True, "state": r})
        return {"results": out}

    def do_worker_start(self, c):
        if self.worker is not None:
            raise Usage("a worker is running: worker_stop first")
        behave = dict(c.get("behave") or {})
        default = c.get("default_behave", "complete")

        def handler(job):
            emit({"event": "started", "job": job.job, "attempt": job.attempt})
            how = behave.get(job.job, default)
            if how == "raise":
                raise RuntimeError(f"raised by {job.job}")
            if how.startswith("sleep:"):
                time.sleep(int(how[6:]) / 1000.0)
            elif how == "until_stop":
                # Finishes once worker_stop has asked the worker to stop, so
                # its slot frees while the worker is stopping, however slow
                # the machine (check 12 needs no race against a timer).
                w.wait_for_stop()
            elif how == "hang":
                self.quitting.wait()  # past any grace: the worker releases the job
            elif how != "complete":
                raise RuntimeError(f"driver: unknown behaviour {how!r}")

        w = echomq.Worker(
            c["queue"], handler, concurrency=c.get("concurrency", 1), flat=bool(c.get("flat", False)),
            lease_ms=c.get("lease_ms", 30000), host=self.host, port=self.port, ssl=self.tls,
            token=os.environ.get("EMQ_TOKEN") or None, name="driver_python worker",
            on_complete=lambda j: emit({"event": "completed", "job": j.job}),
            on_fail=lambda j, error, state: emit({"event": "failed", "job": j.job, "error": error}))

        def run():
            try:
                w.run(install_signals=False)
            except BaseException as e:  # reported by worker_stop
                self.worker_error = e
                print(f"driver_python: the worker ended: {e!r}", file=sys.stderr)

        self.worker, self.worker_error = w, None
        self.worker_thread = threading.Thread(target=run, name="worker", daemon=True)
        self.worker_thread.start()
        return {}

    def do_worker_stop(self, c):
        if self.worker is None:
            raise Usage("no worker is running")
        w, t = self.worker, self.worker_thread
        w.stop(c.get("grace_ms", 0) / 1000.0)
        t.join()
        self.worker = self.worker_thread = None
        if self.worker_error is not None:
            raise self.worker_error
        return {}

    def do_quit(self, c):
        self.quitting.set()
        if self.worker is not None:
            self.worker.stop(0)
        self.do_close(c)
        return {}

    # ---- the loop ------------------------------------------------------

    def handle(self, line):
        try:
            cmd = json.loads(line)
            if not isinstance(cmd, dict) or not isinstance(cmd.get("do"), str):
                raise Usage("a command is a JSON object with a string \"do\"")
        except ValueError as e:
            emit({"ok": False, "error": "EUSAGE", "class": "ValueError", "message": f"bad command line: {e}"})
            return True
        name = cmd["do"]
        fn = getattr(self, "do_" + name, None)
        if fn is None:
            emit({"ok": False, "error": "UNSUPPORTED", "class": None, "message": f"no command {name!r}"})
            return True
        try:
            emit(dict(ok=True, **fn(cmd)))
        except Exception as e:
            emit(dict(ok=False, **failure(e)))
        return name != "quit"


def main():
    d = Driver()
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace")
        if line.strip() and not d.handle(line):
            break
    else:
        d.do_quit({})
    return 0


if __name__ == "__main__":
    sys.exit(main())
