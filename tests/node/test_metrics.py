"""Prometheus metrics (beyond Disque): /metrics on metrics-port.

Checked with the real tools: `promtool check metrics` on the output, and a real
Prometheus server scraping a 3-node cluster (Debian's `prometheus` package;
these tests skip, saying so, when it is not installed).
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from testkit.nodes import ClusterOfNodes, free_port, tls_config, wait_for

NEEDS_PROMTOOL = pytest.mark.skipif(
    not shutil.which("promtool"),
    reason="promtool not installed (Debian package 'prometheus'; .ci/run installs it)",
)
NEEDS_PROMETHEUS = pytest.mark.skipif(
    not shutil.which("prometheus"),
    reason="prometheus not installed (Debian package 'prometheus'; .ci/run installs it)",
)


def metrics_node(start_node, **config: str):
    port = free_port()
    return start_node(config={"metrics-port": str(port), **config}), port


def scrape(port: int, scheme: str = "http", context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(
        f"{scheme}://127.0.0.1:{port}/metrics", timeout=10, context=context
    ) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, labels): value}."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]


def test_metrics_is_off_by_default(node):
    assert "metrics" not in node.log().lower()


@NEEDS_PROMTOOL
def test_promtool_accepts_the_output(start_node):
    node, port = metrics_node(start_node)
    node.call("ADDJOB", "q", "body", 0)
    node.call("PAUSE", "p", "in")
    text = scrape(port)
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, text=True, capture_output=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    for name in (
        "disque_jobs",
        "disque_queue_length",
        "disque_addjob_replies_total",
        "disque_command_calls_total",
        "disque_bus_messages_received_total",
        "disque_aof_last_fsync_timestamp_seconds",
        "disque_memory_used_bytes",
        "disque_event_loop_max_stall_seconds",
        "process_resident_memory_bytes",
    ):
        assert f"\n# TYPE {name} " in text, name


def test_jobs_queues_and_addjob_outcomes(start_node):
    node, port = metrics_node(start_node)
    for _ in range(3):
        node.call("ADDJOB", "work", "body", 0)
    with node.client() as c:
        for args, error in (
            (["MAXLEN", "1"], "MAXLEN"),
            (["REPLICATE", "2"], "NOREPL"),
            (["BADOPTION", "1"], "syntax"),
        ):
            with pytest.raises(redis.ResponseError, match=error):
                c.execute_command("ADDJOB", "work", "body", 0, *args)
        c.execute_command("PAUSE", "work", "in")
        with pytest.raises(redis.ResponseError, match="PAUSED"):
            c.execute_command("ADDJOB", "work", "body", 0)
    node.call("GETJOB", "FROM", "work")
    text = scrape(port)
    assert value(text, "disque_jobs", state="queued") == 2
    assert value(text, "disque_jobs", state="active") == 1
    assert value(text, "disque_queue_length", queue="work") == 2
    assert value(text, "disque_queue_jobs_in_total", queue="work") == 3
    assert value(text, "disque_queue_jobs_out_total", queue="work") == 1
    assert value(text, "disque_queue_paused", queue="work", direction="in") == 1
    assert value(text, "disque_queue_paused", queue="work", direction="out") == 0
    outcomes = {
        o: value(text, "disque_addjob_replies_total", outcome=o)
        for o in ("ok", "MAXLEN", "NOREPL", "ERR", "PAUSED", "OOM")
    }
    assert outcomes == {"ok": 3, "MAXLEN": 1, "NOREPL": 1, "ERR": 1, "PAUSED": 1, "OOM": 0}
    assert value(text, "disque_command_calls_total", command="addjob") == 7
    assert value(text, "disque_cluster_known_nodes") == 1


def test_used_memory_follows_the_jobs_on_an_idle_node(start_node):
    """The cron of an idle node (no client, no job) does not refresh used memory; a
    scrape does, so the gauge falls as soon as the jobs are gone (hz 1: no tick of
    the cron between FLUSHALL and the scrape to hide it)."""
    node, port = metrics_node(start_node, hz="1")
    with node.client() as c:
        pipe = c.pipeline(transaction=False)
        for _ in range(2000):
            pipe.execute_command("ADDJOB", "q", "x" * 1000, 0)
        pipe.execute()
        full = value(scrape(port), "disque_memory_used_bytes")
        c.execute_command("DEBUG", "FLUSHALL")
    assert value(scrape(port), "disque_memory_used_bytes") < full - 2000 * 1000


def test_oom_refusals_are_counted(start_node):
    node, port = metrics_node(start_node, maxmemory="1mb")
    body = "x" * 10_000  # used_memory is the data: ~100 of these fill 1 MB
    for _ in range(500):
        try:
            node.call("ADDJOB", "q", body, 0)
        except redis.ResponseError as exc:
            assert "maxmemory" in str(exc)
            break
    else:
        pytest.fail("ADDJOB was never refused with maxmemory 1mb")
    assert value(scrape(port), "disque_addjob_replies_total", outcome="OOM") == 1


def test_queue_series_are_capped_longest_first(start_node):
    node, port = metrics_node(start_node, **{"metrics-max-queues": "2"})
    for name, n in (("short", 1), ("long", 3), ("middle", 2)):
        for _ in range(n):
            node.call("ADDJOB", name, "body", 0)
    text = scrape(port)
    exported = {
        dict(labels)["queue"] for name, labels in samples(text) if name == "disque_queue_length"
    }
    assert exported == {"long", "middle"}
    assert value(text, "disque_queues") == 3
    assert value(text, "disque_queues_not_exported") == 1


def test_metrics_bind_and_bad_requests(start_node):
    node, port = metrics_node(start_node, **{"metrics-bind": "127.0.0.1"})
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
    assert missing.value.code == 404
    post = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=10)
    assert refused.value.code == 405
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"x" * 10_000)
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    assert node.call("PING") is True


def test_metrics_over_tls_when_the_node_has_a_certificate(start_node, certs):
    port = free_port()
    node = start_node(config={**tls_config(certs, free_port()), "metrics-port": str(port)})
    context = ssl.create_default_context(cafile=certs["ca"])
    text = scrape(port, "https", context)
    assert value(text, "disque_cluster_known_nodes") == 1
    with pytest.raises(OSError):  # plain HTTP gets no answer
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert node.call("PING") is True


@pytest.fixture
def metrics_cluster(start_node):
    """Three nodes in a mesh, each with a metrics port: (cluster, [metrics ports])."""
    ports = [free_port() for _ in range(3)]
    cluster = ClusterOfNodes(
        [start_node(config={"cluster-node-timeout": "1500", "metrics-port": str(p)}) for p in ports]
    )
    cluster.join()
    return cluster, ports


def test_bus_and_membership_metrics(metrics_cluster):
    cluster, ports = metrics_cluster
    cluster[0].call("ADDJOB", "q", "body", 0, "REPLICATE", 3)
    text = scrape(ports[1])
    assert value(text, "disque_cluster_known_nodes") == 3
    assert value(text, "disque_cluster_reachable_nodes") == 2
    assert value(text, "disque_cluster_failing_nodes") == 0
    assert value(text, "disque_bus_messages_received_total", type="PONG") > 0
    assert value(text, "disque_bus_messages_received_total", type="REPLJOB") >= 1
    assert value(text, "disque_jobs", state="active") == 1
    cluster[2].pause()
    try:
        wait_for(lambda: value(scrape(ports[1]), "disque_cluster_failing_nodes") == 1)
    finally:
        cluster[2].resume()


@NEEDS_PROMETHEUS
def test_prometheus_scrapes_a_cluster(metrics_cluster, tmp_path: Path):
    cluster, ports = metrics_cluster
    for i in range(5):
        cluster[0].call("ADDJOB", "backlog", f"job {i}", 0, "REPLICATE", 3)
    cluster[1].call("ADDJOB", "backlog", "one more", 0, "REPLICATE", 3)
    web = free_port()
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: disque\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def query(expr: str) -> list:
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            reply = json.load(r)
        assert reply["status"] == "success"
        return reply["data"]["result"]

    def scalar(expr: str) -> float | None:
        result = query(expr)
        return float(result[0]["value"][1]) if result else None

    try:
        wait_for(
            lambda: scalar('count(up{job="disque"} == 1)') == 3,
            timeout=60,
            message="Prometheus scraping the 3 nodes",
        )
        wait_for(
            lambda: scalar('sum(disque_queue_length{queue="backlog"})') == 6,
            timeout=30,
            message="the backlog's length in Prometheus",
        )
        per_node = query('disque_queue_length{queue="backlog"}')
        assert sorted(float(r["value"][1]) for r in per_node) == [1, 5]
        assert scalar('sum(disque_jobs{state="active"})') == 12  # the replicas
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
