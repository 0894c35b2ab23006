#!/usr/bin/env python3
"""The failure detector (disque_server/cluster/detector.py) at 100 to 5,000 nodes,
in one process, on a simulated network.

    python bench/membership_sim.py [--nodes 10 100 1000] [--timeout 3000]
        [--loss 0.01] [--idle 30] [--hours 0] [--seed 1] [--json]

Every node runs the node's own detector code (the same module the node runs,
imported from this checkout); only the network is simulated: each message
takes 1 to 5 ms, a fraction ``--loss`` of them is lost. Each node ticks every
100 ms (the node's cron), at its own phase, and answers a PING with a PONG,
each carrying the detector's gossip, as the node's bus does.

For each size it reports, in a table (Markdown; --json for one JSON object a
size):

- messages each node sends a second, idle (after a warm-up);
- the detector's own CPU per node per second (the time spent in its calls);
- a node killed: how long until some node sees it PFAIL, until some node
  marks it FAIL, until every live node has it FAIL (the spread);
- a node paused for 3 node timeouts, then resumed: whether it was marked
  FAIL, and how long until no node holds it failing;
- false suspicions under --loss: PFAILs of live nodes per node-hour, over the
  idle phase (--hours adds a longer run at the smallest size only).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from disque_server.cluster.detector import (  # noqa: E402
    ALIVE,
    FAIL,
    PFAIL,
    PING,
    PROBE,
    PROBED,
    REPORT,
    Detector,
)

TICK_MS = 100
LATENCY_MS = (1, 5)
KINDS = {PING: "PING", PROBE: "PROBE", PROBED: "PROBED"}

Gossip = list[tuple[bytes, int, list[tuple[bytes, int]]]]


@dataclass
class SimNode:
    id: bytes
    detector: Detector
    up: bool = True
    paused_until: int = 0  # ms; messages wait until then
    backlog: list[tuple[bytes, str, object]] = field(default_factory=list)


class Simulation:
    """Nodes, a clock and a network (an event heap)."""

    def __init__(self, n: int, timeout: int, loss: float, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.events: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.loss = loss
        self.sent = 0
        self.cpu = 0.0  # seconds inside detector calls
        self.changes: list[tuple[int, bytes, bytes, int]] = []  # (ms, observer, member, state)
        ids = [b"%040x" % self.rng.getrandbits(160) for _ in range(n)]
        self.nodes: dict[bytes, SimNode] = {}
        for node_id in ids:
            det = Detector(node_id, timeout, random.Random(self.rng.random()))
            for other in ids:
                det.add(other)
            self.nodes[node_id] = SimNode(node_id, det)
        for node in self.nodes.values():
            self.at(self.rng.randrange(TICK_MS), lambda node=node: self.tick(node))

    # ---- the event loop ----------------------------------------------------------------
    def at(self, when: int, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, fn))

    def run_until(self, until: int) -> None:
        events = self.events
        while events and events[0][0] <= until:
            when, _, fn = heapq.heappop(events)
            self.now = when
            fn()
        self.now = until

    # ---- a node ------------------------------------------------------------------------
    def tick(self, node: SimNode) -> None:
        if node.up and node.paused_until <= self.now:
            self.timed(node.detector.tick, self.now)
            self.flush(node)
        self.at(self.now + TICK_MS, lambda: self.tick(node))

    def timed(self, fn: Callable[..., None], *args: object) -> None:
        start = time.perf_counter()
        fn(*args)
        self.cpu += time.perf_counter() - start

    def flush(self, node: SimNode) -> None:
        det = node.detector
        for kind, to, about in det.take_output():
            if kind == PING:
                self.send(node, to, "PING", det.gossip(self.now))
            elif kind == REPORT:
                self.send(node, to, "REPORTS", det.gossip(self.now))
            else:
                self.send(node, to, KINDS[kind], about)
        for member, state in det.take_changes():
            self.changes.append((self.now, node.id, member, state))
        for member in det.take_declared():  # FAIL to every node, as the node's bus does
            for other in self.nodes:
                if other != node.id and other != member:
                    self.send(node, other, "FAIL", member)

    def send(self, node: SimNode, to: bytes, kind: str, payload: object) -> None:
        self.sent += 1
        if self.rng.random() < self.loss:
            return
        delay = self.rng.randint(*LATENCY_MS)
        self.at(self.now + delay, lambda: self.deliver(node.id, to, kind, payload))

    def deliver(self, src: bytes, to: bytes, kind: str, payload: object) -> None:
        node = self.nodes.get(to)
        if node is None or not node.up:
            return
        if node.paused_until > self.now:
            node.backlog.append((src, kind, payload))
            return
        self.receive(node, src, kind, payload)

    def receive(self, node: SimNode, src: bytes, kind: str, payload: object) -> None:
        det, now = node.detector, self.now
        start = time.perf_counter()
        det.heard_from(src, now)
        if kind in ("PING", "PONG", "REPORTS"):
            assert isinstance(payload, list)
            det.on_gossip(src, payload, now)
        elif kind == "PROBE":
            assert isinstance(payload, bytes)
            det.on_probe(src, payload, now)
        elif kind == "PROBED":
            assert isinstance(payload, bytes)
            det.on_probed(src, payload, now)
        elif kind == "FAIL":
            assert isinstance(payload, bytes)
            det.on_fail(payload, now)
        gossip: Gossip = det.gossip(now) if kind == "PING" else []
        self.cpu += time.perf_counter() - start
        if kind == "PING":
            self.send(node, src, "PONG", gossip)
        self.flush(node)

    # ---- faults ------------------------------------------------------------------------
    def kill(self, node_id: bytes) -> None:
        self.nodes[node_id].up = False

    def pause(self, node_id: bytes, ms: int) -> None:
        node = self.nodes[node_id]
        node.paused_until = self.now + ms
        self.at(self.now + ms, lambda: self.resume(node))

    def resume(self, node: SimNode) -> None:
        backlog, node.backlog = node.backlog, []
        for src, kind, payload in backlog:
            self.receive(node, src, kind, payload)

    def live(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.up]


@dataclass
class Figures:
    nodes: int
    msgs_per_node_s: float
    cpu_us_per_node_s: float
    false_pfail_per_node_hour: float
    first_pfail_s: float
    first_fail_s: float
    all_fail_s: float
    pause_marked_fail: bool
    pause_clear_s: float


def idle_phase(sim: Simulation, seconds: float) -> tuple[float, float, float]:
    """Messages and detector CPU per node per second; PFAILs of live nodes per node-hour."""
    n = len(sim.nodes)
    sim.run_until(sim.now + 5_000)  # warm-up: the first round of probes
    sent, cpu, changes = sim.sent, sim.cpu, len(sim.changes)
    sim.run_until(sim.now + int(seconds * 1000))
    false = sum(1 for c in sim.changes[changes:] if c[3] == PFAIL)
    hours = n * seconds / 3600
    return (sim.sent - sent) / n / seconds, (sim.cpu - cpu) * 1e6 / n / seconds, false / hours


def kill_phase(sim: Simulation, timeout: int) -> tuple[float, float, float]:
    victim = sim.rng.choice(list(sim.nodes))
    start, mark = sim.now, len(sim.changes)
    sim.kill(victim)
    pfail = fail = everywhere = float("nan")
    while sim.now - start < 20 * timeout:
        sim.run_until(sim.now + TICK_MS)
        about = [c for c in sim.changes[mark:] if c[2] == victim]
        if pfail != pfail and any(c[3] == PFAIL for c in about):
            pfail = (sim.now - start) / 1000
        if fail != fail and any(c[3] == FAIL for c in about):
            fail = (sim.now - start) / 1000
        if all(n.detector.state_of(victim) == FAIL for n in sim.live()):
            everywhere = (sim.now - start) / 1000
            break
    for node in sim.live():
        node.detector.remove(victim)  # (as CLUSTER FORGET would, for the next phase)
    del sim.nodes[victim]
    return pfail, fail, everywhere


def pause_phase(sim: Simulation, timeout: int) -> tuple[bool, float]:
    victim = sim.rng.choice(list(sim.nodes))
    mark = len(sim.changes)
    sim.pause(victim, timeout * 3)
    sim.run_until(sim.now + timeout * 3)
    resumed = sim.now
    marked = any(c[2] == victim and c[3] == FAIL for c in sim.changes[mark:])
    while sim.now - resumed < 20 * timeout:
        sim.run_until(sim.now + TICK_MS)
        if all(n.detector.state_of(victim) == ALIVE for n in sim.live()):
            return marked, (sim.now - resumed) / 1000
    return marked, float("nan")


def measure(n: int, timeout: int, loss: float, idle_s: float, seed: int) -> Figures:
    sim = Simulation(n, timeout, loss, seed)
    msgs, cpu, false = idle_phase(sim, idle_s)
    pfail, fail, everywhere = kill_phase(sim, timeout)
    marked, clear = pause_phase(sim, timeout)
    return Figures(n, msgs, cpu, false, pfail, fail, everywhere, marked, clear)


def table(rows: list[Figures], timeout: int, loss: float) -> str:
    head = (
        f"node timeout {timeout} ms, loss {loss:.1%}\n\n"
        "| nodes | msgs/node/s | detector CPU µs/node/s | false PFAIL /node-hour "
        "| first PFAIL s | first FAIL s | FAIL everywhere s | paused 3x: FAIL? | cleared s |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r.nodes} | {r.msgs_per_node_s:.2f} | {r.cpu_us_per_node_s:.0f} "
            f"| {r.false_pfail_per_node_hour:.2f} | {r.first_pfail_s:.1f} | {r.first_fail_s:.1f} "
            f"| {r.all_fail_s:.1f} | {'yes' if r.pause_marked_fail else 'no'} "
            f"| {r.pause_clear_s:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--timeout", type=int, default=3000, help="cluster-node-timeout, ms")
    parser.add_argument("--loss", type=float, default=0.01, help="fraction of messages lost")
    parser.add_argument("--idle", type=float, default=30, help="idle phase, simulated seconds")
    parser.add_argument(
        "--hours", type=float, default=0, help="also a long idle run at the smallest size"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args(argv)
    rows = []
    for n in a.nodes:
        started = time.monotonic()
        rows.append(measure(n, a.timeout, a.loss, a.idle, a.seed))
        print(f"{n} nodes: {time.monotonic() - started:.0f} s", file=sys.stderr)
        if a.json:
            print(json.dumps(rows[-1].__dict__))
    if a.hours:
        n = min(a.nodes)
        sim = Simulation(n, a.timeout, a.loss, a.seed + 1)
        _, _, false = idle_phase(sim, a.hours * 3600)
        print(f"{n} nodes, {a.hours} h at {a.loss:.1%} loss: {false:.3f} false PFAIL per node-hour")
    if not a.json:
        print(table(rows, a.timeout, a.loss))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
