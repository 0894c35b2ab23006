"""A Jepsen-style queue test for a Disque cluster: workload, nemesis, drain, checker.

Producers add jobs with unique bodies on random nodes, consumers fetch and
acknowledge them on random nodes, while a nemesis kills (SIGKILL) and
restarts nodes, pauses them (SIGSTOP/SIGCONT) and, where iptables can be
used, partitions the cluster. Never more than ``max_impaired`` nodes are
impaired at once (down, paused, or cut off from the majority), so a job
replicated to 3 of 5 nodes always keeps a reachable owner. Nodes run with
``appendonly yes``: a SIGKILL loses nothing a reply confirmed.

After the nemesis stops and the cluster is healed, every node is drained.
The checker then demands:

- lost = 0: every ADDJOB answered with a job ID was dequeued at least once;
- unexpected = 0: nothing was dequeued that no ADDJOB ever sent (an ADDJOB
  that failed or timed out is *indeterminate*: its job may or may not
  exist, so its body may legitimately show up);
- not_redelivered = 0: a job (answered with an ID) that a consumer took
  without acknowledging it (on purpose) was delivered again (RETRY re-queue);
- id mismatches = 0: a body always comes back with the ID its ADDJOB got.

Duplicates (at-least-once delivery) are counted and reported, not failed.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hiredis

from testkit.nodes import ClusterOfNodes, Node

QUEUE = b"chaos"


# ---------------------------------------------------------------------------
# A small RESP client with explicit failure modes (no hidden retries)
# ---------------------------------------------------------------------------


class ConnectFailed(OSError):
    """The connection could not be opened: the request was never sent."""


class Resp:
    """One connection to one node; reconnects lazily after an error."""

    def __init__(
        self, port: int, host: str = "127.0.0.1", timeout: float = 4.0, connect_timeout: float = 1.0
    ) -> None:
        self.host, self.port = host, port
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.sock: socket.socket | None = None
        self.reader = hiredis.Reader()

    def _connect(self) -> socket.socket:
        if self.sock is None:
            try:
                sock = socket.create_connection(
                    (self.host, self.port), timeout=self.connect_timeout
                )
            except OSError as exc:
                raise ConnectFailed(str(exc)) from exc
            sock.settimeout(self.timeout)
            self.sock = sock
            self.reader = hiredis.Reader()
        return self.sock

    def call(self, *args: Any, timeout: float | None = None) -> Any:
        """Send one command, return its reply (a ``hiredis.ReplyError`` for -ERR...).

        Raises ConnectFailed when nothing was sent, other OSErrors (timeouts
        included) when the outcome is unknown."""
        sock = self._connect()
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        data = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        try:
            if timeout is not None:
                sock.settimeout(timeout)
            sock.sendall(data)
            while True:
                reply = self.reader.gets()
                if reply is not False:
                    return reply
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionResetError("connection closed by the node")
                self.reader.feed(chunk)
        except BaseException:
            self.close()
            raise
        finally:
            if timeout is not None and self.sock is not None:
                self.sock.settimeout(self.timeout)

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


def error_code(reply: Any) -> str | None:
    """'NOREPL', 'LEAVING', 'ERR' ... for an error reply, else None."""
    if isinstance(reply, hiredis.ReplyError):
        return (str(reply).split(" ", 1)[0] or "ERR")[:20]
    return None


# ---------------------------------------------------------------------------
# Nodes whose bus traffic can be told apart by the firewall
# ---------------------------------------------------------------------------


def gid_base() -> int:
    """Group IDs for this run's nodes: distinct from another run's on the same host."""
    return 40000 + (os.getpid() % 2000) * 16


class ChaosNode(Node):
    """A Node started with its own group ID (so iptables' owner match can tell its
    packets apart from the other nodes', all on 127.0.0.1), its stderr in a file."""

    start_timeout = 30.0

    def __init__(self, *args: Any, gid: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gid = gid
        self.output = self.dir / "stderr.log"

    def popen_options(self) -> dict[str, Any]:
        return {"group": self.gid} if self.gid is not None else {}

    @property
    def bus_port(self) -> int:
        return self.port + 10000


class Partitioner:
    """Drops the cluster-bus traffic between groups of nodes with iptables.

    Every node runs with its own group ID. A mangle/OUTPUT rule marks the
    packets a node sends with its group ID (the ``owner`` match: all nodes
    share 127.0.0.1, so addresses cannot tell them apart), and a
    filter/INPUT rule per (sender, receiver) pair drops the marked packets
    to the receiver's bus port. Dropping on input, not output, matters: the
    sending kernel sees a silent network, as in a real partition (its TCP
    retransmissions back off), not a local error it retries every 500 ms.
    Only the bus is cut: clients (this test process) still reach every node,
    as in a network where clients sit with every node. The rules live in
    private chains, removed at the end (chains of dead runs are removed too).

    Why not one loopback address per node (127.0.0.x with ``--bind``) and
    address rules: the node does not bind its outgoing bus connections to
    its bind address, so peers see every node as 127.0.0.1 and the mesh
    never forms (xfail test in test_cluster_faults.py). Owner marks work
    whatever the addresses.
    """

    def __init__(self) -> None:
        self.chain = f"DQCHAOS{os.getpid()}"[:28]
        self.iptables = shutil.which("iptables") or ""
        self.installed = False
        self.marked: set[int] = set()

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.iptables, "-w", *args], capture_output=True, text=True, check=check, timeout=30
        )

    def unavailable_reason(self) -> str | None:
        """None when partitions can be made here, else why not."""
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return "partitions need root (iptables owner match); not root"
        if not self.iptables:
            return "partitions need the iptables command; not installed"
        try:
            self.install()
            self._run(
                "-t",
                "mangle",
                "-A",
                self.chain,
                "-m",
                "owner",
                "--gid-owner",
                "65000",
                "-j",
                "MARK",
                "--set-mark",
                "65000",
            )
            self._run(
                "-A",
                self.chain,
                "-p",
                "tcp",
                "-m",
                "mark",
                "--mark",
                "65000",
                "--dport",
                "1",
                "-j",
                "DROP",
            )
            self._run("-t", "mangle", "-F", self.chain)
            self._run("-F", self.chain)
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as exc:
            self.uninstall()
            detail = getattr(exc, "stderr", "") or str(exc)
            return f"iptables not usable here: {detail.strip()}"
        return None

    def remove_stale_chains(self) -> None:
        """Chains left by runs that died (their pid is gone) still drop packets: remove."""
        for table in ("filter", "mangle"):
            listing = self._run("-t", table, "-S", check=False).stdout
            for line in listing.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "-N" and parts[1].startswith("DQCHAOS"):
                    pid = parts[1][len("DQCHAOS") :]
                    if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                        hook = "INPUT" if table == "filter" else "OUTPUT"
                        self._run("-t", table, "-D", hook, "-j", parts[1], check=False)
                        self._run("-t", table, "-F", parts[1], check=False)
                        self._run("-t", table, "-X", parts[1], check=False)

    def install(self) -> None:
        if self.installed:
            return
        self.remove_stale_chains()
        self.installed = True
        self._run("-t", "mangle", "-N", self.chain)
        self._run("-t", "mangle", "-I", "OUTPUT", "-j", self.chain)
        self._run("-N", self.chain)
        self._run("-I", "INPUT", "-j", self.chain)

    def mark(self, nodes: list[ChaosNode]) -> None:
        for node in nodes:
            if node.gid is not None and node.gid not in self.marked:
                self._run(
                    "-t",
                    "mangle",
                    "-A",
                    self.chain,
                    "-m",
                    "owner",
                    "--gid-owner",
                    str(node.gid),
                    "-j",
                    "MARK",
                    "--set-mark",
                    str(node.gid),
                )
                self.marked.add(node.gid)

    def partition(self, groups: list[list[ChaosNode]]) -> None:
        self.mark([n for g in groups for n in g])
        self._run("-F", self.chain)
        for i, a in enumerate(groups):
            for j, b in enumerate(groups):
                if i == j:
                    continue
                for src in a:
                    for dst in b:
                        self._run(
                            "-A",
                            self.chain,
                            "-p",
                            "tcp",
                            "-m",
                            "mark",
                            "--mark",
                            str(src.gid),
                            "--dport",
                            str(dst.bus_port),
                            "-j",
                            "DROP",
                        )

    def heal(self) -> None:
        if self.installed:
            self._run("-F", self.chain, check=False)

    def uninstall(self) -> None:
        if not self.iptables:
            return
        self._run("-D", "INPUT", "-j", self.chain, check=False)
        self._run("-F", self.chain, check=False)
        self._run("-X", self.chain, check=False)
        self._run("-t", "mangle", "-D", "OUTPUT", "-j", self.chain, check=False)
        self._run("-t", "mangle", "-F", self.chain, check=False)
        self._run("-t", "mangle", "-X", self.chain, check=False)
        self.installed = False
        self.marked.clear()


# ---------------------------------------------------------------------------
# The history
# ---------------------------------------------------------------------------


@dataclass
class History:
    """What the clients saw. Only touched under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: set[bytes] = field(default_factory=set)  # ADDJOB written to a socket
    added: dict[bytes, bytes] = field(default_factory=dict)  # body -> ID (answered)
    indeterminate: dict[bytes, str] = field(default_factory=dict)  # body -> why
    deliveries: Counter = field(default_factory=Counter)  # body -> times dequeued
    delivered_ids: dict[bytes, set[bytes]] = field(default_factory=dict)
    acked: set[bytes] = field(default_factory=set)  # ACKJOB answered for it
    skipped: set[bytes] = field(default_factory=set)  # taken, ACK withheld once
    ack_calls: int = 0
    add_errors: Counter = field(default_factory=Counter)
    get_errors: Counter = field(default_factory=Counter)
    ack_errors: Counter = field(default_factory=Counter)
    events: list[tuple[float, str]] = field(default_factory=list)
    event_counts: Counter = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    def event(self, kind: str, what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic() - self.started, f"{kind} {what}"))
            self.event_counts[kind] += 1

    def delivered(self, body: bytes, jid: bytes) -> int:
        with self.lock:
            self.deliveries[body] += 1
            self.delivered_ids.setdefault(body, set()).add(jid)
            return self.deliveries[body]


@dataclass
class Settings:
    seconds: float = 20.0  # nemesis + workload phase
    producers: int = 2
    consumers: int = 3
    producer_pause: float = 0.01  # between two ADDJOB of one producer
    replicate: int = 3
    retries: tuple[int, ...] = (1, 2)  # RETRY of each job, drawn at random
    addjob_timeout_ms: int = 2000
    getjob_timeout_ms: int = 200
    getjob_count: int = 4
    skip_ack_ratio: float = 0.03  # consumers "crash" before acknowledging
    ack_elsewhere_ratio: float = 0.3  # ACKJOB on another node than GETJOB's
    max_impaired: int = 2
    fault_min: float = 1.0  # how long one fault lasts
    fault_max: float = 4.0
    nemesis_gap: tuple[float, float] = (0.3, 1.5)
    kinds: tuple[str, ...] = ("kill", "pause")
    drain_window: float = 30.0  # drain for at most this long
    drain_quiet_rounds: int = 5  # ... stop after this many empty rounds in a row
    heal_timeout: float = 45.0
    seed: int = field(default_factory=lambda: random.randrange(1 << 30))


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


class QueueChaos:
    def __init__(
        self,
        cluster: ClusterOfNodes,
        settings: Settings,
        partitioner: Partitioner | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.cluster = cluster
        self.nodes: list[ChaosNode] = list(cluster)  # type: ignore[arg-type]
        self.s = settings
        self.partitioner = partitioner
        self.h = History()
        self.rng = random.Random(settings.seed)
        self.stop_workload = threading.Event()
        self.stop_nemesis = threading.Event()
        self.tag = b"%08x" % self.rng.randrange(1 << 32)
        self.log = log
        self.errors: list[str] = []  # harness failures (bugs in this file, not the node)
        # Nemesis state: node index -> ("kill"|"pause", heal time); partition: heal time.
        self.faults: dict[int, tuple[str, float]] = {}
        self.partitioned: list[int] = []
        self.partition_heal_at = 0.0
        self.heal_seconds = 0.0
        self.drain_seconds = 0.0
        self.drain_rounds = 0
        self.leftover: dict[int, dict[str, int]] = {}

    # ---- clients ----------------------------------------------------------------
    def _guard(self, name: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # the harness itself must never die silently
                self.errors.append(f"{name}: {exc!r}")

        return run

    def producer(self, pid: int) -> None:
        rng = random.Random(self.s.seed * 31 + pid)
        conns = [Resp(n.port) for n in self.nodes]
        seq = 0
        try:
            while not self.stop_workload.is_set():
                seq += 1
                body = b"%s-p%d-%d" % (self.tag, pid, seq)
                i = rng.randrange(len(self.nodes))
                retry = rng.choice(self.s.retries)
                args = (
                    "ADDJOB",
                    QUEUE,
                    body,
                    self.s.addjob_timeout_ms,
                    "REPLICATE",
                    self.s.replicate,
                    "RETRY",
                    retry,
                )
                with self.h.lock:
                    self.h.sent.add(body)
                try:
                    reply = conns[i].call(*args)
                except ConnectFailed:
                    with self.h.lock:  # never sent: must never be seen
                        self.h.sent.discard(body)
                        self.h.add_errors["connect"] += 1
                    time.sleep(0.05)
                    continue
                except OSError as exc:
                    kind = "timeout" if isinstance(exc, TimeoutError) else "io"
                    with self.h.lock:
                        self.h.indeterminate[body] = kind
                        self.h.add_errors[kind] += 1
                    continue
                code = error_code(reply)
                with self.h.lock:
                    if code is None and isinstance(reply, bytes) and reply.startswith(b"D-"):
                        self.h.added[body] = reply
                    else:
                        self.h.indeterminate[body] = code or repr(reply)[:40]
                        self.h.add_errors[code or "odd-reply"] += 1
                if self.s.producer_pause:
                    time.sleep(self.s.producer_pause)
        finally:
            for c in conns:
                c.close()

    def consume_once(
        self,
        rng: random.Random,
        conns: list[Resp],
        i: int,
        timeout_ms: int,
        count: int,
        draining: bool,
    ) -> int:
        """One GETJOB (+ ACKJOB) on node i; the number of jobs received."""
        try:
            reply = conns[i].call(
                "GETJOB",
                "TIMEOUT",
                timeout_ms,
                "COUNT",
                count,
                "FROM",
                QUEUE,
                timeout=timeout_ms / 1000 + 4,
            )
        except OSError as exc:
            with self.h.lock:
                self.h.get_errors[type(exc).__name__] += 1
            if isinstance(exc, ConnectFailed):
                time.sleep(0.05)
            return 0
        code = error_code(reply)
        if code is not None:
            with self.h.lock:
                self.h.get_errors[code] += 1
            return 0
        if not reply:
            return 0
        to_ack: list[tuple[bytes, bytes]] = []
        for item in reply:
            _queue, jid, body = item[0], item[1], item[2]
            n = self.h.delivered(body, jid)
            if not draining and n == 1 and rng.random() < self.s.skip_ack_ratio:
                with self.h.lock:
                    self.h.skipped.add(body)
                continue
            to_ack.append((jid, body))
        if to_ack:
            j = i if rng.random() >= self.s.ack_elsewhere_ratio else rng.randrange(len(conns))
            try:
                ack = conns[j].call("ACKJOB", *[jid for jid, _ in to_ack])
            except OSError as exc:
                with self.h.lock:
                    self.h.ack_errors[type(exc).__name__] += 1
                return len(reply)
            code = error_code(ack)
            with self.h.lock:
                self.h.ack_calls += 1
                if code is None:
                    self.h.acked.update(body for _, body in to_ack)
                else:
                    self.h.ack_errors[code] += 1
        return len(reply)

    def consumer(self, cid: int) -> None:
        rng = random.Random(self.s.seed * 17 + cid)
        conns = [Resp(n.port) for n in self.nodes]
        try:
            while not self.stop_workload.is_set():
                self.consume_once(
                    rng,
                    conns,
                    rng.randrange(len(conns)),
                    self.s.getjob_timeout_ms,
                    self.s.getjob_count,
                    False,
                )
        finally:
            for c in conns:
                c.close()

    # ---- the nemesis ------------------------------------------------------------
    def impaired(self) -> set[int]:
        return set(self.faults) | set(self.partitioned)

    def nemesis(self) -> None:
        rng = random.Random(self.s.seed * 7)
        next_fault = time.monotonic() + rng.uniform(*self.s.nemesis_gap)
        while not self.stop_nemesis.is_set():
            now = time.monotonic()
            self.heal_due(now)
            if now >= next_fault:
                self.inject(rng)
                next_fault = time.monotonic() + rng.uniform(*self.s.nemesis_gap)
            self.stop_nemesis.wait(0.05)

    def inject(self, rng: random.Random) -> None:
        budget = self.s.max_impaired - len(self.impaired())
        if budget <= 0:
            return
        kinds = [k for k in self.s.kinds if k != "partition" or not self.partitioned]
        if not kinds:
            return
        kind = rng.choice(kinds)
        healthy = [i for i in range(len(self.nodes)) if i not in self.impaired()]
        duration = rng.uniform(self.s.fault_min, self.s.fault_max)
        if kind == "partition":
            size = rng.randint(1, budget)
            minority = sorted(rng.sample(healthy, size))
            majority = [i for i in range(len(self.nodes)) if i not in minority]
            assert self.partitioner is not None
            self.partitioner.partition(
                [[self.nodes[i] for i in minority], [self.nodes[i] for i in majority]]
            )
            self.partitioned = minority
            self.partition_heal_at = time.monotonic() + duration
            self.h.event("partition", f"{minority} | {majority} for {duration:.1f}s")
            return
        i = rng.choice(healthy)
        node = self.nodes[i]
        if kind == "kill":
            node.kill()
        else:
            node.pause()
        self.faults[i] = (kind, time.monotonic() + duration)
        self.h.event(kind, f"node{i} for {duration:.1f}s")

    def heal_due(self, now: float, force: bool = False) -> None:
        if self.partitioned and (force or now >= self.partition_heal_at):
            assert self.partitioner is not None
            self.partitioner.heal()
            self.h.event("heal-partition", str(self.partitioned))
            self.partitioned = []
        for i, (kind, at) in list(self.faults.items()):
            if not force and now < at:
                continue
            node = self.nodes[i]
            if kind == "pause":
                node.resume()
                self.h.event("resume", f"node{i}")
            else:
                try:
                    node.start(wait=True)
                    self.h.event("restart", f"node{i}")
                except AssertionError as exc:
                    self.errors.append(f"node{i} did not restart: {exc}")
            del self.faults[i]

    # ---- phases -----------------------------------------------------------------
    def heal_all(self) -> None:
        self.heal_due(time.monotonic(), force=True)
        if self.partitioner is not None:
            self.partitioner.heal()
        for i, n in enumerate(self.nodes):
            if not n.is_running():
                self.errors.append(
                    f"node{i} found dead after the nemesis "
                    f"(exit {n.proc.returncode if n.proc else None})"
                )
                n.start(wait=True)
        t0 = time.monotonic()
        try:
            self.cluster.wait_full_mesh(timeout=self.s.heal_timeout, nodes=self.nodes)
        except AssertionError as exc:
            self.h.event("heal-timeout", str(exc)[:120])
        self.heal_seconds = time.monotonic() - t0

    def drain(self) -> None:
        """GETJOB on every node until nothing comes for a while (or the window ends)."""
        rng = random.Random(self.s.seed * 13)
        conns = [Resp(n.port) for n in self.nodes]
        t0 = time.monotonic()
        empty_rounds = 0
        quiet = max(self.s.retries) * 2 + 1  # re-queues come within RETRY (+ slack)
        last_job = t0
        try:
            while time.monotonic() - t0 < self.s.drain_window:
                self.drain_rounds += 1
                got = 0
                for i in range(len(conns)):
                    got += self.consume_once(rng, conns, i, 100, 50, True)
                now = time.monotonic()
                if got:
                    empty_rounds, last_job = 0, now
                    continue
                empty_rounds += 1
                if empty_rounds < self.s.drain_quiet_rounds:
                    continue
                with self.h.lock:
                    missing = [b for b in self.h.added if b not in self.h.deliveries] + [
                        b for b in self.h.skipped if self.h.deliveries[b] < 2 and b in self.h.added
                    ]
                if not missing and now - last_job >= quiet:
                    break
        finally:
            for c in conns:
                c.close()
        self.drain_seconds = time.monotonic() - t0
        for i, n in enumerate(self.nodes):
            try:
                info = n.info("jobs")
                self.leftover[i] = {
                    "qlen": int(n.call("QLEN", QUEUE)),
                    "jobs": int(info.get("registered_jobs", -1)),
                }
            except Exception as exc:  # reported, not fatal
                self.leftover[i] = {"error": repr(exc)[:60]}  # type: ignore[dict-item]

    def run(self) -> dict[str, Any]:
        threads = [
            threading.Thread(
                target=self._guard(f"producer{p}", lambda p=p: self.producer(p)), daemon=True
            )
            for p in range(self.s.producers)
        ]
        threads += [
            threading.Thread(
                target=self._guard(f"consumer{c}", lambda c=c: self.consumer(c)), daemon=True
            )
            for c in range(self.s.consumers)
        ]
        nemesis = threading.Thread(target=self._guard("nemesis", self.nemesis), daemon=True)
        for t in threads:
            t.start()
        nemesis.start()
        self.stop_workload.wait(self.s.seconds)
        self.stop_nemesis.set()
        nemesis.join(60)
        self.stop_workload.set()
        for t in threads:
            t.join(30)
        self.heal_all()
        self.drain()
        return self.check()

    def node_exceptions(self) -> dict[str, int]:
        """Uncaught exceptions the nodes wrote to stderr: "ExcType: message" -> count."""
        found: Counter = Counter()
        for node in self.nodes:
            path = node.dir / "stderr.log"
            if not path.exists():
                continue
            lines = path.read_text(errors="replace").splitlines()
            for i, line in enumerate(lines):
                if line.startswith("Traceback"):
                    # The exception line is the first unindented line after the trace.
                    for follow in lines[i + 1 :]:
                        if follow and not follow.startswith(" "):
                            found[follow[:120]] += 1
                            break
        return dict(found)

    # ---- the checker ----------------------------------------------------------
    def check(self) -> dict[str, Any]:
        h = self.h
        with h.lock:
            delivered = set(h.deliveries)
            added = set(h.added)
            lost = sorted(added - delivered)
            unexpected = sorted(delivered - added - set(h.indeterminate))
            mismatched = sorted(b for b in delivered & added if h.delivered_ids[b] != {h.added[b]})
            # Only for jobs whose ADDJOB succeeded: a NOREPL job may be delivered by a
            # replica before the origin's clean-up DELJOB reaches it, and then vanish.
            not_redelivered = sorted(b for b in h.skipped if h.deliveries[b] < 2 and b in added)
            duplicates = sum(n - 1 for n in h.deliveries.values())
            return {
                "seed": self.s.seed,
                "added": len(added),
                "indeterminate": len(h.indeterminate),
                "indeterminate_delivered": len(delivered & set(h.indeterminate)),
                "delivered_unique": len(delivered),
                "deliveries": sum(h.deliveries.values()),
                "acked": len(h.acked),
                "ack_calls": h.ack_calls,
                "skipped_acks": len(h.skipped),
                "lost": len(lost),
                "unexpected": len(unexpected),
                "not_redelivered": len(not_redelivered),
                "id_mismatch": len(mismatched),
                "duplicates": duplicates,
                "nemesis": dict(h.event_counts),
                "add_errors": dict(h.add_errors),
                "get_errors": dict(h.get_errors),
                "ack_errors": dict(h.ack_errors),
                "heal_seconds": round(self.heal_seconds, 1),
                "drain_seconds": round(self.drain_seconds, 1),
                "drain_rounds": self.drain_rounds,
                "leftover": self.leftover,
                "harness_errors": list(self.errors),
                "node_exceptions": self.node_exceptions(),
                "lost_sample": [b.decode() for b in lost[:10]],
                "unexpected_sample": [b.decode() for b in unexpected[:10]],
                "not_redelivered_sample": [b.decode() for b in not_redelivered[:10]],
                "mismatch_sample": [
                    (
                        b.decode(),
                        sorted(x.decode() for x in h.delivered_ids[b]),
                        h.added[b].decode(),
                    )
                    for b in mismatched[:5]
                ],
                "events": [f"{t:7.2f}s {e}" for t, e in h.events],
            }


def format_summary(name: str, result: dict[str, Any]) -> str:
    rows = [
        ("added (answered with an ID)", result["added"]),
        ("indeterminate ADDJOB", result["indeterminate"]),
        ("  of which delivered", result["indeterminate_delivered"]),
        ("delivered (unique bodies)", result["delivered_unique"]),
        ("deliveries (total)", result["deliveries"]),
        ("acked (bodies)", result["acked"]),
        ("ACK withheld on purpose", result["skipped_acks"]),
        ("LOST", result["lost"]),
        ("UNEXPECTED", result["unexpected"]),
        ("NOT REDELIVERED", result["not_redelivered"]),
        ("ID MISMATCH", result["id_mismatch"]),
        ("duplicates", result["duplicates"]),
        ("nemesis events", sum(result["nemesis"].values())),
        ("heal time (s)", result["heal_seconds"]),
        ("drain time (s) / rounds", f"{result['drain_seconds']} / {result['drain_rounds']}"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"== chaos summary: {name} (seed {result['seed']}) =="]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    lines.append(f"  nemesis: {result['nemesis']}")
    lines.append(f"  ADDJOB errors: {result['add_errors']}")
    lines.append(f"  GETJOB errors: {result['get_errors']}")
    lines.append(f"  ACKJOB errors: {result['ack_errors']}")
    lines.append(f"  after drain (qlen, registered jobs) per node: {result['leftover']}")
    for key in (
        "lost_sample",
        "unexpected_sample",
        "not_redelivered_sample",
        "mismatch_sample",
        "harness_errors",
        "node_exceptions",
    ):
        if result[key]:
            lines.append(f"  {key}: {result[key]}")
    return "\n".join(lines) + "\n"


def failures(result: dict[str, Any]) -> list[str]:
    problems = [
        f"{k}={result[k]}"
        for k in ("lost", "unexpected", "not_redelivered", "id_mismatch")
        if result[k]
    ]
    if result["harness_errors"]:
        problems.append(f"harness errors: {result['harness_errors']}")
    if result["node_exceptions"] and os.environ.get("CHAOS_STRICT"):
        problems.append(f"uncaught exceptions in nodes: {result['node_exceptions']}")
    if result["added"] == 0:
        problems.append("no ADDJOB succeeded at all")
    return problems


def save_logs(cluster: ClusterOfNodes, dest: Path) -> Path:
    """Copy every node's log (and stderr) to dest; return dest."""
    dest.mkdir(parents=True, exist_ok=True)
    for i, node in enumerate(cluster):
        for src in (node.logfile, node.dir / "stderr.log"):
            if src.exists():
                shutil.copy(src, dest / f"node{i}-{src.name}")
    return dest
