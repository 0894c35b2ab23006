"""spark.read.format("disque"): a JSCAN snapshot of every job on every node."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from sparkhelpers import add_jobs, job_ids, seeds  # noqa: E402

import disque_spark  # noqa: E402
from testkit.nodes import wait_for  # noqa: E402


@pytest.fixture
def prepared(start_cluster):
    """30 jobs (REPLICATE 2) in 'snap' on node 0: 10 fetched, 5 of those acked; 4 in 'other'."""
    cluster = start_cluster(3)
    ids = add_jobs(cluster[0], "snap", [f"s{i}" for i in range(30)], "REPLICATE", 2)
    other = add_jobs(cluster[1], "other", [f"o{i}" for i in range(4)], "REPLICATE", 1)
    fetched = cluster[0].call("GETJOB", "NOHANG", "COUNT", 10, "FROM", "snap")
    fetched_ids = [item[1].decode() for item in fetched]
    assert len(fetched_ids) == 10
    acked = fetched_ids[:5]
    assert cluster[0].call("ACKJOB", *acked) == 5

    def acks_collected() -> bool:
        return not any(set(acked) & job_ids(n) for n in cluster)

    wait_for(acks_collected, 15, message="acked jobs garbage collected on every node")
    return cluster, ids, other, fetched_ids[5:], set(acked)


@pytest.mark.timeout(120)
def test_snapshot_has_every_job_with_its_state(spark, prepared):
    cluster, ids, other, active, acked = prepared
    df = spark.read.format("disque").option("nodes", seeds(cluster[2])).load()
    assert df.rdd.getNumPartitions() == 3  # one per node, found via HELLO
    rows = df.collect()
    node_ids = {n.call("HELLO")[1].decode() for n in cluster}
    assert {r.node for r in rows} <= node_ids

    snap = [r for r in rows if r.queue == "snap"]
    # REPLICATE 2: every live job appears once per node holding a copy.
    per_id: dict[str, list] = {}
    for r in snap:
        per_id.setdefault(r.id, []).append(r)
    assert set(per_id) == set(ids) - acked
    assert all(len(copies) == 2 for copies in per_id.values())
    assert all(len({c.node for c in copies}) == 2 for copies in per_id.values())
    # On node 0 (where the jobs were added) 20 are queued and the 5 fetched ones active.
    on0 = {r.id: r.state for r in snap if r.node == cluster[0].call("HELLO")[1].decode()}
    assert sorted(on0.values()).count("queued") == 20
    assert {on0[i] for i in active} == {"active"}
    # Replicas are active; nothing is in another state.
    assert {r.state for r in snap} == {"queued", "active"}

    r = per_id[ids[-1]][0]
    assert r.repl == 2 and isinstance(r.ttl, int) and 86000 < r.ttl <= 86401
    assert r.ctime > 10**18 and r.retry == 300 and r.delay == 0
    assert r.nacks == 0 and r.additional_deliveries == 0
    assert bytes(r.body) == b"s29"
    assert len(r.nodes_delivered) == 2
    assert {r.id for r in rows if r.queue == "other"} == set(other)


@pytest.mark.timeout(120)
def test_snapshot_filters_and_dedupe(spark, prepared):
    cluster, ids, other, active, acked = prepared
    nodes = seeds(*cluster)
    queued = (
        spark.read.format("disque")
        .option("nodes", nodes)
        .option("queue", "snap")
        .option("state", "queued")
        .load()
        .collect()
    )
    assert len(queued) == 20 and {r.state for r in queued} == {"queued"}
    both = (
        spark.read.format("disque")
        .option("nodes", nodes)
        .option("queue", "snap,other")
        .option("state", "queued, active")
        .load()
    )
    assert both.count() == 25 * 2 + 4

    deduped = disque_spark.read_snapshot(spark, dedupe=True, nodes=nodes).collect()
    by_id = {r.id: r for r in deduped}
    assert len(deduped) == len(by_id) == 25 + 4
    assert sum(1 for r in deduped if r.state == "queued") == 20 + 4
    assert {by_id[i].state for i in active} == {"active"}
    assert all(len(by_id[i].nodes) == 2 for i in set(ids) - acked)

    # A narrower user schema, body as text.
    texts = (
        spark.read.format("disque")
        .schema("id string, body string, node string")
        .option("nodes", nodes)
        .option("queue", "other")
        .load()
        .collect()
    )
    assert sorted(r.body for r in texts) == ["o0", "o1", "o2", "o3"]


@pytest.mark.timeout(120)
def test_snapshot_option_errors(spark, start_node):
    node = start_node()
    with pytest.raises(Exception, match="unknown job state"):
        spark.read.format("disque").option("nodes", seeds(node)).option(
            "state", "done"
        ).load().collect()
    with pytest.raises(Exception, match="unknown column"):
        spark.read.format("disque").schema("id string, colour string").option(
            "nodes", seeds(node)
        ).load().collect()


@pytest.mark.timeout(120)
def test_password(spark, start_node):
    node = start_node(config={"requirepass": "s3cret"})
    df = spark.createDataFrame([("x",), ("y",)], "body string")
    (
        df.write.format("disque")
        .option("nodes", seeds(node))
        .option("password", "s3cret")
        .option("queue", "pw")
        .mode("append")
        .save()
    )
    rows = (
        spark.read.format("disque")
        .option("nodes", seeds(node))
        .option("password", "s3cret")
        .load()
        .collect()
    )
    assert sorted(bytes(r.body) for r in rows) == [b"x", b"y"]
    with pytest.raises(Exception, match="Authentication required"):
        spark.read.format("disque").option("nodes", seeds(node)).load().collect()


@pytest.mark.timeout(120)
def test_unreachable_node(spark, start_cluster):
    cluster = start_cluster(3)
    add_jobs(cluster[0], "un", ["a", "b"], "REPLICATE", 3)
    cluster[2].kill()
    reader = spark.read.format("disque").option("nodes", seeds(cluster[0]))
    with pytest.raises(Exception, match="disque: cannot scan node"):
        reader.load().collect()
    rows = reader.option("skipUnreachable", "true").load().collect()
    assert len(rows) == 4 and len({r.node for r in rows}) == 2
