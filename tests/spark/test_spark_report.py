"""python -m disque_spark.report: per-queue counts and dead letters, as Parquet and a table."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from sparkhelpers import add_jobs, seeds  # noqa: E402

from disque_spark import report  # noqa: E402


@pytest.mark.timeout(120)
def test_report_counts_states_and_dead_letters(spark, start_cluster, tmp_path, capsys):
    cluster = start_cluster(2)
    add_jobs(cluster[0], "orders", [f"o{i}" for i in range(6)])
    add_jobs(cluster[1], "mails", [f"m{i}" for i in range(3)], "REPLICATE", 1)
    # One job NACKed 3 times: a dead letter at threshold 3; another fetched once.
    nacked = set()
    with cluster[0].client() as c:
        for _ in range(3):
            queue, jid, body = c.execute_command("GETJOB", "NOHANG", "FROM", "orders")[0]
            nacked.add((jid, body))
            assert c.execute_command("NACK", jid) == 1
        assert c.execute_command("GETJOB", "NOHANG", "COUNT", 1, "FROM", "orders")
    assert len(nacked) == 1, "NACK puts the job back where it was: fetched again"

    found = report.run_report(spark, seeds(*cluster), tmp_path / "out", threshold=3)
    summary = {row["queue"]: row for row in found["summary"]}
    assert set(summary) == {"orders", "mails"}
    assert summary["orders"]["jobs"] == 6 and summary["mails"]["jobs"] == 3
    assert summary["orders"]["active"] == 1 and summary["orders"]["queued"] == 5
    assert summary["orders"]["max_nacks"] == 3 and summary["orders"]["dead_letters"] == 1
    assert summary["mails"]["queued"] == 3 and summary["mails"]["dead_letters"] == 0
    assert found["dead_letters"] == 1

    written = spark.read.parquet(str(tmp_path / "out" / "summary")).collect()
    assert {r.queue: r.jobs for r in written} == {"orders": 6, "mails": 3}
    dead = spark.read.parquet(str(tmp_path / "out" / "dead_letters")).collect()
    assert len(dead) == 1 and dead[0].nacks == 3
    assert (dead[0].id.encode(), dead[0].body.encode()) == nacked.pop()

    out = capsys.readouterr().out
    assert "9 jobs in 2 queues" in out
    assert "| queue " in out and "orders" in out
    assert "Dead letters (nacks or additional deliveries >= 3): 1" in out


def test_report_cli_help():
    proc = subprocess.run(
        [sys.executable, "-m", "disque_spark.report", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for flag in ("--nodes", "--out", "--threshold", "--master"):
        assert flag in proc.stdout


def test_format_table():
    text = report.format_table(["a", "bb"], [[1, None], ["long", ["x", "y"]]])
    assert text.splitlines()[1] == "| a    | bb  |"
    assert "| long | x,y |" in text


def test_error_summary_extracts_the_connector_message():
    wrapped = RuntimeError(
        "Traceback (most recent call last):\n  File ...\n"
        "    raise DisqueError(...)\n"
        "disque_spark.client.DisqueError: disque: ADDJOB failed after 3 "
        "rows were added: PAUSED Queue paused in input, try later\n"
    )
    assert report.error_summary(wrapped) == (
        "disque: ADDJOB failed after 3 rows were added: PAUSED Queue paused in input, try later"
    )
    assert report.error_summary(ValueError("plain\nmore")) == "plain"
