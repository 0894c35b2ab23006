"""Membership and failure detection: who is in the cluster, gossip, PING/PONG,
PFAIL and FAIL (Disque's cluster.c, the part before the jobs).

Each PING and PONG carries a few other nodes and their flags (gossip), so a
node met by one is soon known to all; a node heard from by nobody for the node
timeout is PFAIL here, and FAIL once a majority reports it so (``check_fail``),
then everywhere (the FAIL message). The cron (``cron``) decides whom to ping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms, pick
from disque_server.cluster.node import (
    FAIL,
    FAILING,
    HANDSHAKE,
    LEAVING,
    PFAIL,
    ClusterNode,
    parse_port_field,
    valid_ip,
    valid_node_id,
    valid_port,
)

if TYPE_CHECKING:
    from disque_server.cluster import Cluster, Handler
    from disque_server.cluster.bus import BusLink

GOSSIP_ENTRIES: Final = 10


def gossipable(node: ClusterNode) -> bool:
    """A node gossip can tell others about: with an address, past its handshake."""
    return bool(node.ip) and HANDSHAKE not in node.flags


GOSSIP_FLAGS: Final = (FAIL, LEAVING, PFAIL)  # in the order gossip lists them


def gossip_flags(node: ClusterNode) -> bytes:
    """The flags gossip carries (failing, leaving) as "a,b", or "-" for none."""
    if not node.flags:
        return b"-"
    return ",".join(f for f in GOSSIP_FLAGS if f in node.flags).encode() or b"-"


def port_field(node: ClusterNode) -> bytes:
    """A node's ports in gossip: as Disque's (the port) unless its bus port is not
    port + 10000; nodes that do not know the @ form skip such an entry."""
    return b"%d@%d" % (node.port, node.cport) if node.cport else b"%d" % node.port


def gossip_payload(cluster: Cluster, target: ClusterNode) -> list[bytes]:
    """A few other nodes we know, with their flags: spreads membership and failures.
    GOSSIP_ENTRIES picked at random, plus every node we see failing (as Redis
    Cluster does), so that failure reports reach a majority quickly.

    One more element after the entries: our own TLS client port (0 for
    none), so HELLO over TLS can list every node's TLS port."""
    known = list(cluster.nodes.values())
    picked = pick(known, GOSSIP_ENTRIES + 2)
    others = [n for n in picked if n is not target and gossipable(n)][:GOSSIP_ENTRIES]
    if len(others) < GOSSIP_ENTRIES and len(picked) < len(known):
        # Many in handshake: pick among those that can be told about.
        others = pick([n for n in known if n is not target and gossipable(n)], GOSSIP_ENTRIES)
    if cluster.failing_known:
        others += [n for n in known if n.flags & FAILING and n not in others]
    payload: list[bytes] = []
    for n in others:
        payload += [n.id, n.ip.encode(), port_field(n), gossip_flags(n)]
    payload.append(b"%d" % cluster.myself.tls_port)
    payload += cluster.announced
    return payload


def learn_tls_port(cluster: Cluster, sender: ClusterNode, payload: list[bytes]) -> None:
    """The elements after the gossip entries: the TLS port, then, from a node that
    announces its address (NAT), its IP (empty: the one we see) and bus port."""
    extra = len(payload) % 4
    if extra in (1, 3):
        port = payload[-extra]
        sender.tls_port = int(port) if port != b"0" and valid_port(port) else 0
    if extra == 3:
        cluster.learn_announced(sender, payload[-2], payload[-1])


def process_gossip(cluster: Cluster, sender: ClusterNode, payload: list[bytes]) -> None:
    now = now_ms()
    nodes = cluster.nodes
    for i in range(0, len(payload) - 3, 4):
        node_id = payload[i]
        node = nodes.get(node_id)
        if node is None:
            gossip_about_new(cluster, payload[i + 1], payload[i + 2], node_id, now)
            continue
        if node is cluster.myself:
            continue
        flags = payload[i + 3]
        if flags != b"-" and (b"pfail" in flags or b"fail" in flags):
            node.fail_reports[sender.id] = now
        elif node.fail_reports:
            node.fail_reports.pop(sender.id, None)


def gossip_about_new(cluster: Cluster, ip: bytes, port: bytes, node_id: bytes, now: int) -> None:
    """A node gossip names that we do not know: add it and connect (what peers say
    ends up in nodes.conf, so it is checked first)."""
    ports = parse_port_field(port)
    if (
        ports is None
        or not valid_node_id(node_id)
        or cluster.blacklisted(node_id)
        or not valid_ip(ip)
    ):
        return
    node = ClusterNode(node_id, ip.decode(errors="replace"), *ports)
    node.last_seen = now
    cluster.nodes[node_id] = node
    cluster.server.log.notice("Discovered node %s via gossip", node_id[:8].decode())
    cluster.save_config()
    cluster.connect(node)


def cron(cluster: Cluster, now: int) -> None:
    """The ping schedule: a node is pinged when nothing came from it for half the
    node timeout, or no PONG for twice the timeout; a node we flag PFAIL makes
    us ping every other node at once.

    Disque pings each node whose last PONG is older than half the timeout (so
    both ends of a pair ping each other), and once a second one of five
    random nodes, to keep gossip flowing. Each message is a wake-up of the
    receiving process, which costs a Python process several times what it
    costs C, and an idle cluster's bus is nearly all pings. Here any message
    says its sender is up, so one PING a pair answers for both ends most of
    the time; the PONG rule still tests our own link to every node, less
    often (at the timeout, it had each end ping the other). PFAIL is
    as Disque's: nothing heard for the node timeout. No random pings: what
    they did for failure reports, the pings on a new PFAIL do at once (gossip
    names every failing node), so a majority agrees on FAIL as soon as it
    sees the node failing; membership needs them no more than that (a
    discovered node is linked and pinged at once). An idle bus carries less
    than half of Disque's messages."""
    timeout = cluster.server.config["cluster-node-timeout"]
    ping_after = max(50, timeout // 2)
    new_pfail = False
    failing = 0
    for node in list(cluster.nodes.values()):
        if node is cluster.myself:
            continue
        if HANDSHAKE in node.flags:
            if now - node.ctime > max(timeout, 2000):
                cluster.drop(node)
                continue
        if node.link is None:
            if not node.connecting and now - node.connect_attempt >= min(1000, timeout // 2):
                cluster.connect(node)
        elif node.ping_sent:
            if now - node.ping_sent > timeout // 2:
                # No PONG for half the node timeout: the link may be dead while TCP
                # still retries; drop it and connect again (as Disque's cron does).
                node.link.close()
                node.link = None
                node.ping_sent = 0
        elif HANDSHAKE not in node.flags and (
            now - node.last_seen >= ping_after or now - node.pong_received >= 2 * timeout
        ):
            ping(cluster, node, now)
        if HANDSHAKE in node.flags:
            continue
        if now - node.last_seen > timeout and not node.flags & FAILING:
            node.flags.add(PFAIL)
            cluster.candidates_stale = True
            new_pfail = True
            cluster.server.log.notice("Node %s is possibly failing (PFAIL)", node.id[:8].decode())
        if node.flags & FAILING:
            failing += 1
            if FAIL not in node.flags:
                check_fail(cluster, node, now, timeout)
    cluster.failing_known = failing > 0
    if new_pfail:
        ping_all(cluster, now)


def ping(cluster: Cluster, node: ClusterNode, now: int) -> None:
    if cluster.send(node, b"PING", gossip_payload(cluster, node)):
        node.ping_sent = now


def ping_all(cluster: Cluster, now: int) -> None:
    """A PING to every node we can ping now: our failure reports, at once."""
    for node in list(cluster.nodes.values()):
        if (
            node is not cluster.myself
            and node.link is not None
            and not node.ping_sent
            and not node.flags & FAILING
            and HANDSHAKE not in node.flags
        ):
            ping(cluster, node, now)


def check_fail(cluster: Cluster, node: ClusterNode, now: int, timeout: int) -> None:
    """PFAIL becomes FAIL when a majority of the nodes sees it failing."""
    reports = sum(1 for t in node.fail_reports.values() if now - t <= timeout * 2)
    if reports + 1 >= cluster.size // 2 + 1:
        node.flags.discard(PFAIL)
        node.flags.add(FAIL)
        cluster.candidates_stale = True
        cluster.server.log.notice(
            "Marking node %s as failing (quorum reached)", node.id[:8].decode()
        )
        cluster.broadcast(b"FAIL", [node.id])


def on_meet(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    if node.ip == "" and link.peer_ip:
        node.ip = link.peer_ip
    link.send(cluster.header(b"PONG") + gossip_payload(cluster, node))
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)
    if node.link is None:
        cluster.connect(node)


def on_ping(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    link.send(cluster.header(b"PONG") + gossip_payload(cluster, node))
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)


def on_pong(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    node.pong_received = now_ms()
    node.ping_sent = 0
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)


def on_fail(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    failing = cluster.nodes.get(payload[0])
    if failing is not None and failing is not cluster.myself and not failing.flags & {FAIL}:
        failing.flags.discard(PFAIL)
        failing.flags.add(FAIL)
        cluster.candidates_stale = True


HANDLERS: Final[dict[bytes, Handler]] = {
    b"MEET": on_meet,
    b"PING": on_ping,
    b"PONG": on_pong,
    b"FAIL": on_fail,
}
