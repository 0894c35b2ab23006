"""Batch write of the ``disque`` data source: one job per row (bulk ``ADDJOB``).

    df.write.format("disque").option("queue", "q").mode("append").save()

The DataFrame needs a ``body`` column (string or binary); an optional
``queue`` column (string) overrides the ``queue`` option per row. Only
``mode("append")`` is supported. Options, besides the common ones (see
:mod:`disque_spark.options`): ``replicate retry ttl delay maxlen async``
(ADDJOB's), ``timeout`` (ADDJOB's, in ms, default 10000), ``batchSize`` and
``concurrency``.

Every task opens ``concurrency`` connections (default 32), each to a node
chosen by HELLO (seeds tried in random order, the lowest priority wins, ties
broken at random so connections spread over the cluster), and pipelines
``ADDJOB`` on each (``batchSize`` per round trip, default 100), all of them
at once. Several connections are what makes a synchronous write fast: a node
runs a client's next ADDJOB only once the previous one is replicated, so one
connection is one bus round trip per job, whatever its pipeline.
``-LEAVING`` makes a connection reconnect elsewhere and resend only the
refused rows; any other error fails the task with
``disque: ADDJOB failed after N rows were added: <error>`` where N counts
every job the task created (a batch is pipelined, so rows after the failing
one in the same batch may have been added too; and the other connections'
batches in flight finish first). Jobs already added stay: Disque has no
transactions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import redis
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from disque.protocol import Node
from disque_spark.client import DisqueError, connect_best, parse_seeds
from disque_spark.options import _opt, _opt_bool, _opt_int, _opt_tls

log = logging.getLogger("disque_spark")

ADDJOB_NUMERIC = ("replicate", "retry", "ttl", "delay", "maxlen")
DEFAULT_ADDJOB_TIMEOUT_MS = 10_000
DEFAULT_WRITE_BATCH = 100
DEFAULT_WRITE_CONCURRENCY = 32  # connections per task: ADDJOBs in flight under replication


def _as_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise DisqueError(f"disque: {what} must be a string or binary, got {type(value).__name__}")


class DisqueCommitMessage(WriterCommitMessage):
    def __init__(self, added: int, node: str | None) -> None:
        self.added = added
        self.node = node


class DisqueWriter(DataSourceWriter):
    """One job per row: ADDJOB pipelined to a node chosen by HELLO priority."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        fields = {f.name: f.dataType for f in schema.fields}
        if "body" not in fields:
            raise DisqueError("disque: the DataFrame needs a 'body' column (string or binary)")
        if not isinstance(fields["body"], StringType | BinaryType):
            raise DisqueError(
                f"disque: column 'body' must be string or binary, "
                f"not {fields['body'].simpleString()}"
            )
        self.has_queue_column = "queue" in fields
        if self.has_queue_column and not isinstance(fields["queue"], StringType):
            raise DisqueError("disque: column 'queue' must be a string")
        self.queue = _opt(options, "queue")
        if self.queue is None and not self.has_queue_column:
            raise DisqueError("disque: set option 'queue' or give the DataFrame a 'queue' column")
        self.seeds = parse_seeds(_opt(options, "nodes"))
        self.password = _opt(options, "password")
        self.tls = _opt_tls(options)
        self.timeout_ms = _opt_int(options, "timeout", DEFAULT_ADDJOB_TIMEOUT_MS)
        self.batch_size = _opt_int(options, "batchSize", DEFAULT_WRITE_BATCH, minimum=1)
        self.concurrency = _opt_int(options, "concurrency", DEFAULT_WRITE_CONCURRENCY, minimum=1)
        tail: list[str] = []
        for name in ADDJOB_NUMERIC:
            value = _opt_int(options, name)
            if value is not None:
                tail += [name.upper(), str(value)]
        if _opt_bool(options, "async"):
            tail.append("ASYNC")
        self.addjob_options = tail

    def write(self, iterator: Iterator[Any]) -> DisqueCommitMessage:
        sender = _ParallelSender(self)
        batch: list[tuple[str, bytes]] = []
        try:
            for row in iterator:
                queue = row["queue"] if self.has_queue_column else None
                if queue is None:
                    queue = self.queue
                if queue is None:
                    sender.fail("a row has a null 'queue' and no option 'queue' is set")
                body = row["body"]
                if body is None:
                    sender.fail("a row has a null 'body'")
                batch.append((queue, _as_bytes(body, "column 'body'")))
                if len(batch) >= self.batch_size:
                    sender.submit(batch)
                    batch = []
            if batch:
                sender.submit(batch)
            sender.finish()
        finally:
            sender.close()
        return DisqueCommitMessage(sender.tally.added, sender.first_node())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.added for m in messages if isinstance(m, DisqueCommitMessage))
        log.info("disque: %d jobs added by %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Jobs are visible as soon as ADDJOB returns: there is nothing to roll back.
        total = sum(m.added for m in messages if isinstance(m, DisqueCommitMessage))
        log.warning(
            "disque: write aborted; jobs already added stay in Disque (%d by the "
            "tasks that finished, the failed task's error tells its own count)",
            total,
        )


class _Tally:
    """The jobs a task's connections added, counted across their threads."""

    def __init__(self) -> None:
        self.added = 0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.added += n


class _WriteFailed(DisqueError):
    """A connection's failure; the task reports it with the task's own count."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _ParallelSender:
    """A task's connections: batches go to whichever is free, at most
    ``concurrency`` at once (one thread per connection), two more waiting."""

    def __init__(self, writer: DisqueWriter) -> None:
        self.w = writer
        self.tally = _Tally()
        self.local = threading.local()
        self.sessions: list[_AddjobSession] = []
        self.pool = ThreadPoolExecutor(writer.concurrency, thread_name_prefix="disque-write")
        self.in_flight: set[Future[None]] = set()

    def session(self) -> _AddjobSession:
        session: _AddjobSession | None = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = _AddjobSession(self.w, self.tally)
            self.sessions.append(session)
        return session

    def send(self, batch: list[tuple[str, bytes]]) -> None:
        self.session().send(batch)

    def submit(self, batch: list[tuple[str, bytes]]) -> None:
        while len(self.in_flight) >= self.w.concurrency + 2:
            done, self.in_flight = wait(self.in_flight, return_when=FIRST_COMPLETED)
            self.check(done)
        self.in_flight.add(self.pool.submit(self.send, batch))

    def finish(self) -> None:
        done, _ = wait(self.in_flight)
        self.in_flight = set()
        self.check(done)

    def check(self, done: set[Future[None]]) -> None:
        """The first failure among finished batches fails the task, once the batches
        still in flight are done (so that the count it gives is final)."""
        errors = [f.exception() for f in done if f.exception() is not None]
        if errors:
            error = errors[0]
            self.fail(error.reason if isinstance(error, _WriteFailed) else str(error))

    def fail(self, reason: str) -> None:
        wait(self.in_flight)  # (the batches still in flight count too)
        raise DisqueError(
            f"disque: ADDJOB failed after {self.tally.added} rows were added: {reason}"
        )

    def first_node(self) -> str | None:
        return next((s.node.id for s in self.sessions if s.node is not None), None)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for session in self.sessions:
            session.close()


class _AddjobSession:
    """One connection: pipelined ADDJOBs, -LEAVING followed to another node."""

    MAX_RECONNECTS = 8

    def __init__(self, writer: DisqueWriter, tally: _Tally) -> None:
        self.w = writer
        self.tally = tally
        self.client: redis.Redis | None = None
        self.node: Node | None = None
        self.excluded: set[str] = set()

    def _fail(self, error: str) -> DisqueError:
        return _WriteFailed(error)

    def _connect(self) -> None:
        self.close()
        socket_timeout = max(30.0, self.w.timeout_ms / 1000 + 10)
        try:
            self.client, self.node = connect_best(
                self.w.seeds, self.w.password, self.excluded, socket_timeout, self.w.tls
            )
        except DisqueError as exc:
            raise self._fail(str(exc).removeprefix("disque: ")) from None

    def send(self, batch: list[tuple[str, bytes]]) -> None:
        pending = batch
        reconnects = 0
        while pending:
            if self.client is None:
                self._connect()
            assert self.client is not None and self.node is not None
            pipe = self.client.pipeline(transaction=False)
            for queue, body in pending:
                pipe.execute_command(
                    "ADDJOB", queue, body, self.w.timeout_ms, *self.w.addjob_options
                )
            try:
                replies = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                raise self._fail(
                    f"connection to node {self.node.addr} lost ({exc}); up to "
                    f"{len(pending)} more rows sent in the last batch may have "
                    "been added too"
                ) from None
            leaving: list[tuple[str, bytes]] = []
            first_error, failed, added = None, 0, 0
            for item, reply in zip(pending, replies, strict=True):
                if not isinstance(reply, Exception):
                    added += 1
                elif str(reply).startswith("LEAVING"):
                    leaving.append(item)
                else:
                    failed += 1
                    first_error = first_error or str(reply)
            self.tally.add(added)
            if first_error is not None:
                extra = f" ({failed} rows of the last batch were refused)" if failed > 1 else ""
                raise self._fail(f"{first_error}{extra}")
            if leaving:
                reconnects += 1
                if reconnects > self.MAX_RECONNECTS:
                    raise self._fail("LEAVING: every node tried is leaving the cluster")
                self.excluded |= {self.node.id, self.node.addr}
                self.client.close()
                self.client = None
            pending = leaving

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None
