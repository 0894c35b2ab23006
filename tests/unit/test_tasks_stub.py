"""Tasks with no node: the message format (format 1, three serializers told by
their first byte) and stub mode, as applications' tests use it."""

from __future__ import annotations

import json
import pickle
from typing import Any

import msgpack
import pytest

from disque.job import Job
from disque.middleware import Middleware
from disque.tasks import BadMessage, Message, StubFailure, TaskFailed, Tasks
from disque.tasks.message import load, sniff
from disque.worker import Call, Reject, Retry


def test_a_message_round_trips_in_each_serializer() -> None:
    message = Message("m.f", [1, "two"], {"k": [3]}, reply_to="q:result:x", meta={"a": "b"})
    for name in ("json", "msgpack", "pickle"):
        body = message.encode(name)
        assert sniff(body) == name
        assert Message.decode(body, ("json", "msgpack", "pickle")) == (message, name)


def test_the_json_form_is_the_documented_one() -> None:
    body = Message("billing.charge", [42], {"eur": 5}, id="3f2a").encode()
    assert json.loads(body) == {
        "v": 1,
        "id": "3f2a",
        "task": "billing.charge",
        "args": [42],
        "kwargs": {"eur": 5},
    }
    # What a producer in another language writes: spaces, fields left out.
    hand_written = b' {"v": 1, "task": "billing.charge"}'
    decoded, name = Message.decode(hand_written)
    assert (decoded.task, decoded.args, decoded.kwargs, name) == ("billing.charge", [], {}, "json")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"hello", "not a task message"),
        (b"{not json", "unreadable json"),
        (b'["v", 1]', "not a task message"),
        (b'{"v": 2, "task": "x"}', "format 2"),
        (b'{"v": 1}', "names its task"),
        (b'{"v": 1, "task": "x", "args": {}}', '"args" is a list'),
        (b'{"v": 1, "task": "x", "reply_to": 3}', "queue name"),
        (msgpack.packb(["a list"]), "not a task message"),
    ],
)
def test_bad_bodies_are_bad_messages(body: bytes, says: str) -> None:
    with pytest.raises(BadMessage, match=says):
        Message.decode(body)


def test_pickle_is_read_only_when_accepted() -> None:
    body = pickle.dumps({"v": 1, "task": "x"}, protocol=5)
    with pytest.raises(BadMessage, match="accepts json, msgpack"):
        load(body, ("json", "msgpack"))
    assert load(body, ("pickle",))[1] == "pickle"


def stub_app(**options: Any) -> Tasks:
    return Tasks(stub=True, **options)


def test_stub_runs_calls_with_results_and_the_calls_they_send() -> None:
    tasks = stub_app()

    @tasks.task(result=True)
    def add(a: int, b: int) -> int:
        return a + b

    @tasks.task(result=True)
    def fan_out(n: int) -> int:
        for i in range(n):
            add.send(i, i)
        return n

    handle = fan_out.send(3)
    assert handle.job_id == f"stub-{handle.message_id}"
    assert tasks.stub is not None and tasks.stub.run_pending() == 4
    assert handle.get() == 3
    assert add.send(2, 3).get() == 5  # get() runs what is pending
    assert [h.get() for h in add.send_many([(1, 1), (2, 2)])] == [2, 4]
    assert add(1, 1) == 2  # a plain call


def test_stub_retries_then_fails_and_says_so() -> None:
    tasks = stub_app()
    runs: list[int] = []

    @tasks.task(result=True, max_attempts=3)
    def flaky(n: int) -> str:
        runs.append(n)
        if len(runs) < 3:
            raise Retry() if len(runs) == 1 else ConnectionError("down")
        return "ok"

    @tasks.task(result=True, max_attempts=2)
    def broken() -> None:
        raise ValueError("always")

    assert flaky.send(1).get() == "ok" and runs == [1, 1, 1]
    handle = broken.send()
    assert tasks.stub is not None
    with pytest.raises(StubFailure) as failure:
        tasks.stub.run_pending()
    assert isinstance(failure.value.__cause__, ValueError)
    with pytest.raises(TaskFailed, match="ValueError: always"):
        handle.get()
    assert [job.queue for job in tasks.stub.dead_letters] == ["default"]


def test_stub_eager_runs_at_send_and_catches_what_json_cannot_carry() -> None:
    tasks = stub_app(eager=True)
    seen: list[Any] = []

    @tasks.task
    def remember(value: Any) -> None:
        seen.append(value)

    remember.send((1, 2))
    assert seen == [[1, 2]]  # as on a cluster: JSON has lists, not tuples
    with pytest.raises(TypeError, match="msgpack"):
        remember.send(b"bytes")


def test_stub_runs_middleware_and_async_tasks() -> None:
    events: list[str] = []

    class Trace(Middleware):
        def before_send(self, message: Message) -> None:
            message.meta["trace"] = "t1"

        def before(self, call: Call) -> None:
            events.append(f"before {call.name} {call.message.meta['trace']}")

        def after(self, call: Call, result: Any) -> None:
            events.append(f"after {result}")

    tasks = stub_app(middleware=[Trace()])

    @tasks.task(name="double", result=True)
    async def double(x: int) -> int:
        return 2 * x

    assert double.send(21).get() == 42
    assert events == ["before double t1", "after 42"]


def test_task_options_are_checked_when_registered() -> None:
    tasks = stub_app()
    with pytest.raises(TypeError, match="unknown task option"):
        tasks.task(retires=3)
    with pytest.raises(ValueError, match="unknown serializer"):
        tasks.task(serializer="yaml")
    with pytest.raises(ValueError, match="at most every second"):
        tasks.periodic(every=0)

    @tasks.task(name="same")
    def one() -> None: ...

    with pytest.raises(ValueError, match="two tasks"):
        tasks.task(name="same")(lambda: None)
    with pytest.raises(ValueError, match="stub"):
        tasks.worker()
    with pytest.raises(TypeError, match="not an option of one call: name"):
        one.send_with_options(name="other")
    with pytest.raises(ValueError, match="max_attempts is a whole number >= 1, not 0"):
        one.send_with_options(max_attempts=0)
    with pytest.raises(ValueError, match="time_limit is a number of seconds > 0"):
        tasks.task(time_limit="soon")


def test_workflows_and_states_run_in_stub_mode() -> None:
    from disque.tasks.canvas import ChordFailed, chain, chord, group

    tasks = stub_app()

    @tasks.task
    def add(a: int, b: int = 0) -> int:
        return a + b

    @tasks.task
    def total(values: list[int]) -> int:
        return sum(values)

    @tasks.task(max_attempts=1)
    def explode() -> None:
        raise ValueError("no")

    chained = chain(add.s(1, 2), add.s(3)).send()
    grouped = group(add.s(i, i) for i in range(4)).send()
    chorded = chord([add.s(i) for i in range(4)], total.s()).send()
    failing = chord([add.s(1), explode.s()], total.s()).send()
    assert chained.state == "PENDING"
    tasks.stub.run_pending(fail_fast=False)
    assert (chained.get(), grouped.get(), chorded.get()) == (6, [0, 2, 4, 6], 6)
    assert chained.state == "SUCCESS" and tasks.result(chained.id).get() == 6
    with pytest.raises(TaskFailed, match="part 1 failed: ValueError: no") as failed:
        failing.get()
    assert failed.value.type == ChordFailed.__name__
    with pytest.raises(TypeError, match="a workflow is made of signatures"):
        chain(add.s(1), add)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a workflow is made of signatures"):
        add.s(1) | add  # type: ignore[operator]


def test_a_chains_errback_hears_whichever_step_failed() -> None:
    from disque.tasks.canvas import chain

    tasks = stub_app()
    heard: list[dict] = []

    @tasks.task
    def add(a: int, b: int = 0) -> int:
        return a + b

    @tasks.task(max_attempts=1)
    def explode(value: int) -> None:
        raise ValueError(f"no {value}")

    @tasks.task
    def on_error(error: dict, where: str) -> None:
        heard.append({**error, "where": where})

    ok = chain(add.s(1), add.s(2)).on_error(on_error.s("ok")).send()
    failing = (add.s(1, 2) | explode.s() | add.s(5)).on_error(on_error.s("middle")).send()
    alone = chain(explode.s(7)).on_error(on_error.s("alone")).send()
    tasks.stub.run_pending(fail_fast=False)
    assert ok.get() == 3
    with pytest.raises(TaskFailed, match="no 3"):
        failing.get()
    with pytest.raises(TaskFailed, match="no 7"):
        alone.get()
    assert sorted((h["where"], h["task"], h["message"]) for h in heard) == [
        ("alone", explode.name, "no 7"),
        ("middle", explode.name, "no 3"),
    ]


def test_a_failure_keeps_its_traceback_and_the_message_its_options() -> None:
    tasks = stub_app()

    @tasks.task(result=True)
    def explode(n: int) -> None:
        raise ValueError(f"bad {n}")

    handle = explode.send_with_options(args=(3,), max_attempts=2, time_limit=5)
    body = tasks.stub.pending[0].body
    assert json.loads(body)["options"] == {"max_attempts": 2, "time_limit": 5}
    tasks.stub.run_pending(fail_fast=False)
    with pytest.raises(TaskFailed) as failed:
        handle.get()
    assert failed.value.traceback is not None
    assert failed.value.traceback.endswith("ValueError: bad 3")
    assert handle.traceback == failed.value.traceback and handle.failed()
    # A message whose options no producer of ours writes: dead-lettered, not run.
    bad = Message(explode.name, options={"max_attempts": "many"}).encode()
    call = tasks.prepare(Job(id="D-1", queue="default", body=bad))
    with pytest.raises(Reject, match='"options": max_attempts is a whole number'):
        call.run()
