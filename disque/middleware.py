"""Middleware: code that runs around every job a worker handles and every task
message a producer sends (tracing, error reporting, metrics ...).

    class Timing(Middleware):
        def before(self, call):
            call.state["t0"] = time.monotonic()

        def after(self, call, result):
            log.info("%s took %.3f s", call.name, time.monotonic() - call.state["t0"])

    worker = Worker("127.0.0.1:7711", middleware=[Timing()])
    tasks = Tasks("127.0.0.1:7711", middleware=[Timing()])

Every method is optional. ``before`` runs in the handler's thread (or, for an
``async def`` handler, its thread too, before the coroutine is scheduled):
raising there fails the job like the handler raising. An exception in any
other hook is logged and ignored: the job's outcome is already decided.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from disque.tasks.message import Message
    from disque.worker import Call

log = logging.getLogger("disque.middleware")


class Middleware:
    """Override the hooks you need."""

    def before_send(self, message: Message) -> None:
        """A task message is about to be added (producer side): add to its meta."""

    def before(self, call: Call) -> None:
        """The job is about to run."""

    def after(self, call: Call, result: Any) -> None:
        """The handler returned ``result``; the job is acknowledged next."""

    def on_failure(self, call: Call, exc: BaseException) -> None:
        """The handler raised (every failed attempt, time limits included)."""

    def on_retry(self, call: Call, exc: BaseException, delay: int) -> None:
        """The failed job was NACKed: delivered again in ``delay`` seconds."""

    def on_dead_letter(self, call: Call, exc: BaseException, queue: str) -> None:
        """The job failed its last attempt (or could never run) and was moved to ``queue``."""

    def on_time_limit(self, call: Call, limit: float) -> None:
        """The handler ran past its time limit: it is being stopped."""


def notify(middleware: Sequence[Middleware], hook: str, *args: Any) -> None:
    """Call ``hook`` on each middleware, logging (not raising) what they raise."""
    for item in middleware:
        try:
            getattr(item, hook)(*args)
        except Exception:
            log.exception("middleware %s.%s failed", type(item).__name__, hook)
