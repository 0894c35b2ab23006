"""Celery's results kept in Disque (disque/brokers/celery_backend.py), with
Celery's own worker on a real 3-node cluster: get, state, forget, a group of 10,
a chord of 10 with a sum callback, and results that outlive a node killed."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.celery_apps import caller, start, stop, write_app
from testkit.nodes import ClusterOfNodes
from testkit.workers import addr

celery = pytest.importorskip("celery")

import disque.brokers.kombu  # noqa: E402, F401  (registers disque://)

pytestmark = pytest.mark.timeout(180)


def test_celery_results_groups_and_chords_on_disque(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    n1, n2, n3 = cluster3
    write_app(tmp_path, [addr(n2), addr(n3), addr(n1)])
    worker = start(tmp_path, "worker", "worker", "--pool", "threads", "-c", "4")
    app = caller([addr(n1), addr(n3), addr(n2)])  # the caller on node 1, the worker on node 2
    add, total, explode = (app.signature(f"app.{name}") for name in ("add", "total", "explode"))
    try:
        first = add.delay(2, 3)
        assert first.get(timeout=60) == 5  # (also waits for the worker to start)
        assert first.state == "SUCCESS"
        again = celery.result.AsyncResult(first.id, app=caller([addr(n3), addr(n1)]))
        assert again.get(timeout=10) == 5  # read by ID, elsewhere, as often as asked
        failed = explode.delay()
        with pytest.raises(ValueError, match="no"):
            failed.get(timeout=30)
        assert failed.state == "FAILURE" and "ValueError" in failed.traceback
        group = celery.group(add.clone((i, i)) for i in range(10)).apply_async()
        assert group.get(timeout=60) == [2 * i for i in range(10)]
        chord = celery.chord(add.clone((i, 1)) for i in range(10))(total.clone())
        assert chord.get(timeout=60) == sum(range(1, 11))
        # A node lost: each result is kept on two nodes, so all are still read.
        results = [add.delay(i, 100) for i in range(20)]
        assert [r.get(timeout=60) for r in results] == [i + 100 for i in range(20)]
        n3.kill()
        survivors = caller([addr(n1), addr(n2)])
        assert [
            celery.result.AsyncResult(r.id, app=survivors).get(timeout=20) for r in results
        ] == [i + 100 for i in range(20)]
        first.forget()
        assert celery.result.AsyncResult(first.id, app=survivors).state == "PENDING"
    finally:
        stop(worker)
