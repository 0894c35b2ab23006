"""Batch write of the ``disque`` data source: one job per row (bulk ``ADDJOB``).

    df.write.format("disque").option("queue", "q").mode("append").save()

The DataFrame needs a ``body`` column (string or binary); an optional
``queue`` column (string) overrides the ``queue`` option per row. Only
``mode("append")`` is supported. Options, besides the common ones (see
:mod:`disque_spark.options`): ``replicate retry ttl delay maxlen async``
(ADDJOB's), ``timeout`` (ADDJOB's, in ms, default 10000) and ``batchSize``.

Every task connects to one node chosen by HELLO (seeds tried in random
order, the lowest priority wins, ties broken at random so tasks spread
over the cluster) and pipelines ``ADDJOB`` (``batchSize`` per round trip,
default 500). ``-LEAVING`` makes it reconnect elsewhere and resend only the
refused rows; any other error fails the task with
``disque: ADDJOB failed after N rows were added: <error>`` where N counts
every job the task created (a batch is pipelined, so rows after the failing
one in the same batch may have been added too). Jobs already added stay:
Disque has no transactions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
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
DEFAULT_WRITE_BATCH = 500


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
        tail: list[str] = []
        for name in ADDJOB_NUMERIC:
            value = _opt_int(options, name)
            if value is not None:
                tail += [name.upper(), str(value)]
        if _opt_bool(options, "async"):
            tail.append("ASYNC")
        self.addjob_options = tail

    def write(self, iterator: Iterator[Any]) -> DisqueCommitMessage:
        session = _AddjobSession(self)
        batch: list[tuple[str, bytes]] = []
        try:
            for row in iterator:
                queue = row["queue"] if self.has_queue_column else None
                if queue is None:
                    queue = self.queue
                if queue is None:
                    raise DisqueError(
                        f"disque: ADDJOB failed after {session.added} rows were added: "
                        "a row has a null 'queue' and no option 'queue' is set"
                    )
                body = row["body"]
                if body is None:
                    raise DisqueError(
                        f"disque: ADDJOB failed after {session.added} rows "
                        "were added: a row has a null 'body'"
                    )
                batch.append((queue, _as_bytes(body, "column 'body'")))
                if len(batch) >= self.batch_size:
                    session.send(batch)
                    batch = []
            if batch:
                session.send(batch)
        finally:
            session.close()
        return DisqueCommitMessage(session.added, session.node.id if session.node else None)

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


class _AddjobSession:
    """A task's connection: pipelined ADDJOBs, -LEAVING followed to another node."""

    MAX_RECONNECTS = 8

    def __init__(self, writer: DisqueWriter) -> None:
        self.w = writer
        self.added = 0
        self.client: redis.Redis | None = None
        self.node: Node | None = None
        self.excluded: set[str] = set()

    def _fail(self, error: str) -> DisqueError:
        return DisqueError(f"disque: ADDJOB failed after {self.added} rows were added: {error}")

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
            first_error, failed = None, 0
            for item, reply in zip(pending, replies, strict=True):
                if not isinstance(reply, Exception):
                    self.added += 1
                elif str(reply).startswith("LEAVING"):
                    leaving.append(item)
                else:
                    failed += 1
                    first_error = first_error or str(reply)
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
