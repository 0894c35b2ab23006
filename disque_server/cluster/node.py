"""A node of the cluster as this node sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from disque_server.cluster.bus import BusLink

PFAIL: Final = "pfail"
FAIL: Final = "fail"
LEAVING: Final = "leaving"
HANDSHAKE: Final = "handshake"
MYSELF: Final = "myself"


class ClusterNode:
    __slots__ = (
        "id",
        "ip",
        "port",
        "cport",
        "tls_port",
        "flags",
        "ping_sent",
        "pong_received",
        "last_seen",
        "link",
        "connecting",
        "fail_reports",
        "ctime",
        "connect_attempt",
        "kind",
    )

    def __init__(self, node_id: bytes, ip: str = "", port: int = 0, cport: int = 0) -> None:
        self.id = node_id
        self.ip = ip
        self.port = port
        self.cport = cport  # its cluster bus port, when not port + 10000 (0: that)
        self.tls_port = 0  # its TLS client port, from its own PING/PONG (0: none)
        self.flags: set[str] = set()
        self.ping_sent = 0  # ms; an unanswered PING was sent then (0: none)
        self.pong_received = 0  # ms; last PONG
        self.last_seen = 0  # ms; last message of any kind
        self.link: BusLink | None = None  # our outbound connection to it
        self.connecting = False
        self.connect_attempt = 0
        self.fail_reports: dict[bytes, int] = {}  # reporter id -> ms
        self.ctime = 0
        self.kind = 0  # which bus it speaks: dialect.UNKNOWN, C_NODE or OURS

    @property
    def failing(self) -> bool:
        return PFAIL in self.flags or FAIL in self.flags

    @property
    def bus_port(self) -> int:
        return self.cport or self.port + 10000

    @property
    def address(self) -> str:
        """ip:port, and @busport when the bus port is not port + 10000 (as Redis')."""
        return f"{self.ip}:{self.port}" + (f"@{self.cport}" if self.cport else "")

    def __repr__(self) -> str:
        return f"<ClusterNode {self.id[:8].decode()} {self.ip}:{self.port} {sorted(self.flags)}>"
