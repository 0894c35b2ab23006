"""The cluster bus: framing and links.

Every node listens on its client port + 10000. Messages are RESP arrays of
bulk strings, parsed with hiredis like client requests::

    [TYPE, sender-id, sender-port, sender-flags, payload ...]

hiredis allocates room for an array as soon as it reads its count, and
anyone who reaches the port can send (no password is needed to be read):
the array headers that could cost something are looked at before hiredis
reads them (``request_reader.RequestReader``, as for client requests), and
a link that sends an array inside a message, or a count out of bounds, is
closed.

``sender-flags`` is ``leaving`` or ``-``: every message carries it, so a
node's LEAVING state spreads as fast as any traffic. A PONG of a node that is
not leaving says ``serialized-jobs`` there instead: what it reads beyond the
first version of our bus (``dialect.SERIALIZED_JOBS``). The message set is the
README's state machine: MEET PING PONG FAIL (membership and failure
detection), REPLJOB GOTJOB ENQUEUE (replication), WILLQUEUE QUEUED WORKING
(re-queue), SETACK GOTACK DELJOB (ACK garbage collection), NEEDJOBS
YOURJOBS PAUSE (federation). Handlers are ``on_<message>`` functions.
REPLJOB, GOTJOB, WORKING, SETACK, GOTACK and DELJOB speak of one job or of
many: what a node says of many jobs in one event-loop pass goes in one message.

A node keeps one outbound link to every other node and writes to it;
it reads from both its outbound links and the inbound connections peers
opened, and answers PING with PONG on the connection the PING came on.

With ``cluster-password`` (beyond Disque) every link starts with a mutual
challenge. Both sides send ``[CHALLENGE, nonce]`` at once. The accepting
side proves first, ``[AUTH, HMAC(password, "A|" + connector nonce + "|" +
acceptor nonce)]``; the connecting side checks it, then proves with role
"C" and the nonces the other way round. Each proof binds the prover's role
and both nonces (one of them its own, random), so a proof obtained from one
link is worthless on another: a node cannot be used as an oracle by
reflecting or relaying its own challenges. Until a peer has proven itself,
nothing it sends is processed (anything but CHALLENGE/AUTH closes the link)
and nothing but our own proof is sent to it.

Disque 1.0-rc1's nodes speak the binary ``clusterMsg`` instead: a link reads
it when it starts with ``D`` (its signature, "DbuZ"), and writes it to a
peer not known to be ours. ``dialect.py`` says how a link learns which and
translates; nothing of this changes what two nodes of ours say to each
other once they have heard from each other.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from typing import TYPE_CHECKING, Final, cast

from disque_server.cluster import clustermsg, dialect
from disque_server.cluster.clustermsg import Message
from disque_server.cluster.node import C_NODE, OURS, UNKNOWN
from disque_server.job import Job
from disque_server.request_reader import RequestError, RequestReader
from disque_server.resp import bulk_array
from disque_server.serialize import SerializeError, deserialize_job

if TYPE_CHECKING:
    from disque_server.cluster import Cluster
    from disque_server.cluster.node import ClusterNode

MAX_MESSAGE_PARTS: Final = 1_000_000
BATCH_MAX_PARTS: Final = 4096  # a batched message (send_batched) closes at this many parts
BUS_BUFFER_LIMIT: Final = 1024 * 1024 * 1024
HEAD_END: Final = clustermsg.HEADER_LEN  # (a clusterMsg's header: totlen at 4, fixed after 8)
JOB_ID_MESSAGE_LEN: Final = clustermsg.HEADER_LEN + clustermsg.JOB_ID_LEN
COUNTS_LEN: Final = clustermsg.COUNTS_LEN


def auth_proof(password: str, role: bytes, peer_nonce: bytes, own_nonce: bytes) -> bytes:
    """The proof a node in ``role`` (b"A" accepting, b"C" connecting) sends."""
    msg = role + b"|" + peer_nonce + b"|" + own_nonce
    return (
        hmac.new(password.encode("utf-8", "surrogateescape"), msg, hashlib.sha256)
        .hexdigest()
        .encode()
    )


class BusLink:
    """One bus connection, outbound (``node`` set) or inbound."""

    def __init__(self, cluster: Cluster, node: ClusterNode | None = None) -> None:
        self.cluster = cluster
        self.node = node
        self.messages = RequestReader(
            MAX_MESSAGE_PARTS, BUS_BUFFER_LIMIT, BUS_BUFFER_LIMIT, inline=False
        )
        self.transport: asyncio.Transport | None = None
        self.peer_ip = ""
        self.closed = False
        self.password: str = cluster.server.config["cluster-password"]
        self.nonce = os.urandom(16).hex().encode()
        self.role = b"C" if node is not None else b"A"
        self.peer_nonce = b""
        self.peer_verified = not self.password  # the peer proved the password
        self.proved = not self.password  # we sent our proof
        # Messages not written yet: sent once per event-loop pass, all in one write
        # (a write is a system call: one per message was most of a replica's time),
        # and held until our proof is sent.
        self.out: list[bytes] = []
        self.flush_scheduled = False
        self.batch_type = b""  # the message send_batched is filling
        self.batch: list[bytes] = []
        # Disque's clusterMsg (dialect.py): written to a peer not known to be ours
        # (with dialect.MARK to one not known at all); read while c_input is set.
        self.speaks_c = False
        self.mark = dialect.MARK
        self.write_as(node.kind if node is not None else OURS)
        self.c_input: bytearray | None = None
        # The last run of job ID messages read (GOTJOB, SETACK, ...: read_clustermsgs):
        # its whole header, first message, our header parts and run key, and whether
        # its messages carry IDs only. A message with that header, in this read or a
        # later one, goes on with it, with no message decoded.
        self.id_run_header = b""
        self.id_run_first: Message | None = None
        self.id_run_head: list[bytes] = []
        self.id_run_key = b""
        self.id_run_ids_only = True
        self.heard = False  # anything read on this link yet
        self.peer_kind = OURS  # what the last message read says its sender is
        # The peer's PONG on this link said SERIALIZED_JOBS (dialect.py): a REPLJOB's
        # jobs go to it serialized, not as fields.
        self.takes_serialized_jobs = False

    def write_as(self, kind: int) -> None:
        """Write what a peer of that kind reads (before the first message)."""
        self.speaks_c = kind != OURS and dialect.compatible(self.cluster.server.config)
        self.mark = b"" if kind == C_NODE else dialect.MARK

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's does not subclass asyncio.Transport: no isinstance).
        self.transport = cast(asyncio.Transport, transport)
        if self.password:
            self.transport.write(bulk_array([b"CHALLENGE", self.nonce]))
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer_ip = peer[0]
        if self.node is not None:
            local = transport.get_extra_info("sockname")
            if isinstance(local, tuple):
                self.cluster.learn_my_ip(local[0])
        else:
            self.cluster.inbound.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.cluster.inbound.discard(self)
        if self.node is not None and self.node.link is self:
            self.node.link = None
            if not self.heard and self.node.kind == OURS:
                # Closed before a word: maybe a Disque node now, refusing our RESP
                # (a rolled-back node); the next link asks in clusterMsg.
                self.node.kind = UNKNOWN

    def data_received(self, data: bytes) -> None:
        """Handle the complete messages read so far. The reader (request_reader.py,
        as for clients) looks at every array header before hiredis reads it: messages
        are flat arrays of bulk strings, at most MAX_MESSAGE_PARTS of them."""
        self.cluster.server.hooks.bus_read()  # (a slow tick due may run in this wake-up)
        if not self.heard:
            self.heard = True
            if data[:1] == b"D" and dialect.compatible(self.cluster.server.config):
                self.c_input = bytearray()
        if self.c_input is not None:
            data = self.read_clustermsgs(data)
            if not data:
                return
        messages = self.messages
        messages.feed(data)
        while not self.closed:
            try:
                msg = messages.next_request()
            except RequestError as exc:
                self.protocol_error(exc)
                return
            if msg is None:
                return
            if len(msg) == 2 and msg[0] in (b"CHALLENGE", b"AUTH"):
                self.on_auth_message(msg[0], msg[1])
                continue
            if len(msg) < 4 or not self.peer_verified:
                if not self.peer_verified:
                    self.cluster.server.log.warning(
                        "Cluster bus: closing a link from %s that did not authenticate",
                        self.peer_ip,
                    )
                self.close()
                return
            self.cluster.handle_message(self, msg)

    def read_clustermsgs(self, data: bytes) -> bytes:
        """Handle the whole clusterMsg messages read so far; what follows a switch
        to RESP (a byte other than "D" where a message starts) is returned.

        Disque says one job per message: a run of REPLJOB (or GOTJOB, SETACK, ...)
        of one sender in one read is handled as one message of many jobs, as
        ours send them (the handlers take many; a message each was most of the
        cost of a job replicated from a C node). The read is looked at as bytes,
        not in the bytearray that keeps a message split between reads: compiled,
        indexing and slicing bytes cost a tenth as much."""
        held = self.c_input
        assert held is not None
        if held:
            held += data
            data = bytes(held)
        end = len(data)
        pos = 0
        rest = b""
        first: Message | None = None  # the run's first message, and the run as ours
        run: list[bytes] = []
        copies: list[Job] = []  # a REPLJOB run's jobs, deserialized once (not as fields)
        run_key = b""
        run_tail = b""  # the header of the run's messages after totlen (the same for all)
        while not self.closed:
            if pos < end and data[pos] != 0x44:  # not "D": RESP from here on
                rest = data[pos:]
                self.c_input = None
                break
            if (
                self.id_run_header
                and end - pos >= JOB_ID_MESSAGE_LEN
                and data[pos : pos + HEAD_END] == self.id_run_header
            ):
                # A job ID message (GOTJOB, SETACK, ...) with the header of the last
                # run of them, in this read or an earlier one: a C node sends one for
                # each job, most of what it sends. Only its ID (and aux) is read.
                if first is None or run_key != self.id_run_key:
                    if first is not None:
                        self.on_clustermsg(first, run, copies)
                    first, run_key, run_tail = self.id_run_first, self.id_run_key, b""
                    run, copies = self.id_run_head[:], []
                else:
                    self.cluster.messages_received += 1  # (handle_message counts the first)
                self.add_id_item(run, data, pos + HEAD_END)
                pos += JOB_ID_MESSAGE_LEN
                continue
            try:
                length = clustermsg.message_length(data, pos)
            except clustermsg.MessageError as exc:
                self.protocol_error(exc)
                return b""
            if length == 0 or length > BUS_BUFFER_LIMIT or end - pos < length:
                if length > BUS_BUFFER_LIMIT:
                    self.protocol_error(clustermsg.MessageError("message too long"))
                break
            start = pos
            pos += length
            if run_tail and data[start + 8 : start + HEAD_END] == run_tail:
                # The next REPLJOB of the run: its header says nothing new, only its
                # jobs are read (no Message built: most of what a C node sends).
                if self.run_copies(copies, data, start, pos):
                    self.cluster.messages_received += 1  # (handle_message counts the first)
                    continue
            msg = self.decoded(data[start:pos])
            if msg is None:
                continue
            jobs: list[Job] = []
            if msg.type == clustermsg.REPLJOB:
                jobs = dialect.copies(msg.jobs)
                parts: list[bytes] | None = dialect.header_parts(msg) if jobs else None
            else:
                parts = dialect.to_ours(msg)
            if parts is None:
                continue
            key = dialect.run_key(msg)
            if first is not None and key and key == run_key:
                run += parts[4:]
                copies += jobs
                self.cluster.messages_received += 1
                continue
            if first is not None:
                self.on_clustermsg(first, run, copies)
            first, run, run_key, copies = msg, parts, key, jobs
            run_tail = data[start + 8 : start + HEAD_END] if jobs else b""
            if key and not jobs and length == JOB_ID_MESSAGE_LEN:
                header = data[start : start + HEAD_END]
                if header != self.id_run_header:
                    self.id_run_header, self.id_run_first = header, msg
                    self.id_run_head, self.id_run_key = parts[:4], key
                    self.id_run_ids_only = parts[0] in dialect.IDS_ONLY
        if first is not None and not self.closed:
            self.on_clustermsg(first, run, copies)
        if self.c_input is None:  # (after the run before the switch: its sender's kind)
            self.peer_kind = OURS
        else:  # what is left: the start of a message
            self.c_input = bytearray(data[pos:]) if pos < end else bytearray()
        return rest

    def add_id_item(self, run: list[bytes], data: bytes, at: int) -> None:
        """Add what the job ID message whose data starts at data[at] says (an ID, and
        for SETACK, GOTACK, ENQUEUE its aux) to the run of the last ID header read."""
        job_id = data[at : at + clustermsg.NAME_LEN]
        if self.id_run_ids_only:
            run.append(job_id)
        else:
            aux = clustermsg.u32_big(data, at + clustermsg.NAME_LEN)
            run += dialect.job_id_item(run[0], job_id, aux)

    @staticmethod
    def run_copies(copies: list[Job], data: bytes, start: int, end: int) -> bool:
        """Add the jobs of the REPLJOB at data[start:end], with the header of its run,
        to ``copies``, read where they are; False to decode it the usual way."""
        at = HEAD_END + start
        if end - at < COUNTS_LEN:
            return False
        numjobs = clustermsg.u32_big(data, at)
        if COUNTS_LEN + clustermsg.u32_big(data, at + 4) != end - at:
            return False
        taken = len(copies)
        pos = at + COUNTS_LEN
        try:
            for _ in range(numjobs):
                job, pos = deserialize_job(data, pos, storage=False)
                copies.append(job)
        except SerializeError:
            pos = -1
        if pos != end or numjobs == 0:  # (a job past the message's end: not one)
            del copies[taken:]
            return False
        return True

    def decoded(self, data: bytes) -> Message | None:
        try:
            return clustermsg.decode(data)
        except clustermsg.MessageError as exc:
            # As Disque's clusterProcessPacket: a message that does not match its
            # layout is skipped, the link kept.
            self.cluster.server.log.verbose("Bad bus message from %s: %s", self.peer_ip, exc)
            return None

    def on_clustermsg(self, msg: Message, parts: list[bytes], copies: list[Job]) -> None:
        self.peer_kind = OURS if msg.mark else C_NODE
        if self.node is None:  # our replies on this link go in what it reads
            self.speaks_c = self.peer_kind == C_NODE
            self.mark = b""
        if copies:
            self.cluster.handle_repljobs(self, parts, copies)
        else:
            self.cluster.handle_message(self, parts)

    def protocol_error(self, exc: Exception) -> None:
        self.cluster.server.log.verbose(
            "Bus protocol error from %s (%s): closing", self.peer_ip, exc
        )
        self.close()

    def on_auth_message(self, kind: bytes, value: bytes) -> None:
        if not self.password:
            self.close()
            return
        if kind == b"CHALLENGE":
            if self.peer_nonce or len(value) != len(self.nonce):
                self.close()  # one challenge per link, of our own size
                return
            self.peer_nonce = value
            if self.role == b"A":  # the accepting side proves first
                self.prove()
            return
        if not self.peer_nonce or self.peer_verified:
            self.close()
            return
        peer_role = b"C" if self.role == b"A" else b"A"
        expected = auth_proof(self.password, peer_role, self.nonce, self.peer_nonce)
        if not hmac.compare_digest(value, expected):
            self.cluster.server.log.warning("Cluster bus: wrong password from %s", self.peer_ip)
            self.close()
            return
        self.peer_verified = True
        if self.role == b"C":
            self.prove()

    def prove(self) -> None:
        assert self.transport is not None
        proof = auth_proof(self.password, self.role, self.peer_nonce, self.nonce)
        self.transport.write(bulk_array([b"AUTH", proof]))
        self.proved = True
        self.flush()

    def sendable(self) -> bool:
        """Connected and not closing: what is sent now can go out."""
        return self.transport is not None and not self.closed and not self.transport.is_closing()

    def send(self, parts: list[bytes]) -> None:
        if self.speaks_c:
            self.send_clustermsgs(parts)
        else:
            self.send_encoded(bulk_array(parts))

    def send_clustermsgs(self, parts: list[bytes]) -> None:
        """Our message as Disque's (none, one, or one per job: dialect.py)."""
        self.send_clustermsgs_encoded(dialect.to_clustermsgs(parts, self.mark))

    def send_clustermsgs_encoded(self, messages: list[bytes]) -> None:
        """Disque's messages, encoded already (once for every C node they go to)."""
        if self.sendable():
            if self.batch:
                self.close_batch()
            self.out += messages
            self.cluster.messages_sent += len(messages)
            self.schedule_flush()

    def send_encoded(self, data: bytes) -> None:
        """Send a message encoded already (one encoding for all the nodes it goes to)."""
        if self.sendable():
            if self.batch:
                self.close_batch()  # messages go out in the order they were sent
            self.out.append(data)
            self.cluster.messages_sent += 1
            self.schedule_flush()

    def send_batched(self, mtype: bytes, jid: bytes, value: bytes | None = None) -> None:
        """Add one item (a job ID, or an ID and its value) to a message of many, as
        ``GOTJOB id id ...``: what a node says of many jobs in one event-loop pass goes
        in one message, handled once by the receiver. To a C node, the batch becomes
        one clusterMsg a job when it closes (translated once, with one header).

        The item's parts are named, not ``*item``: compiled, a call that forwards
        ``*args`` goes through the interpreter's generic call (about 7% of a
        replica's instructions on a job, for its GOTJOB)."""
        if self.sendable():
            batch = self.open_batch(mtype)
            batch.append(jid)
            if value is not None:
                batch.append(value)
            self.batch_grown()

    def send_batched_parts(self, mtype: bytes, parts: list[bytes]) -> None:
        """An item of many parts (a job's FIELDS, to older nodes of ours) to a batch."""
        if self.sendable():
            self.open_batch(mtype).extend(parts)
            self.batch_grown()

    def open_batch(self, mtype: bytes) -> list[bytes]:
        """The batch of ``mtype`` messages, the one of another type closed first."""
        if mtype != self.batch_type:
            self.close_batch()
            self.batch_type = mtype
        return self.batch

    def batch_grown(self) -> None:
        if len(self.batch) >= BATCH_MAX_PARTS:
            self.close_batch()  # far below MAX_MESSAGE_PARTS, and no stall
        self.schedule_flush()

    def close_batch(self) -> None:
        if not self.batch:
            return
        if self.speaks_c:  # one message a job: Disque's
            messages = dialect.to_clustermsgs(
                self.cluster.header(self.batch_type) + self.batch, self.mark
            )
            self.out += messages
            self.cluster.messages_sent += len(messages)
        else:
            self.out.append(bulk_array(self.cluster.header(self.batch_type) + self.batch))
            self.cluster.messages_sent += 1
        self.batch = []

    def schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.cluster.server.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what was sent during this event-loop pass (after all its input)."""
        self.flush_scheduled = False
        self.close_batch()
        if not self.out or not self.proved or self.transport is None or self.transport.is_closing():
            return
        if self.cluster.server.aof.buf:
            self.cluster.server.aof.flush()  # e.g. a replica logs a job before GOTJOB
        data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
        self.out.clear()
        self.transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.flush()  # what was sent before the close goes out
        self.closed = True
        if self.transport is not None:
            self.transport.close()
