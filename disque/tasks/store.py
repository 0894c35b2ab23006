"""Where results and states are kept and read: jobs on the node a call was added
to (results.py says why and how). The worker writes (``keep_outcome``,
``keep_state``), any process reads (``peek``, ``fetch``) and forgets.

A call's home is the node its job ID names; a result looked up by ID alone
(another process) has no job ID, so it is looked for on every reachable node.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from disque.errors import ConnectionLost, DisqueError, NoNodeAvailable
from disque.protocol import PRIORITY_FAILING
from disque.tasks.message import FORMAT, BadMessage, describe, serializer
from disque.tasks.results import (
    ResultTimeout,
    getjob_timeout_ms,
    read_result,
    read_state,
    state_queue,
)
from disque.worker import dead_letter_copies

if TYPE_CHECKING:
    from disque.client import Client
    from disque.job import Job
    from disque.tasks.app import Tasks
    from disque.tasks.message import Message
    from disque.tasks.results import Result

log = logging.getLogger("disque.tasks")

ADD_TIMEOUT_MS = 5000
RESULT_RETRY = 30  # a result's copy on a lost node is queued by the other within this
COPIES_FOR = 5.0  # seconds the number of reachable nodes is trusted for (results' copies)


class Store:
    """Results and states of one ``Tasks``."""

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks
        self.copies: tuple[float, int] = (0.0, 0)  # (when learnt, result copies)
        self.lock = threading.Lock()
        # message ID -> (node, job ID) of the state record this worker wrote last
        self.states: dict[str, tuple[str | None, str]] = {}

    # ---- where ------------------------------------------------------------------------
    def home(self, job_id: str | None) -> str | None:
        """The ``host:port`` of the node that made ``job_id`` (the 8 hex digits after
        ``D-`` are its ID's start), from HELLO; None when unknown or failing.

        A result meets its reader there: the worker adds it on the node the call
        was added to, and ``get()`` waits on that node."""
        if not job_id or not job_id.startswith("D-"):
            return None
        return self.home_of_node(job_id[2:10])

    def home_of_node(self, prefix: str | None) -> str | None:
        """The ``host:port`` of the node whose ID starts with ``prefix``, if reachable."""
        if not prefix:
            return None
        client = self.tasks.client()
        if not client.nodes:
            client.hello()
        for node in client.nodes:
            if node.id.startswith(prefix) and node.host and node.priority < PRIORITY_FAILING:
                return node.addr
        return None

    def on(self, node: str | None) -> Client:
        return self.tasks.client_on(node) if node else self.tasks.client()

    def readable_nodes(self, job_id: str | None) -> list[str | None]:
        """Where to look for a call's records: its home first (None: any node),
        then every other reachable node."""
        home = self.home(job_id)
        client = self.tasks.client()
        if not client.nodes:
            client.hello()
        others = [n.addr for n in client.nodes if n.host and n.priority < PRIORITY_FAILING]
        return [home, *(n for n in others if n != home)]

    # ---- the worker's side ------------------------------------------------------------
    def keep_outcome(self, job_id: str, message: Message, body: bytes) -> None:
        """ADDJOB the result (or error) to the reply queue on the call's home, else
        anywhere; the state record is no longer needed."""
        assert message.reply_to is not None
        self.add_at_home(job_id, message.reply_to, body, self.result_copies(), RESULT_RETRY)
        self.drop_state(message.id)

    def keep_state(
        self, job: Job, message: Message, serializer_name: str, state: str, **fields: Any
    ) -> None:
        """Write the call's state on the way (STARTED, RETRY), replacing the last."""
        if message.reply_to is None:
            return
        record = {"v": FORMAT, "id": message.id, "state": state, "at": time.time(), **fields}
        body = serializer(serializer_name).dumps(record)
        try:
            node, job_id = self.add_at_home(job.id, state_queue(message.reply_to), body, 1, 0)
        except DisqueError as exc:  # a state is a hint: the run goes on
            log.info("state %s of %s not kept: %s", state, message.id, exc)
            return
        self.drop_state(message.id)
        with self.lock:
            self.states[message.id] = (node, job_id)

    def drop_state(self, message_id: str) -> None:
        with self.lock:
            last = self.states.pop(message_id, None)
        if last is not None:
            node, job_id = last
            try:
                self.on(node).ack(job_id)
            except DisqueError as exc:  # it goes at its TTL
                log.info("state record %s not deleted: %s", job_id, exc)

    def add_at_home(
        self, job_id: str, queue: str, body: bytes, copies: int, retry: int
    ) -> tuple[str | None, str]:
        """ADDJOB on the call's home node, else on any; (node, new job ID)."""
        node = self.home(job_id)
        if node is not None:
            try:
                return node, self.add(self.tasks.client_on(node), queue, body, copies, retry)
            except (NoNodeAvailable, ConnectionLost) as exc:  # (a second copy at worst)
                log.info(
                    "%s of %s: its node %s is gone (%s): sent anywhere", queue, job_id, node, exc
                )
        return None, self.add(self.tasks.client(), queue, body, copies, retry)

    def add(self, client: Client, queue: str, body: bytes, copies: int, retry: int) -> str:
        return client.add_job(
            queue,
            body,
            ADD_TIMEOUT_MS,
            replicate=copies,
            retry=retry,
            ttl=self.tasks.result_ttl,
        )

    def result_copies(self) -> int:
        """2 where two nodes are reachable, else 1 (HELLO, asked every few seconds)."""
        learnt, copies = self.copies
        now = time.monotonic()
        if now - learnt > COPIES_FOR:
            copies = dead_letter_copies(self.tasks.client())
            self.copies = (now, copies)
        return copies

    # ---- the reader's side ------------------------------------------------------------
    def peek(self, result: Result[Any]) -> dict[str, Any]:
        """The call's latest record: its outcome where one is kept, else its state
        on the way, else ``{"state": "PENDING"}``. Left where it is (QPEEK)."""
        queue = result._require_reply_queue()
        accept = (*self.tasks.accept, result.serializer)
        latest: dict[str, Any] | None = None
        for node in self.readable_nodes(result.job_id):
            try:
                client = self.on(node)
                outcome = client.qpeek(queue, 1)
                if outcome:
                    return read_result(outcome[0].body, accept)
                if latest is None:
                    states = client.qpeek(state_queue(queue), -1)
                    latest = read_state(states[0].body, accept) if states else None
            except (NoNodeAvailable, ConnectionLost):
                continue
            except BadMessage as exc:
                log.warning("result of %s unreadable: %s", result.message_id, exc)
        return latest or {"state": "PENDING"}

    def fetch(self, result: Result[Any], timeout: float | None) -> dict[str, Any]:
        """The call's outcome: peeked at where it is kept (its home first, then the
        other nodes: a reader's GETJOB may have moved it), else waited for with a
        GETJOB on its home (any node when unknown or gone: federation brings it)
        and put back at once (NACK) for the next reader."""
        queue = result._require_reply_queue()
        nodes = self.readable_nodes(result.job_id)
        for node in nodes:
            try:
                kept = self.on(node).qpeek(queue, 1)
            except (NoNodeAvailable, ConnectionLost):
                continue
            if kept:
                return read_result(kept[0].body, (*self.tasks.accept, result.serializer))
        node = nodes[0]  # its home
        client, jobs = self.on(node), None
        if node is not None:
            try:
                jobs = client.get_job(queue, timeout=getjob_timeout_ms(timeout))
            except NoNodeAvailable:  # its home is gone: the result comes anywhere
                client = self.tasks.client()
        if jobs is None:
            jobs = client.get_job(queue, timeout=getjob_timeout_ms(timeout))
        if not jobs:
            raise ResultTimeout(f"no result for {result.message_id} within {timeout} s")
        client.nack(jobs[0].id)
        return read_result(jobs[0].body, (*self.tasks.accept, result.serializer))

    async def fetch_async(self, result: Result[Any], timeout: float | None) -> dict[str, Any]:
        """``fetch`` for asyncio (its home only, else any node: no sweep)."""
        queue = result._require_reply_queue()
        node = self.home(result.job_id)
        client = self.tasks.async_client(node)
        try:
            kept = await client.qpeek(queue, 1)
            jobs = kept or await client.get_job(queue, timeout=getjob_timeout_ms(timeout))
        except NoNodeAvailable:
            if node is None:
                raise
            client = self.tasks.async_client()
            kept = await client.qpeek(queue, 1)
            jobs = kept or await client.get_job(queue, timeout=getjob_timeout_ms(timeout))
        if not jobs:
            raise ResultTimeout(f"no result for {result.message_id} within {timeout} s")
        if not kept:
            await client.nack(jobs[0].id)
        return read_result(jobs[0].body, (*self.tasks.accept, result.serializer))

    def forget(self, result: Result[Any]) -> None:
        """ACKJOB the call's outcome and state wherever they are kept."""
        queue = result._require_reply_queue()
        for node in self.readable_nodes(result.job_id):
            try:
                client = self.on(node)
                jobs = [*client.qpeek(queue, 100), *client.qpeek(state_queue(queue), 100)]
                client.ack(*(job.id for job in jobs))
            except (NoNodeAvailable, ConnectionLost):
                continue


def error_record(error: BaseException) -> dict[str, str]:
    """The error of a RETRY state (as a failure carries it, without the traceback)."""
    described = describe(error)
    described.pop("traceback", None)
    return described
