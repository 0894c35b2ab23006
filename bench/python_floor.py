#!/usr/bin/env python3
"""This node between the Python floor and C Disque: PING and ADDJOB, side by side.

    python bench/python_floor.py --ref-bin PATH [--runs 3] [--requests N]

Four single servers on free loopback ports, in a temporary directory: this
checkout's node as built ("ours": compiled by mypyc when installed so), the
same sources run as plain Python ("pure"), bench/floor_node.py ("floor": the least a Python
ADDJOB server on uvloop and hiredis does, no Disque feature) and the C
disque-server at PATH (Disque 1.0-rc1, "C"). redis-benchmark with 50 clients
sends PING and ``ADDJOB q body 0``, unpipelined and -P 16, --runs times per
server, the order of the four turning at every run; around each run the
servers' CPU time is read from /proc. Prints one Markdown table of medians:
the rate of each, the ratios ours / C and floor / C, and the server CPU per
request (user / sys).

What it tells: the floor / C ratio is what Python, uvloop and hiredis allow
on this machine; the gap between ours and the floor is what this node's own
request path costs (options, timers, stats, memory accounting, the AOF hook,
the job index in parts...). Exit code 0 when the run completed, 1 when a step
failed, 2 when a prerequisite is missing, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import environment  # noqa: E402
from single_node import (  # noqa: E402
    CLIENTS,
    PIPELINE,
    BenchError,
    Server,
    free_port,
    issued,
    missing_prerequisites,
    pure_tree,
    say,
    sigterm_as_interrupt,
    start_node,
)
from vs_disque import (  # noqa: E402
    Figure,
    flush_all,
    median,
    queued_after,
    rb_run,
    run_figure,
    show,
    start_reference,
)

KINDS = ("ours", "pure", "floor", "C")
FLOOR_NODE = Path(__file__).resolve().parent / "floor_node.py"


def start_floor(tmp: Path, name: str) -> Server:
    port = free_port()
    log = tmp / f"{name}.log"
    server = Server("floor node", [sys.executable, str(FLOOR_NODE), str(port)], port, log)
    server.start()
    return server


@contextlib.contextmanager
def servers(tmp: Path, ref_bin: Path) -> Iterator[dict[str, list[Server]]]:
    started: dict[str, list[Server]] = {}
    try:
        started["ours"] = [start_node(tmp, "ours")]
        started["pure"] = [start_node(tmp, "pure", source=pure_tree(tmp))]
        started["floor"] = [start_floor(tmp, "floor")]
        started["C"] = [start_reference(ref_bin, tmp, "C")]
        yield started
    finally:
        for nodes in started.values():
            for node in nodes:
                node.stop()


def figures(requests: int) -> list[Figure]:
    result = []
    for pipeline, n in ((1, requests), (PIPELINE, 3 * requests)):
        p = f", -P {pipeline}" if pipeline > 1 else ", unpipelined"
        result += [
            Figure(f"PING{p}", "—", rb_run(n, pipeline, ["PING"])),
            Figure(
                f"ADDJOB{p}",
                "—",
                rb_run(n, pipeline, ["ADDJOB", "q", "body", "0"]),
                flush_all,
                queued_after("q", issued(n, pipeline)),
            ),
        ]
    return result


def markdown(done: list[Figure], header: str) -> str:
    lines = [
        "| figure | ours | pure | floor | C | ours / C | pure / C | floor / C | "
        "server CPU µs/request user / sys: ours \\| pure \\| floor \\| C |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for figure in done:
        s = figure.samples
        rate = {k: median(s[k], "outcome.value") for k in KINDS}
        cpu = " \\| ".join(
            f"{show(median(s[k], 'user_us'), '.1f')} / {show(median(s[k], 'sys_us'), '.1f')}"
            for k in KINDS
        )
        ratio = {k: rate[k] / rate["C"] if rate[k] and rate["C"] else None for k in KINDS}
        lines.append(
            f"| {figure.name} | "
            + " | ".join(show(rate[k], ",.0f") for k in KINDS)
            + " | "
            + " | ".join(show(ratio[k], ".2f") for k in KINDS if k != "C")
            + f" | {cpu} |"
        )
    return "\n".join([*lines, "", header])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, required=True, metavar="PATH")
    parser.add_argument("--runs", type=int, default=3, metavar="N")
    parser.add_argument(
        "--requests",
        type=int,
        default=200_000,
        metavar="N",
        help="unpipelined requests a run (default 200,000; -P 16 runs send 3 N)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.requests < 1:
        parser.error("--runs and --requests must be at least 1")
    missing = [m for m in missing_prerequisites() if not m.startswith("redis-server")]
    if not os.access(args.ref_bin, os.X_OK):
        missing.append(f"--ref-bin {args.ref_bin}: no executable there")
    if missing:
        for line in missing:
            print(f"python_floor.py: {line}", file=sys.stderr)
        return 2
    started = time.monotonic()
    env = environment()
    say(f"ours, the floor and C Disque ({args.runs} runs): {env}")
    done = figures(args.requests)
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-floor-") as d:
            with servers(Path(d), args.ref_bin.resolve()) as nodes:
                for figure in done:
                    run_figure(figure, nodes, args.runs, KINDS)
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"python_floor.py: {exc}", file=sys.stderr)
        return 1
    header = (
        f"{env}; {args.requests:,} unpipelined / {3 * args.requests:,} -P {PIPELINE} "
        f"requests a run, {args.runs} runs each, turning order; {CLIENTS} clients; "
        f"whole run {time.monotonic() - started:.0f}s."
    )
    print(markdown(done, header), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
