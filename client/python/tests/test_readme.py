"""The examples of client/python/README.md (and of the top README's
"Workers in Python"), run exactly as printed against a real emqd.

An example is a fenced ``python`` block whose first line is a comment
naming it (``# worker.py: ...``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, List

import pytest

from servers import DEADLINE, ROOT, Emqd, env_with, wait_until

import echomq

SENT = re.compile(r"^INFO:mail:sent JOB\S+ to (\S+) for ")
BLOCK = re.compile(r"^```python\n(# (\w+\.py):.*?\n.*?)^```\n", re.M | re.S)


def examples(path: str) -> Dict[str, str]:
    with open(path, encoding="utf-8") as f:
        return {m.group(2): m.group(1) for m in BLOCK.finditer(f.read())}


OWN = examples(os.path.join(ROOT, "client", "python", "README.md"))


def test_the_examples_are_there_and_short() -> None:
    assert {"worker.py", "producer.py", "reports.py"} <= OWN.keys()
    for name, code in OWN.items():
        assert len(code.splitlines()) <= 30, name


def test_the_top_readme_prints_the_same_examples() -> None:
    top = examples(os.path.join(ROOT, "README.md"))
    assert {"worker.py", "producer.py"} <= top.keys()
    for name, code in top.items():
        assert OWN.get(name) == code, f"README.md's {name} differs from client/python/README.md's"


def run_example(tmp_path, emqd: Emqd, name: str) -> List[str]:
    path = tmp_path / name
    path.write_text(OWN[name], encoding="utf-8")
    p = subprocess.run([sys.executable, str(path)], env=env_with(emqd), capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_worker_and_producer(tmp_path, fresh_emqd: Emqd) -> None:
    (tmp_path / "worker.py").write_text(OWN["worker.py"], encoding="utf-8")
    w = subprocess.Popen([sys.executable, str(tmp_path / "worker.py")], env=env_with(fresh_emqd),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: List[str] = []
    err: List[str] = []
    def collect(f: Any, acc: List[str]) -> None:
        for line in f:
            acc.append(line)

    readers = [threading.Thread(target=collect, args=(f, acc), daemon=True) for f, acc in ((w.stdout, out), (w.stderr, err))]
    for t in readers:
        t.start()
    try:
        lines = run_example(tmp_path, fresh_emqd, "producer.py")
        assert lines[:2] == ["JOBwelcome-ann enqueued", "JOBwelcome-ann duplicate"]
        assert [ln.split()[1] for ln in lines[2:6]] == ["enqueued"] * 4 and lines[5] == "JOBnobody enqueued"
        assert lines[6] == "refused: EBRAND" and lines[7].startswith("Stats(")
        def sent() -> List[str]:
            return [m.group(1) for m in map(SENT.search, list(err)) if m]

        wait_until(lambda: len(sent()) >= 5, "the worker to send five mails")
        assert out == []
        assert sorted(sent()) == sorted(["ann@example.com", "ops@example.com"] + [f"user{i}@example.com" for i in range(3)])
        with echomq.Client("127.0.0.1", fresh_emqd.port) as c:
            dead = wait_until(lambda: c.dead_list("mail"), "the bad address to be dead-lettered")
            assert [(d.job, d.error) for d in dead] == [("JOBnobody", "not an address: nobody")]
        w.send_signal(signal.SIGTERM)
        assert w.wait(DEADLINE) == 0
        for t in readers:
            t.join(DEADLINE)
        assert any("connected to" in ln for ln in err)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def test_reports(tmp_path, fresh_emqd: Emqd) -> None:
    lines = run_example(tmp_path, fresh_emqd, "reports.py")
    assert lines == ["['enqueued', 'enqueued', 'enqueued']", "report 0 attempt 1", "report 1 attempt 1",
                     "report 2 attempt 1", "0 left"]


@pytest.mark.parametrize("name", sorted(OWN))
def test_examples_compile(name: str) -> None:
    compile(OWN[name], name, "exec")
