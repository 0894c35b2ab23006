"""The ``disque`` PySpark data source: batch write, snapshot read, streaming read.

Usage (after ``disque_spark.register(spark)``)::

    df.write.format("disque").option("queue", "q").mode("append").save()
    spark.read.format("disque").option("nodes", "h1:7711,h2:7711").load()
    spark.readStream.format("disque").option("queue", "q").load()

Options (all strings): ``nodes`` (comma-separated seeds, default 127.0.0.1:7711),
``password``, ``queue``; TLS: ``tls`` (true/false), ``tlsCaCert``, ``tlsCert``,
``tlsKey`` (PEM files, at the same paths on the driver and every executor),
``tlsInsecure`` (any of them implies ``tls``); writer: ``replicate retry ttl
delay maxlen async timeout batchSize``; snapshot: ``state`` (comma-separated),
``scanCount``, ``skipUnreachable``; stream: ``batchSize`` (default 1000),
``maxJobsPerTrigger`` (default batchSize), ``timeoutMs`` (default 100),
``numPartitions`` (default 1).

Batch write
    Every task connects to one node chosen by HELLO (seeds tried in random
    order, the lowest priority wins, ties broken at random so tasks spread
    over the cluster) and pipelines ``ADDJOB`` (``batchSize`` per round trip,
    default 500). ``-LEAVING`` makes it reconnect elsewhere and resend only the
    refused rows; any other error fails the task with
    ``disque: ADDJOB failed after N rows were added: <error>`` where N counts
    every job the task created (a batch is pipelined, so rows after the failing
    one in the same batch may have been added too). Jobs already added stay:
    Disque has no transactions.

Snapshot read
    One partition per node HELLO lists; each task walks its node with
    ``JSCAN cursor COUNT n [QUEUE q] [STATE s ...] REPLY all``. A job replicated
    on k nodes appears k times (once per node, with that node's view of it:
    ``queued`` on one node, ``active`` on the others); column ``node`` says
    which. ``disque_spark.read_snapshot(spark, dedupe=True)`` keeps one row per
    id.

Streaming read (at-least-once)
    GETJOB runs on the *driver*, inside ``latestOffset``: the stream reader
    lives in one long-lived Python process per query, so it can remember
    exactly which jobs it fetched. Each call takes up to ``maxJobsPerTrigger``
    jobs (Spark's read limit, ``ReadMaxRows``, on Spark >= 4.2) in rounds of
    ``GETJOB NOHANG COUNT batchSize WITHCOUNTERS FROM q...`` over every node,
    another round only while some node gave all it was asked; when none has
    any, it blocks for ``timeoutMs`` on the best node (a blocked GETJOB lets
    Disque federation bring jobs over). The jobs fetched are kept in memory
    under a new offset ``{"run": <reader id>, "seq": k}``;
    ``partitions(start, end)`` ships the jobs between the two offsets inside
    the input partitions, so executors never talk to Disque and a retried task
    yields the very same rows. ``commit(end)`` sends ``ACKJOB`` (to the node
    each job came from, any other node if it is gone) for every job up to
    ``end``: only jobs of batches Spark committed are acknowledged.

    Why not GETJOB on the executors: a task can run twice (retry,
    speculation) and would then fetch different jobs, and nothing would carry
    the IDs it fetched back to the driver to be acknowledged at commit.

    Spark calls ``commit(end of batch N)`` only when it plans batch N+1. So
    while fetched jobs wait for their acknowledgement, ``latestOffset``
    advances the offset even if it got no new job: an empty batch is planned
    and the last real batch gets committed (and acked) on an idle queue too.

    When the query ends (stopped, failed, or done), ``stop()`` sends ``NACK``
    for every job fetched but not committed: they are back in their queues at
    once (their ``nacks`` counter + 1) for this or another consumer, instead
    of after their RETRY time. A failed batch fails the query, so its jobs are
    NACKed the same way (the API has no per-batch abort). Spark ends the
    reader's process with SIGTERM before ``stop()`` could run, so the reader
    catches SIGTERM once it holds jobs (waiting for a call in progress to
    finish), runs ``stop()``, then lets the signal end the process. A batch
    the sink finished just before the stop may not be committed yet (that
    happens when the next batch is planned): it is NACKed and seen again,
    as at-least-once allows. If the reader's process is killed outright
    (SIGKILL), the jobs come back after their RETRY time. After a restart
    from a checkpoint, a batch of the old run that must be re-planned has no
    jobs in this process: it is planned empty and its jobs come back through
    the queue.
    Jobs added with ``RETRY 0`` (at-most-once) cannot be NACKed and are lost
    if a batch fails. Give jobs a RETRY longer than a micro-batch takes, or
    Disque re-queues them while the batch still runs and the stream sees them
    twice. Sinks see one empty micro-batch after each burst of activity (the
    one that carries the last commit).

    ``trigger(availableNow=True)`` (Spark >= 4.2; the reader then mixes in
    ``SupportsTriggerAvailableNow``): ``prepareForTriggerAvailableNow`` records
    QLEN of each queue on each node as the target; the query reads, in batches
    of up to ``maxJobsPerTrigger``, at most that many jobs from that queue on
    that node (queues are in creation order, so those are the jobs present at
    start), with NOHANG only, and ends once every queue gave its count or ran
    dry (other consumers took the rest) and the last batch is acked. Jobs
    added later stay queued. Spark < 4.2 falls back to a single batch, and
    ``Trigger.Once`` is a single batch too: Spark never commits a single batch
    to its source, so its jobs are NACKed at the end, never acknowledged (a
    ``ReadAllAvailable`` limit, Once's, logs a warning).

    The stream schema is the snapshot schema; GETJOB gives id, queue, body,
    nacks, additional_deliveries and node (the node that delivered the job);
    state is ``active`` and the other columns are null.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import redis
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from disque_common.tls import TLS, TLSError
from disque_spark.client import (
    PRIORITY_FAILING,
    PRIORITY_LEAVING,
    DisqueError,
    NodeInfo,
    by_preference,
    connect,
    connect_best,
    describe,
    discover,
    jscan_jobs,
    parse_seeds,
)

try:  # Spark >= 4.2: admission control (ReadLimit)
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
try:  # Spark >= 4.2: Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    AVAILABLE_NOW_BASES: tuple[type, ...] = (SupportsTriggerAvailableNow,)
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1: Spark runs a single batch instead
    AVAILABLE_NOW_BASES = ()

log = logging.getLogger("disque_spark")

SCHEMA = StructType([
    StructField("id", StringType(), False),
    StructField("queue", StringType(), True),
    StructField("state", StringType(), True),
    StructField("repl", IntegerType(), True),
    StructField("ttl", IntegerType(), True),
    StructField("ctime", LongType(), True),
    StructField("delay", IntegerType(), True),
    StructField("retry", IntegerType(), True),
    StructField("nacks", IntegerType(), True),
    StructField("additional_deliveries", IntegerType(), True),
    StructField("nodes_delivered", ArrayType(StringType()), True),
    StructField("body", BinaryType(), True),
    StructField("node", StringType(), True),
])

# Columns a user-given schema may also ask for (JSCAN REPLY all has them).
EXTRA_COLUMNS = {
    "nodes_confirmed": ArrayType(StringType()),
    "next_requeue_within": LongType(),
    "next_awake_within": LongType(),
}
KNOWN_COLUMNS = {f.name for f in SCHEMA.fields} | set(EXTRA_COLUMNS)

ADDJOB_NUMERIC = ("replicate", "retry", "ttl", "delay", "maxlen")
DEFAULT_ADDJOB_TIMEOUT_MS = 10_000
DEFAULT_WRITE_BATCH = 500
DEFAULT_STREAM_BATCH = 1000
DEFAULT_STREAM_TIMEOUT_MS = 100
NODE_REFRESH_SECONDS = 30.0
ACK_CHUNK = 1000


# ---------------------------------------------------------------- options --

def _opt(options: Any, name: str, default: str | None = None) -> str | None:
    value = options.get(name)
    if value is None:   # options are case-insensitive in Spark; be so here too
        lowered = name.lower()
        value = next((v for k, v in options.items() if k.lower() == lowered), None)
    return default if value is None or value == "" else str(value)


def _opt_int(options: Any, name: str, default: int | None = None,
             minimum: int = 0) -> int | None:
    raw = _opt(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DisqueError(f"disque: option '{name}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise DisqueError(f"disque: option '{name}' must be >= {minimum}, got {value}")
    return value


def _opt_bool(options: Any, name: str, default: bool = False) -> bool:
    raw = _opt(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off"):
        return False
    raise DisqueError(f"disque: option '{name}' must be true or false, got {raw!r}")


def _opt_list(options: Any, name: str) -> list[str]:
    raw = _opt(options, name)
    return [x.strip() for x in raw.split(",") if x.strip()] if raw else []


def _opt_tls(options: Any) -> TLS | None:
    """``tls tlsCaCert tlsCert tlsKey tlsInsecure`` as TLS settings, their files
    loaded here on the driver so a wrong path fails the query, not each task."""
    files = [_opt(options, name) for name in ("tlsCaCert", "tlsCert", "tlsKey")]
    insecure = _opt_bool(options, "tlsInsecure")
    implied = any(files) or insecure
    if not _opt_bool(options, "tls", default=implied):
        if implied:
            raise DisqueError("disque: option 'tls' is false but tlsCaCert, tlsCert, tlsKey "
                              "or tlsInsecure is set")
        return None
    tls = TLS(*files, insecure=insecure)
    try:
        tls.check()
    except TLSError as exc:
        raise DisqueError(f"disque: bad TLS options: {exc}") from None
    return tls


# ------------------------------------------------------------------- rows --

class RowBuilder:
    """Turns a job dict into a tuple in a schema's column order (picklable).

    A user schema may list any subset of the known columns, in any order, and
    may declare ``body`` as a string (decoded as UTF-8).
    """

    def __init__(self, schema: StructType) -> None:
        unknown = [f.name for f in schema.fields if f.name not in KNOWN_COLUMNS]
        if unknown:
            raise DisqueError(f"disque: unknown column(s) {unknown} in the schema; "
                              f"known columns: {sorted(KNOWN_COLUMNS)}")
        self.names = [f.name for f in schema.fields]
        self.body_as_text = any(f.name == "body" and isinstance(f.dataType, StringType)
                                for f in schema.fields)

    def __call__(self, job: dict[str, Any]) -> tuple:
        if self.body_as_text and isinstance(job.get("body"), bytes):
            job = {**job, "body": job["body"].decode("utf-8", "replace")}
        return tuple(job.get(name) for name in self.names)


def _as_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise DisqueError(f"disque: {what} must be a string or binary, got {type(value).__name__}")


# ------------------------------------------------------------- data source --

class DisqueDataSource(DataSource):
    """``format("disque")``: see the module docstring for every usage and option."""

    @classmethod
    def name(cls) -> str:
        return "disque"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return DisqueSnapshotReader(schema, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise DisqueError("disque: only mode('append') is supported: a job queue "
                              "cannot be overwritten")
        return DisqueWriter(schema, dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DisqueStreamReader(schema, dict(self.options))


# ------------------------------------------------------------------ write --

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
            raise DisqueError(f"disque: column 'body' must be string or binary, "
                              f"not {fields['body'].simpleString()}")
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
                        "a row has a null 'queue' and no option 'queue' is set")
                body = row["body"]
                if body is None:
                    raise DisqueError(f"disque: ADDJOB failed after {session.added} rows "
                                      "were added: a row has a null 'body'")
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
        log.warning("disque: write aborted; jobs already added stay in Disque (%d by the "
                    "tasks that finished, the failed task's error tells its own count)", total)


class _AddjobSession:
    """A task's connection: pipelined ADDJOBs, -LEAVING followed to another node."""

    MAX_RECONNECTS = 8

    def __init__(self, writer: DisqueWriter) -> None:
        self.w = writer
        self.added = 0
        self.client: redis.Redis | None = None
        self.node: NodeInfo | None = None
        self.excluded: set[str] = set()

    def _fail(self, error: str) -> DisqueError:
        return DisqueError(f"disque: ADDJOB failed after {self.added} rows were added: {error}")

    def _connect(self) -> None:
        self.close()
        socket_timeout = max(30.0, self.w.timeout_ms / 1000 + 10)
        try:
            self.client, self.node = connect_best(self.w.seeds, self.w.password, self.excluded,
                                                  socket_timeout, self.w.tls)
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
                pipe.execute_command("ADDJOB", queue, body, self.w.timeout_ms,
                                     *self.w.addjob_options)
            try:
                replies = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                raise self._fail(f"connection to node {self.node.addr} lost ({exc}); up to "
                                 f"{len(pending)} more rows sent in the last batch may have "
                                 "been added too") from None
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


# -------------------------------------------------------------- snapshot --

class NodePartition(InputPartition):
    """One node to JSCAN."""

    def __init__(self, node: NodeInfo) -> None:
        super().__init__(node.addr)
        self.node = node


class DisqueSnapshotReader(DataSourceReader):
    """Every job on every node, one partition per node (a job shows once per copy)."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.build = RowBuilder(schema)
        self.seeds = parse_seeds(_opt(options, "nodes"))
        self.password = _opt(options, "password")
        self.tls = _opt_tls(options)
        self.queues = _opt_list(options, "queue")
        self.states = [s.lower() for s in _opt_list(options, "state")]
        bad = [s for s in self.states if s not in ("wait-repl", "active", "queued", "acked")]
        if bad:
            raise DisqueError(f"disque: unknown job state(s) {bad} in option 'state'; "
                              "use wait-repl, active, queued, acked")
        self.scan_count = _opt_int(options, "scanCount", 1000, minimum=1)
        self.skip_unreachable = _opt_bool(options, "skipUnreachable")

    def partitions(self) -> list[InputPartition]:
        nodes = sorted(discover(self.seeds, self.password, self.tls), key=lambda n: n.id)
        return [NodePartition(n) for n in nodes]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        node: NodeInfo = partition.node  # type: ignore[attr-defined]
        client = connect(node.host, node.port, self.password, tls=self.tls)
        try:
            try:
                client.ping()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if self.skip_unreachable:
                    log.warning("disque: skipping unreachable node %s (%s)", node.addr,
                                describe(exc))
                    return
                raise DisqueError(f"disque: cannot scan node {node.id} at {node.addr}: "
                                  f"{describe(exc)} "
                                  "(option skipUnreachable=true reads the other nodes)") from None
            for queue in self.queues or [None]:
                for job in jscan_jobs(client, self.scan_count, queue, self.states):
                    job["node"] = node.id
                    yield self.build(job)
        finally:
            client.close()


# ------------------------------------------------------------- streaming --

class JobsPartition(InputPartition):
    """Jobs the driver fetched, shipped to an executor as they are."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        super().__init__(len(jobs))
        self.jobs = jobs


class AvailableNowTarget:
    """What a Trigger.AvailableNow run may still consume: jobs per (node id, queue).

    Recorded with QLEN when the query starts. Queues are ordered by creation
    time, so the first n jobs a queue gives are the n it held at start; a job
    queued later (new, or re-queued by RETRY or NACK) is beyond the target.
    """

    def __init__(self, counts: dict[tuple[str, str], int]) -> None:
        self.left = {key: n for key, n in counts.items() if n > 0}
        self.total = sum(self.left.values())

    def on_node(self, node_id: str) -> list[tuple[str, int]]:
        """(queue, jobs still owed) for this node's queues that owe any."""
        return [(queue, n) for (nid, queue), n in self.left.items() if nid == node_id]

    def took(self, node_id: str, queue: str, asked: int, got: int) -> None:
        key = (node_id, queue)
        left = self.left.get(key, 0) - got
        if got < asked or left <= 0:
            # Done, or ran dry: other consumers took the rest of what it held at start.
            self.left.pop(key, None)
        else:
            self.left[key] = left


class DisqueStreamReader(DataSourceStreamReader, *AVAILABLE_NOW_BASES):  # type: ignore[misc]
    """GETJOB on the driver in latestOffset, ACKJOB in commit, NACK in stop: see the
    module docstring."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.build = RowBuilder(schema)
        self.queues = _opt_list(options, "queue")
        if not self.queues:
            raise DisqueError("disque: a streaming read needs option 'queue' "
                              "(comma-separated queue names)")
        self.seeds = parse_seeds(_opt(options, "nodes"))
        self.password = _opt(options, "password")
        self.tls = _opt_tls(options)
        self.batch_size = _opt_int(options, "batchSize", DEFAULT_STREAM_BATCH, minimum=1)
        self.max_per_trigger = _opt_int(options, "maxJobsPerTrigger", self.batch_size, minimum=1)
        self.timeout_ms = _opt_int(options, "timeoutMs", DEFAULT_STREAM_TIMEOUT_MS)
        self.num_partitions = _opt_int(options, "numPartitions", 1, minimum=1)
        self.run = uuid.uuid4().hex[:16]
        self.seq = 0
        # Fetched, not yet acknowledged: [(seq, [job, ...]), ...] in seq order.
        self.pending: list[tuple[int, list[dict[str, Any]]]] = []
        self._nodes: list[NodeInfo] = []
        self._clients: dict[str, redis.Redis] = {}
        self._refresh_at = 0.0
        self._rotation = 0
        self._ever_connected = False
        self._target: AvailableNowTarget | None = None
        self._warned_all_available = False
        self._busy = False              # a call is using the connections
        self._terminating = False       # SIGTERM came during that call
        self._sigterm_installed = False
        self._prev_sigterm: Any = None

    # The reader is pickled into the read function sent to executors: no sockets.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(pending=[], _nodes=[], _clients={}, _refresh_at=0.0, _target=None,
                     _sigterm_installed=False, _prev_sigterm=None)
        return state

    # -- offsets ------------------------------------------------------------
    def _offset(self) -> dict[str, Any]:
        return {"run": self.run, "seq": self.seq}

    def initialOffset(self) -> dict[str, Any]:
        # Constant: Spark may call it again after latestOffset() (it does, in 4.3).
        return {"run": self.run, "seq": 0}

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None:
            return ReadMaxRows(self.max_per_trigger)
        return super().getDefaultReadLimit()  # pragma: no cover

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow (Spark >= 4.2): the target is what is queued now."""
        with self._working():
            counts: dict[tuple[str, str], int] = {}
            for node in self._live_nodes():
                counts.update(self._qlen(node))
            self._target = AvailableNowTarget(counts)
        log.info("disque: Trigger.AvailableNow: %d jobs queued at start",
                 self._target.total)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """Fetch the next jobs (driver side) and name them with a new offset.

        Works with both signatures: ``latestOffset()`` (Spark 4.0/4.1) and
        ``latestOffset(start, limit)`` (Spark >= 4.2, admission control).
        """
        with self._working():
            jobs = self._fetch(self._jobs_wanted(limit))
            if jobs:
                self.seq += 1
                self.pending.append((self.seq, jobs))
                self._catch_sigterm()
            elif self.pending:
                # Nothing new, but jobs wait for their ACK: Spark commits batch N
                # only when it plans batch N+1, so plan an empty one.
                self.seq += 1
            elif start is not None:
                return start     # no new data: under AvailableNow, the query ends here
            return self._offset()

    def _jobs_wanted(self, limit: Any) -> int:
        """How many jobs the next micro-batch may hold, from Spark's ReadLimit."""
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return max(1, limit.max_rows)
        if (ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable)
                and self._target is None and not self._warned_all_available):
            self._warned_all_available = True
            log.warning("disque: Spark asks for all available jobs (Trigger.Once?). A "
                        "single-batch query never acknowledges its jobs (Spark commits a "
                        "batch when it plans the next one): they are NACKed when it stops. "
                        "Use trigger(availableNow=True). Reading up to %d jobs.",
                        self.max_per_trigger)
        return self.max_per_trigger

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if not end or end.get("run") != self.run:
            return []   # a batch of a previous driver: its jobs come back via NACK or RETRY
        low = start.get("seq", 0) if start and start.get("run") == self.run else 0
        high = end.get("seq", 0)
        jobs = [job for seq, batch in self.pending if low < seq <= high for job in batch]
        if not jobs:
            return []
        n = min(self.num_partitions, len(jobs))
        size = -(-len(jobs) // n)
        return [JobsPartition(jobs[i:i + size]) for i in range(0, len(jobs), size)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        for job in partition.jobs:  # type: ignore[attr-defined]
            yield self.build(job)

    def commit(self, end: dict) -> None:
        if not end or end.get("run") != self.run:
            return
        with self._working():
            high = end.get("seq", 0)
            done = [job for seq, batch in self.pending if seq <= high for job in batch]
            if done:
                self._ack(done)
            self.pending = [(seq, batch) for seq, batch in self.pending if seq > high]

    def stop(self) -> None:
        """The query ended (stopped, failed, or AvailableNow done): NACK the jobs of
        batches Spark never committed, so they are queued again at once."""
        with self._working():
            try:
                self._nack_pending()
            finally:
                for client in self._clients.values():
                    with contextlib.suppress(Exception):
                        client.close()
                self._clients = {}
                self._restore_sigterm()

    # -- ending with the query ----------------------------------------------
    def _catch_sigterm(self) -> None:
        """Make sure stop() runs when the query ends.

        Spark ends a stream reader's Python process with SIGTERM, and only then
        closes its socket: by default the process would die before stop() could
        NACK anything. Installed once jobs are held, on the main thread only (the
        source runner's loop; signal handlers can only be set and run there).
        """
        if self._sigterm_installed or threading.current_thread() is not threading.main_thread():
            return
        self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._sigterm_installed = True

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        if self._busy:
            # A call is between a command and its reply on one of our connections:
            # it finishes first (see _working), then the reader stops.
            self._terminating = True
            return
        self._terminate()

    def _terminate(self) -> None:
        """stop(), then end the process as SIGTERM would have (previous handler back)."""
        self._terminating = False
        self.stop()
        if not self._sigterm_installed:    # else this handler would run again, forever
            os.kill(os.getpid(), signal.SIGTERM)

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        previous = self._prev_sigterm if self._prev_sigterm is not None else signal.SIG_DFL
        with contextlib.suppress(ValueError):   # not the main thread: left installed
            signal.signal(signal.SIGTERM, previous)
            self._sigterm_installed = False

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        """Marks a call using the connections: a SIGTERM meanwhile waits for its end."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False
            if self._terminating:
                self._terminate()

    def _nack_pending(self) -> None:
        jobs = [job for _, batch in self.pending for job in batch]
        self.pending = []    # whatever happens now, never send them twice
        if not jobs:
            return
        queued = 0
        for nid, ids in self._ids_by_node(jobs):
            try:
                queued += self._on_owner(nid, "NACK", ids)
            except DisqueError as exc:
                log.warning("%s", exc)
        log.info("disque: stream stopped: %d of %d uncommitted jobs queued again (NACK); "
                 "the others were already re-queued, or come back after their RETRY time",
                 queued, len(jobs))

    # -- talking to the cluster ---------------------------------------------
    def _client(self, node: NodeInfo) -> redis.Redis:
        client = self._clients.get(node.id)
        if client is None:
            socket_timeout = max(30.0, self.timeout_ms / 1000 + 10)
            client = connect(node.host, node.port, self.password, socket_timeout, self.tls)
            self._clients[node.id] = client
        return client

    def _drop(self, node: NodeInfo) -> None:
        client = self._clients.pop(node.id, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        self._nodes = [n for n in self._nodes if n.id != node.id]
        self._refresh_at = 0.0

    def _live_nodes(self) -> list[NodeInfo]:
        if not self._nodes or time.monotonic() >= self._refresh_at:
            try:
                nodes = discover(self.seeds, self.password, self.tls)
            except DisqueError as exc:
                if not self._ever_connected:
                    raise
                # A cluster seen before: a transient outage, not a configuration error.
                log.warning("%s; retrying at the next trigger", exc)
                return []
            self._ever_connected = True
            # Healthy nodes first choice; failing (10) or leaving (100) ones as a last resort.
            self._nodes = ([n for n in nodes if n.priority < PRIORITY_FAILING]
                           or [n for n in nodes if n.priority < PRIORITY_LEAVING] or nodes)
            self._refresh_at = time.monotonic() + NODE_REFRESH_SECONDS
            for nid in set(self._clients) - {n.id for n in self._nodes}:
                with contextlib.suppress(Exception):
                    self._clients.pop(nid).close()
        return self._nodes

    def _qlen(self, node: NodeInfo) -> dict[tuple[str, str], int]:
        """QLEN of every queue on one node; an unreachable node counts as empty."""
        try:
            pipe = self._client(node).pipeline(transaction=False)
            for queue in self.queues:
                pipe.execute_command("QLEN", queue)
            lengths = pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning("disque: QLEN on %s failed (%s); its jobs are left out of this "
                        "AvailableNow run", node.addr, describe(exc))
            self._drop(node)
            return {}
        except redis.ResponseError as exc:
            raise DisqueError(f"disque: QLEN on {node.addr} failed: {exc}") from None
        return {(node.id, q): int(n) for q, n in zip(self.queues, lengths, strict=True)}

    def _getjob(self, node: NodeInfo, count: int, mode: list[Any],
                queues: list[str]) -> list[dict[str, Any]] | None:
        """One GETJOB on one node; None when the node failed or is leaving (dropped)."""
        try:
            reply = self._client(node).execute_command(
                "GETJOB", *mode, "COUNT", count, "WITHCOUNTERS", "FROM", *queues)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning("disque: GETJOB on %s failed (%s); dropping the node", node.addr,
                        describe(exc))
            self._drop(node)
            return None
        except redis.ResponseError as exc:
            if str(exc).startswith("LEAVING"):
                self._drop(node)
                return None
            raise DisqueError(f"disque: GETJOB on {node.addr} failed: {exc}") from None
        return [{
            "queue": item[0].decode("utf-8", "replace"),
            "id": item[1].decode(),
            "body": item[2],
            "nacks": item[4] if len(item) > 4 else None,
            "additional_deliveries": item[6] if len(item) > 6 else None,
            "state": "active",
            "node": node.id,
        } for item in reply or ()]

    def _fetch(self, count: int) -> list[dict[str, Any]]:
        """Up to `count` jobs: rounds of GETJOB NOHANG over every node while a queue
        may hold more; if none has any, a short blocking GETJOB on the best node (it
        lets federation bring jobs over). Not under AvailableNow: a blocked GETJOB
        waits for new jobs and imports others, beyond the target."""
        jobs: list[dict[str, Any]] = []
        more = True
        while more and len(jobs) < count:
            got, more = self._nohang_round(count - len(jobs))
            jobs += got
        if not jobs and self._target is None and self.timeout_ms > 0:
            nodes = self._live_nodes()
            if nodes:
                best = by_preference(nodes)[0]
                jobs = self._getjob(best, min(count, self.batch_size),
                                    ["TIMEOUT", self.timeout_ms], self.queues) or []
        return jobs

    def _nohang_round(self, count: int) -> tuple[list[dict[str, Any]], bool]:
        """One GETJOB NOHANG per node (per node and queue under AvailableNow), nodes in
        turn; also tells whether a queue gave all it was asked for (may hold more)."""
        jobs: list[dict[str, Any]] = []
        more = False
        nodes = self._live_nodes()
        if not nodes:
            return jobs, more
        self._rotation = (self._rotation + 1) % len(nodes)
        for node in nodes[self._rotation:] + nodes[:self._rotation]:
            for queues, cap in self._asks(node):
                if len(jobs) >= count:
                    return jobs, True
                want = min(cap, count - len(jobs))
                got = self._getjob(node, want, ["NOHANG"], queues)
                if got is None:
                    break       # node dropped: its other queues too
                if self._target is not None:
                    self._target.took(node.id, queues[0], want, len(got))
                more = more or len(got) == want
                jobs += got
        return jobs, more

    def _asks(self, node: NodeInfo) -> list[tuple[list[str], int]]:
        """(queues, most jobs) for one GETJOB each on this node: all queues at once, or
        under AvailableNow each queue for what it still owes the target."""
        if self._target is None:
            return [(self.queues, self.batch_size)]
        return [([queue], min(left, self.batch_size))
                for queue, left in self._target.on_node(node.id)]

    def _ack(self, jobs: list[dict[str, Any]]) -> None:
        for nid, ids in self._ids_by_node(jobs):
            self._on_owner(nid, "ACKJOB", ids)

    @staticmethod
    def _ids_by_node(jobs: list[dict[str, Any]]) -> Iterator[tuple[str, list[str]]]:
        """(node that delivered them, job IDs), at most ACK_CHUNK IDs at a time."""
        by_node: dict[str, list[str]] = {}
        for job in jobs:
            by_node.setdefault(job["node"], []).append(job["id"])
        for nid, ids in by_node.items():
            for i in range(0, len(ids), ACK_CHUNK):
                yield nid, ids[i:i + ACK_CHUNK]

    def _on_owner(self, nid: str, command: str, ids: list[str]) -> int:
        """ACKJOB or NACK on the node that delivered the jobs, else on any other node
        (ACKJOB works anywhere; NACK where a copy of the job lives). Its reply."""
        errors = []
        for node in self._nodes_for(nid):
            try:
                return int(self._client(node).execute_command(command, *ids))
            except (redis.ConnectionError, redis.TimeoutError, OSError,
                    redis.ResponseError) as exc:
                errors.append(f"{node.addr}: {describe(exc)}")
                if not isinstance(exc, redis.ResponseError):
                    self._drop(node)
        raise DisqueError(f"disque: {command} of {len(ids)} jobs failed on every node ("
                          + ("; ".join(errors) or "none reachable")
                          + "); Disque will deliver them again after their RETRY time")

    def _nodes_for(self, nid: str) -> list[NodeInfo]:
        try:
            nodes = self._live_nodes()
        except DisqueError:
            nodes = self._nodes
        first = [n for n in nodes if n.id == nid]
        return first + by_preference([n for n in nodes if n.id != nid])
