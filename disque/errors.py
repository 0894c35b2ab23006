"""Errors a Disque node answers, as exception classes named after their code.

Every error reply of Disque starts with a code (``-NOREPL Timeout reached
...``); ``reply_error`` maps it to the class below, whose ``str()`` is the
node's whole message. A code this module does not know is a plain
``ReplyError`` with its ``code`` set.
"""

from __future__ import annotations

from typing import ClassVar


class DisqueError(Exception):
    """Anything this package raises."""


class NoNodeAvailable(DisqueError):
    """No node answered: the seeds and the nodes HELLO listed were all tried."""


class ConnectionLost(DisqueError):
    """The connection dropped while a command that must not be sent twice (ADDJOB)
    was in flight: it may or may not have been run. The next call connects again."""


class ReplyError(DisqueError):
    """An error reply; ``code`` is its first word (``NOREPL``, ``ERR`` ...)."""

    CODE: ClassVar[str] = ""  # the code of the class (an unknown one: given)

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.CODE


class NoRepl(ReplyError):
    """ADDJOB: the job could not be replicated as asked (timeout, unreachable nodes)."""

    CODE = "NOREPL"


class Paused(ReplyError):
    """ADDJOB to a queue paused in input."""

    CODE = "PAUSED"


class MaxLen(ReplyError):
    """ADDJOB ... MAXLEN to a queue already that long."""

    CODE = "MAXLEN"


class Leaving(ReplyError):
    """The node is leaving the cluster (the client moves to another by itself)."""

    CODE = "LEAVING"


class OutOfMemory(ReplyError):
    """The node is over its maxmemory."""

    CODE = "OOM"


class BadId(ReplyError):
    """A job ID that is not one."""

    CODE = "BADID"


class NoJob(ReplyError):
    """The job is not known to this node, or already acknowledged."""

    CODE = "NOJOB"


class NoAuth(ReplyError):
    """The node wants a password (``password=``)."""

    CODE = "NOAUTH"


_BY_CODE: dict[str, type[ReplyError]] = {
    cls.CODE: cls for cls in (NoRepl, Paused, MaxLen, Leaving, OutOfMemory, BadId, NoJob, NoAuth)
}


def reply_error(message: str) -> ReplyError:
    """The exception for an error reply's text. redis-py strips its leading '-',
    and the code itself from ERR and OOM errors: given back here."""
    code = message.split(" ", 1)[0]
    if not code.isupper():  # "unknown command ...": an ERR
        message, code = f"ERR {message}", "ERR"
    cls = _BY_CODE.get(code)
    return cls(message) if cls is not None else ReplyError(message, code)
