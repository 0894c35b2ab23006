"""Export screenshots of disque-tui on a live 3-node cluster, to check by eye.

    python tests/tui/make_screenshot.py [OUTDIR]      # default: the current directory

(The documentation's images, docs/tui.svg and docs/tui-queues.svg, are the snapshot
tests' SVGs, copied; test_tui_snapshots checks they are the same.)

Starts three throw-away nodes (testkit/nodes.py), creates a few queues, keeps
a producer on one node and a consumer on another running (so federation,
rates and sparklines have something to show), pauses one queue, runs the
dashboard headless at 110x30 for a few seconds and saves `tui.svg` (the
overview) and `tui-queues.svg` (queues).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE.parent), str(ROOT)]

from tui_live import live_app  # noqa: E402

from testkit.nodes import ClusterOfNodes, Node  # noqa: E402

SIZE = (110, 30)


def traffic(cluster: ClusterOfNodes, stop: threading.Event) -> None:
    """A producer on node 0 and a consumer on node 1 for queue "orders"."""
    with cluster[0].client() as producer, cluster[1].client() as consumer:
        n = 0
        while not stop.is_set():
            for _ in range(5):
                producer.execute_command("ADDJOB", "orders", f'{{"order": {n}}}', 0)
                n += 1
            # a blocking GETJOB makes node 1 ask the others for jobs (federation)
            jobs = consumer.execute_command("GETJOB", "TIMEOUT", 100, "COUNT", 4, "FROM", "orders")
            for job in jobs or []:
                consumer.execute_command("ACKJOB", job[1])
            time.sleep(0.05)


async def shoot(cluster: ClusterOfNodes, outdir: Path) -> None:
    app = live_app(cluster[0].port, interval=0.5)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and app.snapshots_seen < 12:
            await pilot.pause(0.2)
        app.save_screenshot("tui.svg", str(outdir))
        await pilot.press("2")
        app.queues_view.table.select_key("orders")
        await pilot.pause(0.6)
        app.save_screenshot("tui-queues.svg", str(outdir))


def main() -> int:
    outdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    outdir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="tui-shot"))
    cluster = ClusterOfNodes(
        [Node(base / f"n{i}", config={"cluster-node-timeout": "1500"}).start() for i in range(3)]
    )
    stop = threading.Event()
    try:
        cluster.join()
        for i, queue in enumerate(["emails", "thumbnails", "reports"]):
            for j in range(3 + 4 * i):
                cluster[i].call("ADDJOB", queue, f"{queue} job {j}", 0)
        cluster[0].call("PAUSE", "reports", "out", "BCAST")
        worker = threading.Thread(target=traffic, args=(cluster, stop), daemon=True)
        worker.start()
        asyncio.run(shoot(cluster, outdir))
    finally:
        stop.set()
        for node in cluster:
            node.terminate()
    print(f"wrote {outdir / 'tui.svg'} and {outdir / 'tui-queues.svg'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
