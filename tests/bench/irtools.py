"""What tests/bench/redis_ir and tests/bench/module_ir share: free ports,
the tree a build came from, the embedded Redis's settings, RESP encoding
and counting Redis's instructions over a piece of work under callgrind.
Python 3 standard library only."""
import glob
import json
import os
import re
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def source_root(build):
    """The source tree BUILD was set up from (its scripts are the ones the
    build embeds)."""
    with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
        return json.load(f)["directories"]["source"]


def redis_args(build):
    """REDIS_ARGS from the environment, else the embedded Redis's settings
    of BUILD's tree (none in a tree from before them)."""
    if "REDIS_ARGS" in os.environ:
        return os.environ["REDIS_ARGS"].split()
    try:
        with open(os.path.join(source_root(build), "daemon", "supervise.h")) as f:
            m = re.search(r'#define EMQ_ZSET_LISTPACK_ENTRIES "(\d+)"', f.read())
    except OSError:
        m = None
    return ["--zset-max-listpack-entries", m.group(1)] if m else []


def resp(*args):
    """One command in RESP (bytes, or anything str() makes text of)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def callgrind_count(pid, tmp, run, who, what):
    """Redis's instructions over run(): callgrind's counters of process pid
    (whose --callgrind-out-file is tmp/cg.out.%p) zeroed before and dumped
    after. The dump is removed once read. who and what name the tool and
    the phase in an error."""
    before = set(glob.glob(os.path.join(tmp, "cg.out.*")))
    subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True)
    run()
    subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True)
    end = time.time() + 60
    new = []
    while not new and time.time() < end:
        time.sleep(0.5)  # polling for a file callgrind writes: not a synchronisation of the work
        new = sorted(set(glob.glob(os.path.join(tmp, "cg.out.*"))) - before)
    if not new:
        sys.exit("%s: callgrind wrote no dump for %s" % (who, what))
    ir = 0
    with open(new[-1]) as f:
        for line in f:
            m = re.match(r"(summary|totals): (\d+)", line)
            if m:
                ir = int(m.group(2))
    for path in new:
        os.unlink(path)
    return ir
