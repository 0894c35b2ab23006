"""Disque's serialized job (disque_server/serialize.py): the AOF's fast record is
the same bytes as serialize_job framed as RESP, and what is written reads back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from disque_server.job import ACKED, ACTIVE, FLAG_DELIVERED, QUEUED, Job
from disque_server.resp import bulk_array
from disque_server.serialize import (
    C_DELIVERED,
    C_STATE,
    HEAD,
    HEAD_LEN,
    STATE_OF_C,
    deserialize_job,
    loadjob_record,
    serialize_job,
)


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


# Every value the head's numbers hold in C's types (u8 to u64).
HEAD_NUMBERS = {
    "repl": st.integers(0, 0xFFFF),
    "etime": st.integers(0, 0xFFFFFFFF),
    "ctime": st.integers(0, 0xFFFFFFFFFFFFFFFF),
    "delay": st.integers(0, 0xFFFFFFFF),
    "retry": st.integers(0, 0xFFFFFFFF),
    "nacks": st.integers(0, 0xFFFF),
    "deliv": st.integers(0, 0xFFFF),
}


@settings(max_examples=300, deadline=None)
@given(
    state=st.integers(0, 3),
    gc_retry=st.integers(0, 15),
    flags=st.integers(0, 255),
    at=st.integers(0, 3),
    **HEAD_NUMBERS,
)
def test_every_head_field_reads_as_disques_layout_says(
    state: int,
    gc_retry: int,
    flags: int,
    repl: int,
    etime: int,
    ctime: int,
    delay: int,
    retry: int,
    nacks: int,
    deliv: int,
    at: int,
) -> None:
    """deserialize_job reads the head by index: each field, at any value its C type
    holds, reads as HEAD (the layout as a Struct) says, wherever the job starts."""
    jid = b"D-aaaaaaaa-" + b"b" * 24 + b"-05a1"
    tail = b"\x01\0\0\0q" + b"\x02\0\0\0hi" + b"\0\0\0\0"
    head = HEAD.pack(
        HEAD_LEN - 4 + len(tail), jid, gc_retry << 4 | state, flags, repl, etime, ctime,
        delay, retry, nacks, deliv,
    )  # fmt: skip
    data = b"x" * at + head + tail
    job, end = deserialize_job(data, at)
    assert end == len(data)
    assert (job.id, job.etime, job.retry, job.repl, job.ctime) == (jid, etime, retry, repl, ctime)
    assert (job.delay, job.nacks, job.deliveries) == (delay, nacks, deliv)
    assert job.state == STATE_OF_C[state] and job.queue == b"q" and job.body == b"hi"
    assert job.flags & FLAG_DELIVERED == (FLAG_DELIVERED if flags & C_DELIVERED else 0)


@settings(max_examples=300, deadline=None)
@given(**HEAD_NUMBERS)
def test_every_head_field_packs_as_disques_layout_says(
    repl: int, etime: int, ctime: int, delay: int, retry: int, nacks: int, deliv: int
) -> None:
    """serialize_job packs ctime as two u32s: the same bytes as HEAD's u64, at any
    value, as every other field at any value its C type holds."""
    job = Job(b"D-aaaaaaaa-" + b"b" * 24 + b"-05a1", QUEUED, etime, retry)
    job.queue, job.body, job.nodes_delivered = b"q", b"hi", ()
    job.repl, job.ctime, job.delay, job.nacks, job.deliveries = repl, ctime, delay, nacks, deliv
    data = serialize_job(job)
    head = HEAD.pack(
        len(data) - 4, job.id, C_STATE[QUEUED], 0, repl, etime, ctime, delay, retry, nacks,
        deliv,
    )  # fmt: skip
    assert data[:HEAD_LEN] == head


NODE_RUNS = [(), (b"a" * 40,), (b"a" * 40, b"b" * 40), (b"b" * 40, b"a" * 40, b"c" * 40)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"", b"x", b"xy", b"\0" * 300]),
            st.integers(0, len(NODE_RUNS) - 1),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_jobs_in_a_row_serialize_as_each_alone(shapes: list[tuple[bytes, int, bool]]) -> None:
    """serialize.py keeps the last shape's layout and the last node-ID tuple it joined:
    a run of jobs of the same or other shapes, sharing their node-ID tuple or with an
    equal one of their own, each reads back as itself."""
    for i, (body, run, own_tuple) in enumerate(shapes):
        nodes = tuple(list(NODE_RUNS[run])) if own_tuple else NODE_RUNS[run]
        job = Job(b"D-aaaaaaaa-abcdefghijklmnopqrstuv%02d-05a1" % i, QUEUED, 2_000_000_000, 60)
        job.queue, job.body, job.nodes_delivered = b"q%d" % (i % 3), body, nodes
        data = serialize_job(job)
        assert loadjob_record(job) == bulk_array([b"LOADJOB", data])
        copy, end = deserialize_job(data)
        assert end == len(data)
        assert (copy.id, copy.queue, copy.body) == (job.id, job.queue, body)
        assert copy.nodes_delivered == NODE_RUNS[run]
