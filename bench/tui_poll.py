"""How much CPU the dashboard's poller spends per poll cycle.

    python bench/tui_poll.py                       # 1 local node, 1000 queues
    python bench/tui_poll.py --nodes 10            # 10-node local cluster
    python bench/tui_poll.py -h HOST -p PORT       # an existing cluster as it is

Without -p it starts throw-away nodes of this checkout (bench/cluster.py's
``running``: temporary directories, free ports), meets them into one cluster and creates
`--queues` queues on every node (one job each, REPLICATE 1). Then it runs
`Poller.poll_cycle` `--cycles` times and reports the process CPU time
(user + system, this process only: the servers are other processes) and
wall time per cycle, after `--warmup` cycles.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import running  # noqa: E402

from disque_tui.poller import Poller  # noqa: E402


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
        prog="tui_poll.py", add_help=False, description=__doc__.split("\n\n")[0]
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

    with contextlib.ExitStack() as stack:
        if args.port is None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tui_poll")))
            nodes = stack.enter_context(running(tmp, "poll", args.nodes))
            for n, node in enumerate(nodes):
                fill(node.port, args.queues, f"n{n}q")
            port = nodes[0].port
        else:
            port = args.port
        cpu, wall, seen, queues = asyncio.run(
            measure(args.host, port, args.cycles, args.warmup, args.scan_count)
        )

    def stats(values: list[float]) -> str:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        return (
            f"mean {statistics.fmean(values):7.1f} ms  median {statistics.median(values):7.1f}"
            f" ms  p95 {p95:7.1f} ms"
        )

    print(
        f"poller: {seen} node(s), {queues} queues in total (QSCAN COUNT {args.scan_count},"
        f" QSTAT pipelined), {args.cycles} cycles, pid {os.getpid()}"
    )
    print(f"  CPU per cycle:  {stats(cpu)}")
    print(f"  wall per cycle: {stats(wall)}")
    print(f"  CPU per node per cycle: {statistics.fmean(cpu) / max(1, seen):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
