"""The job timers of registry.py, in-process: a job's awake time is recorded at once and
filed in its time bucket by the cron (place_unplaced), the only reader of the buckets."""

from __future__ import annotations

from inprocess import new_jobs

from disque_server.job import FLAG_UNPLACED, WAIT_REPL, Job
from disque_server.jobs.registry import BUCKET_MS, HEAP_SLACK, Jobs


def make_job(n: int) -> Job:
    return Job(b"D-00000000-%024d-0001" % n, WAIT_REPL, 10**9, 60)


def bucket_of(jobs: Jobs, job: Job) -> set[Job] | None:
    return jobs.buckets.get(job.awake // BUCKET_MS)


def in_any_bucket(jobs: Jobs, job: Job) -> bool:
    return any(job in bucket for bucket in jobs.buckets.values())


def test_schedule_records_the_time_and_the_cron_files_it() -> None:
    jobs = new_jobs()[0]
    job = make_job(1)
    jobs.schedule(job, 10_000)
    assert job.awake == 10_000
    assert job.flags & FLAG_UNPLACED
    assert not in_any_bucket(jobs, job)
    jobs.place_unplaced()
    assert not job.flags & FLAG_UNPLACED
    assert job in bucket_of(jobs, job)
    assert jobs.bucket_heap == [10_000 // BUCKET_MS]


def test_rescheduling_before_the_tick_lists_the_job_once() -> None:
    jobs = new_jobs()[0]
    job = make_job(2)
    for at in (10_000, 20_000, 5_000):
        jobs.schedule(job, at)
    assert jobs.unplaced == [job]
    jobs.place_unplaced()
    assert job.awake == 5_000
    assert [key for key, bucket in jobs.buckets.items() if job in bucket] == [5_000 // BUCKET_MS]


def test_rescheduling_a_filed_job_takes_it_out_of_its_old_bucket() -> None:
    jobs = new_jobs()[0]
    job = make_job(3)
    jobs.schedule(job, 10_000)
    jobs.place_unplaced()
    jobs.schedule(job, 90_000)
    assert not in_any_bucket(jobs, job)  # out of the old one, not yet in the new
    jobs.place_unplaced()
    assert [key for key, bucket in jobs.buckets.items() if job in bucket] == [90_000 // BUCKET_MS]


def test_a_job_forgotten_before_the_tick_is_never_filed() -> None:
    jobs = new_jobs()[0]
    job = make_job(4)
    jobs.schedule(job, 10_000)
    jobs._unschedule(job)
    assert job.awake == 0
    jobs.place_unplaced()
    assert not in_any_bucket(jobs, job)
    assert not job.flags & FLAG_UNPLACED


def test_a_filed_job_forgotten_leaves_its_bucket() -> None:
    jobs = new_jobs()[0]
    job = make_job(5)
    jobs.schedule(job, 10_000)
    jobs.place_unplaced()
    jobs._unschedule(job)
    assert not in_any_bucket(jobs, job)


def test_flush_forgets_the_unfiled_jobs() -> None:
    jobs = new_jobs()[0]
    job = make_job(6)
    jobs.schedule(job, 10_000)
    jobs.flush()
    assert jobs.unplaced == [] and job.awake == 0 and not job.flags & FLAG_UNPLACED
    jobs.place_unplaced()
    assert jobs.buckets == {}


def test_an_emptied_bucket_goes_at_once() -> None:
    jobs = new_jobs()[0]
    job = make_job(20)
    jobs.schedule(job, 3_600_000)
    jobs.place_unplaced()
    jobs.schedule(job, 7_200_000)  # moved: its first bucket is empty
    assert 3_600_000 // BUCKET_MS not in jobs.buckets
    jobs.place_unplaced()
    jobs._unschedule(job)  # unregistered
    assert jobs.buckets == {}


def test_the_heap_is_rebuilt_when_emptied_buckets_outnumber_the_live_ones() -> None:
    jobs = new_jobs()[0]
    for n in range(1000):
        job = make_job(n)
        jobs.schedule(job, 3_600_000 + n * BUCKET_MS)
        jobs.place_unplaced()
        jobs._unschedule(job)
    assert jobs.buckets == {}
    assert len(jobs.bucket_heap) <= HEAP_SLACK + 1
    survivor = make_job(5000)
    jobs.schedule(survivor, 10_000)
    jobs.place_unplaced()
    assert jobs.process_due(10_000) == 1  # the rebuilt heap still finds what is due
