"""A node of the cluster as this node sees it."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from disque_server.cluster.bus import BusLink

PFAIL: Final = "pfail"
FAIL: Final = "fail"
LEAVING: Final = "leaving"
HANDSHAKE: Final = "handshake"
MYSELF: Final = "myself"

# Which bus a node speaks (ClusterNode.kind; dialect.py translates).
UNKNOWN: Final = 0
C_NODE: Final = 1  # Disque 1.0-rc1's clusterMsg
OURS: Final = 2

# ---- validating what peers say (IDs, addresses and ports end up in nodes.conf) ----------
_HEX_DIGITS: Final = frozenset(b"0123456789abcdef")
FAILING: Final = frozenset((PFAIL, FAIL))
NOT_CANDIDATE: Final = frozenset((PFAIL, FAIL, HANDSHAKE, LEAVING))


def valid_node_id(node_id: bytes) -> bool:
    return len(node_id) == 40 and _HEX_DIGITS.issuperset(node_id)


def valid_port(port: bytes) -> bool:
    """A client port whose bus port (port + 10000) exists too."""
    return port.isdigit() and len(port) <= 5 and 0 < int(port) <= 55535


def parse_port_field(field: bytes) -> tuple[int, int] | None:
    """``port`` or ``port@busport`` (a bus port other than port + 10000): the client
    port and the bus port (0 for port + 10000), or None when invalid."""
    port, at, bus = field.partition(b"@")
    if not valid_port(port):
        return None
    if not at:
        return int(port), 0
    if not bus.isdigit() or len(bus) > 5 or not 0 < int(bus) < 65536:
        return None
    return int(port), (0 if int(bus) == int(port) + 10000 else int(bus))


def valid_ip(ip: bytes) -> bool:
    try:
        ipaddress.ip_address(ip.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return False
    return True


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
        self.ctime = 0
        self.kind = UNKNOWN  # which bus it speaks: UNKNOWN, C_NODE or OURS (dialect.py)

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
