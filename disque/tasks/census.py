"""How many calls of each task the cluster holds, from scans of its nodes' jobs
(JSCAN ... REPLY all, as SHOW shows each): what `disque-tui`'s Tasks tab shows.

A call is counted once however many copies it has: *queued* when a node has it
queued (or it waits its DELAY), else *running* (delivered to a worker and not
acknowledged yet); *failed* counts the calls alive that failed at least once
(NACKed, or delivered again after their RETRY); *dead* the dead letters in
``<queue>:dead`` whose original message names the task. The task is read from
the body: a task message in JSON or msgpack (never pickle: reading it runs
code). Jobs that are not task calls (results, ticks, plain jobs) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from disque.dead_letters import NotARecord, parse_record
from disque.protocol import text
from disque.scan import in_delay
from disque.tasks.message import BadMessage, load

READABLE = ("json", "msgpack")


@dataclass
class TaskTally:
    task: str
    queues: set[str] = field(default_factory=set)
    queued: int = 0
    running: int = 0
    failed: int = 0
    dead: int = 0


def task_of_body(body: bytes) -> str | None:
    """The task a body calls, when it is a task message we may read."""
    try:
        fields, _ = load(body, READABLE)
    except (BadMessage, ImportError):
        return None
    task = fields.get("task")
    return task if isinstance(task, str) and task else None


def task_of_dead_letter(body: bytes) -> tuple[str, str] | None:
    """(task, original queue) of a dead letter whose original job was a task call."""
    try:
        record = parse_record(body)
    except NotARecord:
        return None
    task = task_of_body(record["body"])
    return (task, record["queue"]) if task is not None else None


def tally_tasks(jobs: Iterable[Mapping[str, Any]], now_ms: int) -> dict[str, TaskTally]:
    """{task: its calls} from every node's jobs (copies counted once)."""
    seen: dict[str, Mapping[str, Any]] = {}
    queued: set[str] = set()
    for shown in jobs:
        job_id = text(shown.get("id"))
        seen.setdefault(job_id, shown)
        if text(shown.get("state")) == "queued":
            queued.add(job_id)
    found: dict[str, TaskTally] = {}
    for job_id, shown in seen.items():
        queue, body = text(shown.get("queue")), shown.get("body")
        if not isinstance(body, bytes | str):
            continue
        raw = body.encode() if isinstance(body, str) else body
        if queue.endswith(":dead"):
            dead = task_of_dead_letter(raw)
            if dead is not None:
                tally = found.setdefault(dead[0], TaskTally(dead[0]))
                tally.dead += 1
                tally.queues.add(dead[1])
            continue
        task = task_of_body(raw)
        if task is None:
            continue
        tally = found.setdefault(task, TaskTally(task))
        tally.queues.add(queue)
        if job_id in queued or in_delay(shown, now_ms):
            tally.queued += 1
        else:
            tally.running += 1
        if number(shown.get("nacks")) or number(shown.get("additional-deliveries")):
            tally.failed += 1
    return found


def number(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
