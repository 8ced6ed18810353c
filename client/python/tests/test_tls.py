"""TLS from the Python clients: the blocking Client and the AsyncClient
against a real emqd with a certificate the test makes (openssl), end to
end (enqueue, stream, complete), a server certificate from the wrong CA
refused, and ``tls://HOST:PORT``."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
from typing import Iterator, Tuple

import pytest

import echomq
from servers import Emqd, Redis


def _openssl(cwd: str, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, str, str, str]:
    """A CA, a server certificate for 127.0.0.1 signed by it, and another
    CA: (ca, cert, key, other_ca)."""
    d = str(tmp_path_factory.mktemp("pki"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl(d, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=py CA")
    _openssl(d, "req", "-x509", *ec, "-keyout", "o.key", "-out", "other.pem", "-days", "2", "-subj", "/CN=other")
    _openssl(d, "req", *ec, "-keyout", "s.key", "-out", "s.csr", "-subj", "/CN=emqd")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    _openssl(d, "x509", "-req", "-in", "s.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "7",
             "-days", "2", "-extfile", "san.ext", "-out", "s.pem")
    return tuple(os.path.join(d, n) for n in ("ca.pem", "s.pem", "s.key", "other.pem"))  # type: ignore[return-value]


class TlsOnlyEmqd(Emqd):
    """An emqd that refuses plain clients: a plain connection would not
    pass these tests."""

    ready_reply = b"TLS connections only"


@pytest.fixture
def tls_emqd(redis: Redis, pki: Tuple[str, str, str, str]) -> Iterator[Emqd]:
    d = TlsOnlyEmqd(redis, "--tls-cert", pki[1], "--tls-key", pki[2], "--tls-only")
    yield d
    d.stop()


def test_blocking_client_over_tls(tls_emqd: Emqd, pki: Tuple[str, str, str, str], queue: str) -> None:
    ctx = ssl.create_default_context(cafile=pki[0])
    with echomq.Client("127.0.0.1", tls_emqd.port, ssl=ctx) as c:
        assert c.server.protocol == 1
        jid = c.enqueue(queue, {"secret": "over tls"}).job
        c.stream(queue, credit=1, flat=True)
        job = c.next_job(timeout=15)
        assert job is not None and job.job == jid and job.payload == {"secret": "over tls"}
        c.complete(job)
        # Pipelined calls on one TLS connection keep their order.
        ids = [c.enqueue(queue, i).job for i in range(50)]
        assert len(set(ids)) == 50


def test_async_client_over_tls(tls_emqd: Emqd, pki: Tuple[str, str, str, str], queue: str) -> None:
    async def run() -> None:
        ctx = ssl.create_default_context(cafile=pki[0])
        async with echomq.AsyncClient("127.0.0.1", tls_emqd.port, ssl=ctx) as c:
            await c.enqueue(queue, 1)
            assert await c.depth(queue) == 1

    asyncio.run(run())


def test_wrong_ca_is_refused(tls_emqd: Emqd, pki: Tuple[str, str, str, str]) -> None:
    ctx = ssl.create_default_context(cafile=pki[3])
    with pytest.raises(echomq.ConnectionLost, match="certificate"):
        echomq.Client("127.0.0.1", tls_emqd.port, ssl=ctx, timeout=15)


def test_tls_url(tls_emqd: Emqd, pki: Tuple[str, str, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # tls:// takes the default context: the test CA is made the default's.
    monkeypatch.setenv("SSL_CERT_FILE", pki[0])
    monkeypatch.setenv("EMQ_ADDR", f"tls://127.0.0.1:{tls_emqd.port}")
    with echomq.Client() as c:
        assert str(c.address) == f"tls://127.0.0.1:{tls_emqd.port}"
        assert c.ping() is None
