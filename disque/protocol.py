"""What every client of the project knows about a Disque node: how to connect,
what HELLO says (the nodes and their priority) and what INFO says.

`disque`, `disque-benchmark`, `disque-tui` and the Spark data source all read
HELLO and INFO through this module, so the reply formats are written once:

    HELLO  [version, my-id, [id, ip, port, priority], ...]   version is 1;
           ports and priorities arrive as bulk strings; priority 1 is a
           healthy node, 5 one without a bus link, 10 one possibly failing,
           100 one leaving: clients prefer the lowest, as Disque's do.
    INFO   "# Section" headers, then "field:value" lines; its build ID
           tells C Disque from ours (server_kind).

Replies are taken as redis-py returns them with its response callbacks off
(bytes, ints, nested lists); str is accepted too.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from disque.tls import TLS

if TYPE_CHECKING:
    import redis.asyncio as aredis

HELLO_VERSION = 1  # the only format Disque defines
PRIORITY_OK = 1
PRIORITY_FAILING = 10  # possibly failing (PFAIL) or failing
PRIORITY_LEAVING = 100


# ---------------------------------------------------------------------------
# Connections
# ---------------------------------------------------------------------------


def _client_options(
    host: str,
    port: int,
    password: str | None,
    socket_timeout: float | None,
    connect_timeout: float | None,
    tls: TLS | None,
) -> dict[str, Any]:
    """What connect and connect_async give redis-py alike (each adds its own Retry)."""
    return {
        "host": host,
        "port": port,
        "password": password or None,
        "protocol": 2,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        **(tls.client_kwargs() if tls else {}),
    }


def connect(
    host: str,
    port: int,
    password: str | None = None,
    *,
    socket_timeout: float | None = None,
    connect_timeout: float | None = None,
    tls: TLS | None = None,
    raw: bool = False,
) -> redis.Redis:
    """A redis-py client for one node: RESP2 (Disque's protocol), authenticated
    with `password`, over TLS with `tls`, and never retrying.

    No automatic retry: redis-py would resend a pipeline of ADDJOBs after a
    lost connection (duplicate jobs) and hide dead nodes behind backoffs; the
    callers choose another node, or try again next round, instead. `raw`
    switches redis-py's response callbacks off (INFO as bytes, not a dict).
    """
    client = redis.Redis(
        retry=Retry(NoBackoff(), 0),
        **_client_options(host, port, password, socket_timeout, connect_timeout, tls),
    )
    if raw:
        client.response_callbacks.clear()
    return client


def connect_async(
    host: str,
    port: int,
    password: str | None = None,
    *,
    socket_timeout: float | None = None,
    connect_timeout: float | None = None,
    tls: TLS | None = None,
    max_connections: int | None = None,
) -> aredis.Redis:
    """`connect` for asyncio, with raw replies (see `connect`)."""
    import redis.asyncio as aredis  # here: the synchronous tools need not load asyncio
    from redis.asyncio.retry import Retry as AsyncRetry

    client = aredis.Redis(
        retry=AsyncRetry(NoBackoff(), 0),
        max_connections=max_connections,
        **_client_options(host, port, password, socket_timeout, connect_timeout, tls),
    )
    client.response_callbacks.clear()
    return client


# ---------------------------------------------------------------------------
# HELLO
# ---------------------------------------------------------------------------


class HelloError(ValueError):
    """A reply that is not Disque's HELLO."""


@dataclass(frozen=True, slots=True)
class Node:
    """One node as HELLO lists it: lower priority is better, 100 is leaving."""

    id: str
    host: str  # empty when the node never learned its own IP (it met no one)
    port: int
    priority: int = PRIORITY_OK

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Hello:
    version: int
    myid: str
    nodes: tuple[Node, ...]


def parse_hello(reply: Any) -> Hello:
    """HELLO: `[1, my-id, [id, ip, port, priority], ...]`; raises HelloError otherwise."""
    if (
        not isinstance(reply, list)
        or len(reply) < 2
        or reply[0] != HELLO_VERSION
        or not isinstance(reply[1], (bytes, str))
    ):
        raise HelloError(f"unexpected HELLO reply {reply!r:.200}")
    return Hello(HELLO_VERSION, text(reply[1]), tuple(_hello_node(e) for e in reply[2:]))


def _hello_node(entry: Any) -> Node:
    if not isinstance(entry, list) or len(entry) != 4:
        raise HelloError(f"unexpected HELLO node entry {entry!r:.200}")
    node_id, host, port, priority = (text(field) for field in entry)
    if not (port.isdigit() and priority.isdigit()):
        raise HelloError(f"unexpected HELLO node entry {entry!r:.200}")
    return Node(node_id, host, int(port), int(priority))


def by_priority(nodes: Iterable[Node]) -> list[Node]:
    """Lowest HELLO priority first, ties in random order (spreads the load)."""
    return sorted(nodes, key=lambda node: (node.priority, random.random()))


# ---------------------------------------------------------------------------
# INFO
# ---------------------------------------------------------------------------


def parse_info(reply: bytes | str) -> dict[str, Any]:
    """INFO text as `{section: {field: value}}` (section names in lower case);
    fields before any section header stay on top."""
    result: dict[str, Any] = {}
    section: dict[str, Any] = result
    for line in text(reply).splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            section = result.setdefault(line.lstrip("#").strip().lower(), {})
        elif ":" in line:
            field, value = line.split(":", 1)
            section[field] = value
    return result


def flat_info(reply: bytes | str) -> dict[str, str]:
    """INFO text as one `{field: value}` dict, sections merged."""
    flat: dict[str, str] = {}
    for name, value in parse_info(reply).items():
        if isinstance(value, dict):
            flat.update(value)
        else:
            flat[name] = value
    return flat


def server_kind(info: Mapping[str, str]) -> str:
    """Which server an INFO reply comes from: "C" (Disque 1.0-rc1's disque-server:
    its build ID is a 64-bit hash printed with %llx, up to 16 hex digits, fewer
    when it starts with zeros), "python" (ours: the interpreter and build, such
    as "cpython-3.11.7-mypyc"), or "?" without a build ID. During a rolling
    upgrade a cluster has both; both say disque_version 1.0-rc1."""
    build = info.get("disque_build_id", "")
    if not build:
        return "?"
    if len(build) <= 16 and all(c in "0123456789abcdef" for c in build):
        return "C"
    return "python"


_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?\d+\.\d+")
_TEXT_FIELDS = ("run_id",)  # fields that may look like numbers but are names


def info_value(field: str, value: str) -> Any:
    """An INFO value as a number when it is one (int or float), else the text;
    versions and IDs stay text even when they look like numbers."""
    if field.endswith("_version") or field in _TEXT_FIELDS:
        return value
    if _INTEGER.fullmatch(value):
        return int(value)
    if _DECIMAL.fullmatch(value):
        return float(value)
    return value


def info_numbers(fields: dict[str, Any]) -> dict[str, Any]:
    """`parse_info`'s result with every value through `info_value`."""
    return {
        name: info_numbers(value) if isinstance(value, dict) else info_value(name, value)
        for name, value in fields.items()
    }


# ---------------------------------------------------------------------------
# Reply values
# ---------------------------------------------------------------------------


def text(value: Any) -> str:
    """A reply element as str (bulk strings arrive as bytes; nil as "")."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
