"""The library's layers, bottom to top: the one place their order is written.

A module imports only the modules of the layers below its own and, in its own
layer, those of its own package (``tasks/``, ``brokers/``). Three readers: the
import-order test (tests/unit/test_import_order.py, as for the node's
disque_server/layers.py), the map in ``docs/layers.md`` (written by
``python -m docgen``) and the reader of this file. The library never imports it.
"""

from __future__ import annotations

from typing import Final

# (modules, what the layer is for)
LAYERS: Final[list[tuple[tuple[str, ...], str]]] = [
    (("layers",), "this map"),
    (
        ("errors", "tls", "locality", "middleware", "metrics", "pipelining", "supervisor"),
        "what needs nothing else of the library: its errors, TLS options, where jobs "
        "come from (locality), the middleware's hooks, the worker's metrics, the "
        "asyncio pipelining, the process supervisor",
    ),
    (("typer_main",), "how the project's typer programs run (their one-line errors)"),
    (("protocol", "opentelemetry"), "RESP replies as Python values; spans through the hooks"),
    (("job",), "a job as the client sees it (GETJOB's and SHOW's replies)"),
    (("commands",), "every Disque command, written once for sync and asyncio"),
    (("client", "aio"), "the clients: redis-py's, synchronous and asyncio"),
    (
        ("scan", "dead_letters", "worker"),
        "what runs on a client: cluster-wide scans, the dead letters, the worker",
    ),
    (
        ("tasks", "brokers"),
        "on the worker: the task library (tasks/), Dramatiq's broker and kombu's "
        "transport (brokers/)",
    ),
    (("worker_cli", "__init__"), "disque-worker's command line; the package's names"),
]
