"""This node's view of the cluster.

For now the node is a cluster of one: it has its identity (a 40 hex digit
node ID created at first start and kept in ``cluster-config-file``), the
LEAVING flag, and no-op hooks where the cluster state machine
(replication, QUEUED/WILLQUEUE, ACK GC, federation) plugs in.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from disque_server.config import atomic_write

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.job import Job
    from disque_server.server import Server


class ClusterNode:
    __slots__ = ("id", "ip", "port", "flags", "ping_sent", "pong_received", "link")

    def __init__(self, node_id: bytes, ip: str = "", port: int = 0) -> None:
        self.id = node_id
        self.ip = ip
        self.port = port
        self.flags: set[str] = set()
        self.ping_sent = 0
        self.pong_received = 0
        self.link = None


def new_node_id() -> bytes:
    return os.urandom(20).hex().encode()


class Cluster:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.config_path = os.path.join(server.config["dir"], server.config["cluster-config-file"])
        self.myself = ClusterNode(self.load_or_create_id(), "", server.config["port"])
        self.myself.flags.add("myself")
        self.myself_only = (self.myself.id,)   # shared by every job created here
        self.nodes: dict[bytes, ClusterNode] = {self.myself.id: self.myself}
        self.leaving = False
        self.messages_sent = 0
        self.messages_received = 0

    # ---- identity and nodes.conf ---------------------------------------------------
    def load_or_create_id(self) -> bytes:
        try:
            with open(self.config_path, "rb") as f:
                for line in f.read().splitlines():
                    fields = line.split()
                    if len(fields) >= 3 and b"myself" in fields[2].split(b","):
                        return fields[0]
        except FileNotFoundError:
            pass
        node_id = new_node_id()
        self.save_config(node_id)
        return node_id

    def save_config(self, node_id: bytes | None = None) -> None:
        """Write nodes.conf atomically (temp file, fsync, rename)."""
        if node_id is None:
            text = self.nodes_description()
        else:
            text = f"{node_id.decode()} :{self.server.config['port']} myself 0 0 connected\n"
        text += f"vars leaving {'yes' if getattr(self, 'leaving', False) else 'no'}\n"
        try:
            atomic_write(self.config_path, text)
        except OSError as exc:
            self.server.log.warning("Could not save the cluster config %s: %s", self.config_path, exc)

    # ---- views -------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def reachable_count(self) -> int:
        """Other nodes we can currently talk to."""
        return sum(1 for n in self.nodes.values()
                   if n is not self.myself and not n.flags & {"pfail", "fail"} and n.link)

    def priority(self, node: ClusterNode) -> int:
        if "leaving" in node.flags or (node is self.myself and self.leaving):
            return 100
        if node.flags & {"pfail", "fail"}:
            return 10
        if node is not self.myself and node.link is None:
            return 5
        return 1

    def hello_entries(self) -> list[list[bytes]]:
        return [[n.id, n.ip.encode(), str(n.port).encode(), str(self.priority(n)).encode()]
                for n in self.nodes.values()]

    def node_flags(self, node: ClusterNode) -> str:
        flags = [f for f in ("myself", "pfail", "fail", "leaving", "handshake", "noaddr")
                 if f in node.flags or (f == "leaving" and node is self.myself and self.leaving)]
        return ",".join(flags) or "noflags"

    def nodes_description(self) -> str:
        lines = []
        for n in self.nodes.values():
            addr = f"{n.ip}:{n.port}"
            link = "connected" if n is self.myself or n.link else "disconnected"
            lines.append(f"{n.id.decode()} {addr} {self.node_flags(n)} "
                         f"{n.ping_sent} {n.pong_received} {link}")
        return "\n".join(lines) + "\n"

    def info(self) -> str:
        return (f"cluster_state:ok\r\ncluster_known_nodes:{self.size}\r\n"
                f"cluster_reachable_nodes:{self.reachable_count}\r\n"
                f"cluster_size:{self.size}\r\n"
                f"cluster_stats_messages_sent:{self.messages_sent}\r\n"
                f"cluster_stats_messages_received:{self.messages_received}\r\n")

    # ---- membership -------------------------------------------------------------
    def meet(self, ip: str, port: int) -> str | None:
        """CLUSTER MEET: an error text, or None when the handshake started."""
        return "ERR This node runs without a cluster bus: CLUSTER MEET is not available yet"

    def forget(self, node_id: bytes) -> None:
        self.nodes.pop(node_id, None)
        self.save_config()

    # ---- leaving -----------------------------------------------------------------
    def set_leaving(self, leaving: bool) -> None:
        self.leaving = leaving
        self.save_config()
        if leaving:
            self.server.reject_blocked_getjob_leaving()

    # ---- reset -------------------------------------------------------------------
    def reset(self, hard: bool) -> None:
        """CLUSTER RESET: forget every other node and every job; HARD: new ID."""
        self.server.flush_all()
        self.nodes = {self.myself.id: self.myself}
        if hard:
            del self.nodes[self.myself.id]
            self.myself.id = new_node_id()
            self.nodes[self.myself.id] = self.myself
            self.myself_only = (self.myself.id,)
        self.save_config()

    # ---- the cluster state machine hooks (single node: nothing to tell) -----------
    def broadcast_queued(self, job: Job, nack: bool) -> None:
        pass

    def send_willqueue(self, job: Job) -> None:
        pass

    def broadcast_working(self, job: Job) -> None:
        pass

    def broadcast_pause(self, queue: bytes, flags: int) -> None:
        pass

    def start_gc(self, job: Job) -> None:
        pass

    def send_deljob(self, job: Job, node_ids: list[bytes] | None = None) -> None:
        pass

    def need_jobs(self, queue: bytes) -> None:
        pass

    def broadcast_deljob_unknown(self, job_id: bytes) -> None:
        pass

    def replicate_new_job(self, client: Client, job: Job, additional: int, timeout_ms: int,
                          asynchronous: bool, extrepl: bool) -> None:
        raise NotImplementedError("replication needs the cluster bus")

    def uptime_ms(self) -> int:
        return int(time.time() * 1000)
