"""A Spark driver in a process of its own, for a Spark cluster (a standalone
master's ``spark://`` URL, or a Spark Connect server's ``sc://``): it writes
rows to Disque with the ``disque`` format, reads a snapshot, drains the queue
with a stream (``availableNow``: acknowledged after the commit), and prints
what it saw as one JSON line. test_spark_cluster.py runs it: a process of its
own because a process has one SparkContext, and the suite's is local.

    python cluster_driver.py URL SEEDS QUEUE ROWS
"""

from __future__ import annotations

import json
import sys


def main(url: str, seeds: str, queue: str, rows: int) -> None:
    from pyspark.sql import functions as F

    import disque_spark

    if url.startswith("sc://"):
        spark = disque_spark.remote_session(url)
    else:
        spark = disque_spark.session(url, app_name="disque-spark-cluster-test")
    df = spark.range(0, rows, numPartitions=4).select(
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("body")
    )
    df.write.format("disque").option("nodes", seeds).option("queue", queue).option(
        "replicate", "2"
    ).mode("append").save()
    snapshot = disque_spark.read_snapshot(spark, dedupe=True, nodes=seeds, queue=queue)
    snapshot_rows = snapshot.where(F.col("state") == "queued").count()
    stream = (
        spark.readStream.format("disque")
        .option("nodes", seeds)
        .option("queue", queue)
        .load()
        .writeStream.format("memory")
        .queryName("drained")
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(120)
    drained = spark.sql("SELECT body FROM drained").collect()
    executors = None
    if not disque_spark.is_remote(spark):
        executors = len(spark.sparkContext.statusTracker().getExecutorInfos()) - 1  # - driver
    print(
        json.dumps(
            {
                "snapshot_queued": snapshot_rows,
                "drained": len(drained),
                "distinct_bodies": len({r.body for r in drained}),
                "executors": executors,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
