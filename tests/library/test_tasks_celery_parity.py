"""What a Celery user expects of tasks, on a real 3-node cluster, with the
producer on node 1, the worker on node 2 and the result's reader on node 3:
per-call options, defaults, results with state read by ID, remote tracebacks,
workflows (chain, group, chord), revoke, unique tasks, cron schedules, ETAs
and rate limits."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from disque.tasks import TaskFailed, Tasks
from disque.tasks.canvas import ChordFailed, chain, chord, group
from disque.tasks.revoke import AlreadyQueued
from disque.worker import SoftTimeLimitExceeded
from testkit.nodes import ClusterOfNodes, wait_for
from testkit.workers import addr, running

pytestmark = pytest.mark.timeout(120)


def three_apps(cluster3: ClusterOfNodes) -> tuple[Tasks, Tasks, Tasks]:
    """The producer's, the worker's and the reader's, each on its own node."""
    n1, n2, n3 = cluster3
    return Tasks(addr(n1)), Tasks(addr(n2)), Tasks(addr(n3))


def register_math(*apps: Tasks) -> None:
    for app in apps:

        @app.task(name="m.add", queue="math", replicate=2)
        def add(x: int, y: int = 0) -> int:
            return x + y

        @app.task(name="m.mul", queue="math", replicate=2)
        def mul(x: int, y: int) -> int:
            return x * y

        @app.task(name="m.total", queue="math", replicate=2)
        def total(values: list[int]) -> int:
            return sum(values)

        @app.task(name="m.explode", queue="math", replicate=2, max_attempts=5)
        def explode(n: int) -> int:
            raise ValueError(f"bad input {n}")


def dead_letters(cluster3: ClusterOfNodes, queue: str) -> list[dict]:
    return [json.loads(body) for n in cluster3 for _, _, body in n.call("QPEEK", queue, "10")]


def test_per_call_max_attempts_and_time_limit_travel_with_the_call(
    cluster3: ClusterOfNodes,
) -> None:
    producer, consumer, reader = three_apps(cluster3)
    for app in (producer, consumer):

        @app.task(name="p.flaky", queue="percall", replicate=2, max_attempts=5, result=True)
        def flaky() -> None:
            raise ValueError("always")

        @app.task(name="p.slow", queue="percall", replicate=2, result=True)
        def slow(seconds: float) -> str:
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:  # Python code: the time limit stops it at once
                time.sleep(0.02)
            return "done"

    once = producer.registry["p.flaky"].send_with_options(max_attempts=1)
    limited = producer.registry["p.slow"].send_with_options(
        args=(30,), time_limit=0.5, max_attempts=1
    )
    with running(consumer.worker(fetch_timeout_ms=200, backoff_base=0.1)):
        with pytest.raises(TaskFailed, match="ValueError: always"):
            reader.result(once.id).get(timeout=20)
        with pytest.raises(TaskFailed) as stopped:
            reader.result(limited.id).get(timeout=20)
    assert stopped.value.type == "TimeLimitExceeded"
    attempts = {r["id"]: r["attempts"] for r in dead_letters(cluster3, "percall:dead")}
    assert attempts == {once.job_id: 1, limited.job_id: 1}


def test_send_many_takes_keyword_arguments_as_signatures(cluster3: ClusterOfNodes) -> None:
    producer, consumer, reader = three_apps(cluster3)
    register_math(producer, consumer)
    add = producer.registry["m.add"]
    handles = add.send_many([add.s(1, y=2), (5,), add.s(x=3, y=4)], result=True)
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert [reader.result(h.id).get(timeout=20) for h in handles] == [3, 5, 7]


def test_a_call_comes_back_after_60_s_by_default_and_the_seeds_are_checked(
    cluster3: ClusterOfNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    n1, _, _ = cluster3
    producer = Tasks(addr(n1))
    register_math(producer)
    handle = producer.registry["m.add"].send(1)
    shown = n1.call("SHOW", handle.job_id)
    assert dict(zip(shown[::2], shown[1::2], strict=True))[b"retry"] == 60
    with pytest.raises(ValueError, match="a node is host:port, not 'bogus'"):
        Tasks("bogus")
    monkeypatch.delenv("DISQUE_NODES", raising=False)
    with pytest.raises(ValueError, match="Tasks needs the nodes to send to"):
        Tasks()
    monkeypatch.setenv("DISQUE_NODES", f"{addr(n1)}, 127.0.0.1:1")
    assert Tasks().client().hello().myid == n1.call("HELLO")[1].decode()


def test_a_result_has_a_state_is_read_by_id_anywhere_and_as_often_as_asked(
    either_cluster3: ClusterOfNodes, tmp_path: Path
) -> None:
    cluster3 = either_cluster3
    producer, consumer, reader = three_apps(cluster3)
    for app in (producer, consumer):

        @app.task(name="s.wait", queue="states", replicate=2, result=True, track_started=True)
        def wait(path: str) -> str:
            while not open(path).read():  # noqa: SIM115 (the test writes it)
                time.sleep(0.02)
            return "finished"

    gate = tmp_path / "gate"
    gate.write_text("")
    handle = producer.registry["s.wait"].send(str(gate))
    by_id = reader.result(handle.id)
    assert by_id.state == "PENDING"
    with running(consumer.worker(fetch_timeout_ms=200)):
        wait_for(lambda: by_id.state == "STARTED", timeout=10, message="STARTED")
        gate.write_text("go")
        assert by_id.get(timeout=20) == "finished"
        assert by_id.state == "SUCCESS" and by_id.ready() and by_id.successful()
    # Read again, by other readers, each as often as it likes.
    for _ in range(3):
        assert Tasks(addr(cluster3[2])).result(handle.id).get(timeout=5) == "finished"
    assert handle.get(timeout=5) == "finished"
    handle.forget()
    assert Tasks(addr(cluster3[2])).result(handle.id).state == "PENDING"


def test_a_failure_keeps_its_remote_traceback_and_retries_show_as_retry(
    cluster3: ClusterOfNodes,
) -> None:
    producer, consumer, reader = three_apps(cluster3)
    register_math(producer, consumer)
    handle = producer.registry["m.explode"].send_with_options(args=(7,), result=True)
    worker = consumer.worker(fetch_timeout_ms=200, backoff_base=2)
    with running(worker):
        by_id = reader.result(handle.id)
        wait_for(lambda: by_id.state == "RETRY", timeout=20, message="RETRY")
        info = by_id.info
        assert info["attempt"] == 1 and info["error"]["type"] == "ValueError"
    again = producer.registry["m.explode"].send_with_options(args=(8,), result=True, max_attempts=1)
    with running(consumer.worker(fetch_timeout_ms=200)):
        with pytest.raises(TaskFailed) as failed:
            reader.result(again.id).get(timeout=20)
    trace = failed.value.traceback
    assert trace is not None and trace.startswith("Traceback (most recent call last):")
    assert 'raise ValueError(f"bad input {n}")' in trace and trace.endswith("bad input 8")
    assert reader.result(again.id).failed() and reader.result(again.id).traceback == trace


def test_a_value_that_cannot_be_sent_fails_the_run_once(cluster3: ClusterOfNodes) -> None:
    producer, consumer, reader = three_apps(cluster3)
    for app in (producer, consumer):

        @app.task(name="u.obj", queue="unsent", replicate=2, result=True)
        def make() -> object:
            return object()

    handle = producer.registry["u.obj"].send()
    with running(consumer.worker(fetch_timeout_ms=200)):
        with pytest.raises(TaskFailed) as failed:
            reader.result(handle.id).get(timeout=20)
    assert failed.value.type == "UnserializableResult"
    assert "its return value cannot be sent" in failed.value.message
    assert [r["attempts"] for r in dead_letters(cluster3, "unsent:dead")] == [1]


def test_a_chain_of_3_a_group_of_10_and_a_chord_of_10(either_cluster3: ClusterOfNodes) -> None:
    """On our nodes, and on C Disque's: the workflows use Disque 1.0's commands only."""
    cluster3 = either_cluster3
    producer, consumer, reader = three_apps(cluster3)
    register_math(producer, consumer)
    add, mul, total = (producer.registry[f"m.{n}"] for n in ("add", "mul", "total"))
    chained = chain(add.s(2, 2), mul.s(10), add.s(1)).send()  # (2 + 2) * 10 + 1
    piped = (add.s(1, 1) | add.si(100, 1)).send()  # si: not given the previous value
    grouped = group(mul.s(i, i) for i in range(10)).send()
    chorded = chord(group(add.s(i, 1) for i in range(10)), total.s()).send()
    with running(consumer.worker(concurrency=4, fetch_timeout_ms=200)):
        assert reader.result(chained.id).get(timeout=30) == 41
        assert piped.get(timeout=30) == 101
        assert grouped.get(timeout=30) == [i * i for i in range(10)]
        assert reader.result(chorded.id).get(timeout=30) == sum(range(1, 11))
    assert grouped.ready() and grouped.successful()
    assert all(n.call("QLEN", f"chord:{chorded.id}") == 0 for n in cluster3)


def test_a_failing_step_ends_its_chain_and_its_chord_with_the_error(
    cluster3: ClusterOfNodes,
) -> None:
    producer, consumer, reader = three_apps(cluster3)
    register_math(producer, consumer)
    add, total, explode = (producer.registry[f"m.{n}"] for n in ("add", "total", "explode"))
    chained = chain(add.s(1, 2), explode.s().set(max_attempts=1), add.s(5)).send()
    parts = [add.s(1, 1), explode.s(3).set(max_attempts=1), add.s(2, 2)]
    chorded = chord(parts, total.s()).send()
    with running(consumer.worker(fetch_timeout_ms=200)):
        with pytest.raises(TaskFailed) as failed_chain:
            reader.result(chained.id).get(timeout=30)
        with pytest.raises(TaskFailed) as failed_chord:
            reader.result(chorded.id).get(timeout=30)
    assert (failed_chain.value.type, failed_chain.value.message) == ("ValueError", "bad input 3")
    assert failed_chord.value.type == ChordFailed.__name__
    assert failed_chord.value.message == "part 1 failed: ValueError: bad input 3"


def test_revoke_cancels_a_queued_call_and_one_a_worker_already_holds(
    cluster3: ClusterOfNodes, tmp_path: Path
) -> None:
    producer, consumer, reader = three_apps(cluster3)
    ran = tmp_path / "ran"
    ran.write_text("")
    for app in (producer, consumer):

        @app.task(name="r.note", queue="revocable", replicate=2, result=True)
        def note(word: str) -> str:
            with open(ran, "a") as out:
                out.write(word + "\n")
            return word

    queued = producer.registry["r.note"].send("queued")
    by_id = producer.registry["r.note"].send_with_options(args=("by-id",), delay=2)
    producer.revoke(queued)  # its job is acknowledged: on no node any more
    assert all(n.call("SHOW", queued.job_id) is None for n in cluster3)
    reader.revoke(by_id.id)  # known by its ID alone: a revocation the worker reads
    kept = producer.registry["r.note"].send("kept")
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert reader.result(kept.id).get(timeout=20) == "kept"
        wait_for(
            lambda: all(n.call("SHOW", by_id.job_id) is None for n in cluster3),
            timeout=20,
            message="the revoked call acknowledged once due, not run",
        )
    assert ran.read_text().split() == ["kept"]
    for handle in (queued, by_id):
        result = reader.result(handle.id)
        assert result.state == "REVOKED" and result.ready() and not result.failed()
        with pytest.raises(TaskFailed, match="Revoked: call .* revoked"):
            result.get(timeout=5)


def test_a_unique_task_refuses_a_second_call_until_the_first_ends(
    cluster3: ClusterOfNodes,
) -> None:
    producer, consumer, reader = three_apps(cluster3)
    other_producer = Tasks(addr(cluster3[2]))
    for app in (producer, consumer, other_producer):

        @app.task(name="q.report", queue="unique", replicate=2, result=True, unique_for=60)
        def report(day: str) -> str:
            return f"report {day}"

    first = producer.registry["q.report"].send("monday")
    with pytest.raises(AlreadyQueued, match="q.report with these arguments is queued"):
        other_producer.registry["q.report"].send("monday")  # from another node too
    tuesday = other_producer.registry["q.report"].send("tuesday")  # other arguments
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert reader.result(first.id).get(timeout=20) == "report monday"
        assert reader.result(tuesday.id).get(timeout=20) == "report tuesday"
        wait_for(
            lambda: not any(n.call("QLEN", q) for n in cluster3 for q in unique_queues(n)),
            timeout=10,
            message="the locks deleted as the calls ended",
        )
        again = other_producer.registry["q.report"].send("monday")
        assert reader.result(again.id).get(timeout=20) == "report monday"


def unique_queues(node) -> list[str]:
    cursor, names = b"0", []
    while True:
        cursor, batch = node.call("QSCAN", cursor, "COUNT", "100")
        names += [n.decode() for n in batch if n.startswith(b"unique:")]
        if cursor == b"0":
            return names


def test_a_cron_schedule_fires_at_its_times_once_across_workers(
    cluster3: ClusterOfNodes, tmp_path: Path
) -> None:
    fired = tmp_path / "fired"
    fired.write_text("")
    apps = [Tasks(addr(n)) for n in cluster3[1:]]
    for app in apps:

        @app.periodic(cron="* * * * * */2", name="c.tick", queue="cron", replicate=2)
        def tick() -> None:  # croniter's sixth field: seconds, here every even one
            with open(fired, "a") as out:
                out.write(f"{time.time()}\n")

    with running(*(app.worker(fetch_timeout_ms=200) for app in apps)):
        wait_for(lambda: len(fired.read_text().split()) >= 3, timeout=30, message="3 ticks")
    times = [float(t) for t in fired.read_text().split()]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(1.0 < gap < 3.5 for gap in gaps), gaps  # one call per tick, about 2 s apart
    with pytest.raises(ValueError, match="not a cron expression"):
        apps[0].periodic(cron="every monday")
    with pytest.raises(ValueError, match="every=<seconds> or cron=<expression>"):
        apps[0].periodic(every=5, cron="* * * * *")


def test_an_eta_and_a_rate_limit(cluster3: ClusterOfNodes, tmp_path: Path) -> None:
    producer, consumer, reader = three_apps(cluster3)
    starts = tmp_path / "starts"
    starts.write_text("")
    for app in (producer, consumer):

        @app.task(name="l.stamp", queue="limited", replicate=2, result=True, rate_limit="4/s")
        def stamp(i: int) -> float:
            with open(starts, "a") as out:
                out.write(f"{time.time()}\n")
            return time.time()

    stamped = producer.registry["l.stamp"]
    eta = datetime.now(UTC) + timedelta(seconds=2)
    later = stamped.send_with_options(args=(0,), eta=eta)
    handles = [stamped.send(i) for i in range(1, 9)]
    with running(consumer.worker(concurrency=8, fetch_timeout_ms=200)):
        assert reader.result(later.id).get(timeout=20) >= eta.timestamp()
        for handle in handles:
            reader.result(handle.id).get(timeout=20)
    times = sorted(float(t) for t in starts.read_text().split())
    first_eight = times[:8]
    assert first_eight[-1] - first_eight[0] >= 7 * 0.25 - 0.05  # 4 a second, evenly spaced
    with pytest.raises(ValueError, match='a rate limit is "<calls>/s"'):
        producer.task(name="l.bad", rate_limit="fast")


def test_a_soft_time_limit_before_the_hard_one(cluster3: ClusterOfNodes) -> None:
    producer, consumer, reader = three_apps(cluster3)
    for app in (producer, consumer):

        @app.task(name="t.tidy", queue="soft", replicate=2, result=True, max_attempts=1)
        def tidy(catch: bool) -> str:
            try:
                while True:  # Python code: the limits reach it at once
                    time.sleep(0.02)
            except SoftTimeLimitExceeded:
                if not catch:
                    raise
                return "cleaned up"

    task = producer.registry["t.tidy"]
    options = {"soft_time_limit": 0.3, "time_limit": 10}
    caught = task.send_with_options(args=(True,), **options)
    not_caught = task.send_with_options(args=(False,), **options)
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert reader.result(caught.id).get(timeout=20) == "cleaned up"
        with pytest.raises(TaskFailed) as failed:
            reader.result(not_caught.id).get(timeout=20)
    assert failed.value.type == "SoftTimeLimitExceeded"
    with pytest.raises(ValueError, match="soft_time_limit .* comes before time_limit"):
        task.send_with_options(soft_time_limit=5, time_limit=1)


def test_per_call_link_and_link_error(cluster3: ClusterOfNodes, tmp_path: Path) -> None:
    producer, consumer, reader = three_apps(cluster3)
    register_math(producer, consumer)
    notes = tmp_path / "notes"
    notes.write_text("")
    for app in (producer, consumer):

        @app.task(name="m.note", queue="math", replicate=2)
        def write_note(what: object) -> None:
            with open(notes, "a") as out:
                out.write(json.dumps(what) + "\n")

    add, explode, note = (producer.registry[f"m.{n}"] for n in ("add", "explode", "note"))
    ok = add.send_with_options(args=(2, 3), result=True, link=note.s())
    failing = explode.send_with_options(
        args=(4,), result=True, max_attempts=1, link=note.s(), link_error=note.s()
    )
    # Celery's chain.on_error: the errback hears the step that failed, in the middle
    chained = (add.s(1, 2) | explode.s().set(max_attempts=1) | add.s(5)).on_error(note.s())
    failed_chain = chained.send()
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert reader.result(ok.id).get(timeout=20) == 5  # its own result, kept
        with pytest.raises(TaskFailed):
            reader.result(failing.id).get(timeout=20)
        with pytest.raises(TaskFailed, match="bad input 3"):
            reader.result(failed_chain.id).get(timeout=20)
        wait_for(lambda: len(notes.read_text().splitlines()) == 3, timeout=20, message="3 notes")
    written = [json.loads(line) for line in notes.read_text().splitlines()]
    assert 5 in written  # the link got the value
    errors = {w["message"]: w for w in written if isinstance(w, dict)}  # the errbacks' errors
    error = errors["bad input 4"]
    assert (error["id"], error["task"], error["type"]) == (failing.id, "m.explode", "ValueError")
    assert "Traceback" in error["traceback"]
    assert (errors["bad input 3"]["task"], errors["bad input 3"]["type"]) == (
        "m.explode",
        "ValueError",
    )
