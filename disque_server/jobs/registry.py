"""The job registry: lookup by ID, the awake timers, and processJob.

Timers for millions of jobs must not scan: every registered job sits in one
time bucket (``BUCKET_MS`` wide) keyed by its next awake time; a heap holds
the bucket keys. The cron pops due buckets and runs ``process_job`` on each
job, which expires it, re-queues it, or retries its garbage collection.
Buckets are sets, so unregistering a job frees it at once.

Placing a job in its bucket waits for the cron, the only reader of the
buckets: a request that sets a job's awake time only records it and lists
the job once (``FLAG_UNPLACED``), and the cron files the listed jobs before
it looks at what is due. A job created, delivered and acknowledged between
two ticks (the common life of a job) never touches a bucket at all.

The timers' size follows the jobs they hold: a bucket emptied before its
time (its jobs acknowledged, deleted or moved) is dropped at once, and the
heap, which cannot remove a key cheaply, is rebuilt from the live buckets
when its stale keys outnumber them. Without this, a job rate times RETRY
(300 s by default) of emptied buckets would wait for their time to be freed.

JSCAN walks the parts of the job index (``JobIndex``) in a fixed order; its
cursor is the next part, so a job present during a whole iteration is
returned exactly once, whatever is added or removed meanwhile.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

from mypy_extensions import i64

from disque_server.clock import now_ms
from disque_server.hooks import Hooks
from disque_server.job import (
    ACKED,
    ACTIVE,
    FLAG_BCAST_WILLQUEUE,
    FLAG_NACK_DELAYED,
    FLAG_UNPLACED,
    QUEUED,
    WILLQUEUE_ADVANCE_MS,
    Job,
)
from disque_server.jobs.queue import PAUSED_IN
from disque_server.memory import JOB_BYTES

if TYPE_CHECKING:
    from disque_server.hooks import JobEvents
    from disque_server.jobs.ack import Acks
    from disque_server.jobs.queue import Queues
    from disque_server.log import Log
    from disque_server.memory import Memory

BUCKET_MS: Final = 50
HEAP_SLACK: Final = 64  # stale heap keys tolerated beyond twice the live buckets

# The job index is split in up to INDEX_PARTS dicts by the hash of the ID.
INDEX_PARTS: Final = 1 << 10  # ~1,000 IDs a part at 1M jobs (a copy of one: ~40 µs)
INDEX_PART_MASK: Final = INDEX_PARTS - 1
INDEX_PART_SHIFT: Final = 40  # hash bits 40-49 choose the part; a dict starts from bit 0


def index_part(jid: bytes) -> int:
    """The part of the job index an ID lives in: high bits of its hash. (A dict finds a
    key's first slot from the low bits: were parts chosen by them, every key of a part
    would start at the same slot, and each lookup would probe along a chain.)"""
    return (i64(hash(jid)) >> INDEX_PART_SHIFT) & INDEX_PART_MASK


class JobIndex:
    """Job ID -> Job, as INDEX_PARTS small dicts chosen by the ID's hash.

    Split for two reasons. A dict that grows copies itself whole when it
    resizes: 27 ms at 700,000 entries, 55 ms at 1.4M, an event-loop stall each;
    parts stay small, and so does each copy. And JSCAN walks the parts in
    order: its cursor is the next part to visit, so a job present during a
    whole iteration is returned exactly once, whatever is added or removed
    meanwhile, at no cost per job. The parts are slots of a list (an index,
    no hash), None while empty. (String hashes are fixed for the life of the
    process, as cursors are.)
    """

    __slots__ = ("parts", "count")

    def __init__(self) -> None:
        self.parts: list[dict[bytes, Job] | None] = [None] * INDEX_PARTS
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __contains__(self, jid: bytes) -> bool:
        part = self.parts[index_part(jid)]
        return part is not None and jid in part

    def get(self, jid: bytes) -> Job | None:
        part = self.parts[index_part(jid)]
        return part.get(jid) if part is not None else None

    def add(self, jid: bytes, job: Job) -> bool:
        """Add a job not known yet; False (and nothing changed) when the ID is known."""
        key = index_part(jid)
        part = self.parts[key]
        if part is None:
            self.parts[key] = {jid: job}
        else:
            known = len(part)
            part.setdefault(jid, job)  # (one probe of the table, not two)
            if len(part) == known:
                return False
        self.count += 1
        return True

    def pop(self, jid: bytes) -> Job | None:
        key = index_part(jid)
        part = self.parts[key]
        job = part.pop(jid, None) if part is not None else None
        if job is None:
            return None
        if not part:
            self.parts[key] = None  # (an emptied dict keeps its table)
        self.count -= 1
        return job

    def part_jobs(self, key: int) -> list[Job]:
        """The jobs of one part (an AOF rewrite walks them in order, as JSCAN)."""
        part = self.parts[key]
        return list(part.values()) if part is not None else []

    def values(self) -> Iterator[Job]:
        for part in list(self.parts):
            if part is not None:
                yield from list(part.values())

    def clear(self) -> None:
        self.parts = [None] * INDEX_PARTS
        self.count = 0

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """At least ``count`` IDs (whole parts) from ``cursor`` on, and the next cursor."""
        parts = self.parts
        ids: list[bytes] = []
        key = cursor
        while key < INDEX_PARTS and len(ids) < count:
            part = parts[key]
            if part:
                ids.extend(part)
            key += 1
        return (key if key < INDEX_PARTS else 0), ids


class Jobs:
    """All jobs known to this node."""

    def __init__(
        self, events: JobEvents, memory: Memory, log: Log, queues: Queues, acks: Acks
    ) -> None:
        self.events = events  # what the cluster and the AOF hear (hooks.JobEvents)
        self.memory = memory
        self.log = log
        self.queues = queues
        self.acks = acks
        self.by_id = JobIndex()
        self.buckets: dict[int, set[Job]] = {}
        self.bucket_heap: list[int] = []
        self.unplaced: list[Job] = []  # awake time set since the last tick, not filed
        self.unplaced_first = 0  # the earliest of their awake times (ms; 0: none)
        # When the cron's next tick is, in ms, if an idle or quiet node set it later
        # than 1 / hz (Server.cron_period); 0 if not. A timer set before it calls
        # the tick sooner (hooks.timer_due_sooner).
        self.next_tick = 0
        self.hooks = Hooks()  # (jobs.build sets the server's)
        self.data_bytes = 0  # what the jobs cost (used_memory): JOB_BYTES + body each
        # data_bytes past which the next maxmemory level starts (refresh_memory sets
        # it): crossing it refreshes the level at once, not at the next cron tick.
        self.refresh_at = 0
        # How many times every job was forgotten at once (flush: no unregister of
        # each): a replication started before one finds its job gone by this.
        self.flushes = 0

    def __len__(self) -> int:
        return len(self.by_id)

    def lookup(self, jid: bytes) -> Job | None:
        """The job of that ID, if this node knows it."""
        return self.by_id.get(jid)

    def register(self, job: Job, schedule: bool = True) -> bool:
        """Add a job; ``schedule=False`` when the caller sets its timer right after."""
        if not self.by_id.add(job.id, job):
            return False
        self.data_bytes += JOB_BYTES + len(job.body or b"")
        if self.data_bytes > self.refresh_at:
            self.refresh_memory()
        if schedule:
            self.update_awake(job)
        return True

    def refresh_memory(self) -> int:
        """The maxmemory level now (memory.py), from the jobs' and the queues' data;
        and the data_bytes past which it is to be computed again."""
        memory = self.memory
        level = memory.refresh(self.data_bytes, self.queues.data_bytes)
        self.refresh_at = memory.refresh_at
        return level

    def start(self, job: Job, now: int = 0) -> None:
        """A new job replicated as asked (or needing no copy): register it and
        activate it. ``now``: the caller's clock reading in ms, if it has one."""
        self.register(job, schedule=False)  # activate sets its timer
        self.activate(job, now)

    def activate(self, job: Job, now: int = 0) -> None:
        """Queue a new job, or with a DELAY let it wait for its queue time."""
        if job.delay:
            job.state = ACTIVE
            self.update_awake(job)
        else:
            self.queues.enqueue_job(job, now=now)
        self.events.job_changed(job)

    def unregister(self, job: Job) -> None:
        """Forget a job entirely: queue, timers, index."""
        if self.by_id.pop(job.id) is None:
            return
        self.data_bytes -= JOB_BYTES + len(job.body or b"")
        if job.state == QUEUED:
            self.queues.dequeue_job(job)
        self._unschedule(job)
        if self.acks.waits:  # ACKJOB replies waiting for its GC
            self.acks.on_job_gone(job.id)
        self.events.job_unregistered(job)

    # ---- timers ---------------------------------------------------------------
    def update_awake(self, job: Job, now: int = 0) -> None:
        """Compute when the job next needs attention, as Disque's updateJobAwakeTime.
        ``now``: the caller's clock reading in ms, if it has one."""
        # i64, not int: compiled, a product of tagged ints takes the fast path only
        # when both factors are below 2**30, so a timestamp's took a boxed multiply.
        etime: i64 = job.etime
        at: i64 = etime * 1000 + 1000  # expire (a second late, to be past it)
        if job.qtime and job.qtime < at:
            at = job.qtime  # re-queue
        if job.state == ACKED:
            gc = self.acks.next_gc_time(job)
            if gc < at:
                at = gc
        elif job.qtime and job.flags & FLAG_BCAST_WILLQUEUE:
            # WILLQUEUE goes out 500 ms before the re-queue; once that moment
            # has passed (a queued job does not send it), wake at the re-queue.
            will = job.qtime - WILLQUEUE_ADVANCE_MS
            if will < at and will > (now or now_ms()):
                at = will
        self.schedule(job, at)

    def schedule(self, job: Job, at: int) -> None:
        """Set the job's awake time; the cron files it in its bucket (place_unplaced)."""
        if at < self.next_tick:
            self.next_tick = 0
            self.hooks.timer_due_sooner(at)
        if at and (at < self.unplaced_first or not self.unplaced_first):
            self.unplaced_first = at  # (never later: a job moved later keeps it early)
        if job.flags & FLAG_UNPLACED:
            job.awake = at
            return
        if job.awake:
            self.unfile(job)
        job.awake = at
        job.flags |= FLAG_UNPLACED
        self.unplaced.append(job)

    def place_unplaced(self) -> None:
        """File the jobs whose awake time was set since the last tick in their buckets."""
        unplaced, buckets, heap = self.unplaced, self.buckets, self.bucket_heap
        self.unplaced = []
        self.unplaced_first = 0
        for job in unplaced:
            job.flags &= ~FLAG_UNPLACED
            at = job.awake
            if not at:  # unregistered meanwhile
                continue
            key = at // BUCKET_MS
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = set()
                heapq.heappush(heap, key)
            bucket.add(job)
        if len(heap) > 2 * len(buckets) + HEAP_SLACK:
            self.compact_heap()

    def next_awake(self) -> int:
        """When the first filed job is due, in ms (0: none filed): the time of the
        earliest bucket, or sooner (a bucket emptied early keeps its heap key)."""
        heap = self.bucket_heap
        return heap[0] * BUCKET_MS if heap else 0

    def first_awake(self) -> int:
        """When the first job is due, in ms (0: none): filed, or with its awake time
        set since the last tick (the cron files it then)."""
        filed, unplaced = self.next_awake(), self.unplaced_first
        if not filed or not unplaced:
            return filed or unplaced
        return min(filed, unplaced)

    def unfile(self, job: Job) -> None:
        """Take a filed job out of its bucket; an emptied bucket goes at once."""
        key = job.awake // BUCKET_MS
        bucket = self.buckets.get(key)
        if bucket is not None:
            bucket.discard(job)
            if not bucket:
                del self.buckets[key]

    def compact_heap(self) -> None:
        """Rebuild the heap from the live buckets (a sorted list is a heap): drops
        the keys of buckets emptied early, and the copies of a key filed again."""
        self.bucket_heap = sorted(self.buckets)

    def _unschedule(self, job: Job) -> None:
        if job.awake and not job.flags & FLAG_UNPLACED:
            self.unfile(job)
        job.awake = 0

    def process_due(self, now: int) -> int:
        """Run processJob on every job whose awake time has come.

        Due jobs are collected first and each is processed once per call:
        a job rescheduled into the past waits for the next tick, so this
        can never spin.
        """
        self.place_unplaced()
        heap, buckets = self.bucket_heap, self.buckets
        due: list[Job] = []
        while heap and heap[0] * BUCKET_MS <= now:
            key = heap[0]
            bucket = buckets.get(key)
            if bucket and (key + 1) * BUCKET_MS > now + 1:
                # The bucket straddles now: take what is due, keep the rest.
                ready = [j for j in bucket if j.awake <= now]
                bucket.difference_update(ready)
                if not bucket:
                    del buckets[key]
                due.extend(ready)
                break
            heapq.heappop(heap)
            buckets.pop(key, None)
            if bucket:
                due.extend(bucket)
        for job in due:
            job.awake = 0
        for job in due:
            if job.id in self.by_id and job.awake == 0:
                self.process_job(job, now)
        return len(due)

    def process_job(self, job: Job, now: int) -> None:
        """The timer event of a job: expire, WILLQUEUE, re-queue, or GC."""
        if job.etime <= now // 1000 and not self.events.node_leaving():
            self.log.verbose("EVICT %s", job.id.decode())
            self.unregister(job)
            return
        if (
            job.state == ACTIVE
            and job.flags & FLAG_BCAST_WILLQUEUE
            and job.qtime - WILLQUEUE_ADVANCE_MS <= now
        ):
            self.events.job_will_queue(job)
            job.flags &= ~FLAG_BCAST_WILLQUEUE
        if job.state == ACTIVE and job.qtime and job.qtime <= now:
            q = self.queues.lookup(job.queue)
            if job.retry and q is not None and q.flags & PAUSED_IN:
                job.qtime = job.requeue_at(now)
            else:
                nack = bool(job.flags & FLAG_NACK_DELAYED)  # NACK ... DELAY's re-queue
                job.flags &= ~FLAG_NACK_DELAYED
                self.queues.enqueue_job(job, nack, now)
        if job.state == QUEUED and job.qtime and job.qtime <= now and job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
            job.qtime = job.requeue_at(now)
        if job.state == ACKED:
            self.acks.try_gc(job)
            if job.id not in self.by_id:
                return
        if job.id in self.by_id:
            self.update_awake(job, now)

    # ---- scanning --------------------------------------------------------------
    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """At least ``count`` IDs from ``cursor`` on, and the next cursor (JSCAN)."""
        return self.by_id.scan(cursor, count)

    def all(self) -> Iterable[Job]:
        return list(self.by_id.values())

    def timer_fields(self) -> list[str]:
        """The timers' own accounting (INFO timers): it returns to zero with the jobs."""
        return [
            f"timer_buckets:{len(self.buckets)}",
            f"timer_heap_keys:{len(self.bucket_heap)}",
            f"timer_filed_jobs:{sum(len(b) for b in self.buckets.values())}",
            f"timer_unplaced_jobs:{len(self.unplaced)}",
        ]

    def flush_all(self) -> None:
        """DEBUG FLUSHALL, CLUSTER RESET: forget every job, and the queues."""
        self.flush()
        self.queues.flush()

    def flush(self) -> None:
        self.by_id.clear()
        self.flushes += 1
        self.data_bytes = 0
        self.buckets = {}  # new containers: clear() would keep the peak's capacity
        self.bucket_heap = []
        for job in self.unplaced:
            job.flags &= ~FLAG_UNPLACED
            job.awake = 0
        self.unplaced.clear()
        self.unplaced_first = 0
