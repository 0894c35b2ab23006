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
  attempts, error) there first, replicated to 2 nodes where the cluster has
  them, then ACKJOB of the job, so a crash between the two leaves it in both
  places, never in none, and one node lost does not lose the record.
* A failing RETRY 0 job (at most once) is never delivered again: it is
  logged and counted as dropped, or dead-lettered with
  ``dead_letter_at_most_once=True``.
* A job still running at half its RETRY gets a WORKING, so it is not queued
  again behind the handler's back.
* ``stop()`` (SIGTERM, SIGINT under ``run``) stops fetching, lets the running
  handlers finish within ``grace`` seconds, and NACKs those that did not.

NACK, WORKING and SHOW go to the node that delivered the job (``Job.node``):
on a cluster another node may hold no copy (NACK answers 0, WORKING
``-NOJOB``) or a copy that is not the one queued. When that node is gone they
go to any node that answers: one holding a copy acts on it, and a job no
reachable node knows is queued again after its RETRY by its other owners.
ACKJOB goes anywhere, as Disque allows.

Sync handlers run in daemon threads (a handler still running when ``run``
returns does not keep the process alive: its job is NACKed by then),
``async def`` ones as tasks on one event loop thread; either way at most
``concurrency`` jobs run at once. Every thread has its own ``Client``: a node
that goes away or leaves is left for another one as the client does it.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import ctypes
import inspect
import json
import logging
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import methodcaller
from typing import TYPE_CHECKING, Any, TypeVar

from disque.client import Client, ClientOnNodePerThread, ClientPerThread
from disque.commands import seed_addresses
from disque.errors import BadId, ConnectionLost, DisqueError, NoJob, NoNodeAvailable
from disque.job import Job
from disque.locality import Locality
from disque.middleware import Middleware, notify
from disque.protocol import PRIORITY_FAILING
from disque.tls import TLS

if TYPE_CHECKING:
    from disque.metrics import WorkerMetrics

log = logging.getLogger("disque.worker")

Handler = Callable[[Job], Any]
T = TypeVar("T")

DEAD_LETTER_COPIES = 2  # a dead letter outlives one node (fewer on a smaller cluster)
DEAD_LETTER_TTL = 7 * 24 * 3600  # seconds a dead letter is kept
DEAD_LETTER_RETRY = 300  # a dead letter read with GETJOB and not acknowledged: back then
DEAD_LETTER_TIMEOUT_MS = 10_000  # the dead-letter ADDJOB's replication timeout
# While every handler has a job, the fetch waits this long for more free slots, and the
# ACKJOB for more finished jobs: one round trip for several jobs, not one for each (a
# round trip is GIL handoffs and syscalls that a busy worker's handlers pay for).
GATHER_S = 0.002


class Retry(Exception):  # noqa: N818 (what the handler asks for, not an error)
    """Raised by a handler: queue the job again after ``delay`` seconds (the backoff
    when None). It counts as an attempt."""

    def __init__(self, delay: int | None = None) -> None:
        super().__init__(f"retry in {delay} s" if delay is not None else "retry")
        self.delay = delay


class Reject(Exception):  # noqa: N818
    """Raised by a handler: this job can never succeed (a body nobody can read ...):
    dead-lettered now, whatever attempts are left (dropped with no dead-letter queue)."""


class LeaveToRetry(Exception):  # noqa: N818
    """Raised by a handler: neither acknowledge nor NACK the job; the node queues it
    again after its RETRY (periodic tasks tick this way)."""


class TimeLimitExceeded(Exception):
    """Raised inside a handler that ran past its time limit (see ``Worker``)."""


class SoftTimeLimitExceeded(Exception):
    """Raised inside a sync handler that ran past its soft time limit: it may catch
    it, clean up and return (a success), before its hard time limit stops it."""


@dataclass
class Call:
    """One run of a handler on a job: what the worker runs and what it tells the
    middleware. ``run`` does the work (for an ``async def`` handler: returns the
    coroutine). Tasks fill in ``name``, ``message`` and the callbacks; ``state`` is
    the middleware's, from ``before`` to the last hook."""

    job: Job
    run: Callable[[], Any]
    is_async: bool = False
    name: str = ""
    time_limit: float | None = None
    max_attempts: int | None = None
    message: Any = None
    soft_time_limit: float | None = None  # (sync handlers) SoftTimeLimitExceeded first
    on_started: Callable[[], None] | None = None  # as the handler starts
    on_done: Callable[[Any], None] | None = None  # before the ACK
    on_retried: Callable[[BaseException, int, int], None] | None = None  # (error, delay, attempt)
    on_given_up: Callable[[BaseException], None] | None = None  # dead-lettered or dropped
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Route:
    """What a queue's jobs go to."""

    queue: str
    handler: Handler
    max_attempts: int
    dead_letter: str | None  # None: no dead-letter queue, the job is retried for ever
    dead_letter_at_most_once: bool = False  # a failing RETRY 0 job: dead letter, not dropped
    time_limit: float | None = None  # seconds a handler may run (None: no limit)
    prepare: Callable[[Job], Call] | None = None  # the call for a job (tasks); else the handler
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.handler)

    def call(self, job: Job) -> Call:
        if self.prepare is not None:
            return self.prepare(job)
        handler = self.handler
        return Call(job, lambda: handler(job), self.is_async, self.queue, self.time_limit)


@dataclass
class Running:
    """A job fetched and not finished: when it was fetched and when its handler began
    (it may wait its turn: the worker fetches ahead), when it was last said WORKING
    (waiting or running), its RETRY (learnt with SHOW once it matters)."""

    job: Job
    started: float  # fetched
    touched: float
    retry: int | None = None
    began: float = 0.0  # the handler started (0: waiting its turn)
    call: Call | None = None
    thread_id: int = 0  # the handler's thread (a sync handler's time limit stops it)
    future: concurrent.futures.Future[Any] | None = None  # an async handler's
    timed_out: bool = False
    soft_timed_out: bool = False
    finished: bool = False  # the handler returned: too late for a time limit


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
        *nodes: str | Sequence[str],
        concurrency: int = 4,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 3600.0,
        grace: float = 30.0,
        fetch_timeout_ms: int = 1000,
        password: str | None = None,
        tls: TLS | None = None,
        follow_producers: bool = False,
        dead_letter_ttl: int = DEAD_LETTER_TTL,
        dead_letter_retry: int = DEAD_LETTER_RETRY,
        time_limit: float | None = None,
        middleware: Iterable[Middleware] = (),
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if dead_letter_retry < 1 or dead_letter_ttl < 1:
            raise ValueError("dead_letter_retry and dead_letter_ttl must be at least 1 s")
        seed_addresses(nodes)  # the seeds checked now: a bad one is an error here, not in run()
        self.nodes: tuple[str | Sequence[str], ...] = nodes
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.grace = grace
        self.fetch_timeout_ms = fetch_timeout_ms
        self.password = password
        self.tls = tls
        self.follow_producers = follow_producers  # GETJOB moves to where jobs are made
        self.dead_letter_ttl = dead_letter_ttl
        self.dead_letter_retry = dead_letter_retry
        self.time_limit = time_limit  # the handlers' default (seconds)
        self.middleware = list(middleware)
        self.routes: dict[str, Route] = {}
        self.only: list[str] | None = None  # run these queues only (disque-worker --queues)
        self.monitors: list[tuple[float, Callable[[dict[str, int]], None]]] = []
        self.on_start: list[Callable[[Client], None]] = []  # run with the client, at start
        self.metrics: WorkerMetrics | None = None  # Prometheus counters, when asked for
        self.tasks_acked: dict[str, str] = {}  # job ID -> task, done and not acked (metrics)
        self.nack_delay = True  # False once a node refused NACK ... DELAY
        self.running: dict[str, Running] = {}
        self.abandoned: set[str] = set()  # NACKed at the end of the grace period
        self.clients: list[Client] = []
        self.fetching: Client | None = None  # the client GETJOB runs on
        self.lock = threading.Lock()
        self.slots = threading.Semaphore(concurrency)  # (made again by run: --concurrency)
        self.acks: Acks | None = None  # while running
        self.stopping = threading.Event()
        self.thread_clients = ClientPerThread(self.new_client)
        self.thread_clients_on = ClientOnNodePerThread(self.new_client_on)
        self.loop: asyncio.AbstractEventLoop | None = None

    # ---- registration ---------------------------------------------------------------
    def handler(
        self,
        queue: str,
        *,
        max_attempts: int | None = None,
        dead_letter: str | None = "",
        dead_letter_at_most_once: bool = False,
        time_limit: float | None = None,
        prepare: Callable[[Job], Call] | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function for ``queue``'s jobs. ``dead_letter``: the
        queue failed jobs end in ("" for ``<queue>:dead``, None for none);
        ``dead_letter_at_most_once``: failing RETRY 0 jobs go there too (else they
        are dropped, as Disque's at-most-once delivery means); ``time_limit``:
        seconds a run may take (the worker's when None). ``prepare`` (tasks): makes
        each job's ``Call`` instead."""

        def register(fn: Handler) -> Handler:
            dlq = f"{queue}:dead" if dead_letter == "" else dead_letter
            attempts = self.max_attempts if max_attempts is None else max_attempts
            limit = self.time_limit if time_limit is None else time_limit
            self.routes[queue] = Route(
                queue, fn, attempts, dlq, dead_letter_at_most_once, limit, prepare
            )
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
    def prefetch(self) -> int:
        """Jobs fetched at most and not finished: twice the concurrency."""
        return 2 * self.concurrency

    @property
    def queues(self) -> list[str]:
        names = list(self.routes)
        return [q for q in names if q in self.only] if self.only is not None else names

    # ---- clients ----------------------------------------------------------------------
    def client(self) -> Client:
        """This thread's client (a redis-py connection is not shared between threads)."""
        return self.thread_clients()

    def client_on(self, node: str) -> Client:
        """This thread's client on one node (``host:port``), which never moves."""
        return self.thread_clients_on(node)

    def new_client(self) -> Client:
        """A client on the seeds (``nodes`` read now: ``disque-worker --node`` sets them
        after the worker is made), closed when ``run`` returns."""
        return self.kept(Client(*self.nodes, password=self.password, tls=self.tls))

    def new_client_on(self, node: str) -> Client:
        """A client on one node (``host:port``), which never moves."""
        client = Client(
            node,
            password=self.password,
            tls=self.tls,
            stay=True,
            max_moves=1,
            socket_timeout=10.0,  # a paused node: fall back, do not hang
            connect_timeout=2.0,
        )
        return self.kept(client)

    def kept(self, client: Client) -> Client:
        self.clients.append(client)
        return client

    def on_its_node(self, job: Job, command: Callable[[Client], T]) -> T:
        """Run ``command`` about ``job`` on the node that delivered it; when that
        node is gone, on any node that answers (see the module's docstring)."""
        if job.node:
            try:
                return command(self.client_on(job.node))
            except NoNodeAvailable:
                log.info("%s, which delivered job %s, is gone: asking another", job.node, job.id)
        return command(self.client())

    # ---- running ----------------------------------------------------------------------
    def run(self, install_signals: bool = True) -> None:
        """Fetch and handle jobs until ``stop()`` (or SIGTERM/SIGINT, from the main
        thread), then drain within the grace period."""
        if not self.queues:
            raise ValueError("no handler for the queues asked for: nothing to run")
        self.stopping.clear()
        self.abandoned.clear()
        # Jobs fetched and not finished: as many again as run at once wait their turn,
        # so that a GETJOB brings several (one round trip for many jobs).
        self.slots = threading.Semaphore(self.prefetch)
        self.fetching = self.client()
        if self.follow_producers:
            self.fetching.locality = Locality()
        self.fetching.connect()  # no node answers at the start: NoNodeAvailable, at once
        for start in self.on_start:
            start(self.fetching)
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self.on_signal)
        pool = HandlerThreads(self.concurrency, self.handle)
        self.acks = Acks(self.acknowledge, batch=self.prefetch)
        side = [threading.Thread(target=self.keep_alive, daemon=True, name="disque-working")]
        side += [
            threading.Thread(target=self.watch, args=(every, fn), daemon=True)
            for every, fn in self.monitors
        ]
        if any(self.routes[q].is_async or self.routes[q].prepare for q in self.queues):
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

    def fetch(self, pool: HandlerThreads) -> None:
        client = self.client()
        while not self.stopping.is_set():
            if not self.slots.acquire(timeout=0.2):
                continue
            free = self.gather_slots()
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
                pool.submit(job)

    def gather_slots(self) -> int:
        """The free slots one GETJOB asks for (one taken already): every free one, and
        while more jobs are in hand than run at once (no handler idle, so no hurry),
        the ones freed within GATHER_S."""
        free = 1
        while free < self.prefetch and self.slots.acquire(blocking=False):
            free += 1
        deadline = time.monotonic() + GATHER_S
        while self.prefetch - free > self.concurrency:
            left = deadline - time.monotonic()
            if left <= 0 or not self.slots.acquire(timeout=left):
                break
            free += 1
        return free

    def drain(self, pool: HandlerThreads) -> None:
        """Wait for the running handlers up to the grace period; NACK the rest (each
        on the node that delivered it). The handler threads end when their handler
        returns; as daemon threads they do not keep the process alive."""
        started = time.monotonic()
        while self.running and time.monotonic() < started + self.grace:
            time.sleep(0.05)
        with self.lock:
            left = [r.job for r in self.running.values()]
            self.abandoned.update(job.id for job in left)
        if left:
            log.warning("grace period over: %d job(s) still running, queued again", len(left))
            for job in left:
                with contextlib.suppress(DisqueError):
                    self.on_its_node(job, methodcaller("nack", job.id))
        pool.shutdown()
        if self.acks is not None:
            self.acks.close()  # the last ACKJOB sent before run() returns

    # ---- one job ----------------------------------------------------------------------
    def handle(self, job: Job) -> None:
        route = self.routes[job.queue]
        started = time.monotonic()
        with self.lock:
            running = self.running.get(job.id)
        if self.stopping.is_set():  # fetched ahead, never started: queued again at once
            self.put_back(job)
            return
        if running is not None:
            running.began = started
        call: Call | None = None
        try:
            call = route.call(job)
            if running is not None:
                running.call, running.thread_id = call, threading.get_ident()
            notify_before(self.middleware, call)
            if call.on_started is not None:
                call.on_started()
            result = self.run_call(call, running)
            if running is not None and running.timed_out:  # it caught TimeLimitExceeded
                raise TimeLimitExceeded("returned after its time limit")
        except LeaveToRetry:
            pass  # neither ACK nor NACK: queued again after its RETRY
        except Exception as exc:  # the handler's failure is the job's, not the worker's
            error = exc
            if running is not None and running.timed_out:
                error = TimeLimitExceeded(f"ran past its time limit of {call_limit(call)} s")
            self.failed(route, job, error, call or Call(job, lambda: None, name=route.queue))
        else:
            assert call is not None
            self.done(job, call, result)
        finally:
            if self.metrics is not None:
                seconds = time.monotonic() - started
                self.metrics.handler_seconds.labels(job.queue, task_of(call)).observe(seconds)
            with self.lock:
                self.running.pop(job.id, None)
            self.slots.release()

    def put_back(self, job: Job) -> None:
        with contextlib.suppress(DisqueError):
            self.on_its_node(job, methodcaller("nack", job.id))
        with self.lock:
            self.running.pop(job.id, None)
        self.slots.release()

    def run_call(self, call: Call, running: Running | None) -> Any:
        """Run the handler; once it returned, a time limit no longer interrupts it.
        (A limit that struck just as it returned fails this run: at-least-once.)"""
        try:
            if call.is_async:
                assert self.loop is not None
                future = asyncio.run_coroutine_threadsafe(call.run(), self.loop)
                if running is not None:
                    running.future = future
                return future.result()
            return call.run()
        finally:
            if running is not None:
                with self.lock:
                    running.finished = True

    def done(self, job: Job, call: Call, result: Any) -> None:
        if job.id in self.abandoned:
            return  # NACKed by drain already: the next worker handles it again
        notify(self.middleware, "after", call, result)
        if call.on_done is not None:
            try:
                call.on_done(result)
            except Exception as exc:  # not acknowledged: it runs again after its RETRY
                log.warning("job %s: its result could not be kept (%s)", job.id, exc)
                return
        assert self.acks is not None
        if self.metrics is not None and call.message is not None:
            with self.lock:
                self.tasks_acked[job.id] = call.name
        self.acks.add(job)

    def acknowledge(self, jobs: list[Job]) -> None:
        """One ACKJOB for the jobs done since the last (the Acks thread)."""
        try:
            self.client().ack(*(job.id for job in jobs))
        except DisqueError as exc:  # not lost: they are delivered again after their RETRY
            log.warning(
                "ACKJOB of %d jobs failed (%s): they will be delivered again", len(jobs), exc
            )
            return
        for job in jobs:
            with self.lock:
                task = self.tasks_acked.pop(job.id, "")
            self.count("processed", job.queue, task)

    def failed(self, route: Route, job: Job, exc: Exception, call: Call) -> None:
        if job.id in self.abandoned:
            return
        attempts = job.nacks + job.additional_deliveries + 1
        max_attempts = call.max_attempts or route.max_attempts
        error = f"{type(exc).__name__}: {exc}"
        asked = isinstance(exc, Retry)  # (asked for, not failed: no traceback)
        if not asked:
            self.count("failed", job.queue, task_of(call))
            notify(self.middleware, "on_failure", call, exc)
        if job.at_most_once:
            self.drop(route, job, attempts, exc, call)
            return
        if route.dead_letter is not None and (attempts >= max_attempts or isinstance(exc, Reject)):
            log.warning(
                "job %s of %s failed (attempt %d)",
                job.id,
                job.queue,
                attempts,
                exc_info=None if asked or isinstance(exc, Reject) else exc,
            )
            if self.bury(route.dead_letter, job, attempts, error, task_of(call)):
                notify(self.middleware, "on_dead_letter", call, exc, route.dead_letter)
                self.give_up(call, exc)
            return
        delay = exc.delay if isinstance(exc, Retry) else None
        if delay is None:
            delay = backoff(attempts, self.backoff_base, self.backoff_cap)
        log.log(
            logging.INFO if asked else logging.WARNING,
            "job %s of %s failed (attempt %d: %s): again in %d s",
            job.id,
            job.queue,
            attempts,
            error,
            delay,
            exc_info=None if asked else exc,
        )
        try:
            known = self.on_its_node(job, lambda client: self.nack(client, job.id, delay))
        except DisqueError as nack_error:
            log.warning("NACK %s failed (%s): it will be delivered again", job.id, nack_error)
            return
        if not known:
            log.warning(
                "NACK %s: no node reached knows the job; its other owners queue it "
                "again after its RETRY",
                job.id,
            )
        notify(self.middleware, "on_retry", call, exc, delay)
        self.count("retried", job.queue, task_of(call))
        if call.on_retried is not None:
            try:
                call.on_retried(exc, delay, attempts)
            except Exception as error:
                log.info("job %s: its RETRY state could not be kept (%s)", job.id, error)

    def give_up(self, call: Call, exc: BaseException) -> None:
        """The job will not run again: its caller, if waiting for a result, hears why."""
        if call.on_given_up is not None:
            try:
                call.on_given_up(exc)
            except Exception as error:
                log.warning("job %s: its error result could not be sent (%s)", call.job.id, error)

    def nack(self, client: Client, job_id: str, delay: int) -> int:
        """NACK DELAY where the node takes it; a plain NACK once one refused it.
        How many jobs the node knew (0: not this one)."""
        if self.nack_delay:
            try:
                return client.nack(job_id, delay=delay)
            except BadId:
                # C Disque reads DELAY as a job ID (the job's own came from GETJOB).
                log.info("this cluster has no NACK ... DELAY: plain NACK from now on")
                self.nack_delay = False
        return client.nack(job_id)

    def drop(self, route: Route, job: Job, attempts: int, exc: Exception, call: Call) -> None:
        """A failing RETRY 0 job: Disque never delivers it again. Dead-lettered when
        the route asks for it; else said, counted, and acknowledged (nothing of it
        is left to run)."""
        if route.dead_letter is not None and route.dead_letter_at_most_once:
            error = f"{type(exc).__name__}: {exc}"
            if self.bury(route.dead_letter, job, attempts, error, task_of(call)):
                notify(self.middleware, "on_dead_letter", call, exc, route.dead_letter)
                self.give_up(call, exc)
            return
        log.warning(
            "job %s of %s failed and is dropped: RETRY 0 (at most once) jobs are "
            "never delivered again",
            job.id,
            job.queue,
            exc_info=exc,
        )
        self.count("dropped", job.queue, task_of(call))
        self.give_up(call, exc)
        with contextlib.suppress(DisqueError):
            self.client().ack(job.id)

    def bury(self, queue: str, job: Job, attempts: int, error: str, task: str = "") -> bool:
        """Dead-letter: ADDJOB there first (on 2 nodes when the cluster has them),
        then ACKJOB; never the other way round. False when the ADDJOB failed."""
        client = self.client()
        try:
            client.add_job(
                queue,
                dead_letter_record(job, attempts, error),
                DEAD_LETTER_TIMEOUT_MS,
                replicate=dead_letter_copies(client),
                retry=self.dead_letter_retry,
                ttl=self.dead_letter_ttl,
            )
        except (ConnectionLost, DisqueError) as exc:
            log.warning("could not dead-letter %s (%s): it will be delivered again", job.id, exc)
            return False
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
        self.count("dead_lettered", job.queue, task)
        return True

    def count(self, what: str, queue: str, task: str = "") -> None:
        if self.metrics is not None:
            getattr(self.metrics, what).labels(queue, task).inc()

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
                limit = call_limit(item.call)
                late = item.began and now - item.began >= (limit or 0)
                if limit is not None and late and not item.timed_out:
                    self.time_out(item, limit)
                soft = item.call.soft_time_limit if item.call is not None else None
                if soft is not None and item.began and now - item.began >= soft:
                    self.soft_time_out(item, soft)
                if now - item.started < 1.0 or item.timed_out:
                    continue  # a timed-out job gets no more WORKING
                jid = item.job.id
                try:
                    if item.retry is None:
                        shown = self.on_its_node(item.job, methodcaller("show", jid)) or {}
                        item.retry = int(shown.get("retry", 0))
                    if item.retry and now - item.touched >= item.retry / 2:
                        self.on_its_node(item.job, methodcaller("working", jid))
                        item.touched = now
                except NoJob:
                    log.warning("WORKING %s: no node reached knows the job", jid)
                    item.touched = now
                except DisqueError as exc:
                    log.debug("WORKING %s: %s", jid, exc)

    def time_out(self, item: Running, limit: float) -> None:
        """Stop a handler past its time limit: TimeLimitExceeded raised in its thread
        (a sync one; code blocked in C sees it when it comes back to Python) or its
        task cancelled (async). Its job is then NACKed, or dead-lettered on its last
        attempt, as any failure."""
        with self.lock:
            if item.finished or item.call is None:
                return
            item.timed_out = True
            if item.future is not None:
                item.future.cancel()
            elif item.thread_id:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(item.thread_id), ctypes.py_object(TimeLimitExceeded)
                )
        log.warning(
            "job %s of %s ran past its time limit of %s s: stopping it",
            item.job.id,
            item.job.queue,
            limit,
        )
        self.count("timed_out", item.job.queue, task_of(item.call))
        notify(self.middleware, "on_time_limit", item.call, limit)

    def soft_time_out(self, item: Running, limit: float) -> None:
        """SoftTimeLimitExceeded raised once in a sync handler's thread past its soft
        limit: the handler may catch it and return."""
        with self.lock:
            if item.finished or item.soft_timed_out or item.timed_out or not item.thread_id:
                return
            item.soft_timed_out = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(item.thread_id), ctypes.py_object(SoftTimeLimitExceeded)
            )
        log.warning(
            "job %s of %s ran past its soft time limit of %s s",
            item.job.id,
            item.job.queue,
            limit,
        )

    def watch(self, every: float, fn: Callable[[dict[str, int]], None]) -> None:
        while not self.stopping.wait(every):
            try:
                sizes = {q: self.client().qlen(q) for q in self.queues}
                fn(sizes)
            except Exception as exc:  # a monitor hook must not stop the worker
                log.warning("queue monitor failed: %s", exc)


def call_limit(call: Call | None) -> float | None:
    return call.time_limit if call is not None else None


def notify_before(middleware: list[Middleware], call: Call) -> None:
    """``before`` hooks: what they raise fails the job (see middleware.py)."""
    for item in middleware:
        item.before(call)


def task_of(call: Call | None) -> str:
    """The metrics' ``task`` label: a task's name, "" for a plain handler's job."""
    return call.name if call is not None and call.message is not None else ""


def dead_letter_copies(client: Client) -> int:
    """The copies a dead letter gets: 2, or 1 where only one node is reachable
    (HELLO: nodes neither failing nor leaving)."""
    reachable = sum(1 for node in client.hello().nodes if node.priority < PRIORITY_FAILING)
    return max(1, min(DEAD_LETTER_COPIES, reachable))


class Acks:
    """The ACKJOBs of finished jobs, sent by one thread in batches: a handler that
    returned hands its job here, and it is acknowledged within milliseconds, with
    the others done meanwhile (one round trip for many jobs, not one each). A
    worker that dies first loses only the ACK: the job is delivered again."""

    def __init__(self, send: Callable[[list[Job]], None], batch: int = 16) -> None:
        self.send = send
        self.batch = batch  # sent at once when this many are pending
        self.pending: list[Job] = []
        self.closed = False
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self.run, daemon=True, name="disque-acks")
        self.thread.start()

    def add(self, job: Job) -> None:
        with self.ready:
            self.pending.append(job)
            self.ready.notify()

    def enough(self) -> bool:
        return len(self.pending) >= self.batch or self.closed

    def run(self) -> None:
        while True:
            with self.ready:
                while not self.pending and not self.closed:
                    self.ready.wait()
                self.ready.wait_for(self.enough, GATHER_S)  # others finishing meanwhile
                batch, self.pending = self.pending, []
            if batch:
                self.send(batch)
            elif self.closed:
                return

    def close(self) -> None:
        """Send what is pending and stop."""
        with self.ready:
            self.closed = True
            self.ready.notify()
        self.thread.join(timeout=30)


class HandlerThreads:
    """``n`` daemon threads running ``handle`` on the jobs submitted. Daemon: a
    handler still running past the grace period (its job NACKed already) does not
    keep the process alive once ``Worker.run`` returned."""

    def __init__(self, n: int, handle: Callable[[Job], None]) -> None:
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.threads = [
            threading.Thread(
                target=self.serve, args=(handle,), daemon=True, name=f"disque-worker-{i}"
            )
            for i in range(n)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self.jobs.put(job)

    def serve(self, handle: Callable[[Job], None]) -> None:
        while (job := self.jobs.get()) is not None:
            handle(job)

    def shutdown(self) -> None:
        """Each thread ends after its current job (the worker submits no more than
        it has free slots, so none is waiting)."""
        for _ in self.threads:
            self.jobs.put(None)
