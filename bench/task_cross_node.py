#!/usr/bin/env python3
"""One task across three nodes: sent on node 1, run on node 2, its result read on node 3.

    python bench/task_cross_node.py [--ref-bin PATH] [--pauses 0.5,1,2,5,10,20]
                                    [--repeats 2] [--rate 1000] [--seconds 20]

Starts a 3-node cluster of ours (and one of C Disque with ``--ref-bin``; free
loopback ports, a temporary directory) and, for each, one ``disque-worker``
process whose only node is node 2. A ``disque.tasks`` app with one task
(``result=True``, returning its argument) sends from this process on node 1;
the worker, on node 2, gets the call there only through the cluster, and
adds the result to its reply queue on the node the call was made on (node
1); the result is read with ``GETJOB`` on node 3, a client of its own per
call, so it too has to cross the cluster. The figure is the time from the
send to the result read on node 3.

- **idle**: one call after each pause (nothing else running), ``--repeats``
  times over ``--pauses``;
- **load**: calls sent at ``--rate`` a second, paced, for ``--seconds``; each
  call is timed alone (the send, then its own reader blocks on node 3). At
  most 2,000 calls wait for their result at once (C Disque's results take
  seconds): past that the pace falls behind, and the table gives the rate
  reached.

The clusters take turns (ours first on even trials). Prints a Markdown table:
p50, p99 and the maximum of each, and the calls whose result came later than
``--give-up`` seconds (none on ours). Disque moves a job only when a node asks
for it (NEEDJOBS, backing off to 30 s), so on C the figure follows the
pauses; ours pushes a job to the node whose clients wait for it
(docs/cluster.md, "Demand"). Needs the worker (``pip install -e ./client``).
Stops its servers and workers on the way out, also on an error or Ctrl-C.
Exit code 0 when it ran, 1 when a step failed, 2 when a prerequisite is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import environment  # noqa: E402
from cross_node import ms, p99, three_nodes  # noqa: E402
from single_node import HOST, BenchError, Server, say, sigterm_as_interrupt, start_node  # noqa: E402
from vs_disque import start_reference  # noqa: E402

from disque import AsyncClient  # noqa: E402
from disque.tasks import Tasks  # noqa: E402
from disque.tasks.results import read_result  # noqa: E402

DEFAULT_PAUSES = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
READERS = 100  # reader connections opened before the first trial
MAX_IN_FLIGHT = 2000  # calls awaiting their result at once, under load (file descriptors)
APP = """
    import os
    from disque.tasks import Tasks

    tasks = Tasks(os.environ["BENCH_NODE"])

    @tasks.task(queue="bench-e2e", result=True, retry=60)
    def echo(n):
        return n
"""


def addr(node: Server) -> str:
    return f"{HOST}:{node.port}"


@contextlib.contextmanager
def worker_on(node: Server, tmp: Path, name: str) -> Iterator[None]:
    """A ``disque-worker`` process of APP whose only node is ``node``."""
    app_dir = tmp / f"app-{name}"
    app_dir.mkdir(exist_ok=True)
    (app_dir / "e2e_app.py").write_text(textwrap.dedent(APP))
    env = {**os.environ, "BENCH_NODE": addr(node), "PYTHONPATH": str(app_dir)}
    log = (tmp / f"worker-{name}.log").open("wb")
    proc = subprocess.Popen(
        [shutil.which("disque-worker") or "disque-worker", "e2e_app:tasks", "-c", "16"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=app_dir,
    )
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Trip:
    """Calls sent on node 1, results read on node 3 (a reader client per call in flight)."""

    def __init__(self, nodes: Sequence[Server], give_up: float) -> None:
        self.tasks = Tasks(addr(nodes[0]))
        self.echo = self.tasks.task(queue="bench-e2e", result=True, retry=60, name="e2e_app.echo")(
            lambda n: n
        )
        self.reader_node = addr(nodes[2])
        self.readers: list[AsyncClient] = []
        self.give_up = give_up

    async def once(self, n: int) -> float | None:
        """Seconds from the send to the result read on node 3; None past ``give_up``."""
        reader = self.readers.pop() if self.readers else AsyncClient(self.reader_node, stay=True)
        try:
            start = time.perf_counter()
            result = await self.echo.send_async(n)
            assert result.reply_to is not None
            jobs = await reader.get_job(result.reply_to, timeout=int(self.give_up * 1000))
            if not jobs:
                return None
            elapsed = time.perf_counter() - start
            if read_result(jobs[0].body, ("json",)).get("value") != n:
                raise BenchError(f"call {n}: another call's result")
            await reader.ack(jobs[0].id)
            return elapsed
        finally:
            self.readers.append(reader)

    async def warm(self) -> None:
        """One call, waited for: the worker is up and every link is open; then
        READERS reader connections open (an application keeps such a pool)."""
        if await self.once(-1) is None:
            raise BenchError(f"no result within {self.give_up} s: is the worker running?")
        for _ in range(READERS - len(self.readers)):
            reader = AsyncClient(self.reader_node, stay=True)
            await reader.hello()
            self.readers.append(reader)

    async def steady(self, rate: float, seconds: float) -> tuple[list[float | None], float]:
        """Calls at ``rate`` a second for ``seconds``, each timed alone, at most
        MAX_IN_FLIGHT at once (past that the pace falls behind); and the rate reached."""
        calls: list[asyncio.Task[float | None]] = []
        room = asyncio.Semaphore(MAX_IN_FLIGHT)

        async def one(n: int) -> float | None:
            try:
                return await self.once(n)
            finally:
                room.release()

        start = time.perf_counter()
        for n in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            await room.acquire()
            calls.append(asyncio.create_task(one(n)))
        sent = time.perf_counter() - start
        return list(await asyncio.gather(*calls)), len(calls) / sent

    async def close(self) -> None:
        for reader in self.readers:
            await reader.close()


def summary(values: Sequence[float | None]) -> list[str]:
    came = [v for v in values if v is not None]
    if not came:
        return ["-", "-", "-", str(len(values))]
    cells = [ms(statistics.median(came)), ms(p99(came)), ms(max(came))]
    return [*cells, str(len(values) - len(came))]


def markdown(results: dict[str, dict[str, list[float | None]]], give_up: float) -> str:
    lines = [
        f"| cluster | calls | p50 (ms) | p99 (ms) | max (ms) | no result within {give_up:g} s |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for kind, rows in results.items():
        for label, values in rows.items():
            lines.append(f"| {kind} | {label} | " + " | ".join(summary(values)) + " |")
    return "\n".join(lines)


async def run_trips(
    trips: dict[str, Trip], pauses: Sequence[float], repeats: int, rate: float, seconds: float
) -> dict[str, dict[str, list[float | None]]]:
    idle = f"idle, 1 call after each pause ({', '.join(f'{p:g}' for p in pauses)} s)"
    results: dict[str, dict[str, list[float | None]]] = {k: {idle: []} for k in trips}
    for trip in trips.values():
        await trip.warm()
    n = 0
    for _ in range(repeats):
        for pause in pauses:
            for kind in list(trips) if n % 2 == 0 else list(reversed(trips)):
                await asyncio.sleep(pause)
                elapsed = await trips[kind].once(n)
                results[kind][idle].append(elapsed)
                say(f"  {kind}, pause {pause:g} s: {'-' if elapsed is None else ms(elapsed)} ms")
            n += 1
    for kind in trips:
        values, reached = await trips[kind].steady(rate, seconds)
        results[kind][f"load, {reached:,.0f} calls/s for {seconds:g} s"] = values
        say(f"  {kind}, load: p99 {summary(values)[1]} ms")
    return results


def run(tmp: Path, ref_bin: Path | None, args: argparse.Namespace) -> str:
    starters: dict[str, Callable[[Path, str], Server]] = {
        "ours": lambda d, name: start_node(d, name, []),
    }
    if ref_bin is not None:
        starters["C Disque"] = partial(start_reference, ref_bin)
    with contextlib.ExitStack() as stack:
        trips: dict[str, Trip] = {}
        for kind, start in starters.items():
            nodes = stack.enter_context(three_nodes(start, tmp, kind.split()[0]))
            stack.enter_context(worker_on(nodes[1], tmp, kind.split()[0]))
            trips[kind] = Trip(nodes, args.give_up)

        async def main() -> dict[str, dict[str, list[float | None]]]:
            try:
                return await run_trips(trips, args.pauses, args.repeats, args.rate, args.seconds)
            finally:
                for trip in trips.values():
                    await trip.close()

        return markdown(asyncio.run(main()), args.give_up)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, help="a C disque-server (Disque 1.0-rc1)")
    parser.add_argument("--pauses", default=",".join(f"{p:g}" for p in DEFAULT_PAUSES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rate", type=float, default=1000.0, help="calls a second under load")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the load lasts")
    parser.add_argument("--give-up", type=float, default=40.0, help="seconds to wait a result")
    args = parser.parse_args(argv)
    try:
        args.pauses = [float(p) for p in args.pauses.split(",")]
    except ValueError:
        print(f"--pauses {args.pauses}: comma-separated seconds", file=sys.stderr)
        return 2
    if args.ref_bin is not None and not os.access(args.ref_bin, os.X_OK):
        print(f"--ref-bin {args.ref_bin}: no executable there", file=sys.stderr)
        return 2
    if shutil.which("disque-worker") is None:
        print("disque-worker not found: pip install -e ./client", file=sys.stderr)
        return 2
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-e2e-") as d:
            table = run(Path(d), args.ref_bin, args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(f"One task across three nodes: sent on 1, run on 2, read on 3 ({environment()})\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
