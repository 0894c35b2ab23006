"""Every directive the server accepts does what it says, or is refused at startup:
the Unix socket, keepalive, output buffer limits, the watchdog, syslog, the
memory policy, and the whole table started with a sample value each."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from testkit.nodes import Node, free_port, wait_for
from testkit.processes import ROOT

pytestmark = pytest.mark.timeout(60)


def run_server(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the server to completion (a start that must fail)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "disque_server", "--port", str(free_port()), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )


def config_get(node: Node, name: str) -> str:
    return node.call("CONFIG", "GET", name)[1].decode()


def short_socket_path(tmp_path: Path) -> str:
    """A Unix socket path under the 107-byte limit whatever tmp_path is."""
    path = tmp_path / "d.sock"
    return str(path) if len(str(path)) < 100 else f"/tmp/disque-{os.getpid()}-{free_port()}.sock"


# ---- unixsocket, unixsocketperm -----------------------------------------------------------


def test_unix_socket_listens_with_its_permissions_and_goes_at_shutdown(start_node, tmp_path):
    path = short_socket_path(tmp_path)
    node = start_node(config={"unixsocket": path, "unixsocketperm": "700"})
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    with redis.Redis(unix_socket_path=path, protocol=2) as c:
        jid = c.execute_command("ADDJOB", "q", "over the socket", "0")
        assert c.execute_command("QLEN", "q") == 1
        assert f"addr={path}:0" in c.execute_command("CLIENT", "LIST").decode()
    assert node.call("SHOW", jid) is not None
    assert config_get(node, "unixsocket") == path
    assert config_get(node, "unixsocketperm") == "700"
    assert node.info("server")["unixsocket"] == path
    assert node.terminate() == 0
    assert not os.path.exists(path)


def test_a_stale_socket_file_is_replaced(start_node, tmp_path):
    path = short_socket_path(tmp_path)
    node = start_node(config={"unixsocket": path})
    node.kill()  # kill -9 leaves the file behind
    assert os.path.exists(path)
    node.start()
    with redis.Redis(unix_socket_path=path, protocol=2) as c:
        assert c.ping()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            ["--unixsocket", "/nonexistent-dir/d.sock"],
            "Opening Unix socket /nonexistent-dir/d.sock",
        ),
        (["--unixsocketperm", "999"], "Invalid argument for 'unixsocketperm'"),
        (["--unixsocketperm", "1777"], "Invalid argument for 'unixsocketperm'"),
    ],
)
def test_bad_unix_socket_settings_stop_the_start(tmp_path, config, message):
    res = run_server(config, tmp_path)
    assert res.returncode == 1
    assert message in res.stderr and "Traceback" not in res.stderr


# ---- the rest of the table ----------------------------------------------------------------

# A valid value for every directive (whatever the table holds, each must start a node).
SAMPLES = {
    "requirepass": None,
    "unixsocket": None,
    "logfile": None,
    "pidfile": "disque.pid",
    "maxmemory": "100mb",
    "maxmemory-samples": "3",
    "timeout": "100",
    "auto-aof-rewrite-percentage": "50",
    "auto-aof-rewrite-min-size": "1mb",
    "slowlog-log-slower-than": "100",
    "latency-monitor-threshold": "10",
    "slowlog-max-len": "10",
    "port": None,
    "tcp-backlog": "128",
    "databases": "1",
    "maxclients": "100",
    "watchdog-period": "500",
    "hz": "20",
    "cluster-node-timeout": "2000",
    "tcp-keepalive": "60",
    "no-appendfsync-on-rewrite": "yes",
    "daemonize": None,
    "activerehashing": "no",
    "aof-rewrite-incremental-fsync": "no",
    "aof-load-truncated": "no",
    "aof-enqueue-jobs-once": "no",
    "maxmemory-policy": "noeviction",
    "loglevel": "verbose",
    "appendfsync": "always",
    "syslog-facility": "local3",
    "appendonly": "yes",
    "dir": None,
    "client-output-buffer-limit": "normal 10mb 5mb 10",
    "unixsocketperm": "755",
    "bind": "127.0.0.1",
    "appendfilename": "other.aof",
    "cluster-config-file": "other.conf",
    "protected-mode": "no",
    "queue-max-idle-time": "30",
    "syslog-enabled": "yes",
    "syslog-ident": "disque-test",
    "cluster-password": "secret",
    "tls-port": None,
    "tls-cert-file": None,
    "tls-key-file": None,
    "tls-ca-cert-file": None,
    "tls-auth-clients": "optional",
    "tls-cluster": "no",
    # ports of their own are tested in test_metrics.py and test_nat.py
    "metrics-port": None,
    "metrics-bind": "127.0.0.1",
    "metrics-max-queues": "10",
    "cluster-port": None,
    "cluster-announce-ip": "127.0.0.1",
    "cluster-announce-port": "7711",
    "cluster-announce-bus-port": "17711",
}


def test_every_directive_has_a_sample() -> None:
    from disque_server.config import PARAMS

    assert sorted(SAMPLES) == sorted(PARAMS)


def test_every_directive_starts_a_node_with_a_valid_value(start_node) -> None:
    config = {name: value for name, value in SAMPLES.items() if value is not None}
    node = start_node(config=config)
    assert config_get(node, "client-output-buffer-limit") == "normal 10485760 5242880 10"
    assert config_get(node, "syslog-facility") == "local3"
    assert config_get(node, "maxmemory-policy") == "noeviction"
    assert (node.dir / "other.aof").exists() and (node.dir / "other.conf").exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("client-output-buffer-limit", "slave 0 0 0"),
        ("client-output-buffer-limit", "normal 0 0"),
        ("client-output-buffer-limit", "normal 0 0 -1"),
        ("client-output-buffer-limit", "normal lots 0 0"),
        ("syslog-facility", "kern"),
        ("maxmemory-policy", "allkeys-lru"),
        ("tcp-keepalive", "-1"),
        ("watchdog-period", "-5"),
    ],
)
def test_bad_values_are_refused_at_startup(tmp_path, name, value):
    res = run_server([f"--{name}", *value.split()], tmp_path)
    assert res.returncode == 1
    assert f"Invalid argument for '{name}'" in res.stderr or "Bad directive" in res.stderr
    assert "Traceback" not in res.stderr


def keepalive_timers(port: int) -> str:
    """ss's view of the node's accepted connections on `port` (timer column included)."""
    return subprocess.run(
        ["ss", "-tno", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout


@pytest.mark.skipif(
    not any(
        os.access(os.path.join(d, "ss"), os.X_OK)
        for d in os.environ.get("PATH", "").split(os.pathsep)
    ),
    reason="ss (iproute2) is needed to see socket timers",
)
def test_tcp_keepalive_is_set_on_client_connections(start_node) -> None:
    with_keepalive = start_node(config={"tcp-keepalive": "60"})
    without = start_node()
    for node in (with_keepalive, without):
        with node.client() as c:
            c.ping()
            # Once the reply is acknowledged, the only timer left is keepalive's, if any.
            seen = wait_for(
                lambda n=node: (out := keepalive_timers(n.port)) and "timer:(on" not in out and out,
                5,
                message="an idle link",
            )
            assert ("timer:(keepalive" in seen) == (node is with_keepalive), seen


def test_client_output_buffer_limit_closes_a_client_that_does_not_read(start_node) -> None:
    node = start_node(config={"client-output-buffer-limit": "normal 1mb 0 0"})
    jid = node.call("ADDJOB", "q", "x" * 200_000, "0")
    victim = socket.create_connection(("127.0.0.1", node.port))
    victim.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    victim.sendall(b"SHOW %s\r\n" % jid * 200)  # 40 MB of replies, never read
    wait_for(
        lambda: "overcoming of output buffer limits" in node.log(),
        10,
        message="the client closed for its output buffer",
    )
    wait_for(
        lambda: len(node.call("CLIENT", "LIST").decode().splitlines()) == 1,
        5,
        message="only the CLIENT LIST caller left",
    )
    victim.close()


def test_watchdog_logs_the_stack_of_a_stalled_loop(start_node) -> None:
    node = start_node()
    assert node.call("CONFIG", "SET", "watchdog-period", "300") == b"OK"
    node.call("DEBUG", "SLEEP", "1.5")
    wait_for(lambda: "debug_command" in node.log(), 5, message="the stack trace in the log")
    assert node.call("CONFIG", "SET", "watchdog-period", "0") == b"OK"
    dumps = node.log().count("debug_command")
    node.call("DEBUG", "SLEEP", "0.8")
    assert node.call("PING")
    assert node.log().count("debug_command") == dumps  # off: no more stack traces


def test_maxmemory_policy_noeviction_keeps_acked_jobs(start_cluster) -> None:
    node, peer = start_cluster(2, config={"maxmemory-policy": "noeviction"})
    acked = [node.call("ADDJOB", "q", "x" * 10_000, "0", "REPLICATE", "2") for _ in range(50)]
    peer.kill()  # the acknowledgements cannot be garbage collected
    node.call("ACKJOB", *acked)
    assert node.info("jobs")["registered_jobs"] == 50
    node.call("CONFIG", "SET", "maxmemory", str(node.info("memory")["used_memory"]))
    assert node.info("jobs")["registered_jobs"] == 50  # at the limit, and nothing evicted
    node.call("CONFIG", "SET", "maxmemory-policy", "acks")
    wait_for(
        lambda: node.info("jobs")["registered_jobs"] == 0,
        5,
        message="acked jobs evicted once the policy allows it",
    )
