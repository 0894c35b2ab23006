"""The ``disque`` data source on a real Spark cluster, not ``local[2]``: a
standalone master and two workers (each a JVM of its own, started with the
``spark-class`` of pip's pyspark), whose executors unpickle the writer and the
readers and open their own connections to the nodes; and a Spark Connect
server (``sc://``, Spark 4's thin client), which runs the source on its side.

The driver runs in a process of its own (cluster_driver.py): a process holds
one SparkContext, and the suite's is local. Both write 2,000 rows to a
3-node cluster with REPLICATE 2, read a deduplicated snapshot, and drain the
queue with an ``availableNow`` stream, which acknowledges after its commit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from testkit.nodes import free_port, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
DRIVER = Path(__file__).resolve().parent / "cluster_driver.py"
ROWS = 2000

pytestmark = pytest.mark.timeout(300)


def spark_env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(paths),
        "SPARK_NO_DAEMONIZE": "1",
    }


class JVM:
    """A Spark daemon (master, worker, Connect server) in a session of its own."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv, env=spark_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


def spark_class(*args: str) -> list[str]:
    return [str(SPARK_HOME / "bin" / "spark-class"), *args]


def alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as reply:
        return int(json.load(reply).get("aliveworkers", 0))


def accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A master and two workers (1 core, 1 GB each): the master's URL."""
    port, ui = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    daemons = [
        JVM(
            "master",
            spark_class(
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)),
            ),
            tmp_path / "master.log",
        )
    ]
    try:
        for i in range(2):
            work = tmp_path / f"worker{i}"
            work.mkdir()
            daemons.append(
                JVM(
                    f"worker {i}",
                    spark_class(
                        "org.apache.spark.deploy.worker.Worker",
                        *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                        *("--webui-port", str(free_port()), "--work-dir", str(work)),
                        master_url,
                    ),
                    tmp_path / f"worker{i}.log",
                )
            )

        def both_workers() -> bool:
            for daemon in daemons:
                daemon.check_running()
            try:
                return alive_workers(ui) == 2
            except OSError:
                return False

        wait_for(both_workers, 120)
        yield master_url
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server (local[2] behind it): its ``sc://`` URL."""
    pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect]")
    pytest.importorskip("pandas", reason="Spark Connect's client needs pyspark[connect]")
    port = free_port()
    server = JVM(
        "Spark Connect server",
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
            *("--master", "local[2]", "--driver-memory", "1g"),
            *("--conf", f"spark.connect.grpc.binding.port={port}"),
            *("--conf", "spark.ui.enabled=false"),
            "spark-internal",
        ],
        tmp_path / "connect.log",
    )
    try:

        def listening() -> bool:
            server.check_running()
            return accepts(port)

        wait_for(listening, 120)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.stop()


def run_driver(url: str, seeds: str, queue: str, tmp_path: Path) -> dict:
    temp = tmp_path / "driver-tmp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, str(DRIVER), url, seeds, queue, str(ROWS)],
        env={**spark_env(), "TMPDIR": str(temp)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # The package zip shipped to the executors is gone once the driver is.
    assert not list(temp.glob("disque_spark-*.zip"))
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_drained(cluster, queue: str, seen: dict) -> None:
    assert seen["snapshot_queued"] == ROWS
    assert seen["drained"] >= ROWS and seen["distinct_bodies"] == ROWS
    # Acknowledged after the commit: no copy left anywhere (ACK GC's DELJOB).
    wait_for(lambda: all(n.call("QLEN", queue) == 0 for n in cluster), 30)


def test_write_snapshot_and_stream_on_a_standalone_cluster(
    standalone: str, start_cluster, tmp_path: Path
) -> None:
    cluster = start_cluster(3)
    seeds = f"127.0.0.1:{cluster[0].port}"
    started = time.monotonic()
    seen = run_driver(standalone, seeds, "on-standalone", tmp_path)
    assert seen["executors"] == 2, seen  # the work ran on the two workers' executors
    check_drained(cluster, "on-standalone", seen)
    assert time.monotonic() - started < 240


def test_write_snapshot_and_stream_through_spark_connect(
    connect_server: str, start_cluster, tmp_path: Path
) -> None:
    cluster = start_cluster(3)
    seeds = f"127.0.0.1:{cluster[0].port}"
    seen = run_driver(connect_server, seeds, "through-connect", tmp_path)
    check_drained(cluster, "through-connect", seen)
