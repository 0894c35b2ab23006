#!/usr/bin/env python3
"""Consumer locality: consumers that follow the producers, against consumers that
stay where they connected.

    python bench/locality.py [--seconds 8] [--runs 3]

A 3-node cluster of this checkout's node. Producers (separate processes,
``disque.Client`` connected to node 1) add jobs as fast as they can
(``REPLICATE 1``, so that what moves jobs between nodes is federation alone);
consumers (separate processes) are connected to node 2 and fetch and
acknowledge (GETJOB COUNT 16, ACKJOB). Two modes, alternating, medians:

* stay: ``Client(node2)``: node 2 has no jobs of its own, so every job crosses
  the bus (NEEDJOBS, YOURJOBS) before a consumer gets it;
* follow: ``Client(node2, follow_producers=True)``: the consumers see their
  jobs were produced on node 1 and move there.

Reports jobs consumed per second and cluster bus messages sent per job
consumed (all nodes, PINGs included), and the consumers' moves. Prints a
Markdown table on stdout. Installs nothing; stops its nodes on the way out.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import cluster_info, command, environment, running, say  # noqa: E402

from disque import Client  # noqa: E402

PRODUCERS = 2
CONSUMERS = 2
BODY = "x" * 64


def produce(addr: str, until: float, queue: str) -> None:
    with Client(addr) as client:
        while time.monotonic() < until:
            client.add_job(queue, BODY, replicate=1, retry=30)


def consume(addr: str, follow: bool, until: float, queue: str, out: mp.Queue) -> None:
    done = 0
    with Client(addr, follow_producers=follow) as client:
        while time.monotonic() < until:
            jobs = client.get_job(queue, timeout=100, count=16)
            if jobs:
                client.ack(*(job.id for job in jobs))
                done += len(jobs)
        moves = client.locality.moves if client.locality is not None else 0
    out.put((done, moves))


def bus_messages(ports: list[int]) -> int:
    return sum(int(cluster_info(p)["cluster_stats_messages_sent"]) for p in ports)


def one_run(ports: list[int], follow: bool, seconds: float) -> tuple[float, float, int]:
    for port in ports:
        command(port, "DEBUG", "FLUSHALL")
    queue = f"loc{time.monotonic_ns()}"
    producer_addr, consumer_addr = f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    start = time.monotonic()
    until = start + seconds
    before = bus_messages(ports)
    procs = [
        ctx.Process(target=produce, args=(producer_addr, until, queue)) for _ in range(PRODUCERS)
    ]
    procs += [
        ctx.Process(target=consume, args=(consumer_addr, follow, until, queue, out))
        for _ in range(CONSUMERS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 60) for _ in range(CONSUMERS)]
    for p in procs:
        p.join(timeout=30)
    messages = bus_messages(ports) - before
    consumed = sum(done for done, _ in results)
    if consumed == 0:
        raise SystemExit(f"locality.py: a {'follow' if follow else 'stay'} run consumed no job")
    return consumed / seconds, messages / max(consumed, 1), sum(m for _, m in results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of a run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each mode")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="disque-locality-") as tmp,
        running(Path(tmp), "loc", 3) as nodes,
    ):
        ports = [n.port for n in nodes]
        rows: dict[str, list[tuple[float, float, int]]] = {"stay": [], "follow": []}
        for i in range(args.runs):
            for mode in ("stay", "follow") if i % 2 == 0 else ("follow", "stay"):
                result = one_run(ports, mode == "follow", args.seconds)
                say(f"  run {i + 1} {mode}: {result[0]:,.0f} jobs/s, {result[1]:.2f} msgs/job")
                rows[mode].append(result)
    print(
        f"Consumer locality, {args.runs} runs of {args.seconds:.0f} s each, medians ({environment()})"
    )
    print()
    print("| consumers | jobs/s | bus messages per job | consumer moves |")
    print("| --- | ---: | ---: | ---: |")
    for mode, results in rows.items():
        rate = statistics.median(r[0] for r in results)
        msgs = statistics.median(r[1] for r in results)
        moves = statistics.median(r[2] for r in results)
        print(f"| {mode} | {rate:,.0f} | {msgs:.2f} | {moves:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
