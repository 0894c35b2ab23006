"""A job's retry through the node, traced: a job delivered, its RETRY run out, the
registry's timer re-queues it (``Jobs.process_job``). The path stays in the jobs
package, the job's own re-queue rule and the cluster's events and links: never
the server, and five modules (it was eleven, 30 visits, before the jobs package).

Traced with ``sys.settrace``, which sees Python frames only: on the compiled build
(mypyc) the node's modules have none, so this runs on the pure build (CI runs the
suite on both)."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest
from inprocess import new_server

import disque_server
from disque_server.clock import now_ms
from disque_server.job import ACTIVE, QUEUED, Job

pytestmark = pytest.mark.skipif(
    disque_server.BUILD != "pure", reason="sys.settrace sees no frame of compiled modules"
)

# Where a re-queue goes: the registry, the queues, the job's rule, the cluster's side
# of a job's events (WILLQUEUE, QUEUED) and its sends.
EXPECTED = [
    "disque_server.jobs.registry",
    "disque_server.cluster.events",
    "disque_server.cluster",
    "disque_server.jobs.queue",
    "disque_server.job",
]


def trace_requeue() -> list[str]:
    """The disque_server modules a due re-queue calls into, in order of first visit."""
    server = new_server()
    job = Job(b"D-0f1e2d3c-000000000000000000000001-05a1", ACTIVE, now_ms() // 1000 + 3600, 60)
    job.queue, job.body, job.ctime = b"q", b"x", 1
    server.jobs.start(job)
    queue = server.queues.lookup(b"q")
    assert queue is not None and server.queues.fetch_job(queue) is job
    now = now_ms()
    job.qtime = now - 1  # its RETRY has run out
    visited: list[str] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event == "call" and module.startswith("disque_server"):
            visited.append(module)

    sys.settrace(tracer)
    try:
        server.jobs.process_job(job, now)
    finally:
        sys.settrace(None)
    assert job.state == QUEUED and job.deliveries == 1  # it was re-queued
    return list(dict.fromkeys(visited))


def test_a_requeue_never_passes_through_the_server() -> None:
    modules = trace_requeue()
    assert "disque_server.server" not in modules
    assert modules == EXPECTED
