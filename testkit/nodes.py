"""Real `disque-server` processes for tests: start, stop, kill, pause, restart.

Every node runs as its own process (`python -m disque_server`) on a free
port, in its own temporary directory, logging to a file the test can read.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from testkit.polling import Poll
from testkit.processes import ServerProcess, free_port, node_argv, node_env


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> Any:
    """Poll `predicate` until it returns a truthy value; fail the test after `timeout`."""
    poll = Poll(predicate, timeout, message)
    while (value := poll.value()) is None:
        time.sleep(interval)
    return value


def links_up(node: Node) -> int:
    """Other nodes this node is linked to and does not flag failing or in handshake
    (CLUSTER NODES): the links, where cluster_reachable_nodes is Disque's count of
    the nodes a job can be replicated to, linked or not."""
    count = 0
    for line in node.call("CLUSTER", "NODES").decode().splitlines():
        fields = line.split()
        flags = set(fields[2].split(","))
        if "myself" in flags or flags & {"pfail", "fail", "handshake"}:
            continue
        count += fields[-1] == "connected"
    return count


def as_dict(reply: list | None) -> dict:
    """A flat key/value reply (SHOW, QSTAT) as a dict."""
    if not reply:
        return {}
    return dict(zip(reply[::2], reply[1::2], strict=True))


def messages_received(node: Node) -> int:
    """Cluster bus messages the node received so far (CLUSTER INFO)."""
    info = node.call("CLUSTER", "INFO").decode()
    return int(info.split("cluster_stats_messages_received:")[1].split()[0])


def tls_config(certs: dict[str, str], port: int) -> dict[str, str]:
    """Config of a node with a TLS client port on `port` (certs: the `certs` fixture)."""
    return {
        "tls-port": str(port),
        "tls-cert-file": certs["cert"],
        "tls-key-file": certs["key"],
        "tls-ca-cert-file": certs["ca"],
    }


class Node(ServerProcess):
    """One disque-server process under test (testkit/processes.py starts and stops it)."""

    start_timeout = 15.0

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        config: dict[str, str] | None = None,
        args: list[str] | None = None,
    ):
        port = port or free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__("node", [], port, workdir / "node.log", node_env(), cwd=workdir)
        self.dir = workdir
        self.config = dict(config or {})
        self.extra_args = list(args or [])

    # ---- process control -------------------------------------------------
    def command_line(self) -> list[str]:
        """Read at each start: a test may change ``config`` and restart the node."""
        directives = [arg for key, value in self.config.items() for arg in (f"--{key}", str(value))]
        return node_argv(self.port, self.dir, self.logfile, self.extra_args, directives)

    def start(self, wait: bool = True) -> Node:
        super().start(wait)
        return self

    def restart(self) -> Node:
        self.terminate()
        return self.start()

    def replaced(self, workdir: Path) -> Node:
        """Kill this node and start a fresh one (empty dir: a new ID) on its port,
        as an operator replacing a dead machine would. The caller stops it."""
        self.kill()
        return Node(workdir, port=self.port, config=self.config, args=self.extra_args).start()

    # ---- talking to it ---------------------------------------------------
    def client(self, **kwargs: Any) -> redis.Redis:
        """A redis-py client speaking RESP2 (raw replies, bytes)."""
        kwargs.setdefault("protocol", 2)
        kwargs.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def call(self, *args: Any) -> Any:
        with self.client() as c:
            return c.execute_command(*args)

    def show(self, jid: bytes) -> dict:
        """SHOW as a dict keyed by bytes ({} for an unknown job)."""
        return as_dict(self.call("SHOW", jid))

    def info(self, section: str = "default") -> dict:
        """INFO parsed by redis-py: {'registered_jobs': 0, ...}."""
        with self.client() as c:
            return c.info(section)

    def log(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def __repr__(self) -> str:
        return f"<Node port={self.port} dir={self.dir}>"


class ReferenceNode(Node):
    """C Disque 1.0-rc1's own disque-server (the ``reference_binary`` fixture names
    it), where a test takes ours or the reference."""

    def __init__(
        self,
        workdir: Path,
        binary: str,
        config: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(workdir, port=port, config=config)
        self.binary = binary

    def command_line(self) -> list[str]:
        directives = [arg for key, value in self.config.items() for arg in (f"--{key}", value)]
        return [self.binary, "--port", str(self.port), "--dir", str(self.dir), *directives]


class ClusterOfNodes:
    """N nodes joined into one Disque cluster."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    def __getitem__(self, i: int) -> Node:
        return self.nodes[i]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    @classmethod
    @contextlib.contextmanager
    def running(cls, nodes: list[Node], timeout: float = 20.0) -> Iterator[ClusterOfNodes]:
        """Start the nodes (all, then wait for each), join them, and stop them at the
        end (a paused node is resumed first: SIGSTOPped, it would not see SIGTERM)."""
        cluster = cls(nodes)
        try:
            for node in nodes:
                node.start(wait=False)
            for node in nodes:
                node.wait_ready()
            cluster.join(timeout)
            yield cluster
        finally:
            for node in nodes:
                if node.is_running():
                    node.resume()
                    node.terminate()

    def join(self, timeout: float = 20.0) -> None:
        """Node i meets node i+1 (gossip does the rest); wait for the full mesh."""
        self.meet_chain()
        self.wait_full_mesh(timeout)

    def meet_chain(self) -> None:
        """Node i meets node i+1 only: gossip must do the rest."""
        for a, b in itertools.pairwise(self.nodes):
            assert a.call("CLUSTER", "MEET", "127.0.0.1", str(b.port)) == b"OK"

    def wait_full_mesh(self, timeout: float = 20.0, nodes: list[Node] | None = None) -> None:
        members = nodes or [n for n in self.nodes if n.is_running()]
        expected = len(members)

        def meshed() -> bool:
            return all(links_up(n) == expected - 1 for n in members) and all(
                len(n.call("CLUSTER", "NODES").decode().splitlines()) == expected for n in members
            )

        wait_for(meshed, timeout, message=f"a full mesh of {expected} nodes")

    def node_ids(self) -> list[bytes]:
        return [n.call("CLUSTER", "MYID") for n in self.nodes]

    def flags_of(self, observer: Node, target: Node) -> set[str]:
        """The flags `observer` shows for `target` in CLUSTER NODES (matched by address,
        so `target` itself need not answer)."""
        for line in observer.call("CLUSTER", "NODES").decode().splitlines():
            fields = line.split()
            if fields[1].endswith(f":{target.port}"):
                return set(fields[2].split(","))
        return set()


def job_with_second_owner(adder: Node, owner: Node, retry: int) -> tuple[bytes, str]:
    """A job added on ``adder`` (REPLICATE 2, RETRY ``retry``) whose other copy is on
    ``owner``: the node picks it at random, so jobs are added (each in a queue of
    its own, the others acknowledged) until one is. Its ID and queue."""
    owner_id = owner.call("CLUSTER", "MYID")
    for attempt in range(40):
        queue = f"owned{attempt}"
        jid = adder.call("ADDJOB", queue, "body", "0", "REPLICATE", "2", "RETRY", str(retry))
        if owner_id in as_dict(adder.call("SHOW", jid))[b"nodes-delivered"]:
            return jid, queue
        adder.call("ACKJOB", jid)  # (its copy elsewhere goes with it)
    raise AssertionError(f"{adder} never picked {owner} in 40 jobs")


def replicates_to_all(node: Node, n: int) -> bool:
    """An ADDJOB REPLICATE n on ``node`` is taken (the probe job acknowledged)."""
    try:
        jid = node.call("ADDJOB", "cluster-ready-probe", "x", "0", "REPLICATE", str(n), "ASYNC")
    except redis.ResponseError:
        return False
    node.call("ACKJOB", jid)
    return True
