"""Helpers for the Spark tests: seeds, JSCAN, pipelined ADDJOB."""

from __future__ import annotations


def seeds(*nodes) -> str:
    """The `nodes` option for some test nodes."""
    return ",".join(f"127.0.0.1:{n.port}" for n in nodes)


def all_jobs(node, queue: str | None = None) -> list[list]:
    """Every job of one node, as JSCAN REPLY all flat arrays."""
    args = ["JSCAN", "0", "BUSYLOOP", "REPLY", "all"]
    if queue:
        args += ["QUEUE", queue]
    return node.call(*args)[1]


def job_ids(node, queue: str | None = None) -> set[str]:
    return {flat[1].decode() for flat in all_jobs(node, queue)}


def add_jobs(node, queue: str, bodies, *options) -> list[str]:
    """ADDJOB every body (pipelined) on one node; the job IDs."""
    with node.client() as c:
        pipe = c.pipeline(transaction=False)
        for body in bodies:
            pipe.execute_command("ADDJOB", queue, body, 5000, *options)
        return [jid.decode() for jid in pipe.execute()]


def read_rows(reader, partition) -> list[tuple]:
    """What reader.read(partition) yields (Arrow record batches), as row tuples in
    the schema's column order: what Spark makes of them."""
    return [tuple(row.values()) for batch in reader.read(partition) for row in batch.to_pylist()]
