#!/usr/bin/env python3
"""The AOF side by side with Disque 1.0-rc1: its size, BGREWRITEAOF and a restart.

    python bench/aof.py --ref-bin PATH [--jobs 500000 2000000] [--runs 3] [--markdown]

For each job count and each run, alternating ours / C (ours first on even runs),
a fresh node of each kind (``appendonly yes``, ``appendfsync everysec``) is
filled with that many jobs (pipelined ``ADDJOB q <16-byte body> 0 RETRY 600``,
not timed); then

* **rewrite**: BGREWRITEAOF, the time until INFO persistence says no rewrite is
  in progress or scheduled (polled every 10 ms);
* **size**: the AOF's size after the rewrite;
* **restart**: kill -9, start the same server on the same directory, the time
  from the spawn until ``INFO jobs`` shows every job registered.

Medians over the runs, and ours / C (lower is better for all three). Both
files hold the same format since the AOF became Disque's (serialize.py), so
the sizes differ only by what each kind keeps.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis  # noqa: E402
from single_node import Server, start_node  # noqa: E402
from vs_disque import start_reference  # noqa: E402

AOF_OPTIONS = ["--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory", "16gb"]
BODY = b"0123456789abcdef"
PIPELINE = 2000


def conn(server: Server) -> redis.Redis:
    return redis.Redis(port=server.port, protocol=2, socket_timeout=120)


def fill(server: Server, jobs: int) -> None:
    with conn(server) as c:
        for start in range(0, jobs, PIPELINE):
            pipe = c.pipeline(transaction=False)
            for _ in range(min(PIPELINE, jobs - start)):
                pipe.execute_command("ADDJOB", "q", BODY, "0", "RETRY", "600")
            pipe.execute()
        if int(c.execute_command("QLEN", "q")) != jobs:
            raise SystemExit(f"{server.name}: QLEN q is not {jobs} after the fill")


def persistence(c: redis.Redis) -> dict:
    return c.info("persistence")


def wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def rewrite_seconds(server: Server) -> float:
    with conn(server) as c:
        wait(lambda: not persistence(c)["aof_rewrite_in_progress"], 120, "a quiet AOF")
        started = time.monotonic()
        c.execute_command("BGREWRITEAOF")

        def done() -> bool:
            info = persistence(c)
            return not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]

        wait(done, 600, "the rewrite")
        return time.monotonic() - started


def registered(server: Server) -> int:
    try:
        with conn(server) as c:
            return int(c.info("jobs").get("registered_jobs", -1))
    except redis.RedisError:
        return -1  # still loading (C answers -LOADING), or not listening yet


def restart_seconds(server: Server, jobs: int) -> float:
    time.sleep(1.5)  # everysec: the last second of appends on disk before the kill
    server.kill()
    started = time.monotonic()
    server.start(wait=False)
    wait(lambda: registered(server) == jobs, 600, f"{jobs} jobs loaded")
    return time.monotonic() - started


def one_run(kind: str, start: Callable[[Path, str], Server], jobs: int, tmp: Path) -> dict:
    server = start(tmp, f"{kind}-{jobs}-{time.monotonic_ns()}")
    try:
        fill(server, jobs)
        rewrite = rewrite_seconds(server)
        size = (Path(server.cwd or tmp) / "disque.aof").stat().st_size
        restart = restart_seconds(server, jobs)
    finally:
        server.stop()
    return {"rewrite": rewrite, "size": size, "restart": restart}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, required=True, help="C disque-server")
    parser.add_argument("--jobs", type=int, nargs="+", default=[500_000, 2_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)

    def ours(tmp: Path, name: str) -> Server:
        return start_node(tmp, name, AOF_OPTIONS)

    def c(tmp: Path, name: str) -> Server:
        server = start_reference(args.ref_bin.resolve(), tmp, name, AOF_OPTIONS)
        server.cwd = tmp / name  # (where its files go: --dir)
        return server

    kinds = {"ours": ours, "C": c}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for jobs in args.jobs:
            samples: dict[str, list[dict]] = {"ours": [], "C": []}
            for run in range(args.runs):
                order = ["ours", "C"] if run % 2 == 0 else ["C", "ours"]
                for kind in order:
                    result = one_run(kind, kinds[kind], jobs, Path(d))
                    samples[kind].append(result)
                    print(f"{jobs:>9,} jobs, run {run + 1}, {kind:>4}: {result}", file=sys.stderr)
            for figure, unit in (("size", "MB"), ("rewrite", "s"), ("restart", "s")):
                med = {k: statistics.median(s[figure] for s in samples[k]) for k in samples}
                scale = 1e6 if unit == "MB" else 1.0
                rows.append(
                    (f"{jobs:,} jobs: {figure}", med["ours"] / scale, med["C"] / scale, unit)
                )
    print("| figure | ours | C | ours / C |")
    print("| --- | ---: | ---: | ---: |")
    for name, ours_value, c_value, unit in rows:
        print(
            f"| {name} | {ours_value:.2f} {unit} | {c_value:.2f} {unit} | {ours_value / c_value:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
