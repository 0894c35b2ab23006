"""disque.tasks.census: each task's calls from the nodes' jobs, as JSCAN REPLY
all shows them, copies counted once, non-task jobs and pickle left out."""

from __future__ import annotations

import json
import pickle

import msgpack

from disque.job import Job
from disque.tasks import Message
from disque.tasks.census import tally_tasks
from disque.worker import dead_letter_record


def shown(job_id: str, queue: str, body: bytes, state: str, **more: object) -> dict:
    return {"id": job_id, "queue": queue, "body": body, "state": state, **more}


def test_calls_are_counted_once_by_state_and_dead_letters_by_their_task() -> None:
    charge = Message("shop.charge", [1]).encode()
    packed = msgpack.packb({"v": 1, "task": "shop.charge"})
    dead = dead_letter_record(Job("D-9", "billing", Message("shop.refund").encode()), 5, "E: x")
    jobs = [
        shown("D-1", "billing", charge, "queued"),
        shown("D-1", "billing", charge, "active"),  # its copy on another node
        shown("D-2", "billing", charge, "active", nacks=1),  # running again after a NACK
        shown("D-3", "billing", packed, "active", **{"additional-deliveries": 1}),
        shown("D-4", "billing", charge, "active", delay=60, ctime=1_000 * 1_000_000),
        shown("D-5", "billing:dead", dead, "queued"),
        shown("D-6", "billing", b"plain job", "queued"),
        shown("D-7", "billing", pickle.dumps({"v": 1, "task": "evil"}, protocol=5), "queued"),
        shown("D-8", "result:ab", json.dumps({"v": 1, "id": "ab", "ok": True}).encode(), "queued"),
    ]
    found = tally_tasks(jobs, now_ms=1_000 + 1_000)  # D-4 within its DELAY
    assert set(found) == {"shop.charge", "shop.refund"}
    charge_calls = found["shop.charge"]
    assert (charge_calls.queued, charge_calls.running, charge_calls.failed) == (2, 2, 2)
    assert charge_calls.dead == 0 and charge_calls.queues == {"billing"}
    assert (found["shop.refund"].dead, found["shop.refund"].queues) == (1, {"billing"})
