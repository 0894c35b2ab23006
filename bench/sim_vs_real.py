#!/usr/bin/env python3
"""The membership simulator against real clusters: do they agree?

    python bench/scale_out.py --sizes 10,25,50,100 --runs 3 --json real.json
    python bench/sim_vs_real.py real.json [--seeds 5] [--out PATH]

bench/membership_sim.py runs the node's failure detector at 1,000 and 5,000
members, where no real cluster fits on one machine; its figures stand for a
real cluster's only if the two agree where both can run. This reads the runs
of our nodes that bench/scale_out.py wrote (--json), simulates each size with
the same node timeout and no loss (loopback loses nothing) over several seeds,
and sets two figures side by side:

- bus messages each node sends a second, idle;
- seconds from a node's kill until every other node has it FAIL.

The noise of a figure is what it does from one run (or seed) to the next: the
two agree when their ranges (lowest to highest run, real; lowest to highest
seed, simulated) overlap once each is widened by 10% (the clock of a real
node's cron, the polls of scale_out). A Markdown table goes to stdout (and
--out); exit code 0 when every size agrees, 1 when one does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from membership_sim import measure  # noqa: E402

MARGIN = 0.10  # each range widened by this much either way


def spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def agree(a: list[float], b: list[float]) -> bool:
    lo_a, hi_a = min(a) * (1 - MARGIN), max(a) * (1 + MARGIN)
    lo_b, hi_b = min(b) * (1 - MARGIN), max(b) * (1 + MARGIN)
    return lo_a <= hi_b and lo_b <= hi_a


def cell(values: list[float], digits: int) -> str:
    mid, lo, hi = spread(values)
    return f"{mid:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def compare(real: dict, seeds: int, idle_s: float) -> tuple[str, bool]:
    timeout = int(real["node_timeout"])
    ours = [r for r in real["runs"] if r["kind"] == "ours"]
    sizes = sorted({r["nodes"] for r in ours})
    lines = [
        f"node timeout {timeout} ms; real: runs of bench/scale_out.py (median, lowest–highest); "
        f"simulated: {seeds} seeds, no loss",
        "",
        "| N | msgs/node/s, real | simulated | agree | FAIL everywhere s, real | simulated "
        "| agree |",
        "| ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    every = True
    for n in sizes:
        runs = [r for r in ours if r["nodes"] == n]
        real_msgs = [r["messages_per_s"] for r in runs]
        real_fail = [r["fail_s"] for r in runs]
        sims = [measure(n, timeout, 0.0, idle_s, seed) for seed in range(1, seeds + 1)]
        sim_msgs = [f.msgs_per_node_s for f in sims]
        sim_fail = [f.all_fail_s for f in sims]
        ok_msgs, ok_fail = agree(real_msgs, sim_msgs), agree(real_fail, sim_fail)
        every = every and ok_msgs and ok_fail
        lines.append(
            f"| {n} | {cell(real_msgs, 2)} | {cell(sim_msgs, 2)} | {'yes' if ok_msgs else 'NO'} "
            f"| {cell(real_fail, 1)} | {cell(sim_fail, 1)} | {'yes' if ok_fail else 'NO'} |"
        )
    return "\n".join(lines), every


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("real", type=Path, help="what bench/scale_out.py --json wrote")
    parser.add_argument("--seeds", type=int, default=5, help="simulated runs of each size")
    parser.add_argument("--idle", type=float, default=30, help="idle phase, simulated seconds")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    try:
        real = json.loads(args.real.read_text())
    except (OSError, ValueError) as exc:
        print(f"{args.real}: {exc}", file=sys.stderr)
        return 2
    text, every = compare(real, args.seeds, args.idle)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
