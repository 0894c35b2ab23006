"""Dead letters: list a dead-letter queue over the whole cluster, and replay them.

The worker (``Worker.bury``) dead-letters a job by ADDJOB of a JSON record
(``dead_letter_record``) to ``<queue>:dead``, with 2 copies: it is queued on
the node it was added on, and its other copy waits, unqueued, for its RETRY
to stand in. So one node's QPEEK misses the dead letters queued elsewhere,
and a JSCAN of two nodes shows each one twice: every node HELLO lists is
asked (JSCAN QUEUE ... REPLY all, every live state) and the copies are
merged by ID.

    from disque import Client
    from disque.dead_letters import list_dead_letters, replay

    with Client("127.0.0.1:7711") as client:
        letters = list_dead_letters(client, "emails")      # or "emails:dead"
        for done in replay(client, letters):
            print(done.letter.id, "->", done.job_id or done.error)

A replay adds the original body to the original queue first and only then
acknowledges the dead letter, as the worker buries a job: never in neither
place, at worst in both (at-least-once).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from disque.client import Client
from disque.errors import DisqueError
from disque.protocol import PRIORITY_FAILING, text

DEAD_SUFFIX = ":dead"  # the worker's dead-letter queue is <queue>:dead
LIVE_STATES = ("wait-repl", "active", "queued")  # an acked dead letter is on its way out
REPLAY_COPIES = 3  # Disque's default replication, fewer on a smaller cluster
REPLAY_TIMEOUT_MS = 10_000  # the replayed ADDJOB's replication timeout
NODE_TIMEOUT = 5.0  # seconds for each node's replies: a paused node must not hang a scan


class NotARecord(ValueError):
    """A dead-letter queue job whose body is not the worker's JSON record."""


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter, merged from its copies. ``node`` is where it is queued;
    None when no node reached has it queued (a consumer took it, a node restarted,
    or its queued copy is on a node that did not answer): its RETRY queues it
    again. ``problem`` says why the body is not a record; the record's fields
    are None then and it cannot be replayed."""

    id: str  # the dead letter's own job ID
    dead_queue: str  # the queue it is in: orders:dead
    node: str | None  # host:port where it is queued
    holders: tuple[str, ...]  # host:port of every node reached that holds a copy
    queue: str | None  # the original queue
    original_id: str | None  # the original job's ID
    attempts: int | None
    error: str | None  # "Type: message", as the handler raised it
    body: bytes | None  # the original body
    ctime_ms: int | None  # when it was dead-lettered (ms since the epoch, its node's clock)
    raw: bytes = b""  # the dead letter's own body, as stored
    problem: str | None = None

    @property
    def replayable(self) -> bool:
        return self.problem is None

    def age(self, now: float | None = None) -> float | None:
        """Seconds since it was dead-lettered (None when the node gave no ctime)."""
        if self.ctime_ms is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.ctime_ms / 1000)


@dataclass(frozen=True)
class Found:
    """What a scan found: the dead letters, oldest first, and the nodes that did not
    answer (host:port or node ID -> why): their dead letters with no copy on
    another node are missing."""

    letters: list[DeadLetter]
    unreachable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Replayed:
    """One replay: ``job_id`` is the new job on the original queue (None: not added);
    ``error`` says what failed. Both set: added, but the dead letter could not be
    acknowledged, so a second replay would run it twice."""

    letter: DeadLetter
    job_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.job_id is not None and self.error is None


def dead_queue(queue: str) -> str:
    """``orders`` and ``orders:dead`` both name the dead-letter queue of orders."""
    return queue if queue.endswith(DEAD_SUFFIX) else queue + DEAD_SUFFIX


def parse_record(body: bytes) -> dict[str, Any]:
    """The worker's record as a dict with ``queue``, ``id``, ``attempts``, ``error``
    and ``body`` (bytes, base64 decoded); NotARecord, saying why, otherwise.
    Only the queue and the body are required: they are what a replay needs."""
    try:
        record = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise NotARecord("its body is not JSON") from None
    if not isinstance(record, dict):
        raise NotARecord(f"its body is JSON but not an object ({type(record).__name__})")
    queue = record.get("queue")
    if not isinstance(queue, str) or not queue:
        raise NotARecord('its JSON has no "queue" (the original queue)')
    if isinstance(record.get("body"), str):
        original = record["body"].encode()
    elif isinstance(record.get("body_base64"), str):
        try:
            original = base64.b64decode(record["body_base64"], validate=True)
        except binascii.Error:
            raise NotARecord('its "body_base64" is not base64') from None
    else:
        raise NotARecord('its JSON has no "body" or "body_base64" (the original body)')
    attempts = record.get("attempts")
    return {
        "queue": queue,
        "id": record["id"] if isinstance(record.get("id"), str) else None,
        "attempts": attempts if isinstance(attempts, int) else None,
        "error": record["error"] if isinstance(record.get("error"), str) else None,
        "body": original,
    }


def letters_from(copies: Iterable[tuple[str, dict[str, Any]]]) -> list[DeadLetter]:
    """Dead letters from (node, job as JSCAN REPLY all shows it) pairs, one per job ID
    however many copies were seen, oldest first."""
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for node, shown in copies:
        seen.setdefault(text(shown.get("id")), []).append((node, shown))
    letters = [_letter(job_id, held) for job_id, held in seen.items() if job_id]
    return sorted(letters, key=lambda letter: (letter.ctime_ms or 0, letter.id))


def _letter(job_id: str, held: list[tuple[str, dict[str, Any]]]) -> DeadLetter:
    queued = [node for node, shown in held if text(shown.get("state")) == "queued"]
    shown = held[0][1]
    raw = shown.get("body")
    raw = raw if isinstance(raw, bytes) else text(raw).encode()
    ctime = shown.get("ctime")
    try:
        record: dict[str, Any] = parse_record(raw)
        problem = None
    except NotARecord as exc:
        record, problem = {}, f"not a dead-letter record: {exc}"
    return DeadLetter(
        id=job_id,
        dead_queue=text(shown.get("queue")),
        node=queued[0] if queued else None,
        holders=tuple(dict.fromkeys(node for node, _ in held)),
        queue=record.get("queue"),
        original_id=record.get("id"),
        attempts=record.get("attempts"),
        error=record.get("error"),
        body=record.get("body"),
        ctime_ms=ctime // 1_000_000 if isinstance(ctime, int) else None,
        raw=raw,
        problem=problem,
    )


# ---- the nodes --------------------------------------------------------------------


def node_label(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def on_node(client: Client, address: str, timeout: float | None = NODE_TIMEOUT) -> Client:
    """A client that stays on one node, with ``client``'s password and TLS, each reply
    within ``timeout`` seconds (None: no limit): JSCAN and DEQUEUE are one node's,
    and a dead letter's ACKJOB goes to its node first."""
    return Client(
        address,
        password=client.password,
        tls=client.tls,
        stay=True,
        max_moves=1,
        socket_timeout=timeout,
        connect_timeout=min(client.connect_timeout, timeout or NODE_TIMEOUT),
    )


def node_addresses(client: Client) -> Iterator[tuple[str, str | None]]:
    """(node ID, host:port) of every node HELLO lists, failing ones too (they may
    answer); None for a node that announces no address but is not the one
    ``client`` is on (a lone node that met no one announces none)."""
    hello = client.hello()
    for node in hello.nodes:
        if node.host:
            yield node.id, node_label(node.host, node.port)
        elif node.id == hello.myid and client.address is not None:
            yield node.id, node_label(client.address[0], node.port)
        else:
            yield node.id, None


def find_dead_letters(
    client: Client, queue: str, node_timeout: float | None = NODE_TIMEOUT
) -> Found:
    """The dead letters of ``queue`` (or ``queue:dead``) on every node that answers
    (each within ``node_timeout`` seconds; None: no limit), each once, oldest
    first, and the nodes that did not answer."""
    name = dead_queue(queue)
    copies: list[tuple[str, dict[str, Any]]] = []
    unreachable: dict[str, str] = {}
    for node_id, address in node_addresses(client):
        if address is None:
            unreachable[node_id[:8]] = "HELLO gives no address for it"
            continue
        with on_node(client, address, node_timeout) as one:
            try:
                copies += [
                    (address, shown) for shown in one.jscan_jobs(queue=name, states=LIVE_STATES)
                ]
            except DisqueError as exc:
                unreachable[address] = str(exc) or type(exc).__name__
    return Found(letters_from(copies), unreachable)


def list_dead_letters(
    client: Client, queue: str, node_timeout: float | None = NODE_TIMEOUT
) -> list[DeadLetter]:
    """The dead letters of ``queue`` (or ``queue:dead``) on every node that answers,
    each once however many copies it has, oldest first."""
    return find_dead_letters(client, queue, node_timeout).letters


# ---- replay -----------------------------------------------------------------------


def replay_copies(client: Client) -> int:
    """Copies of a replayed job: Disque's default 3, or as many nodes as are up (HELLO:
    neither failing nor leaving), so that ADDJOB does not wait for a node that is down."""
    up = sum(1 for node in client.hello().nodes if node.priority < PRIORITY_FAILING)
    return max(1, min(REPLAY_COPIES, up))


def replay(
    client: Client,
    letters: Iterable[DeadLetter],
    *,
    replicate: int | None = None,
    retry: int | None = None,
    ttl: int | None = None,
    timeout_ms: int = REPLAY_TIMEOUT_MS,
    node_timeout: float | None = NODE_TIMEOUT,
) -> list[Replayed]:
    """Put each dead letter's original body back on its original queue (ADDJOB on
    ``client``'s node, ``replicate`` copies: replay_copies unless given; RETRY and
    TTL the node's defaults unless given), then acknowledge the dead letter.
    Never raises for one letter: each outcome says what happened to it."""
    letters = list(letters)
    if not letters:
        return []
    copies = replicate or replay_copies(client)
    with ExitStack() as stack:
        nodes: dict[str, Client] = {}

        def node(address: str) -> Client:
            if address not in nodes:
                nodes[address] = stack.enter_context(on_node(client, address, node_timeout))
            return nodes[address]

        return [
            _replay_one(client, node, letter, copies, retry, ttl, timeout_ms) for letter in letters
        ]


def _replay_one(
    client: Client,
    node: Callable[[str], Client],
    letter: DeadLetter,
    copies: int,
    retry: int | None,
    ttl: int | None,
    timeout_ms: int,
) -> Replayed:
    if letter.problem is not None or letter.queue is None or letter.body is None:
        return Replayed(letter, error=f"{letter.problem}: left in {letter.dead_queue}")
    # Claim it: DEQUEUE where it is queued answers 1 once, so a second replay (or a
    # consumer of the dead queue) running now does not get it too. A crash before
    # the ACKJOB leaves it unqueued, not lost: its RETRY queues it again.
    if letter.node is not None:
        try:
            if node(letter.node).dequeue(letter.id) != 1:
                return Replayed(
                    letter,
                    error=f"no longer queued on {letter.node} (taken or replayed meanwhile?): "
                    "list the dead letters again",
                )
        except DisqueError as exc:
            return Replayed(letter, error=f"DEQUEUE on {letter.node}: {exc}")
    try:
        job_id = client.add_job(
            letter.queue, letter.body, timeout_ms, replicate=copies, retry=retry, ttl=ttl
        )
    except DisqueError as exc:  # ConnectionLost too: it may have been added
        if letter.node is not None:
            try:
                node(letter.node).enqueue(letter.id)  # as it was: queued, listed, replayable
            except DisqueError:
                pass  # unqueued: its RETRY queues it again
        return Replayed(letter, error=f"ADDJOB {letter.queue}: {exc}: the dead letter is kept")
    # The job is on its queue again and the dead letter not yet acknowledged: a crash
    # here leaves both, and a second replay runs the job one more time (at-least-once,
    # as the worker's bury, never at-most-once: no job is lost).
    errors = []
    for address in dict.fromkeys([*filter(None, [letter.node]), *letter.holders]):
        try:
            node(address).ack(letter.id)  # there first: it knows every copy, and ends them
            return Replayed(letter, job_id)
        except DisqueError as exc:
            errors.append(f"{address}: {exc}")
    return Replayed(
        letter,
        job_id,
        f"replayed as {job_id}, but ACKJOB {letter.id} failed ({'; '.join(errors)}): "
        "acknowledge it by hand, or a second replay runs the job twice",
    )
