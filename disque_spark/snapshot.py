"""Snapshot read of the ``disque`` data source: every job on every node (``JSCAN``).

    spark.read.format("disque").option("nodes", "h1:7711,h2:7711").load()

Options, besides the common ones (see :mod:`disque_spark.options`; ``queue``
may list several queues, comma-separated, and defaults to all): ``state``
(comma-separated: wait-repl, active, queued, acked), ``scanCount`` (JSCAN
COUNT, default 1000), ``skipUnreachable`` (true: a node that does not answer
is left out, with a warning, instead of failing the read).

One partition per node HELLO lists; each task walks its node with
``JSCAN cursor COUNT n [QUEUE q] [STATE s ...] REPLY all``. A job replicated
on k nodes appears k times (once per node, with that node's view of it:
``queued`` on one node, ``active`` on the others); column ``node`` says
which. ``disque_spark.read_snapshot(spark, dedupe=True)`` keeps one row per
id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import redis
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from disque.protocol import Node
from disque_spark.client import (
    DisqueError,
    connect,
    describe,
    discover,
    jscan_jobs,
    parse_seeds,
)
from disque_spark.options import _opt, _opt_bool, _opt_int, _opt_list, _opt_tls
from disque_spark.schema import RowBuilder

log = logging.getLogger("disque_spark")


class NodePartition(InputPartition):
    """One node to JSCAN."""

    def __init__(self, node: Node) -> None:
        super().__init__(node.addr)
        self.node = node


class DisqueSnapshotReader(DataSourceReader):
    """Every job on every node, one partition per node (a job shows once per copy)."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.build = RowBuilder(schema)
        self.seeds = parse_seeds(_opt(options, "nodes"))
        self.password = _opt(options, "password")
        self.tls = _opt_tls(options)
        self.queues = _opt_list(options, "queue")
        self.states = [s.lower() for s in _opt_list(options, "state")]
        bad = [s for s in self.states if s not in ("wait-repl", "active", "queued", "acked")]
        if bad:
            raise DisqueError(
                f"disque: unknown job state(s) {bad} in option 'state'; "
                "use wait-repl, active, queued, acked"
            )
        self.scan_count = _opt_int(options, "scanCount", 1000, minimum=1)
        self.skip_unreachable = _opt_bool(options, "skipUnreachable")

    def partitions(self) -> list[InputPartition]:
        nodes = sorted(discover(self.seeds, self.password, self.tls), key=lambda n: n.id)
        return [NodePartition(n) for n in nodes]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        node: Node = partition.node  # type: ignore[attr-defined]
        client = connect(node.host, node.port, self.password, tls=self.tls)
        try:
            try:
                client.ping()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if self.skip_unreachable:
                    log.warning(
                        "disque: skipping unreachable node %s (%s)", node.addr, describe(exc)
                    )
                    return
                raise DisqueError(
                    f"disque: cannot scan node {node.id} at {node.addr}: "
                    f"{describe(exc)} "
                    "(option skipUnreachable=true reads the other nodes)"
                ) from None
            for queue in self.queues or [None]:
                jobs = jscan_jobs(client, self.scan_count, queue, self.states)
                yield from self.build.batches(_on_node(jobs, node.id))
        finally:
            client.close()


def _on_node(jobs: Iterator[dict[str, Any]], node_id: str) -> Iterator[dict[str, Any]]:
    for job in jobs:
        job["node"] = node_id
        yield job
