"""Executor-side fetching for the stream: GETJOB in the tasks, a receipt per task.

The driver plans a micro-batch as so many jobs to take from each node
(:class:`FetchPartition`: the node, and (queues, count) asks); each task runs
on an executor, takes them with ``GETJOB NOHANG ... WITHCOUNTERS`` on its
node, and leaves a *receipt* there before it yields a row: a job in the queue
``disque-spark:fetched:<run>:<seq>:<task>`` (``REPLICATE 1 RETRY 0``, a day's
TTL) whose body is the IDs it took. So:

* a retried task yields the very same rows: it finds the receipt (QPEEK) and
  reads those jobs again (SHOW) instead of taking new ones;
* the driver, which never sees the rows, learns from the receipts which jobs
  a batch holds: ``commit`` sends ACKJOB for them, ``stop`` NACK for those of
  batches never committed, and the receipts are deleted;
* two receipts for one task (speculative attempts, both finished) mean one
  attempt's rows were thrown away, and nobody knows which: neither set is
  acknowledged, both come back after their RETRY time (at-least-once);
* a task that dies after GETJOB and before its receipt leaves jobs nobody
  will acknowledge: they come back after their RETRY time, as Disque intends.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from pyspark.sql.datasource import InputPartition

from disque.tls import TLS
from disque_spark.client import DisqueError, connect, describe, job_from_pairs
from disque_spark.schema import Same

log = logging.getLogger("disque_spark")

RECEIPT_PREFIX = "disque-spark:fetched:"
RECEIPT_TTL = 86400  # a receipt nobody settles (the driver died) goes away after a day
ACK_CHUNK = 1000


def receipt_queue(run: str, seq: int, task: int) -> str:
    return f"{RECEIPT_PREFIX}{run}:{seq}:{task}"


class FetchPartition(InputPartition):
    """One task of a micro-batch: what to take from one node."""

    def __init__(
        self,
        run: str,
        seq: int,
        task: int,
        node: tuple[str, str, int],
        asks: list[tuple[list[str], int]],
    ) -> None:
        super().__init__(task)
        self.run = run
        self.seq = seq
        self.task = task
        self.node_id, self.host, self.port = node
        self.asks = asks  # [(queues, most jobs), ...], one GETJOB form each

    @property
    def receipt(self) -> str:
        return receipt_queue(self.run, self.seq, self.task)


class Connection:
    """How tasks and the driver reach a node: the reader's credentials."""

    def __init__(self, password: str | None, tls: TLS | None, timeout: float) -> None:
        self.password = password
        self.tls = tls
        self.timeout = timeout

    def open(self, host: str, port: int) -> redis.Redis:
        return connect(host, port, self.password, self.timeout, self.tls)


# ---- on the executor ---------------------------------------------------------------
class Delivered:
    """The jobs one task took, column by column: the rows it yields are built from
    these lists in a few C calls (a dict per job cost more than the fetch)."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.ids: list[bytes] = []
        self.queues: list[bytes | None] = []
        self.bodies: list[bytes] = []
        self.nacks: list[int | None] = []
        self.deliveries: list[int | None] = []

    def __len__(self) -> int:
        return len(self.ids)

    def add_getjob_reply(self, reply: list[list[Any]]) -> None:
        """The jobs of a GETJOB ... WITHCOUNTERS reply: [queue, id, body, "nacks", n,
        "additional-deliveries", m] each."""
        self.queues += [item[0] for item in reply]
        self.ids += [item[1] for item in reply]
        self.bodies += [item[2] for item in reply]
        self.nacks += [item[4] if len(item) > 4 else None for item in reply]
        self.deliveries += [item[6] if len(item) > 6 else None for item in reply]

    def add_shown(self, job: dict[str, Any]) -> None:
        """A job as SHOW gives it (job_from_pairs), for a retried task."""
        self.ids.append(job["id"].encode())
        queue = job.get("queue")
        self.queues.append(queue.encode() if queue is not None else None)
        self.bodies.append(job.get("body"))
        self.nacks.append(job.get("nacks"))
        self.deliveries.append(job.get("additional_deliveries"))

    def columns(self, start: int = 0, stop: int | None = None) -> dict[str, Any]:
        """Rows start..stop as the stream's columns (see RowBuilder.batch)."""
        return {
            "id": self.ids[start:stop],
            "queue": self.queues[start:stop],
            "body": self.bodies[start:stop],
            "nacks": self.nacks[start:stop],
            "additional_deliveries": self.deliveries[start:stop],
            "state": Same("active"),
            "node": Same(self.node_id),
        }


def fetch(part: FetchPartition, conn: Connection, batch_size: int) -> Delivered:
    """The jobs of this task: the ones its receipt names if an earlier attempt left
    one, else new ones, taken with GETJOB and recorded in a receipt."""
    client = conn.open(part.host, part.port)
    try:
        receipts = client.execute_command("QPEEK", part.receipt, 1)
        if receipts:
            return _jobs_again(client, part, receipts[0][2].split())
        jobs = _take(client, part, batch_size)
        if jobs:
            client.execute_command(
                "ADDJOB",
                part.receipt,
                b" ".join(jobs.ids),
                0,
                "REPLICATE",
                1,
                "RETRY",
                0,
                "TTL",
                RECEIPT_TTL,
            )
        return jobs
    except redis.ResponseError as exc:
        if str(exc).startswith("LEAVING"):
            return Delivered(part.node_id)  # the node leaves: its jobs are read elsewhere
        raise DisqueError(f"disque: reading from {part.host}:{part.port} failed: {exc}") from None
    finally:
        client.close()


def _take(client: redis.Redis, part: FetchPartition, batch_size: int) -> Delivered:
    jobs = Delivered(part.node_id)
    for queues, most in part.asks:
        left = most
        while left > 0:
            want = min(left, batch_size)
            reply = client.execute_command(
                "GETJOB", "NOHANG", "COUNT", want, "WITHCOUNTERS", "FROM", *queues
            )
            got = len(reply or ())
            if got:
                jobs.add_getjob_reply(reply)
            left -= got
            if got < want:
                break  # ran dry
    return jobs


def delivered_job(item: list[Any], node_id: str) -> dict[str, Any]:
    """A job as GETJOB ... WITHCOUNTERS delivered it, as the stream's row dict (the
    driver-side fetch)."""
    return {
        "queue": item[0].decode("utf-8", "replace"),
        "id": item[1].decode(),
        "body": item[2],
        "nacks": item[4] if len(item) > 4 else None,
        "additional_deliveries": item[6] if len(item) > 6 else None,
        "state": "active",
        "node": node_id,
    }


def _jobs_again(client: redis.Redis, part: FetchPartition, ids: list[bytes]) -> Delivered:
    """A retried task: the jobs the first attempt took, read with SHOW (gone ones,
    acknowledged meanwhile by someone else, are left out)."""
    pipe = client.pipeline(transaction=False)
    for jid in ids:
        pipe.execute_command("SHOW", jid)
    jobs = Delivered(part.node_id)
    for flat in pipe.execute(raise_on_error=False):
        if isinstance(flat, list) and flat:
            jobs.add_shown(job_from_pairs(flat))
    return jobs


# ---- on the driver -----------------------------------------------------------------
def settle(client: redis.Redis, receipt: str, command: str) -> tuple[int, int]:
    """ACKJOB (a committed batch) or NACK (one never committed) the jobs a task's
    receipt names, on the node that holds it, then delete the receipt. (jobs named,
    the command's count). The commands go pipelined, ACK_CHUNK IDs each."""
    receipts = client.execute_command("QPEEK", receipt, 2) or []
    done = named = 0
    if len(receipts) == 1:
        ids = receipts[0][2].split()
        named = len(ids)
        pipe = client.pipeline(transaction=False)
        for i in range(0, len(ids), ACK_CHUNK):
            pipe.execute_command(command, *ids[i : i + ACK_CHUNK])
        done = sum(int(n) for n in pipe.execute())
    elif receipts:
        log.warning(
            "disque: task %s ran twice to the end (speculation?): its jobs are left to "
            "their RETRY time",
            receipt,
        )
    for item in receipts:
        client.execute_command("DELJOB", item[1])
    return named, done


def settle_all(planned: list[FetchPartition], conn: Connection, command: str) -> tuple[int, int]:
    """settle() every task of some batches, the nodes in parallel (a thread and a
    connection per node: the nodes are separate processes, and a commit waits for
    the slowest); a node that cannot be reached is logged (its jobs come back after
    their RETRY time). The sums: (jobs named, the commands' counts)."""
    by_node: dict[tuple[str, int], list[FetchPartition]] = {}
    for part in planned:
        by_node.setdefault((part.host, part.port), []).append(part)
    if not by_node:
        return 0, 0
    with ThreadPoolExecutor(len(by_node), thread_name_prefix="disque-settle") as pool:
        sums = list(pool.map(lambda item: _settle_on(conn, *item, command), by_node.items()))
    return sum(n for n, _ in sums), sum(d for _, d in sums)


def _settle_on(
    conn: Connection, node: tuple[str, int], parts: list[FetchPartition], command: str
) -> tuple[int, int]:
    named = done = 0
    client: redis.Redis | None = None
    try:
        for part in parts:
            try:
                client = client or conn.open(*node)
                n, d = settle(client, part.receipt, command)
                named += n
                done += d
            except (redis.RedisError, OSError) as exc:
                log.warning(
                    "disque: %s of the jobs of %s failed on %s:%d (%s); they come back "
                    "after their RETRY time",
                    command,
                    part.receipt,
                    part.host,
                    part.port,
                    describe(exc),
                )
    finally:
        if client is not None:
            client.close()
    return named, done
