"""Periodic tasks, their schedule kept in Disque itself: no scheduler process.

    @tasks.periodic(every=60)
    def purge_sessions():
        ...

A schedule is a chain of *ticks*: jobs in the queue ``periodic:<task name>``,
each due at a planned time (its DELAY), with copies on two nodes. The worker
that gets a tick sends the task's message, adds the next tick (due a period
after this one's planned time, so ticks do not drift), then acknowledges the
tick. One GETJOB gets a tick, so it fires once however many workers run.

* A node lost is a copy lost: the other copy is queued by its node after the
  tick's RETRY (at most a minute), and the chain goes on.
* The first worker to start finds no tick on any reachable node and adds the
  first one, due at once. Workers that start at the same moment may add one
  each; a tick is dropped, not fired, when another live tick is planned for
  the same slot with a smaller ID, or for a later slot (someone fired this one
  already). A tick found long overdue (no worker ran) fires once, and the next
  is planned from now: missed ticks are not made up.
* At-least-once, as every job: a worker that dies between sending the call and
  acknowledging the tick makes that tick fire again (after the RETRY).
* Ticks are whole seconds (DELAY is), queued within a second of their plan.
* A cron schedule (``cron="0 3 * * *"``, read by croniter, in ``timezone``,
  UTC unless said) plans each tick at the expression's next time; its first
  tick is due at the next of them, not at once.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from disque.client import Client
from disque.errors import DisqueError
from disque.scan import jobs_everywhere
from disque.tasks.message import FORMAT, Message
from disque.worker import LeaveToRetry, dead_letter_copies

if TYPE_CHECKING:
    from disque.job import Job
    from disque.tasks.app import Tasks
    from disque.worker import Worker

log = logging.getLogger("disque.periodic")

TICK_TIMEOUT_MS = 5000
TICK_RETRY_MAX = 60  # a tick whose node was lost is queued by another one within this


@dataclass(frozen=True)
class Schedule:
    task: str  # the task's name
    every: int  # seconds (a cron schedule: the shortest gap between two of its times)
    queue: str  # where its calls go
    cron: str | None = None  # "*/5 * * * *", in ``timezone``
    timezone: str = "UTC"

    @classmethod
    def of_cron(cls, task: str, cron: str, queue: str, timezone: str = "UTC") -> Schedule:
        """A cron schedule (croniter reads the expression); ValueError when it is
        not one, or the timezone is unknown."""
        zone = zone_named(timezone)
        croniter = cron_parser()
        if not croniter.is_valid(cron):
            raise ValueError(f"not a cron expression: {cron!r}")
        start = datetime.now(zone).replace(second=0, microsecond=0)
        times = croniter(cron, start)
        fires = [times.get_next(float) for _ in range(8)]
        every = max(1, int(min(b - a for a, b in itertools.pairwise(fires))))
        return cls(task, every, queue, cron, timezone)

    def first_due(self, now: int) -> int:
        """When the first tick is due: at once, or a cron schedule's next time."""
        return now if self.cron is None else self.cron_after(now)

    def next_due(self, due: int, now: int) -> int:
        """The tick after one planned at ``due``: a period later (a cron schedule: its
        next time), from now when that is past already (missed ticks are not made up)."""
        if self.cron is not None:
            following = self.cron_after(due)
            return following if following > now else self.cron_after(now)
        every_ms = self.every * 1000
        return due + every_ms if due + every_ms > now else now + every_ms

    def cron_after(self, ms: int) -> int:
        assert self.cron is not None
        after = datetime.fromtimestamp(ms / 1000, zone_named(self.timezone))
        return int(cron_parser()(self.cron, after).get_next(float) * 1000)

    @property
    def tick_queue(self) -> str:
        return f"periodic:{self.task}"

    @property
    def retry(self) -> int:
        return min(max(5, self.every), TICK_RETRY_MAX)

    def tick_body(self, due_ms: int) -> bytes:
        fields: dict[str, object] = {"v": FORMAT, "periodic": self.task, "every": self.every}
        if self.cron is not None:
            fields["cron"] = self.cron
        fields["due"] = due_ms
        return json.dumps(fields).encode()


def cron_parser() -> Any:
    try:
        from croniter import croniter  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ImportError(
            "cron schedules need croniter: pip install 'disque-py-client[cron]'"
        ) from None
    return croniter


def zone_named(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {name!r} (an IANA name: 'UTC', 'Europe/Paris')"
        ) from None


@dataclass(frozen=True)
class Tick:
    id: str
    due: int  # planned, ms since the epoch


def install(tasks: Tasks, worker: Worker) -> None:
    """The worker gets each schedule's ticks, and adds the first tick where none is."""
    for schedule in tasks.schedules.values():
        worker.handler(schedule.tick_queue, dead_letter=None)(Ticker(tasks, worker, schedule))
    worker.on_start.append(lambda client: start_schedules(tasks, client))


def start_schedules(tasks: Tasks, client: Client) -> None:
    for schedule in tasks.schedules.values():
        try:
            if not live_ticks(client, schedule):
                due = schedule.first_due(now_ms())
                add_tick(client, schedule, due)
                log.info(
                    "periodic %s: %s, first tick in %d s",
                    schedule.task,
                    f"cron {schedule.cron!r}" if schedule.cron else f"every {schedule.every} s",
                    max(0, (due - now_ms()) // 1000),
                )
        except DisqueError as exc:  # the next worker to start adds it
            log.warning("periodic %s: could not check its tick (%s)", schedule.task, exc)


def now_ms() -> int:
    return int(time.time() * 1000)


def add_tick(client: Client, schedule: Schedule, due_ms: int) -> str:
    delay = max(0, math.ceil((due_ms - now_ms()) / 1000))
    return client.add_job(
        schedule.tick_queue,
        schedule.tick_body(due_ms),
        TICK_TIMEOUT_MS,
        replicate=dead_letter_copies(client),
        retry=schedule.retry,
        ttl=delay + max(600, 10 * schedule.retry),
        delay=delay or None,
    )


def due_of(body: bytes) -> int:
    try:
        return int(json.loads(body)["due"])
    except (ValueError, KeyError, TypeError):
        return 0


def live_ticks(client: Client, schedule: Schedule) -> dict[str, Tick]:
    """The schedule's ticks not acknowledged, on every reachable node."""
    found = jobs_everywhere(client, schedule.tick_queue)
    return {jid: Tick(jid, due_of(shown.get("body", b""))) for jid, shown in found.items()}


class Ticker:
    """The handler of a schedule's tick queue."""

    def __init__(self, tasks: Tasks, worker: Worker, schedule: Schedule) -> None:
        self.tasks = tasks
        self.worker = worker
        self.schedule = schedule

    def __call__(self, job: Job) -> None:
        schedule, client = self.schedule, self.client()
        tick = Tick(job.id, due_of(job.body))
        try:
            if self.superseded(tick, live_ticks(client, schedule)):
                log.info("periodic %s: tick %s dropped (another has it)", schedule.task, job.id)
            else:
                task = self.tasks.registry[schedule.task]
                self.tasks.send(task, Message(task.name), task.options, None, client)
                next_id = add_tick(client, schedule, self.next_due(tick.due))
                log.debug("periodic %s: tick %s fired, next %s", schedule.task, job.id, next_id)
            client.ack(job.id)
        except DisqueError as exc:  # the tick is queued again after its RETRY
            log.warning("periodic %s: tick failed (%s)", schedule.task, exc)
            raise LeaveToRetry from None

    def client(self) -> Client:
        """A client on the node this worker's GETJOB waits on: the call and the next
        tick are added there, so they are delivered at once (a job queued on a node
        no client waits on reaches the others through federation, seconds later)."""
        fetching = self.worker.fetching
        if fetching is not None and fetching.address is not None:
            host, port = fetching.address
            return self.worker.client_on(f"{host}:{port}")
        return self.tasks.client()

    def superseded(self, tick: Tick, live: dict[str, Tick]) -> bool:
        """Another live tick planned for this slot with a smaller ID, or for a later
        slot (this slot fired already)."""
        half = self.schedule.every * 500
        for other in live.values():
            if other.id == tick.id:
                continue
            if other.due > tick.due + half:
                return True
            if abs(other.due - tick.due) <= half and other.id < tick.id:
                return True
        return False

    def next_due(self, due: int) -> int:
        return self.schedule.next_due(due, now_ms())
