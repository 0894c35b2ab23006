#!/usr/bin/env python3
"""Run the standard disque-benchmark scenarios and write a Markdown table.

    python bench/run_all.py [--quick] [--out PATH]

Scenarios (each a ``disque-benchmark --json`` run of -n jobs capped by
--duration seconds, 25 producers and 25 consumers unless said otherwise):

* 1 node: ADDJOB -> GETJOB -> ACKJOB cycle; ADDJOB only (no consumers)
* 1 node: the cycle with 1,000 idle connections open; over 10,000 queues
* 1 node: the cycle paced at half the measured cycle rate (--rate): the p99
  ADDJOB-to-GETJOB latency under ~50% load
* 1 node with the append-only file, appendfsync everysec: the cycle
* 3 nodes: REPLICATE 3 synchronous (cycle, and ADDJOB only), REPLICATE 3
  ASYNC (cycle), federation (producers on node 1, consumers on node 2; its
  backlog gets up to 120 s to drain, so that every job is checked)
* memory: resident memory per queued job after queueing 1,000,000 jobs
  (16-byte bodies) in a fresh node started with --maxmemory 0

plus the 3-node REPLICATE 3 sync ADDJOB rate as a ratio of the single-node
ADDJOB rate. The table goes to stdout and to bench/results/latest.md
(gitignored); progress to stderr. The full run takes about 3-6 minutes on 2
cores, --quick (short runs, 100,000 jobs for memory) under a minute.
Installs nothing; starts and always stops its own nodes (temporary
directories, free ports below 32768), also on an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import (  # noqa: E402
    FULL,
    QUICK,
    Row,
    Scale,
    cluster_scenarios,
    environment,
    flush,
    markdown,
    ratio_line,
    run_row,
    running,
    single_addjob,
)
from single_node import HOST, BenchError, Server, command, say, sigterm_as_interrupt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "latest.md"
MEM_BODY = b"0123456789abcdef"  # 16 bytes, as bench/single_node.py
FILL_BATCH = 1000


def fill(port: int, queue: bytes, jobs: int, body: bytes) -> None:
    """Queue `jobs` jobs fast: pipelined ADDJOBs, FILL_BATCH at a time, one connection."""
    import hiredis

    one = b"*4\r\n$6\r\nADDJOB\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (
        len(queue),
        queue,
        len(body),
        body,
    )
    reader = hiredis.Reader()
    with socket.create_connection((HOST, port), timeout=60) as s:
        left = jobs
        while left:
            n = min(FILL_BATCH, left)
            s.sendall(one * n)
            got = 0
            while got < n:
                reply = reader.gets()
                if reply is False:
                    data = s.recv(1 << 16)
                    if not data:
                        raise BenchError("the node closed the connection while filling")
                    reader.feed(data)
                    continue
                if isinstance(reply, Exception):
                    raise BenchError(f"ADDJOB failed while filling: {reply}")
                got += 1
            left -= n


def memory_row(tmp: Path, scale: Scale, rows: list[Row]) -> Row:
    with running(tmp, "memory", extra=["--maxmemory", "0"]) as nodes:
        node: Server = nodes[0]
        say(f"  memory: queueing {scale.mem_jobs:,} jobs with a {len(MEM_BODY)}-byte body ...")
        time.sleep(0.5)
        before = node.rss()
        started = time.monotonic()
        fill(node.port, b"memq", scale.mem_jobs, MEM_BODY)
        elapsed = time.monotonic() - started
        time.sleep(0.5)
        after = node.rss()
        qlen = int(command(node.port, "QLEN", "memq"))
        per_job = (after - before) / scale.mem_jobs
        row = Row(
            f"memory per queued job ({scale.mem_jobs:,} jobs, {len(MEM_BODY)}-byte body)",
            value=f"{per_job:,.0f} B/job",
        )
        row.notes.append(
            f"RSS {before / 2**20:.1f} → {after / 2**20:.1f} MiB; "
            f"filled at {scale.mem_jobs / elapsed:,.0f} jobs/s (pipelined)"
        )
        if qlen != scale.mem_jobs:
            row.notes.append(f"QLEN memq is {qlen:,}, expected {scale.mem_jobs:,}")
        rows.append(row)
        say(f"    {row.value}")
        return row


def ratio_note(row: Row, base: Row) -> None:
    if base.consume_rate:
        row.notes.append(f"{row.consume_rate / base.consume_rate:.2f}× the plain cycle")


def run(tmp: Path, scale: Scale, rows: list[Row], extra: list[str]) -> None:
    with running(tmp, "single") as nodes:
        node = nodes[0]
        cycle = run_row(rows, "1 node: ADDJOB → GETJOB → ACKJOB", node, [], scale)
        flush(node)
        single = single_addjob(tmp, scale, rows, node)
        idle = run_row(
            rows,
            f"1 node: cycle with {scale.idle:,} idle clients",
            node,
            ["--idle", str(scale.idle)],
            scale,
        )
        ratio_note(idle, cycle)
        flush(node)
        queues = run_row(
            rows,
            f"1 node: cycle over {scale.queues:,} queues",
            node,
            ["--queues", str(scale.queues)],
            scale,
        )
        ratio_note(queues, cycle)
        flush(node)
        rate = max(1, int(cycle.consume_rate / 2))
        paced = run_row(
            rows,
            "1 node: cycle at ~50% load",
            node,
            ["--rate", str(rate)],
            scale,
            notes=[f"--rate {rate:,} (half the cycle rate)"],
        )
        flush(node)
    with running(tmp, "aof", extra=["--appendonly", "yes", "--appendfsync", "everysec"]) as nodes:
        aof = run_row(rows, "1 node, AOF everysec: cycle", nodes[0], [], scale)
        ratio_note(aof, cycle)
    sync_only = cluster_scenarios(tmp, scale, rows)
    memory_row(tmp, scale, rows)

    extra.append(ratio_line(sync_only, single))
    if paced.result is not None:
        e2e, add = paced.result["e2e_latency_ms"], paced.result["addjob_latency_ms"]
        extra.append("")
        extra.append(
            f"p99 ADDJOB-to-GETJOB latency at ~50% load ({rate:,} jobs/s on one node): "
            f"**{e2e['p99']} ms** (p50 {e2e['p50']}, p99.9 {e2e['p99_9']}, "
            f"max {e2e['max']}; ADDJOB reply p99 {add['p99']} ms)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short runs (2 s each, 100,000 jobs for memory): under a minute",
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"where to write the Markdown (default {RESULTS})"
    )
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    started = time.monotonic()
    env = environment()
    say(f"disque-benchmark scenarios ({scale.name}): {env}")
    rows: list[Row] = []
    extra: list[str] = []
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-bench-") as d:
            run(Path(d), scale, rows, extra)
    except KeyboardInterrupt:
        print("interrupted: nodes stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"run_all.py: {exc}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    per_run = (
        f"each run: -n {scale.jobs:,} capped at --duration {scale.duration:g}s, "
        "25 producers + 25 consumers, 64-byte bodies, -P 1, one client process"
    )
    text = markdown(rows, extra, f"{env}; scale {scale.name}; {per_run}; whole run {took:.0f}s.")
    print(text, flush=True)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        say(f"written to {args.out}")
    except OSError as exc:
        print(f"run_all.py: could not write {args.out}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
