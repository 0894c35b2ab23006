"""Cancelling calls (revoke) and calls that are sent once (unique), on Disque's
own primitives.

**Revoke.** ``tasks.revoke(handle)`` (or an ID) does three things:

* ACKJOB of the call's job when its ID is known (the handle ``send`` gave):
  Disque deletes it on every node that has a copy, so a call still queued
  never runs. (DELJOB would not do: it deletes one node's copy, and another
  copy is queued again after its RETRY.)
* A *revocation* on every reachable node: a job in the queue ``revoked``
  naming the message ID (one copy, RETRY 0, kept a day). A worker looks at its
  node's revocations at most once a second (QLEN, then QPEEK when there are
  some) and skips a revoked call it fetched: acknowledged, not run. So a call
  known by its message ID alone, or one a worker already holds, is skipped too.
  A call already running is not stopped.
* The outcome REVOKED, kept for the call's readers (``get()`` raises
  TaskFailed of type ``Revoked``).

**Unique.** ``@tasks.task(unique_for=600)``: a call is refused (``AlreadyQueued``)
while another call of the task with the same arguments is queued or running,
for at most ``unique_for`` seconds. The lock is a job in ``unique:<task>:<hash
of the arguments>`` added with MAXLEN 1, which a node refuses atomically when
the queue holds one already, on one node chosen by the key among the reachable
nodes (the same for every producer while the cluster is the same). The worker
deletes the lock when the call ends, succeeded or given up; its TTL frees it
if the worker dies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from disque.errors import DisqueError, MaxLen
from disque.protocol import PRIORITY_FAILING
from disque.scan import reachable
from disque.tasks.message import FORMAT

if TYPE_CHECKING:
    from disque.client import Client
    from disque.protocol import Node
    from disque.tasks.app import Tasks
    from disque.tasks.message import Message

log = logging.getLogger("disque.tasks")

REVOKED_QUEUE = "revoked"
REVOKE_TTL = 24 * 3600  # seconds a revocation is kept (Celery keeps them in memory)
REFRESH = 1.0  # seconds a worker trusts what it knows of revocations for
PEEK_AT_MOST = 10_000  # revocations read at once


class AlreadyQueued(DisqueError):
    """A unique task's call with these arguments is queued or running already."""


class Revocations:
    """What this worker knows of revoked calls (message IDs), refreshed at most once
    a second from its node."""

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks
        self.ids: frozenset[str] = frozenset()
        self.checked = -REFRESH
        self.lock = threading.Lock()

    def revoked(self, message_id: str) -> bool:
        now = time.monotonic()
        if now - self.checked > REFRESH and self.lock.acquire(blocking=False):
            try:
                self.checked = now
                self.ids = self.read(self.tasks.client())
            except DisqueError as exc:  # kept as it was: the next call tries again
                log.info("revocations not read: %s", exc)
            finally:
                self.lock.release()
        return message_id in self.ids

    @staticmethod
    def read(client: Client) -> frozenset[str]:
        if client.qlen(REVOKED_QUEUE) == 0:
            return frozenset()
        ids = set()
        for job in client.qpeek(REVOKED_QUEUE, PEEK_AT_MOST):
            try:
                ids.add(str(json.loads(job.body)["revoked"]))
            except (ValueError, KeyError, TypeError):
                continue
        return frozenset(ids)


def revoke(tasks: Tasks, message_id: str, job_id: str | None) -> None:
    """Revoke a call (see the module): its job acknowledged where known, a
    revocation on every reachable node, its outcome REVOKED."""
    client = tasks.client()
    if job_id is not None:
        client.ack(job_id)
    record = json.dumps({"v": FORMAT, "revoked": message_id, "at": time.time()}).encode()
    for node in reachable(client):
        try:
            tasks.client_on(node).add_job(
                REVOKED_QUEUE, record, 5000, replicate=1, retry=0, ttl=REVOKE_TTL
            )
        except DisqueError as exc:
            log.warning("revocation of %s not added on %s: %s", message_id, node, exc)
    tasks.reply(job_id or "", *revoked_outcome(message_id))


def revoked_outcome(message_id: str) -> tuple[Message, bytes]:
    """What a revoked call's readers find: the call (its reply queue) and a Revoked
    error as its outcome."""
    from disque.tasks.message import Message, encode_result
    from disque.tasks.results import reply_queue

    error = Revoked(f"call {message_id} revoked")
    call = Message("", id=message_id, reply_to=reply_queue(message_id))
    return call, encode_result(message_id, "json", error=error)


class Revoked(DisqueError):
    """The call was revoked before it ran (``tasks.revoke``)."""


# ---- unique ---------------------------------------------------------------------------
def unique_key(message: Message) -> str:
    """The lock queue of a call: its task and a hash of its arguments."""
    arguments = json.dumps([message.args, message.kwargs], sort_keys=True, default=repr)
    return f"unique:{message.task}:{hashlib.sha1(arguments.encode()).hexdigest()[:16]}"


def lock_node(client: Client, key: str) -> Node:
    """The node a key's lock lives on: chosen by the key among the reachable nodes,
    in the order of their IDs, so every producer picks the same one."""
    nodes = sorted(
        (n for n in client.hello().nodes if n.host and n.priority < PRIORITY_FAILING),
        key=lambda n: n.id,
    )
    if not nodes:
        raise DisqueError("no reachable node to keep a unique task's lock on")
    digest = int(hashlib.sha1(key.encode()).hexdigest(), 16)
    return nodes[digest % len(nodes)]


def take_lock(tasks: Tasks, message: Message, seconds: int) -> None:
    """Add the call's lock (MAXLEN 1) or raise AlreadyQueued; the lock's node and
    job ID go in the message, for the worker to delete when the call ends."""
    key = unique_key(message)
    node = lock_node(tasks.client(), key)
    try:
        lock = tasks.client_on(node.addr).add_job(
            key, message.id, 5000, replicate=1, retry=0, ttl=seconds, maxlen=1
        )
    except MaxLen:
        raise AlreadyQueued(
            f"{message.task} with these arguments is queued or running already "
            f"(unique for {seconds} s)"
        ) from None
    message.options["unique_lock"] = {"node": node.id, "job": lock}


def release_lock(tasks: Tasks, lock: dict[str, Any]) -> None:
    """The call ended: its lock goes, on its node (it has one copy there)."""
    try:
        node = tasks.store.home_of_node(str(lock["node"]))
        (tasks.client_on(node) if node else tasks.client()).ack(str(lock["job"]))
    except (DisqueError, KeyError) as exc:  # it goes at its TTL
        log.info("unique lock %s not deleted: %s", lock, exc)
