"""Every command disque-tui sends, and the parsers of their raw RESP2 replies.

The poller talks to nodes only through the functions here, so the wire
vocabulary of the dashboard reads in one place. Replies arrive raw (bytes,
ints, nested lists: redis-py's response callbacks are switched off) and are
turned into plain Python values by the `parse_*` functions, which are pure and
tested without sockets; HELLO and INFO are read by `disque.protocol`, as
in every tool of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import redis.asyncio as aredis

from disque.commands import pairs
from disque.protocol import Hello, connect_async, flat_info, parse_hello, text
from disque.tls import TLS

# ---------------------------------------------------------------------------
# Low level: connections and reply values
# ---------------------------------------------------------------------------


def connect(
    host: str, port: int, password: str | None, timeout: float, tls: TLS | None = None
) -> aredis.Redis:
    """An asyncio client for one node: RESP2, raw replies, no retries.

    Retrying is the poller's business (next cycle), so a dead node costs one
    failed attempt per cycle and never a backoff loop inside redis-py. Reads
    have no socket timeout of their own: the caller bounds each whole poll
    with one `asyncio.timeout`, which spares redis-py arming a timer for each
    of the thousand replies of a pipeline. With `tls`, the handshake is bounded
    by the same connect timeout.
    """
    return connect_async(
        host,
        port,
        password,
        connect_timeout=timeout,
        socket_timeout=None,
        tls=tls,
        max_connections=4,
    )


def integer(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_flat(reply: list | None) -> dict[str, Any]:
    """A flat key/value array (QSTAT, SHOW) as a dict keyed by str ({} for nil):
    the disque package's reading of it."""
    return pairs(reply) or {}


# ---------------------------------------------------------------------------
# Reply parsers
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterNodeLine:
    id: str
    address: str
    flags: frozenset[str]
    link: str


def parse_cluster_nodes(reply: bytes | str) -> list[ClusterNodeLine]:
    """CLUSTER NODES: one `id ip:port flags ping pong link` line per known node."""
    lines = []
    for line in text(reply).splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        flags = frozenset(  # C Disque writes PFAIL as "fail?", ours as "pfail"
            "pfail" if f == "fail?" else f for f in fields[2].split(",") if f and f != "noflags"
        )
        address = fields[1].partition("@")[0]  # ip:port[@busport]
        lines.append(
            ClusterNodeLine(fields[0], address, flags, fields[5] if len(fields) > 5 else "")
        )
    return lines


class QueueStat(NamedTuple):
    """QSTAT of one queue on one node (counters are cumulative). A NamedTuple:
    a thousand of them are parsed per node per poll, and compared cheaply."""

    name: str
    length: int
    age: int
    idle: int
    blocked: int
    import_from: tuple[str, ...]
    import_rate: int
    jobs_in: int
    jobs_out: int
    pause: str


# QSTAT's reply, key by key, as Disque 1.0-rc1 sends it: parsed by position
# when it matches (the hot path), by key otherwise.
QSTAT_KEYS = (
    b"name",
    b"len",
    b"age",
    b"idle",
    b"blocked",
    b"import-from",
    b"import-rate",
    b"jobs-in",
    b"jobs-out",
    b"pause",
)


def parse_qstat(reply: list | None) -> QueueStat | None:
    """QSTAT: flat `name len age idle blocked import-from import-rate jobs-in jobs-out pause`;
    None when the queue does not exist (any more) on that node."""
    if not reply:
        return None
    if tuple(reply[0::2]) == QSTAT_KEYS:
        (name, length, age, idle, blocked, imports, import_rate, jobs_in, jobs_out, pause) = reply[
            1::2
        ]
        return QueueStat(
            name.decode("utf-8", "replace"),
            length,
            age,
            idle,
            blocked,
            tuple(i.decode() for i in imports) if imports else (),
            import_rate,
            jobs_in,
            jobs_out,
            pause.decode(),
        )
    d = parse_flat(reply)
    imports = d.get("import-from") or []
    return QueueStat(
        name=text(d.get("name")),
        length=integer(d.get("len")),
        age=integer(d.get("age")),
        idle=integer(d.get("idle")),
        blocked=integer(d.get("blocked")),
        import_from=tuple(text(i) for i in imports) if isinstance(imports, list) else (),
        import_rate=integer(d.get("import-rate")),
        jobs_in=integer(d.get("jobs-in")),
        jobs_out=integer(d.get("jobs-out")),
        pause=text(d.get("pause")) or "none",
    )


def parse_qpeek(reply: list | None) -> list[tuple[str, str, bytes]]:
    """QPEEK: `[[queue, id, body], ...]` as (queue, id, body) tuples."""
    return [
        (text(j[0]), text(j[1]), j[2] if isinstance(j[2], bytes) else text(j[2]).encode())
        for j in reply or []
        if isinstance(j, list) and len(j) >= 3
    ]


def parse_show(reply: list | None) -> dict[str, Any] | None:
    """SHOW: the flat 30-element key/value array as a dict with str keys and
    decoded values, except `body` (kept as bytes); None for an unknown job."""
    if not reply:
        return None
    out: dict[str, Any] = {}
    for key, value in parse_flat(reply).items():
        if key == "body":
            out[key] = value
        elif isinstance(value, list):
            out[key] = [text(v) for v in value]
        elif isinstance(value, bytes):
            out[key] = text(value)
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------------------
# Commands, as the poller sends them
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeReport:
    """What one poll of one node returned."""

    hello: Hello
    info: dict[str, str]
    cluster_nodes: list[ClusterNodeLine]
    queues: dict[str, QueueStat]
    oldest: dict[str, int] = field(default_factory=dict)  # queue -> ctime of its oldest job


# The oldest job's age is asked for the longest queues of a node only (two more
# pipelined round trips: QPEEK then SHOW), to bound the cost of a poll.
OLDEST_QUEUES = 100


async def fetch_node(
    client: aredis.Redis, scan_count: int = 500, qstat_batch: int = 1000
) -> NodeReport:
    """One poll of one node: HELLO, INFO, CLUSTER NODES and the first QSCAN page
    in one pipelined round trip, further QSCAN pages by COUNT, then QSTAT of
    every queue pipelined in batches."""
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("HELLO")
    pipe.execute_command("INFO")
    pipe.execute_command("CLUSTER", "NODES")
    pipe.execute_command("QSCAN", 0, "COUNT", scan_count)
    hello, info, nodes, scan = await pipe.execute()
    names = dict.fromkeys(scan[1])  # ordered set: QSCAN may repeat names
    cursor = scan[0]
    while integer(cursor) != 0:
        cursor, page = await client.execute_command("QSCAN", cursor, "COUNT", scan_count)
        names.update(dict.fromkeys(page))
    queues: dict[str, QueueStat] = {}
    ordered = list(names)
    for start in range(0, len(ordered), qstat_batch):
        pipe = client.pipeline(transaction=False)
        for name in ordered[start : start + qstat_batch]:
            pipe.execute_command("QSTAT", name)
        for reply in await pipe.execute(raise_on_error=False):
            if isinstance(reply, list):
                stat = parse_qstat(reply)
                if stat is not None:
                    queues[stat.name] = stat
    longest = sorted((q for q in queues.values() if q.length > 0), key=lambda q: -q.length)
    oldest = await oldest_jobs(client, [q.name for q in longest[:OLDEST_QUEUES]])
    return NodeReport(
        parse_hello(hello), flat_info(info), parse_cluster_nodes(nodes), queues, oldest
    )


async def oldest_jobs(client: aredis.Redis, names: list[str]) -> dict[str, int]:
    """The ctime (ns) of the oldest job of each queue: QPEEK queue 1, then SHOW."""
    if not names:
        return {}
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.execute_command("QPEEK", name, 1)
    heads = {}
    for name, reply in zip(names, await pipe.execute(raise_on_error=False), strict=True):
        jobs = parse_qpeek(reply) if isinstance(reply, list) else []
        if jobs:
            heads[name] = jobs[0][1]
    if not heads:
        return {}
    pipe = client.pipeline(transaction=False)
    for job_id in heads.values():
        pipe.execute_command("SHOW", job_id)
    found = {}
    for name, reply in zip(heads, await pipe.execute(raise_on_error=False), strict=True):
        fields = parse_flat(reply) if isinstance(reply, list) else {}
        ctime = integer(fields.get("ctime"))
        if ctime:
            found[name] = ctime
    return found


# Jobs in no queue are found with JSCAN: up to this many jobs read a node, each state.
OUT_OF_QUEUE_MAX = 100_000


@dataclass
class JobScan:
    """One node's jobs, scanned (every OUT_OF_QUEUE_EVERY seconds): the IDs of the
    queued ones, the active ones as SHOW shows them, and, when the Tasks tab asked
    for bodies, the queued ones as SHOW shows them too."""

    queued: set[str]
    active: list[dict[str, Any]]
    queued_jobs: list[dict[str, Any]] | None = None  # None: scanned without bodies


async def fetch_out_of_queue(
    client: aredis.Redis, most: int = OUT_OF_QUEUE_MAX, bodies: bool = False
) -> JobScan | None:
    """One node's jobs (JSCAN STATE queued / STATE active REPLY all): what
    disque.scan's out_of_queue reads, and with ``bodies`` what the Tasks tab
    tallies. None when the node holds more than ``most`` of either."""
    scan = JobScan(set(), [], [] if bodies else None)
    for state, reply in (("queued", "all" if bodies else "id"), ("active", "all")):
        cursor: Any = 0
        while True:
            cursor, page = await client.execute_command(
                "JSCAN", cursor, "COUNT", 1000, "STATE", state, "REPLY", reply
            )
            for item in page or []:
                if reply == "id":
                    scan.queued.add(text(item))
                elif state == "active":
                    scan.active.append(parse_flat(item))
                else:
                    shown = parse_flat(item)
                    scan.queued.add(text(shown.get("id")))
                    assert scan.queued_jobs is not None
                    scan.queued_jobs.append(shown)
            if len(scan.queued) > most or len(scan.active) > most:
                return None
            if integer(cursor) == 0:
                break
    return scan


async def hello(client: aredis.Redis) -> Hello:
    return parse_hello(await client.execute_command("HELLO"))


async def qpeek_both_ends(
    client: aredis.Redis, queue: str, count: int
) -> tuple[list[tuple[str, str, bytes]], list[tuple[str, str, bytes]]]:
    """The `count` oldest and `count` newest jobs of a queue on one node."""
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("QPEEK", queue, count)
    pipe.execute_command("QPEEK", queue, -count)
    oldest, newest = await pipe.execute()
    return parse_qpeek(oldest), parse_qpeek(newest)


async def show(client: aredis.Redis, job_id: str) -> dict[str, Any] | None:
    return parse_show(await client.execute_command("SHOW", job_id))


def parse_client_list(reply: Any) -> tuple[dict[str, str], ...]:
    """CLIENT LIST: one `key=value ...` line a client."""
    return tuple(
        dict(field.partition("=")[::2] for field in line.split())
        for line in text(reply).splitlines()
        if line.strip()
    )


def parse_slowlog(reply: Any) -> tuple[tuple[int, int, int, str], ...]:
    """SLOWLOG GET: [id, unix time, µs, [arg, ...]] entries, newest first."""
    entries = []
    for entry in reply or []:
        if isinstance(entry, list) and len(entry) >= 4 and isinstance(entry[3], list):
            command = " ".join(text(arg) for arg in entry[3])
            entries.append((integer(entry[0]), integer(entry[1]), integer(entry[2]), command))
    return tuple(entries)


def parse_latency(reply: Any) -> tuple[tuple[str, int, int, int], ...]:
    """LATENCY LATEST: [event, unix time, last ms, max ms] a monitored event."""
    return tuple(
        (text(e[0]), integer(e[1]), integer(e[2]), integer(e[3]))
        for e in reply or []
        if isinstance(e, list) and len(e) >= 4
    )


def parse_config(reply: Any) -> tuple[tuple[str, str], ...]:
    """CONFIG GET *: name, value pairs, sorted by name."""
    pairs_ = reply or []
    return tuple(
        sorted((text(k), text(v)) for k, v in zip(pairs_[::2], pairs_[1::2], strict=False))
    )


async def node_views(
    client: aredis.Redis, slowlog: int = 50
) -> tuple[tuple[dict[str, str], ...], tuple, tuple, tuple]:
    """CLIENT LIST, SLOWLOG GET, LATENCY LATEST and CONFIG GET * in one round trip
    (a reply that is an error, as from a node without LATENCY, reads as empty)."""
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("CLIENT", "LIST")
    pipe.execute_command("SLOWLOG", "GET", slowlog)
    pipe.execute_command("LATENCY", "LATEST")
    pipe.execute_command("CONFIG", "GET", "*")
    clients, slow, latency, config = [
        None if isinstance(r, Exception) else r for r in await pipe.execute(raise_on_error=False)
    ]
    return (
        parse_client_list(clients or b""),
        parse_slowlog(slow),
        parse_latency(latency),
        parse_config(config),
    )


PAUSE_STATES = ("in", "out", "all", "none")


async def pause(client: aredis.Redis, queue: str, state: str, bcast: bool = True) -> str:
    """PAUSE queue in|out|all|none [BCAST]: the reply is the new state."""
    if state not in PAUSE_STATES:
        raise ValueError(f"bad pause state {state!r}")
    args = ["PAUSE", queue, state] + (["BCAST"] if bcast else [])
    return text(await client.execute_command(*args))


async def set_leaving(client: aredis.Redis, leaving: bool) -> str:
    """CLUSTER LEAVING yes|no on the node itself."""
    return text(await client.execute_command("CLUSTER", "LEAVING", "yes" if leaving else "no"))
