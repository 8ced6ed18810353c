"""echomq: the Python client of emqd, the multi-tenant job-queue daemon.

* :class:`Client`: a blocking connection, one method per op of the
  protocol (``enqueue``, ``claim``, ``complete``, ...), pipelining with
  :meth:`Client.pipeline`, pushed jobs with :meth:`Client.next_job`;
* :class:`AsyncClient`: the same surface for asyncio;
* :class:`Worker`: streams a queue and runs a handler per job, with
  concurrency, automatic lease extension, reconnects and a graceful stop;
* :class:`EmqError` and one subclass per wire code (:class:`LeaseError`
  for ``ELEASE``, ...), plus :class:`ConnectionLost` and :class:`Timeout`.

The protocol is proto/PROTOCOL.md in the echomq source tree.
"""

from typing import Type

from . import errors as _errors
from ._conn import Address, parse_addr
from ._ops import PROTOCOL, Call
from .aio import AsyncClient, AsyncPipeline
from .client import DEFAULT_TIMEOUT, Client, Pending, Pipeline, PipelineBase
from .errors import ERROR_CLASSES, ConnectionLost, EmqError, Timeout, error_class, error_from_reply
from .types import (DeadJob, Enqueued, GroupInfo, GroupsPage, Hello, Item, JobInfo, LeasedJob, LeaseRef, PeekPage,
                    QueueInfo, QueuesPage, Stats, StreamInfo, HeldLease, ClientInfo, ClientsPage)
from .worker import Dead, Handler, Retry, Worker, error_text

__version__ = "0.1.0"
"""The version of this package (the echomq release)."""

__all__ = [
    "Client", "AsyncClient", "Pipeline", "AsyncPipeline", "PipelineBase", "Pending", "Worker", "Retry", "Dead",
    "Handler", "error_text", "EmqError", "ConnectionLost", "Timeout", "ERROR_CLASSES", "error_class",
    "error_from_reply", "Hello", "Enqueued", "Item", "LeaseRef", "LeasedJob", "Stats", "GroupInfo",
    "GroupsPage", "QueueInfo", "QueuesPage", "StreamInfo", "HeldLease", "ClientInfo", "ClientsPage", "JobInfo", "PeekPage", "DeadJob", "Address", "parse_addr", "Call", "PROTOCOL", "DEFAULT_TIMEOUT",
]

# The classes of the wire codes (LeaseError, AuthError, ...), made from the
# one table at import time, are exported here too.
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})
__all__ += [cls.__name__ for cls in ERROR_CLASSES.values()]


def __getattr__(name: str) -> Type[EmqError]:
    """Type checkers see the generated error classes (``LeaseError``, ...)
    through this hook; at run time they are real attributes."""
    return _errors.__getattr__(name)
