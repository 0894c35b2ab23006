"""df.write.format("disque"): one ADDJOB per row, to nodes chosen by HELLO."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402
from sparkhelpers import all_jobs, job_ids, seeds  # noqa: E402


def fields(flat: list) -> dict:
    return dict(zip(flat[::2], flat[1::2], strict=True))


@pytest.mark.timeout(120)
def test_write_10000_rows_to_a_3_node_cluster(spark, start_cluster):
    cluster = start_cluster(3)
    df = spark.range(0, 10000, numPartitions=8).select(
        F.concat(F.lit("job-"), F.col("id").cast("string")).alias("body")
    )
    # One seed is enough: the tasks discover the other nodes with HELLO.
    (
        df.write.format("disque")
        .option("nodes", seeds(cluster[0]))
        .option("queue", "wq")
        .mode("append")
        .save()
    )

    qlens = [n.call("QLEN", "wq") for n in cluster]
    assert sum(qlens) == 10000
    assert sum(1 for q in qlens if q) >= 2, f"all 8 tasks wrote to one node: {qlens}"
    # Default REPLICATE is 3 here: every node holds a copy of every job.
    ids = [job_ids(n, "wq") for n in cluster]
    assert all(len(s) == 10000 for s in ids)
    assert ids[0] == ids[1] == ids[2]
    bodies = {fields(flat)[b"body"] for flat in all_jobs(cluster[1], "wq")}
    assert bodies == {f"job-{i}".encode() for i in range(10000)}


@pytest.mark.timeout(120)
def test_queue_column_overrides_the_option_per_row(spark, start_node):
    node = start_node()
    rows = [("a", "qa"), ("b", None), ("c", "qb"), ("d", "qa")]
    df = spark.createDataFrame(rows, "body string, queue string").coalesce(1)
    (
        df.write.format("disque")
        .option("nodes", seeds(node))
        .option("queue", "qdefault")
        .option("retry", "7")
        .option("ttl", "600")
        .option("replicate", "1")
        .mode("append")
        .save()
    )
    assert [node.call("QLEN", q) for q in ("qa", "qb", "qdefault")] == [2, 1, 1]
    jobs = [fields(flat) for flat in all_jobs(node)]
    assert {(j[b"queue"], j[b"body"]) for j in jobs} == {
        (b"qa", b"a"),
        (b"qdefault", b"b"),
        (b"qb", b"c"),
        (b"qa", b"d"),
    }
    assert {j[b"retry"] for j in jobs} == {7}
    assert all(590 <= j[b"ttl"] <= 600 for j in jobs)


@pytest.mark.timeout(120)
def test_binary_bodies_and_delay(spark, start_node):
    node = start_node()
    df = spark.createDataFrame([(bytes([0, 255, 10, 13]),), (b"\x00",)], "body binary")
    (
        df.write.format("disque")
        .option("nodes", seeds(node))
        .option("queue", "bin")
        .option("delay", "30")
        .mode("append")
        .save()
    )
    jobs = [fields(flat) for flat in all_jobs(node, "bin")]
    assert sorted(j[b"body"] for j in jobs) == [b"\x00", bytes([0, 255, 10, 13])]
    # DELAY: the jobs exist but are not queued yet.
    assert {j[b"state"] for j in jobs} == {b"active"}
    assert node.call("QLEN", "bin") == 0


@pytest.mark.timeout(120)
def test_write_failure_names_the_rows_added(spark, start_node):
    node = start_node()
    assert node.call("PAUSE", "paused", "in") == b"in"
    # One ordered partition: rows 0..1233 go to "ok", the rest to the paused queue.
    df = spark.range(0, 2000, numPartitions=1).select(
        F.col("id").cast("string").alias("body"),
        F.when(F.col("id") < 1234, "ok").otherwise("paused").alias("queue"),
    )
    with pytest.raises(Exception) as excinfo:
        df.write.format("disque").option("nodes", seeds(node)).mode("append").save()
    message = str(excinfo.value)
    assert (
        "disque: ADDJOB failed after 1234 rows were added: PAUSED Queue paused in input, try later"
    ) in message
    assert node.call("QLEN", "ok") == 1234
    assert node.call("QLEN", "paused") == 0


@pytest.mark.timeout(120)
def test_writer_skips_a_leaving_node(spark, start_cluster):
    cluster = start_cluster(3)
    assert cluster[0].call("CLUSTER", "LEAVING", "yes") == b"OK"
    df = spark.range(0, 300, numPartitions=3).select(F.col("id").cast("string").alias("body"))
    # The only seed is the leaving node: HELLO gives it priority 100.
    (
        df.write.format("disque")
        .option("nodes", seeds(cluster[0]))
        .option("queue", "lv")
        .option("replicate", "2")
        .mode("append")
        .save()
    )
    assert cluster[0].call("QLEN", "lv") == 0
    assert cluster[1].call("QLEN", "lv") + cluster[2].call("QLEN", "lv") == 300


@pytest.mark.timeout(120)
def test_write_configuration_errors(spark, start_node):
    node = start_node()
    no_body = spark.createDataFrame([("x",)], "text string")
    with pytest.raises(Exception, match="needs a 'body' column"):
        no_body.write.format("disque").option("nodes", seeds(node)).option("queue", "q").mode(
            "append"
        ).save()
    body = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="set option 'queue'"):
        body.write.format("disque").option("nodes", seeds(node)).mode("append").save()
    with pytest.raises(Exception, match="only mode"):
        body.write.format("disque").option("nodes", seeds(node)).option("queue", "q").mode(
            "overwrite"
        ).save()
    with pytest.raises(Exception, match="no seed node answered HELLO"):
        body.write.format("disque").option("nodes", "127.0.0.1:1").option("queue", "q").mode(
            "append"
        ).save()
    assert node.call("QLEN", "q") == 0


@pytest.mark.timeout(180)
def test_a_node_killed_mid_write_fails_it_with_the_rows_added(spark, start_cluster):
    """REPLICATE 3 on 3 nodes, several connections a task, a node killed mid-write:
    the write fails naming the rows added, which are all there, and no row was
    added twice (the writer resends only rows a node refused with -LEAVING)."""
    import re
    import threading

    from testkit.nodes import wait_for

    cluster = start_cluster(3)
    rows = 30000
    df = spark.range(0, rows, numPartitions=2).select(F.col("id").cast("string").alias("body"))
    victim = cluster[2]

    def kill_when_started() -> None:
        wait_for(lambda: victim.info("jobs")["registered_jobs"] > 1000, 60)
        victim.kill()

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    with pytest.raises(Exception) as excinfo:
        (
            df.write.format("disque")
            .option("nodes", seeds(cluster[0], cluster[1]))
            .option("queue", "kq")
            .option("replicate", "3")
            .option("timeout", "2000")
            .option("concurrency", "4")
            .mode("append")
            .save()
        )
    killer.join(timeout=10)
    added = re.search(r"ADDJOB failed after (\d+) rows were added", str(excinfo.value))
    assert added, str(excinfo.value)[-2000:]
    bodies = [fields(flat)[b"body"] for node in cluster[:2] for flat in all_jobs(node, "kq")]
    # Every job has a copy on both survivors (REPLICATE 3): count one node's.
    on_first = [fields(flat)[b"body"] for flat in all_jobs(cluster[0], "kq")]
    assert len(on_first) == len(set(on_first)), "a row was added twice"
    assert int(added.group(1)) <= len(set(bodies)) < rows
