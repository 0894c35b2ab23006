#!/usr/bin/env python3
"""The Spark source at the cluster's speed: bulk ADDJOB and a streaming drain from
Spark against what the same cluster takes from plain clients.

    python bench/spark.py [--rows 200000] [--drain 150000] [--runs 3]

A 3-node cluster of this checkout's node and a local Spark session
(``local[2]``, 2 write partitions). Alternating, medians:

* the ``disque`` writer, ``replicate 1`` and ``replicate 2`` (synchronous),
  with the writer's default ``concurrency`` (connections per task) and with
  ``concurrency 1`` (one connection per task: what the writer did before);
* redis-benchmark, 50 clients, unpipelined, on the first node:
  ``ADDJOB q <64-byte body> 10000 REPLICATE 2``, the same form;
* the stream draining --drain jobs queued beforehand (a third on each node,
  ``REPLICATE 1``), ``trigger(availableNow=True)``, the reader's defaults
  (fetched on the executors, acknowledged after each commit): jobs/s from
  start to the query's end (a foreachBatch sink that counts rows); and
  --big-drain jobs the same way, and in micro-batches of 100,000 (a query
  costs Spark about a second to start and each micro-batch a few hundred
  milliseconds: the bigger drain shows the rate once they are spread);
* plain consumers draining the same jobs: 2 processes per node, each a loop
  of ``GETJOB NOHANG COUNT n`` and ``ACKJOB`` of what it got (redis-py),
  until its node is empty; n = 1 (one job a round trip, as disque-benchmark's
  consumers by default; a tenth of the jobs), 16 and 100, and 100 for the
  bigger drain.

Prints a Markdown table: jobs/s, the writes as a share of redis-benchmark's
rate and the drains as a share of the COUNT 100 consumers' on as many jobs. Needs pyspark (the ``spark`` extra), Java and
redis-benchmark. Stops its nodes on the way out.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import HOST, command, environment, running, say  # noqa: E402
from single_node import parse_rps  # noqa: E402

BODY = "x" * 64
WRITES = "redis-benchmark, ADDJOB REPLICATE 2, 50 clients"
READS = "plain consumers, GETJOB COUNT 100"
READS_BIG = "plain consumers, GETJOB COUNT 100, the bigger drain"
CONSUMERS_PER_NODE = 2


def flush(ports: list[int]) -> None:
    for port in ports:
        command(port, "DEBUG", "FLUSHALL")


def spark_write(
    spark, ports: list[int], rows: int, replicate: int, concurrency: int | None
) -> float:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=2).select(F.lit(BODY).alias("body")).cache()
    df.count()  # (built before the clock starts)
    writer = (
        df.write.format("disque")
        .option("nodes", ",".join(f"{HOST}:{p}" for p in ports))
        .option("queue", f"w{time.monotonic_ns()}")
        .option("replicate", str(replicate))
        .mode("append")
    )
    if concurrency is not None:
        writer = writer.option("concurrency", str(concurrency))
    start = time.monotonic()
    writer.save()
    elapsed = time.monotonic() - start
    df.unpersist()
    return rows / elapsed


def redis_benchmark(port: int, requests: int) -> float:
    argv = [
        "redis-benchmark", "-h", HOST, "-p", str(port), "-c", "50", "-n", str(requests),
        "-q", "--csv", "ADDJOB", f"rb{time.monotonic_ns()}", BODY, "10000", "REPLICATE", "2",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    return parse_rps(proc.stdout)


def fill(ports: list[int], queue: str, jobs: int) -> None:
    for port in ports:
        argv = [
            "redis-benchmark", "-h", HOST, "-p", str(port), "-c", "20", "-n",
            str(jobs // len(ports)), "-P", "16", "-q", "ADDJOB", queue, BODY, "10000",
            "REPLICATE", "1",
        ]  # fmt: skip
        subprocess.run(argv, capture_output=True, timeout=600, check=True)


def spark_drain(
    spark, ports: list[int], jobs: int, checkpoints: Path, per_trigger: int | None = None
) -> float:
    queue = f"d{time.monotonic_ns()}"
    fill(ports, queue, jobs)
    counted: list[int] = []
    reader = (
        spark.readStream.format("disque")
        .option("nodes", ",".join(f"{HOST}:{p}" for p in ports))
        .option("queue", queue)
    )
    if per_trigger is not None:
        reader = reader.option("maxJobsPerTrigger", str(per_trigger))
    query = (
        reader.load()
        .writeStream.foreachBatch(lambda df, _: counted.append(df.count()))
        .option("checkpointLocation", str(checkpoints / queue))
        .trigger(availableNow=True)
    )
    start = time.monotonic()
    query.start().awaitTermination()
    elapsed = time.monotonic() - start
    if sum(counted) < jobs // len(ports) * len(ports):
        raise SystemExit(f"the drain read {sum(counted):,} jobs of {jobs:,}")
    return sum(counted) / elapsed


def consume(port: int, queue: str, count: int) -> int:
    """One plain consumer: GETJOB NOHANG COUNT n, then ACKJOB of those, until empty."""
    import redis

    client = redis.Redis(HOST, port)
    done = 0
    while True:
        reply = client.execute_command("GETJOB", "NOHANG", "COUNT", count, "FROM", queue)
        if not reply:
            return done
        client.execute_command("ACKJOB", *[item[1] for item in reply])
        done += len(reply)


def plain_consumers(ports: list[int], jobs: int, count: int) -> float:
    """The same drain by CONSUMERS_PER_NODE processes per node, each a plain loop."""
    queue = f"c{time.monotonic_ns()}"
    fill(ports, queue, jobs)
    work = [(port, queue, count) for port in ports for _ in range(CONSUMERS_PER_NODE)]
    with multiprocessing.get_context("spawn").Pool(len(work)) as pool:
        pool.apply(time.sleep, (0,))  # the processes are up before the clock starts
        start = time.monotonic()
        done = sum(pool.starmap(consume, work))
        elapsed = time.monotonic() - start
    if done < jobs // len(ports) * len(ports):
        raise SystemExit(f"the consumers took {done:,} jobs of {jobs:,}")
    return done / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows a write")
    parser.add_argument("--drain", type=int, default=150_000, help="jobs a drain")
    parser.add_argument("--big-drain", type=int, default=600_000, help="jobs of the bigger drain")
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated words: run only the figures whose name holds one "
        "(and those they are measured against)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import disque_spark

    spark = disque_spark.session("local[2]", app_name="disque-bench")
    spark.sparkContext.setLogLevel("ERROR")
    tmp_dir = tempfile.TemporaryDirectory(prefix="disque-spark-bench-")
    tmp = Path(tmp_dir.name)
    rows, jobs = args.rows, args.drain
    big = args.big_drain
    # name -> (what it is measured against, how to measure it on the cluster's ports)
    figures: dict[str, tuple[str, Callable[[list[int]], float]]] = {
        "writer, replicate 1": (WRITES, lambda p: spark_write(spark, p, rows, 1, None)),
        "writer, replicate 2": (WRITES, lambda p: spark_write(spark, p, rows, 2, None)),
        "writer, replicate 2, concurrency 1 (one connection a task)": (
            WRITES,
            lambda p: spark_write(spark, p, rows // 10, 2, 1),
        ),
        WRITES: (WRITES, lambda p: redis_benchmark(p[0], rows // 2)),
        f"stream drain, {jobs:,} jobs": (READS, lambda p: spark_drain(spark, p, jobs, tmp)),
        f"stream drain, {big:,} jobs": (READS_BIG, lambda p: spark_drain(spark, p, big, tmp)),
        f"stream drain, {big:,} jobs, maxJobsPerTrigger 100000": (
            READS_BIG,
            lambda p: spark_drain(spark, p, big, tmp, 100_000),
        ),
        "plain consumers, GETJOB COUNT 1 (disque-benchmark's default; a tenth of the jobs)": (
            READS,
            lambda p: plain_consumers(p, jobs // 10, 1),
        ),
        "plain consumers, GETJOB COUNT 16": (READS, lambda p: plain_consumers(p, jobs, 16)),
        READS: (READS, lambda p: plain_consumers(p, jobs, 100)),
        READS_BIG: (READS_BIG, lambda p: plain_consumers(p, big, 100)),
    }
    if args.only:
        words = args.only.split(",")
        kept = {name for name in figures if any(w in name for w in words)}
        figures = {
            n: f for n, f in figures.items() if n in kept or any(figures[k][0] == n for k in kept)
        }
    results: dict[str, list[float]] = {name: [] for name in figures}
    with tmp_dir, running(tmp, "spark", 3) as nodes:
        ports = [n.port for n in nodes]
        order = list(figures)
        for run in range(args.runs):
            for name in order if run % 2 == 0 else reversed(order):
                flush(ports)
                rate = figures[name][1](ports)
                say(f"  run {run + 1} {name}: {rate:,.0f} jobs/s")
                results[name].append(rate)
    spark.stop()
    print(
        f"Spark source, {rows:,} rows a write, {jobs:,} jobs a drain, "
        f"{args.runs} runs, medians ({environment()})"
    )
    print()
    print("| figure | jobs/s | share of the plain clients' rate |")
    print("| --- | ---: | ---: |")
    for name, rates in results.items():
        rate = statistics.median(rates)
        reference = figures[name][0]
        share = rate / statistics.median(results[reference])
        print(f"| {name} | {rate:,.0f} | {share:.2f} of {reference} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
