#!/usr/bin/env python3
"""The Spark writer at the cluster's speed: bulk ADDJOB from Spark against what
the same cluster takes from redis-benchmark.

    python bench/spark.py [--rows 200000] [--runs 3]

A 3-node cluster of this checkout's node and a local Spark session
(``local[2]``, 2 write partitions). Alternating, medians:

* the ``disque`` writer, ``replicate 1`` and ``replicate 2`` (synchronous),
  with the writer's default ``concurrency`` (connections per task) and with
  ``concurrency 1`` (one connection per task: what the writer did before);
* redis-benchmark, 50 clients, unpipelined, on the first node:
  ``ADDJOB q <64-byte body> 10000 REPLICATE 2``, the same form.

Prints a Markdown table: jobs/s and the writer's rate as a share of
redis-benchmark's. Needs pyspark (the ``spark`` extra), Java and
redis-benchmark. Stops its nodes on the way out.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows a write")
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
    results: dict[str, list[float]] = {name: [] for name in [*figures, "redis-benchmark"]}
    with (
        tempfile.TemporaryDirectory(prefix="disque-spark-bench-") as tmp,
        running(Path(tmp), "spark", 3) as nodes,
    ):
        ports = [n.port for n in nodes]
        for run in range(args.runs):
            order = [*figures, "redis-benchmark"]
            for name in order if run % 2 == 0 else reversed(order):
                flush(ports)
                if name == "redis-benchmark":
                    rate = redis_benchmark(ports[0], args.rows // 2)
                else:
                    replicate, concurrency = figures[name]
                    rows = args.rows if concurrency is None else args.rows // 10
                    rate = spark_write(spark, ports, rows, replicate, concurrency)
                say(f"  run {run + 1} {name}: {rate:,.0f} jobs/s")
                results[name].append(rate)
    spark.stop()
    reference = statistics.median(results["redis-benchmark"])
    print(f"Spark writer, {args.rows:,} rows a write, {args.runs} runs, medians ({environment()})")
    print()
    print("| figure | jobs/s | share of redis-benchmark (REPLICATE 2) |")
    print("| --- | ---: | ---: |")
    for name, rates in results.items():
        rate = statistics.median(rates)
        print(f"| {name} | {rate:,.0f} | {rate / reference:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
