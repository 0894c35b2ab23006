"""disque-benchmark: small runs against real nodes and a real 3-node cluster.

Each run is the real command (`python -m disque_benchmark`) in its own
process; the nodes are shared by the tests of this module (every run uses a
queue of its own, named after its run tag), so the module stays quick.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from clihelpers import default_sigint

from disque_benchmark.hist import Histogram, bucket_of, bucket_range
from testkit.nodes import ClusterOfNodes, Node, free_port

ROOT = Path(__file__).resolve().parents[2]
LATENCY_KEYS = {"p50", "p90", "p99", "p99_9", "max"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("bench-node"))
    n.start()
    yield n
    n.terminate()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterOfNodes]:
    base = tmp_path_factory.mktemp("bench-cluster")
    nodes = [Node(base / f"n{i}", config={"cluster-node-timeout": "1500"}) for i in range(3)]
    with ClusterOfNodes.running(nodes) as c:
        yield c


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    # pytest-xdist exports COLUMNS=80 LINES=24 to its workers: the program sizes
    # itself from its terminal (the pty's dimensions) or its pipe, not from them.
    e.pop("COLUMNS", None)
    e.pop("LINES", None)
    return e


def bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "disque_benchmark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def bench_json(*args: str, code: int = 0, timeout: float = 60) -> dict[str, Any]:
    proc = bench(*args, "--json", "-q", timeout=timeout)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def assert_all_consumed(result: dict[str, Any], jobs: int) -> None:
    assert result["produced"] == jobs
    assert result["consumed"] == jobs
    assert result["lost"] == 0
    assert result["duplicates"] == 0
    assert result["errors"] == 0
    assert result["foreign"] == 0
    assert not result["drain_timed_out"]


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("disque-benchmark: ")
    return lines[0]


# ---- counts and verification ---------------------------------------------------------


def test_every_job_consumed_exactly_once(node: Node) -> None:
    result = bench_json("-p", str(node.port), "-n", "2000", "-c", "10")
    assert_all_consumed(result, 2000)
    queue = result["config"]["queue"]
    assert node.call("QLEN", queue) == 0
    # Every job was acknowledged, so the node forgot them all.
    assert node.call("JSCAN", "QUEUE", queue, "COUNT", "1000")[1] == []


def test_json_schema(node: Node) -> None:
    result = bench_json("-p", str(node.port), "-n", "300", "-c", "4", "-d", "100", "-P", "2")
    assert {
        "config",
        "produced",
        "consumed",
        "duration_s",
        "produce_rate",
        "consume_rate",
        "addjob_latency_ms",
        "e2e_latency_ms",
        "errors",
        "lost",
        "duplicates",
    } <= result.keys()
    assert isinstance(result["config"], dict)
    cfg = result["config"]
    assert cfg["nodes"] == [f"127.0.0.1:{node.port}"]
    assert (cfg["producers"], cfg["consumers"], cfg["jobs"]) == (2, 2, 300)
    assert (cfg["body_size"], cfg["pipeline"], cfg["count"], cfg["ack"]) == (100, 2, 2, "normal")
    for key in ("produced", "consumed", "errors", "lost", "duplicates"):
        assert type(result[key]) is int, key
    for key in ("duration_s", "produce_rate", "consume_rate"):
        assert isinstance(result[key], float), key
        assert result[key] > 0
    for key in ("addjob_latency_ms", "e2e_latency_ms"):
        lat = result[key]
        assert set(lat) == LATENCY_KEYS
        assert all(isinstance(v, float) for v in lat.values()), lat
        assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
    # The rates agree with the counts and durations.
    assert math.isclose(
        result["produce_rate"], result["produced"] / result["produce_duration_s"], rel_tol=1e-3
    )
    assert result["duration_s"] >= result["consume_duration_s"] > 0


def test_text_summary_and_plain_progress(node: Node) -> None:
    proc = bench("-p", str(node.port), "-n", "500", "-c", "4", "--ack", "fast")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "produced" in out and "consumed" in out and "end-to-end" in out
    assert "lost 0, duplicates 0, errors 0" in out
    assert "FASTACK" in out
    # Not a terminal: plain progress lines on stderr, no escape sequences.
    assert proc.stderr.startswith("disque-benchmark: 500 jobs, 2 producers / 2 consumers")
    assert "\x1b[" not in proc.stderr
    assert bench("-p", str(node.port), "-n", "50", "-c", "2", "-q").stderr == ""


def test_multiple_processes(node: Node) -> None:
    result = bench_json(
        "-p", str(node.port), "-n", "3001", "-c", "8", "--processes", "3", "-P", "4"
    )
    assert_all_consumed(result, 3001)
    assert result["config"]["processes"] == 3
    assert result["e2e_latency_ms"]["max"] is not None


def test_foreign_jobs_are_told_apart(node: Node) -> None:
    queue = f"foreign-{random.randrange(1 << 30)}"
    for i in range(5):
        node.call("ADDJOB", queue, f"not from the benchmark {i}", 0)
    result = bench_json("-p", str(node.port), "-n", "200", "-c", "4", "--queue", queue)
    assert_all_consumed(result | {"foreign": 0}, 200)
    assert result["foreign"] == 5
    assert node.call("QLEN", queue) == 0


def test_lost_jobs_are_reported(node: Node) -> None:
    queue = f"paused-{random.randrange(1 << 30)}"
    node.call("PAUSE", queue, "out")  # consumers never get a job
    result = bench_json(
        "-p",
        str(node.port),
        "-n",
        "50",
        "-c",
        "4",
        "--queue",
        queue,
        "--drain-timeout",
        "0.5",
        code=1,
    )
    assert result["produced"] == 50
    assert result["consumed"] == 0
    assert result["lost"] == 50
    assert result["drain_timed_out"] is True
    node.call("PAUSE", queue, "none")


def test_produce_only(node: Node) -> None:
    queue = f"fill-{random.randrange(1 << 30)}"
    result = bench_json(
        "-p",
        str(node.port),
        "-n",
        "400",
        "--producers",
        "3",
        "--consumers",
        "0",
        "--queue",
        queue,
        "-P",
        "8",
    )
    assert result["produced"] == 400
    assert result["consumed"] == 0
    assert result["lost"] is None
    assert set(result["e2e_latency_ms"].values()) == {None}
    assert node.call("QLEN", queue) == 400


def test_duration_rate_queues_and_idle(node: Node) -> None:
    before = node.info()["connected_clients"]
    result = bench_json(
        "-p",
        str(node.port),
        "--duration",
        "1.5",
        "--rate",
        "200",
        "-c",
        "4",
        "--queues",
        "7",
        "--idle",
        "30",
    )
    assert result["config"]["jobs"] is None
    assert result["lost"] is None  # no -n: not verified by ID
    assert 200 <= result["produced"] <= 360, result["produced"]
    assert result["consumed"] == result["produced"]
    assert result["errors"] == 0
    assert node.info()["connected_clients"] <= before + 1  # all closed again


def test_many_queues_with_count(node: Node) -> None:
    result = bench_json(
        "-p", str(node.port), "-n", "600", "-c", "3", "--queues", "10", "--count", "5", "-P", "3"
    )
    assert_all_consumed(result, 600)


# ---- cluster ---------------------------------------------------------------------


def test_replicate_3_on_a_3_node_cluster(cluster: ClusterOfNodes) -> None:
    result = bench_json("-p", str(cluster[0].port), "-n", "600", "-c", "6", "--replicate", "3")
    assert_all_consumed(result, 600)
    ports = sorted(int(a.rsplit(":", 1)[1]) for a in result["config"]["nodes"])
    assert ports == sorted(n.port for n in cluster)  # found with HELLO
    assert result["config"]["replicate"] == 3


def test_async_replication_two_processes(cluster: ClusterOfNodes) -> None:
    result = bench_json(
        "-p",
        str(cluster[1].port),
        "-n",
        "600",
        "-c",
        "6",
        "--replicate",
        "3",
        "--async",
        "--processes",
        "2",
        "--ack",
        "fast",
    )
    assert_all_consumed(result, 600)


def test_federation_producers_and_consumers_apart(cluster: ClusterOfNodes) -> None:
    a, b = cluster[0].port, cluster[2].port
    result = bench_json(
        "-p",
        str(a),
        "-n",
        "300",
        "-c",
        "4",
        "--replicate",
        "1",
        "--producer-node",
        f"127.0.0.1:{a}",
        "--consumer-node",
        f"127.0.0.1:{b}",
    )
    assert_all_consumed(result, 300)
    assert result["config"]["producer_nodes"] == [f"127.0.0.1:{a}"]
    assert result["config"]["consumer_nodes"] == [f"127.0.0.1:{b}"]


def test_replicate_more_than_nodes_is_an_error(node: Node) -> None:
    proc = bench("-p", str(node.port), "-n", "20", "-c", "2", "--replicate", "3", "-q")
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert "NOREPL" in line
    assert "20 errors" in line


def test_bad_addjob_options_stop_the_run(node: Node) -> None:
    proc = bench(
        "-p", str(node.port), "-n", "20", "-c", "2", "--replicate", "2", "--retry", "0", "-q"
    )
    assert proc.returncode == 1
    assert "ADDJOB failed" in one_line_error(proc)


def test_password_and_explicit_node(start_node) -> None:
    locked = start_node(config={"requirepass": "s3cret"})
    where = ["--node", f"127.0.0.1:{locked.port}"]
    result = bench_json(*where, "-a", "s3cret", "-n", "200", "-c", "4", "--processes", "2")
    assert_all_consumed(result, 200)
    assert result["config"]["nodes"] == [f"127.0.0.1:{locked.port}"]
    proc = bench(*where, "-n", "10")
    assert proc.returncode == 1
    assert "NOAUTH" in one_line_error(proc)


# ---- command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["-c", "0"], 1, "-c must be at least 1"),
        (["-n", "0"], 1, "-n must be at least 1"),
        (["-d", "10"], 1, "-d must be at least 24"),
        (["--processes", "0"], 1, "--processes must be at least 1"),
        (["--processes", "9", "-c", "4"], 1, "more than the 4 connections"),
        (["--rate", "-5"], 1, "--rate must be > 0"),
        (["-p", "70000"], 1, "-p must be a port number"),
        (["-n", "lots"], 2, "Invalid value for '-n' / '--jobs'"),
        (["--bogus"], 2, "No such option: --bogus"),
        (["--ack", "slow"], 2, "'slow' is not one of 'normal', 'fast'"),
        (["--node", "nohost"], 2, "expected HOST:PORT"),
        (["-c"], 2, "Option '-c' requires an argument"),
    ],
)
def test_bad_arguments(args: list[str], code: int, words: str) -> None:
    proc = bench(*args)
    assert proc.returncode == code
    assert words in one_line_error(proc)
    assert proc.stdout == ""


def test_connection_refused() -> None:
    port = free_port()
    proc = bench("-p", str(port), "-n", "10")
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert f"could not connect to 127.0.0.1:{port}" in line
    assert "refused" in line.lower()


def test_unreachable_extra_node_is_one_line(node: Node) -> None:
    port = free_port()
    proc = bench("-p", str(node.port), "--consumer-node", f"127.0.0.1:{port}", "-n", "10")
    assert proc.returncode == 1
    assert f"127.0.0.1:{port}" in one_line_error(proc)


def test_help_and_version() -> None:
    proc = bench("--help")
    assert proc.returncode == 0
    host = next(line for line in proc.stdout.splitlines() if "--host" in line)
    assert host.strip("│ ").split()[:3] == ["--host", "-h", "HOST"]
    assert "--processes" in proc.stdout and "--json" in proc.stdout
    proc = bench("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("disque-benchmark ")


# ---- interactive and interrupted runs --------------------------------------------------


def test_live_display_on_a_terminal(node: Node) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "disque_benchmark", "-p", str(node.port), "-n", "3000", "-c", "4"],
        cwd=str(ROOT),
        env=env(),
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 140),
    )
    child.expect(r"produced \(ADDJOB\)")
    child.expect("lost 0, duplicates 0, errors 0")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.parametrize("processes", ["1", "2"])
def test_ctrl_c_gives_partial_results(node: Node, processes: str) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "disque_benchmark",
            "-p",
            str(node.port),
            "--duration",
            "60",
            "-c",
            "4",
            "--processes",
            processes,
            "--json",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=ROOT,
        preexec_fn=default_sigint,
    )
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    result = json.loads(out)
    assert result["interrupted"] is True
    assert result["produced"] > 0


# ---- the histogram ---------------------------------------------------------------------


def test_histogram_buckets_and_percentiles() -> None:
    rng = random.Random(7)
    for v in [*range(3000), *(rng.randrange(10**10) for _ in range(20000))]:
        low, high = bucket_range(bucket_of(v))
        assert low <= v <= high
        assert high - low <= max(0, low // 128)
    values = [int(rng.expovariate(1 / 2000)) for _ in range(20000)]
    parts = [Histogram() for _ in range(3)]
    for i, v in enumerate(values):
        parts[i % 3].record(v)
    h = Histogram.merged(parts)  # merging is what --processes does
    assert h.total == len(values)
    values.sort()
    for pct in (50, 90, 99, 99.9):
        exact = values[math.ceil(pct * len(values) / 100 - 1e-9) - 1]
        assert exact <= h.percentile(pct) <= exact * 1.01 + 1
    assert h.percentile(100) == h.max == values[-1]
    assert Histogram().summary_ms() == dict.fromkeys(LATENCY_KEYS)
