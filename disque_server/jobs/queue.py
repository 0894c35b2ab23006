"""Queues: jobs ordered by ctime, blocked GETJOB clients, pause state, stats.

A queue exists while it has jobs, blocked clients or a pause flag; empty
idle queues are evicted by the cron. ``Queues`` holds them all, and a job's
moves in and out of them: enqueue (the first queueing and every re-queue),
dequeue and delivery; the registry (registry.py) refiles the job's timer.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from operator import attrgetter
from typing import TYPE_CHECKING, Final

from sortedcontainers import SortedKeyList

from disque_server.clock import now_ms, now_s
from disque_server.job import (
    ACTIVE,
    FLAG_BCAST_QUEUED,
    FLAG_BCAST_WILLQUEUE,
    FLAG_DELIVERED,
    QUEUED,
    Job,
)
from disque_server.memory import QUEUE_BYTES

if TYPE_CHECKING:
    import asyncio

    from disque_server.client import Client
    from disque_server.hooks import Hooks, JobEvents
    from disque_server.jobs.registry import Jobs

PAUSED_IN: Final = 1
PAUSED_OUT: Final = 2
SERVE_BATCH: Final = 128  # blocked clients served per event-loop pass (~20 us each: a write)
PAUSE_NAMES: Final = {
    0: b"none",
    PAUSED_IN: b"in",
    PAUSED_OUT: b"out",
    PAUSED_IN | PAUSED_OUT: b"all",
}


JOBLIST_LOAD: Final = 512  # jobs a sublist holds; split past twice that


def _first_at_or_after(jobs: list[Job], ctime: int) -> int:
    """Where the first job with a ctime >= ``ctime`` is in a ctime-ordered list."""
    lo, hi = 0, len(jobs)
    while lo < hi:
        mid = (lo + hi) >> 1
        if jobs[mid].ctime < ctime:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _first_after(jobs: list[Job], ctime: int) -> int:
    """Where the first job with a ctime > ``ctime`` is in a ctime-ordered list."""
    lo, hi = 0, len(jobs)
    while lo < hi:
        mid = (lo + hi) >> 1
        if jobs[mid].ctime <= ctime:
            lo = mid + 1
        else:
            hi = mid
    return lo


class JobList:
    """A queue's jobs in ctime order, oldest first (Disque's skiplist by ctime).

    Laid out as sortedcontainers' SortedList is (sorted sublists of at most
    2 x JOBLIST_LOAD jobs, and the greatest ctime of each), written for jobs so
    that it compiles: the common case, a new job newer than every queued one,
    is an append to the last sublist; a re-queued (older) job is a binary
    search and an insert into one sublist; GETJOB takes the first job of the
    first sublist. Jobs with equal ctimes (from different nodes) keep their
    arrival order.
    """

    __slots__ = ("lists", "maxes", "size")

    def __init__(self) -> None:
        self.lists: list[list[Job]] = []  # sorted sublists, none empty
        self.maxes: list[int] = []  # the last (greatest) ctime of each sublist
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[Job]:
        for jobs in self.lists:
            yield from jobs

    def add(self, job: Job) -> None:
        ctime, lists, maxes = job.ctime, self.lists, self.maxes
        if not maxes:
            lists.append([job])
            maxes.append(ctime)
            self.size = 1
            return
        last = len(maxes) - 1
        if ctime >= maxes[last]:  # the newest: appended
            i = last
            lists[i].append(job)
            maxes[i] = ctime
        else:  # older than some: into the first sublist holding a newer one
            i = bisect_right(maxes, ctime)
            jobs = lists[i]
            jobs.insert(_first_after(jobs, ctime), job)
        self.size += 1
        if len(lists[i]) > 2 * JOBLIST_LOAD:
            self.split(i)

    def split(self, i: int) -> None:
        jobs = self.lists[i]
        rest = jobs[JOBLIST_LOAD:]
        del jobs[JOBLIST_LOAD:]
        self.lists.insert(i + 1, rest)
        self.maxes[i] = jobs[-1].ctime
        self.maxes.insert(i + 1, rest[-1].ctime)

    def discard(self, job: Job) -> bool:
        """Take that job out (not another of the same ctime); False if not here."""
        ctime, lists = job.ctime, self.lists
        i = bisect_left(self.maxes, ctime)
        while i < len(lists):
            jobs = lists[i]
            pos = _first_at_or_after(jobs, ctime)
            while pos < len(jobs) and jobs[pos].ctime == ctime:
                if jobs[pos] is job:
                    del jobs[pos]
                    self.removed_from(i)
                    return True
                pos += 1
            if pos < len(jobs):
                return False  # past its ctime
            i += 1  # equal ctimes may go on in the next sublist
        return False

    def removed_from(self, i: int) -> None:
        self.size -= 1
        jobs = self.lists[i]
        if jobs:
            self.maxes[i] = jobs[-1].ctime
        else:
            del self.lists[i]
            del self.maxes[i]

    def popleft(self) -> Job:
        """The oldest job, taken out (the queue must not be empty)."""
        jobs = self.lists[0]
        job = jobs.pop(0)
        self.removed_from(0)
        return job

    def first(self, count: int) -> list[Job]:
        """The ``count`` oldest jobs, oldest first."""
        out: list[Job] = []
        for jobs in self.lists:
            if len(out) >= count:
                break
            out.extend(jobs[: count - len(out)])
        return out

    def last(self, count: int) -> list[Job]:
        """The ``count`` newest jobs, newest first."""
        out: list[Job] = []
        for jobs in reversed(self.lists):
            if len(out) >= count:
                break
            out.extend(reversed(jobs[-(count - len(out)) :]))
        return out

    def clear(self) -> None:
        self.lists = []
        self.maxes = []
        self.size = 0


def scan_key(name: bytes) -> int:
    """Stable 62-bit position of a queue name in QSCAN's iteration order."""
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big") >> 2


class Queue:
    """One named queue on this node."""

    __slots__ = (
        "name",  # the queue's name (any bytes)
        "jobs",  # the queued jobs, by ctime (JobList)
        "ctime",  # creation time, s
        "atime",  # last access, s: a job queued, fetched, or a client blocked here
        "flags",  # PAUSED_IN / PAUSED_OUT (QPAUSE)
        "clients",  # clients blocked in GETJOB here, oldest first
        "jobs_in",  # jobs ever queued here (QSTAT jobs-in)
        "jobs_out",  # jobs ever dequeued from here (QSTAT jobs-out)
        "scan_key",  # where QSCAN's cursor puts this queue
        "import_cur_time",  # federation: the second import_cur_count counts
        "import_cur_count",  # ... jobs imported from other nodes in it
        "import_prev_time",  # ... the second before
        "import_prev_count",  # ... and its imports: together, QSTAT's import-rate
        "needjobs_bcast_time",  # last NEEDJOBS broadcast to every node, ms
        "needjobs_adhoc_time",  # last NEEDJOBS to the nodes that gave jobs lately, ms
        "needjobs_bcast_attempt",  # broadcasts in a row that brought no job
        "needjobs_adhoc_attempt",  # ad hoc requests in a row that brought no job
        "needjobs_responders",  # node id -> when it last sent jobs (YOURJOBS), ms
    )

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.jobs = JobList()
        self.ctime = self.atime = now_s()
        self.flags = 0
        self.clients: dict[Client, None] = {}  # blocked GETJOB clients, FIFO
        self.jobs_in = self.jobs_out = 0
        self.scan_key = scan_key(name)
        # Federation (cluster): jobs imported in this second and the previous one.
        self.import_cur_time = self.import_prev_time = self.ctime
        self.import_cur_count = self.import_prev_count = 0
        self.needjobs_bcast_time = self.needjobs_adhoc_time = 0
        self.needjobs_bcast_attempt = self.needjobs_adhoc_attempt = 0
        self.needjobs_responders: dict[bytes, int] = {}  # node id -> last YOURJOBS (ms)

    def __len__(self) -> int:
        return len(self.jobs)

    def count_import(self, n: int = 1) -> None:
        now = now_s()
        if now != self.import_cur_time:
            self.import_prev_time, self.import_prev_count = (
                self.import_cur_time,
                self.import_cur_count,
            )
            self.import_cur_time, self.import_cur_count = now, 0
        self.import_cur_count += n

    @property
    def import_rate(self) -> int:
        """Jobs per second imported lately (0 after 5 s without imports)."""
        now = now_s()
        if now - self.import_cur_time > 5:
            return 0
        elapsed = max(now - self.import_prev_time, 1)
        return int((self.import_prev_count + self.import_cur_count) / elapsed)

    def valid_responders(self, now_ms: int, ttl_ms: int = 5000) -> list[bytes]:
        for node_id, t in list(self.needjobs_responders.items()):
            if now_ms - t > ttl_ms:
                del self.needjobs_responders[node_id]
        return list(self.needjobs_responders)

    @property
    def pause_name(self) -> bytes:
        return PAUSE_NAMES[self.flags & (PAUSED_IN | PAUSED_OUT)]

    def stat(self) -> dict[bytes, object]:
        now = now_s()
        return {
            b"name": self.name,
            b"len": len(self.jobs),
            b"age": now - self.ctime,
            b"idle": now - self.atime,
            b"blocked": len(self.clients),
            b"import-from": self.valid_responders(now * 1000),
            b"import-rate": self.import_rate,
            b"jobs-in": self.jobs_in,
            b"jobs-out": self.jobs_out,
            b"pause": self.pause_name,
        }


class Queues:
    """All queues of the node, and a job's moves in and out of them."""

    registry: Jobs  # (jobs.build sets it: the registry refiles a job's timer)

    def __init__(self, hooks: Hooks, events: JobEvents, loop: asyncio.AbstractEventLoop) -> None:
        self.hooks = hooks  # a blocked client to serve (hooks.py)
        self.events = events  # re-queues and deliveries the other owners hear of
        self.loop = loop
        self.by_name: dict[bytes, Queue] = {}
        self.scan_index: SortedKeyList = SortedKeyList(key=attrgetter("scan_key"))
        self.ready: dict[Queue, None] = {}  # queues that got jobs while clients wait
        self.with_clients: dict[Queue, None] = {}  # queues with blocked clients
        self._serve_scheduled = False
        # Queue name -> the other nodes whose clients wait on it (cluster/demand.py
        # keeps it), and the queues that got jobs no client here waits for.
        self.wanted_elsewhere: dict[bytes, dict[bytes, int]] = {}
        self.offered: dict[Queue, None] = {}
        self._offer_scheduled = False
        self.data_bytes = 0  # what the queues cost (used_memory), their jobs apart

    # ---- low level --------------------------------------------------------
    def lookup(self, name: bytes | None) -> Queue | None:
        """The queue of that name; None for none, or for no name (a dummy ACK's job)."""
        return self.by_name.get(name) if name is not None else None

    def create(self, name: bytes) -> Queue:
        q = self.by_name.get(name)
        if q is None:
            q = self.by_name[name] = Queue(name)
            self.scan_index.add(q)
            self.data_bytes += QUEUE_BYTES + len(name)
        return q

    def destroy(self, q: Queue) -> None:
        del self.by_name[q.name]
        self.data_bytes -= QUEUE_BYTES + len(q.name)
        self.scan_index.remove(q)
        self.ready.pop(q, None)
        self.with_clients.pop(q, None)

    def flush(self) -> None:
        """DEBUG FLUSHALL, CLUSTER RESET (with the jobs): every queue is gone but
        those clients are blocked on, which are left empty."""
        for q in list(self.by_name.values()):
            if not q.clients:
                self.destroy(q)
            else:
                q.jobs.clear()

    def __len__(self) -> int:
        return len(self.by_name)

    def __iter__(self) -> Iterator[Queue]:
        return iter(list(self.by_name.values()))

    def length(self, name: bytes) -> int:
        q = self.by_name.get(name)
        return len(q.jobs) if q else 0

    # ---- the job state machine: queue side ------------------------------------
    def enqueue_job(self, job: Job, nack: bool = False, now: int = 0) -> bool:
        """Put an active job into its queue; False when it cannot be queued.
        ``now``: the caller's clock reading in ms, if it has one."""
        if job.state == QUEUED:
            return False
        if job.retry == 0 and job.flags & FLAG_DELIVERED:
            return False  # at-most-once: delivered once, never again
        now = now or now_ms()
        job.state = QUEUED
        if job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
            job.qtime = job.requeue_at(now)
        else:
            job.qtime = 0
        # The first queueing is not news for the other owners; re-queues are.
        if job.flags & FLAG_BCAST_QUEUED or nack:
            if nack:
                job.nacks += 1
            else:
                job.deliveries += 1
            self.events.job_requeued(job, nack)
        else:
            job.flags |= FLAG_BCAST_QUEUED
        self.registry.update_awake(job, now)
        name = job.queue
        assert name is not None  # only a dummy ACK has no queue, and it is never queued
        q = self.by_name.get(name)
        if q is None:
            q = self.create(name)
        q.jobs.add(job)
        q.jobs_in += 1
        self.jobs_ready(q)
        return True

    def dequeue_job(self, job: Job) -> bool:
        """Remove a queued job from its queue: it becomes active."""
        if job.state != QUEUED:
            return False
        q = self.lookup(job.queue)
        if q is not None:
            q.jobs.discard(job)
            q.jobs_out += 1
        job.state = ACTIVE
        return True

    def fetch_job(self, q: Queue) -> Job | None:
        """Take the oldest job for a client (GETJOB), unless paused in output."""
        if not q.jobs or q.flags & PAUSED_OUT:
            return None
        job = q.jobs.popleft()
        self.mark_delivered(q, job)
        if not q.jobs:
            self.events.queue_drained(q)
        return job

    def mark_delivered(self, q: Queue, job: Job) -> None:
        job.state = ACTIVE
        job.flags |= FLAG_DELIVERED
        now = now_ms()
        q.atime = now // 1000
        q.jobs_out += 1
        if job.retry:
            # The retry period counts from the delivery: the worker gets it all.
            job.flags |= FLAG_BCAST_WILLQUEUE
            job.qtime = job.requeue_at(now)
            self.registry.update_awake(job, now)
            if len(job.nodes_delivered) > 1:
                self.events.job_working(job)  # the other owners wait too

    # ---- blocking ------------------------------------------------------------
    def block_client(self, client: Client, names: list[bytes]) -> None:
        for name in names:
            q = self.create(name)
            q.clients[client] = None
            self.with_clients[q] = None

    def unblock_client(self, client: Client, names: list[bytes]) -> None:
        for name in names:
            q = self.by_name.get(name)
            if q is not None:
                q.clients.pop(client, None)
                if not q.clients:
                    self.with_clients.pop(q, None)

    def jobs_ready(self, q: Queue) -> None:
        """The queue has jobs to hand out: to the clients waiting here, else to other
        nodes whose clients wait on it (federation), else they stay queued."""
        if q.clients:
            self.signal_ready(q)
        elif q.name in self.wanted_elsewhere:
            self.offer(q)

    def signal_ready(self, q: Queue) -> None:
        """Blocked clients are served once per loop pass, after all input."""
        self.ready[q] = None
        if not self._serve_scheduled:
            self._serve_scheduled = True
            self.loop.call_soon(self.serve_ready_queues)

    def serve_ready_queues(self) -> None:
        """Serve up to SERVE_BATCH blocked clients, then let other events in."""
        self._serve_scheduled = False
        budget = SERVE_BATCH
        while self.ready:
            q = next(iter(self.ready))
            while q.clients and q.jobs and not q.flags & PAUSED_OUT:
                if budget == 0:  # more next pass: a reply is a write() each
                    self._serve_scheduled = True
                    self.loop.call_soon(self.serve_ready_queues)
                    return
                budget -= 1
                client = next(iter(q.clients))
                self.hooks.serve_blocked(client, q)
            self.ready.pop(q, None)

    # ---- jobs for the clients of other nodes (federation) ---------------------------
    def offer(self, q: Queue) -> None:
        """Jobs no client here waits for, in a queue whose clients wait elsewhere: the
        cluster gives them away once per loop pass (a pipeline's jobs go together)."""
        self.offered[q] = None
        if not self._offer_scheduled:
            self._offer_scheduled = True
            self.loop.call_soon(self.offer_jobs)

    def offer_jobs(self) -> None:
        self._offer_scheduled = False
        offered, self.offered = self.offered, {}
        for q in offered:  # (federation.push_jobs sees whether they are still to give)
            self.events.queue_wanted_elsewhere(q)

    # ---- pause ------------------------------------------------------------------
    def set_pause(self, q: Queue, flags: int) -> None:
        was_out = q.flags & PAUSED_OUT
        q.flags = (q.flags & ~(PAUSED_IN | PAUSED_OUT)) | flags
        if was_out and not flags & PAUSED_OUT and q.jobs:
            self.jobs_ready(q)

    # ---- eviction -----------------------------------------------------------------
    def evict_idle(self, max_idle: int) -> int:
        """Destroy empty queues idle for longer than max_idle seconds."""
        now = now_s()
        evicted = 0
        for q in list(self.by_name.values()):
            if not q.jobs and not q.clients and not q.flags and now - q.atime > max_idle:
                self.destroy(q)
                evicted += 1
        return evicted
