"""Queue order (disque_server/queue.py, job.py), in-process: a queue holds its
jobs by ctime, oldest first, and the node's ctime clock never repeats or goes
back, so jobs created on one node come out in the order they were added."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import new_jobs

from disque_server.job import ACTIVE, QUEUED, CtimeClock, Job
from disque_server.jobs.queue import JOBLIST_LOAD, PAUSED_IN, JobList, Queue

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

NODE = b"0f1e2d3c"


def job(n: int, ctime: int) -> Job:
    j = Job(b"D-%s-%024d-05a1" % (NODE, n), QUEUED, 0, 30)
    j.queue = b"q"
    j.ctime = ctime
    return j


@RELAXED
@given(readings=st.lists(st.integers(1, 2**42), min_size=1, max_size=200))
def test_ctime_clock_strictly_increases_whatever_the_clock_does(readings: list[int]) -> None:
    clock = CtimeClock()
    ctimes = [clock.next(ms) for ms in readings]
    assert all(a < b for a, b in zip(ctimes, ctimes[1:], strict=False))
    for ms, ctime in zip(readings, ctimes, strict=True):
        assert ctime >= ms * 1_000_000  # never behind the clock read


def test_ctime_clock_follows_the_clock_and_counts_within_a_millisecond() -> None:
    clock = CtimeClock()
    assert [clock.next(5), clock.next(5), clock.next(5)] == [5_000_000, 5_000_001, 5_000_002]
    assert clock.next(4) == 5_000_003  # the clock went back: keep counting
    assert clock.next(7) == 7_000_000  # the clock moved on: follow it
    assert clock.next() > 7_000_000  # no reading given: the wall clock


@RELAXED
@given(order=st.permutations(range(30)))
def test_queue_holds_jobs_oldest_first(order: list[int]) -> None:
    clock = CtimeClock()
    jobs = [job(n, clock.next(1000 + n // 3)) for n in range(30)]
    q = Queue(b"q")
    for n in order:
        q.jobs.add(jobs[n])
    assert list(q.jobs) == jobs  # QPEEK q 30
    assert q.jobs.first(5) == jobs[:5]  # QPEEK q 5
    assert q.jobs.last(3) == jobs[:-4:-1]  # QPEEK q -3: newest first
    assert q.jobs.popleft() is jobs[0]  # GETJOB takes the oldest


@RELAXED
@given(data=st.data())
def test_dequeue_takes_out_that_job_among_equal_ctimes(data: st.DataObject) -> None:
    """Jobs replicated from several nodes may share a ctime: each is still its own."""
    jobs = [job(n, ctime=42) for n in range(8)] + [job(8, ctime=41), job(9, ctime=43)]
    queues = new_jobs()[1]
    q = queues.create(b"q")
    for j in data.draw(st.permutations(jobs)):
        q.jobs.add(j)
    victim = data.draw(st.sampled_from(jobs))
    assert queues.dequeue_job(victim)
    assert victim.state == ACTIVE and victim not in list(q.jobs)
    assert len(q) == 9 and q.jobs_out == 1
    assert not queues.dequeue_job(victim)  # not queued any more
    assert q.jobs.first(1)[0].ctime <= q.jobs.last(1)[0].ctime


def test_evict_idle_keeps_queues_with_jobs_clients_or_a_pause() -> None:
    queues = new_jobs()[1]
    idle, with_job, paused, blocked, recent = (
        queues.create(name) for name in (b"idle", b"job", b"paused", b"blocked", b"recent")
    )
    for q in (idle, with_job, paused, blocked):
        q.atime -= 1000
    with_job.jobs.add(job(1, 1))
    paused.flags = PAUSED_IN
    blocked.clients[object()] = None
    assert queues.evict_idle(max_idle=120) == 1
    assert queues.lookup(b"idle") is None
    assert sorted(q.name for q in queues) == [b"blocked", b"job", b"paused", b"recent"]
    assert len(queues.scan_index) == 4  # QSCAN forgets it too


@pytest.mark.parametrize("seed", range(3))
def test_job_list_against_a_sorted_list_through_its_splits(seed: int) -> None:
    """Thousands of adds (mostly newest, some older, some equal ctimes), discards
    and pops, past several sublist splits: always the order of a plain sort by
    ctime, arrival order between equals."""
    rnd = random.Random(seed)
    jobs = JobList()
    model: list[tuple[int, int, Job]] = []  # (ctime, arrival, job)
    ctime = 1000
    for arrival in range(6 * JOBLIST_LOAD):
        roll = rnd.random()
        if roll < 0.6:
            ctime += rnd.randint(0, 2)  # newest (sometimes equal to the last)
            j = job(arrival, ctime)
        else:
            j = job(arrival, rnd.randint(900, ctime))  # a re-queue: older
        jobs.add(j)
        model.append((j.ctime, arrival, j))
        if roll > 0.9 and model:
            _, _, victim = model.pop(rnd.randrange(len(model)))
            assert jobs.discard(victim)
            assert not jobs.discard(victim)
        if roll < 0.05 and model:
            model.sort(key=lambda entry: entry[:2])
            assert jobs.popleft() is model.pop(0)[2]
    model.sort(key=lambda entry: entry[:2])
    expected = [entry[2] for entry in model]
    assert len(jobs.lists) > 2  # it did split
    assert list(jobs) == expected and len(jobs) == len(expected)
    assert jobs.first(700) == expected[:700]
    assert jobs.last(700) == expected[::-1][:700]
