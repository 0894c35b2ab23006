"""Which of two owners that both queued a job keeps its copy (QUEUED)."""

from __future__ import annotations

import os

from disque_server.cluster.requeue import keeps_queued_copy
from disque_server.job import generate_job_id


def node_id() -> bytes:
    return os.urandom(20).hex().encode()


def test_exactly_one_of_two_owners_keeps_the_queued_copy():
    for _ in range(200):
        a, b = node_id(), node_id()
        jid = generate_job_id(a, 3600, 60)
        assert keeps_queued_copy(a, b, jid) != keeps_queued_copy(b, a, jid)


def test_the_winner_changes_from_job_to_job():
    a, b = node_id(), node_id()
    wins = {keeps_queued_copy(a, b, generate_job_id(a, 3600, 60)) for _ in range(64)}
    assert wins == {True, False}
