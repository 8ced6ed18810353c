#!/usr/bin/env python3
"""run.py: the client conformance suite (tests/conformance/README.md).

  run.py --client c|python|node [--only 1,5,...] [-v]
  run.py --client NAME --driver CMD ARGS...   any driver (CMD and its arguments)

Starts a real redis-server ($REDIS_SERVER, else from PATH) and emqd ($EMQD,
else build/daemon/emqd) on free loopback ports, drives the client through
its driver (one JSON command per line on its stdin, one result per line
on its stdout), and checks every effect again over its own raw TCP
connection to emqd. Prints TAP 13, one line per check, then which checks
passed. Python 3 standard library only.
"""
import argparse
import ctypes
import json
import os
import re
import select
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Every wait has a deadline this long (seconds), far beyond what any step
# takes on a loaded machine; nothing is timed, only awaited.
WAIT = float(os.environ.get("EMQ_CONFORMANCE_WAIT", "20"))
POLL = 0.05  # how often the runner re-reads the store while it waits

# Commands a driver may answer UNSUPPORTED (the check is then skipped);
# any other command must be implemented.
OPTIONAL = {"pipeline", "worker_start", "worker_stop"}

MINTED = re.compile(r"^JOB[0-9A-HJKMNP-TV-Z]{26}$")

# ---------------------------------------------------------------- helpers

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def _die_with_parent():
    """In a child before exec: die when the runner dies (PR_SET_PDEATHSIG),
    so a runner killed by a test harness leaves nothing behind."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def canon(value):
    """A JSON value's compact text, keys in their order: what "byte-exact"
    compares (numbers in payloads are integers, so their text is exact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def short(value, limit=400):
    text = value if isinstance(value, str) else canon(value)
    return text if len(text) <= limit else text[:limit] + "...(%d chars)" % len(text)


def tail(path, lines=12):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Fail(Exception):
    """The check failed: what was expected and what was found."""


class Skip(Exception):
    """The driver answered UNSUPPORTED to an optional command."""


class DriverError(Exception):
    """The driver broke the driver protocol: it died, hung or wrote garbage."""


class Bail(Exception):
    """The runner cannot go on (redis-server or emqd does not start)."""


def deadline(seconds=WAIT):
    return time.monotonic() + seconds


# ---------------------------------------------------------------- redis

class Resp:
    """A minimal RESP client: enough for PING, INFO, FLUSHALL and TIME."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise ConnectionError("redis: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("redis closed the connection")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError("redis: unexpected reply %r" % line)

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._read()

    def time_ms(self):
        sec, usec = self.call("TIME")
        return int(sec) * 1000 + int(usec) // 1000


class RedisServer:
    def __init__(self, workdir):
        self.bin = os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or "redis-server"
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir)
        self.proc = None
        self.port = 0

    def start(self):
        # The free port can be taken between the probe and redis' bind: retry.
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [self.bin, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                 "--save", "", "--appendonly", "no", "--daemonize", "no",
                 "--logfile", os.path.join(self.dir, "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                preexec_fn=_die_with_parent)
            end = deadline()
            while time.monotonic() < end and self.proc.poll() is None:
                try:
                    r = Resp(self.port)
                    info = r.call("INFO", "server")
                    r.close()
                    # The answer must come from our own child, not a server
                    # that had the port first.
                    if ("process_id:%d\r" % self.proc.pid) in info:
                        return
                except OSError:
                    pass
                time.sleep(POLL)
            self.stop()
        raise Bail("redis-server (%s) does not start; its log: %s"
                   % (self.bin, tail(os.path.join(self.dir, "redis.log"))))

    def flushall(self):
        r = Resp(self.port)
        try:
            r.call("FLUSHALL")
        finally:
            r.close()

    def time_ms(self):
        r = Resp(self.port)
        try:
            return r.time_ms()
        finally:
            r.close()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# ---------------------------------------------------------------- emqd

class Conn:
    """The runner's own connection to emqd: raw TCP, the protocol by hand."""

    def __init__(self, port, token=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.ref = 0
        self.port = port
        if token is not None:
            self.ok("hello", protocol=1, token=token, name="conformance-runner")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def call(self, op, **args):
        self.ref += 1
        req = dict(op=op, ref=self.ref, **args)
        self.sock.sendall((canon(req) + "\n").encode())
        end = deadline()
        while True:
            while b"\n" not in self.buf:
                self.sock.settimeout(max(0.01, end - time.monotonic()))
                try:
                    chunk = self.sock.recv(1 << 20)
                except socket.timeout:
                    raise Fail("the runner's own %s got no reply from emqd in %g s" % (op, WAIT))
                if not chunk:
                    raise Fail("emqd closed the runner's own connection (during %s)" % op)
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            reply = json.loads(line.decode("utf-8"))
            if "push" in reply:
                continue
            if reply.get("ref") != self.ref:
                raise Fail("emqd answered the runner out of order: %s" % short(reply))
            return reply

    def ok(self, op, **args):
        r = self.call(op, **args)
        if r.get("ok") is not True:
            raise Fail("the runner's own %s failed: %s" % (op, short(r)))
        return r

    # The reads the checks use.
    def row(self, queue, job):
        r = self.call("job", queue=queue, job=job)
        if r.get("ok") is not True:
            if r.get("error") == "ENOJOB":
                return None
            raise Fail("the runner's own job %s failed: %s" % (job, short(r)))
        return r["job"]

    def stats(self, queue):
        return self.ok("stats", queue=queue)

    def enqueue(self, queue, payload, job, group=None, **args):
        if group is not None:
            args["group"] = group
        r = self.ok("enqueue", queue=queue, payload=payload, job=job, **args)
        if r.get("verdict") != "enqueued":
            raise Fail("the runner's own enqueue of %s: %s" % (job, short(r)))
        return r

    def check_clean(self, queue):
        v = self.ok("check", queue=queue)["violations"]
        if v:
            raise Fail("check of %s found violations: %s" % (queue, short(v)))


class Emqd:
    def __init__(self, workdir, redis):
        self.bin = os.environ.get("EMQD") or os.path.join(ROOT, "build", "daemon", "emqd")
        self.log = os.path.join(workdir, "emqd.log")
        self.redis = redis
        self.proc = None
        self.port = 0
        self.args = []
        self.base = []  # flags of every start (run.py --tls: the certificate)
        self.token = None

    def start(self, token=None, args=(), same_port=False):
        self.token, self.args = token, list(args)
        for _ in range(1 if same_port else 5):
            if not same_port:
                self.port = free_port()
            argv = [self.bin, "--listen", "127.0.0.1:%d" % self.port,
                    "--redis", "redis://127.0.0.1:%d" % self.redis.port] + self.base + self.args
            if token is not None:
                argv += ["--token", token]
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=log,
                                             preexec_fn=_die_with_parent)
            end = deadline()
            while time.monotonic() < end and self.proc.poll() is None:
                try:
                    c = Conn(self.port, token)
                    ok = c.call("depth", queue="conformance").get("ok") is True
                    c.close()
                    if ok:
                        return
                except (OSError, Fail):
                    pass
                time.sleep(POLL)
            self.stop()
        raise Bail("emqd (%s) does not start; its log: %s" % (self.bin, tail(self.log)))

    def stop(self):
        """SIGTERM (a clean stop: it answers what is owed, releases leases)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        self.start(self.token, self.args, same_port=True)

    def conn(self):
        return Conn(self.port, self.token)


# ---------------------------------------------------------------- driver

class Driver:
    """One driver process and the driver protocol (README.md)."""

    def __init__(self, argv, env, workdir, number, verbose):
        self.argv = argv
        self.err_path = os.path.join(workdir, "driver-%d.stderr" % number)
        self.verbose = verbose
        self.cond = threading.Condition()
        self.results = []
        self.events = []
        self.taken = 0  # events before this index have been consumed
        self.outstanding = 0
        self.broken = None  # why the driver's output is unusable
        self.eof = False
        self.last = None  # (command, result) of the last command
        with open(self.err_path, "wb") as err:
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=err, env=env,
                                             preexec_fn=_die_with_parent)
            except OSError as e:
                raise DriverError("cannot start the driver %s: %s" % (argv, e))
        os.set_blocking(self.proc.stdin.fileno(), False)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            problem, obj = None, None
            try:
                obj = json.loads(raw.decode("utf-8"))
            except ValueError:
                problem = "the driver wrote a line that is not JSON: %s" % short(
                    raw.decode("utf-8", "replace").rstrip("\n"), 200)
            if problem is None and not isinstance(obj, dict):
                problem = "the driver wrote a JSON line that is not an object: %s" % short(obj)
            with self.cond:
                if problem is None and "event" in obj:
                    if self.verbose:
                        print("# driver event: %s" % short(obj, 200), file=sys.stderr)
                    self.events.append(obj)
                elif problem is None and isinstance(obj.get("ok"), bool):
                    if self.outstanding == 0:
                        problem = "the driver wrote a result no command asked for: %s" % short(obj)
                    else:
                        self.outstanding -= 1
                        self.results.append(obj)
                elif problem is None:
                    problem = "the driver wrote a line that is neither a result nor an event: %s" \
                        % short(obj)
                if problem is not None and self.broken is None:
                    self.broken = problem
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def stderr_tail(self):
        return tail(self.err_path)

    def _status(self):
        try:
            rc = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return "still running"
        return "exit status %d" % rc if rc >= 0 else "killed by signal %d" % -rc

    def send(self, cmd):
        """Write one command; its result is collected by result()."""
        if self.broken:
            raise DriverError(self.broken)
        line = (canon(cmd) + "\n").encode()
        if self.verbose:
            print("# driver <- %s" % short(cmd, 200), file=sys.stderr)
        with self.cond:
            self.outstanding += 1
        fd, end = self.proc.stdin.fileno(), deadline()
        while line:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                raise DriverError("the driver did not read the command %s within %g s (hung)"
                                  % (cmd.get("do"), WAIT))
            try:
                _, w, _ = select.select([], [fd], [], left)
                if w:
                    line = line[os.write(fd, line):]
            except BrokenPipeError:
                raise DriverError("the driver died before reading the command %s (%s)"
                                  % (cmd.get("do"), self._status()))

    def result(self, cmd, wait=WAIT):
        end = deadline(wait)
        with self.cond:
            while not self.results and not self.broken and not self.eof:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            if self.results:
                r = self.results.pop(0)
                self.last = (cmd, r)
                if self.verbose:
                    print("# driver -> %s" % short(r, 200), file=sys.stderr)
                return r
            broken, eof = self.broken, self.eof
        if broken:
            self.kill()
            raise DriverError(broken)
        if eof:
            raise DriverError("the driver exited without answering %s (%s)"
                              % (short(cmd, 200), self._status()))
        self.kill()
        raise DriverError("the driver did not answer %s within %g s (hung)" % (short(cmd, 200), wait))

    def do(self, cmd, wait=WAIT):
        self.send(cmd)
        return self.result(cmd, wait)

    def wait_event(self, pred, what, wait=WAIT):
        """The first event not yet consumed that pred accepts (consumed)."""
        end = deadline(wait)
        with self.cond:
            while True:
                for i in range(self.taken, len(self.events)):
                    if pred(self.events[i]):
                        ev = self.events.pop(i)
                        self.events.insert(self.taken, ev)
                        self.taken += 1
                        return ev
                if self.broken or self.eof:
                    break
                left = end - time.monotonic()
                if left <= 0:
                    raise Fail("no driver event %s within %g s; events so far: %s"
                               % (what, wait, short(self.events, 600)))
                self.cond.wait(left)
            broken = self.broken
        if broken:
            raise DriverError(broken)
        raise DriverError("the driver exited while the runner waited for an event %s (%s)"
                          % (what, self._status()))

    def seen(self, pred):
        with self.cond:
            return [e for e in self.events if pred(e)]

    def quit(self):
        """quit, then the driver must exit 0."""
        if self.proc.poll() is None and not self.broken:
            cmd = {"do": "quit"}
            self.send(cmd)
            r = self.result(cmd)
            if r.get("ok") is not True:
                raise Fail("quit answered %s" % short(r))
        try:
            rc = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise DriverError("the driver did not exit within %g s of quit" % WAIT)
        if rc != 0 and not self.broken:
            raise DriverError("the driver exited with status %d after quit" % rc)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


# ---------------------------------------------------------------- checks

CHECKS = []


def check(number, name, token=False, emqd_args=()):
    def register(fn):
        CHECKS.append((number, name, token, tuple(emqd_args), fn))
        return fn
    return register


def load_classes():
    """Wire code -> the class name Python and Node raise (proto/emq_errors.def)."""
    classes = {}
    row = re.compile(r'^EMQ_ERROR\((\w+), "(?:[^"\\]|\\.)*", "(\w+)"\)')
    with open(os.path.join(ROOT, "proto", "emq_errors.def"), encoding="utf-8") as f:
        for line in f:
            m = row.match(line)
            if m:
                classes["E" + m.group(1)] = m.group(2)
    return classes


class Ctx:
    """What a check works with: the driver (d), the runner's own
    connection (r), emqd and redis."""

    def __init__(self, suite, driver, emqd):
        self.suite, self.d, self.emqd = suite, driver, emqd
        self.redis = suite.redis
        self.r = emqd.conn()

    # -- talking to the driver
    def do(self, cmd, wait=WAIT):
        r = self.d.do(cmd, wait)
        self._unsupported(cmd, r)
        return r

    def _unsupported(self, cmd, r):
        if r.get("ok") is False and r.get("error") == "UNSUPPORTED":
            if cmd["do"] in OPTIONAL:
                raise Skip("%s: %s" % (cmd["do"], r.get("message", "")))
            raise Fail("the driver answered UNSUPPORTED to %s, which every client must do"
                       % cmd["do"])

    def ok(self, do, **args):
        cmd = dict(do=do, **args)
        wait = WAIT + args.get("wait_ms", 0) / 1000 + args.get("grace_ms", 0) / 1000
        r = self.do(cmd, wait)
        if r.get("ok") is not True:
            raise Fail("%s failed: %s" % (short(cmd, 200), short(r)))
        return r

    def err(self, code, do, **args):
        """The command must fail with code, raised as the client's type for it."""
        cmd = dict(do=do, **args)
        r = self.do(cmd)
        if r.get("ok") is not False or r.get("error") != code:
            raise Fail("%s should fail %s, got %s" % (short(cmd, 200), code, short(r)))
        self.check_class(cmd, code, r.get("class"))
        return r

    def check_class(self, cmd, code, cls):
        want = self.suite.expected_class(code)
        if want is not None and cls != want:
            raise Fail("%s failed %s as class %r; the client's type for %s is %r"
                       % (short(cmd, 200), code, cls, code, want))

    def claim(self, queue, n=None, **args):
        """claim; with n, exactly n jobs must come."""
        r = self.ok("claim", queue=queue, **args)
        jobs = r.get("jobs")
        if not isinstance(jobs, list):
            raise Fail("claim answered without jobs: %s" % short(r))
        if n is not None and len(jobs) != n:
            raise Fail("claim of %s should lease %d job(s), got %s" % (queue, n, short(jobs)))
        return jobs

    def state(self, do, want, **args):
        r = self.ok(do, **args)
        if r.get("state") != want:
            raise Fail("%s should answer state %r, got %s" % (do, want, short(r)))
        return r

    def event(self, kind, job=None, attempt=None, wait=WAIT):
        """Wait for the driver's next event kind (pushed, started, ...), of job."""
        what = " ".join([kind] + [str(v) for v in (job, attempt) if v is not None])
        return self.d.wait_event(lambda e: e.get("event") == kind and
                                 job in (None, e.get("job")) and
                                 attempt in (None, e.get("attempt")), what, wait)

    def events(self, kind, job=None):
        """The driver's events of kind (of job) so far."""
        return self.d.seen(lambda e: e.get("event") == kind and (job is None or e.get("job") == job))

    # -- what the runner sees
    def row(self, queue, job, **want):
        """The row, which must exist and have the fields given."""
        row = self.r.row(queue, job)
        if row is None:
            raise Fail("the runner finds no row for %s in %s" % (job, queue))
        for k, v in want.items():
            if row.get(k) != v:
                raise Fail("the runner finds %s %s = %r, expected %r (row %s)"
                           % (job, k, row.get(k), v, short(row)))
        return row

    def no_row(self, queue, job):
        row = self.r.row(queue, job)
        if row is not None:
            raise Fail("the runner finds a row for %s, which should not exist: %s"
                       % (job, short(row)))

    def stats(self, queue, **want):
        st = self.r.stats(queue)
        for k, v in want.items():
            if st.get(k) != v:
                raise Fail("the runner finds stats %s %s = %r, expected %r (%s)"
                           % (queue, k, st.get(k), v, short(st)))
        return st

    def wait_until(self, what, fn, wait=WAIT):
        """Re-read the store until fn() is true (it returns what it saw)."""
        end, seen = deadline(wait), None
        while True:
            ok, seen = fn()
            if ok:
                return seen
            if time.monotonic() >= end:
                raise Fail("the runner waited %g s for %s; it last found %s"
                           % (wait, what, short(seen)))
            time.sleep(POLL)

    def rows_match(self, queue, jobs, **want):
        """For wait_until: every job's row has the fields given."""
        def fn():
            rows = {j: self.r.row(queue, j) for j in jobs}
            ok = all(r is not None and all(r.get(k) == v for k, v in want.items())
                     for r in rows.values())
            return ok, rows
        return fn

    def close(self):
        self.r.close()


def same_payload(what, got, want):
    if canon(got) != canon(want):
        raise Fail("%s: payload differs: got %s, expected %s" % (what, short(got), short(want)))


def job_ids(jobs):
    return [j.get("job") for j in jobs]


# 1
@check(1, "hello and auth", token=True)
def check_hello(x):
    q = "conf1"
    x.err("EAUTH", "connect", token="not-the-token")
    r = x.do({"do": "enqueue", "queue": q, "payload": {"by": "wrong token"}})
    if r.get("ok") is not False:
        raise Fail("after a refused connect, enqueue answered %s" % short(r))
    x.stats(q, pending=0, delayed=0)
    x.ok("connect")  # EMQ_TOKEN
    x.ok("ping")
    r = x.ok("enqueue", queue=q, job="JOBauth-1", payload={"by": "right token"})
    if r.get("verdict") != "enqueued":
        raise Fail("enqueue after a good connect: %s" % short(r))
    same_payload("the runner's row", x.row(q, "JOBauth-1", state="pending")["payload"],
                 {"by": "right token"})
    x.stats(q, pending=1)


# 2
@check(2, "enqueue verdicts and minted ids")
def check_enqueue(x):
    q = "conf2"
    p1 = {"n": 1, "s": "héllo", "list": [1, 2, 3], "nested": {"a": None, "b": True}}
    p2 = {"n": 2, "big": 9007199254740991, "neg": -42}
    p3 = {"n": 3, "other": "payload"}
    r1 = x.ok("enqueue", queue=q, group="TENmint", payload=p1)
    if r1.get("verdict") != "enqueued" or not MINTED.match(str(r1.get("job"))):
        raise Fail("enqueue without job should be enqueued with a minted JOB id: %s" % short(r1))
    r2 = x.ok("enqueue", queue=q, job="JOBclient-2", payload=p2)
    if r2.get("verdict") != "enqueued" or r2.get("job") != "JOBclient-2":
        raise Fail("enqueue of JOBclient-2: %s" % short(r2))
    r3 = x.ok("enqueue", queue=q, job="JOBclient-2", payload=p3, group="TENother")
    if r3.get("verdict") != "duplicate" or r3.get("job") != "JOBclient-2":
        raise Fail("the same id again should be duplicate: %s" % short(r3))
    r4 = x.ok("enqueue", queue=q, payload={"n": 4})
    if not MINTED.match(str(r4.get("job"))) or not r4["job"] > r1["job"]:
        raise Fail("a second minted id should sort after the first (%s): %s"
                   % (r1["job"], short(r4)))
    same_payload("runner's row of %s" % r1["job"],
                 x.row(q, r1["job"], state="pending", group="TENmint")["payload"], p1)
    same_payload("runner's row of JOBclient-2",
                 x.row(q, "JOBclient-2", state="pending", group=None)["payload"], p2)
    same_payload("runner's row of %s" % r4["job"], x.row(q, r4["job"])["payload"], {"n": 4})
    x.stats(q, pending=3)


# 3
@check(3, "enqueue_many per-item results")
def check_enqueue_many(x):
    q = "conf3"
    items = [{"payload": {"i": 0}, "job": "JOBbatch-0"},
             {"payload": {"i": 1}, "job": "JOBbatch-1", "group": "TEN bad"},
             {"payload": {"i": 2}, "job": "JOBbatch-2", "group": "TENown"},
             {"payload": {"i": 3}}]
    cmd = {"do": "enqueue_many", "queue": q, "group": "TENbatch", "items": items}
    r = x.do(cmd)
    res = r.get("results")
    if r.get("ok") is not True or not isinstance(res, list) or len(res) != 4:
        raise Fail("enqueue_many should answer 4 results: %s" % short(r))
    for i in (0, 2, 3):
        if res[i].get("verdict") != "enqueued" or "error" in res[i]:
            raise Fail("item %d should be enqueued: %s" % (i, short(res[i])))
    if res[0].get("job") != "JOBbatch-0" or res[2].get("job") != "JOBbatch-2":
        raise Fail("items 0 and 2 should keep their ids: %s" % short(res))
    if not MINTED.match(str(res[3].get("job"))):
        raise Fail("item 3 should get a minted id: %s" % short(res[3]))
    if res[1].get("error") != "EBRAND":
        raise Fail("item 1 (a malformed group) should fail EBRAND: %s" % short(res[1]))
    x.check_class(cmd, "EBRAND", res[1].get("class"))
    x.row(q, "JOBbatch-0", group="TENbatch", payload={"i": 0})
    x.no_row(q, "JOBbatch-1")
    x.row(q, "JOBbatch-2", group="TENown", payload={"i": 2})
    x.row(q, res[3]["job"], group="TENbatch", payload={"i": 3})
    x.stats(q, pending=3)


# 4
@check(4, "claim, complete, fail, extend, release with fencing")
def check_fencing(x):
    q, g = "conf4", "TENfence"
    stale = "999999"
    # complete, and extend, with a stale token first
    x.r.enqueue(q, {"step": "complete"}, "JOBf-1", g)
    [j] = x.claim(q, 1, lease_ms=30000)
    if j.get("job") != "JOBf-1" or j.get("attempt") != 1 or j.get("group") != g \
            or not isinstance(j.get("lease"), str):
        raise Fail("claim should lease JOBf-1, attempt 1, group %s, with a lease: %s" % (g, short(j)))
    same_payload("claimed JOBf-1", j.get("payload"), {"step": "complete"})
    before = x.row(q, "JOBf-1", state="active", attempts=1)
    x.err("ELEASE", "extend", queue=q, job="JOBf-1", lease=stale, lease_ms=600000)
    if x.row(q, "JOBf-1") != before:
        raise Fail("a stale extend changed the row: %s -> %s" % (short(before), short(x.row(q, "JOBf-1"))))
    r = x.ok("extend", queue=q, job="JOBf-1", lease_ms=600000)
    until = r.get("lease_until")
    if not isinstance(until, int) or until <= before["lease_until"]:
        raise Fail("extend by 600 s should move lease_until past %d: %s"
                   % (before["lease_until"], short(r)))
    before = x.row(q, "JOBf-1", state="active", lease_until=until)
    x.err("ELEASE", "complete", queue=q, job="JOBf-1", lease=stale)
    if x.row(q, "JOBf-1") != before:
        raise Fail("a stale complete changed the row")
    x.state("complete", "completed", queue=q, job="JOBf-1")
    x.row(q, "JOBf-1", state="completed")

    # fail: a stale token changes nothing; then delayed, with its error
    x.r.enqueue(q, {"step": "fail"}, "JOBf-2", g)
    [j] = x.claim(q, 1)
    if j.get("job") != "JOBf-2":
        raise Fail("claim should lease JOBf-2: %s" % short(j))
    before = x.row(q, "JOBf-2", state="active")
    x.err("ELEASE", "fail", queue=q, job="JOBf-2", lease=stale, error="stale")
    if x.row(q, "JOBf-2") != before:
        raise Fail("a stale fail changed the row")
    x.state("fail", "delayed", queue=q, job="JOBf-2", error="boom 2", retry_ms=600000)
    x.row(q, "JOBf-2", state="delayed", error="boom 2", attempts=1)

    # fail with retry_ms 0: pending at once; leased again as attempt 2
    x.r.enqueue(q, {"step": "release"}, "JOBf-3", g)
    [j] = x.claim(q, 1)
    first_lease = j.get("lease")
    x.state("fail", "pending", queue=q, job="JOBf-3", error="again", retry_ms=0)
    x.row(q, "JOBf-3", state="pending", attempts=1)
    [j] = x.claim(q, 1)
    if j.get("job") != "JOBf-3" or j.get("attempt") != 2:
        raise Fail("after a fail with retry_ms 0, JOBf-3 should come back as attempt 2: %s" % short(j))
    # release: stale tokens (a made-up one, the job's own earlier one) are fenced
    before = x.row(q, "JOBf-3", state="active", attempts=2)
    x.err("ELEASE", "release", queue=q, job="JOBf-3", lease=stale)
    x.err("ELEASE", "complete", queue=q, job="JOBf-3", lease=first_lease)
    if x.row(q, "JOBf-3") != before:
        raise Fail("a stale release or complete changed the row")
    x.state("release", "pending", queue=q, job="JOBf-3", error="giving back")
    # the attempt is returned: 2 leases, 1 counted
    x.row(q, "JOBf-3", state="pending", attempts=1, error="giving back")
    [j] = x.claim(q, 1)
    if j.get("job") != "JOBf-3" or j.get("attempt") != 2:
        raise Fail("after release (attempt returned) JOBf-3 should be attempt 2 again: %s" % short(j))
    x.state("complete", "completed", queue=q, job="JOBf-3")
    x.stats(q, active=0, pending=0, delayed=1)
    x.r.check_clean(q)


# 5
@check(5, "stream credit never exceeded")
def check_credit(x):
    q, credit, total = "conf5", 2, 10
    jobs = ["JOBs-%02d" % i for i in range(total)]
    for j in jobs[:6]:
        x.r.enqueue(q, {"j": j}, j, "TENs")
    x.ok("stream", queue=q, credit=credit, lease_ms=60000)
    delivered, settled = [], 0
    while len(delivered) < total:
        ev = x.event("pushed")
        job = ev.get("job")
        if job in delivered or job not in jobs:
            raise Fail("pushed %s, which was already delivered or never enqueued (%s)"
                       % (short(ev), delivered))
        if ev.get("attempt") != 1:
            raise Fail("a first delivery should be attempt 1: %s" % short(ev))
        same_payload("pushed %s" % job, ev.get("payload"), {"j": job})
        delivered.append(job)
        if len(delivered) - settled > credit:
            raise Fail("the client holds %d unsettled pushes with credit %d"
                       % (len(delivered) - settled, credit))
        st = x.r.stats(q)
        if st["active"] > credit:
            raise Fail("the runner finds %d active with credit %d" % (st["active"], credit))
        if len(delivered) == 2:  # the rest arrives while the stream is open
            for j in jobs[6:]:
                x.r.enqueue(q, {"j": j}, j, "TENt")
        if len(delivered) - settled == credit:
            # Credit spent: emqd must hold exactly `credit` leased.
            x.stats(q, active=credit, pending=total - len(delivered))
            x.state("complete", "completed", queue=q, job=delivered[settled])
            settled += 1
    while settled < total:
        x.state("complete", "completed", queue=q, job=delivered[settled])
        settled += 1
    x.ok("ping")
    pushes = x.events("pushed")
    if len(pushes) != total:
        raise Fail("%d pushes for %d jobs: %s" % (len(pushes), total, short(pushes)))
    x.stats(q, active=0, pending=0)
    for j in jobs:
        x.row(q, j, state="completed", attempts=1)
    x.r.check_clean(q)


class Ring:
    """The protocol's fairness rule (PROTOCOL.md 6.6): a lane joins the
    ring's tail when it becomes non-empty; a claim takes the head lane's
    smallest id and moves the lane to the tail, or drops it once empty."""

    def __init__(self):
        self.ring, self.lanes = [], {}

    def enqueue(self, group, job):
        lane = self.lanes.setdefault(group, [])
        if not lane and group not in self.ring:
            self.ring.append(group)
        lane.append(job)
        lane.sort()

    def claim(self):
        if not self.ring:
            return None
        g = self.ring.pop(0)
        job = self.lanes[g].pop(0)
        if self.lanes[g]:
            self.ring.append(g)
        return g, job


# 6
@check(6, "rotation order across tenants")
def check_rotation(x):
    q = "conf6"
    ring, seq = Ring(), {"TENa": 0, "TENb": 0, "TENc": 0}

    def burst(group, n):
        for _ in range(n):
            seq[group] += 1
            job = "JOB%s-%02d" % (group[3:], seq[group])
            r = x.ok("enqueue", queue=q, group=group, job=job, payload={"g": group})
            if r.get("verdict") != "enqueued":
                raise Fail("enqueue %s: %s" % (job, short(r)))
            ring.enqueue(group, job)

    def claim_one(step):
        want = ring.claim()
        [j] = x.claim(q, 1)
        if (j.get("group"), j.get("job")) != want:
            raise Fail("claim %s should lease %s of %s (rotation), got %s of %s"
                       % (step, want[1], want[0], j.get("job"), j.get("group")))
        x.state("complete", "completed", queue=q, job=j["job"])

    burst("TENa", 3)
    burst("TENb", 1)
    burst("TENc", 2)
    claim_one(1)
    claim_one(2)  # TENb is empty now and leaves the ring
    burst("TENb", 3)
    burst("TENa", 1)
    step = 3
    while ring.ring:
        claim_one(step)
        step += 1
    if x.claim(q):
        raise Fail("nothing should be left to claim")
    # One claim of many jobs serves them in rotation order too.
    burst("TENc", 2)
    burst("TENa", 2)
    burst("TENb", 2)
    want = []
    while ring.ring:
        want.append(ring.claim()[1])
    jobs = x.claim(q, 6, count=6)
    if job_ids(jobs) != want:
        raise Fail("a claim of 6 should serve %s, got %s" % (want, job_ids(jobs)))
    x.stats(q, pending=0, active=6)


# 7
@check(7, "flat vs grouped")
def check_flat(x):
    q = "conf7"
    for job, group in (("JOBf-1", None), ("JOBg-1", "TENg"), ("JOBf-2", None), ("JOBg-2", "TENh")):
        args = {"group": group} if group else {}
        x.ok("enqueue", queue=q, job=job, payload={"job": job}, **args)
    jobs = x.claim(q, count=10)
    if sorted(job_ids(jobs)) != ["JOBg-1", "JOBg-2"] or None in [j.get("group") for j in jobs]:
        raise Fail("a grouped claim should lease JOBg-1 and JOBg-2 only: %s" % short(jobs))
    x.row(q, "JOBf-1", state="pending")
    x.row(q, "JOBf-2", state="pending")
    x.stats(q, flat=2, active=2)
    jobs = x.claim(q, count=10, flat=True)
    if job_ids(jobs) != ["JOBf-1", "JOBf-2"] or any(j.get("group") is not None for j in jobs):
        raise Fail("a flat claim should lease JOBf-1, JOBf-2 (group null), in id order: %s"
                   % short(jobs))
    x.stats(q, flat=0, active=4, pending=0)
    if x.claim(q) or x.claim(q, flat=True):
        raise Fail("nothing should be left to claim")
    # A flat stream is pushed flat work only.
    x.r.enqueue(q, {"job": "JOBg-3"}, "JOBg-3", "TENg")
    x.r.enqueue(q, {"job": "JOBf-3"}, "JOBf-3")
    x.ok("stream", queue=q, credit=5, flat=True)
    ev = x.event("pushed")
    if ev.get("job") != "JOBf-3":
        raise Fail("a flat stream should push JOBf-3 only, pushed %s" % short(ev))
    x.ok("ping")
    x.row(q, "JOBg-3", state="pending")
    others = [e for e in x.events("pushed") if e.get("job") != "JOBf-3"]
    if others:
        raise Fail("a flat stream pushed %s" % short(others))


# 8
@check(8, "delayed and retried jobs")
def check_delayed(x):
    q, delay = "conf8", 1500
    r = x.ok("enqueue", queue=q, group="TENd", job="JOBd-1", payload={"d": 1}, delay_ms=delay)
    if r.get("verdict") != "enqueued":
        raise Fail("enqueue with delay_ms: %s" % short(r))
    row = x.row(q, "JOBd-1")
    due = row["created_ms"] + delay
    before = x.redis.time_ms()
    if before < due and row.get("state") != "delayed":
        raise Fail("a job enqueued with delay_ms %d should be delayed: %s" % (delay, short(row)))
    jobs = x.claim(q)
    if jobs and before < due:
        raise Fail("claimed %s before it was due" % short(jobs))
    if not jobs:
        jobs = x.claim(q, 1, wait_ms=20000, lease_ms=30000)
    now = x.redis.time_ms()
    if jobs[0].get("job") != "JOBd-1" or jobs[0].get("attempt") != 1 or now < due:
        raise Fail("the delayed job should be leased once due (at %d, now %d): %s"
                   % (due, now, short(jobs)))
    x.state("fail", "delayed", queue=q, job="JOBd-1", error="retry me", retry_ms=800)
    x.row(q, "JOBd-1", error="retry me", attempts=1)
    [j] = x.claim(q, 1, wait_ms=20000)
    if j.get("job") != "JOBd-1" or j.get("attempt") != 2:
        raise Fail("the failed job should come back as attempt 2: %s" % short(j))
    x.row(q, "JOBd-1", state="active", attempts=2)
    x.state("complete", "completed", queue=q, job="JOBd-1")
    x.stats(q, pending=0, delayed=0, active=0)


# 9
@check(9, "dead letters")
def check_dead(x):
    q = "conf9"
    x.ok("enqueue", queue=q, group="TENx", job="JOBx-1", payload={"x": 1}, max_attempts=1)
    [j] = x.claim(q, 1)
    if j.get("job") != "JOBx-1":
        raise Fail("claim should lease JOBx-1: %s" % short(j))
    x.state("fail", "dead", queue=q, job="JOBx-1", error="fatal: cannot parse")
    x.ok("enqueue", queue=q, group="TENx", job="JOBx-2", payload={"x": 2})
    [j] = x.claim(q, 1)
    x.state("fail", "dead", queue=q, job="JOBx-2", error="poison", dead=True)
    dead = {d["job"]: d for d in x.r.ok("dead", queue=q, action="list")["jobs"]}
    for job, error in (("JOBx-1", "fatal: cannot parse"), ("JOBx-2", "poison")):
        d = dead.get(job)
        if d is None or d.get("error") != error or d.get("attempts") != 1:
            raise Fail("dead list should have %s with error %r, 1 attempt: %s"
                       % (job, error, short(list(dead.values()))))
        x.row(q, job, state="dead")
    x.stats(q, dead=2, active=0, pending=0)


# 10
@check(10, "release on disconnect")
def check_disconnect(x):
    q = "conf10"
    jobs = ["JOBr-1", "JOBr-2", "JOBr-3"]
    for j in jobs:
        x.r.enqueue(q, {"j": j}, j, "TENr")
    got = x.claim(q, 2, count=2)
    if job_ids(got) != jobs[:2]:
        raise Fail("claim of 2 should lease JOBr-1, JOBr-2: %s" % short(got))
    x.ok("stream", queue=q, credit=1)
    ev = x.event("pushed")
    if ev.get("job") != "JOBr-3":
        raise Fail("the stream should push JOBr-3: %s" % short(ev))
    x.stats(q, active=3)
    x.ok("close")
    x.wait_until("the three jobs back in their lane, attempt counted",
                 x.rows_match(q, jobs, state="pending", attempts=1, error="connection closed"))
    x.stats(q, active=0, pending=3)
    x.r.check_clean(q)


# 11
@check(11, "reconnect after an emqd restart with work in hand")
def check_reconnect(x):
    q = "conf11"
    x.ok("worker_start", queue=q, concurrency=2, lease_ms=10000,
         behave={"JOBk-1": "sleep:1500"}, default_behave="complete")
    x.r.enqueue(q, {"k": 1}, "JOBk-1", "TENk")
    x.event("started", "JOBk-1")
    x.r.close()
    x.emqd.restart()
    x.r = x.emqd.conn()
    jobs = ["JOBk-%d" % i for i in range(1, 6)]
    for j in jobs[1:]:
        x.r.enqueue(q, {"k": j}, j, "TENk" if j < "JOBk-4" else "TENl")
    x.wait_until("every job completed after the restart",
                 x.rows_match(q, jobs, state="completed"), wait=2 * WAIT)
    x.stats(q, pending=0, active=0, delayed=0, dead=0)
    x.r.check_clean(q)
    x.ok("worker_stop", grace_ms=5000)


# 12
@check(12, "graceful stop")
def check_graceful(x):
    # JOBg-1 works until the stop is asked for, so its slot frees while the
    # worker stops (never before, however slow the machine): the worker must
    # not refill it. JOBg-2 hangs past the grace and is released.
    q, grace = "conf12", 3000
    x.ok("worker_start", queue=q, concurrency=2, lease_ms=30000,
         behave={"JOBg-1": "until_stop", "JOBg-2": "hang"}, default_behave="complete")
    x.r.enqueue(q, {"g": 1}, "JOBg-1", "TENg")
    x.r.enqueue(q, {"g": 2}, "JOBg-2", "TENh")
    for j in ("JOBg-1", "JOBg-2"):
        x.event("started", j)
    cmd = {"do": "worker_stop", "grace_ms": grace}
    x.d.send(cmd)
    # Work that arrives while the worker stops is not taken.
    x.r.enqueue(q, {"g": 3}, "JOBg-3", "TENi")
    r = x.d.result(cmd, WAIT + grace / 1000)
    x._unsupported(cmd, r)
    if r.get("ok") is not True:
        raise Fail("worker_stop failed: %s" % short(r))
    x.row(q, "JOBg-1", state="completed")
    row = x.row(q, "JOBg-2", state="pending")
    if row.get("attempts") != 0 or row.get("error") == "connection closed":
        raise Fail("the hung JOBg-2 should be released with its attempt returned "
                   "(attempts 0, not a disconnect): %s" % short(row))
    x.row(q, "JOBg-3", state="pending", attempts=0)
    started = x.events("started", "JOBg-3")
    if started:
        raise Fail("the stopping worker started JOBg-3: %s" % short(started))
    x.stats(q, active=0, pending=2)


# 13
@check(13, "error codes mapped")
def check_codes(x):
    q = "conf13"
    x.err("EQUEUE", "enqueue", queue="bad queue!", payload=1)
    x.err("EKIND", "enqueue", queue=q, job="notajob", payload=1)
    x.err("EARG", "enqueue", queue=q, job="JOB!bad", payload=1)
    x.r.enqueue(q, {"e": 1}, "JOBe-1", "TENe")
    [j] = x.claim(q, 1)
    x.err("ELEASE", "complete", queue=q, job="JOBe-1", lease="999999")
    x.state("complete", "completed", queue=q, job="JOBe-1")
    # ENOJOB: a job the client holds whose row is gone (reaped, then drained).
    x.r.enqueue(q, {"e": 2}, "JOBe-2", "TENe")
    [j] = x.claim(q, 1, lease_ms=1)
    if j.get("job") != "JOBe-2":
        raise Fail("claim should lease JOBe-2: %s" % short(j))

    def reaped():
        x.r.ok("reap", queue=q, group="TENe")
        row = x.r.row(q, "JOBe-2")
        return row is not None and row.get("state") == "pending", row
    x.wait_until("JOBe-2's 1 ms lease reaped", reaped)
    x.r.ok("drain", queue=q, group="TENe")
    x.no_row(q, "JOBe-2")
    x.err("ENOJOB", "complete", queue=q, job="JOBe-2")


# 14
@check(14, "pipelined requests in order")
def check_pipeline(x):
    q, g = "conf14", "TENp"
    jobs = ["JOBp-1", "JOBp-2", "JOBp-3"]
    ops = [{"do": "enqueue", "queue": q, "group": g, "job": j, "payload": {"p": j}} for j in jobs]
    ops += [{"do": "claim", "queue": q, "count": 1, "lease_ms": 30000}] * 3
    r = x.ok("pipeline", ops=ops)
    res = r.get("results")
    if not isinstance(res, list) or len(res) != 6:
        raise Fail("pipeline of 6 should answer 6 results: %s" % short(r))
    for i, j in enumerate(jobs):
        if res[i].get("ok") is not True or res[i].get("verdict") != "enqueued" \
                or res[i].get("job") != j:
            raise Fail("pipelined enqueue %d should be enqueued %s: %s" % (i, j, short(res[i])))
        got = res[3 + i].get("jobs")
        if res[3 + i].get("ok") is not True or not isinstance(got, list) or job_ids(got) != [j] \
                or got[0].get("attempt") != 1:
            raise Fail("pipelined claim %d should lease %s (it sees the enqueues before it): %s"
                       % (i, j, short(res[3 + i])))
    for j in jobs:
        x.row(q, j, state="active", attempts=1)
    x.stats(q, active=3, pending=0)
    ops = [{"do": "complete", "queue": q, "job": "JOBp-1"},
           {"do": "fail", "queue": q, "job": "JOBp-2", "error": "pipelined", "retry_ms": 0},
           {"do": "complete", "queue": q, "job": "JOBp-3"}]
    res = x.ok("pipeline", ops=ops).get("results")
    states = [s.get("state") for s in res] if isinstance(res, list) else res
    if states != ["completed", "pending", "completed"]:
        raise Fail("pipelined complete, fail, complete should answer completed, pending, "
                   "completed: %s" % short(res))
    x.row(q, "JOBp-1", state="completed")
    x.row(q, "JOBp-2", state="pending", error="pipelined")
    x.row(q, "JOBp-3", state="completed")


def large_payload(size):
    """An object whose compact JSON is exactly size bytes."""
    head = {"kind": "large", "blob": ""}
    room = size - len(canon(head).encode())
    pattern = "0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    head["blob"] = (pattern * (room // len(pattern) + 1))[:room]
    assert len(canon(head).encode()) == size
    return head


UNICODE = {
    "text": "Grüße, 世界, שלום, привет, नमस्ते",
    "emoji": "😀🎉👩‍👩‍👧‍👦🏳️‍🌈",
    "escapes": "quote \" backslash \\ slash / nl \n cr \r tab \t bs \b ff \f \u0001\u001f\u007f",
    "separators": "\u2028\u2029",
    "bom": "\ufeff",
    "astral": "𝄞𐍈\U0010fffd",
    "combining": "e\u0301",
    "ключ 🔑": "значение",
    "empty": "",
    "ints": [0, -1, 9007199254740991, -9007199254740991],
    "others": [True, False, None, [], {}],
}


# 15
@check(15, "large and Unicode payloads byte-exact")
def check_payloads(x):
    q, g = "conf15", "TENu"
    payloads = [large_payload(512 * 1024), UNICODE,
                {"mixed": "€𝄞é中" * 30000},  # multi-byte characters across every read boundary
                "a string ✓", [1, "two", {"three": 3}]]
    for i, p in enumerate(payloads):
        mine, theirs = "JOBu-%d" % i, "JOBv-%d" % i
        # client -> emqd: enqueued through the client, read by the runner
        r = x.ok("enqueue", queue=q, group=g, job=mine, payload=p)
        if r.get("verdict") != "enqueued":
            raise Fail("enqueue of payload %d: %s" % (i, short(r)))
        same_payload("the runner's row of %s" % mine, x.row(q, mine)["payload"], p)
        [j] = x.claim(q, 1)
        if j.get("job") != mine:
            raise Fail("claim should lease %s: %s" % (mine, short(j)))
        same_payload("%s claimed by the client" % mine, j.get("payload"), p)
        # emqd -> client: enqueued by the runner, claimed through the client
        x.r.enqueue(q, p, theirs, g)
        [j] = x.claim(q, 1)
        if j.get("job") != theirs:
            raise Fail("claim should lease %s: %s" % (theirs, short(j)))
        same_payload("%s (enqueued by the runner) claimed by the client" % theirs,
                     j.get("payload"), p)
        x.state("complete", "completed", queue=q, job=mine)
        x.state("complete", "completed", queue=q, job=theirs)
    # One byte more than max-payload is refused, and nothing is stored.
    x.err("ETOOBIG", "enqueue", queue=q, group=g, job="JOBu-big", payload=large_payload(512 * 1024 + 1))
    x.no_row(q, "JOBu-big")


# 16
@check(16, "a handler that raises")
def check_raises(x):
    q = "conf16"
    x.ok("worker_start", queue=q, concurrency=1, lease_ms=30000,
         behave={"JOBh-1": "raise"}, default_behave="complete")
    x.r.enqueue(q, {"h": 1}, "JOBh-1", "TENh")
    ev = x.event("failed", "JOBh-1")
    text = "raised by JOBh-1"
    if text not in str(ev.get("error")):
        raise Fail("the failed event should carry the exception text %r: %s" % (text, short(ev)))
    def failed():
        row = x.row(q, "JOBh-1")
        return text in str(row.get("error")), row
    x.wait_until("JOBh-1's row to hold the exception text %r" % text, failed)
    # Retried with the backoff (1 s after a first attempt), not at once.
    x.event("started", "JOBh-1", attempt=2)
    row = x.row(q, "JOBh-1")
    if not row.get("ready_ms", 0) >= row["created_ms"] + 1000:
        raise Fail("attempt 2 should become due a backoff (>= 1 s) after the failure: %s"
                   % short(row))
    # The worker goes on taking work.
    x.r.enqueue(q, {"h": 2}, "JOBh-2", "TENi")
    x.wait_until("JOBh-2 completed", x.rows_match(q, ["JOBh-2"], state="completed"))
    x.ok("worker_stop", grace_ms=2000)


# 17
@check(17, "a handler that hangs past its lease")
def check_extends(x):
    q, lease, work = "conf17", 2000, 4500
    x.ok("worker_start", queue=q, concurrency=1, lease_ms=lease,
         behave={"JOBl-1": "sleep:%d" % work}, default_behave="complete")
    x.r.enqueue(q, {"l": 1}, "JOBl-1", "TENl")
    x.event("started", "JOBl-1")
    untils = []

    def watch():
        row = x.r.row(q, "JOBl-1")
        if row is None or row.get("attempts") != 1 or row.get("state") not in ("active", "completed"):
            raise Fail("JOBl-1 should stay active, attempt 1, until completed: %s" % short(row))
        if row.get("state") == "active" and row.get("lease_until") not in untils:
            untils.append(row["lease_until"])
        return row.get("state") == "completed", row
    x.wait_until("JOBl-1 completed", watch, wait=WAIT + work / 1000)
    if len(untils) < 2:
        raise Fail("the worker should extend the lease of a %d ms handler on a %d ms lease; "
                   "lease_until seen: %s" % (work, lease, untils))
    starts = x.events("started", "JOBl-1")
    if len(starts) != 1:
        raise Fail("JOBl-1 should start once (never reaped): %s" % short(starts))
    x.event("completed", "JOBl-1")
    x.ok("worker_stop", grace_ms=2000)


# ---------------------------------------------------------------- the run

DRIVERS = {
    "c": lambda: [os.environ.get("EMQ_DRIVER_C")
                  or os.path.join(ROOT, "build", "tests", "conformance", "driver_c")],
    "python": lambda: [sys.executable, os.path.join(HERE, "driver_python.py")],
    "node": lambda: [os.environ.get("NODE") or shutil.which("node") or "node",
                     os.path.join(HERE, "driver_node.mjs")],
}


def make_tls(workdir, emqd):
    """--tls: a throw-away certificate for 127.0.0.1 (its own CA), given
    to every emqd start. emqd still takes plain connections on the same
    port (no tls-only), so the runner's own connection stays plain while
    the driver speaks TLS. Returns the CA file for the driver."""
    cert, key = os.path.join(workdir, "tls.pem"), os.path.join(workdir, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=emqd",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    emqd.base = ["--tls-cert", cert, "--tls-key", key]
    return cert


class Suite:
    def __init__(self, args, workdir):
        self.args = args
        self.client = args.client
        self.classes = load_classes()
        self.workdir = workdir
        self.redis = RedisServer(workdir)
        self.emqd = Emqd(workdir, self.redis)
        self.token = "conformance-token-0123456789"
        self.tls_ca = make_tls(workdir, self.emqd) if args.tls else None

    def expected_class(self, code):
        """The name of the client's error type for a wire code (None: not
        checked): C names the code itself, the others the table's class."""
        if self.client == "c":
            return "EMQ_" + code
        return self.classes.get(code)

    def driver_env(self, token):
        env = dict(os.environ)
        env.pop("EMQ_TOKEN", None)
        env.update(EMQ_HOST="127.0.0.1", EMQ_PORT=str(self.emqd.port))
        if token:
            env["EMQ_TOKEN"] = self.token
        env.pop("EMQ_TLS_CA", None)
        if self.tls_ca:
            env["EMQ_TLS_CA"] = self.tls_ca
        if self.client == "python":
            path = os.path.join(ROOT, "client", "python")
            env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def run_one(self, number, name, token, emqd_args, fn):
        """One check from an empty Redis and a fresh emqd: (status, text)."""
        self.emqd.stop()
        self.redis.flushall()
        self.emqd.start(self.token if token else None, emqd_args)
        driver = ctx = None
        try:
            driver = Driver(self.argv, self.driver_env(token), self.workdir, number,
                            self.args.verbose)
            ctx = Ctx(self, driver, self.emqd)
            if fn is not check_hello:
                ctx.ok("connect")
            fn(ctx)
            driver.quit()
            return "ok", None
        except Skip as e:
            return "skip", str(e)
        except (Fail, DriverError) as e:
            return "fail", self.diagnose(e, driver)
        except Bail:
            raise
        except Exception:  # a bug in the check or an unexpected answer shape
            return "fail", self.diagnose(traceback.format_exc().rstrip(), driver)
        finally:
            if ctx is not None:
                ctx.close()
            if driver is not None:
                driver.close()

    def diagnose(self, err, driver):
        lines = ["%s: %s" % ("driver" if isinstance(err, DriverError) else "found", err)]
        if self.emqd.proc is not None and self.emqd.proc.poll() is not None:
            lines.append("emqd exited (status %d); its log (tail):" % self.emqd.proc.returncode)
            lines += ["  " + l for l in tail(self.emqd.log).splitlines()]
        if driver is not None and driver.last is not None:
            lines.append("last command: %s" % short(driver.last[0]))
            lines.append("its result: %s" % short(driver.last[1]))
        if driver is not None and driver.stderr_tail():
            lines.append("driver stderr (tail):")
            lines += ["  " + l for l in driver.stderr_tail().splitlines()]
        return "\n".join(lines)

    def run(self):
        only = set(self.args.only or [n for n, *_ in CHECKS])
        checks = [c for c in CHECKS if c[0] in only]
        self.argv = self.args.driver or DRIVERS[self.client]()
        print("TAP version 13")
        print("1..%d" % len(checks))
        print("# client %s, driver: %s" % (self.client, " ".join(self.argv)))
        sys.stdout.flush()
        results = {}
        started = time.monotonic()
        try:
            if not self.args.driver and not os.path.exists(self.argv[-1]):
                raise Bail("no driver for %s: %s does not exist (built? written?)"
                           % (self.client, self.argv[-1]))
            self.redis.start()
            for i, (number, name, token, emqd_args, fn) in enumerate(checks, 1):
                t0 = time.monotonic()
                status, text = self.run_one(number, name, token, emqd_args, fn)
                results[number] = status
                label = "%d - %s" % (i, name if i == number else "[check %d] %s" % (number, name))
                if status == "ok":
                    print("ok %s" % label)
                elif status == "skip":
                    print("ok %s # SKIP %s" % (label, text.replace("\n", " ")))
                else:
                    print("not ok %s" % label)
                    for line in text.splitlines():
                        print("# " + line)
                print("# %d. took %.1f s" % (number, time.monotonic() - t0))
                sys.stdout.flush()
        except Bail as e:
            print("Bail out! %s" % str(e).replace("\n", " "))
            return 1
        finally:
            self.emqd.stop()
            self.redis.stop()
        by = lambda s: " ".join(str(n) for n, st in sorted(results.items()) if st == s) or "none"
        print("# client %s passed checks: %s" % (self.client, by("ok")))
        print("# skipped: %s; failed: %s; %.1f s" % (by("skip"), by("fail"),
                                                       time.monotonic() - started))
        return 1 if "fail" in results.values() else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--client", required=True,
                    help="c, python, node (names the driver and the error classes to expect)")
    ap.add_argument("--only", type=lambda s: [int(n) for n in s.split(",")],
                    help="run only these checks (e.g. 1,5,14)")
    ap.add_argument("--tls", action="store_true",
                    help="the driver speaks TLS to emqd (a certificate made with openssl)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="show the driver traffic on stderr")
    ap.add_argument("--driver", nargs=argparse.REMAINDER,
                    help="the driver's command line (the rest of the arguments)")
    args = ap.parse_args()
    if not args.driver and args.client not in DRIVERS:
        ap.error("--client %s has no driver of its own: give --driver CMD..." % args.client)
    workdir = tempfile.mkdtemp(prefix="emq-conformance-")

    def stop(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    suite = Suite(args, workdir)
    try:
        return suite.run()
    finally:
        suite.emqd.stop()
        suite.redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
