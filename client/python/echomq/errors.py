"""The exceptions of echomq.

Every error the daemon answers carries a wire code (``ELEASE``,
``EAUTH``, ...; PROTOCOL.md section 3). Each code has its own subclass of
:class:`EmqError`, named as in the one table of codes,
``proto/emq_errors.def`` (``ELEASE`` is :class:`LeaseError`, ``EAUTH``
:class:`AuthError`, ...). The classes are made at import time from
:mod:`echomq._codes`, which ``scripts/gen_errors.py`` writes from that
table, so no list of codes is kept by hand here.

Two more classes are the client's own: :class:`ConnectionLost` (code
``ECONN``: the connection could not be made or broke) and :class:`Timeout`
(code ``ETIMEOUT``: no reply in time).

Branch on the class or on ``.code``, never on ``.message``, which is
human-readable text and not part of the protocol.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

from ._codes import CODES

__all__ = ["EmqError", "ConnectionLost", "Timeout", "error_class", "error_from_reply", "ERROR_CLASSES"]


class EmqError(Exception):
    """An error from emqd or from this client.

    ``code`` is the wire code (``"ELEASE"``, ...) or, for the client's own
    failures, ``"ECONN"`` / ``"ETIMEOUT"``. ``message`` is the server's
    text (not part of the contract). ``job`` is set on the errors of an
    ``enqueue`` (and of ``enqueue_many`` items) that passed their argument
    checks: the id to retry with (PROTOCOL.md section 3). ``cap`` and
    ``group`` are set on an ``EFULL`` from a lane at its cap (6.15), and
    only then: a backend out of memory is ``EFULL`` without them.
    """

    code: str = "EUNKNOWNCODE"
    """The wire code of this error (class attribute on each subclass)."""

    def __init__(self, message: str = "", *, code: Optional[str] = None, job: Optional[str] = None,
                 cap: Optional[int] = None, group: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message: str = message
        """The human-readable message (not part of the contract)."""
        self.job: Optional[str] = job
        """The job id to retry an ``enqueue`` with, when the server gave one."""
        self.cap: Optional[int] = cap
        """The cap of the full lane that refused an enqueue (``EFULL``), else ``None``."""
        self.group: Optional[str] = group
        """The group of that lane, else ``None``."""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.code, self.job, self.cap, self.group))


def _rebuild(cls: Type[EmqError], message: str, code: str, job: Optional[str], cap: Optional[int] = None,
             group: Optional[str] = None) -> EmqError:
    """Unpickle an :class:`EmqError` with all its attributes."""
    return cls(message, code=code, job=job, cap=cap, group=group)


class ConnectionLost(EmqError, ConnectionError):
    """The connection to emqd could not be made, or it broke (code ``ECONN``).

    The outcome of requests that were in flight is unknown (PROTOCOL.md
    6.1): resending a ``complete`` or an ``enqueue`` with its ``job`` id is
    safe. A :class:`~echomq.Client` that raised it is closed; make a new one
    (a :class:`~echomq.Worker` reconnects by itself).
    """

    code = "ECONN"


class Timeout(EmqError, TimeoutError):
    """No reply came within the client's timeout (code ``ETIMEOUT``).

    The request may still take effect; its late reply is dropped.
    """

    code = "ETIMEOUT"


ERROR_CLASSES: Dict[str, Type[EmqError]] = {}
"""Wire code -> exception class, for every code of the table."""


def _make_classes() -> None:
    for code, (_number, summary, name) in CODES.items():
        doc = f"The daemon answered {code}: {summary} (PROTOCOL.md section 3)."
        cls = type(name, (EmqError,), {"code": code, "__doc__": doc, "__module__": __name__})
        cls.__qualname__ = name
        globals()[name] = cls
        ERROR_CLASSES[code] = cls
        __all__.append(name)


_make_classes()


def error_class(code: str) -> Type[EmqError]:
    """The exception class for a wire code; :class:`EmqError` for a code
    this client does not know (a newer daemon's)."""
    return ERROR_CLASSES.get(code, EmqError)


def error_from_reply(reply: Dict[str, Any]) -> EmqError:
    """The exception for an error reply (or an ``enqueue_many`` item's
    error): the class of its code, its message and its ``job``."""
    code = reply.get("error")
    code = code if isinstance(code, str) else "EPROTO"
    message = reply.get("message")
    job = reply.get("job")
    cap, group = reply.get("cap"), reply.get("group")
    return error_class(code)(
        message if isinstance(message, str) else "",
        code=code,
        job=job if isinstance(job, str) else None,
        cap=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
        group=group if isinstance(group, str) else None,
    )


def __getattr__(name: str) -> Type[EmqError]:
    """Type checkers see each generated class (``LeaseError``, ...) through
    this hook as a ``Type[EmqError]``; at run time they are real module
    attributes and this is only reached for names that do not exist."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
