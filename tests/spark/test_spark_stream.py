"""spark.readStream.format("disque"): GETJOB on the driver, ACKJOB after the batch commits."""

from __future__ import annotations

import pickle
import threading

import pytest

pytest.importorskip("pyspark")

from nodes import wait_for  # noqa: E402
from sparkhelpers import add_jobs, job_ids, seeds  # noqa: E402

from disque_spark.client import DisqueError  # noqa: E402
from disque_spark.source import SCHEMA, DisqueStreamReader  # noqa: E402


class Collector:
    """A foreachBatch function remembering every row; optionally failing non-empty batches."""

    def __init__(self, fail: bool = False) -> None:
        self.rows: list = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.collect()
        with self.lock:
            self.rows.extend(rows)
        if self.fail and rows:
            raise RuntimeError("boom: this batch fails before it is committed")

    @property
    def ids(self) -> list[str]:
        with self.lock:
            return [r.id for r in self.rows]


def start_stream(spark, nodes: str, queue: str, sink: Collector, checkpoint, trigger: str =
                 "200 milliseconds", **options):
    reader = spark.readStream.format("disque").option("nodes", nodes).option("queue", queue)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return (reader.load().writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime=trigger).start())


def no_jobs_left(nodes) -> bool:
    return not any(job_ids(n) for n in nodes)


@pytest.mark.timeout(120)
def test_stream_delivers_each_job_once_and_acks_all(spark, start_cluster, tmp_path):
    cluster = start_cluster(3)
    added = []
    for i, node in enumerate(cluster):
        added += add_jobs(node, "sq", [f"n{i}-{k}" for k in range(500)])
    sink = Collector()
    query = start_stream(spark, seeds(cluster[0]), "sq", sink, tmp_path / "ck",
                         batchSize=400, numPartitions=2)
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
        f"n{i}-{k}".encode() for i in range(3) for k in range(500)}


@pytest.mark.timeout(120)
def test_failed_batch_is_delivered_again(spark, start_node, tmp_path):
    node = start_node()
    ids = add_jobs(node, "fq", [f"f{k}" for k in range(20)], "RETRY", 1)
    failing = Collector(fail=True)
    query = start_stream(spark, seeds(node), "fq", failing, tmp_path / "ck")
    with pytest.raises(Exception, match="boom"):
        query.awaitTermination(60)
    assert set(failing.ids) == set(ids)
    # Never committed, so never acknowledged: the jobs are still there.
    assert job_ids(node) == set(ids)

    # Same checkpoint: the failed batch is planned again (empty: its jobs were
    # fetched by the previous reader) and Disque re-delivers them after RETRY.
    sink = Collector()
    query = start_stream(spark, seeds(node), "fq", sink, tmp_path / "ck")
    try:
        wait_for(lambda: set(sink.ids) >= set(ids), 60, 0.2, "jobs delivered again")
        wait_for(lambda: no_jobs_left([node]), 30, 0.2, "every job acked")
    finally:
        query.stop()
    assert all(r.additional_deliveries >= 1 for r in sink.rows)


@pytest.mark.timeout(120)
def test_stream_stopped_before_commit_sees_jobs_again(spark, start_node, tmp_path):
    node = start_node()
    ids = add_jobs(node, "stq", [f"s{k}" for k in range(10)], "RETRY", 2)
    first = Collector()
    # The next trigger (which would commit and ACK batch 0) is an hour away.
    query = start_stream(spark, seeds(node), "stq", first, tmp_path / "ck1", trigger="1 hour")
    try:
        wait_for(lambda: len(first.ids) == 10, 60, 0.2, "first delivery")
    finally:
        query.stop()
    assert set(first.ids) == set(ids)
    assert job_ids(node) == set(ids)       # processed, but not acknowledged

    second = Collector()
    query = start_stream(spark, seeds(node), "stq", second, tmp_path / "ck2")
    try:
        wait_for(lambda: set(second.ids) == set(ids), 60, 0.2, "jobs delivered again")
        wait_for(lambda: no_jobs_left([node]), 30, 0.2, "every job acked")
    finally:
        query.stop()


# ---- the reader's offset protocol, driven by hand (no streaming engine) ----

@pytest.mark.timeout(30)
def test_reader_offsets_commit_and_idle_bump(start_node):
    node = start_node()
    ids = add_jobs(node, "uq", ["a", "b", "c"])
    reader = DisqueStreamReader(SCHEMA, {"nodes": seeds(node), "queue": "uq",
                                         "batchSize": "2", "timeoutMs": "0"})
    try:
        start = reader.initialOffset()
        end1 = reader.latestOffset(start, None)
        assert end1["seq"] == 1 and end1["run"] == start["run"]
        assert reader.initialOffset() == start            # constant
        end2 = reader.latestOffset(end1, None)
        parts = reader.partitions(start, end2)
        rows = [row for p in parts for row in reader.read(pickle.loads(pickle.dumps(p)))]
        assert sorted(r[0] for r in rows) == sorted(ids)
        # Nothing new but jobs unacknowledged: the offset still moves on...
        end3 = reader.latestOffset(end2, None)
        assert end3["seq"] == 3 and reader.partitions(end2, end3) == []
        reader.commit(end1)                               # acks batch 1 only
        wait_for(lambda: len(job_ids(node)) == 1, 10, message="batch 1 acked")
        reader.commit(end2)
        wait_for(lambda: not job_ids(node), 10, message="jobs acked")
        # ...and stops once everything is acknowledged.
        assert reader.latestOffset(end3, None) == end3
        assert reader.latestOffset() == end3                # Spark 4.0 signature
        # A batch planned by an earlier driver has no jobs here.
        assert reader.partitions({"run": "old", "seq": 5}, {"run": "old", "seq": 6}) == []
        reader.commit({"run": "old", "seq": 6})
        # Sent to executors without sockets nor pending jobs.
        clone = pickle.loads(pickle.dumps(reader))
        assert clone.pending == [] and clone._clients == {}
    finally:
        reader.stop()


def test_stream_needs_a_queue():
    with pytest.raises(DisqueError, match="needs option 'queue'"):
        DisqueStreamReader(SCHEMA, {"nodes": "127.0.0.1:7711"})
