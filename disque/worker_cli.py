"""``disque-worker module:worker``: run the handlers of a ``disque.Worker``.

    disque-worker app.tasks:worker --concurrency 8 --queues emails --metrics-port 9109
    disque-worker app:tasks --processes 4

The module is imported from the current directory (as ``rq worker`` and
``dramatiq`` do); ``module`` alone means its ``worker``, else its ``tasks`` (a
``disque.tasks.Tasks``). SIGTERM and Ctrl-C stop fetching and give the running
handlers the grace period. ``--processes N`` runs N of them under a
supervisor (supervisor.py); process i serves metrics on ``--metrics-port`` + i.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterable
from typing import Annotated

import typer

from disque.errors import DisqueError
from disque.supervisor import SUPERVISED_ENV, Supervisor, die_with_supervisor
from disque.tasks import Tasks
from disque.worker import Worker

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
    processes: Annotated[
        int, typer.Option("--processes", "-p", min=1, help="worker processes (a supervisor)")
    ] = 1,
) -> None:
    """Run the handlers of a disque.Worker until SIGTERM or Ctrl-C."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(f"unknown level {log_level!r}", param_hint="--log-level")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if processes > 1:
        child = child_argv(spec, concurrency, queues, nodes, grace, metrics_port, log_level)
        supervisor = Supervisor(child, processes, grace if grace is not None else 30.0)
        raise typer.Exit(supervisor.run())
    die_with_supervisor()
    if metrics_port is not None and SUPERVISED_ENV in os.environ:
        metrics_port += int(os.environ[SUPERVISED_ENV])
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


def child_argv(
    spec: str,
    concurrency: int | None,
    queues: list[str] | None,
    nodes: list[str] | None,
    grace: float | None,
    metrics_port: int | None,
    log_level: str,
) -> list[str]:
    """The command line of one supervised worker process: the same, one process."""
    argv = [sys.executable, "-m", "disque.worker_cli", spec, "--log-level", log_level]
    for name, value in (
        ("--concurrency", concurrency),
        ("--grace", grace),
        ("--metrics-port", metrics_port),
    ):
        if value is not None:
            argv += [name, str(value)]
    for queue in queues or ():
        argv += ["--queues", queue]
    for node in nodes or ():
        argv += ["--node", node]
    return argv


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


def load_worker(spec: str) -> Worker:
    """``module:attribute``: a ``disque.Worker``, or a ``disque.tasks.Tasks`` (its
    ``worker()``); ``module`` alone: its ``worker``, else its ``tasks``."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise
    except Exception as exc:  # the application's own error, said in one line
        raise ValueError(f"{module_name}: {type(exc).__name__}: {exc}") from None
    found = getattr(module, attr, None) if attr else None
    if not attr:
        found = getattr(module, "worker", None) or getattr(module, "tasks", None)
    if isinstance(found, Tasks):
        found = found.worker()
    if not isinstance(found, Worker):
        raise ValueError(f"{spec}: no disque.Worker or disque.tasks.Tasks there")
    return found


def only_known(worker: Worker, queues: Iterable[str]) -> list[str]:
    unknown = [q for q in queues if q not in worker.routes]
    if unknown:
        raise ValueError(f"no handler for queue(s): {', '.join(unknown)}")
    return list(queues)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
