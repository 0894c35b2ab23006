"""Job commands as the tests call them, written once: ADDJOB with no timeout, SHOW and
QSTAT as dicts (``conformance.pairs``: the flat replies with str keys)."""

from __future__ import annotations

import redis

from testkit.conformance import pairs


def addjob(client: redis.Redis, queue: str, body: str | bytes, *opts: object) -> bytes:
    """ADDJOB queue body 0 [opts...]: the job's ID."""
    return client.execute_command("ADDJOB", queue, body, 0, *opts)


def addjob_id(client: redis.Redis, queue: str, body: str | bytes, *opts: object) -> str:
    """addjob's ID as str."""
    return addjob(client, queue, body, *opts).decode()


def show(client: redis.Redis, jid: str | bytes) -> dict | None:
    return pairs(client.execute_command("SHOW", jid))


def qstat(client: redis.Redis, queue: str) -> dict | None:
    return pairs(client.execute_command("QSTAT", queue))
