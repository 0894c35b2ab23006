"""A task's message: what a job's body holds when it is a task call, format 1.

The body is one map, written by the task's serializer::

    {"v": 1, "id": "3f2a...", "task": "billing.charge", "args": [42], "kwargs": {"eur": 5},
     "reply_to": "billing:result:3f2a...", "meta": {"traceparent": "00-..."}}

* ``v``: the format, 1. A worker refuses a format it does not know.
* ``id``: the message's own ID (hex), made by the producer before ADDJOB.
* ``task``: the registered name of the function (``module.function`` unless
  named); ``args`` a list, ``kwargs`` a map of string keys (either may be left
  out: none).
* ``reply_to`` (optional): the queue the worker ADDJOBs the result to.
* ``meta`` (optional): string to string, for middleware (trace context ...).
* ``options`` (optional): what the worker runs this call with, over the task's
  own: ``max_attempts``, ``time_limit``, ``track_started``.
* ``link`` (optional): the steps of a chain after this one (canvas.py), each a
  map: the call to send with this call's return value as its first argument.
* ``link_error`` (optional): calls to send when this one fails for good, each
  given the error (a map: ``id``, ``task``, ``type``, ``message``,
  ``traceback``) as its first argument.
* ``chord`` (optional): this call is part ``index`` of a chord of ``size``
  (canvas.py): its outcome goes to the chord's queue, and the part that
  completes it sends the ``callback``.

A result is a map too, on the reply queue, in the same serializer::

    {"v": 1, "id": "3f2a...", "ok": true, "value": 47}
    {"v": 1, "id": "3f2a...", "ok": false, "error": {"type": "ValueError", "message": "...",
                                                     "traceback": "Traceback ..."}}

The serializer is told by the body's first byte, so one queue can carry
several: ``{`` (or leading white space) is JSON, a msgpack map is msgpack
(0x81-0x8f, 0xde, 0xdf), 0x80 followed by a protocol number is pickle. A
producer in any language writes JSON. Pickle runs code when read: a worker
reads it only when told to (``accept``), and nothing writes it by default.
"""

from __future__ import annotations

import json
import pickle
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

FORMAT = 1
DEFAULT_ACCEPT = ("json", "msgpack")


class BadMessage(ValueError):
    """A body that is not a task message this worker can read (format, serializer,
    fields): retrying it cannot help."""


class Serializer(Protocol):
    name: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JSONSerializer:
    name = "json"

    def dumps(self, value: Any) -> bytes:
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{exc}: a task's arguments and result travel as JSON unless the task "
                "says serializer='msgpack' (bytes) or 'pickle' (any object)"
            ) from None

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


class MsgpackSerializer:
    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack
        except ImportError:
            raise ImportError(
                "serializer 'msgpack' needs the msgpack package: pip install 'disque-py-client[msgpack]'"
            ) from None
        self.msgpack = msgpack

    def dumps(self, value: Any) -> bytes:
        return bytes(self.msgpack.packb(value, use_bin_type=True))

    def loads(self, data: bytes) -> Any:
        return self.msgpack.unpackb(data, raw=False, strict_map_key=False)


class PickleSerializer:
    name = "pickle"

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=5)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 (only when the worker accepts pickle)


SERIALIZERS: dict[str, type[JSONSerializer] | type[MsgpackSerializer] | type[PickleSerializer]]
SERIALIZERS = {"json": JSONSerializer, "msgpack": MsgpackSerializer, "pickle": PickleSerializer}
_made: dict[str, Serializer] = {}


def serializer(name: str) -> Serializer:
    """The serializer called ``name`` (json, msgpack, pickle)."""
    made = _made.get(name)
    if made is None:
        kind = SERIALIZERS.get(name)
        if kind is None:
            raise ValueError(f"unknown serializer {name!r}: json, msgpack or pickle")
        made = _made[name] = kind()
    return made


def sniff(body: bytes) -> str:
    """Which serializer wrote ``body``, from its first byte (see the module)."""
    first = body[:1]
    if first in (b"{", b" ", b"\t", b"\n", b"\r"):
        return "json"
    if first and (0x81 <= first[0] <= 0x8F or first[0] in (0xDE, 0xDF)):
        return "msgpack"
    if first == b"\x80" and len(body) > 1 and 2 <= body[1] <= 5:
        return "pickle"
    raise BadMessage(f"not a task message: its body starts with {body[:8]!r}")


def load(body: bytes, accept: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The map in ``body`` and the name of its serializer, which must be accepted."""
    name = sniff(body)
    if name not in accept:
        raise BadMessage(f"a {name} message, and this worker accepts {', '.join(accept)}")
    try:
        value = serializer(name).loads(body)
    except ImportError:
        raise
    except Exception as exc:
        raise BadMessage(f"unreadable {name} message: {exc}") from None
    if not isinstance(value, dict):
        raise BadMessage(f"a task message is a map, not {type(value).__name__}")
    if value.get("v") != FORMAT:
        raise BadMessage(f"message format {value.get('v')!r}: this worker reads {FORMAT}")
    return value, name


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Message:
    """One call of a task, as it travels."""

    task: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_id)
    reply_to: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    link: list[dict[str, Any]] = field(default_factory=list)
    chord: dict[str, Any] | None = None
    link_error: list[dict[str, Any]] = field(default_factory=list)

    def encode(self, serializer_name: str = "json") -> bytes:
        fields: dict[str, Any] = {"v": FORMAT, "id": self.id, "task": self.task}
        if self.args:
            fields["args"] = list(self.args)
        if self.kwargs:
            fields["kwargs"] = self.kwargs
        if self.reply_to is not None:
            fields["reply_to"] = self.reply_to
        if self.meta:
            fields["meta"] = self.meta
        if self.options:
            fields["options"] = self.options
        if self.link:
            fields["link"] = self.link
        if self.chord is not None:
            fields["chord"] = self.chord
        if self.link_error:
            fields["link_error"] = self.link_error
        return serializer(serializer_name).dumps(fields)

    @classmethod
    def decode(cls, body: bytes, accept: tuple[str, ...] = DEFAULT_ACCEPT) -> tuple[Message, str]:
        """The message in ``body`` and its serializer's name; BadMessage when it is none."""
        fields, name = load(body, accept)
        task, args, kwargs = fields.get("task"), fields.get("args", []), fields.get("kwargs", {})
        reply_to, meta = fields.get("reply_to"), fields.get("meta", {})
        if not isinstance(task, str) or not task:
            raise BadMessage('a task message names its task ("task": a string)')
        if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
            raise BadMessage('"args" is a list and "kwargs" a map')
        if not all(isinstance(k, str) for k in kwargs):
            raise BadMessage('"kwargs" keys are strings')
        if reply_to is not None and not isinstance(reply_to, str):
            raise BadMessage('"reply_to" is a queue name')
        if not isinstance(meta, dict):
            raise BadMessage('"meta" is a map')
        options, link, chord = (
            fields.get("options", {}),
            fields.get("link", []),
            fields.get("chord"),
        )
        link_error = fields.get("link_error", [])
        if not isinstance(options, dict) or not isinstance(link, list | tuple):
            raise BadMessage('"options" is a map and "link" a list')
        if not isinstance(link_error, list | tuple):
            raise BadMessage('"link_error" is a list')
        if not all(isinstance(step, dict) for step in [*link, *link_error]):
            raise BadMessage('each step of "link" and "link_error" is a map')
        if chord is not None and not isinstance(chord, dict):
            raise BadMessage('"chord" is a map')
        message_id = fields.get("id")
        return (
            cls(
                task=task,
                args=list(args),
                kwargs=kwargs,
                id=str(message_id) if message_id is not None else new_id(),
                reply_to=reply_to,
                meta={str(k): str(v) for k, v in meta.items()},
                options=options,
                link=list(link),
                chord=chord,
                link_error=list(link_error),
            ),
            name,
        )


def encode_result(
    message_id: str, serializer_name: str, value: Any = None, error: BaseException | None = None
) -> bytes:
    """The reply job's body: the value, or the error's type, text and traceback."""
    fields: dict[str, Any] = {"v": FORMAT, "id": message_id, "ok": error is None}
    if error is None:
        fields["value"] = value
    else:
        fields["error"] = describe(error)
    return serializer(serializer_name).dumps(fields)


def describe(error: BaseException) -> dict[str, str]:
    """An exception as a result carries it: its class name, text and traceback (the
    worker's, so that the caller sees where it failed)."""
    described = {"type": type(error).__name__, "message": str(error)}
    if error.__traceback__ is not None:
        described["traceback"] = "".join(traceback.format_exception(error)).rstrip("\n")
    return described
