"""Stub mode: tasks sent and run in this process, with no node (applications' tests).

    tasks = Tasks(stub=True)              # or Tasks(..., stub=os.environ.get("TESTING") == "1")

    def test_charge():
        handle = charge.send(42, eur=5)
        tasks.stub.run_pending()          # runs every waiting call, and those they send
        assert handle.get() == "receipt-42"

Messages are encoded and decoded as on a cluster (an argument JSON cannot
carry fails here too), middleware runs, a failing call is tried again at
once up to its ``max_attempts``, and results come back through ``get()``.
What a stub does not do: delays (a delayed call runs with the rest), time
limits, RETRY and TTL, periodic ticks (call the function). ``eager=True``
runs each call as it is sent, as Celery's eager mode.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from disque.job import Job
from disque.middleware import notify
from disque.tasks.message import load
from disque.tasks.results import PENDING, Result, ResultTimeout, read_result
from disque.worker import Call, Reject, Retry, notify_before

if TYPE_CHECKING:
    from disque.tasks.app import Tasks
    from disque.tasks.message import Message
    from disque.tasks.task import TaskOptions

DEFAULT_MAX_ATTEMPTS = 5  # as Worker's


class StubFailure(Exception):
    """``run_pending(fail_fast=True)``: a call failed for good; its exception is the cause."""


class Stub:
    def __init__(self, tasks: Tasks, eager: bool) -> None:
        self.tasks = tasks
        self.eager = eager
        self.pending: deque[Job] = deque()
        self.results: dict[str, dict[str, Any]] = {}  # message ID -> the result's fields
        self.chords: dict[str, dict[int, dict[str, Any]]] = {}  # chord ID -> its parts
        self.locks: set[str] = set()  # unique tasks' calls waiting or running
        self.failures: list[tuple[Job, BaseException]] = []  # calls that failed for good
        self.dead_letters: list[Job] = []
        self.running = False

    def add(self, message: Message, body: bytes, options: TaskOptions) -> Result[Any]:
        job = Job(id=f"stub-{message.id}", queue=options.queue, body=body)
        self.pending.append(job)
        if self.eager and not self.running:
            self.run_pending()
        return Result(self.tasks, message.id, job.id, message.reply_to, options.serializer)

    def run_pending(self, fail_fast: bool = True) -> int:
        """Run the calls waiting, and the calls they send, until none is left; how
        many ran. ``fail_fast``: a call that failed its last attempt raises
        StubFailure (else it is kept in ``failures``)."""
        ran = 0
        self.running = True
        try:
            while self.pending:
                job = self.pending.popleft()
                ran += 1
                error = self.run(job)
                if error is not None and fail_fast:
                    raise StubFailure(f"{job.id} failed: {error!r}") from error
        finally:
            self.running = False
        return ran

    def run(self, job: Job) -> BaseException | None:
        """One call, tried up to its max_attempts; the error it ended on, if any."""
        call = self.tasks.prepare(job)
        attempts = call.max_attempts or DEFAULT_MAX_ATTEMPTS
        middleware = self.tasks.middleware
        for attempt in range(1, attempts + 1):
            try:
                notify_before(middleware, call)
                result = run_call(call)
            except Exception as exc:
                if not isinstance(exc, Retry):
                    notify(middleware, "on_failure", call, exc)
                if attempt < attempts and not isinstance(exc, Reject):
                    notify(middleware, "on_retry", call, exc, 0)
                    continue
                notify(middleware, "on_dead_letter", call, exc, f"{job.queue}:dead")
                self.dead_letters.append(job)
                self.failures.append((job, exc))
                if call.on_given_up is not None:
                    call.on_given_up(exc)
                return exc
            notify(middleware, "after", call, result)
            if call.on_done is not None:
                call.on_done(result)
            return None
        return None

    def keep_result(self, message_id: str, body: bytes) -> None:
        self.results[message_id] = read_result(body, ("json", "msgpack", "pickle"))

    def take_lock(self, message: Message) -> None:
        """A unique task's call: refused while another with its arguments waits."""
        from disque.tasks.revoke import AlreadyQueued, unique_key

        key = unique_key(message)
        if key in self.locks:
            raise AlreadyQueued(f"{message.task} with these arguments is queued already")
        self.locks.add(key)
        message.options["unique_lock"] = {"node": "stub", "job": key}

    def release_lock(self, message: Message) -> None:
        lock = message.options.get("unique_lock")
        if isinstance(lock, dict):
            self.locks.discard(str(lock.get("job")))

    def revoke(self, message_id: str) -> None:
        """A call revoked: taken out of what waits, its result REVOKED."""
        from disque.tasks.revoke import revoked_outcome

        job_id = f"stub-{message_id}"
        self.pending = deque(job for job in self.pending if job.id != job_id)
        self.tasks.reply(job_id, *revoked_outcome(message_id))

    def state_of(self, result: Result[Any]) -> dict[str, Any]:
        """A call's state: its outcome once it ran, else PENDING (nothing is run)."""
        return self.results.get(result.message_id) or {"state": PENDING}

    def chord_part(self, chord: dict[str, Any], body: bytes) -> None:
        """A chord's part, kept here; the last one sends the callback (canvas.py)."""
        from disque.tasks.canvas import finish_chord

        fields, _ = load(body, ("json", "msgpack", "pickle"))
        parts = self.chords.setdefault(str(chord["id"]), {})
        parts.setdefault(int(fields["index"]), fields)
        if len(parts) == int(chord["size"]):
            del self.chords[str(chord["id"])]
            finish_chord(self.tasks, chord, [parts[i] for i in range(len(parts))])

    def result_of(self, result: Result[Any]) -> dict[str, Any]:
        """A call's result, running what is pending first (``get()`` in stub mode)."""
        if result.message_id not in self.results and not self.running:
            self.run_pending(fail_fast=False)
        fields = self.results.get(result.message_id)
        if fields is None:
            raise ResultTimeout(f"stub: no result for {result.message_id} (not run yet?)")
        return fields


def run_call(call: Call) -> Any:
    if call.is_async:
        return asyncio.run(call.run())
    return call.run()
