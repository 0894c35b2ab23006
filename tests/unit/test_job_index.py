"""The job index (disque_server/jobs/registry.py JobIndex), in-process, against a
plain dict as the model: an ID is added once (a second add, of the same Job or of
another, changes nothing and says so), and the count follows adds and pops."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_server.job import ACTIVE, Job
from disque_server.jobs.registry import JobIndex

RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

JOBS = [Job(b"D-aaaaaaaa-%024d-05a1" % i, ACTIVE, 100, 30) for i in range(40)]
TWINS = [Job(job.id, ACTIVE, 100, 30) for job in JOBS]  # other Jobs, the same IDs


@RELAXED
@given(st.lists(st.tuples(st.sampled_from(["add", "twin", "pop"]), st.integers(0, 39))))
def test_the_index_matches_a_dict(steps: list[tuple[str, int]]) -> None:
    index = JobIndex()
    model: dict[bytes, Job] = {}
    for op, i in steps:
        job = (TWINS if op == "twin" else JOBS)[i]
        if op == "pop":
            assert index.pop(job.id) is model.pop(job.id, None)
        else:
            assert index.add(job.id, job) == (job.id not in model)
            model.setdefault(job.id, job)
        assert len(index) == len(model)
        assert index.get(job.id) is model.get(job.id)
        assert (job.id in index) == (job.id in model)
    assert sorted(j.id for j in index.values()) == sorted(model)
