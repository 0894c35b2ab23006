"""Membership and failure detection: who is in the cluster, gossip, PING/PONG,
PFAIL and FAIL (Disque's cluster.c, the part before the jobs).

Each PING and PONG carries a few other nodes and their flags (gossip), so a
node met by one is soon known to all. Whom to ping, and when a node is PFAIL
or FAIL, is the failure detector's (cluster/detector.py, sans-IO): one member
probed a protocol period, others asked to probe it (PROBE, PROBED) when it
does not answer, failure reports relayed in REPORTS between nodes of ours,
Disque's PINGs and FAIL messages toward Disque nodes. This module feeds it
what arrives and the time, and sends what it asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms, pick
from disque_server.cluster import detector as detector_mod
from disque_server.cluster.dialect import SERIALIZED_JOBS
from disque_server.cluster.node import (
    C_NODE,
    FAIL,
    FAILING,
    HANDSHAKE,
    LEAVING,
    OURS,
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
    """New nodes are added; a node the sender flags failing is the sender's report
    (the failure detector counts them), one it does not withdraws it."""
    now = now_ms()
    nodes = cluster.nodes
    detector = cluster.detector
    watched = detector.watch
    said: list[tuple[bytes, int, list[tuple[bytes, int]]]] = []
    for i in range(0, len(payload) - 3, 4):
        node_id = payload[i]
        node = nodes.get(node_id)
        if node is None:
            gossip_about_new(cluster, payload[i + 1], payload[i + 2], node_id, now)
            continue
        flags = payload[i + 3]
        if flags != b"-" and (b"pfail" in flags or b"fail" in flags):
            said.append((node_id, detector_mod.PFAIL, [(sender.id, 0)]))
        elif node_id in watched:
            said.append((node_id, detector_mod.ALIVE, []))
    if said:
        detector.on_gossip(sender.id, said, now)
        flush(cluster, now)


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
    """The failure detector's tick (cluster/detector.py: one member probed a
    period, whatever the cluster's size), and, once a period, the links: a
    handshake that never completed is dropped, a node without a link is
    connected again, a link whose PING went unanswered for half the node
    timeout is closed and made again (as Disque's cron does), and a Disque node
    quiet for half the node timeout is probed (Disque expects that PING)."""
    detector = cluster.detector
    timeout = cluster.server.config["cluster-node-timeout"]
    if detector.timeout != timeout:
        detector.set_timeout(timeout)
    if now >= cluster.next_link_check:
        cluster.next_link_check = now + min(1000, detector.period)
        check_links(cluster, now, timeout)
    detector.tick(now)
    flush(cluster, now)


def check_links(cluster: Cluster, now: int, timeout: int) -> None:
    detector = cluster.detector
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
        elif node.ping_sent and now - node.ping_sent > timeout // 2:
            # No PONG for half the node timeout: the link may be dead while TCP
            # still retries; drop it and connect again.
            node.link.close()
            node.link = None
            node.ping_sent = 0
        elif node.kind == C_NODE and now - node.last_seen >= timeout // 2:
            detector.probe_member(node.id, now)


def flush(cluster: Cluster, now: int) -> None:
    """Send what the failure detector asks for; act on the states it changed."""
    detector = cluster.detector
    if detector.out:
        for kind, to, about in detector.take_output():
            if kind == detector_mod.PING:
                ping(cluster, to, now)
            elif kind == detector_mod.REPORT:
                node = cluster.nodes.get(to)
                if node is not None:
                    send_reports(cluster, node, now)
            else:
                mtype = b"PROBE" if kind == detector_mod.PROBE else b"PROBED"
                cluster.send_to_id(to, mtype, [about])
    if detector.changes:
        for node_id, state in detector.take_changes():
            node = cluster.nodes.get(node_id)
            if node is not None:
                set_state(cluster, node, state)
        cluster.failing_known = any(m.state for m in detector.watch.values())
    if detector.declared:
        for node_id in detector.take_declared():
            cluster.server.log.notice(
                "Marking node %s as failing (quorum reached)", node_id[:8].decode()
            )
            cluster.broadcast(b"FAIL", [node_id])  # (as Disque: we counted the majority)
    # A probe answered, a suspicion or a report: an idle node's next tick follows
    # the detector's next work (Server.cron_period).
    detector.answered = False
    cluster.server.hooks.next_tick_changed()


def ping(cluster: Cluster, node_id: bytes, now: int) -> None:
    """A probe: PING with gossip, and to a node of ours the failure reports."""
    node = cluster.nodes.get(node_id)
    if node is None or node.link is None:
        return  # (unanswered: the detector sees to it)
    cluster.send(node, b"PING", gossip_payload(cluster, node))
    if not node.ping_sent:
        node.ping_sent = now
    send_reports(cluster, node, now)


def send_reports(cluster: Cluster, node: ClusterNode, now: int) -> None:
    """REPORTS (beyond Disque, to nodes of ours): the failing members' reporters and
    their ages, relayed from node to node, so a majority's reports meet without
    each reporter telling every node."""
    if node.kind != OURS or not cluster.detector.watch:
        return
    entries = cluster.detector.gossip(now)
    if entries:
        cluster.send(node, b"REPORTS", reports_payload(entries))


def reports_payload(entries: list[tuple[bytes, int, list[tuple[bytes, int]]]]) -> list[bytes]:
    """Per member: its ID, its state here, the number of reports, then each
    reporter's ID and the report's age in ms."""
    payload: list[bytes] = []
    for node_id, state, reports in entries:
        payload += [node_id, b"%d" % state, b"%d" % len(reports)]
        for reporter, age in reports:
            payload += [reporter, b"%d" % age]
    return payload


def parse_reports(payload: list[bytes]) -> list[tuple[bytes, int, list[tuple[bytes, int]]]]:
    """REPORTS' payload back (ValueError, IndexError: a malformed one)."""
    entries = []
    i = 0
    while i < len(payload):
        node_id, state, count = payload[i], int(payload[i + 1]), int(payload[i + 2])
        if state not in (detector_mod.ALIVE, detector_mod.PFAIL, detector_mod.FAIL):
            raise ValueError(f"state {state}")
        pairs = payload[i + 3 : i + 3 + 2 * count]
        if len(pairs) != 2 * count:
            raise IndexError("reports cut short")
        reports = [(pairs[j], int(pairs[j + 1])) for j in range(0, len(pairs), 2)]
        entries.append((node_id, state, reports))
        i += 3 + 2 * count
    return entries


def set_state(cluster: Cluster, node: ClusterNode, state: int) -> None:
    """The detector's verdict, as the node's flags (CLUSTER NODES, HELLO, gossip)."""
    flags = node.flags
    short = node.id[:8].decode()
    cluster.candidates_stale = True
    if state == detector_mod.ALIVE:
        if flags & FAILING:
            flags -= FAILING
            cluster.server.log.notice("Node %s is reachable again", short)
    elif state == detector_mod.PFAIL:
        flags.add(PFAIL)
        cluster.server.log.notice("Node %s is possibly failing (PFAIL)", short)
    else:
        flags.discard(PFAIL)
        flags.add(FAIL)
        cluster.server.log.notice("Node %s is failing (FAIL)", short)


def sync_members(cluster: Cluster) -> None:
    """The detector's members: every node past its handshake but this one (a
    membership change: cluster.membership_changed)."""
    detector = cluster.detector
    detector.me = cluster.myself.id
    known = set()
    for node in cluster.nodes.values():
        if node is not cluster.myself and HANDSHAKE not in node.flags:
            known.add(node.id)
            detector.add(node.id, node.kind == OURS)
    for node_id in [m for m in detector.members if m not in known]:
        detector.remove(node_id)


def pong_header(cluster: Cluster) -> list[bytes]:
    """PONG's header, whose sender-flags say what this node reads beyond the first
    version of our bus (dialect.SERIALIZED_JOBS), unless it is leaving: a node of
    ours before that word knows only "leaving" there, and it must still see it."""
    header = cluster.header(b"PONG")
    if not cluster.leaving:
        header[3] = SERIALIZED_JOBS
    return header


def on_meet(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    if node.ip == "" and link.peer_ip:
        node.ip = link.peer_ip
    link.send(pong_header(cluster) + gossip_payload(cluster, node))
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)
    if node.link is None:
        cluster.connect(node)


def on_ping(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    link.send(pong_header(cluster) + gossip_payload(cluster, node))
    send_reports(cluster, node, now_ms())
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)


def on_pong(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    node.pong_received = now_ms()
    node.ping_sent = 0
    learn_tls_port(cluster, node, payload)
    process_gossip(cluster, node, payload)


def on_fail(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    now = now_ms()
    cluster.detector.on_fail(payload[0], now)
    flush(cluster, now)


def on_probe(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """A node of ours could not reach ``payload[0]``: we probe it for them."""
    now = now_ms()
    cluster.detector.on_probe(node.id, payload[0], now)
    flush(cluster, now)


def on_probed(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    now = now_ms()
    cluster.detector.on_probed(node.id, payload[0], now)
    flush(cluster, now)


def on_reports(cluster: Cluster, node: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    now = now_ms()
    cluster.detector.on_gossip(node.id, parse_reports(payload), now)
    flush(cluster, now)


HANDLERS: Final[dict[bytes, Handler]] = {
    b"MEET": on_meet,
    b"PING": on_ping,
    b"PONG": on_pong,
    b"FAIL": on_fail,
    b"PROBE": on_probe,
    b"PROBED": on_probed,
    b"REPORTS": on_reports,
}
