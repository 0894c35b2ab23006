"""A task: a function registered with ``Tasks.task``, the options its calls are
sent and run with, and the checks those options get (when a call is made, and
when a worker reads them from a message).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from disque.errors import DisqueError
from disque.tasks.message import BadMessage, Message, serializer
from disque.tasks.ratelimit import RateLimit
from disque.tasks.store import ADD_TIMEOUT_MS
from disque.worker import Reject

if TYPE_CHECKING:
    from disque.tasks.app import Tasks
    from disque.tasks.canvas import Chain, Signature
    from disque.tasks.results import Result

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_QUEUE = "default"
DEFAULT_RETRY = 60  # seconds before a call whose worker died runs again (brokers' own)

# The options a worker runs one call with, over the task's: they travel in the message.
WORKER_OPTIONS = frozenset({"max_attempts", "time_limit", "soft_time_limit", "track_started"})
PER_CALL = frozenset(
    {"queue", "retry", "ttl", "replicate", "result", "serializer", "timeout_ms", "unique_for"}
)
PER_CALL |= WORKER_OPTIONS
UNIQUE_LOCK = "unique_lock"  # in a message's options: the lock its worker deletes (revoke.py)


class UnknownTask(Exception):
    """The worker has no task of that name (it may come with the next deploy:
    retried, then dead-lettered)."""


class SendFailed(DisqueError):
    """``send_many``: some calls were not queued. ``results``: for each call in
    order, its Result, or the error its ADDJOB got."""

    def __init__(self, message: str, results: list[Result[Any] | DisqueError]) -> None:
        super().__init__(message)
        self.results = results


@dataclass(frozen=True)
class TaskOptions:
    """What a task's calls are sent and run with (``Tasks.task`` documents each)."""

    queue: str = DEFAULT_QUEUE
    retry: int | None = DEFAULT_RETRY
    ttl: int | None = None
    replicate: int | None = None
    max_attempts: int | None = None
    time_limit: float | None = None
    soft_time_limit: float | None = None
    track_started: bool = False
    result: bool = False
    unique_for: int | None = None
    rate_limit: str | None = None
    serializer: str = "json"
    timeout_ms: int = ADD_TIMEOUT_MS


class UnserializableResult(Reject):
    """The task returned a value its serializer cannot write: the run failed, and is
    not tried again (it would return the same)."""


class Task(Generic[P, R]):
    """A function registered with ``Tasks.task``: call it to run it here, ``send``
    it to run it on a worker."""

    def __init__(self, tasks: Tasks, fn: Callable[P, R], name: str, options: TaskOptions) -> None:
        self.tasks = tasks
        self.fn = fn
        self.name = name
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def send(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """Queue a call with these arguments; its handle."""
        return self.tasks.send(self, Message(self.name, list(args), kwargs), self.options, None)

    delay = send  # Celery's name

    def send_with_options(
        self,
        *,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        delay: float | None = None,
        eta: datetime | None = None,
        link: Signature | Chain | None = None,
        link_error: Signature | None = None,
        **options: Any,
    ) -> Result[R]:
        """Queue a call, some options changed for it: ``delay`` (seconds before it
        can run) or ``eta`` (a datetime: when; a naive one is local time), any of
        ``Tasks.task``'s but ``name`` and ``rate_limit``; ``link``: a call (or a
        chain) sent with this one's value once it succeeded, ``link_error``: a
        call sent with its error once it failed for good (canvas.py)."""
        from disque.tasks import canvas

        if eta is not None:
            if delay is not None:
                raise TypeError("a call says delay= or eta=, not both")
            delay = max(0.0, eta.timestamp() - time.time())
        message, call_options = self.message(args, kwargs or {}, options)
        if link is not None:
            message.link = canvas.steps_of(link)
        if link_error is not None:
            message.link_error = [canvas.check_signature(link_error).step(result=False)]
        return self.tasks.send(self, message, call_options, delay)

    def send_many(
        self, calls: Iterable[Sequence[Any] | Signature], **options: Any
    ) -> list[Result[R]]:
        """Queue many calls in one round trip (pipelined ADDJOBs, each replicated as
        one ``send``'s before its reply): each item the positional arguments of one
        call, or a signature of this task (``task.s(1, x=2)``) for keyword arguments;
        ``options`` as ``send_with_options``'s, for all. SendFailed when some were not
        queued (its ``results`` says which)."""
        from disque.tasks.canvas import Signature

        call_options = self.with_options(options)
        for_worker = {k: v for k, v in options.items() if k in WORKER_OPTIONS}
        messages = []
        for call in calls:
            if not isinstance(call, Signature):  # the usual item: arguments, no check
                messages.append(Message(self.name, list(call), {}, options=dict(for_worker)))
                continue
            if call.task is not self:
                raise TypeError(f"send_many of {self.name}: a signature of {call.task.name}")
            messages.append(self.message(call.args, call.kwargs, {**options, **call.options})[0])
        return self.tasks.send_many(self, messages, call_options)

    def message(
        self, args: Sequence[Any], kwargs: dict[str, Any], options: dict[str, Any]
    ) -> tuple[Message, TaskOptions]:
        """A call's message, the options the worker runs it with in it, and the options
        it is sent with."""
        call_options = self.with_options(options)
        message = Message(self.name, list(args), dict(kwargs))
        message.options = {k: v for k, v in options.items() if k in WORKER_OPTIONS}
        return message, call_options

    def with_options(self, options: dict[str, Any]) -> TaskOptions:
        """The task's options, some changed for one call."""
        wrong = set(options) - PER_CALL
        if wrong:
            raise TypeError(
                f"not an option of one call: {', '.join(sorted(wrong))} (per call: "
                f"{', '.join(sorted(PER_CALL))}, delay)"
            )
        changed = replace(self.options, **options)
        check_options(changed)
        return changed

    async def send_async(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """``send`` for asyncio."""
        message = Message(self.name, list(args), kwargs)
        return await self.tasks.send_async(self, message, self.options, None)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A call not sent yet, for a workflow (canvas.py): ``chain(a.s(1), b.s())``.
        In a chain it gets the previous step's value as its first argument."""
        from disque.tasks.canvas import Signature

        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """``s`` whose arguments are all it gets (no previous step's value)."""
        from disque.tasks.canvas import Signature

        return Signature(self, args, kwargs, immutable=True)


def check_options(options: TaskOptions) -> None:
    """Values a worker can run with: said when the call is made, not when it runs."""
    if options.max_attempts is not None and (
        not isinstance(options.max_attempts, int) or options.max_attempts < 1
    ):
        raise ValueError(f"max_attempts is a whole number >= 1, not {options.max_attempts!r}")
    for name in ("time_limit", "soft_time_limit"):
        seconds = getattr(options, name)
        if seconds is not None and (not isinstance(seconds, int | float) or seconds <= 0):
            raise ValueError(f"{name} is a number of seconds > 0, not {seconds!r}")
    soft, hard = options.soft_time_limit, options.time_limit
    if soft is not None and hard is not None and soft >= hard:
        raise ValueError(f"soft_time_limit ({soft} s) comes before time_limit ({hard} s)")
    if options.unique_for is not None and (
        not isinstance(options.unique_for, int) or options.unique_for < 1
    ):
        raise ValueError(f"unique_for is a whole number of seconds, not {options.unique_for!r}")
    if options.rate_limit is not None:
        RateLimit(options.rate_limit)
    serializer(options.serializer)  # an unknown one: said now


def worker_options(task: TaskOptions, message: Message) -> TaskOptions:
    """The options a worker runs a message with: the task's, and the message's own;
    BadMessage when these are not what a producer of ours writes."""
    if not message.options:  # the usual call: the task's own (no copy, no check)
        return task
    options = {k: v for k, v in message.options.items() if k != UNIQUE_LOCK}
    wrong = set(options) - WORKER_OPTIONS
    if wrong:
        raise BadMessage(f'"options" the worker does not know: {", ".join(sorted(wrong))}')
    try:
        changed = replace(task, **options)
        check_options(changed)
    except (TypeError, ValueError) as exc:
        raise BadMessage(f'"options": {exc}') from None
    return changed
