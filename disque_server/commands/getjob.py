"""GETJOB [NOHANG] [TIMEOUT ms] [COUNT n] [WITHCOUNTERS] FROM queue ... queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.cluster import federation
from disque_server.commands.args import (
    SYNTAX_ERROR,
    parse_ll,
    parse_timeout_or_reply,
)
from disque_server.job import Job
from disque_server.jobs.blocking import BlockedGetJob
from disque_server.resp import LEAVING_ERROR, array_header, integer

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.jobs.queue import Queue

# GETJOB's option words, by the spellings clients send (lower and upper case), to
# the lower-case word: one dict lookup, where ``.lower()`` was a method call and a
# new bytes object for each word (660 of a GETJOB NOHANG FROM q's 15,000
# instructions). Other spellings (``NoHang``) still go through ``.lower()``.
_OPTION_WORDS: Final = {
    spelling: word
    for word in (b"nohang", b"withcounters", b"timeout", b"count", b"from")
    for spelling in (word, word.upper())
}

_NACKS: Final = b"$5\r\nnacks\r\n"
_DELIVERIES: Final = b"$21\r\nadditional-deliveries\r\n"


def reply_jobs(c: Client, jobs: list[Job], withcounters: bool) -> None:
    out = c.out
    out.append(array_header(len(jobs)))
    for job in jobs:
        q, body = job.queue, job.body
        assert q is not None and body is not None  # a queued job has both
        if withcounters:
            out.append(
                b"*7\r\n$%d\r\n%s\r\n$40\r\n%s\r\n$%d\r\n%s\r\n%s%s%s%s"
                % (
                    len(q),
                    q,
                    job.id,
                    len(body),
                    body,
                    _NACKS,
                    integer(job.nacks),
                    _DELIVERIES,
                    integer(job.deliveries),
                )
            )
        else:
            out.append(
                b"*3\r\n$%d\r\n%s\r\n$40\r\n%s\r\n$%d\r\n%s\r\n"
                % (len(q), q, job.id, len(body), body)
            )
    cluster = c.server.cluster
    if cluster.refills:  # this GETJOB drained a queue that imports jobs
        for name in dict.fromkeys(job.queue for job in jobs):
            if name is not None:
                federation.hold_for_refill(cluster, c, name)


def getjob_command(c: Client, argv: list[bytes]) -> None:
    timeout = 0
    count = 1
    nohang = withcounters = False
    names: list[bytes] = []
    i, argc = 1, len(argv)
    while i < argc:
        opt = _OPTION_WORDS.get(argv[i]) or argv[i].lower()
        last = i == argc - 1
        if opt == b"nohang":
            nohang = True
        elif opt == b"withcounters":
            withcounters = True
        elif opt == b"timeout" and not last:
            value = parse_timeout_or_reply(c, argv[i + 1])
            if value is None:
                return
            timeout = value
            i += 1
        elif opt == b"count" and not last:
            value = parse_ll(argv[i + 1])
            if value is None or value <= 0:
                c.reply(b"-ERR COUNT must be a number greater than zero\r\n")
                return
            count = value
            i += 1
        elif opt == b"from":
            names = argv[i + 1 :]
            break
        else:
            c.reply(SYNTAX_ERROR)
            return
        i += 1
    if not names:
        c.reply(SYNTAX_ERROR)
        return

    jobs = fetch_jobs(c, names, count)
    if jobs:
        reply_jobs(c, jobs, withcounters)
        return
    if nohang:
        c.reply(c.proto.null_array)
        return
    server = c.server
    if server.cluster.leaving:
        c.reply(LEAVING_ERROR)
        return
    unique = list(dict.fromkeys(names))
    c.block(BlockedGetJob(unique, count, withcounters), timeout)
    server.queues.block_client(c, unique)
    for name in unique:
        federation.need_jobs(server.cluster, name)


def fetch_jobs(c: Client, names: list[bytes], count: int) -> list[Job]:
    """Take jobs round-robin from the queues, left to right, up to count."""
    queues = c.server.queues
    jobs: list[Job] = []
    while True:
        before = len(jobs)
        for name in names:
            q = queues.lookup(name)
            if q is None:
                continue
            job = queues.fetch_job(q)
            if job is None:
                continue
            jobs.append(job)
            if len(jobs) == count:
                return jobs
        if len(jobs) == before:
            return jobs


def serve_blocked(c: Client, q: Queue) -> None:
    """A job arrived in a queue the client waits on: reply with it and unblock
    (Queues.serve_blocked, set by server.py).

    As in Disque, a blocked client gets one job, whatever its COUNT, so
    that jobs arriving together are spread over the waiting clients.
    """
    blocked = c.blocked
    assert isinstance(blocked, BlockedGetJob)
    job = c.server.queues.fetch_job(q)
    c.unblock()
    if job is not None:
        reply_jobs(c, [job], blocked.withcounters)  # may hold us for a refill
    c.flush()
