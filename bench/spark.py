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
  ``REPLICATE 1``), ``trigger(availableNow=True)``, ``maxJobsPerTrigger
  20000``, fetched on the executors, acknowledged after each commit: jobs/s
  from start to the query's end (a foreachBatch sink that counts rows);
* plain consumers: ``disque-benchmark`` with 25 producers on the first node
  and 25 consumers over the three (GETJOB COUNT 16, ACKJOB), its consume
  rate; the producers run meanwhile, so this is what the cluster serves
  while it also takes jobs.

Prints a Markdown table: jobs/s, the writer's rate as a share of
redis-benchmark's and the drain's as a share of the consumers'. Needs pyspark (the ``spark`` extra), Java and
redis-benchmark. Stops its nodes on the way out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import HOST, command, environment, running, say  # noqa: E402
from single_node import parse_rps  # noqa: E402

BODY = "x" * 64


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


def spark_drain(spark, ports: list[int], jobs: int, checkpoints: Path) -> float:
    queue = f"d{time.monotonic_ns()}"
    fill(ports, queue, jobs)
    counted: list[int] = []
    query = (
        spark.readStream.format("disque")
        .option("nodes", ",".join(f"{HOST}:{p}" for p in ports))
        .option("queue", queue)
        .option("maxJobsPerTrigger", "20000")
        .load()
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


def plain_consumers(ports: list[int], jobs: int) -> float:
    argv = [
        sys.executable, "-m", "disque_cli.benchmark", "-p", str(ports[0]), "-n", str(jobs),
        "--producers", "25", "--consumers", "25", "-P", "16", "--json", "-q",
        "--producer-node", f"{HOST}:{ports[0]}",
        *[arg for p in ports for arg in ("--consumer-node", f"{HOST}:{p}")],
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    return float(json.loads(proc.stdout)["consume_rate"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows a write")
    parser.add_argument("--drain", type=int, default=150_000, help="jobs a drain")
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import disque_spark

    spark = disque_spark.session("local[2]", app_name="disque-bench")
    spark.sparkContext.setLogLevel("ERROR")
    figures = {
        "writer, replicate 1": (1, None),
        "writer, replicate 2": (2, None),
        "writer, replicate 2, concurrency 1 (one connection a task)": (2, 1),
    }
    drains = ["stream drain, availableNow", "plain consumers (disque-benchmark)"]
    order = [*figures, "redis-benchmark", *drains]
    results: dict[str, list[float]] = {name: [] for name in order}
    with (
        tempfile.TemporaryDirectory(prefix="disque-spark-bench-") as tmp,
        running(Path(tmp), "spark", 3) as nodes,
    ):
        ports = [n.port for n in nodes]
        for run in range(args.runs):
            for name in order if run % 2 == 0 else reversed(order):
                flush(ports)
                if name == "redis-benchmark":
                    rate = redis_benchmark(ports[0], args.rows // 2)
                elif name == drains[0]:
                    rate = spark_drain(spark, ports, args.drain, Path(tmp))
                elif name == drains[1]:
                    rate = plain_consumers(ports, args.drain)
                else:
                    replicate, concurrency = figures[name]
                    rows = args.rows if concurrency is None else args.rows // 10
                    rate = spark_write(spark, ports, rows, replicate, concurrency)
                say(f"  run {run + 1} {name}: {rate:,.0f} jobs/s")
                results[name].append(rate)
    spark.stop()
    writes = statistics.median(results["redis-benchmark"])
    reads = statistics.median(results[drains[1]])
    print(
        f"Spark source, {args.rows:,} rows a write, {args.drain:,} jobs a drain, "
        f"{args.runs} runs, medians ({environment()})"
    )
    print()
    print("| figure | jobs/s | share of the plain clients' rate |")
    print("| --- | ---: | ---: |")
    for name, rates in results.items():
        rate = statistics.median(rates)
        reference, what = (reads, "consumers") if name in drains else (writes, "redis-benchmark")
        print(f"| {name} | {rate:,.0f} | {rate / reference:.2f} of {what} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
