"""Streaming read of the ``disque`` data source: at-least-once consumption.

    spark.readStream.format("disque").option("queue", "q").load()

GETJOB in the executors' tasks (or on the driver), ACKJOB once Spark commits
the micro-batch, NACK of what never got committed when the query stops, and
Trigger.AvailableNow. Options, besides the common ones (see
:mod:`disque_spark.options`): ``queue`` (comma-separated, required),
``batchSize`` (GETJOB COUNT, default 1000), ``maxJobsPerTrigger`` (default
1,000,000: a micro-batch costs Spark a few hundred milliseconds whatever its
size), ``timeoutMs`` (default 100), ``numPartitions`` (tasks per node, default
1; more when a task would hold over 100,000 jobs), ``fetchOn`` (``executors``,
the default, or ``driver``).

``fetchOn=executors``: ``latestOffset`` plans the next batch on the driver as
so many jobs to take from each node, where QLEN says they are (up to
``maxJobsPerTrigger``, Spark's read limit ``ReadMaxRows`` on Spark >= 4.2),
``numPartitions`` tasks per node, under a new offset ``{"run": <reader id>,
"seq": k}``; each task takes its jobs on its executor and leaves a receipt
(:mod:`disque_spark.receipts`), from which a retried task yields the same
rows and the driver learns what to acknowledge: ``commit(end)`` ACKs what
the receipts of the batches up to ``end`` name (in a thread, while Spark runs
the next batch), ``stop()`` waits for those ACKs and NACKs the jobs of
batches never committed. An empty cluster: the driver looks again once after
``timeoutMs``.

``fetchOn=driver``: GETJOB runs on the *driver*, inside ``latestOffset``: the
stream reader lives in one long-lived Python process per query, so it can
remember exactly which jobs it fetched. Each call takes up to
``maxJobsPerTrigger`` jobs in rounds of ``GETJOB NOHANG COUNT batchSize
WITHCOUNTERS FROM q...`` over every node, another round only while some node
gave all it was asked; when none has any, it blocks for ``timeoutMs`` on the
best node (a blocked GETJOB lets Disque federation bring jobs over). The jobs
fetched are kept in memory under the new offset; ``partitions(start, end)``
ships the jobs between the two offsets inside the input partitions, so
executors never talk to Disque and a retried task yields the very same rows.
``commit(end)`` sends ``ACKJOB`` (to the node each job came from, any other
node if it is gone) for every job up to ``end``. Simple, but every GETJOB of
the query runs in the driver's one Python process.

Spark writes batch N to its commit log before it plans batch N+1, and on
Spark >= 4.2 ``latestOffset(start, limit)`` says where batch N ended: the
jobs of the batches up to ``start`` are acknowledged there, so the last
batch of a drain is acked without one more batch. (``commit(end)``, which
Spark calls only after planning the next batch, acks what is left up to
``end``.) Spark 4.0/4.1's ``latestOffset()`` says nothing of it: while
fetched jobs wait for their acknowledgement, it advances the offset even if
it got no new job, so that an empty batch is planned and the last real
batch gets committed (and acked) on an idle queue too.

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
twice. On Spark 4.0/4.1, sinks see one empty micro-batch after each burst
of activity (the one that carries the last commit).

``trigger(availableNow=True)`` (Spark >= 4.2; the reader then mixes in
``SupportsTriggerAvailableNow``): ``prepareForTriggerAvailableNow`` records
QLEN of each queue on each node as the target; the query reads (plans, with
executors), in batches of up to ``maxJobsPerTrigger``, at most that many jobs
from that queue on that node (queues are in creation order, so those are the jobs present at
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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import redis
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from disque.protocol import PRIORITY_FAILING, PRIORITY_LEAVING, Node, by_priority
from disque_spark.client import (
    DisqueError,
    connect,
    describe,
    discover,
    parse_seeds,
)
from disque_spark.options import _opt, _opt_int, _opt_list, _opt_tls
from disque_spark.receipts import (
    ACK_CHUNK,
    Connection,
    FetchPartition,
    delivered_job,
    fetch,
    settle_all,
)
from disque_spark.schema import ARROW_BATCH_ROWS, RowBuilder

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

DEFAULT_STREAM_BATCH = 1000
DEFAULT_STREAM_TIMEOUT_MS = 100
# A micro-batch costs Spark a few hundred milliseconds whatever its size: a backlog
# is best drained in few of them. Kafka's source has no limit by default.
DEFAULT_MAX_PER_TRIGGER = 1_000_000
JOBS_PER_TASK = 100_000  # most jobs one task holds (in memory, as columns)
NODE_REFRESH_SECONDS = 30.0
FETCH_ON = ("executors", "driver")


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
    """GETJOB planned in latestOffset and run in the tasks (or run on the driver there),
    ACKJOB in commit, NACK in stop: see the module docstring."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.build = RowBuilder(schema)
        self.queues = _opt_list(options, "queue")
        if not self.queues:
            raise DisqueError(
                "disque: a streaming read needs option 'queue' (comma-separated queue names)"
            )
        self.seeds = parse_seeds(_opt(options, "nodes"))
        self.password = _opt(options, "password")
        self.tls = _opt_tls(options)
        self.batch_size = _opt_int(options, "batchSize", DEFAULT_STREAM_BATCH, minimum=1)
        self.max_per_trigger = _opt_int(
            options, "maxJobsPerTrigger", DEFAULT_MAX_PER_TRIGGER, minimum=1
        )
        self.timeout_ms = _opt_int(options, "timeoutMs", DEFAULT_STREAM_TIMEOUT_MS)
        self.num_partitions = _opt_int(options, "numPartitions", 1, minimum=1)
        self.fetch_on = (_opt(options, "fetchOn") or FETCH_ON[0]).lower()
        if self.fetch_on not in FETCH_ON:
            raise DisqueError(
                f"disque: option 'fetchOn' must be one of {', '.join(FETCH_ON)}, "
                f"got {self.fetch_on!r}"
            )
        self.run = uuid.uuid4().hex[:16]
        self.seq = 0
        # Fetched by the driver, not yet acknowledged: [(seq, [job, ...]), ...] in order.
        self.pending: list[tuple[int, list[dict[str, Any]]]] = []
        # Planned for the executors, not yet acknowledged: [(seq, [task, ...]), ...].
        self.planned: list[tuple[int, list[FetchPartition]]] = []
        self._nodes: list[Node] = []
        self._clients: dict[str, redis.Redis] = {}
        self._settler: ThreadPoolExecutor | None = None  # ACKs of committed batches
        self._settling: list[Future[Any]] = []
        self._refresh_at = 0.0
        self._rotation = 0
        self._ever_connected = False
        self._target: AvailableNowTarget | None = None
        self._warned_all_available = False
        self._busy = False  # a call is using the connections
        self._terminating = False  # SIGTERM came during that call
        self._sigterm_installed = False
        self._prev_sigterm: Any = None

    # The reader is pickled into the read function sent to executors: no sockets.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(
            pending=[],
            planned=[],
            _nodes=[],
            _clients={},
            _refresh_at=0.0,
            _target=None,
            _sigterm_installed=False,
            _prev_sigterm=None,
            _settler=None,
            _settling=[],
        )
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
        log.info("disque: Trigger.AvailableNow: %d jobs queued at start", self._target.total)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """Fetch the next jobs (driver side) and name them with a new offset.

        Works with both signatures: ``latestOffset()`` (Spark 4.0/4.1) and
        ``latestOffset(start, limit)`` (Spark >= 4.2, admission control).
        """
        with self._working():
            if start is not None and start.get("run") == self.run:
                # Spark plans the next batch only once the last one is committed
                # (its commit log written): everything up to `start` is done.
                self._release(start.get("seq", 0))
            if self.fetch_on == "executors":
                return self._plan_batch(start, self._jobs_wanted(limit))
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
                return start  # no new data: under AvailableNow, the query ends here
            return self._offset()

    def _plan_batch(self, start: dict | None, wanted: int) -> dict[str, Any]:
        """latestOffset when executors fetch: plan the tasks of the next batch."""
        tasks = self._plan(wanted)
        if not tasks and not self.planned and self._target is None and self.timeout_ms > 0:
            time.sleep(self.timeout_ms / 1000)  # an idle queue: look again once, later
            tasks = self._plan(wanted)
        if tasks:
            self.seq += 1
            self.planned.append((self.seq, tasks))
            self._catch_sigterm()
        elif self.planned:
            self.seq += 1  # the empty batch that gets the last one committed
        elif start is not None:
            return start
        return self._offset()

    def _plan(self, wanted: int) -> list[FetchPartition]:
        """Tasks for up to ``wanted`` jobs, on the nodes that hold them (QLEN), or under
        AvailableNow on those that still owe the target some."""
        nodes = self._live_nodes()
        if not nodes:
            return []
        self._rotation = (self._rotation + 1) % len(nodes)
        tasks: list[FetchPartition] = []
        budget = wanted
        for node in nodes[self._rotation :] + nodes[: self._rotation]:
            asks: list[tuple[list[str], int]] = []
            if self._target is not None:
                for queue, left in self._target.on_node(node.id):
                    n = min(left, budget)
                    if n > 0:
                        asks.append(([queue], n))
                        self._target.took(node.id, queue, n, n)
                        budget -= n
            elif budget > 0:
                n = min(sum(self._qlen(node).values()), budget)
                if n > 0:
                    asks.append((self.queues, n))
                    budget -= n
            for part in self._split(asks):
                where = (node.id, node.host, node.port)
                tasks.append(FetchPartition(self.run, self.seq + 1, len(tasks), where, part))
        return tasks

    def _split(self, asks: list[tuple[list[str], int]]) -> list[list[tuple[list[str], int]]]:
        """A node's asks as numPartitions tasks (fewer when there are fewer jobs, more
        when a task would hold over JOBS_PER_TASK: a task keeps its jobs in memory)."""
        if not asks:
            return []
        jobs = sum(n for _, n in asks)
        k = min(max(self.num_partitions, -(-jobs // JOBS_PER_TASK)), jobs)
        parts: list[list[tuple[list[str], int]]] = [[] for _ in range(k)]
        for queues, n in asks:
            for i in range(k):
                share = n // k + (1 if i < n % k else 0)
                if share:
                    parts[i].append((queues, share))
        return [p for p in parts if p]

    def _connection(self) -> Connection:
        return Connection(self.password, self.tls, max(30.0, self.timeout_ms / 1000 + 10))

    def _jobs_wanted(self, limit: Any) -> int:
        """How many jobs the next micro-batch may hold, from Spark's ReadLimit."""
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return max(1, limit.max_rows)
        if (
            ReadAllAvailable is not None
            and isinstance(limit, ReadAllAvailable)
            and self._target is None
            and not self._warned_all_available
        ):
            self._warned_all_available = True
            log.warning(
                "disque: Spark asks for all available jobs (Trigger.Once?). A "
                "single-batch query never acknowledges its jobs (Spark commits a "
                "batch when it plans the next one): they are NACKed when it stops. "
                "Use trigger(availableNow=True). Reading up to %d jobs.",
                self.max_per_trigger,
            )
        return self.max_per_trigger

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if not end or end.get("run") != self.run:
            return []  # a batch of a previous driver: its jobs come back via NACK or RETRY
        low = start.get("seq", 0) if start and start.get("run") == self.run else 0
        high = end.get("seq", 0)
        if self.fetch_on == "executors":
            return [task for seq, tasks in self.planned if low < seq <= high for task in tasks]
        jobs = [job for seq, batch in self.pending if low < seq <= high for job in batch]
        if not jobs:
            return []
        n = min(self.num_partitions, len(jobs))
        size = -(-len(jobs) // n)
        return [JobsPartition(jobs[i : i + size]) for i in range(0, len(jobs), size)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, FetchPartition):  # on an executor: GETJOB here
            jobs = fetch(partition, self._connection(), self.batch_size)
            for start in range(0, len(jobs), ARROW_BATCH_ROWS):
                yield self.build.batch(jobs.columns(start, start + ARROW_BATCH_ROWS))
        else:
            yield from self.build.batches(partition.jobs)  # type: ignore[attr-defined]

    def commit(self, end: dict) -> None:
        if not end or end.get("run") != self.run:
            return
        with self._working():
            self._release(end.get("seq", 0))

    def _release(self, high: int) -> None:
        """Acknowledge the jobs of the batches up to ``high``: Spark committed them."""
        tasks = [task for seq, batch in self.planned if seq <= high for task in batch]
        self.planned = [(seq, batch) for seq, batch in self.planned if seq > high]
        if tasks:
            self._settle_later(tasks)
        done = [job for seq, batch in self.pending if seq <= high for job in batch]
        if done:
            self._ack(done)
        self.pending = [(seq, batch) for seq, batch in self.pending if seq > high]

    def stop(self) -> None:
        """The query ended (stopped, failed, or AvailableNow done): NACK the jobs of
        batches Spark never committed, so they are queued again at once."""
        with self._working():
            try:
                self._settled()
                self._nack_pending()
            finally:
                for client in self._clients.values():
                    with contextlib.suppress(Exception):
                        client.close()
                self._clients = {}
                if self._settler is not None:
                    self._settler.shutdown()
                    self._settler = None
                self._restore_sigterm()

    def _settle_later(self, tasks: list[FetchPartition]) -> None:
        """ACK what the receipts of committed tasks name, in a thread of this process,
        while Spark runs the next batch (the ACKs of 300,000 jobs took half a
        second, during which the query had nothing to run). One thread: commits are
        settled in their order; stop() waits for them before it NACKs the rest."""
        if self._settler is None:
            self._settler = ThreadPoolExecutor(1, thread_name_prefix="disque-commit")
        self._settling.append(self._settler.submit(settle_all, tasks, self._connection(), "ACKJOB"))

    def _settled(self) -> None:
        """Wait until the commits handed to the thread are settled."""
        settling, self._settling = self._settling, []
        for future in settling:
            try:
                future.result()
            except Exception as exc:  # (settle_all logs per node; anything else here)
                log.warning("disque: acknowledging a committed batch failed: %s", exc)

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
        if not self._sigterm_installed:  # else this handler would run again, forever
            os.kill(os.getpid(), signal.SIGTERM)

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        previous = self._prev_sigterm if self._prev_sigterm is not None else signal.SIG_DFL
        with contextlib.suppress(ValueError):  # not the main thread: left installed
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
        tasks = [task for _, batch in self.planned for task in batch]
        self.planned = []  # whatever happens now, never send them twice
        if tasks:
            named, queued = settle_all(tasks, self._connection(), "NACK")
            log.info(
                "disque: stream stopped: %d of %d uncommitted jobs queued again (NACK)",
                queued,
                named,
            )
        jobs = [job for _, batch in self.pending for job in batch]
        self.pending = []  # whatever happens now, never send them twice
        if not jobs:
            return
        queued = 0
        for nid, ids in self._ids_by_node(jobs):
            try:
                queued += self._on_owner(nid, "NACK", ids)
            except DisqueError as exc:
                log.warning("%s", exc)
        log.info(
            "disque: stream stopped: %d of %d uncommitted jobs queued again (NACK); "
            "the others were already re-queued, or come back after their RETRY time",
            queued,
            len(jobs),
        )

    # -- talking to the cluster ---------------------------------------------
    def _client(self, node: Node) -> redis.Redis:
        client = self._clients.get(node.id)
        if client is None:
            socket_timeout = max(30.0, self.timeout_ms / 1000 + 10)
            client = connect(node.host, node.port, self.password, socket_timeout, self.tls)
            self._clients[node.id] = client
        return client

    def _drop(self, node: Node) -> None:
        client = self._clients.pop(node.id, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        self._nodes = [n for n in self._nodes if n.id != node.id]
        self._refresh_at = 0.0

    def _live_nodes(self) -> list[Node]:
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
            self._nodes = (
                [n for n in nodes if n.priority < PRIORITY_FAILING]
                or [n for n in nodes if n.priority < PRIORITY_LEAVING]
                or nodes
            )
            self._refresh_at = time.monotonic() + NODE_REFRESH_SECONDS
            for nid in set(self._clients) - {n.id for n in self._nodes}:
                with contextlib.suppress(Exception):
                    self._clients.pop(nid).close()
        return self._nodes

    def _qlen(self, node: Node) -> dict[tuple[str, str], int]:
        """QLEN of every queue on one node; an unreachable node counts as empty."""
        try:
            pipe = self._client(node).pipeline(transaction=False)
            for queue in self.queues:
                pipe.execute_command("QLEN", queue)
            lengths = pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning(
                "disque: QLEN on %s failed (%s); its jobs are left out for now",
                node.addr,
                describe(exc),
            )
            self._drop(node)
            return {}
        except redis.ResponseError as exc:
            raise DisqueError(f"disque: QLEN on {node.addr} failed: {exc}") from None
        return {(node.id, q): int(n) for q, n in zip(self.queues, lengths, strict=True)}

    def _getjob(
        self, node: Node, count: int, mode: list[Any], queues: list[str]
    ) -> list[dict[str, Any]] | None:
        """One GETJOB on one node; None when the node failed or is leaving (dropped)."""
        try:
            reply = self._client(node).execute_command(
                "GETJOB", *mode, "COUNT", count, "WITHCOUNTERS", "FROM", *queues
            )
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning(
                "disque: GETJOB on %s failed (%s); dropping the node", node.addr, describe(exc)
            )
            self._drop(node)
            return None
        except redis.ResponseError as exc:
            if str(exc).startswith("LEAVING"):
                self._drop(node)
                return None
            raise DisqueError(f"disque: GETJOB on {node.addr} failed: {exc}") from None
        return [delivered_job(item, node.id) for item in reply or ()]

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
                best = by_priority(nodes)[0]
                jobs = (
                    self._getjob(
                        best, min(count, self.batch_size), ["TIMEOUT", self.timeout_ms], self.queues
                    )
                    or []
                )
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
        for node in nodes[self._rotation :] + nodes[: self._rotation]:
            for queues, cap in self._asks(node):
                if len(jobs) >= count:
                    return jobs, True
                want = min(cap, count - len(jobs))
                got = self._getjob(node, want, ["NOHANG"], queues)
                if got is None:
                    break  # node dropped: its other queues too
                if self._target is not None:
                    self._target.took(node.id, queues[0], want, len(got))
                more = more or len(got) == want
                jobs += got
        return jobs, more

    def _asks(self, node: Node) -> list[tuple[list[str], int]]:
        """(queues, most jobs) for one GETJOB each on this node: all queues at once, or
        under AvailableNow each queue for what it still owes the target."""
        if self._target is None:
            return [(self.queues, self.batch_size)]
        return [
            ([queue], min(left, self.batch_size)) for queue, left in self._target.on_node(node.id)
        ]

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
                yield nid, ids[i : i + ACK_CHUNK]

    def _on_owner(self, nid: str, command: str, ids: list[str]) -> int:
        """ACKJOB or NACK on the node that delivered the jobs, else on any other node
        (ACKJOB works anywhere; NACK where a copy of the job lives). Its reply."""
        errors = []
        for node in self._nodes_for(nid):
            try:
                return int(self._client(node).execute_command(command, *ids))
            except (redis.ConnectionError, redis.TimeoutError, OSError, redis.ResponseError) as exc:
                errors.append(f"{node.addr}: {describe(exc)}")
                if not isinstance(exc, redis.ResponseError):
                    self._drop(node)
        raise DisqueError(
            f"disque: {command} of {len(ids)} jobs failed on every node ("
            + ("; ".join(errors) or "none reachable")
            + "); Disque will deliver them again after their RETRY time"
        )

    def _nodes_for(self, nid: str) -> list[Node]:
        try:
            nodes = self._live_nodes()
        except DisqueError:
            nodes = self._nodes
        first = [n for n in nodes if n.id == nid]
        return first + by_priority([n for n in nodes if n.id != nid])
