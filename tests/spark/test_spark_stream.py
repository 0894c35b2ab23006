"""spark.readStream.format("disque"): GETJOB on the executors (or the driver), ACKJOB after
the batch commits, NACK for what never commits, Trigger.AvailableNow."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading

import pytest

pytest.importorskip("pyspark")

from sparkhelpers import add_jobs, job_ids, read_rows, seeds  # noqa: E402

from disque_spark.client import DisqueError  # noqa: E402
from disque_spark.schema import SCHEMA  # noqa: E402
from disque_spark.stream import AVAILABLE_NOW_BASES, DisqueStreamReader  # noqa: E402
from testkit.nodes import as_dict, wait_for  # noqa: E402

needs_available_now = pytest.mark.skipif(
    not AVAILABLE_NOW_BASES, reason="Trigger.AvailableNow needs pyspark >= 4.2"
)


class Collector:
    """A foreachBatch function remembering every row; optionally failing non-empty batches."""

    def __init__(self, fail: bool = False, on_first=None) -> None:
        self.rows: list = []
        self.batches = 0  # non-empty ones
        self.fail = fail
        self.on_first = on_first  # called once, after the first non-empty batch
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.collect()
        with self.lock:
            self.rows.extend(rows)
            self.batches += bool(rows)
        if rows and self.on_first is not None:
            self.on_first, hook = None, self.on_first
            hook()
        if self.fail and rows:
            raise RuntimeError("boom: this batch fails before it is committed")

    @property
    def ids(self) -> list[str]:
        with self.lock:
            return [r.id for r in self.rows]


def start_stream(
    spark,
    nodes: str,
    queue: str,
    sink: Collector,
    checkpoint,
    trigger: str = "200 milliseconds",
    **options,
):
    """A foreachBatch query; trigger is a processing time, or "availableNow"."""
    reader = spark.readStream.format("disque").option("nodes", nodes).option("queue", queue)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    writer = (
        reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    )
    if trigger == "availableNow":
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=trigger).start()


def no_jobs_left(nodes) -> bool:
    return not any(job_ids(n) for n in nodes)


def qlen(nodes, queue: str) -> int:
    return sum(n.call("QLEN", queue) for n in nodes)


def nacks(node, ids) -> list[int]:
    return [as_dict(node.call("SHOW", jid))[b"nacks"] for jid in ids]


@pytest.mark.timeout(120)
def test_stream_delivers_each_job_once_and_acks_all(spark, start_cluster, tmp_path):
    cluster = start_cluster(3)
    added = []
    for i, node in enumerate(cluster):
        added += add_jobs(node, "sq", [f"n{i}-{k}" for k in range(500)])
    sink = Collector()
    query = start_stream(
        spark, seeds(cluster[0]), "sq", sink, tmp_path / "ck", batchSize=400, numPartitions=2
    )
    try:
        wait_for(lambda: len(sink.ids) >= 1500, 60, 0.2, "1500 jobs streamed")
        # The last batch is acknowledged too although the queue is now idle.
        wait_for(lambda: no_jobs_left(cluster), 30, 0.2, "every job acked")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    assert len(sink.ids) == len(set(sink.ids)) == 1500
    assert set(sink.ids) == set(added)
    node_ids = {n.call("HELLO")[1].decode() for n in cluster}
    row = sink.rows[0]
    assert row.queue == "sq" and row.state == "active" and row.node in node_ids
    assert row.nacks == 0 and row.additional_deliveries == 0
    assert row.repl is None and row.ttl is None
    assert {bytes(r.body) for r in sink.rows} == {
        f"n{i}-{k}".encode() for i in range(3) for k in range(500)
    }


@pytest.mark.timeout(240)
def test_a_100k_drain_delivers_and_acks_each_job_exactly_once(spark, start_cluster, tmp_path):
    """Nothing fails: every job is delivered once (no duplicate from the executors'
    tasks) and acknowledged, across three nodes."""
    cluster = start_cluster(3)
    added = set()
    for i, node in enumerate(cluster):
        added |= set(add_jobs(node, "dq", [b"d%d-%d" % (i, k) for k in range(33_334)]))
    sink = Collector()
    query = start_stream(
        spark, seeds(cluster[0]), "dq", sink, tmp_path / "ck", maxJobsPerTrigger=20_000
    )
    try:
        wait_for(lambda: len(sink.ids) >= len(added), 150, 0.5, "100k jobs streamed")
        wait_for(lambda: no_jobs_left(cluster), 30, 0.2, "every job acked")
        assert query.exception() is None
    finally:
        query.stop()
    assert len(sink.ids) == len(added) == 100_002
    assert set(sink.ids) == added


@pytest.mark.timeout(120)
def test_failed_batch_is_delivered_again(spark, start_node, tmp_path):
    node = start_node()
    # RETRY far away: only the NACK of the failed query can bring them back in time.
    ids = add_jobs(node, "fq", [f"f{k}" for k in range(20)], "RETRY", 300)
    failing = Collector(fail=True)
    query = start_stream(spark, seeds(node), "fq", failing, tmp_path / "ck")
    with pytest.raises(Exception, match="boom"):
        query.awaitTermination(60)
    assert set(failing.ids) == set(ids)
    # Never committed, so never acknowledged: the jobs are still there, queued again.
    assert job_ids(node) == set(ids)
    wait_for(lambda: qlen([node], "fq") == 20, 15, 0.1, "failed batch NACKed")

    # Same checkpoint: the failed batch is planned again (empty: its jobs were
    # fetched by the previous reader) and the new reader gets them from the queue.
    sink = Collector()
    query = start_stream(spark, seeds(node), "fq", sink, tmp_path / "ck")
    try:
        wait_for(lambda: set(sink.ids) >= set(ids), 60, 0.2, "jobs delivered again")
        wait_for(lambda: no_jobs_left([node]), 30, 0.2, "every job acked")
    finally:
        query.stop()
    assert all(r.nacks == 1 and r.additional_deliveries == 0 for r in sink.rows)


@pytest.mark.timeout(120)
def test_query_stopped_mid_batch_nacks_the_batch(spark, start_node, tmp_path):
    """The stop comes while the sink is still inside the batch: it never commits."""
    node = start_node()
    ids = add_jobs(node, "mq", [f"m{k}" for k in range(30)], "RETRY", 300)
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        release.wait(30)

    sink = Collector(on_first=hold)
    # No second trigger (it would commit the batch) while the stop is on its way.
    query = start_stream(spark, seeds(node), "mq", sink, tmp_path / "ck", trigger="1 hour")
    stopper = threading.Thread(target=query.stop)
    try:
        assert inside.wait(60), "no batch reached the sink"
        assert qlen([node], "mq") == 0
        stopper.start()  # query.stop() while the sink holds the batch
    finally:
        release.set()
    stopper.join(60)
    query.stop()  # (nothing left to do if the thread did it)
    assert not query.isActive and set(sink.ids) == set(ids)
    wait_for(lambda: qlen([node], "mq") == 30, 15, 0.1, "the batch NACKed")
    assert nacks(node, ids) == [1] * 30 and job_ids(node) == set(ids)


def python_workers() -> list[int]:
    """PIDs of Spark's Python workers: the children of the pyspark.daemon processes."""
    daemons = set()
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
            ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"pyspark.daemon" in cmdline:
            daemons.add(int(entry))
            children.append((int(entry), ppid))
    return [pid for pid, ppid in children if ppid in daemons]


@pytest.mark.timeout(150)
def test_killed_python_worker_leaves_its_jobs_to_retry(spark, start_node, tmp_path):
    """A worker killed while its task takes jobs (one GETJOB each: slow on purpose), so
    before it could leave a receipt: nobody can NACK those jobs; RETRY brings them back."""
    node = start_node()
    ids = add_jobs(node, "kq", [f"k{k}" for k in range(3000)], "RETRY", 3)
    sink = Collector()
    query = start_stream(spark, seeds(node), "kq", sink, tmp_path / "ck", batchSize=1,
                         maxJobsPerTrigger=3000)  # fmt: skip
    killed = []
    try:
        wait_for(lambda: qlen([node], "kq") < 2900, 60, 0.01, "the task taking jobs")
        for pid in python_workers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        taken = 3000 - qlen([node], "kq")
        with contextlib.suppress(Exception):
            query.awaitTermination(60)
    finally:
        query.stop()
    assert killed and 0 < taken < 3000 and sink.ids == []
    # No receipt, no commit: the jobs taken wait for their RETRY time, then come back.
    wait_for(lambda: qlen([node], "kq") == 3000, 30, 0.2, "RETRY re-queued the jobs")
    assert sorted(job_ids(node, "kq")) == sorted(ids)
    assert set(nacks(node, ids)) == {0}  # re-queued by RETRY, not NACKed


@pytest.mark.timeout(120)
def test_stopped_stream_nacks_its_uncommitted_batch(spark, start_node, tmp_path):
    node = start_node()
    # RETRY far away: the jobs can only be back in time through a NACK.
    ids = add_jobs(node, "stq", [f"s{k}" for k in range(10)], "RETRY", 300)
    first = Collector()
    # The next trigger (which would commit and ACK batch 0) is an hour away.
    query = start_stream(spark, seeds(node), "stq", first, tmp_path / "ck1", trigger="1 hour")
    try:
        wait_for(lambda: len(first.ids) == 10, 60, 0.2, "first delivery")
        assert qlen([node], "stq") == 0 and nacks(node, ids) == [0] * 10
    finally:
        query.stop()
    assert set(first.ids) == set(ids)
    # Processed but not committed: not acknowledged, queued again at once.
    wait_for(lambda: qlen([node], "stq") == 10, 15, 0.1, "uncommitted jobs NACKed")
    assert nacks(node, ids) == [1] * 10

    second = Collector()
    query = start_stream(spark, seeds(node), "stq", second, tmp_path / "ck2")
    try:
        wait_for(lambda: set(second.ids) == set(ids), 60, 0.2, "jobs delivered again")
        wait_for(lambda: no_jobs_left([node]), 30, 0.2, "every job acked")
    finally:
        query.stop()
    assert all(r.nacks == 1 for r in second.rows)


@needs_available_now
@pytest.mark.timeout(120)
def test_available_now_drains_what_was_queued_at_start(spark, start_cluster, tmp_path):
    cluster = start_cluster(2)
    early = add_jobs(cluster[0], "aq", [f"e0-{k}" for k in range(20)])
    early += add_jobs(cluster[1], "aq", [f"e1-{k}" for k in range(15)])
    late: list[str] = []

    def add_late() -> None:  # after the query started: beyond its target
        for i, node in enumerate(cluster):
            late.extend(add_jobs(node, "aq", [f"l{i}-{k}" for k in range(5)]))

    sink = Collector(on_first=add_late)
    query = start_stream(
        spark,
        seeds(cluster[0]),
        "aq",
        sink,
        tmp_path / "ck",
        trigger="availableNow",
        maxJobsPerTrigger=10,
        batchSize=4,
    )
    try:
        assert query.awaitTermination(90), "the availableNow query did not end by itself"
    finally:
        query.stop()
    assert query.exception() is None
    assert sorted(sink.ids) == sorted(early)  # each job present at start, once
    assert sink.batches >= 4  # 35 jobs, at most 10 per batch
    assert len(late) == 10 and qlen(cluster, "aq") == 10
    # Every consumed job acked; the late ones wait, untouched.
    wait_for(
        lambda: set().union(*(job_ids(n) for n in cluster)) == set(late),
        10,
        0.1,
        "consumed jobs acked",
    )


# ---- the reader's offset protocol, driven by hand (no streaming engine) ----


@pytest.mark.timeout(30)
def test_reader_offsets_commit_and_idle_bump(start_node):
    node = start_node()
    ids = add_jobs(node, "uq", ["a", "b", "c"])
    reader = DisqueStreamReader(
        SCHEMA,
        {
            "nodes": seeds(node),
            "queue": "uq",
            "batchSize": "2",
            "maxJobsPerTrigger": "2",
            "timeoutMs": "0",
            "fetchOn": "driver",
        },
    )
    try:
        start = reader.initialOffset()
        end1 = reader.latestOffset(start, None)
        assert end1["seq"] == 1 and end1["run"] == start["run"]
        assert reader.initialOffset() == start  # constant
        rows = [r for p in reader.partitions(start, end1) for r in read_rows(reader, p)]
        assert len(rows) == 2 and set(r[0] for r in rows) < set(ids)
        # Spark >= 4.2 plans batch 2 once batch 1 is committed: planning acks it.
        end2 = reader.latestOffset(end1, None)
        wait_for(lambda: len(job_ids(node)) == 1, 10, message="batch 1 acked")
        parts = reader.partitions(end1, end2)
        rows += [row for p in parts for row in read_rows(reader, pickle.loads(pickle.dumps(p)))]
        assert sorted(r[0] for r in rows) == sorted(ids)
        # Spark 4.0's latestOffset() says nothing of what was committed: with jobs
        # unacknowledged and nothing new, the offset still moves on (the empty
        # batch that gets batch 2 committed)...
        end3 = reader.latestOffset()
        assert end3["seq"] == 3 and reader.partitions(end2, end3) == []
        reader.commit(end2)
        wait_for(lambda: not job_ids(node), 10, message="jobs acked")
        # ...and stops once everything is acknowledged.
        assert reader.latestOffset(end3, None) == end3
        assert reader.latestOffset() == end3
        # A batch planned by an earlier driver has no jobs here.
        assert reader.partitions({"run": "old", "seq": 5}, {"run": "old", "seq": 6}) == []
        reader.commit({"run": "old", "seq": 6})
        # Sent to executors without sockets nor pending jobs.
        clone = pickle.loads(pickle.dumps(reader))
        assert clone.pending == [] and clone._clients == {}
    finally:
        reader.stop()


@needs_available_now
@pytest.mark.timeout(30)
def test_reader_available_now_target_and_nack_on_stop(start_node):
    node = start_node()
    ids = add_jobs(node, "vq", [f"v{k}" for k in range(5)], "RETRY", 300)
    reader = DisqueStreamReader(
        SCHEMA,
        {
            "nodes": seeds(node),
            "queue": "vq,none",
            "batchSize": "2",
            "maxJobsPerTrigger": "3",
            "fetchOn": "driver",
        },
    )
    limit = reader.getDefaultReadLimit()
    assert limit.max_rows == 3
    try:
        reader.prepareForTriggerAvailableNow()
        late = add_jobs(node, "vq", ["late"], "RETRY", 300)
        end1 = reader.latestOffset(reader.initialOffset(), limit)
        assert signal.getsignal(signal.SIGTERM) == reader._on_sigterm
        end2 = reader.latestOffset(end1, limit)  # batch 1 committed: acked
        batches = [[job["id"] for job in batch] for _, batch in reader.pending]
        assert [len(b) for b in batches] == [2] and len(set(ids) - set(batches[0])) == 3
        wait_for(lambda: job_ids(node) == set(batches[0]) | set(late), 10, "batch 1 acked")
        assert end2["seq"] == 2
    finally:
        reader.stop()  # batch 2 was never committed
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert job_ids(node) == set(batches[0]) | set(late)
    assert node.call("QLEN", "vq") == 3  # NACKed, not left to RETRY
    assert nacks(node, batches[0]) == [1, 1] and nacks(node, late) == [0]


@pytest.mark.timeout(30)
def test_executor_tasks_leave_receipts_the_driver_settles(start_node):
    """Tasks take jobs on the executors and leave a receipt per task; a retried task
    yields the same rows; commit acks what the receipts name, stop NACKs the rest."""
    node = start_node()
    ids = add_jobs(node, "xq", [f"x{k}" for k in range(7)], "RETRY", 300)
    reader = DisqueStreamReader(
        SCHEMA,
        {
            "nodes": seeds(node),
            "queue": "xq",
            "batchSize": "2",
            "maxJobsPerTrigger": "2",
            "timeoutMs": "0",
        },
    )
    limit = reader.getDefaultReadLimit()
    try:
        start = reader.initialOffset()
        end1 = reader.latestOffset(start, None)
        tasks = reader.partitions(start, end1)
        assert [sum(n for _, n in t.asks) for t in tasks] == [2]  # maxJobsPerTrigger
        sent = pickle.loads(pickle.dumps(tasks[0]))  # as shipped to an executor
        first = [r[0] for r in read_rows(reader, sent)]
        retried = [r[0] for r in read_rows(reader, pickle.loads(pickle.dumps(tasks[0])))]
        assert len(first) == 2 and retried == first and node.call("QLEN", "xq") == 5
        end2 = reader.latestOffset(end1, limit)  # batch 1 committed: acked
        second = [r[0] for t in reader.partitions(end1, end2) for r in read_rows(reader, t)]
        receipt = f"disque-spark:fetched:{start['run']}:1:0"
        wait_for(  # (in the reader's commit thread)
            lambda: not job_ids(node) & set(first) and node.call("QLEN", receipt) == 0,
            10,
            message="batch 1 acked, its receipt deleted",
        )
    finally:
        reader.stop()  # batch 2 never committed: NACKed
    assert len(second) == 2 and not set(second) & set(first)
    assert job_ids(node) == set(ids) - set(first)
    assert node.call("QLEN", "xq") == 5 and nacks(node, second) == [1, 1]
    assert node.call("QLEN", f"disque-spark:fetched:{start['run']}:2:0") == 0  # settled


def test_a_task_holds_at_most_jobs_per_task():
    """A node's share of a big batch is split so that no task holds (in memory) over
    JOBS_PER_TASK jobs; numPartitions stays the least number of tasks per node."""
    from disque_spark.stream import JOBS_PER_TASK

    reader = DisqueStreamReader(SCHEMA, {"queue": "q", "numPartitions": "2"})
    big = [(["q"], 2 * JOBS_PER_TASK + 1), (["r"], 5)]
    tasks = reader._split(big)
    assert len(tasks) == 3 and max(sum(n for _, n in t) for t in tasks) <= JOBS_PER_TASK
    assert sum(n for t in tasks for _, n in t) == 2 * JOBS_PER_TASK + 6
    assert [sum(n for _, n in t) for t in reader._split([(["q"], 7)])] == [4, 3]
    assert reader._split([(["q"], 1)]) == [[(["q"], 1)]]


def test_stream_bad_options():
    with pytest.raises(DisqueError, match="needs option 'queue'"):
        DisqueStreamReader(SCHEMA, {"nodes": "127.0.0.1:7711"})
    with pytest.raises(DisqueError, match="'maxJobsPerTrigger' must be >= 1, got 0"):
        DisqueStreamReader(SCHEMA, {"queue": "q", "maxJobsPerTrigger": "0"})
    with pytest.raises(DisqueError, match="'fetchOn' must be one of executors, driver"):
        DisqueStreamReader(SCHEMA, {"queue": "q", "fetchOn": "mars"})
    with pytest.raises(DisqueError, match="'maxJobsPerTrigger' must be an integer"):
        DisqueStreamReader(SCHEMA, {"queue": "q", "maxJobsPerTrigger": "lots"})


def test_rows_go_to_arrow_by_column_whatever_the_bytes():
    """A task's jobs become one Arrow batch: the schema Spark checks, constant and
    absent columns, a queue name that is not UTF-8 (replaced, not an error) and a
    body declared as a string."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from disque_spark.receipts import Delivered
    from disque_spark.schema import RowBuilder

    jobs = Delivered("node1")
    jobs.add_getjob_reply(
        [
            [b"q\xff", b"D-1", b"caf\xc3\xa9", b"nacks", 2, b"additional-deliveries", 1],
            [b"q", b"D-2", b"\xfe", b"nacks", 0, b"additional-deliveries", 0],
        ]
    )
    batch = RowBuilder(SCHEMA).batch(jobs.columns())
    rows = batch.to_pylist()
    assert [r["queue"] for r in rows] == ["q\ufffd", "q"]
    assert [r["body"] for r in rows] == [b"caf\xc3\xa9", b"\xfe"]
    assert {r["state"] for r in rows} == {"active"} and {r["node"] for r in rows} == {"node1"}
    assert [r["nacks"] for r in rows] == [2, 0] and rows[0]["ttl"] is None
    text = StructType(
        [StructField("id", StringType(), False), StructField("body", StringType(), True)]
    )
    rows = RowBuilder(text).batch(jobs.columns(1)).to_pylist()
    assert rows == [{"id": "D-2", "body": "\ufffd"}]
    assert (
        RowBuilder(StructType([StructField("body", BinaryType())]))
        .batch(jobs.columns(0, 1))
        .num_rows
        == 1
    )
