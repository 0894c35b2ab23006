"""``disque-worker --processes N`` (disque/supervisor.py) on a real node: jobs
handled by N processes, a killed child restarted, SIGTERM passed to every child
and their jobs finished, a child that cannot run stopping the lot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from disque import Client
from disque.tasks import Tasks
from testkit.nodes import Node, wait_for

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(120)


def children(pid: int) -> set[int]:
    """The PIDs whose parent is ``pid`` (/proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def write_app(tmp_path: Path, node: Node) -> None:
    """Tasks whose handler reports the PID that ran it, as a job on ``pids``."""
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            f"""
            import os, time
            from disque import Client
            from disque.tasks import Tasks

            tasks = Tasks("127.0.0.1:{node.port}")
            report = Client("127.0.0.1:{node.port}")

            @tasks.task(queue="crunch")
            def crunch(seconds):
                if seconds >= 1:  # a long one says it started
                    report.add_job("started", str(os.getpid()), 0)
                end = time.monotonic() + seconds
                while time.monotonic() < end:  # CPU-bound
                    pass
                report.add_job("pids", str(os.getpid()), 0)
            """
        )
    )


def pids_reported(client: Client, n: int) -> list[int]:
    jobs = client.get_job("pids", timeout=200, count=n)
    client.ack(*(job.id for job in jobs))
    return [int(job.body) for job in jobs]


def test_processes_share_the_jobs_restart_when_killed_and_stop_together(
    tmp_path: Path, node: Node
) -> None:
    write_app(tmp_path, node)
    producer = Tasks(f"127.0.0.1:{node.port}")
    crunch = producer.task(name="app.crunch", queue="crunch")(lambda seconds: None)
    proc = subprocess.Popen(
        [str(BIN / "disque-worker"), "app:tasks", "--processes", "2", "--concurrency", "1"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[int] = []
    with Client(f"127.0.0.1:{node.port}") as client:
        try:
            wait_for(lambda: len(children(proc.pid)) == 2, timeout=20, message="two children")
            first = children(proc.pid)
            for _ in range(10):
                crunch.send(0.2)

            def reported(n: int) -> bool:
                seen.extend(pids_reported(client, 10))
                return len(seen) >= n

            wait_for(lambda: reported(10), timeout=30, message="ten jobs handled")
            assert set(seen) == first, "both processes took jobs"
            victim = min(first)
            os.kill(victim, signal.SIGKILL)
            wait_for(
                lambda: len(children(proc.pid) - {victim}) == 2,
                timeout=20,
                message="the killed process replaced",
            )
            crunch.send_with_options(args=(3.0,))
            # Started, not only fetched: a job fetched ahead and not begun is put back
            # at once on SIGTERM, never run.
            wait_for(
                lambda: client.get_job("started", timeout=100),
                timeout=20,
                message="the long job started",
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
            assert not children(proc.pid)
            assert pids_reported(client, 1), "the running job finished before its process stopped"
            assert client.qlen("crunch") == 0
        finally:
            proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert "worker process 0 exited" in stderr or "worker process 1 exited" in stderr, stderr


def test_a_child_that_cannot_run_stops_the_supervisor(tmp_path: Path, node: Node) -> None:
    write_app(tmp_path, node)
    done = subprocess.run(
        [str(BIN / "disque-worker"), "app:tasks", "--processes", "3", "--queues", "nosuch"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no handler for queue(s): nosuch" in done.stderr
    assert "cannot run: stopping all" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_application_that_does_not_import_is_one_line_not_a_traceback(
    tmp_path: Path, node: Node
) -> None:
    (tmp_path / "app.py").write_text("def broken(:\n")
    for extra in ([], ["--processes", "2"]):
        done = subprocess.run(
            [str(BIN / "disque-worker"), "app:tasks", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "disque-worker: app: SyntaxError" in done.stderr
        assert "Traceback" not in done.stderr
