"""python -m disque_spark.report: per-queue counts and dead letters, as Parquet and a table."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main

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


# The command line (typer), in this process: no Spark session is started.


def parsed(*args: str) -> report.Options:
    """The options the command line gives the report, parsed as the command parses it."""
    with typer.main.get_command(report.app).make_context(report.PROG, list(args)) as ctx:
        return report.Options(**ctx.params)


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the command starts a Spark session."""

    def session(*args, **kwargs):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(report.disque_spark, "session", session)


def test_report_cli_defaults():
    assert parsed() == report.Options()
    assert report.Options() == report.Options(
        nodes="127.0.0.1:7711",
        password=None,
        queue=None,
        out="disque-report",
        threshold=3,
        master=None,
        show=20,
    )


def test_report_cli_options():
    assert parsed(
        "--nodes",
        "h1:7711,h2:7712",
        "--password",
        "pw",
        "--queue",
        "orders,mails",
        "--out",
        "/tmp/r",
        "--threshold",
        "5",
        "--master=spark://host:7077",
        "--show",
        "0",
    ) == report.Options(
        "h1:7711,h2:7712", "pw", "orders,mails", "/tmp/r", 5, "spark://host:7077", 0
    )


def test_report_cli_runs_the_options_it_parsed(monkeypatch, no_spark):
    ran = []
    monkeypatch.setattr(report, "start", lambda opts: ran.append(opts) or 7)
    assert report.main(["--threshold", "4", "--queue", "q"]) == 7
    assert ran == [report.Options(threshold=4, queue="q")]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--threshold", "many"], "Invalid value for '--threshold'"),
        (["--threshold", "2.5"], "Invalid value for '--threshold'"),
        (["--show", "ten"], "Invalid value for '--show'"),
        (["--show", "-1"], "Invalid value for '--show'"),
        (["--bogus"], "No such option: --bogus"),
        (["--thresh", "3"], "No such option: --thresh"),  # no abbreviations, unlike argparse
        (["--nodes"], "Option '--nodes' requires an argument"),
        (["h1:7711"], "Got unexpected extra argument"),
    ],
)
def test_report_cli_a_command_line_that_does_not_parse(capsys, no_spark, args, words):
    assert report.main(args) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{report.PROG}: ") and words in lines[0]
    assert lines[0].endswith(" (see --help)") and not lines[0].endswith(". (see --help)")
    assert out == ""


def test_report_cli_help_in_process(capsys, no_spark):
    for flag in ("-h", "--help"):
        assert report.main([flag]) == 0
        out = capsys.readouterr().out
        assert f"Usage: {report.PROG} [OPTIONS]" in out
        for name in ("--nodes", "--password", "--queue", "--out", "--threshold", "--master"):
            assert name in out
        assert "--show" in out and "[default:" not in out  # the texts say their defaults


def test_report_cli_a_failed_report_is_one_line_and_status_1(monkeypatch, capsys):
    stopped = []

    class Session:
        class sparkContext:  # noqa: N801
            @staticmethod
            def setLogLevel(level):  # noqa: N802
                pass

        @staticmethod
        def stop():
            stopped.append(True)

    def run_report(*args):
        raise RuntimeError("Traceback ...\ndisque_spark.client.DisqueError: disque: no node\n")

    monkeypatch.setattr(report.disque_spark, "session", lambda master, app_name: Session)
    monkeypatch.setattr(report, "run_report", run_report)
    assert report.main(["--nodes", "h:1"]) == 1
    assert capsys.readouterr() == ("", "error: disque: no node\n")
    assert stopped == [True]
