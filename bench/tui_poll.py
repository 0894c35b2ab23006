"""How much CPU the dashboard's poller spends per poll cycle.

    python -m disque_tui.bench_poll                       # 1 local node, 1000 queues
    python -m disque_tui.bench_poll --nodes 10            # 10-node local cluster
    python -m disque_tui.bench_poll -h HOST -p PORT       # an existing cluster as it is

Without -p it starts throw-away `disque-server` processes (temporary
directories, free ports), meets them into one cluster and creates
`--queues` queues on every node (one job each, REPLICATE 1). Then it runs
`Poller.poll_cycle` `--cycles` times and reports the process CPU time
(user + system, this process only: the servers are other processes) and
wall time per cycle, after `--warmup` cycles.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from disque.protocol import parse_hello
from disque_tui.poller import Poller


def free_port() -> int:
    for _ in range(200):
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", 0))
                port = a.getsockname()[1]
                if port + 10000 > 65535:
                    continue
                b.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair")


def start_nodes(count: int, workdir: Path) -> list[tuple[subprocess.Popen, int]]:
    nodes = []
    for i in range(count):
        port = free_port()
        d = workdir / f"node{i}"
        d.mkdir(parents=True)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "disque_server",
                "--port",
                str(port),
                "--dir",
                str(d),
                "--logfile",
                str(d / "log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        nodes.append((proc, port))
    for _, port in nodes:
        deadline = time.monotonic() + 20
        while True:
            try:
                with redis.Redis(port=port, protocol=2, socket_timeout=1) as c:
                    c.execute_command("PING")
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    first = nodes[0][1]
    for _, port in nodes[1:]:
        with redis.Redis(port=first, protocol=2) as c:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", str(port))
    deadline = time.monotonic() + 30
    while count > 1 and time.monotonic() < deadline:
        with redis.Redis(port=first, protocol=2) as c:
            if len(parse_hello(c.execute_command("HELLO")).nodes) >= count:
                break
        time.sleep(0.1)
    return nodes


def fill(port: int, queues: int, prefix: str) -> None:
    with redis.Redis(port=port, protocol=2) as c:
        pipe = c.pipeline(transaction=False)
        for i in range(queues):
            pipe.execute_command("ADDJOB", f"{prefix}{i:05d}", "x", 0, "REPLICATE", 1)
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()


async def measure(
    host: str, port: int, cycles: int, warmup: int, scan_count: int
) -> tuple[list[float], list[float], int, int]:
    poller = Poller(host, port, interval=30.0, timeout=30.0, scan_count=scan_count)
    cpu_ms: list[float] = []
    wall_ms: list[float] = []
    snapshot = None
    try:
        for i in range(warmup + cycles):
            c0, w0 = time.process_time(), time.perf_counter()
            snapshot = await poller.poll_cycle()
            c1, w1 = time.process_time(), time.perf_counter()
            if i >= warmup:
                cpu_ms.append((c1 - c0) * 1000)
                wall_ms.append((w1 - w0) * 1000)
    finally:
        await poller.close()
    assert snapshot is not None
    per_node_queues = sum(n.queues or 0 for n in snapshot.nodes)
    return cpu_ms, wall_ms, len(snapshot.nodes), per_node_queues


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench_poll", add_help=False, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--help", action="help")
    parser.add_argument("-h", "--host", default="127.0.0.1")
    parser.add_argument(
        "-p",
        "--port",
        type=int,
        default=None,
        help="poll this existing cluster instead of starting nodes",
    )
    parser.add_argument("--nodes", type=int, default=1, help="nodes to start (default 1)")
    parser.add_argument("--queues", type=int, default=1000, help="queues per node (default 1000)")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--scan-count", type=int, default=500)
    args = parser.parse_args(argv)

    started: list[tuple[subprocess.Popen, int]] = []
    tmp = None
    try:
        if args.port is None:
            tmp = tempfile.TemporaryDirectory(prefix="bench_poll")
            started = start_nodes(args.nodes, Path(tmp.name))
            for n, (_, port) in enumerate(started):
                fill(port, args.queues, f"n{n}q")
            port = started[0][1]
        else:
            port = args.port
        cpu, wall, nodes, queues = asyncio.run(
            measure(args.host, port, args.cycles, args.warmup, args.scan_count)
        )
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            proc.wait(10)
        if tmp is not None:
            tmp.cleanup()

    def stats(values: list[float]) -> str:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        return (
            f"mean {statistics.fmean(values):7.1f} ms  median {statistics.median(values):7.1f}"
            f" ms  p95 {p95:7.1f} ms"
        )

    print(
        f"poller: {nodes} node(s), {queues} queues in total (QSCAN COUNT {args.scan_count},"
        f" QSTAT pipelined), {args.cycles} cycles, pid {os.getpid()}"
    )
    print(f"  CPU per cycle:  {stats(cpu)}")
    print(f"  wall per cycle: {stats(wall)}")
    print(f"  CPU per node per cycle: {statistics.fmean(cpu) / max(1, nodes):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
