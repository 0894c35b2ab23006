"""The job registry: lookup by ID, the awake timers, and processJob.

Timers for millions of jobs must not scan: every registered job sits in one
time bucket (``BUCKET_MS`` wide) keyed by its next awake time; a heap holds
the bucket keys. The cron pops due buckets and runs ``process_job`` on each
job, which expires it, re-queues it, or retries its garbage collection.
Buckets are sets, so unregistering a job frees it at once.

JSCAN walks hash buckets of job IDs in a fixed order; its cursor is the next
bucket, so a job present during a whole iteration is returned exactly once,
whatever is added or removed meanwhile (O(1) bookkeeping per job).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from disque_server.clock import now_ms, time_error_ms
from disque_server.job import (
    ACKED,
    ACTIVE,
    FLAG_BCAST_WILLQUEUE,
    QUEUED,
    WILLQUEUE_ADVANCE_MS,
    Job,
)
from disque_server.queue import PAUSED_IN

if TYPE_CHECKING:
    from disque_server.server import Server

BUCKET_MS = 50
ID_SHARDS = 256
ID_SHARD_MASK = ID_SHARDS - 1

# JSCAN: every job sits in one of SCAN_BUCKETS buckets chosen by the first
# random characters of its ID; the cursor is the next bucket to visit.
SCAN_BUCKETS = 1 << 14    # ~60 IDs a bucket at 1M jobs: cheap removal, little overhead
_B64_VALUES = bytes(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(chr(c))
    if chr(c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" else 0
    for c in range(256))


def scan_bucket(jid: bytes) -> int:
    """14 bits from the random part of the ID (characters 11-13)."""
    v = _B64_VALUES
    return ((v[jid[11]] << 12) | (v[jid[12]] << 6) | v[jid[13]]) >> 4


class JobIndex:
    """Job ID -> Job, as a dict, split in ID_SHARDS dicts by the ID's hash.

    A dict that grows is copied whole when it resizes: 27 ms at 700,000
    entries, 55 ms at 1.4M, an event-loop stall each. Split, every part stays
    small (4,000 jobs a part at 1M) and so does each copy.
    """

    __slots__ = ("shards", "count")

    def __init__(self) -> None:
        self.shards: list[dict[bytes, Job]] = [{} for _ in range(ID_SHARDS)]
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __contains__(self, jid: bytes) -> bool:
        return jid in self.shards[hash(jid) & ID_SHARD_MASK]

    def get(self, jid: bytes) -> Job | None:
        return self.shards[hash(jid) & ID_SHARD_MASK].get(jid)

    def __setitem__(self, jid: bytes, job: Job) -> None:
        shard = self.shards[hash(jid) & ID_SHARD_MASK]
        if jid not in shard:
            self.count += 1
        shard[jid] = job

    def pop(self, jid: bytes, default: Job | None = None) -> Job | None:
        job = self.shards[hash(jid) & ID_SHARD_MASK].pop(jid, None)
        if job is None:
            return default
        self.count -= 1
        return job

    def values(self) -> Iterator[Job]:
        for shard in self.shards:
            yield from shard.values()

    def clear(self) -> None:
        for shard in self.shards:
            shard.clear()
        self.count = 0


class Jobs:
    """All jobs known to this node."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.by_id = JobIndex()
        self.scan_buckets: dict[int, list[bytes]] = {}
        self.buckets: dict[int, set[Job]] = {}
        self.bucket_heap: list[int] = []

    def __len__(self) -> int:
        return len(self.by_id)

    def lookup(self, jid: bytes) -> Job | None:
        return self.by_id.get(jid)

    def register(self, job: Job, schedule: bool = True) -> bool:
        """Add a job; ``schedule=False`` when the caller sets its timer right after."""
        if job.id in self.by_id:
            return False
        self.by_id[job.id] = job
        bucket = self.scan_buckets.get(scan_bucket(job.id))
        if bucket is None:
            self.scan_buckets[scan_bucket(job.id)] = [job.id]
        else:
            bucket.append(job.id)
        if schedule:
            self.update_awake(job)
        return True

    def unregister(self, job: Job) -> None:
        """Forget a job entirely: queue, timers, index."""
        if self.by_id.pop(job.id, None) is None:
            return
        if job.state == QUEUED:
            self.server.queues.dequeue_job(job)
        key = scan_bucket(job.id)
        bucket = self.scan_buckets[key]
        bucket.remove(job.id)
        if not bucket:
            del self.scan_buckets[key]
        self._unschedule(job)
        self.server.on_job_unregistered(job)

    # ---- timers ---------------------------------------------------------------
    def update_awake(self, job: Job) -> None:
        """Compute when the job next needs attention, as Disque's updateJobAwakeTime."""
        at = job.etime * 1000 + 1000          # expire (a second late, to be past it)
        if job.qtime and job.qtime < at:
            at = job.qtime                    # re-queue
        if job.state == ACKED:
            gc = self.server.acks.next_gc_time(job)
            if gc < at:
                at = gc
        elif job.qtime and job.flags & FLAG_BCAST_WILLQUEUE:
            # WILLQUEUE goes out 500 ms before the re-queue; once that moment
            # has passed (a queued job does not send it), wake at the re-queue.
            will = job.qtime - WILLQUEUE_ADVANCE_MS
            if will < at and will > now_ms():
                at = will
        self.schedule(job, at)

    def schedule(self, job: Job, at: int) -> None:
        if job.awake:
            old = self.buckets.get(job.awake // BUCKET_MS)
            if old is not None:
                old.discard(job)
        job.awake = at
        key = at // BUCKET_MS
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = set()
            heapq.heappush(self.bucket_heap, key)
        bucket.add(job)

    def _unschedule(self, job: Job) -> None:
        if job.awake:
            bucket = self.buckets.get(job.awake // BUCKET_MS)
            if bucket is not None:
                bucket.discard(job)

    def process_due(self, now: int) -> int:
        """Run processJob on every job whose awake time has come.

        Due jobs are collected first and each is processed once per call:
        a job rescheduled into the past waits for the next tick, so this
        can never spin.
        """
        heap, buckets = self.bucket_heap, self.buckets
        due: list[Job] = []
        while heap and heap[0] * BUCKET_MS <= now:
            key = heap[0]
            bucket = buckets.get(key)
            if bucket and (key + 1) * BUCKET_MS > now + 1:
                # The bucket straddles now: take what is due, keep the rest.
                ready = [j for j in bucket if j.awake <= now]
                bucket.difference_update(ready)
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
        server = self.server
        if job.etime <= now // 1000 and not server.cluster.leaving:
            server.log.verbose("EVICT %s", job.id.decode())
            self.unregister(job)
            return
        if (job.state == ACTIVE and job.flags & FLAG_BCAST_WILLQUEUE
                and job.qtime - WILLQUEUE_ADVANCE_MS <= now):
            server.cluster.send_willqueue(job)
            job.flags &= ~FLAG_BCAST_WILLQUEUE
        if job.state == ACTIVE and job.qtime and job.qtime <= now:
            q = server.queues.lookup(job.queue)
            if job.retry and q is not None and q.flags & PAUSED_IN:
                job.qtime = now + job.retry * 1000 + time_error_ms(job.retry)
            else:
                server.queues.enqueue_job(job)
        if job.state == QUEUED and job.qtime and job.qtime <= now and job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
            job.qtime = now + job.retry * 1000 + time_error_ms(job.retry)
        if job.state == ACKED:
            server.acks.try_gc(job)
            if job.id not in self.by_id:
                return
        if job.id in self.by_id:
            self.update_awake(job)

    # ---- scanning --------------------------------------------------------------
    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """At least ``count`` IDs (whole buckets) from ``cursor`` on, and the next cursor."""
        buckets = self.scan_buckets
        ids: list[bytes] = []
        b = cursor
        if len(buckets) * 4 < SCAN_BUCKETS - b:   # sparse: visit only non-empty buckets
            for key in sorted(k for k in buckets if k >= b):
                if len(ids) >= count:
                    return key, ids
                ids.extend(buckets[key])
            return 0, ids
        while b < SCAN_BUCKETS and len(ids) < count:
            bucket = buckets.get(b)
            if bucket:
                ids.extend(bucket)
            b += 1
        return (b if b < SCAN_BUCKETS else 0), ids

    def all(self) -> Iterable[Job]:
        return list(self.by_id.values())

    def flush(self) -> None:
        self.by_id.clear()
        self.scan_buckets.clear()
        self.buckets.clear()
        self.bucket_heap.clear()
