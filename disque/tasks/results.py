"""A task call's result, the Disque way: the worker ADDJOBs it to a reply queue
the message names (one per call), and ``Result.get`` is a GETJOB there, then
an ACKJOB. No second store: the result lives in the cluster for ``result_ttl``
seconds, replicated to two nodes where the cluster has them, and a GETJOB on
any node fetches it (federation brings it over).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from disque.errors import DisqueError
from disque.tasks.message import FORMAT, BadMessage, load

if TYPE_CHECKING:
    from disque.tasks.app import Tasks

R = TypeVar("R")


class TaskFailed(DisqueError):
    """The task raised on its last attempt (or could never run): ``type`` and
    ``message`` are its exception's class name and text."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type = type_name
        self.message = message


class ResultTimeout(DisqueError, TimeoutError):
    """No result came within the time asked for (the task may still run)."""


class NoResult(DisqueError):
    """The call was sent without ``result=True``: nothing will come back."""


_UNSET: Any = object()


class Result(Generic[R]):
    """What ``task.send(...)`` returns: the call's IDs, and its outcome once it came."""

    def __init__(
        self,
        tasks: Tasks,
        message_id: str,
        job_id: str,
        reply_to: str | None,
        serializer: str = "json",
    ) -> None:
        self.tasks = tasks
        self.serializer = serializer  # the call's: its result is read in it too
        self.message_id = message_id  # the message's own ID ("id" in the message)
        self.job_id = job_id  # Disque's job ID (stub mode: "stub-" and the message ID)
        self.reply_to = reply_to  # the reply queue, None without result=True
        self._value: Any = _UNSET
        self._error: TaskFailed | None = None

    def __repr__(self) -> str:
        return f"<Result {self.message_id} job={self.job_id}>"

    def get(self, timeout: float | None = None) -> R:
        """The task's return value; TaskFailed when it failed for good, ResultTimeout
        when nothing came within ``timeout`` seconds (None: wait for ever)."""
        if self._value is _UNSET and self._error is None:
            self._settle(self.tasks.fetch_result(self, timeout))
        return self._outcome()

    async def get_async(self, timeout: float | None = None) -> R:
        """``get`` for asyncio."""
        if self._value is _UNSET and self._error is None:
            self._settle(await self.tasks.fetch_result_async(self, timeout))
        return self._outcome()

    def _require_reply_queue(self) -> str:
        if self.reply_to is None:
            raise NoResult("this call was sent without result=True: no result comes back")
        return self.reply_to

    def _settle(self, fields: dict[str, Any]) -> None:
        if fields.get("ok"):
            self._value = fields.get("value")
        else:
            error = fields.get("error") or {}
            self._error = TaskFailed(str(error.get("type", "Error")), str(error.get("message")))

    def _outcome(self) -> R:
        if self._error is not None:
            raise self._error
        value: R = self._value
        return value


def read_result(body: bytes, accept: tuple[str, ...]) -> dict[str, Any]:
    """The fields of a result body (see message.py); BadMessage when it is none."""
    fields, _ = load(body, accept)
    if "ok" not in fields or fields.get("v") != FORMAT:
        raise BadMessage("not a task result")
    return fields


def getjob_timeout_ms(timeout: float | None) -> int | None:
    """GETJOB's TIMEOUT for ``timeout`` seconds (at least 1 ms; None: for ever)."""
    return None if timeout is None else max(1, math.ceil(timeout * 1000))
