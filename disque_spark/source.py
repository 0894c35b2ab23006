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
``timeoutMs`` (default 100), ``numPartitions`` (default 1).

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
    exactly which jobs it fetched. Each call asks every node for up to
    ``batchSize`` jobs (``GETJOB NOHANG COUNT n WITHCOUNTERS FROM q``), and when
    none has any, blocks for ``timeoutMs`` on the best node (a blocked GETJOB
    lets Disque federation bring jobs over). The jobs fetched are kept in
    memory under a new offset ``{"run": <reader id>, "seq": k}``;
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

    A batch that failed, or a driver that died, never acknowledges its jobs:
    Disque puts them back in the queue after their RETRY time and the stream
    receives them again. After a restart from a checkpoint, a batch of the
    old run that must be re-planned has no jobs in this process: it is planned
    empty and its jobs come back through RETRY the same way. Jobs added with
    ``RETRY 0`` (at-most-once) are lost if a batch fails. Give jobs a RETRY
    longer than a micro-batch takes, or Disque re-queues them while the batch
    still runs and the stream sees them twice. Sinks see one empty micro-batch
    after each burst of activity (the one that carries the last commit).

    The stream schema is the snapshot schema; GETJOB gives id, queue, body,
    nacks, additional_deliveries and node (the node that delivered the job);
    state is ``active`` and the other columns are null.
"""

from __future__ import annotations

import contextlib
import logging
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

try:  # Spark >= 4.2: admission control
    from pyspark.sql.streaming.datasource import ReadMaxRows
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    ReadMaxRows = None  # type: ignore[assignment,misc]

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


class DisqueStreamReader(DataSourceStreamReader):
    """GETJOB on the driver in latestOffset, ACKJOB in commit: see the module docstring."""

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

    # The reader is pickled into the read function sent to executors: no sockets.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(pending=[], _nodes=[], _clients={}, _refresh_at=0.0)
        return state

    # -- offsets ------------------------------------------------------------
    def _offset(self) -> dict[str, Any]:
        return {"run": self.run, "seq": self.seq}

    def initialOffset(self) -> dict[str, Any]:
        # Constant: Spark may call it again after latestOffset() (it does, in 4.3).
        return {"run": self.run, "seq": 0}

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None:
            return ReadMaxRows(self.batch_size)
        return super().getDefaultReadLimit()  # pragma: no cover

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """Fetch the next jobs (driver side) and name them with a new offset.

        Works with both signatures: ``latestOffset()`` (Spark 4.0/4.1) and
        ``latestOffset(start, limit)`` (Spark >= 4.2, admission control).
        """
        count = self.batch_size
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            count = max(1, limit.max_rows)
        jobs = self._fetch(count)
        if jobs:
            self.seq += 1
            self.pending.append((self.seq, jobs))
        elif self.pending:
            # Nothing new, but jobs wait for their ACK: Spark commits batch N
            # only when it plans batch N+1, so plan an empty one.
            self.seq += 1
        elif start is not None:
            return start
        return self._offset()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if not end or end.get("run") != self.run:
            return []   # a batch of a previous driver: its jobs come back via RETRY
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
        high = end.get("seq", 0)
        done = [job for seq, batch in self.pending if seq <= high for job in batch]
        if done:
            self._ack(done)
        self.pending = [(seq, batch) for seq, batch in self.pending if seq > high]

    def stop(self) -> None:
        if self.pending:
            log.info("disque: stream stopped with %d jobs not acknowledged; Disque will "
                     "deliver them again after their RETRY time",
                     sum(len(b) for _, b in self.pending))
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients = {}

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

    def _getjob(self, node: NodeInfo, count: int, mode: list[Any]) -> list[dict[str, Any]]:
        """One GETJOB on one node; a node that fails or is leaving is dropped."""
        try:
            reply = self._client(node).execute_command(
                "GETJOB", *mode, "COUNT", count, "WITHCOUNTERS", "FROM", *self.queues)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning("disque: GETJOB on %s failed (%s); dropping the node", node.addr,
                        describe(exc))
            self._drop(node)
            return []
        except redis.ResponseError as exc:
            if str(exc).startswith("LEAVING"):
                self._drop(node)
                return []
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
        """Up to `count` jobs: NOHANG on every node, then a short blocking GETJOB."""
        jobs: list[dict[str, Any]] = []
        nodes = self._live_nodes()
        if nodes:
            self._rotation = (self._rotation + 1) % len(nodes)
            for node in nodes[self._rotation:] + nodes[:self._rotation]:
                if len(jobs) >= count:
                    break
                jobs += self._getjob(node, count - len(jobs), ["NOHANG"])
        if not jobs and self.timeout_ms > 0:
            nodes = self._live_nodes()
            if nodes:
                best = by_preference(nodes)[0]
                jobs = self._getjob(best, count, ["TIMEOUT", self.timeout_ms])
        return jobs

    def _ack(self, jobs: list[dict[str, Any]]) -> None:
        by_node: dict[str, list[str]] = {}
        for job in jobs:
            by_node.setdefault(job["node"], []).append(job["id"])
        for nid, ids in by_node.items():
            for i in range(0, len(ids), ACK_CHUNK):
                self._ack_ids(nid, ids[i:i + ACK_CHUNK])

    def _ack_ids(self, nid: str, ids: list[str]) -> None:
        """ACKJOB on the node that delivered the jobs, else on any other node."""
        candidates = self._nodes_for_ack(nid)
        errors = []
        for node in candidates:
            try:
                self._client(node).execute_command("ACKJOB", *ids)
                return
            except (redis.ConnectionError, redis.TimeoutError, OSError,
                    redis.ResponseError) as exc:
                errors.append(f"{node.addr}: {exc}")
                if not isinstance(exc, redis.ResponseError):
                    self._drop(node)
        raise DisqueError(f"disque: ACKJOB of {len(ids)} jobs failed on every node ("
                          + "; ".join(errors) + "); Disque will deliver them again")

    def _nodes_for_ack(self, nid: str) -> list[NodeInfo]:
        try:
            nodes = self._live_nodes()
        except DisqueError:
            nodes = self._nodes
        first = [n for n in nodes if n.id == nid]
        return first + by_preference([n for n in nodes if n.id != nid])
