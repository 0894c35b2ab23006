"""A task call's result, the Disque way: jobs, no second store.

With ``result=True`` the message names a reply queue of its own,
``result:<message id>``. The worker ADDJOBs the outcome there (2 copies where
two nodes are reachable, kept ``result_ttl`` seconds) on the node the call was
added to. Nobody consumes it: ``get()`` peeks at it (QPEEK), or, when it is
not there yet, waits for it with GETJOB and puts it back at once (NACK), so
any process reads it by ID as often as it likes until its TTL, and
``forget()`` deletes it (ACKJOB).

On the way, the worker keeps the call's state in ``result:<id>:state``: one
job at a time, each replacing the last: STARTED (when the task says
``track_started``) and RETRY (with the error and when it runs again). A
failure keeps the worker's traceback.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from disque.errors import DisqueError
from disque.tasks.message import FORMAT, BadMessage, load

if TYPE_CHECKING:
    from disque.tasks.app import Tasks

R = TypeVar("R")

PENDING = "PENDING"  # nothing known yet: queued, or an unknown ID
STARTED = "STARTED"  # a worker runs it (tasks with track_started)
RETRY = "RETRY"  # it failed and runs again
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"  # cancelled before it ran (revoke.py)
FINAL = frozenset({SUCCESS, FAILURE, REVOKED})


def reply_queue(message_id: str) -> str:
    """Where a call's outcome is kept."""
    return f"result:{message_id}"


def state_queue(reply_to: str) -> str:
    """Where a call's state on the way is kept (one job, the latest)."""
    return f"{reply_to}:state"


class TaskFailed(DisqueError):
    """The task raised on its last attempt (or could never run): ``type`` and
    ``message`` are its exception's class name and text, ``traceback`` the
    worker's (None when the failure came from no exception raised there)."""

    def __init__(self, type_name: str, message: str, traceback: str | None = None) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type = type_name
        self.message = message
        self.traceback = traceback


class ResultTimeout(DisqueError, TimeoutError):
    """No result came within the time asked for (the task may still run)."""


class NoResult(DisqueError):
    """The call was sent without ``result=True``: nothing will come back."""


_UNSET: Any = object()


class Result(Generic[R]):
    """A call's handle: what ``task.send(...)`` returns, or ``tasks.result(id)``
    makes from the ID alone in another process (Celery's ``AsyncResult``)."""

    def __init__(
        self,
        tasks: Tasks,
        message_id: str,
        job_id: str | None,
        reply_to: str | None,
        serializer: str = "json",
    ) -> None:
        self.tasks = tasks
        self.serializer = serializer  # the call's: its result is read in it too
        self.message_id = message_id  # the message's own ID ("id" in the message)
        self.job_id = job_id  # Disque's job ID (None when looked up by ID; stub: "stub-...")
        self.reply_to = reply_to  # the reply queue, None without result=True
        self._value: Any = _UNSET
        self._error: TaskFailed | None = None

    def __repr__(self) -> str:
        return f"<Result {self.message_id} job={self.job_id}>"

    @property
    def id(self) -> str:
        """What ``tasks.result(id)`` finds this call by."""
        return self.message_id

    def get(self, timeout: float | None = None) -> R:
        """The task's return value; TaskFailed when it failed for good, ResultTimeout
        when nothing came within ``timeout`` seconds (None: wait for ever)."""
        if not self._settled:
            self._settle(self.tasks.fetch_result(self, timeout))
        return self._outcome()

    async def get_async(self, timeout: float | None = None) -> R:
        """``get`` for asyncio."""
        if not self._settled:
            self._settle(await self.tasks.fetch_result_async(self, timeout))
        return self._outcome()

    @property
    def state(self) -> str:
        """PENDING, STARTED, RETRY, SUCCESS, FAILURE or REVOKED, as the cluster has it
        now."""
        return str(self.info.get("state", PENDING))

    @property
    def info(self) -> dict[str, Any]:
        """The latest record of the call: ``state``, and per state ``attempt`` and
        ``error`` (RETRY), ``value`` (SUCCESS) or ``error`` (FAILURE)."""
        if not self._settled:
            record = self.tasks.peek_state(self)
            if record.get("state") not in FINAL:
                return record
            self._settle(record)
        if self._error is not None:
            error = {"type": self._error.type, "message": self._error.message}
            return {"state": failure_state(error), "error": error}
        return {"state": SUCCESS, "value": self._value}

    def ready(self) -> bool:
        """It succeeded or failed for good."""
        return self.state in FINAL

    def successful(self) -> bool:
        return self.state == SUCCESS

    def failed(self) -> bool:
        return self.state == FAILURE

    @property
    def traceback(self) -> str | None:
        """The worker's traceback of a failed call (None otherwise)."""
        self.ready()
        return self._error.traceback if self._error is not None else None

    def revoke(self) -> None:
        """Cancel the call: it does not run if it has not started (``Tasks.revoke``)."""
        self.tasks.revoke(self)

    def forget(self) -> None:
        """Delete the kept outcome and state now, before their TTL."""
        self.tasks.forget_result(self)

    @property
    def _settled(self) -> bool:
        return self._value is not _UNSET or self._error is not None

    def _require_reply_queue(self) -> str:
        if self.reply_to is None:
            raise NoResult("this call was sent without result=True: no result comes back")
        return self.reply_to

    def _settle(self, fields: dict[str, Any]) -> None:
        if fields.get("ok"):
            self._value = fields.get("value")
        else:
            error = fields.get("error") or {}
            trace = error.get("traceback")
            self._error = TaskFailed(
                str(error.get("type", "Error")),
                str(error.get("message")),
                str(trace) if trace is not None else None,
            )

    def _outcome(self) -> R:
        if self._error is not None:
            raise self._error
        value: R = self._value
        return value


def read_result(body: bytes, accept: tuple[str, ...]) -> dict[str, Any]:
    """The fields of a result body (see message.py), its ``state`` filled in;
    BadMessage when it is none."""
    fields, _ = load(body, accept)
    if "ok" not in fields or fields.get("v") != FORMAT:
        raise BadMessage("not a task result")
    fields["state"] = SUCCESS if fields["ok"] else failure_state(fields.get("error"))
    return fields


def failure_state(error: Any) -> str:
    """FAILURE, or REVOKED for a call cancelled before it ran."""
    return REVOKED if isinstance(error, dict) and error.get("type") == "Revoked" else FAILURE


def read_state(body: bytes, accept: tuple[str, ...]) -> dict[str, Any]:
    """The fields of a state record; BadMessage when it is none."""
    fields, _ = load(body, accept)
    if fields.get("state") not in (STARTED, RETRY):
        raise BadMessage("not a task state")
    return fields


def getjob_timeout_ms(timeout: float | None) -> int | None:
    """GETJOB's TIMEOUT for ``timeout`` seconds (at least 1 ms; None: for ever)."""
    return None if timeout is None else max(1, math.ceil(timeout * 1000))
