"""``disque-worker module:worker``: run the handlers of a ``disque.Worker``.

    disque-worker app.tasks:worker --concurrency 8 --queues emails --metrics-port 9109

The module is imported from the current directory (as ``rq worker`` and
``dramatiq`` do); ``module`` alone means its ``worker``. SIGTERM and Ctrl-C
stop fetching and give the running handlers the grace period.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

from disque.errors import DisqueError
from disque.worker import Worker, load_worker, only_known

app = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])


@app.command()
def work(
    spec: Annotated[str, typer.Argument(help="module:attribute of a disque.Worker")],
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", min=1, help="jobs run at once")
    ] = None,
    queues: Annotated[
        list[str] | None, typer.Option("--queues", "-q", help="only these queues (repeat)")
    ] = None,
    nodes: Annotated[
        list[str] | None,
        typer.Option("--node", "-n", help="host:port of a node, instead of the worker's (repeat)"),
    ] = None,
    grace: Annotated[
        float | None, typer.Option(min=0, help="seconds running jobs get on SIGTERM")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="serve Prometheus metrics on this port")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
) -> None:
    """Run the handlers of a disque.Worker until SIGTERM or Ctrl-C."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(f"unknown level {log_level!r}", param_hint="--log-level")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.path.insert(0, os.getcwd())
    try:
        worker = load_worker(spec)
        if queues:
            worker.only = only_known(worker, queues)
    except (ImportError, ValueError) as exc:
        typer.echo(f"disque-worker: {exc}", err=True)
        raise typer.Exit(2) from None
    configure(worker, concurrency, nodes, grace, metrics_port)
    try:
        worker.run()
    except DisqueError as exc:
        typer.echo(f"disque-worker: {exc}", err=True)
        raise typer.Exit(1) from None


def configure(
    worker: Worker,
    concurrency: int | None,
    nodes: list[str] | None,
    grace: float | None,
    metrics_port: int | None,
) -> None:
    if concurrency is not None:
        worker.concurrency = concurrency
    if nodes:
        worker.nodes = tuple(nodes)
    if grace is not None:
        worker.grace = grace
    if metrics_port is not None:
        from prometheus_client import start_http_server

        from disque.metrics import WorkerMetrics

        worker.metrics = WorkerMetrics()
        start_http_server(metrics_port)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
