"""Workflows, Celery's canvas on Disque's own primitives: signatures, chains,
groups and chords.

    chain(fetch.s(url), parse.s(), store.s()).send()    # each gets the last's value
    group(resize.s(i) for i in images).send().get()     # all at once, values in order
    chord(group(count.s(p) for p in pages), total.s()).send().get()

* A **signature** (``task.s(*args, **kwargs)``) is a call not sent yet;
  ``task.si(...)`` one that ignores the previous step's value.
* A **chain** is one message carrying the steps after it (``link``): the
  worker that runs a step sends the next, the value first in its arguments,
  before it acknowledges its own job. The chain's handle is its last step's
  result; a step that fails for good ends the chain and its error reaches that
  handle.
* A **group** is its calls sent together; its handle gets their values in order.
* A **chord** is a group whose calls each add their outcome, a *part*, to the
  queue ``chord:<id>`` on one node (the producer's: its ID travels in the
  message). The worker whose part makes the count (QLEN) takes them all with
  one GETJOB NOHANG: one node, so one worker gets them, and it sends the
  callback with the values in order, or, when a part failed, gives the
  callback's handle the error.

At-least-once throughout: a worker that dies after sending a step but before
acknowledging its own job makes the step run twice; a chord part added twice
counts once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from disque.errors import DisqueError
from disque.middleware import notify
from disque.tasks.message import (
    FORMAT,
    BadMessage,
    Message,
    describe,
    encode_result,
    load,
    serializer,
)
from disque.tasks.results import Result, reply_queue

if TYPE_CHECKING:
    from disque.tasks.app import Tasks
    from disque.tasks.task import Task

log = logging.getLogger("disque.tasks")

PART_RETRY = 30  # a part's copy on a lost node is queued by the other within this


@dataclass
class Signature:
    """A call of ``task`` not sent yet."""

    task: Task[Any, Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    immutable: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    def set(self, **options: Any) -> Signature:
        """The same call with per-call options (``send_with_options``'s)."""
        self.task.with_options(options)  # a wrong one: said now
        return Signature(
            self.task, self.args, self.kwargs, self.immutable, {**self.options, **options}
        )

    def send(self) -> Result[Any]:
        return self.task.send_with_options(args=self.args, kwargs=self.kwargs, **self.options)

    delay = send

    def __or__(self, other: Signature | Chain) -> Chain:
        return Chain([self]) | other

    def step(self, *, result: bool) -> dict[str, Any]:
        """This call as a step a worker sends (a chain's next, a chord's callback)."""
        options = self.task.with_options({**self.options, **({"result": True} if result else {})})
        message, _ = self.task.message(self.args, self.kwargs, self.options)
        return {
            "task": self.task.name,
            "id": message.id,
            "queue": options.queue,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "immutable": self.immutable,
            "options": message.options,
            "serializer": options.serializer,
            "reply_to": reply_queue(message.id) if options.result else None,
            "add": {
                "retry": options.retry,
                "ttl": options.ttl,
                "replicate": options.replicate,
                "timeout_ms": options.timeout_ms,
            },
        }


@dataclass
class Chain:
    """Steps run one after the other, each given the previous one's value."""

    steps: list[Signature]
    errbacks: list[Signature] = field(default_factory=list)

    def __or__(self, other: Signature | Chain) -> Chain:
        more = other.steps if isinstance(other, Chain) else [check_signature(other)]
        errbacks = other.errbacks if isinstance(other, Chain) else []
        return Chain([*self.steps, *more], [*self.errbacks, *errbacks])

    def on_error(self, errback: Signature) -> Chain:
        """Celery's ``chain.on_error``: ``errback`` is sent with the error of whichever
        step fails for good (every step carries it; the chain ends there, so once)."""
        self.errbacks.append(check_signature(errback))
        return self

    def send(self) -> Result[Any]:
        """Send the first step, carrying the others; the last step's handle."""
        if not self.steps:
            raise ValueError("an empty chain")
        errbacks = [errback.step(result=False) for errback in self.errbacks]
        first, last = self.steps[0], len(self.steps) - 2
        rest = [
            {**step.step(result=i == last), "link_error": errbacks}
            for i, step in enumerate(self.steps[1:])
        ]
        tasks = first.task.tasks
        options = first.options if rest else {**first.options, "result": True}
        message, call_options = first.task.message(first.args, first.kwargs, options)
        message.link, message.link_error = rest, errbacks
        handle = tasks.send(first.task, message, call_options, None)
        if not rest:
            return handle
        end = rest[-1]
        return Result(tasks, end["id"], None, end["reply_to"], end["serializer"])

    delay = send


def chain(*steps: Signature | Chain) -> Chain:
    """``chain(a.s(1), b.s(), c.s())``: a(1), then b(a's value), then c(b's value)."""
    flat: list[Signature] = []
    for step in steps:
        flat += step.steps if isinstance(step, Chain) else [check_signature(step)]
    return Chain(flat)


@dataclass
class Group:
    """Calls sent together."""

    calls: list[Signature]

    def send(self) -> GroupResult:
        return GroupResult([call.set(result=True).send() for call in self.calls])

    delay = send


def group(*calls: Signature | Iterable[Signature]) -> Group:
    """``group(a.s(1), a.s(2))`` or ``group(a.s(i) for i in range(10))``."""
    flat: list[Signature] = []
    for call in calls:
        flat += [call] if isinstance(call, Signature) else list(call)
    return Group([check_signature(call) for call in flat])


class GroupResult:
    """The handles of a group's calls."""

    def __init__(self, results: list[Result[Any]]) -> None:
        self.results = results

    def __iter__(self) -> Any:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def get(self, timeout: float | None = None) -> list[Any]:
        """Every call's value, in order (TaskFailed at the first that failed);
        ``timeout`` for them all."""
        deadline = None if timeout is None else time.monotonic() + timeout
        values = []
        for result in self.results:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            values.append(result.get(timeout=left))
        return values

    def ready(self) -> bool:
        return all(result.ready() for result in self.results)

    def successful(self) -> bool:
        return all(result.successful() for result in self.results)

    def failed(self) -> bool:
        return any(result.failed() for result in self.results)


@dataclass
class Chord:
    """A group, then a callback given the list of the group's values."""

    header: Group
    body: Signature

    def send(self) -> Result[Any]:
        """Send the group's calls; the callback's handle."""
        if not self.header.calls:
            return self.body.set(result=True).send()
        tasks = self.body.task.tasks
        callback = self.body.step(result=True)
        chord_id = callback["id"]
        home = (
            None if tasks.stub is not None else tasks.client().myid or tasks.client().hello().myid
        )
        for index, call in enumerate(self.header.calls):
            message, options = call.task.message(call.args, call.kwargs, call.options)
            message.chord = {
                "id": chord_id,
                "size": len(self.header.calls),
                "index": index,
                "home": home,
                "callback": callback,
            }
            tasks.send(call.task, message, options, None)
        return Result(tasks, callback["id"], None, callback["reply_to"], callback["serializer"])

    delay = send


def chord(header: Group | Iterable[Signature], body: Signature) -> Chord:
    """``chord(group(a.s(i) for i in range(10)), total.s())``: total([a(0), ..., a(9)])."""
    return Chord(header if isinstance(header, Group) else group(header), check_signature(body))


def steps_of(link: Signature | Chain) -> list[dict[str, Any]]:
    """A call's ``link`` as the steps its worker sends after it (none keeps a result)."""
    chained = link.steps if isinstance(link, Chain) else [check_signature(link)]
    return [step.step(result=False) for step in chained]


def check_signature(value: Any) -> Signature:
    if not isinstance(value, Signature):
        raise TypeError(f"a workflow is made of signatures (task.s(...)), not {value!r:.60}")
    return value


# ---- the worker's side ---------------------------------------------------------------
def send_step(
    tasks: Tasks, step: dict[str, Any], args: list[Any], link: list[dict[str, Any]]
) -> None:
    """ADDJOB of a step (a chain's next, a chord's callback) with these arguments."""
    message = Message(
        str(step["task"]),
        args,
        dict(step.get("kwargs") or {}),
        id=str(step["id"]),
        reply_to=step.get("reply_to"),
        options=dict(step.get("options") or {}),
        link=link,
        link_error=list(step.get("link_error") or []),
    )
    notify(tasks.middleware, "before_send", message)
    name = str(step.get("serializer") or "json")
    tasks.send_message(message, str(step["queue"]), dict(step.get("add") or {}), name)


def given(step: dict[str, Any], value: Any) -> list[Any]:
    """A step's arguments, the previous value first unless the step is immutable."""
    args = list(step.get("args") or [])
    return args if step.get("immutable") else [value, *args]


def send_next(tasks: Tasks, message: Message, value: Any) -> None:
    """A chain's step done: send the next one, ``value`` first in its arguments."""
    send_step(tasks, message.link[0], given(message.link[0], value), message.link[1:])


def send_errbacks(tasks: Tasks, message: Message, error: BaseException) -> None:
    """A call failed for good: its ``link_error`` calls get the error first."""
    described = {"id": message.id, "task": message.task, **describe(error)}
    for step in message.link_error:
        send_step(tasks, step, [described, *(step.get("args") or [])], [])


def chain_failed(tasks: Tasks, message: Message, error: BaseException) -> None:
    """A chain's step failed for good: the chain's handle (its last step) hears it."""
    step_failed(tasks, message.link[-1], error)


def step_failed(tasks: Tasks, step: dict[str, Any], error: BaseException) -> None:
    """A step that will not run: its handle, if it has one, gets ``error``."""
    if step.get("reply_to"):
        failed = Message(str(step["task"]), id=str(step["id"]), reply_to=str(step["reply_to"]))
        name = str(step.get("serializer") or "json")
        tasks.reply("", failed, encode_result(failed.id, name, error=error))


def chord_part_done(
    tasks: Tasks,
    chord_info: dict[str, Any],
    *,
    value: Any = None,
    error: BaseException | None = None,
) -> None:
    """Add this call's part to the chord's queue on its home node; the part that
    makes the count sends the callback (or its error)."""
    callback = chord_info["callback"]
    name = str(callback.get("serializer") or "json")
    part: dict[str, Any] = {"v": FORMAT, "id": chord_info["id"], "index": chord_info["index"]}
    part.update(
        {"ok": True, "value": value} if error is None else {"ok": False, "error": describe(error)}
    )
    body = serializer(name).dumps(part)
    if tasks.stub is not None:
        tasks.stub.chord_part(chord_info, body)
        return
    queue = f"chord:{chord_info['id']}"
    client = tasks.store.on(tasks.store.home_of_node(chord_info.get("home")))
    tasks.store.add(client, queue, body, tasks.store.result_copies(), PART_RETRY)
    size = int(chord_info["size"])
    queued = client.qlen(queue)
    if queued < size:
        return
    jobs = client.get_job(queue, count=queued, nohang=True)  # one node: one worker gets them
    if not jobs:
        return
    parts: dict[int, dict[str, Any]] = {}
    for job in jobs:
        try:
            fields, _ = load(job.body, (*tasks.accept, name))
            parts.setdefault(int(fields["index"]), fields)
        except (BadMessage, KeyError, TypeError, ValueError) as exc:
            log.warning("chord %s: part %s unreadable (%s)", chord_info["id"], job.id, exc)
    if len(parts) < size:  # a part added twice made the count: put them back
        client.nack(*(job.id for job in jobs))
        return
    finish_chord(tasks, chord_info, [parts[i] for i in range(size)])
    client.ack(*(job.id for job in jobs))


def finish_chord(tasks: Tasks, chord_info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
    """Every part is in: the callback runs with the values, or hears the first failure."""
    callback = chord_info["callback"]
    failed = next((p for p in parts if not p.get("ok")), None)
    if failed is None:
        send_step(tasks, callback, given(callback, [p.get("value") for p in parts]), [])
        return
    error = failed.get("error") or {}
    why = f"part {failed.get('index')} failed: {error.get('type')}: {error.get('message')}"
    step_failed(tasks, callback, ChordFailed(why))


class ChordFailed(DisqueError):
    """A chord's call failed for good: its callback does not run."""
