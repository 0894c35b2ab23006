"""One call run by a worker, and what follows it: its result kept, its state
written, the next step of its chain sent, its chord part counted.

``Run`` is the call's side while it succeeds (run, started, done); ``Outcome``
is what is said when it does not (retried, given up). Both are hooks of the
worker's ``Call`` (worker.py), which decides when each is called.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from disque.tasks import canvas
from disque.tasks.message import encode_result
from disque.tasks.results import RETRY, STARTED
from disque.tasks.store import error_record

if TYPE_CHECKING:
    from disque.job import Job
    from disque.tasks.app import Tasks
    from disque.tasks.message import Message
    from disque.tasks.task import Task

log = logging.getLogger("disque.tasks")


class Run:
    """A task message run by this worker."""

    def __init__(
        self, tasks: Tasks, job: Job, task: Task[Any, Any], message: Message, serializer: str
    ) -> None:
        self.tasks = tasks
        self.job = job
        self.task = task
        self.message = message
        self.serializer = serializer
        self.body: bytes | None = None  # the result, encoded as it returned

    def run(self) -> Any:
        limit = self.tasks.rate_limits.get(self.task.name)
        if limit is not None:
            limit.wait()
        return self.checked(self.task.fn(*self.message.args, **self.message.kwargs))

    async def run_async(self) -> Any:
        limit = self.tasks.rate_limits.get(self.task.name)
        if limit is not None:
            await limit.wait_async()
        return self.checked(await self.task.fn(*self.message.args, **self.message.kwargs))

    def checked(self, value: Any) -> Any:
        """The value, once known to travel: a value the serializer cannot write fails
        the run here (not retried: it would return the same), not after it."""
        if self.message.reply_to is not None:
            from disque.tasks.task import UnserializableResult

            try:
                self.body = encode_result(self.message.id, self.serializer, value)
            except TypeError as exc:
                raise UnserializableResult(f"its return value cannot be sent: {exc}") from None
        return value

    def started(self) -> None:
        if self.tasks.stub is None:
            self.tasks.store.keep_state(self.job, self.message, self.serializer, STARTED)

    def done(self, value: Any) -> None:
        """Before the ACK: keep the result, send the chain's next step, count the
        chord's part. Raising leaves the job unacknowledged (it runs again)."""
        message = self.message
        if message.reply_to is not None:
            body = self.body or encode_result(message.id, self.serializer, value)
            self.tasks.reply(self.job.id, message, body)
        if message.link:
            canvas.send_next(self.tasks, message, value)
        if message.chord is not None:
            canvas.chord_part_done(self.tasks, message.chord, value=value)
        self.tasks.release_lock(message)


class Outcome:
    """What a failing call says: to its result's readers, its chain, its chord."""

    def __init__(self, tasks: Tasks, job: Job, message: Message, serializer: str) -> None:
        self.tasks = tasks
        self.job = job
        self.message = message
        self.serializer = serializer

    def retried(self, error: BaseException, delay: int, attempt: int) -> None:
        if self.message.reply_to is not None and self.tasks.stub is None:
            self.tasks.store.keep_state(
                self.job,
                self.message,
                self.serializer,
                RETRY,
                attempt=attempt,
                delay=delay,
                error=error_record(error),
            )

    def given_up(self, error: BaseException) -> None:
        """Dead-lettered or dropped: the caller, the chain's end and the chord hear why."""
        message = self.message
        if message.reply_to is not None:
            body = encode_result(message.id, self.serializer, error=error)
            self.tasks.reply(self.job.id, message, body)
        if message.link:
            canvas.chain_failed(self.tasks, message, error)
        if message.link_error:
            canvas.send_errbacks(self.tasks, message, error)
        if message.chord is not None:
            canvas.chord_part_done(self.tasks, message.chord, error=error)
        self.tasks.release_lock(message)
