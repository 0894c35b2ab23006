"""Jepsen-style queue tests: no acknowledged ADDJOB is lost under kills, pauses, partitions.

The short forms run in CI (about a minute each); ``CHAOS_SECONDS=600
pytest tests/chaos -s`` stretches them, and ``pytest tests/chaos --runslow
-s`` adds a 5-minute run with every kind of fault. See chaos_harness for
what is checked.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from chaos_harness import (
    Partitioner,
    QueueChaos,
    Settings,
    failures,
    format_summary,
    save_logs,
)

SHORT_SECONDS = float(os.environ.get("CHAOS_SECONDS", "20"))
LONG_SECONDS = float(os.environ.get("CHAOS_SECONDS", "300"))


def settings(seconds: float, kinds: tuple[str, ...]) -> Settings:
    s = Settings(seconds=seconds, kinds=kinds)
    if os.environ.get("CHAOS_SEED"):
        s.seed = int(os.environ["CHAOS_SEED"])
    return s


def run_chaos(
    name: str, cluster, s: Settings, artifacts: Path, partitioner: Partitioner | None = None
) -> dict:
    chaos = QueueChaos(cluster, s, partitioner)
    t0 = time.monotonic()
    try:
        result = chaos.run()
    except BaseException:
        dest = save_logs(cluster, artifacts / f"{name}-{os.getpid()}-logs")
        print(f"\nchaos run {name} raised; node logs in {dest}")
        raise
    result["total_seconds"] = round(time.monotonic() - t0, 1)
    summary = format_summary(name, result)
    print("\n" + summary)
    (artifacts / f"{name}-summary.txt").write_text(summary + "\n".join(result["events"]) + "\n")
    (artifacts / f"{name}-result.json").write_text(json.dumps(result, indent=1, default=str))
    problems = failures(result)
    if problems:
        dest = save_logs(cluster, artifacts / f"{name}-{os.getpid()}-logs")
        pytest.fail(
            f"{name}: {', '.join(problems)}; seed {result['seed']}; summary in "
            f"{artifacts / (name + '-summary.txt')}; node logs in {dest}\n{summary}",
            pytrace=False,
        )
    return result


@pytest.mark.timeout(SHORT_SECONDS + 240)
def test_no_lost_jobs_under_kills_and_pauses(chaos_cluster, chaos_artifacts: Path) -> None:
    cluster = chaos_cluster(5)
    run_chaos("kill-pause", cluster, settings(SHORT_SECONDS, ("kill", "pause")), chaos_artifacts)


@pytest.mark.timeout(SHORT_SECONDS + 240)
def test_no_lost_jobs_under_partitions(
    partitioner: Partitioner, chaos_cluster, chaos_artifacts: Path
) -> None:
    cluster = chaos_cluster(5)
    run_chaos(
        "partition",
        cluster,
        settings(SHORT_SECONDS, ("partition", "partition", "kill")),
        chaos_artifacts,
        partitioner,
    )


@pytest.mark.slow
@pytest.mark.timeout(LONG_SECONDS + 400)
def test_no_lost_jobs_long_mixed_faults(chaos_cluster, chaos_artifacts: Path) -> None:
    """Every kind of fault (partitions only where iptables can be used), for minutes."""
    p = Partitioner()
    reason = p.unavailable_reason()
    kinds = ("kill", "pause") if reason else ("kill", "pause", "partition")
    if reason:
        print(f"\nlong chaos run without partitions: {reason}")
    cluster = chaos_cluster(5)
    try:
        run_chaos(
            "long-mixed",
            cluster,
            settings(LONG_SECONDS, kinds),
            chaos_artifacts,
            None if reason else p,
        )
    finally:
        p.uninstall()
