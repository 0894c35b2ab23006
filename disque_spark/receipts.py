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
from typing import Any

import redis
from pyspark.sql.datasource import InputPartition

from disque.tls import TLS
from disque_spark.client import DisqueError, connect, describe, job_from_pairs

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
def fetch(part: FetchPartition, conn: Connection, batch_size: int) -> list[dict[str, Any]]:
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
                " ".join(job["id"] for job in jobs),
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
            return []  # the node leaves: its jobs go to the others, read there next time
        raise DisqueError(f"disque: reading from {part.host}:{part.port} failed: {exc}") from None
    finally:
        client.close()


def _take(client: redis.Redis, part: FetchPartition, batch_size: int) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    for queues, most in part.asks:
        left = most
        while left > 0:
            want = min(left, batch_size)
            reply = client.execute_command(
                "GETJOB", "NOHANG", "COUNT", want, "WITHCOUNTERS", "FROM", *queues
            )
            got = [delivered_job(item, part.node_id) for item in reply or ()]
            jobs += got
            left -= len(got)
            if len(got) < want:
                break  # ran dry
    return jobs


def delivered_job(item: list[Any], node_id: str) -> dict[str, Any]:
    """A job as GETJOB ... WITHCOUNTERS delivered it, as the stream's row dict."""
    return {
        "queue": item[0].decode("utf-8", "replace"),
        "id": item[1].decode(),
        "body": item[2],
        "nacks": item[4] if len(item) > 4 else None,
        "additional_deliveries": item[6] if len(item) > 6 else None,
        "state": "active",
        "node": node_id,
    }


def _jobs_again(
    client: redis.Redis, part: FetchPartition, ids: list[bytes]
) -> list[dict[str, Any]]:
    """A retried task: the jobs the first attempt took, read with SHOW (gone ones,
    acknowledged meanwhile by someone else, are left out)."""
    pipe = client.pipeline(transaction=False)
    for jid in ids:
        pipe.execute_command("SHOW", jid)
    jobs = []
    for flat in pipe.execute(raise_on_error=False):
        if not isinstance(flat, list) or not flat:
            continue
        shown = job_from_pairs(flat)
        jobs.append(
            {
                "queue": shown.get("queue"),
                "id": shown["id"],
                "body": shown.get("body"),
                "nacks": shown.get("nacks"),
                "additional_deliveries": shown.get("additional_deliveries"),
                "state": "active",
                "node": part.node_id,
            }
        )
    return jobs


# ---- on the driver -----------------------------------------------------------------
def settle(client: redis.Redis, receipt: str, command: str) -> tuple[int, int]:
    """ACKJOB (a committed batch) or NACK (one never committed) the jobs a task's
    receipt names, on the node that holds it, then delete the receipt. (jobs named,
    the command's count)."""
    receipts = client.execute_command("QPEEK", receipt, 2) or []
    done = named = 0
    if len(receipts) == 1:
        ids = receipts[0][2].split()
        named = len(ids)
        for i in range(0, len(ids), ACK_CHUNK):
            done += int(client.execute_command(command, *ids[i : i + ACK_CHUNK]))
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
    """settle() every task of some batches, one connection per node; a node that
    cannot be reached is logged (its jobs come back after their RETRY time). The
    sums: (jobs named, the commands' counts)."""
    clients: dict[tuple[str, int], redis.Redis] = {}
    named = done = 0
    try:
        for part in planned:
            key = (part.host, part.port)
            try:
                client = clients.get(key) or clients.setdefault(key, conn.open(*key))
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
        for client in clients.values():
            client.close()
    return named, done
