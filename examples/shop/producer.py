"""The web app's side: send calls, read their results, see the periodic task run."""

from __future__ import annotations

import sys

from tasks import NODES, charge, yearly_report

from disque import Client
from disque.tasks import TaskFailed


def main() -> int:
    handles = [charge.send(customer, eur=10 * customer) for customer in range(1, 6)]
    for handle in handles:
        print("charged:", handle.get(timeout=30)["receipt"])
    try:
        charge.send(7, eur=0).get(timeout=30)
    except TaskFailed as failure:
        print("refused:", failure)
    try:
        yearly_report.send(2026).get(timeout=30)
    except TaskFailed as failure:
        print("report:", failure.type)
    with Client(*NODES) as client:
        if not client.get_job("shop:purged", timeout=10_000):
            print("the periodic task did not run")
            return 1
    print("carts purged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
