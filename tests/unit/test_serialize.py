"""Disque's serialized job (disque_server/serialize.py): the AOF's fast record is
the same bytes as serialize_job framed as RESP, and what is written reads back."""

from __future__ import annotations

from disque_server.job import ACKED, ACTIVE, FLAG_DELIVERED, QUEUED, Job
from disque_server.resp import bulk_array
from disque_server.serialize import deserialize_job, loadjob_record, serialize_job


def jobs() -> list[Job]:
    made = []
    for i, (state, body, nodes) in enumerate(
        [
            (QUEUED, b"x", (b"a" * 40,)),
            (ACTIVE, b"\x00\r\n" * 50, ()),
            (ACKED, b"", (b"b" * 40,) * 3),
        ]
    ):
        job = Job(b"D-aaaaaaaa-abcdefghijklmnopqrstuvw%d-05a1" % i, state, 2_000_000_000, 60)
        job.queue, job.body, job.nodes_delivered = b"queue%d" % i, body, nodes
        job.ctime, job.delay, job.nacks, job.deliveries = 1_795_000_000_000_000_000 + i, i, i, 2 * i
        job.flags = FLAG_DELIVERED if i else 0
        made.append(job)
    return made


def test_the_aof_record_is_serialize_job_framed() -> None:
    for job in jobs():
        assert loadjob_record(job) == bulk_array([b"LOADJOB", serialize_job(job)])


def test_a_stored_job_reads_back() -> None:
    for job in jobs():
        data = serialize_job(job)
        copy, end = deserialize_job(data)
        assert end == len(data)
        fields = ("id", "queue", "body", "state", "etime", "ctime", "delay", "retry", "nacks")
        assert [getattr(copy, f) for f in fields] == [getattr(job, f) for f in fields]
        assert copy.deliveries == job.deliveries and copy.nodes_delivered == job.nodes_delivered
        assert copy.flags & FLAG_DELIVERED == job.flags & FLAG_DELIVERED
