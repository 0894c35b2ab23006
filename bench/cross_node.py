#!/usr/bin/env python3
"""Cross-node delivery after an idle pause: ours and Disque 1.0-rc1 side by side.

    python bench/cross_node.py --ref-bin PATH [--pauses 0.5,1,2,5,10,20,30,60] [--repeats 1]

Starts a 3-node cluster of ours and one of C Disque (free loopback ports, a
temporary directory; both idle but for the trial running). One trial, on
each cluster in turn (ours first on even trials, C first on odd ones): a
consumer blocks in ``GETJOB TIMEOUT 0 FROM q`` on node B (a queue of its
own), the cluster stays idle for the pause, then ``ADDJOB q x 0 REPLICATE 1
RETRY 30`` on node A; the figure is the time from ADDJOB sent to GETJOB's
reply read. Disque moves a job only when the consumer's node asks (NEEDJOBS:
at once when it blocks, then backing off from 2 s doubling to 30 s), so its
figure follows the pause; ours pushes the job to the waiting node as it is
queued (docs/cluster.md, "Demand").

Prints a Markdown table: each pause's figure for both, then p50, p99 and the
maximum over all trials (p99 of a few trials is their maximum, nearly).
``--ref-bin`` omitted: ours alone. Installs nothing; stops its servers on
the way out, also on an error or Ctrl-C. Exit code 0 when it ran, 1 when a
step failed, 2 when a prerequisite is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import environment, form_cluster  # noqa: E402
from single_node import HOST, BenchError, Server, say, sigterm_as_interrupt, start_node  # noqa: E402
from vs_disque import start_reference, wait_for_hello_mesh  # noqa: E402

DEFAULT_PAUSES = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)
BLOCK_WAIT_S = 5.0


@contextlib.contextmanager
def three_nodes(
    start: Callable[[Path, str], Server], tmp: Path, name: str
) -> Iterator[list[Server]]:
    nodes: list[Server] = []
    try:
        for i in range(3):
            nodes.append(start(tmp, f"{name}{i}"))
        form_cluster(nodes)
        wait_for_hello_mesh(nodes)
        say(f"{name}: ports {', '.join(str(n.port) for n in nodes)}")
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def blocked(port: int, queue: str) -> bool:
    with redis.Redis(host=HOST, port=port, protocol=2) as client:
        stat = client.execute_command("QSTAT", queue)
    fields = dict(zip(stat[::2], stat[1::2], strict=True)) if stat else {}
    return fields.get(b"blocked") == 1


def trial(nodes: Sequence[Server], queue: str, pause: float) -> float:
    """Seconds from ADDJOB on node A to the reply of a GETJOB blocked on node B."""
    a, b = nodes[0], nodes[1]
    conn = redis.Connection(host=HOST, port=b.port, protocol=2, socket_timeout=pause + 60)
    try:
        conn.send_command("GETJOB", "TIMEOUT", "0", "FROM", queue)
        deadline = time.monotonic() + BLOCK_WAIT_S
        while not blocked(b.port, queue):
            if time.monotonic() > deadline:
                raise BenchError(f"the consumer did not block on {b.name}")
            time.sleep(0.01)
        time.sleep(pause)
        with redis.Redis(host=HOST, port=a.port, protocol=2) as producer:
            start = time.monotonic()
            producer.execute_command("ADDJOB", queue, "x", 0, "REPLICATE", 1, "RETRY", 30)
            reply = conn.read_response()
            elapsed = time.monotonic() - start
    finally:
        conn.disconnect()
    [[_, jid, _]] = reply
    with redis.Redis(host=HOST, port=b.port, protocol=2) as consumer:
        consumer.execute_command("ACKJOB", jid)
    return elapsed


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}" if seconds < 1 else f"{seconds * 1000:,.0f}"


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def markdown(results: dict[str, dict[float, list[float]]], pauses: Sequence[float]) -> str:
    kinds = list(results)
    lines = [
        "| pause | " + " | ".join(f"{k} (ms, median)" for k in kinds) + " |",
        "| ---: | " + " | ".join("---:" for _ in kinds) + " |",
    ]
    for pause in pauses:
        cells = [ms(statistics.median(results[k][pause])) for k in kinds]
        lines.append(f"| {pause:g} s | " + " | ".join(cells) + " |")
    for label, fn in (("p50", statistics.median), ("p99", p99), ("max", max)):
        cells = [ms(fn([v for vs in results[k].values() for v in vs])) for k in kinds]
        lines.append(f"| **{label}** | " + " | ".join(f"**{c}**" for c in cells) + " |")
    return "\n".join(lines)


def run(tmp: Path, ref_bin: Path | None, pauses: Sequence[float], repeats: int) -> str:
    starters: dict[str, Callable[[Path, str], Server]] = {
        "ours": lambda d, name: start_node(d, name, []),
    }
    if ref_bin is not None:
        starters["C"] = partial(start_reference, ref_bin)
    with contextlib.ExitStack() as stack:
        clusters = {k: stack.enter_context(three_nodes(s, tmp, k)) for k, s in starters.items()}
        results: dict[str, dict[float, list[float]]] = {
            k: {p: [] for p in pauses} for k in clusters
        }
        n = 0
        for r in range(repeats):
            for pause in pauses:
                order = list(clusters) if n % 2 == 0 else list(reversed(clusters))
                for kind in order:
                    elapsed = trial(clusters[kind], f"cross-{r}-{pause:g}", pause)
                    results[kind][pause].append(elapsed)
                    say(f"  {kind}, pause {pause:g} s: {ms(elapsed)} ms")
                n += 1
    return markdown(results, pauses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, help="a C disque-server (Disque 1.0-rc1)")
    parser.add_argument(
        "--pauses",
        default=",".join(f"{p:g}" for p in DEFAULT_PAUSES),
        help="idle pauses in seconds, comma-separated",
    )
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        pauses = [float(p) for p in args.pauses.split(",")]
    except ValueError:
        print(f"--pauses {args.pauses}: comma-separated seconds", file=sys.stderr)
        return 2
    if args.ref_bin is not None and not os.access(args.ref_bin, os.X_OK):
        print(f"--ref-bin {args.ref_bin}: no executable there", file=sys.stderr)
        return 2
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-cross-") as d:
            table = run(Path(d), args.ref_bin, pauses, args.repeats)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(f"Cross-node delivery after an idle pause ({environment()})\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
