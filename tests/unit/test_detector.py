"""The failure detector (disque_server/cluster/detector.py), fed by hand: what it
sends, when a member becomes PFAIL and FAIL, what clears them. And the simulator
(bench/membership_sim.py) on the same code: its work per node does not grow
with the cluster."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from disque_server.cluster.detector import (
    ALIVE,
    FAIL,
    INDIRECT_PROBES,
    PFAIL,
    PING,
    PROBE,
    PROBED,
    REPORT,
    REPORT_FANOUT,
    Detector,
    protocol_period,
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 3000
PERIOD = protocol_period(TIMEOUT)
ME = b"m" * 40
T0 = 1_000_000  # the clock at the start (ms; the node's is the epoch's, never 0)


def node_id(i: int) -> bytes:
    return b"%040d" % i


def detector(members: int, seed: int = 7) -> Detector:
    det = Detector(ME, TIMEOUT, random.Random(seed))
    for i in range(members):
        det.add(node_id(i))
    return det


def run(det: Detector, start: int, end: int, answer: bool = True) -> list[tuple[int, bytes, bytes]]:
    """Tick every 100 ms from start to end; each PING answered at once when ``answer``."""
    sent = []
    for now in range(start, end, 100):
        det.tick(now)
        out = det.take_output()
        sent += out
        if answer:
            for kind, to, _ in out:
                if kind == PING:
                    det.heard_from(to, now)
    return sent


def test_a_node_probes_one_member_a_period_whatever_the_cluster_size() -> None:
    for members in (9, 99, 999):
        det = detector(members)
        pings = [s for s in run(det, T0, T0 + 10 * PERIOD) if s[0] == PING]
        assert len(pings) == 10, members
        assert len({to for _, to, _ in pings}) == min(10, members)  # a round, not repeats


def test_a_round_probes_every_member_once() -> None:
    det = detector(20)
    pings = [to for kind, to, _ in run(det, T0, T0 + 20 * PERIOD) if kind == PING]
    assert sorted(pings) == [node_id(i) for i in range(20)]


def probe_one(det: Detector, now: int = T0) -> bytes:
    det.tick(now)
    [(kind, target, _)] = det.take_output()
    assert kind == PING
    return target


def test_an_unanswered_probe_asks_others_at_half_the_period() -> None:
    det = detector(10)
    target = probe_one(det)
    det.tick(T0 + PERIOD // 2 - 100)
    assert det.take_output() == []
    det.tick(T0 + PERIOD // 2)
    asked = det.take_output()
    assert len(asked) == INDIRECT_PROBES
    assert {kind for kind, _, _ in asked} == {PROBE}
    assert {about for _, _, about in asked} == {target}
    assert target not in {via for _, via, _ in asked}


def test_next_due_is_the_probe_timers_then_the_next_probe_once_answered() -> None:
    """What an idle node's cron sleeps until (Server.cron_period): the half period
    of a probe in flight, then, once it is answered, the next probe; 0 (tick at
    least twice a period) while a member is suspected."""
    det = detector(10)
    target = probe_one(det)
    assert det.next_due() == T0 + PERIOD // 2
    det.heard_from(target, T0 + 1)
    assert det.answered  # (the host moves its tick later: Server.defer_slow_tick)
    assert det.next_due() == T0 + PERIOD
    det.tick(T0 + PERIOD + 40)  # a tick a little late: the next probe keeps the pace
    silent = [to for kind, to, _ in det.take_output() if kind == PING]
    assert det.next_due() == T0 + PERIOD + 40 + PERIOD // 2
    det.tick(T0 + PERIOD + 40 + PERIOD // 2)
    det.take_output()  # (its indirect probes)
    assert det.next_due() == T0 + 2 * PERIOD  # (the next probe comes first)
    det.tick(T0 + 2 * PERIOD + 40)  # unanswered to its end: a suspect now
    assert silent[0] in det.watch and det.watch[silent[0]].silent_since
    assert det.next_due() == 0


def test_an_answer_relayed_by_another_node_keeps_the_member_alive() -> None:
    det = detector(10)
    target = probe_one(det)
    now = T0
    while now < T0 + 2 * TIMEOUT:
        det.tick(now)
        for kind, via, about in det.take_output():
            if kind == PROBE:  # the direct path is down; the relay gets through
                det.on_probed(via, about, now)
        now += 100
    assert det.take_changes() == []
    assert det.state_of(target) == ALIVE


def silence(det: Detector, target: bytes, start: int, end: int) -> None:
    """Time passes; every member but ``target`` answers its probes."""
    for now in range(start, end, 100):
        det.tick(now)
        for kind, to, _ in det.take_output():
            if kind == PING and to != target:
                det.heard_from(to, now)


def test_a_member_silent_for_the_node_timeout_is_pfail_and_gossiped_as_such() -> None:
    det = detector(10)
    target = probe_one(det)
    silence(det, target, T0 + 100, T0 + TIMEOUT)
    assert det.state_of(target) == ALIVE  # probed every period, not yet the node timeout
    silence(det, target, T0 + TIMEOUT, T0 + TIMEOUT + PERIOD + 200)
    assert det.state_of(target) == PFAIL
    assert det.take_changes() == [(target, PFAIL)]
    [(about, state, reports)] = det.gossip(T0 + TIMEOUT + PERIOD + 200)
    assert (about, state) == (target, PFAIL)
    assert [r for r, _ in reports] == [ME]


def test_a_pfail_of_our_own_is_told_at_once_to_a_few_others() -> None:
    det = detector(20)
    target = probe_one(det)
    told = []
    for now in range(T0 + 100, T0 + TIMEOUT + PERIOD + 200, 100):
        det.tick(now)
        for kind, to, about in det.take_output():
            if kind == PING and to != target:
                det.heard_from(to, now)
            elif kind == REPORT:
                told.append((to, about, det.state_of(target)))
    assert len(told) == REPORT_FANOUT
    assert {about for _, about, _ in told} == {target}
    assert {state for _, _, state in told} == {PFAIL}  # (told once it is ours)
    assert target not in {to for to, _, _ in told}


def pfail(det: Detector, target: bytes) -> int:
    """Silence from the first probe (at T0) until PFAIL; the time then."""
    end = T0 + TIMEOUT + PERIOD + 200
    silence(det, target, T0 + 100, end)
    assert det.state_of(target) == PFAIL
    return end


def test_fail_needs_a_majority_of_reports() -> None:
    det = detector(9)  # a cluster of 10: 6 make a majority
    target = probe_one(det)
    now = pfail(det, target)
    others = [node_id(i) for i in range(9) if node_id(i) != target]
    det.on_gossip(others[0], [(target, PFAIL, [(r, 100) for r in others[:4]])], now)
    det.tick(now)
    assert det.state_of(target) == PFAIL  # 4 + ours: 5
    det.on_gossip(others[5], [(target, PFAIL, [(others[5], 0)])], now)
    det.tick(now + 100)
    assert det.state_of(target) == FAIL
    assert (target, FAIL) in det.take_changes()
    assert det.take_declared() == [target]  # this node counted it: it tells every node


def test_reports_expire_after_twice_the_node_timeout() -> None:
    det = detector(9)
    target = node_id(3)
    det.on_gossip(node_id(1), [(target, PFAIL, [(node_id(1), 0), (node_id(2), 0)])], T0)
    assert {r for r, _ in det.gossip(T0)[0][2]} == {node_id(1), node_id(2)}
    too_old = 2 * TIMEOUT + 1
    det.on_gossip(node_id(4), [(target, PFAIL, [(node_id(4), too_old)])], T0)
    assert node_id(4) not in {r for r, _ in det.gossip(T0)[0][2]}
    nearly = 2 * TIMEOUT - 100
    det = detector(9)
    det.on_gossip(node_id(1), [(target, PFAIL, [(node_id(1), nearly)])], T0)
    assert det.gossip(T0) != []
    det.tick(T0 + 200)
    assert det.gossip(T0 + 200) == []


def test_a_report_makes_this_node_probe_the_member_at_once_and_confirm() -> None:
    det = detector(20)
    target = node_id(5)
    det.tick(T0)
    det.take_output()
    det.on_gossip(node_id(1), [(target, PFAIL, [(node_id(1), 0)])], T0 + 100)
    det.tick(T0 + 200)
    assert (PING, target, target) in det.take_output()
    silence(det, target, T0 + 300, T0 + 200 + PERIOD + 100)
    assert det.state_of(target) == PFAIL  # one unanswered probe, after another's report


def test_hearing_from_the_member_clears_pfail_and_withdraws_the_reports() -> None:
    det = detector(9)
    target = probe_one(det)
    now = pfail(det, target)
    det.take_changes()
    det.heard_from(target, now)
    assert det.state_of(target) == ALIVE
    assert det.take_changes() == [(target, ALIVE)]
    assert det.gossip(now) == []
    # An old report relayed later is older than the answer: ignored.
    det.on_gossip(node_id(8), [(target, PFAIL, [(node_id(8), 500)])], now + 100)
    assert det.gossip(now + 100) == []


def test_fail_from_gossip_is_taken_only_from_a_member_silent_here_too() -> None:
    det = detector(9)
    target = node_id(2)
    det.heard_from(target, T0)
    det.on_gossip(node_id(1), [(target, FAIL, [])], T0 + 1000)
    assert det.state_of(target) == ALIVE  # we heard from it a second ago
    det.on_gossip(node_id(1), [(target, FAIL, [])], T0 + TIMEOUT + 1)
    assert det.state_of(target) == FAIL
    assert det.take_declared() == []  # heard, not counted: nothing to broadcast
    det.on_fail(node_id(4), T0 + TIMEOUT + 2)  # Disque's FAIL message: taken at once
    assert det.state_of(node_id(4)) == FAIL
    assert det.take_declared() == []


def test_a_probe_asked_for_is_relayed_when_the_member_answers() -> None:
    det = detector(9)
    det.on_probe(node_id(1), node_id(2), T0)
    assert det.take_output() == [(PING, node_id(2), node_id(2))]
    det.heard_from(node_id(2), T0 + 10)
    assert det.take_output() == [(PROBED, node_id(1), node_id(2))]
    det.heard_from(node_id(2), T0 + 20)
    assert det.take_output() == []  # once


def test_a_failing_member_is_probed_again_once_a_node_timeout() -> None:
    det = detector(9)
    target = probe_one(det)
    now = pfail(det, target)
    pings = [s for s in run(det, now, now + 2 * TIMEOUT, answer=False) if s[1] == target]
    assert 1 <= len(pings) <= 3


@pytest.mark.timeout(60)
def test_the_simulator_work_per_node_stays_flat_and_a_killed_node_fails_everywhere() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "membership_sim.py"), "--nodes", "10", "200"]
        + ["--idle", "10", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    small, large = (json.loads(line) for line in out.splitlines())
    assert large["msgs_per_node_s"] <= 1.2 * small["msgs_per_node_s"]
    for row in (small, large):
        assert row["false_pfail_per_node_hour"] == 0
        assert row["all_fail_s"] < 4 * TIMEOUT / 1000  # a FAIL that spread to every node
        assert row["pause_marked_fail"] and row["pause_clear_s"] < TIMEOUT / 1000
    assert large["all_fail_s"] <= 2 * small["all_fail_s"]


def test_the_period_is_a_sixth_of_the_node_timeout_but_no_busier_than_disque_when_small() -> None:
    assert protocol_period(3000, 999) == protocol_period(3000, 6) == 500
    assert protocol_period(1500, 2) == 750  # 3 nodes: each pair about once a half timeout
    assert protocol_period(1500, 0) == 750
    assert protocol_period(100, 50) == 100  # (a floor)
    det = detector(2)
    assert det.period == 1500
    for i in range(2, 12):
        det.add(node_id(i))
    assert det.period == 500
