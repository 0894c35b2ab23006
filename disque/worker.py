"""The worker: handlers per queue, run with bounded concurrency, jobs acknowledged
when they are done.

    from disque import Worker

    worker = Worker("127.0.0.1:7711", concurrency=8)

    @worker.handler("emails")
    def send_email(job):
        deliver(job.body)          # returns: ACKJOB; raises: NACK, later again

What happens to a job (Disque's at-least-once delivery, kept):

* The handler returns: ACKJOB. The job is done cluster-wide.
* The handler raises: NACK with an exponential backoff (``NACK id DELAY s``,
  this server's extension; on a node that refuses DELAY, C Disque 1.0-rc1
  included, a plain NACK, detected once). ``raise Retry(delay=30)`` asks for
  a given delay.
* After ``max_attempts`` deliveries (GETJOB's ``nacks`` and
  ``additional-deliveries`` counters), the job goes to the dead-letter queue
  (``<queue>:dead`` unless told): ADDJOB of a JSON record (queue, id, body,
  attempts, error) there first, then ACKJOB of the job, so a crash between
  the two leaves it in both places, never in none.
* A job still running at half its RETRY gets a WORKING, so it is not queued
  again behind the handler's back.
* ``stop()`` (SIGTERM, SIGINT under ``run``) stops fetching, lets the running
  handlers finish within ``grace`` seconds, and NACKs those that did not.

Sync handlers run in threads, ``async def`` ones as tasks on one event loop
thread; either way at most ``concurrency`` jobs run at once. Every thread has
its own ``Client``: a node that goes away or leaves is left for another one as
the client does it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from disque.client import Client
from disque.errors import BadId, ConnectionLost, DisqueError
from disque.job import Job
from disque.locality import Locality
from disque.tls import TLS

if TYPE_CHECKING:
    from disque.metrics import WorkerMetrics

log = logging.getLogger("disque.worker")

Handler = Callable[[Job], Any]


class Retry(Exception):  # noqa: N818 (what the handler asks for, not an error)
    """Raised by a handler: queue the job again after ``delay`` seconds (the backoff
    when None). It counts as an attempt."""

    def __init__(self, delay: int | None = None) -> None:
        super().__init__(f"retry in {delay} s" if delay is not None else "retry")
        self.delay = delay


@dataclass
class Route:
    """What a queue's jobs go to."""

    queue: str
    handler: Handler
    max_attempts: int
    dead_letter: str | None  # None: no dead-letter queue, the job is retried for ever
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.handler)


@dataclass
class Running:
    """A job being handled: when it started, when it was last said WORKING, its RETRY
    (learnt with SHOW once it runs long enough for it to matter)."""

    job: Job
    started: float
    touched: float
    retry: int | None = None


def backoff(attempt: int, base: float, cap: float) -> int:
    """Seconds before the next try after ``attempt`` failed ones: base, 2 base, 4 base
    ... up to cap; at least 1 (NACK DELAY takes whole seconds)."""
    return max(1, int(min(cap, base * 2 ** max(0, attempt - 1))))


def dead_letter_record(job: Job, attempts: int, error: str) -> bytes:
    """The dead-letter job's body: JSON, the body as text when it is UTF-8."""
    record: dict[str, Any] = {"queue": job.queue, "id": job.id, "attempts": attempts}
    try:
        record["body"] = job.body.decode()
    except UnicodeDecodeError:
        record["body_base64"] = base64.b64encode(job.body).decode()
    record["error"] = error
    return json.dumps(record).encode()


class Worker:
    """Fetches jobs from the queues handlers were registered for and runs them."""

    def __init__(
        self,
        *nodes: str,
        concurrency: int = 4,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 3600.0,
        grace: float = 30.0,
        fetch_timeout_ms: int = 1000,
        password: str | None = None,
        tls: TLS | None = None,
        follow_producers: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.nodes = nodes
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.grace = grace
        self.fetch_timeout_ms = fetch_timeout_ms
        self.password = password
        self.tls = tls
        self.follow_producers = follow_producers  # GETJOB moves to where jobs are made
        self.routes: dict[str, Route] = {}
        self.only: list[str] | None = None  # run these queues only (disque-worker --queues)
        self.monitors: list[tuple[float, Callable[[dict[str, int]], None]]] = []
        self.metrics: WorkerMetrics | None = None  # Prometheus counters, when asked for
        self.nack_delay = True  # False once a node refused NACK ... DELAY
        self.running: dict[str, Running] = {}
        self.abandoned: set[str] = set()  # NACKed at the end of the grace period
        self.clients: list[Client] = []
        self.fetching: Client | None = None  # the client GETJOB runs on
        self.lock = threading.Lock()
        self.slots = threading.Semaphore(concurrency)  # (made again by run: --concurrency)
        self.stopping = threading.Event()
        self.local = threading.local()
        self.loop: asyncio.AbstractEventLoop | None = None

    # ---- registration ---------------------------------------------------------------
    def handler(
        self, queue: str, *, max_attempts: int | None = None, dead_letter: str | None = ""
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function for ``queue``'s jobs. ``dead_letter``: the
        queue failed jobs end in ("" for ``<queue>:dead``, None for none)."""

        def register(fn: Handler) -> Handler:
            dlq = f"{queue}:dead" if dead_letter == "" else dead_letter
            attempts = self.max_attempts if max_attempts is None else max_attempts
            self.routes[queue] = Route(queue, fn, attempts, dlq)
            return fn

        return register

    def monitor(
        self, every: float = 10.0
    ) -> Callable[[Callable[[dict[str, int]], None]], Callable[[dict[str, int]], None]]:
        """Register the decorated function to get {queue: QLEN} every ``every`` seconds
        while the worker runs (to warn when a queue grows, scale workers ...)."""

        def register(fn: Callable[[dict[str, int]], None]) -> Callable[[dict[str, int]], None]:
            self.monitors.append((every, fn))
            return fn

        return register

    @property
    def queues(self) -> list[str]:
        names = list(self.routes)
        return [q for q in names if q in self.only] if self.only is not None else names

    # ---- clients ----------------------------------------------------------------------
    def client(self) -> Client:
        """This thread's client (a redis-py connection is not shared between threads)."""
        client: Client | None = getattr(self.local, "client", None)
        if client is None:
            client = Client(*self.nodes, password=self.password, tls=self.tls)
            self.local.client = client
            self.clients.append(client)
        return client

    # ---- running ----------------------------------------------------------------------
    def run(self, install_signals: bool = True) -> None:
        """Fetch and handle jobs until ``stop()`` (or SIGTERM/SIGINT, from the main
        thread), then drain within the grace period."""
        if not self.queues:
            raise ValueError("no handler for the queues asked for: nothing to run")
        self.stopping.clear()
        self.abandoned.clear()
        self.slots = threading.Semaphore(self.concurrency)
        self.fetching = self.client()
        if self.follow_producers:
            self.fetching.locality = Locality()
        self.fetching.connect()  # no node answers at the start: NoNodeAvailable, at once
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self.on_signal)
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="disque-worker")
        side = [threading.Thread(target=self.keep_alive, daemon=True, name="disque-working")]
        side += [
            threading.Thread(target=self.watch, args=(every, fn), daemon=True)
            for every, fn in self.monitors
        ]
        if any(self.routes[q].is_async for q in self.queues):
            self.loop = asyncio.new_event_loop()
            side.append(
                threading.Thread(target=self.loop.run_forever, daemon=True, name="disque-loop")
            )
        for thread in side:
            thread.start()
        log.info(
            "worker started: queues %s, concurrency %d", ", ".join(self.queues), self.concurrency
        )
        try:
            self.fetch(pool)
        finally:
            self.drain(pool)
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.loop = None
            for client in self.clients:
                client.close()

    def on_signal(self, signum: int, frame: object) -> None:
        if self.stopping.is_set():
            log.warning("second signal: the running jobs are queued again now")
            self.grace = 0.0
        self.stop()

    def stop(self) -> None:
        """Stop fetching; running handlers get the grace period to finish."""
        if not self.stopping.is_set():
            log.info("stopping: no more jobs fetched, %d running", len(self.running))
        self.stopping.set()

    def fetch(self, pool: ThreadPoolExecutor) -> None:
        client = self.client()
        while not self.stopping.is_set():
            if not self.slots.acquire(timeout=0.2):
                continue
            free = 1
            while free < self.concurrency and self.slots.acquire(blocking=False):
                free += 1
            try:
                jobs = client.get_job(
                    *self.queues, timeout=self.fetch_timeout_ms, count=free, with_counters=True
                )
            except DisqueError as exc:
                log.warning("GETJOB failed: %s", exc)
                jobs = []
                self.stopping.wait(1.0)
            for _ in range(free - len(jobs)):
                self.slots.release()
            for job in jobs:
                now = time.monotonic()
                with self.lock:
                    self.running[job.id] = Running(job, now, now)
                pool.submit(self.handle, job).add_done_callback(lambda _: self.slots.release())

    def drain(self, pool: ThreadPoolExecutor) -> None:
        """Wait for the running handlers up to the grace period; NACK the rest."""
        started = time.monotonic()
        while self.running and time.monotonic() < started + self.grace:
            time.sleep(0.05)
        with self.lock:
            left = [r.job.id for r in self.running.values()]
            self.abandoned.update(left)
        if left:
            log.warning("grace period over: %d job(s) still running, queued again", len(left))
            with contextlib.suppress(DisqueError):
                self.client().nack(*left)
        pool.shutdown(wait=False, cancel_futures=True)

    # ---- one job ----------------------------------------------------------------------
    def handle(self, job: Job) -> None:
        route = self.routes[job.queue]
        started = time.monotonic()
        try:
            if route.is_async:
                assert self.loop is not None
                future = asyncio.run_coroutine_threadsafe(route.handler(job), self.loop)
                future.result()
            else:
                route.handler(job)
        except Exception as exc:  # the handler's failure is the job's, not the worker's
            self.failed(route, job, exc)
        else:
            self.done(job)
        finally:
            if self.metrics is not None:
                self.metrics.handler_seconds.labels(job.queue).observe(time.monotonic() - started)
            with self.lock:
                self.running.pop(job.id, None)

    def done(self, job: Job) -> None:
        if job.id in self.abandoned:
            return  # NACKed by drain already: the next worker handles it again
        try:
            self.client().ack(job.id)
        except DisqueError as exc:  # not lost: it is delivered again after its RETRY
            log.warning("ACKJOB %s failed (%s): it will be delivered again", job.id, exc)
            return
        self.count("processed", job.queue)

    def failed(self, route: Route, job: Job, exc: Exception) -> None:
        if job.id in self.abandoned:
            return
        attempts = job.nacks + job.additional_deliveries + 1
        error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, Retry):  # (asked for, not failed)
            self.count("failed", job.queue)
        if route.dead_letter is not None and attempts >= route.max_attempts:
            self.bury(route.dead_letter, job, attempts, error)
            return
        delay = exc.delay if isinstance(exc, Retry) else None
        if delay is None:
            delay = backoff(attempts, self.backoff_base, self.backoff_cap)
        log.info(
            "job %s of %s failed (attempt %d: %s): again in %d s",
            job.id,
            job.queue,
            attempts,
            error,
            delay,
        )
        try:
            self.nack(job.id, delay)
        except DisqueError as nack_error:
            log.warning("NACK %s failed (%s): it will be delivered again", job.id, nack_error)
            return
        self.count("retried", job.queue)

    def nack(self, job_id: str, delay: int) -> None:
        """NACK DELAY where the node takes it; a plain NACK once one refused it."""
        client = self.client()
        if self.nack_delay:
            try:
                client.nack(job_id, delay=delay)
                return
            except BadId:
                # C Disque reads DELAY as a job ID (the job's own came from GETJOB).
                log.info("this cluster has no NACK ... DELAY: plain NACK from now on")
                self.nack_delay = False
        client.nack(job_id)

    def bury(self, queue: str, job: Job, attempts: int, error: str) -> None:
        """Dead-letter: ADDJOB there first, then ACKJOB; never the other way round."""
        client = self.client()
        try:
            client.add_job(queue, dead_letter_record(job, attempts, error), retry=0)
        except (ConnectionLost, DisqueError) as exc:
            log.warning("could not dead-letter %s (%s): it will be delivered again", job.id, exc)
            return
        try:
            client.ack(job.id)
        except DisqueError as exc:
            log.warning("ACKJOB %s failed after dead-lettering (%s)", job.id, exc)
        log.warning(
            "job %s of %s dead-lettered to %s after %d attempts: %s",
            job.id,
            job.queue,
            queue,
            attempts,
            error,
        )
        self.count("dead_lettered", job.queue)

    def count(self, what: str, queue: str) -> None:
        if self.metrics is not None:
            getattr(self.metrics, what).labels(queue).inc()

    # ---- side threads -----------------------------------------------------------------
    def keep_alive(self) -> None:
        """WORKING for every job running past half its RETRY (SHOW tells it once)."""
        while True:
            time.sleep(0.25)
            if self.stopping.is_set() and not self.running:
                return
            now = time.monotonic()
            with self.lock:
                running = list(self.running.values())
            for item in running:
                if now - item.started < 1.0:
                    continue
                try:
                    if item.retry is None:
                        shown = self.client().show(item.job.id) or {}
                        item.retry = int(shown.get("retry", 0))
                    if item.retry and now - item.touched >= item.retry / 2:
                        self.client().working(item.job.id)
                        item.touched = now
                except DisqueError as exc:
                    log.debug("WORKING %s: %s", item.job.id, exc)

    def watch(self, every: float, fn: Callable[[dict[str, int]], None]) -> None:
        while not self.stopping.wait(every):
            try:
                sizes = {q: self.client().qlen(q) for q in self.queues}
                fn(sizes)
            except Exception as exc:  # a monitor hook must not stop the worker
                log.warning("queue monitor failed: %s", exc)


def load_worker(spec: str) -> Worker:
    """``module:attribute`` (``module`` alone: its ``worker``)."""
    import importlib

    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    worker = getattr(module, attr or "worker", None)
    if not isinstance(worker, Worker):
        raise ValueError(f"{spec}: no disque.Worker there")
    return worker


def only_known(worker: Worker, queues: Iterable[str]) -> list[str]:
    unknown = [q for q in queues if q not in worker.routes]
    if unknown:
        raise ValueError(f"no handler for queue(s): {', '.join(unknown)}")
    return list(queues)
