"""Fixtures: one redis-server and one emqd for the session (each test on
queues of its own), fresh ones where a test restarts or configures the
daemon; and ``--emq-tap``, TAP output for meson (one line per test)."""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any, Iterator

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package under test: this tree's
sys.path.insert(0, HERE)

import echomq  # noqa: E402
from servers import Emqd, Redis  # noqa: E402

_names = itertools.count(1)


@pytest.fixture(scope="session")
def redis() -> Iterator[Redis]:
    r = Redis()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def emqd(redis: Redis) -> Iterator[Emqd]:
    d = Emqd(redis, "--upkeep-ms", "100")
    yield d
    d.stop()


@pytest.fixture
def fresh_emqd(redis: Redis) -> Iterator[Emqd]:
    """A daemon of the test's own (to restart, or to configure)."""
    d = Emqd(redis, "--upkeep-ms", "100")
    yield d
    d.stop()


@pytest.fixture
def queue(request: Any) -> str:
    """A queue name no other test uses."""
    return f"py{os.getpid()}-{next(_names)}"


@pytest.fixture
def client(emqd: Emqd) -> Iterator[echomq.Client]:
    c = echomq.Client("127.0.0.1", emqd.port)
    yield c
    c.close()


@pytest.fixture
def other(emqd: Emqd) -> Iterator[echomq.Client]:
    """A second, independent connection, to check effects from outside."""
    c = echomq.Client("127.0.0.1", emqd.port, name="checker")
    yield c
    c.close()


# ---- TAP for meson --------------------------------------------------------


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--emq-tap", action="store_true", help="print TAP (one line per test) on stdout")


class _Tap:
    def __init__(self) -> None:
        self.n = 0
        self.out = sys.__stdout__

    def _line(self, s: str) -> None:
        assert self.out is not None
        self.out.write(s + "\n")
        self.out.flush()

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.n += 1
            if report.passed:
                self._line(f"ok {self.n} - {report.nodeid}")
            elif report.skipped:
                self._line(f"ok {self.n} - {report.nodeid} # SKIP")
            else:
                self._line(f"not ok {self.n} - {report.nodeid}")
                for ln in str(report.longrepr).splitlines():
                    self._line(f"# {ln}")
        elif report.when == "teardown" and report.failed:
            self.n += 1
            self._line(f"not ok {self.n} - {report.nodeid} (teardown)")
            for ln in str(report.longrepr).splitlines():
                self._line(f"# {ln}")

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.n += 1
            self._line(f"not ok {self.n} - collecting {report.nodeid}")
            for ln in str(report.longrepr).splitlines():
                self._line(f"# {ln}")

    def pytest_sessionfinish(self, session: Any) -> None:
        self._line(f"1..{self.n}")


def pytest_configure(config: Any) -> None:
    if config.getoption("--emq-tap"):
        config.pluginmanager.register(_Tap(), "emq-tap")
