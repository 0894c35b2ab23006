"""The node's layers, bottom to top: the one place their order is written.

A module imports only the modules of the layers below its own and, in its own
layer, those of its own package; what a lower module must call above it is a
method of ``hooks.JobEvents`` (carried out by ``cluster.events``) or of
``hooks.Hooks`` (by ``server.NodeHooks``). A name stands for the
module and, for a package, everything in it. Three readers: the import-order
test (tests/unit/test_import_order.py), the map in ``docs/layers.md``
(written by ``python -m docgen``) and the reader of this file. The node
itself never imports it.
"""

from __future__ import annotations

from typing import Final

# (modules, what the layer is for)
LAYERS: Final[list[tuple[tuple[str, ...], str]]] = [
    (("__init__", "layers"), "the version strings; this map"),
    (("clock",), "the node's clock (a C double in the compiled build), random picks"),
    (("log",), "the log file and its levels"),
    (("config",), "the directives: parsing, CONFIG GET/SET/REWRITE"),
    (("tls",), "config's TLS options as SSL contexts"),
    (("listener",), "the client port's sockets: bounded accept bursts (stdlib only)"),
    (("resp",), "RESP: replies, bus messages and AOF records; request framing"),
    (("request_reader",), "bytes in, requests out: for clients and bus links"),
    (("job",), "a job: IDs, states, SHOW, its fields for the bus, the re-queue rule"),
    (("serialize",), "a job as Disque's bytes (serializeJob): the AOF's LOADJOB records"),
    (("stats", "slowlog", "latency"), "the counters, SLOWLOG's entries, the loop's stalls"),
    (
        ("hooks",),
        "what the layers below tell and ask above them: JobEvents (cluster.events), "
        "Hooks (server.NodeHooks)",
    ),
    (("memory",), "what jobs and queues cost: used_memory and its level"),
    (
        ("jobs",),
        "a job's life: the queues, the registry and its timers (process_job), the "
        "acknowledgements and the GC's retries, why a client waits (blocking), what "
        "happens to a job (lifecycle: the one writer of its state above job.py), "
        "calling each other directly",
    ),
    (
        ("restart",),
        "a controlled restart: the mark of a clean stop's snapshot, the timers it restores",
    ),
    (
        ("aof", "check_aof", "collector", "output_limits", "watchdog"),
        "the append-only file and its checker; what the cron runs",
    ),
    (("eviction",), "what maxmemory frees: walks the jobs, the queues, the AOF buffers"),
    (("state",), "what the node's parts share (NodeState): the server is one"),
    (
        ("client", "cluster"),
        "one client connection; this node's view of the cluster (membership, bus, Disque's binary "
        "bus message, replication, re-queue, GC, federation and its demand): peers, neither imports "
        "the other",
    ),
    (("commands",), "one module per command family (addjob, getjob, jobs_by_id, ...)"),
    (("metrics",), "the Prometheus endpoint: reads all of the above"),
    (("server",), "the node: builds and wires the rest, listeners, dispatch, the cron"),
    (("main",), "the command line: disque-server [conf] [--directive value ...]"),
    (("__main__",), "python -m disque_server"),
]
