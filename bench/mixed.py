#!/usr/bin/env python3
"""ADDJOB REPLICATE 3 on mixed clusters of Disque 1.0-rc1 and ours, side by side.

    python bench/mixed.py --ref-bin PATH [--runs 3] [--requests N]

Starts four 3-node clusters on free loopback ports (in a temporary
directory): three nodes of ours, three C Disque nodes, two C and one of ours
("2C+1"), one C and two of ours ("1C+2"). Then, --runs times, the order
turning at every run, ``ADDJOB q body 5000 REPLICATE 3`` (synchronous) with
redis-benchmark, 50 clients unpipelined, on each of six entry points: the
first node of the C and of our cluster, and a C node and a node of ours in
each mixed cluster. A mixed cluster is a rolling upgrade half done: its
figure should be no lower than the C cluster's (#39).

The server CPU per job is the sum over the cluster's three nodes
(/proc/PID/stat), as in bench/vs_disque.py, whose helpers this uses.
Prints a Markdown table of medians, with each entry's rate over the C
cluster's run in the same round (median and quartiles: steadier than the
ratio of medians where the machine's speed drifts); progress on stderr.
Exit code 0 when the run completed, 1 when a step failed, 2 when a
prerequisite is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import environment, form_cluster  # noqa: E402
from single_node import BenchError, Server, missing_prerequisites, say, start_node  # noqa: E402
from vs_disque import (  # noqa: E402
    Sample,
    flush_all,
    measure,
    queued_after,
    rb_run,
    start_reference,
    wait_for_hello_mesh,
)

# cluster name -> the kind of each of its three nodes
CLUSTERS = {
    "ours": ("ours", "ours", "ours"),
    "C": ("C", "C", "C"),
    "2C+1": ("C", "C", "ours"),
    "1C+2": ("C", "ours", "ours"),
}
# (cluster, index of the node ADDJOB goes to)
ENTRIES = (("C", 0), ("ours", 0), ("2C+1", 0), ("2C+1", 2), ("1C+2", 0), ("1C+2", 1))
COMMAND = ["ADDJOB", "q", "body", "5000", "REPLICATE", "3"]


@contextlib.contextmanager
def clusters(tmp: Path, ref_bin: Path) -> Iterator[dict[str, list[Server]]]:
    starters: dict[str, Callable[[Path, str], Server]] = {
        "ours": lambda d, name: start_node(d, name, []),
        "C": lambda d, name: start_reference(ref_bin, d, name),
    }
    started: list[Server] = []
    try:
        built: dict[str, list[Server]] = {}
        for name, kinds in CLUSTERS.items():
            nodes = []
            for i, kind in enumerate(kinds):
                node = starters[kind](tmp, f"{name}-{i}-{kind}")
                started.append(node)
                nodes.append(node)
            form_cluster(nodes)
            wait_for_hello_mesh(nodes)
            say(f"{name}: ports {', '.join(str(n.port) for n in nodes)}")
            built[name] = nodes
        yield built
    finally:
        for node in started:
            node.stop()


def entry_label(name: str, index: int) -> str:
    kind = CLUSTERS[name][index]
    return f"{name} cluster, ADDJOB on {'a C node' if kind == 'C' else 'a node of ours'}"


def run(tmp: Path, ref_bin: Path, requests: int, runs: int) -> dict[tuple[str, int], list[Sample]]:
    samples: dict[tuple[str, int], list[Sample]] = {entry: [] for entry in ENTRIES}
    bench = rb_run(requests, 1, COMMAND)
    check = queued_after("q", requests)
    with clusters(tmp, ref_bin) as built:
        for i in range(runs):
            turn = i % len(ENTRIES)
            for name, index in ENTRIES[turn:] + ENTRIES[:turn]:
                nodes = built[name]
                order = [nodes[index]] + [n for j, n in enumerate(nodes) if j != index]
                flush_all(nodes)
                sample = measure(order, partial(bench, order))
                check(order)
                samples[(name, index)].append(sample)
                say(
                    f"  run {i + 1} {entry_label(name, index)}: "
                    f"{sample.outcome.value:,.0f}/s, {sample.user_us + sample.sys_us:.1f} µs CPU"
                )
    return samples


def markdown(samples: dict[tuple[str, int], list[Sample]], header: str) -> str:
    def rate(entry: tuple[str, int]) -> float:
        return statistics.median(s.outcome.value for s in samples[entry])

    c_rate = rate(("C", 0))
    lines = [
        "| ADDJOB REPLICATE 3, 50 clients | jobs/s (median) | / C cluster "
        "| / C cluster's run in the same round: median (quartiles) "
        "| server CPU µs per job (3 nodes) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for entry in ENTRIES:
        cpu = statistics.median(s.user_us + s.sys_us for s in samples[entry])
        lines.append(
            f"| {entry_label(*entry)} | {rate(entry):,.0f} | {rate(entry) / c_rate:.2f} "
            f"| {paired(samples, entry)} | {cpu:.1f} |"
        )
    return "\n".join([*lines, "", header])


def paired(samples: dict[tuple[str, int], list[Sample]], entry: tuple[str, int]) -> str:
    """The entry's rate over the C cluster's in each round (the rounds run the six
    entries back to back): on a machine whose speed drifts from run to run, a
    steadier figure than the ratio of the two medians."""
    ratios = [
        s.outcome.value / c.outcome.value
        for s, c in zip(samples[entry], samples[("C", 0)], strict=True)
    ]
    if len(ratios) < 4:
        return f"{statistics.median(ratios):.2f}"
    low, _, high = statistics.quantiles(ratios, n=4)
    return f"{statistics.median(ratios):.2f} ({low:.2f}-{high:.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, required=True, metavar="PATH")
    parser.add_argument("--runs", type=int, default=3, metavar="N")
    parser.add_argument("--requests", type=int, default=50_000, metavar="N")
    args = parser.parse_args(argv)
    missing = [m for m in missing_prerequisites() if not m.startswith("redis-server")]
    if missing:
        for line in missing:
            print(f"mixed.py: {line}", file=sys.stderr)
        return 2
    env = environment()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="disque-mixed-") as d:
            samples = run(Path(d), args.ref_bin.resolve(), args.requests, args.runs)
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"mixed.py: {exc}", file=sys.stderr)
        return 1
    header = (
        f"{args.runs} runs of {args.requests:,} requests each, medians; "
        f"{time.monotonic() - started:.0f} s; {env}"
    )
    print(markdown(samples, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
