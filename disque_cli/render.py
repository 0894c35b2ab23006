"""Renderers: one typed reply in, the bytes redis-cli would print out.

One renderer per output mode, each with the same signature
`(reply, options) -> bytes` and one branch per reply type:

  standard  what a terminal shows: `(integer) 1`, `(nil)`, `"quoted"`,
            `(error) ERR ...`, numbered nested arrays aligned on the widest
            index, `(empty array)`; after HELLO 3, RESP3's maps (`1# "key" =>
            value`), sets (`1~`), doubles, booleans as redis-cli 7 shows them;
  raw       what a pipe gets (redis-cli --raw): strings as they are, one
            array element per line, nil as an empty line;
  csv       redis-cli --csv;
  json      natural JSON, with Disque's key/value arrays (SHOW, QSTAT,
            JSCAN REPLY ALL jobs, CONFIG GET) and RESP3 maps as objects, HELLO
            as an object and INFO / CLUSTER INFO parsed into objects, so `jq`
            works.

`render` adds the per-reply delimiter like redis-cli does; "verbatim"
commands (INFO, CLUSTER NODES, ...) print their text as is in every mode but
JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from disque.protocol import HelloError, info_numbers, parse_hello, parse_info
from disque_cli.replies import Double, ErrorReply, Map, Push, Reply, RespSet, Status, Verbatim


class Mode(StrEnum):
    STANDARD = "standard"
    RAW = "raw"
    CSV = "csv"
    JSON = "json"


@dataclass(frozen=True)
class RenderOptions:
    mode: Mode = Mode.STANDARD
    mb_delim: bytes = b"\n"  # -d: between array elements in raw mode
    cmd_delim: bytes = b"\n"  # -D: after each reply in raw/csv/json mode


# ---- quoting (sdscatrepr) --------------------------------------------------


def _build_repr_table() -> list[bytes]:
    table = []
    for c in range(256):
        ch = bytes([c])
        if ch in (b"\\", b'"'):
            table.append(b"\\" + ch)
        elif ch == b"\n":
            table.append(b"\\n")
        elif ch == b"\r":
            table.append(b"\\r")
        elif ch == b"\t":
            table.append(b"\\t")
        elif ch == b"\a":
            table.append(b"\\a")
        elif ch == b"\b":
            table.append(b"\\b")
        elif 0x20 <= c <= 0x7E:
            table.append(ch)
        else:
            table.append(b"\\x%02x" % c)
    return table


_REPR = _build_repr_table()


def quote(data: bytes) -> bytes:
    """Quote like redis-cli: printable ASCII as is, escapes for the rest."""
    return b'"' + b"".join([_REPR[c] for c in data]) + b'"'


def _cstr(data: bytes) -> bytes:
    """redis-cli prints status and error texts as C strings: they stop at NUL."""
    return data.split(b"\0", 1)[0]


# ---- standard (terminal) -----------------------------------------------------


def format_standard(reply: Reply, prefix: bytes = b"") -> bytes:
    if isinstance(reply, ErrorReply):
        return b"(error) " + _cstr(reply) + b"\n"
    if isinstance(reply, Status):
        return _cstr(reply) + b"\n"
    if isinstance(reply, Double):
        return b"(double) " + reply + b"\n"
    if isinstance(reply, Verbatim):
        return bytes(reply) + b"\n"
    if isinstance(reply, bytes):
        return quote(reply) + b"\n"
    if reply is None:
        return b"(nil)\n"
    if isinstance(reply, bool):  # RESP3 boolean; before int, which it is too
        return b"(true)\n" if reply else b"(false)\n"
    if isinstance(reply, int):
        return b"(integer) %d\n" % reply
    if isinstance(reply, list):
        return _format_aggregate(reply, prefix)
    raise TypeError(f"unknown reply type {type(reply).__name__}")


# What an empty aggregate says, and the mark after each index (RESP3 types as redis-cli 7).
_EMPTY = {Map: b"(empty hash)\n", RespSet: b"(empty set)\n", Push: b"(empty push)\n"}
_INDEX_MARK = {Map: b"#", RespSet: b"~"}


def _format_aggregate(reply: list[Reply], prefix: bytes) -> bytes:
    """Numbered elements aligned on the widest index; a map numbers its pairs,
    `1# key => value`, and starts a value of several lines on a line of its own."""
    if not reply:
        return _EMPTY.get(type(reply), b"(empty array)\n")
    is_map = isinstance(reply, Map)
    items = list(zip(reply[::2], reply[1::2], strict=True)) if is_map else reply
    width = len(str(len(items)))
    mark = _INDEX_MARK.get(type(reply), b")")
    # Nested arrays are indented past this level's "NN) " column.
    nested_prefix = prefix + b" " * (width + 2)
    out = []
    for i, item in enumerate(items, 1):
        out.append((prefix if i > 1 else b"") + b"%*d%s " % (width, i, mark))
        if not is_map:
            out.append(format_standard(item, nested_prefix))
            continue
        key, value = item
        out.append(format_standard(key, nested_prefix)[:-1] + b" => ")
        if _multiline(value):
            out.append(b"\n" + nested_prefix)
        out.append(format_standard(value, nested_prefix))
    return b"".join(out)


def _multiline(reply: Reply) -> bool:
    """Whether format_standard prints `reply` on several lines (cliIsMultilineValueTTY)."""
    if not isinstance(reply, list) or not reply:
        return False
    if isinstance(reply, Map):
        return len(reply) > 2 or _multiline(reply[1])
    return len(reply) > 1 or _multiline(reply[0])


# ---- raw -----------------------------------------------------------------------


def format_raw(reply: Reply, mb_delim: bytes = b"\n") -> bytes:
    if isinstance(reply, ErrorReply):
        return bytes(reply) + b"\n"
    if isinstance(reply, bytes):  # status, bulk, double or verbatim
        return bytes(reply)
    if reply is None:
        return b""
    if isinstance(reply, bool):
        return b"(true)" if reply else b"(false)"
    if isinstance(reply, int):
        return b"%d" % reply
    if isinstance(reply, Map):
        return mb_delim.join(
            format_raw(key, mb_delim) + b" " + format_raw(value, mb_delim)
            for key, value in zip(reply[::2], reply[1::2], strict=True)
        )
    if isinstance(reply, list):
        return mb_delim.join(format_raw(element, mb_delim) for element in reply)
    raise TypeError(f"unknown reply type {type(reply).__name__}")


# ---- csv -----------------------------------------------------------------------


def format_csv(reply: Reply) -> bytes:
    if isinstance(reply, ErrorReply):
        return b"ERROR," + quote(_cstr(reply))
    if isinstance(reply, Double):
        return bytes(reply)
    if isinstance(reply, bytes):
        return quote(reply)
    if reply is None:
        return b"NULL"
    if isinstance(reply, bool):
        return b"true" if reply else b"false"
    if isinstance(reply, int):
        return b"%d" % reply
    if isinstance(reply, list):  # a map too: CSV has no maps, its pairs are a flat list
        return b",".join(format_csv(element) for element in reply)
    raise TypeError(f"unknown reply type {type(reply).__name__}")


# ---- json ----------------------------------------------------------------------


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def to_json(reply: Reply) -> Any:
    """The natural JSON value of a reply (a RESP3 map is an object)."""
    if isinstance(reply, ErrorReply):
        return {"error": _text(reply)}
    if isinstance(reply, Double):
        number = float(reply)
        return number if math.isfinite(number) else _text(reply)
    if isinstance(reply, bytes):
        return _text(reply)
    if isinstance(reply, Map):
        return {
            _json_key(key): to_json(value)
            for key, value in zip(reply[::2], reply[1::2], strict=True)
        }
    if isinstance(reply, list):
        return [to_json(element) for element in reply]
    return reply  # int, bool or None


def _json_key(key: Reply) -> str:
    value = to_json(key)
    return value if isinstance(value, str) else dumps(value)


def _pairs_to_object(reply: Reply) -> Any:
    """A flat key/value array as an object; anything else stays natural."""
    if (
        not isinstance(reply, list)
        or len(reply) % 2
        or not all(isinstance(key, bytes) and not isinstance(key, ErrorReply) for key in reply[::2])
    ):
        return to_json(reply)
    return {_text(key): to_json(value) for key, value in zip(reply[::2], reply[1::2], strict=True)}


def _hello_object(reply: Reply) -> Any:
    """HELLO: [version, my-id, [id, host, port, priority]...] as an object."""
    try:
        hello = parse_hello(reply)
    except HelloError:
        return to_json(reply)
    return {
        "version": hello.version,
        "id": hello.myid,
        "nodes": [
            {"id": node.id, "host": node.host, "port": node.port, "priority": node.priority}
            for node in hello.nodes
        ],
    }


def _jscan_object(reply: Reply) -> Any:
    """JSCAN: [cursor, items]; with REPLY ALL the items are jobs as key/value arrays."""
    if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[1], list):
        return to_json(reply)
    items = [
        _pairs_to_object(item) if isinstance(item, list) else to_json(item) for item in reply[1]
    ]
    return [to_json(reply[0]), items]


def _info_object(reply: Reply) -> Any:
    """INFO, CLUSTER INFO: sections as objects, numbers as numbers."""
    if isinstance(reply, bytes) and not isinstance(reply, ErrorReply):
        return info_numbers(parse_info(_text(reply)))
    return to_json(reply)


JSON_SHAPES = {
    "pairs": _pairs_to_object,
    "hello": _hello_object,
    "jscan": _jscan_object,
    "info": _info_object,
}


def dumps(value: Any) -> str:
    """JSON as every --json output writes it: compact, UTF-8 text as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def format_json(reply: Reply, shape: str | None = None) -> bytes:
    value = JSON_SHAPES[shape](reply) if shape else to_json(reply)
    return dumps(value).encode("utf-8")


# ---- entry point ---------------------------------------------------------------


def render(
    reply: Reply, options: RenderOptions, *, verbatim: bool = False, shape: str | None = None
) -> bytes:
    """The full output for one reply, delimiter included."""
    mode = options.mode
    if mode is Mode.JSON:
        return format_json(reply, shape) + options.cmd_delim
    if verbatim:
        # redis-cli prints INFO-like text as is in every mode, with no delimiter.
        return format_raw(reply, options.mb_delim)
    if mode is Mode.STANDARD:
        return format_standard(reply)
    if mode is Mode.RAW:
        return format_raw(reply, options.mb_delim) + options.cmd_delim
    return format_csv(reply) + options.cmd_delim
