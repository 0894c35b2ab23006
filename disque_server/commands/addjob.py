"""ADDJOB queue body ms-timeout [REPLICATE n] [DELAY s] [RETRY s] [TTL s] [MAXLEN n] [ASYNC]."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms
from disque_server.cluster import replication
from disque_server.commands.args import SYNTAX_ERROR, parse_ll, parse_timeout_or_reply
from disque_server.job import WAIT_REPL, Job, generate_job_id, shared_int
from disque_server.jobs import lifecycle
from disque_server.jobs.queue import PAUSED_IN
from disque_server.memory import EXTERNAL_REPL

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.jobs.queue import Queue

DEFAULT_TTL: Final = 24 * 3600
DEFAULT_RETRY_MAX: Final = 300

NOREPL: Final = b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"
NOREPL_NO_COPY: Final = (
    b"-NOREPL Not enough reachable nodes for the requested replication level, "
    b"since I'm unable to hold a copy of the message for the following reason: "
    b"I'm out of memory or I'm leaving.\r\n"
)


class AddjobOptions:
    __slots__ = ("replicate", "ttl", "retry", "delay", "maxlen", "asynchronous")

    def __init__(self, replicate: int) -> None:
        self.replicate = replicate
        self.ttl = DEFAULT_TTL
        self.retry = -1
        self.delay = 0
        self.maxlen = 0
        self.asynchronous = False


def parse_options(c: Client, argv: list[bytes], opts: AddjobOptions) -> bool:
    """Parse the options after the timeout; on error reply and return False."""
    i, argc = 4, len(argv)
    while i < argc:
        opt = argv[i].lower()
        has_value = i + 1 < argc
        if opt == b"async":
            opts.asynchronous = True
            i += 1
            continue
        if not has_value or opt not in _NUMERIC:
            c.reply(SYNTAX_ERROR)
            return False
        value = parse_ll(argv[i + 1])
        check, message = _NUMERIC[opt]
        if value is None or not check(value):
            c.reply(message)
            return False
        setattr(opts, _FIELD[opt], value)
        i += 2
    return True


def check_options(c: Client, opts: AddjobOptions) -> bool:
    """Refuse what the options cannot mean together; fill in the default RETRY."""
    if opts.replicate > 1 and opts.retry == 0:
        c.reply(
            b"-ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 "
            b"(at-most-once delivery)\r\n"
        )
        return False
    if opts.delay >= opts.ttl:
        c.reply(
            b"-ERR The specified DELAY is greater than TTL. Job refused since would "
            b"never be delivered\r\n"
        )
        return False
    if opts.retry == -1:
        opts.retry = default_retry(opts.ttl)
    return True


def default_retry(ttl: int) -> int:
    return max(min(ttl // 10, DEFAULT_RETRY_MAX), 1)


def default_options(replicate: int) -> AddjobOptions:
    opts = AddjobOptions(replicate)
    opts.retry = default_retry(opts.ttl)
    return opts


# ADDJOB without options (most of them): one read-only options object per
# default replication level (1, 2 or 3: the cluster size, at most 3).
_DEFAULT_OPTIONS: Final = {n: default_options(n) for n in (1, 2, 3)}


_NUMERIC: Final = {
    b"replicate": (lambda v: 1 <= v <= 65535, b"-ERR REPLICATE must be between 1 and 65535\r\n"),
    b"ttl": (lambda v: v > 0, b"-ERR TTL must be a number > 0\r\n"),
    b"retry": (lambda v: v >= 0, b"-ERR RETRY time must be a non negative number\r\n"),
    b"delay": (lambda v: v >= 0, b"-ERR DELAY time must be a non negative number\r\n"),
    b"maxlen": (lambda v: v > 0, b"-ERR MAXLEN must be a positive number\r\n"),
}
_FIELD: Final = {
    b"replicate": "replicate",
    b"ttl": "ttl",
    b"retry": "retry",
    b"delay": "delay",
    b"maxlen": "maxlen",
}


# Options parsed and checked, by the words after the timeout and the default
# replication level: a producer sends the same few (REPLICATE 3, TTL 60 ...) with
# every job. Read-only, as _DEFAULT_OPTIONS.
_parsed_options: Final[dict[int, dict[tuple[bytes, ...], AddjobOptions]]] = {
    n: {} for n in (1, 2, 3)
}
PARSED_OPTIONS_MAX: Final = 1024


def remember_options(argv: list[bytes], replicate: int, opts: AddjobOptions) -> None:
    parsed = _parsed_options[replicate]
    if len(parsed) >= PARSED_OPTIONS_MAX:
        parsed.clear()
    parsed[tuple(argv[4:])] = opts


def addjob_command(c: Client, argv: list[bytes]) -> None:
    server = c.server
    cluster = server.cluster
    size = cluster.size
    replicate = min(3, size)
    fresh: AddjobOptions | None = None  # options not seen before: checked below
    if len(argv) <= 4:
        opts = _DEFAULT_OPTIONS[replicate]
    else:
        cached = _parsed_options[replicate].get(tuple(argv[4:]))
        if cached is None:
            opts = fresh = AddjobOptions(replicate)
            if not parse_options(c, argv, fresh):
                server.stats.count_refusal(b"addjob", b"ERR")
                return
        else:
            opts = cached
    timeout = parse_timeout_or_reply(c, argv[3])
    if timeout is None or (fresh is not None and not check_options(c, fresh)):
        server.stats.count_refusal(b"addjob", b"ERR")
        return
    if fresh is not None:
        remember_options(argv, replicate, fresh)
    if size > 1 or opts.replicate > 1:
        add_replicated_job(c, argv, opts, timeout)
        return
    q = server.queues.by_name.get(argv[1])
    name = argv[1] if q is None else queue_accepts(c, q, opts)
    if name is None:
        return
    now = now_ms()
    job = create_job(c, name, argv[2], opts, False, now)
    server.jobs.start(job, now)
    c.out.append(b"+%s\r\n" % job.id)


def add_replicated_job(c: Client, argv: list[bytes], opts: AddjobOptions, timeout: int) -> None:
    """ADDJOB in a cluster: the job is replicated before it starts."""
    server = c.server
    cluster = server.cluster
    size = cluster.size
    # Replicate externally (no local copy) when leaving or short of memory.
    extrepl = size > 1 and (cluster.leaving or server.memory.level >= EXTERNAL_REPL)
    additional = opts.replicate if extrepl else opts.replicate - 1
    reachable = cluster.replication_candidates_count() if size > 1 else 0
    if additional > reachable:
        c.reply(NOREPL_NO_COPY if extrepl and additional - 1 == reachable else NOREPL)
        server.stats.count_refusal(b"addjob", b"NOREPL")
        return
    q = server.queues.by_name.get(argv[1])
    name = argv[1] if q is None else queue_accepts(c, q, opts)
    if name is None:
        return
    now = now_ms()
    job = create_job(c, name, argv[2], opts, extrepl, now)
    if additional > 0:
        replication.replicate_new_job(
            cluster, c, job, additional, timeout, opts.asynchronous, extrepl, now
        )
        return
    server.jobs.start(job, now)
    c.reply(b"+%s\r\n" % job.id)


def queue_accepts(c: Client, q: Queue, opts: AddjobOptions) -> bytes | None:
    """The queue's name (one bytes object for all its jobs), or None after replying
    why the queue refuses the job (MAXLEN, paused in input)."""
    if opts.maxlen and len(q.jobs) >= opts.maxlen:
        c.reply(b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n")
        c.server.stats.count_refusal(b"addjob", b"MAXLEN")
        return None
    if q.flags & PAUSED_IN:
        c.reply(b"-PAUSED Queue paused in input, try later\r\n")
        c.server.stats.count_refusal(b"addjob", b"PAUSED")
        return None
    return q.name


def create_job(
    c: Client, queue: bytes, body: bytes, opts: AddjobOptions, extrepl: bool, now: int
) -> Job:
    server = c.server
    cluster = server.cluster
    retry = opts.retry
    job = Job(
        generate_job_id(cluster.myself.id, opts.ttl, retry),
        WAIT_REPL,
        shared_int(now // 1000 + opts.ttl),
        shared_int(retry),
    )
    job.queue = queue
    job.body = body
    job.repl = opts.replicate
    job.ctime = server.ctime_clock.next(now)
    job.delay = opts.delay
    lifecycle.added(job, now)
    if not extrepl:
        job.nodes_delivered = cluster.myself_only
    return job
