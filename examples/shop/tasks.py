"""The shop's tasks: what its web app sends and its workers run.

    disque-worker tasks:tasks --processes 2      # the workers
    python producer.py                           # the web app's side, in short
    pytest test_shop.py                          # its tests: stub mode, no node

The nodes come from DISQUE_NODES (space-separated host:port, default
127.0.0.1:7711); SHOP_STUB=1 runs everything in process, for tests.
"""

from __future__ import annotations

import logging
import os
import time

from disque import Client
from disque.middleware import Middleware
from disque.tasks import Tasks

log = logging.getLogger("shop")
NODES = os.environ.get("DISQUE_NODES", "127.0.0.1:7711").split()
STUB = os.environ.get("SHOP_STUB") == "1"


class Timing(Middleware):
    """Logs how long each task took, and each failure (where Sentry would go)."""

    def before(self, call):
        call.state["started"] = time.monotonic()

    def after(self, call, result):
        log.info("%s took %.3f s", call.name, time.monotonic() - call.state["started"])

    def on_failure(self, call, exc):
        log.warning("%s failed: %r", call.name, exc)


tasks = Tasks(*NODES, stub=STUB, middleware=[Timing()])


@tasks.task(queue="shop", result=True, retry=30, max_attempts=3, replicate=2)
def charge(customer: int, eur: int) -> dict:
    """Charge a customer: the receipt comes back to the caller."""
    if eur <= 0:
        raise ValueError(f"cannot charge {eur} EUR")
    return {"customer": customer, "eur": eur, "receipt": f"R-{customer}-{eur}"}


@tasks.task(queue="shop", result=True, time_limit=1, max_attempts=1, replicate=2)
def yearly_report(year: int) -> str:
    """Too slow for its time limit: stopped after 1 s, its caller told so."""
    while True:
        time.sleep(0.05)


@tasks.periodic(every=2, queue="shop", replicate=2)
def purge_carts() -> None:
    """Every 2 s, once across all workers: here it just says it ran."""
    if STUB:
        return
    with Client(*NODES) as client:
        client.add_job("shop:purged", str(time.time()), 0, replicate=1, ttl=60)
