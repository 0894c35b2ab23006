"""The failure detector, sans-IO: whom to probe, when a node is PFAIL, when FAIL.

A state machine fed the time and what arrived, answering with what to send.
It does no I/O and reads no clock, so the node (cluster/membership.py) and
the simulator (bench/membership_sim.py) run the same code.

Disque pings every node whose last PONG is older than half the node timeout:
each node's work grows with the cluster. Here, as in SWIM (Das et al., 2002)
and its descendants (memberlist, Serf), each node probes one member a
protocol period, in a shuffled round, so its work is the same at 10 nodes
and at 1,000; Disque's states stay on top:

- **Probe.** A PING to the member; no answer by half the period, a PROBE
  (an indirect ping) through ``INDIRECT_PROBES`` others, which ping it and
  relay its answer (PROBED). No answer at all by the end of the period: the
  member is probed again every period, no longer waiting for its turn.
- **PFAIL** (Disque's "possibly failing"): nothing from the member, directly
  or through others, for the node timeout since its first unanswered probe.
  A member someone else reports failing is probed at once: one unanswered
  probe makes it PFAIL here too (a second, independent observation, as
  Lifeguard's confirmations).
- **FAIL**: this node sees the member PFAIL and a majority of the cluster
  reports it failing. Reports travel in gossip, each with its age, relayed
  from node to node, so a report reaches the others in a few periods without
  anyone sending to everyone (a node that finds PFAIL itself tells
  ``REPORT_FANOUT`` others at once); a report older than twice the node timeout is
  forgotten, as Disque forgets them. The node that counts the majority says
  FAIL to every node (``declared``: Disque's FAIL message, once a failure);
  FAIL spreads in gossip too.
- Anything heard from the member, directly or relayed, clears PFAIL and
  FAIL here (as in Disque) and withdraws this node's report.
"""

from __future__ import annotations

import random
from typing import Final

ALIVE: Final = 0
PFAIL: Final = 1
FAIL: Final = 2

INDIRECT_PROBES: Final = 3  # members asked to probe one that did not answer (SWIM's k)
MIN_PERIOD_MS: Final = 100
MAX_PERIOD_MS: Final = 5000
PERIODS_PER_TIMEOUT: Final = 6  # the protocol period is the node timeout / this

# What the detector asks its host to send: (kind, to, about).
PING: Final = 0  # a probe (the host sends its usual PING, with gossip)
PROBE: Final = 1  # to ``to``: please probe ``about`` for me
PROBED: Final = 2  # to ``to``: ``about`` answered the probe you asked for
REPORT: Final = 3  # to ``to``: the failure reports we hold (``gossip``), at once
REPORT_FANOUT: Final = 3  # nodes told at once of a PFAIL of our own (an epidemic's push)


def protocol_period(node_timeout_ms: int, members: int = PERIODS_PER_TIMEOUT) -> int:
    """How often a node probes one member (ms): the node timeout / 6, or, with
    fewer than 6 other members, / their number (at least 2), so that a small
    cluster's bus carries no more than Disque's one PING a pair per half timeout."""
    per_timeout = min(PERIODS_PER_TIMEOUT, max(2, members))
    return max(MIN_PERIOD_MS, min(MAX_PERIOD_MS, node_timeout_ms // per_timeout))


class Member:
    """Another node as the detector sees it."""

    __slots__ = (
        "id",
        "state",
        "probe_sent",
        "indirect_sent",
        "silent_since",
        "confirm",
        "heard",
        "relay",
        "reports",
    )

    def __init__(self, node_id: bytes, relay: bool = True) -> None:
        self.id = node_id
        self.relay = relay  # it can probe others for us (PROBE): a node of ours
        self.state = ALIVE
        self.probe_sent = 0  # ms; the unanswered probe in flight (0: none)
        self.indirect_sent = False  # its PROBEs went out
        self.silent_since = 0  # ms; its first unanswered probe since it last answered
        self.confirm = False  # reported failing by others: probe it at once, once
        self.heard = 0  # ms; the last time it answered or sent us anything
        self.reports: dict[bytes, int] = {}  # reporter -> when it reported (our ms)


class Detector:
    """One node's failure detector. ``me`` is its own node ID."""

    def __init__(self, me: bytes, node_timeout_ms: int, rng: random.Random | None = None) -> None:
        self.me = me
        self.timeout = node_timeout_ms
        self.period = protocol_period(node_timeout_ms, 0)
        self.rng = rng or random.Random()
        self.members: dict[bytes, Member] = {}
        self.ids: list[bytes] = []  # the members' IDs, to draw from (pick_others)
        self.index: dict[bytes, int] = {}  # ID -> its place in ids
        # The members with something under way (a probe, a suspicion, reports, a
        # failure): what each tick and each gossip looks at, not every member.
        self.watch: dict[bytes, Member] = {}
        self.round: list[bytes] = []  # this round's probe order (shuffled)
        self.next_probe = 0  # ms
        self.relays: dict[bytes, list[bytes]] = {}  # member -> who asked us to probe it
        self.out: list[tuple[int, bytes, bytes]] = []  # what to send (kind, to, about)
        self.changes: list[tuple[bytes, int]] = []  # (member, new state), for the host
        self.declared: list[bytes] = []  # members this node found FAIL itself: broadcast
        # A probe in flight was answered since the host last looked: the tick the
        # host set for that probe's timers can wait (next_due).
        self.answered = False

    # ---- membership --------------------------------------------------------------------
    def add(self, node_id: bytes, relay: bool = True) -> None:
        """A member; ``relay``: it takes PROBE (a Disque node does not)."""
        member = self.members.get(node_id)
        if member is not None:
            member.relay = relay
        elif node_id != self.me:
            self.members[node_id] = Member(node_id, relay)
            self.index[node_id] = len(self.ids)
            self.ids.append(node_id)
            self.round.insert(self.rng.randrange(len(self.round) + 1), node_id)
            self.period = protocol_period(self.timeout, len(self.members))

    def remove(self, node_id: bytes) -> None:
        if self.members.pop(node_id, None) is not None:
            at = self.index.pop(node_id)
            last = self.ids.pop()
            if at < len(self.ids):  # (the last one takes its place)
                self.ids[at] = last
                self.index[last] = at
        self.watch.pop(node_id, None)
        self.relays.pop(node_id, None)
        self.period = protocol_period(self.timeout, len(self.members))

    @property
    def size(self) -> int:
        """The cluster's size as the majority counts it: the members and this node."""
        return len(self.members) + 1

    def set_timeout(self, node_timeout_ms: int) -> None:
        self.timeout = node_timeout_ms
        self.period = protocol_period(node_timeout_ms, len(self.members))

    def state_of(self, node_id: bytes) -> int:
        member = self.members.get(node_id)
        return ALIVE if member is None else member.state

    # ---- time --------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Probe the next member when a period has passed; move on the probes in
        flight. What to send accumulates in ``out``."""
        for member in list(self.watch.values()):
            if member.probe_sent:
                self.probe_timers(member, now)
            elif member.confirm or (member.silent_since and member.state == ALIVE):
                self.probe(member, now)  # a suspect is probed every period
            elif member.state != ALIVE and now - member.silent_since >= self.timeout:
                member.silent_since = now
                self.probe(member, now)  # a failing one, once a node timeout: back yet?
            if member.reports:
                self.check_fail(member, now)
            if not (member.probe_sent or member.silent_since or member.reports):
                del self.watch[member.id]
        if now >= self.next_probe:
            # The period's pace when a tick comes a little late (a slow tick's slack
            # on an idle node); no catching up after a stall (or the first tick).
            late = now - self.next_probe < self.period // 2
            self.next_probe = (self.next_probe if late else now) + self.period
            target = self.next_in_round()
            if target is not None and not target.probe_sent:
                self.probe(target, now)

    def next_due(self) -> int:
        """When a tick next has work (ms): the next probe, or a probe in flight's
        half period (its indirect probes) or end. 0 while anything else is under
        way (a suspect, reports, a failure): the host then ticks at least twice a
        period, so that FAIL is counted as soon as the reports reach a majority."""
        due = self.next_probe
        half = self.period // 2
        for member in self.watch.values():
            if member.probe_sent:
                at = member.probe_sent + (self.period if member.indirect_sent else half)
                if at < due:
                    due = at
            elif member.confirm or member.silent_since or member.reports or member.state:
                return 0
        return due

    def next_in_round(self) -> Member | None:
        while self.members:
            if not self.round:
                self.round = list(self.members)
                self.rng.shuffle(self.round)
            member = self.members.get(self.round.pop())
            if member is not None:
                return member
        return None

    def probe_member(self, node_id: bytes, now: int) -> None:
        """Probe it now, out of turn (the host's call: a Disque node, which expects
        a PING every half node timeout), unless a probe is in flight."""
        member = self.members.get(node_id)
        if member is not None and not member.probe_sent:
            self.probe(member, now)

    def probe(self, member: Member, now: int) -> None:
        member.probe_sent = now
        member.indirect_sent = False
        self.watch[member.id] = member
        self.out.append((PING, member.id, member.id))

    def probe_timers(self, member: Member, now: int) -> None:
        waited = now - member.probe_sent
        if waited >= self.period // 2 and not member.indirect_sent:
            member.indirect_sent = True
            for via in self.pick_others(member.id, INDIRECT_PROBES):
                self.out.append((PROBE, via, member.id))
        if waited < self.period:
            return
        # The probe went unanswered, directly and through others.
        first = member.silent_since or member.probe_sent
        member.silent_since = first
        member.probe_sent = 0
        confirming = member.confirm
        member.confirm = False
        if member.state == ALIVE and (confirming or now - first >= self.timeout):
            self.set_state(member, PFAIL)
            member.reports[self.me] = now
            # Told at once to a few, who probe it and tell a few more: the reports
            # meet in about log(N) probe periods, not at the pace of the probes.
            for via in self.pick_others(member.id, REPORT_FANOUT):
                self.out.append((REPORT, via, member.id))
        elif member.state != ALIVE:
            member.silent_since = now  # (its next probe: a node timeout from now)

    def pick_others(self, exclude: bytes, k: int) -> list[bytes]:
        """Up to k members that can probe for us, at random: a few draws, not a walk
        over every member."""
        ids, members = self.ids, self.members
        picked: list[bytes] = []
        for _ in range(4 * k):
            if len(picked) == k or not ids:
                break
            member = members[ids[self.rng.randrange(len(ids))]]
            if member.state == ALIVE and member.relay and member.id != exclude:
                if member.id not in picked:
                    picked.append(member.id)
        return picked

    def check_fail(self, member: Member, now: int) -> None:
        """Forget stale reports; FAIL when this node sees PFAIL and a majority reports."""
        oldest = now - 2 * self.timeout
        if member.state != ALIVE:
            member.reports[self.me] = now  # ours stays fresh while we see it failing
        for reporter in [r for r, t in member.reports.items() if t < oldest]:
            del member.reports[reporter]
        if member.state == PFAIL and len(member.reports) >= self.size // 2 + 1:
            self.set_state(member, FAIL)
            self.declared.append(member.id)  # (as Disque: FAIL to every node, once)

    def set_state(self, member: Member, state: int) -> None:
        member.state = state
        self.changes.append((member.id, state))

    # ---- what arrives ------------------------------------------------------------------
    def heard_from(self, node_id: bytes, now: int) -> None:
        """Any message from the node (a PONG, a PING, a job's message): it is up."""
        member = self.members.get(node_id)
        if member is None:
            return
        member.heard = now
        if member.probe_sent or member.silent_since or member.reports or member.state:
            self.alive(member)
        if self.relays:
            for asker in self.relays.pop(node_id, []):
                self.out.append((PROBED, asker, node_id))

    def alive(self, member: Member) -> None:
        if member.probe_sent:
            self.answered = True
        member.probe_sent = 0
        member.silent_since = 0
        member.confirm = False
        member.reports.clear()  # every report so far is older than this answer
        if member.state != ALIVE:
            self.set_state(member, ALIVE)

    def on_probe(self, asker: bytes, about: bytes, now: int) -> None:
        """``asker`` could not reach ``about``: ping it, and say so when it answers."""
        member = self.members.get(about)
        if member is None or about == asker:
            return
        askers = self.relays.setdefault(about, [])
        if asker not in askers:
            askers.append(asker)
        self.out.append((PING, about, about))

    def on_fail(self, node_id: bytes, now: int) -> None:
        """Disque's FAIL message: taken as it comes, as Disque does."""
        member = self.members.get(node_id)
        if member is not None and member.state != FAIL:
            self.set_state(member, FAIL)
            member.silent_since = member.silent_since or now
            self.watch[node_id] = member

    def on_probed(self, relay: bytes, about: bytes, now: int) -> None:
        """``about`` answered a probe we asked ``relay`` for."""
        member = self.members.get(about)
        if member is not None:
            member.heard = now
            self.alive(member)

    # ---- gossip ------------------------------------------------------------------------
    def gossip(self, now: int) -> list[tuple[bytes, int, list[tuple[bytes, int]]]]:
        """What this node says about failing members: (member, state, reports as
        (reporter, age in ms)). Every message carries it, as Disque's gossip names
        every failing node."""
        entries = []
        for member in self.watch.values():
            if member.reports or member.state != ALIVE:
                reports = [(r, now - t) for r, t in member.reports.items()]
                entries.append((member.id, member.state, reports))
        return entries

    def on_gossip(
        self,
        sender: bytes,
        entries: list[tuple[bytes, int, list[tuple[bytes, int]]]],
        now: int,
    ) -> None:
        limit = 2 * self.timeout
        for node_id, state, reports in entries:
            if node_id == self.me:
                continue  # (we are up: whoever probes us hears it)
            member = self.members.get(node_id)
            if member is None:
                continue
            if state == ALIVE and sender in member.reports:
                del member.reports[sender]  # the sender withdrew its report
            newest = 0
            for reporter, age in reports:
                at = now - age
                # (A report older than what we last heard from the member is stale.)
                if (
                    not 0 <= age <= limit
                    or at <= member.heard
                    or reporter not in self.members  # (only a member's report counts)
                    or reporter == node_id
                ):
                    continue
                newest = max(newest, at)
                if at > member.reports.get(reporter, -limit):
                    member.reports[reporter] = at
                    self.watch[node_id] = member
            silent = now - member.heard > self.timeout
            if state == FAIL and member.state != FAIL and silent:
                self.set_state(member, FAIL)  # as Disque's FAIL message
                self.watch[node_id] = member
                member.silent_since = member.silent_since or now
            elif newest and member.state == ALIVE and not member.silent_since:
                member.confirm = True  # probe it ourselves, now
                self.watch[node_id] = member

    def take_output(self) -> list[tuple[int, bytes, bytes]]:
        out = self.out
        self.out = []
        return out

    def take_declared(self) -> list[bytes]:
        declared = self.declared
        self.declared = []
        return declared

    def take_changes(self) -> list[tuple[bytes, int]]:
        changes = self.changes
        self.changes = []
        return changes
