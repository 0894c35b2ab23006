"""This node's view of the cluster: its nodes, nodes.conf, links, dispatch.

The node ID (40 hex digits) is created at first start and kept with the
known peers in ``cluster-config-file`` (rewritten atomically), so a
restarted node rejoins by itself. The job side of the Disque state machine
lives in sibling modules, one per part of the README:

- ``membership``   MEET PING PONG FAIL, gossip: who is up (PFAIL, FAIL)
- ``replication``  REPLJOB GOTJOB ENQUEUE: synchronous/async replication
- ``requeue``      WILLQUEUE QUEUED WORKING: one re-queue, not one per owner
- ``gc``           SETACK GOTACK DELJOB: acknowledgement garbage collection
- ``federation``   NEEDJOBS YOURJOBS ENOUGHJOBS PAUSE: moving jobs to where consumers are
- ``demand``       which other nodes' clients wait on which queues
- ``bus``          framing and links (jobs on the wire: ``job.job_to_fields``)
- ``dialect``      Disque 1.0-rc1 nodes on the same bus (``clustermsg``: its format)
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, cast

from disque_server import tls
from disque_server.clock import now_ms
from disque_server.cluster import dialect, federation, gc, membership, replication, requeue
from disque_server.cluster.bus import BusLink
from disque_server.cluster.demand import Demand
from disque_server.cluster.detector import Detector
from disque_server.cluster.node import (
    C_NODE,
    FAIL,
    FAILING,
    HANDSHAKE,
    LEAVING,
    MYSELF,
    NOT_CANDIDATE,
    OURS,
    PFAIL,
    ClusterNode,
    parse_port_field,
    valid_ip,
    valid_node_id,
    valid_port,
)
from disque_server.config import Config, ConfigError, atomic_write
from disque_server.job import Job, job_to_fields
from disque_server.listener import as_protocol
from disque_server.resp import bulk_array
from disque_server.serialize import serialize_job

if TYPE_CHECKING:
    from disque_server.state import NodeState

FORGET_BLACKLIST_MS: Final = 60_000
RECONNECT_ON_MESSAGE_MS: Final = 100  # a node we hear from but have no link to: retry this often
REACH_AT_START_S: Final = 0.5  # how long a starting node waits for its links to its peers

Handler = Callable[["Cluster", ClusterNode, BusLink, list[bytes]], None]


def new_node_id() -> bytes:
    return os.urandom(20).hex().encode()


class Cluster:
    def __init__(self, server: NodeState) -> None:
        self.server = server
        self.config_path = os.path.join(server.config["dir"], server.config["cluster-config-file"])
        self.nodes: dict[bytes, ClusterNode] = {}
        # replication_candidates, made again when stale (membership or flags changed)
        self.candidates: list[ClusterNode] = []
        self.candidates_stale = True
        # The few candidates this cron tick's new jobs are replicated to
        # (replication.candidates), drawn again each tick.
        self.replica_window: list[ClusterNode] = []
        self.leaving = False
        # Who is probed when, PFAIL and FAIL (sans-IO: membership.py feeds it).
        self.detector = Detector(b"", server.config["cluster-node-timeout"])
        self.next_link_check = 0  # ms; membership.check_links
        self.myself = ClusterNode(b"", "", server.config["port"])
        self.myself.flags.add(MYSELF)
        self.bus_port = self.announce_address(server.config)
        self.myself.tls_port = server.config["tls-port"]  # startup-only: fixed here
        self.load_config()
        # Shared by every job created here. A variable-length tuple type: mypyc keeps
        # a fixed-length tuple (tuple[bytes]) unboxed and boxes a new one at each read.
        self.myself_only: tuple[bytes, ...] = (self.myself.id,)
        self.inbound: set[BusLink] = set()
        self.connecting_tasks: set[asyncio.Task[None]] = set()  # (kept: a task is weak)
        self.blacklist: dict[bytes, int] = {}
        self.messages_sent = 0
        self.messages_received = 0
        self.received_by_type: defaultdict[bytes, int] = defaultdict(int)  # (known types)
        self.bus_servers: list[asyncio.AbstractServer] = []
        self.ssl_server: ssl.SSLContext | None = None  # tls-cluster
        self.ssl_client: ssl.SSLContext | None = None
        self.replications: dict[bytes, replication.Replication] = {}
        self.refills: dict[bytes, federation.Refill] = {}  # queue -> refill asked on drain
        # Who wants which queue's jobs (federation.push_jobs); the queues test it.
        self.demand = Demand()
        server.queues.wanted_elsewhere = self.demand.by_queue
        # Queues whose clients wait here, announced to the others: queue -> when one
        # last waited, ms (federation.need_jobs, withdraw_demand).
        self.waiting: dict[bytes, int] = {}
        self.collected = gc.Collected()  # acknowledged jobs deleted lately (stray copies)
        self.repljob_messages = dialect.RepljobMessages()  # REPLJOBs to C nodes
        self.failing_known = False  # some node flagged PFAIL or FAIL (cron): gossip names it

    # ---- nodes.conf -------------------------------------------------------------
    def load_config(self) -> None:
        """Read our ID and the known peers; create an ID on first start."""
        try:
            with open(self.config_path, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            fields = line.split()
            if fields[:2] == [b"vars", b"leaving"] and len(fields) > 2:
                self.leaving = fields[2] == b"yes"
                continue
            if len(fields) < 3 or not valid_node_id(fields[0]):
                continue
            flags = fields[2].split(b",")
            if b"myself" in flags:
                self.myself.id = fields[0]
                continue
            host, _, port = fields[1].rpartition(b":")
            ports = parse_port_field(port)
            if valid_ip(host) and ports is not None:
                node = ClusterNode(fields[0], host.decode(), *ports)
                node.last_seen = now_ms()
                self.nodes[node.id] = node
        if not self.myself.id:
            self.myself.id = new_node_id()
        self.nodes[self.myself.id] = self.myself
        self.membership_changed()
        if not lines:  # a new node: refused if it cannot keep its ID (as Disque)
            self.save_config(strict=True)

    def save_config(self, strict: bool = False) -> None:
        """Write nodes.conf atomically (temp file, fsync, rename).

        Called after every membership change, so it also refreshes the size. A
        write that fails is logged; ``strict`` (a new node's first write): refused."""
        self.membership_changed()
        text = self.nodes_description(for_config=True)
        text += f"vars leaving {'yes' if self.leaving else 'no'}\n"
        try:
            atomic_write(self.config_path, text)
        except OSError as exc:
            if strict:
                reason = exc.strerror or exc
                message = f"Can't write the cluster config {self.config_path}: {reason}"
                raise ConfigError(message) from None
            self.server.log.warning(
                "Could not save the cluster config %s: %s", self.config_path, exc
            )

    # ---- containers and NAT: what this node tells others (beyond Disque) ---------------
    def announce_address(self, config: Config) -> int:
        """Set what HELLO, CLUSTER NODES and the bus say of this node, as Redis 7's
        cluster-announce-* directives; return the bus port to listen on."""
        bus_port = config["cluster-port"] or config["port"] + 10000
        me = self.myself
        me.ip = config["cluster-announce-ip"]
        me.port = config["cluster-announce-port"] or config["port"]
        announced_bus = config["cluster-announce-bus-port"] or bus_port
        me.cport = 0 if announced_bus == me.port + 10000 else announced_bus
        # Said after the TLS port in MEET/PING/PONG only when there is news in it.
        self.announced = [me.ip.encode(), b"%d" % announced_bus] if me.ip or me.cport else []
        return bus_port

    def learn_announced(self, sender: ClusterNode, ip: bytes, bus_port: bytes) -> None:
        """A peer's own word on its address (it is behind NAT): it wins over what we see."""
        ports = parse_port_field(b"%d@%s" % (sender.port, bus_port))
        changed = False
        if ip and valid_ip(ip) and ip.decode() != sender.ip:
            sender.ip = ip.decode()
            changed = True
        if ports is not None and ports[1] != sender.cport:
            sender.cport = ports[1]
            changed = True
        if changed and HANDSHAKE not in sender.flags:
            self.save_config()

    # ---- the bus ---------------------------------------------------------------------
    async def start_bus(self, hosts: list[str | None]) -> None:
        loop = self.server.loop
        config = self.server.config
        if self.bus_port > 65535:  # (port + 10000, no cluster-port: as Disque, refused)
            raise ConfigError(
                "Disque port number too high. Cluster communication port is 10,000 port "
                "numbers higher than your Disque node port. Your Disque node port number "
                "must be lower than 55535 (or set cluster-port)."
            )
        if config["tls-cluster"]:
            self.ssl_server = tls.server_context(config, for_bus=True)
            self.ssl_client = tls.bus_client_context(config)
        for host in hosts:
            try:
                srv = await loop.create_server(
                    lambda: as_protocol(BusLink(self)),
                    host,
                    self.bus_port,
                    reuse_address=True,
                    ssl=self.ssl_server,
                )
            except OSError:
                if host == "::1":
                    continue
                raise
            self.bus_servers.append(srv)
        await self.reach_known_nodes()

    async def reach_known_nodes(self) -> None:
        """At start, before the client port answers: connect to every node nodes.conf
        names, which sends each a PING (a MEET). Its peers then know the node is
        back before anyone can talk to it; waiting for the first cron tick (400 ms
        on an idle node) let a node restarted and killed again at once stay flagged
        failing from its earlier absence, so ADDJOB refused to count it (Disque's
        suite, "Sync REPLJOB messages are retried against old nodes"). A peer that
        does not answer within REACH_AT_START_S is left to the cron."""
        for node in self.nodes.values():
            if node is not self.myself and HANDSHAKE not in node.flags:
                self.connect(node)
        if self.connecting_tasks:
            await asyncio.wait(list(self.connecting_tasks), timeout=REACH_AT_START_S)

    def close(self) -> None:
        for srv in self.bus_servers:
            srv.close()
        for node in self.nodes.values():
            if node.link is not None:
                node.link.close()
        for link in list(self.inbound):
            link.close()

    def connect(self, node: ClusterNode) -> None:
        if node.connecting or node.link is not None or not node.ip:
            return
        node.connecting = True
        node.connect_attempt = now_ms()
        task = self.server.loop.create_task(self._connect(node))
        self.connecting_tasks.add(task)
        task.add_done_callback(self.connecting_tasks.discard)

    async def _connect(self, node: ClusterNode) -> None:
        try:
            bind = self.server.config["bind"].split()
            local = (bind[0], 0) if bind and bind[0] not in ("0.0.0.0", "::", "*") else None
            _, proto = await asyncio.wait_for(
                self.server.loop.create_connection(
                    lambda: as_protocol(BusLink(self, node)),
                    node.ip,
                    node.bus_port,
                    ssl=self.ssl_client,
                    local_addr=local,
                ),
                timeout=2,
            )
        except (TimeoutError, OSError, ssl.SSLError):
            return
        finally:
            node.connecting = False
        link = cast(BusLink, proto)
        if self.nodes.get(node.id) is not node:  # forgotten meanwhile
            link.close()
            return
        self.link_up(node, link)

    def link_up(self, node: ClusterNode, link: BusLink) -> None:
        """Our link to the node is connected: it becomes the node's, and says hello."""
        node.link = link
        # Which bus the node speaks may have been learned since the link was made
        # (from a message on the node's own link, while this one connected).
        link.write_as(node.kind)
        # MEET makes the peer add us; a peer that already answered us knows us.
        mtype = b"MEET" if HANDSHAKE in node.flags or not node.pong_received else b"PING"
        self.send(node, mtype, membership.gossip_payload(self, node))

    def header(self, mtype: bytes) -> list[bytes]:
        return [
            mtype,
            self.myself.id,
            b"%d" % self.myself.port,
            b"leaving" if self.leaving else b"-",
        ]

    def send(self, node: ClusterNode, mtype: bytes, payload: list[bytes]) -> bool:
        if node.link is None:
            return False
        node.link.send(self.header(mtype) + payload)
        return True

    def send_batched(
        self, node: ClusterNode, mtype: bytes, jid: bytes, value: bytes | None = None
    ) -> None:
        """One item of a message that carries many (see BusLink.send_batched)."""
        if node.link is not None:
            node.link.send_batched(mtype, jid, value)

    def send_batched_to_ids(
        self, ids: Iterable[bytes], mtype: bytes, jid: bytes, value: bytes | None = None
    ) -> None:
        c_messages: list[bytes] = []  # what C nodes read, encoded for the first of them
        c_mark = b""
        for node_id in ids:
            link = self.link_to(node_id)
            if link is None:
                continue
            if not link.speaks_c:
                link.send_batched(mtype, jid, value)
                continue
            if not c_messages or link.mark != c_mark:
                item = [jid] if value is None else [jid, value]
                c_messages = dialect.to_clustermsgs(self.header(mtype) + item, link.mark)
                c_mark = link.mark
            link.send_clustermsgs_encoded(c_messages)

    def send_repljob_to_ids(self, ids: Iterable[bytes], job: Job) -> None:
        """REPLJOB of one job: serialized once as Disque does (serialize_job) for the C
        nodes and the nodes of ours that take it (dialect.SERIALIZED_JOBS), batched
        toward the nodes of ours; as our FIELDS fields to older nodes of ours."""
        serialized = b""
        fields: list[bytes] = []
        c_message = b""
        c_mark = b""
        for node_id in ids:
            link = self.link_to(node_id)
            if link is None:
                continue
            if not serialized and (link.speaks_c or link.takes_serialized_jobs):
                serialized = serialize_job(job, storage=False)
            if link.takes_serialized_jobs and not link.speaks_c:
                link.send_batched(b"REPLJOB", serialized)
            elif not link.speaks_c:
                fields = fields or job_to_fields(job)
                link.send_batched_parts(b"REPLJOB", fields)
            else:
                if not c_message or link.mark != c_mark:
                    me = self.myself
                    c_message = self.repljob_messages.message(
                        me.id, me.port, self.leaving, serialized, link.mark
                    )
                    c_mark = link.mark
                link.send_encoded(c_message)

    def other_owners(self, job: Job) -> list[bytes]:
        """The nodes besides this one that hold a copy of the job."""
        me = self.myself.id
        return [n for n in job.nodes_delivered if n != me]

    def send_to_ids(self, ids: Iterable[bytes], mtype: bytes, payload: list[bytes]) -> None:
        self.send_to_links([self.link_to(node_id) for node_id in ids], mtype, payload)

    def send_to_links(
        self, links: Iterable[BusLink | None], mtype: bytes, payload: list[bytes]
    ) -> None:
        """One message to many links, encoded once for the nodes of ours among them
        (a C node's link translates it)."""
        data = b""
        for link in links:
            if link is None:
                continue
            if link.speaks_c:
                link.send(self.header(mtype) + payload)
                continue
            data = data or bulk_array(self.header(mtype) + payload)
            link.send_encoded(data)

    def send_to_id(self, node_id: bytes, mtype: bytes, payload: list[bytes]) -> bool:
        link = self.link_to(node_id)
        if link is None:
            return False
        link.send(self.header(mtype) + payload)
        return True

    def link_to(self, node_id: bytes) -> BusLink | None:
        """The link to another node, by its ID: None when unknown or not connected."""
        node = self.nodes.get(node_id)
        return node.link if node is not None and node is not self.myself else None

    def broadcast(self, mtype: bytes, payload: list[bytes]) -> None:
        self.send_to_links([node.link for node in self.reachable_nodes()], mtype, payload)

    # ---- receiving -----------------------------------------------------------------
    def handle_message(self, link: BusLink, msg: list[bytes]) -> None:
        node = self.sender_of(link, msg)
        if node is None:
            return
        mtype = msg[0]
        if mtype == b"PONG" and msg[3] == dialect.SERIALIZED_JOBS:
            link.takes_serialized_jobs = True  # (our link to it: PING is answered on it)
        handler = HANDLERS.get(mtype)
        if handler is not None:
            self.received_by_type[mtype] += 1
            try:
                handler(self, node, link, msg[4:])
            except (ValueError, IndexError) as exc:
                self.server.log.verbose(
                    "Bad %s message from %s: %s",
                    mtype.decode(errors="replace"),
                    msg[1][:8].decode(errors="replace"),
                    exc,
                )

    def handle_repljobs(self, link: BusLink, header: list[bytes], jobs: list[Job]) -> None:
        """REPLJOBs of a C node, their jobs deserialized already (dialect.copies)."""
        node = self.sender_of(link, header)
        if node is not None:
            self.received_by_type[b"REPLJOB"] += 1
            for job in jobs:
                replication.keep_copy(self, node, job)

    def sender_of(self, link: BusLink, msg: list[bytes]) -> ClusterNode | None:
        """The node a message (its header: [TYPE, sender-id, port, flags]) comes
        from, what the message says of it noted (seen now, failing no more,
        leaving); None when it is to be ignored, or the link closed."""
        mtype, sender_id, sender_port, sender_flags = msg[0], msg[1], msg[2], msg[3]
        self.messages_received += 1
        if not valid_port(sender_port):
            link.close()
            return None
        node = self.nodes.get(sender_id)
        if node is None:  # (a known ID is a valid one)
            if not valid_node_id(sender_id):
                link.close()
                return None
            node = self.unknown_sender(link, mtype, sender_id, sender_port)
            if node is None:
                return None
        if node.kind != link.peer_kind:
            self.learn_kind(node, link.peer_kind)
        now = now_ms()
        node.last_seen = now
        if node.link is None and now - node.connect_attempt >= RECONNECT_ON_MESSAGE_MS:
            self.connect(node)  # it is up: our replies need our link to it now
        detector = self.detector
        detector.heard_from(sender_id, now)
        if detector.changes or detector.out or detector.answered:  # (a probe answered,
            # it was failing, a probe relayed: a few a period)
            membership.flush(self, now)
        flags = node.flags
        if flags:  # (most messages come from a node with none)
            if sender_flags != b"leaving" and LEAVING in flags:
                flags.discard(LEAVING)
                self.candidates_stale = True
        if sender_flags == b"leaving" and LEAVING not in flags:
            flags.add(LEAVING)
            self.candidates_stale = True
        return node

    def learn_kind(self, node: ClusterNode, kind: int) -> None:
        """A message tells which bus its sender speaks (dialect.py): our link to it
        writes that from now on. A RESP link to a Disque node (a node rolled back
        on its directory) cannot switch: it is closed, the next one speaks C."""
        node.kind = kind
        if node.id in self.detector.members:
            self.detector.add(node.id, kind == OURS)  # (a relay for probes or not)
        link = node.link
        if kind == C_NODE:
            self.server.log.notice(
                "Node %s speaks Disque 1.0-rc1's cluster bus", node.id[:8].decode()
            )
            if link is not None:
                if link.speaks_c:
                    link.mark = b""
                else:
                    link.close()
                    node.link = None
        elif link is not None:
            link.speaks_c = False

    def unknown_sender(
        self, link: BusLink, mtype: bytes, sender_id: bytes, sender_port: bytes
    ) -> ClusterNode | None:
        """Only MEET (or the PONG answering our handshake) introduces a new node."""
        if self.blacklisted(sender_id) or not valid_ip(link.peer_ip.encode()):
            return None
        if mtype == b"PONG" and link.node is not None and HANDSHAKE in link.node.flags:
            node = link.node
            del self.nodes[node.id]
            node.id = sender_id
            node.flags.discard(HANDSHAKE)
            self.candidates_stale = True
            self.nodes[sender_id] = node
            self.server.log.notice("Handshake with node %s completed", sender_id[:8].decode())
            self.save_config()
            return node
        if mtype == b"MEET":
            node = ClusterNode(sender_id, link.peer_ip, int(sender_port))
            node.last_seen = now_ms()
            self.nodes[sender_id] = node
            self.server.log.notice(
                "Node %s (%s:%s) joined the cluster",
                sender_id[:8].decode(),
                link.peer_ip,
                sender_port.decode(),
            )
            self.save_config()
            self.connect(node)
            return node
        return None

    def learn_my_ip(self, ip: str) -> None:
        if not self.myself.ip and ip:
            self.myself.ip = ip
            self.save_config()

    def blacklisted(self, node_id: bytes) -> bool:
        until = self.blacklist.get(node_id)
        if until is None:
            return False
        if until < now_ms():
            del self.blacklist[node_id]
            return False
        return True

    # ---- CLUSTER MEET (the rest of membership: membership.py) ------------------------
    def meet(self, ip: str, port: int, bus_port: int) -> str | None:
        """CLUSTER MEET: start a handshake with the bus at `bus_port`; the peer's real
        ID arrives with its PONG.

        An address held by a live node, or by a handshake under way, is met
        already. One held by a failing node is met again: that node may be gone
        for good, replaced by a new node (a new ID) on the same port, which only
        a handshake finds (as in Redis, the old ID stays until it is forgotten)."""
        for node in self.nodes.values():
            if (
                node.ip == ip
                and node.port == port
                and node is not self.myself
                and not node.flags & FAILING
            ):
                return None
        cport = 0 if bus_port == port + 10000 else bus_port
        node = ClusterNode(b"h" + new_node_id()[1:], ip, port, cport)
        node.flags.add(HANDSHAKE)
        node.ctime = node.last_seen = now_ms()
        self.nodes[node.id] = node
        self.connect(node)
        return None

    def cron(self, now: int) -> None:
        """Membership's pings and failure detection, then replication's and
        federation's timers."""
        membership.cron(self, now)
        replication.cron(self, now)
        federation.cron(self, now)

    def drop(self, node: ClusterNode) -> None:
        self.nodes.pop(node.id, None)
        self.demand.forget_node(node.id)
        self.membership_changed()
        if node.link is not None:
            node.link.close()
            node.link = None

    # ---- views ----------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Known nodes, myself included (handshakes in progress excluded).

        Cached: ADDJOB asks for it several times per job; membership changes
        call ``membership_changed``."""
        return self._size

    def membership_changed(self) -> None:
        self._size = sum(1 for n in self.nodes.values() if HANDSHAKE not in n.flags)
        self.candidates_stale = True
        membership.sync_members(self)

    def reachable_nodes(self) -> list[ClusterNode]:
        """Other nodes we can currently talk to."""
        return [
            n
            for n in self.nodes.values()
            if n is not self.myself
            and n.link is not None
            and not n.failing
            and HANDSHAKE not in n.flags
        ]

    def is_reachable(self, node_id: bytes) -> bool:
        """Whether that other node is one of reachable_nodes() (no list built)."""
        n = self.nodes.get(node_id)
        return (
            n is not None
            and n is not self.myself
            and n.link is not None
            and not n.failing
            and HANDSHAKE not in n.flags
        )

    def replication_candidates(self) -> list[ClusterNode]:
        """Disque's "reachable nodes": every other node not flagged PFAIL, FAIL,
        HANDSHAKE or leaving, linked or not. A node restarted with its nodes.conf
        counts its peers at once; ADDJOB then waits, within its timeout, for
        the links (replication only sends to linked nodes).

        Kept, as Disque's reachable_nodes array, and made again only when a node
        comes or goes or one of those flags changes (``candidates_stale``): an
        ADDJOB reads it, it does not build it. Do not modify the list."""
        if self.candidates_stale:
            self.candidates_stale = False
            self.replica_window = []
            self.candidates = [
                n
                for n in self.nodes.values()
                if n is not self.myself and not n.flags & NOT_CANDIDATE
            ]
        return self.candidates

    def replication_candidates_count(self) -> int:
        """Disque's reachable_nodes_count: also cluster_reachable_nodes (CLUSTER INFO,
        INFO, the metric), the nodes a job can be replicated to, not the links up."""
        return len(self.replication_candidates())

    def priority(self, node: ClusterNode) -> int:
        if LEAVING in node.flags or (node is self.myself and self.leaving):
            return 100
        if node.failing:
            return 10
        if node is not self.myself and node.link is None:
            return 5
        return 1

    def hello_entries(self, tls: bool = False) -> list[list[bytes]]:
        """HELLO's node list; over TLS, the nodes' TLS ports where they have one."""
        return [
            [
                n.id,
                n.ip.encode(),
                b"%d" % (n.tls_port if tls and n.tls_port else n.port),
                b"%d" % self.priority(n),
            ]
            for n in self.nodes.values()
            if HANDSHAKE not in n.flags
        ]

    def node_flags(self, node: ClusterNode, for_config: bool = False) -> str:
        """CLUSTER NODES' flags; in nodes.conf PFAIL is "fail?", as Disque writes it
        and reads it (a node rolled back to Disque on its directory must not stop
        at an unknown flag)."""
        flags: list[str] = [
            ("fail?" if for_config and f == PFAIL else f)
            for f in (MYSELF, PFAIL, FAIL, LEAVING, HANDSHAKE)
            if f in node.flags or (f == LEAVING and node is self.myself and self.leaving)
        ]
        if not node.ip and node is not self.myself:
            flags.append("noaddr")
        return ",".join(flags) or "noflags"

    def nodes_description(self, for_config: bool = False) -> str:
        lines = []
        for n in self.nodes.values():
            if HANDSHAKE in n.flags and for_config:
                continue
            link = "connected" if n is self.myself or n.link else "disconnected"
            lines.append(
                f"{n.id.decode()} {n.address} {self.node_flags(n, for_config)} "
                f"{n.ping_sent} {n.pong_received} {link}"
            )
        return "\n".join(lines) + "\n"

    def info(self) -> str:
        return (
            f"cluster_state:ok\r\ncluster_known_nodes:{self.size}\r\n"
            f"cluster_reachable_nodes:{self.replication_candidates_count()}\r\n"
            f"cluster_size:{self.size}\r\n"
            f"cluster_stats_messages_sent:{self.messages_sent}\r\n"
            f"cluster_stats_messages_received:{self.messages_received}\r\n"
        )

    # ---- admin: FORGET, RESET, LEAVING --------------------------------------------------
    def forget(self, node_id: bytes) -> None:
        node = self.nodes.get(node_id)
        if node is not None:
            self.drop(node)
        self.blacklist[node_id] = now_ms() + FORGET_BLACKLIST_MS
        self.save_config()

    def reset(self, hard: bool) -> None:
        """CLUSTER RESET: forget every other node and every job; HARD: new ID."""
        self.server.jobs.flush_all()
        for node in list(self.nodes.values()):
            if node is not self.myself:
                self.drop(node)
        if hard:
            self.nodes.pop(self.myself.id, None)
            self.myself.id = new_node_id()
            self.myself_only = (self.myself.id,)
            self.nodes[self.myself.id] = self.myself
        self.save_config()

    def set_leaving(self, leaving: bool) -> None:
        self.leaving = leaving
        self.save_config()
        if leaving:
            self.server.hooks.leaving_started()
        for node in self.reachable_nodes():  # tell everybody now, not at the next PING
            self.send(node, b"PING", membership.gossip_payload(self, node))


# ---- message handlers: membership --------------------------------------------------------


HANDLERS: Final[dict[bytes, Handler]] = {
    **membership.HANDLERS,
    **replication.HANDLERS,
    **requeue.HANDLERS,
    **gc.HANDLERS,
    **federation.HANDLERS,
}
