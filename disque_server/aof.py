"""The append-only file: job creations and deletions logged on disk.

The file is Disque 1.0-rc1's: a stream of RESP commands, ``LOADJOB
<serialized job>`` (serialize.py: Disque's binary layout) when a job is
created, imported or acknowledged, and ``DELJOB <id>`` when it is removed, so
a C Disque node loads the file of one of ours, and ours loads a C Disque's
(an upgrade in place, and back). The earlier files of this project, whose
``LOADJOB <state> <flags> <job fields...>`` records spelled the fields out,
still load. Records are buffered during an event-loop pass and written
before any reply of that pass leaves the node (``Client.flush`` and the bus
call ``flush``), so with ``appendfsync always`` a job whose ADDJOB was
answered is on disk; ``everysec`` fsyncs in a background thread once a
second; ``no`` leaves it to the kernel. Syncs are fdatasync, as Disque's.

Rewrite (BGREWRITEAOF, automatic growth, CONFIG SET appendonly yes) walks
the job index into a temporary file a few thousand jobs an event-loop pass
(``rewrite_step``; Disque forks, see ``start_rewrite`` for why not here),
while new records also collect in a rewrite buffer; at the end the buffer
is appended and the file atomically replaces the AOF. ``SHUTDOWN
REWRITE-AOF`` writes the snapshot at once, with clients no longer served,
so queued state (RETRY 0 jobs included) can be trusted by
``aof-enqueue-jobs-once`` at the next start.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Final

import hiredis

from disque_server.clock import now_ms
from disque_server.job import (
    ACKED,
    ACTIVE,
    FIELDS,
    STATE_BY_NAME,
    Job,
    job_from_fields,
)
from disque_server.jobs import lifecycle
from disque_server.jobs.registry import INDEX_PARTS
from disque_server.resp import BYTES_ONLY, bulk_array, bulk_array_length
from disque_server.restart import Restore
from disque_server.serialize import SerializeError, deserialize_job, loadjob_record

if TYPE_CHECKING:
    import asyncio

    from disque_server.config import Config
    from disque_server.jobs.queue import Queues
    from disque_server.jobs.registry import Jobs
    from disque_server.log import Log

READ_CHUNK: Final = 1024 * 1024

# Disque's aof_fsync: fdatasync where there is one (the file's data, not its times);
# a rewritten file is fsynced whole before it replaces the AOF.
aof_fsync: Final = getattr(os, "fdatasync", os.fsync)


class AOFError(Exception):
    """The AOF cannot be loaded; the message says where and why."""


def job_record(job: Job) -> bytes:
    return loadjob_record(job)


def deljob_record(job_id: bytes) -> bytes:
    return bulk_array([b"DELJOB", job_id])


INCREMENTAL_FSYNC_BYTES: Final = 32 * 1024 * 1024
REWRITE_STEP_JOBS: Final = 4000  # jobs a rewrite writes in one event-loop pass (~1.5 ms)


class Rewrite:
    """A rewrite in progress: its temporary file, the next part of the job index
    to write, what is written and what is fsynced."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.next_part = 0
        self.size = 0
        self.synced = 0
        self.syncing = False

    def synced_to(self, size: int) -> None:
        self.synced = size
        self.syncing = False


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)  # (not in the slice: see test_compiled_hazards.py)
        view = view[written:]


def write_snapshot(jobs: Jobs, incremental: bool, path: str) -> int:
    """Write every job as a LOADJOB record to ``path`` (fsynced); return the size.

    With aof-rewrite-incremental-fsync, fsync every 32 MB written, as Redis:
    the disk gets the file in steps, not in one long burst at the end."""
    chunk: list[bytes] = []
    size = synced = 0
    with open(path, "wb") as f:
        for job in jobs.all():
            chunk.append(job_record(job))
            if len(chunk) >= 1000:
                data = b"".join(chunk)
                f.write(data)
                size += len(data)
                chunk.clear()
                if incremental and size - synced >= INCREMENTAL_FSYNC_BYTES:
                    f.flush()
                    aof_fsync(f.fileno())
                    synced = size
        data = b"".join(chunk)
        f.write(data)
        size += len(data)
        f.flush()
        os.fsync(f.fileno())
    return size


class AOF:
    """The append-only file: what is written to it, its fsyncs, its rewrites, and
    loading it at start."""

    def __init__(
        self,
        config: Config,
        log: Log,
        loop: asyncio.AbstractEventLoop,
        jobs: Jobs,
        queues: Queues,
    ) -> None:
        self.config = config
        self.log = log
        self.loop = loop
        self.jobs = jobs
        self.queues = queues
        self.state = "off"  # off | on | wait_rewrite
        self.fd = -1
        self.buf: list[bytes] = []
        self.current_size = 0
        self.base_size = 0
        self.fsync_pending = False
        self.fsync_running = False
        self.last_fsync = time.monotonic()
        self.last_write_error = ""
        self.rewrite: Rewrite | None = None  # the rewrite in progress
        self.rewrite_buf: list[bytes] | None = None
        self.rewrite_started = 0.0
        self.rewrite_scheduled = False
        self.last_rewrite_secs = -1
        self.last_bgrewrite_ok = True
        self.loading = False
        self.rewritten_for_shutdown = False  # SHUTDOWN REWRITE-AOF wrote the snapshot

    @property
    def path(self) -> str:
        return os.path.join(self.config["dir"], self.config["appendfilename"])

    # ---- start and stop ----------------------------------------------------------
    def open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.current_size = os.fstat(self.fd).st_size
        if not self.base_size:
            self.base_size = self.current_size
        self.state = "on"

    def enable(self) -> None:
        """CONFIG SET appendonly yes: write the current state, then log changes."""
        if self.state != "off":
            return
        self.state = "wait_rewrite"
        if not self.start_rewrite():
            self.state = "off"

    def disable(self) -> None:
        self.flush()
        self.close()
        self.state = "off"
        self.kill_rewrite()

    def close(self) -> None:
        if self.fd >= 0:
            self.flush()
            try:
                aof_fsync(self.fd)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = -1

    # ---- appending ---------------------------------------------------------------
    def loadjob(self, job: Job) -> None:
        if self.state != "off" and not self.loading:
            self.append(job_record(job))

    def deljob(self, job: Job) -> None:
        if self.state != "off" and not self.loading:
            self.append(deljob_record(job.id))

    def append(self, record: bytes) -> None:
        if self.state == "on":
            self.buf.append(record)
        if self.rewrite_buf is not None:
            self.rewrite_buf.append(record)

    def flush(self) -> None:
        """Write the buffered records; fsync now with appendfsync always."""
        if not self.buf or self.fd < 0:
            return
        data = b"".join(self.buf)
        self.buf.clear()
        try:
            write_all(self.fd, data)
            self.current_size += len(data)
            policy = self.config["appendfsync"]
            if policy == "always" and not self.fsync_paused:
                aof_fsync(self.fd)
            elif policy != "no":
                self.fsync_pending = True
            self.last_write_error = ""
        except OSError as exc:
            self.last_write_error = exc.strerror or str(exc)
            self.log.warning("Error writing to the AOF file: %s", self.last_write_error)

    @property
    def fsync_paused(self) -> bool:
        """no-appendfsync-on-rewrite: no fsync while a rewrite child writes (the
        disk is busy with it); the writes are fsynced once it is done."""
        return self.rewrite is not None and self.config["no-appendfsync-on-rewrite"]

    def cron(self) -> None:
        self.flush()
        now = time.monotonic()
        if (
            self.fsync_pending
            and not self.fsync_running
            and now - self.last_fsync >= 1
            and not self.fsync_paused
        ):
            self.fsync_pending = False
            self.fsync_running = True
            self.last_fsync = now
            future = self.loop.run_in_executor(None, aof_fsync, self.fd)
            future.add_done_callback(self._fsync_done)
        if self.rewrite is None and self.state == "on" and self.should_auto_rewrite():
            self.log.notice(
                "Starting automatic rewriting of AOF on %d%% growth", self.growth_percent()
            )
            self.start_rewrite()

    def _fsync_done(self, future: object) -> None:
        self.fsync_running = False

    def growth_percent(self) -> int:
        base = self.base_size or 1
        return int((self.current_size - base) * 100 / base)

    def should_auto_rewrite(self) -> bool:
        config = self.config
        pct = config["auto-aof-rewrite-percentage"]
        return (
            bool(pct)
            and self.current_size > config["auto-aof-rewrite-min-size"]
            and self.growth_percent() >= pct
        )

    # ---- rewrite ------------------------------------------------------------------
    @property
    def rewriting(self) -> bool:
        return self.rewrite is not None

    def start_rewrite(self) -> bool:
        """BGREWRITEAOF: walk the jobs into a new file, a few thousand an event-loop
        pass (``rewrite_step``), while the node goes on and its new records also
        collect in the rewrite buffer, appended to the file at the end.

        Disque forks a child for this; here a child would copy the whole heap
        (Python writes a reference count into every job it reads): a fork at 2M
        jobs took 1.5 times C's rewrite. The walk is the index's parts in order,
        as JSCAN's: a job changed after its part was written has its newer record
        in the buffer, one removed has its DELJOB there, one added its LOADJOB."""
        if self.rewrite is not None:
            self.rewrite_scheduled = True
            return True
        tmp = os.path.join(self.config["dir"], f"temp-rewriteaof-bg-{os.getpid()}.aof")
        self.flush()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            self.log.warning("Can't rewrite append only file in background: %s", exc)
            self.last_bgrewrite_ok = False
            return False
        self.rewrite = Rewrite(fd, tmp)
        self.rewrite_buf = []
        self.rewrite_started = time.monotonic()
        self.log.notice("Background append only file rewriting started")
        self.loop.call_soon(self.rewrite_step, self.rewrite)
        return True

    def rewrite_step(self, rw: Rewrite) -> None:
        """Write the next parts of the job index (REWRITE_STEP_JOBS jobs or so)."""
        if self.rewrite is not rw:
            return  # killed (CONFIG SET appendonly no, SHUTDOWN ...)
        index = self.jobs.by_id
        chunk: list[bytes] = []
        while rw.next_part < INDEX_PARTS and len(chunk) < REWRITE_STEP_JOBS:
            for job in index.part_jobs(rw.next_part):
                chunk.append(job_record(job))
            rw.next_part += 1
        data = b"".join(chunk)
        try:
            write_all(rw.fd, data)
        except OSError as exc:
            self.rewrite_failed(f"write: {exc}")
            return
        rw.size += len(data)
        loop = self.loop
        if rw.next_part < INDEX_PARTS:
            incremental = self.config["aof-rewrite-incremental-fsync"]
            if incremental and not rw.syncing and rw.size - rw.synced >= INCREMENTAL_FSYNC_BYTES:
                # As Disque every 32 MB, but in a thread: the walk goes on meanwhile.
                rw.syncing = True
                size = rw.size
                synced = loop.run_in_executor(None, aof_fsync, rw.fd)
                synced.add_done_callback(lambda _f: rw.synced_to(size))
            loop.call_soon(self.rewrite_step, rw)
            return
        written = loop.run_in_executor(None, os.fsync, rw.fd)  # the whole file, then swap
        written.add_done_callback(lambda f: self.rewrite_written(rw, f.exception()))

    def rewrite_written(self, rw: Rewrite, error: BaseException | None) -> None:
        if self.rewrite is not rw:
            return
        if error is not None:
            self.rewrite_failed(f"fsync: {error}")
            return
        buffered, self.rewrite_buf = self.rewrite_buf or [], None
        try:
            write_all(rw.fd, b"".join(buffered))
            aof_fsync(rw.fd)
            fd, rw.fd = rw.fd, -1  # (closed once: a number closed twice may be reused)
            os.close(fd)
            os.replace(rw.path, self.path)
        except OSError as exc:
            self.rewrite_failed(f"finishing: {exc}")
            return
        self.rewrite = None
        self.last_rewrite_secs = int(time.monotonic() - self.rewrite_started)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.buf.clear()  # those records are in the new file already
        self.base_size = 0
        if self.state != "off":
            self.open()
        self.last_bgrewrite_ok = True
        self.log.notice("Background AOF rewrite finished successfully")
        if self.rewrite_scheduled:
            self.rewrite_scheduled = False
            self.start_rewrite()

    def rewrite_failed(self, why: str) -> None:
        self.log.warning("Background AOF rewrite terminated with error: %s", why)
        self.kill_rewrite()
        self.last_bgrewrite_ok = False
        if self.state == "wait_rewrite":
            self.state = "off"

    def kill_rewrite(self) -> None:
        """Stop a rewrite in progress; its file is removed."""
        rw, self.rewrite = self.rewrite, None
        self.rewrite_buf = None
        if rw is not None:
            if rw.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(rw.fd)
                rw.fd = -1
            with contextlib.suppress(OSError):
                os.unlink(rw.path)

    def rewrite_for_shutdown(self) -> bool:
        """SHUTDOWN REWRITE-AOF: a fresh AOF written now, while no client is served."""
        self.kill_rewrite()
        tmp = os.path.join(self.config["dir"], f"temp-rewriteaof-{os.getpid()}.aof")
        try:
            write_snapshot(self.jobs, bool(self.config["aof-rewrite-incremental-fsync"]), tmp)
            os.replace(tmp, self.path)
        except OSError as exc:
            self.log.warning("Error rewriting the AOF for shutdown: %s", exc)
            return False
        self.buf.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.rewritten_for_shutdown = True
        self.log.notice("AOF rewritten for a controlled restart: %s", self.path)
        return True

    # ---- loading --------------------------------------------------------------------
    def load(self, restore: Restore) -> int:
        """Load the AOF if it exists; return the number of jobs loaded."""
        path = self.path
        if not os.path.exists(path):
            return 0
        self.loading = True
        try:
            return self._load(path, restore)
        finally:
            self.loading = False

    def _load(self, path: str, restore: Restore) -> int:
        reader = hiredis.Reader()
        offset = 0  # end of the last complete record
        loaded = 0
        now_s = int(time.time())
        with open(path, "rb") as f:
            while True:
                chunk = f.read(READ_CHUNK)
                if not chunk:
                    break
                reader.feed(chunk)
                while True:
                    try:
                        record = reader.gets()
                    except (hiredis.ProtocolError, TypeError, ValueError, MemoryError) as exc:
                        raise AOFError(
                            f"Bad file format reading the append only file {path} "
                            f"at offset {offset}: {exc}. Use "
                            f"'disque-check-aof --fix {path}' to repair it."
                        ) from None
                    if record is False:
                        break
                    if (
                        type(record) is not list
                        or not record
                        or not BYTES_ONLY.issuperset(map(type, record))
                    ):
                        raise AOFError(
                            f"Bad file format reading the append only file {path} "
                            f"at offset {offset}: not a command"
                        )
                    if not self.apply(record, restore, now_s):
                        raise AOFError(
                            f"Bad file format reading the append only file {path} "
                            f"at offset {offset}: unknown or malformed "
                            f"{record[0][:20].decode(errors='replace')} record"
                        )
                    loaded += record[0] == b"LOADJOB"
                    offset += bulk_array_length(record)
        size = os.path.getsize(path)
        if offset < size:
            self.truncated(path, offset, size)
        self.log.notice(
            "DB loaded from append only file: %d job records, %d jobs in memory",
            loaded,
            len(self.jobs),
        )
        return loaded

    def truncated(self, path: str, offset: int, size: int) -> None:
        if not self.config["aof-load-truncated"]:
            raise AOFError(
                f"Unexpected end of file reading the append only file {path} at "
                f"offset {offset} ({size - offset} bytes of an incomplete record). "
                f"Use 'disque-check-aof --fix {path}' or set aof-load-truncated yes."
            )
        self.log.warning(
            "!!! Warning: short read while loading the AOF file %s!!! "
            "The last %d bytes (from offset %d) are an incomplete record: "
            "AOF loaded anyway because aof-load-truncated is enabled; the "
            "file was truncated to offset %d.",
            path,
            size - offset,
            offset,
            offset,
        )
        os.truncate(path, offset)

    def apply(self, record: list[bytes], restore: Restore, now_s: int) -> bool:
        name = record[0].upper()
        if name == b"DELJOB" and len(record) == 2:
            job = self.jobs.lookup(record[1])
            if job is not None:
                self.jobs.unregister(job)
            return True
        if name != b"LOADJOB":
            return False
        if len(record) == 2:  # Disque's, and ours since: the job serialized
            try:
                job, end = deserialize_job(record[1])
            except SerializeError:
                return False
            if end != len(record[1]):
                return False
            self.register_loaded(job, job.state, restore, now_s)
            return True
        if len(record) != 3 + FIELDS:  # this project's earlier records, field by field
            return False
        state = STATE_BY_NAME.get(record[1])
        if state is None or not record[2].isdigit():
            return False
        job = job_from_fields(record[3:], ACTIVE)
        if job is None:
            return False
        lifecycle.loaded_flags(job, int(record[2]))
        self.register_loaded(job, state, restore, now_s)
        return True

    def register_loaded(self, job: Job, state: int, restore: Restore, now_s: int) -> None:
        """A job read from the file takes the place of any earlier record of it;
        queued jobs come back active (re-queued after their RETRY), or queued with
        aof-enqueue-jobs-once, as Disque's loadjobCommand; a clean stop's snapshot
        restores more (restart.py)."""
        old = self.jobs.lookup(job.id)
        if old is not None:
            self.jobs.unregister(old)
        if job.etime <= now_s:
            return  # expired while the node was down
        q = self.queues.lookup(job.queue)
        if q is not None:
            job.queue = q.name
        if state == ACKED:
            job.state = ACKED
            self.jobs.register(job)
        elif restore.queues_at_once(job, state):
            job.state = ACTIVE
            self.jobs.register(job)
            lifecycle.first_queueing_here(job)
            self.queues.enqueue_job(job)
        else:
            job.state = ACTIVE  # the retry timer re-queues it (never RETRY 0 jobs)
            restore.restore_timer(job, state, now_ms())
            self.jobs.register(job)

    # ---- INFO --------------------------------------------------------------------------
    def info_fields(self) -> list[str]:
        enabled = self.state != "off"
        fields = [
            f"loading:{int(self.loading)}",
            f"aof_enabled:{int(enabled)}",
            f"aof_state:{self.state}",
            f"aof_rewrite_in_progress:{int(self.rewriting)}",
            f"aof_rewrite_scheduled:{int(self.rewrite_scheduled)}",
            f"aof_last_rewrite_time_sec:{self.last_rewrite_secs}",
            "aof_current_rewrite_time_sec:"
            + (str(int(time.monotonic() - self.rewrite_started)) if self.rewriting else "-1"),
            f"aof_last_bgrewrite_status:{'ok' if self.last_bgrewrite_ok else 'err'}",
            f"aof_last_write_status:{'err' if self.last_write_error else 'ok'}",
        ]
        if enabled:
            fields += [
                f"aof_current_size:{self.current_size}",
                f"aof_base_size:{self.base_size}",
                f"aof_pending_rewrite:{int(self.rewrite_scheduled)}",
                f"aof_buffer_length:{sum(map(len, self.buf))}",
                f"aof_rewrite_buffer_length:{sum(map(len, self.rewrite_buf or []))}",
                f"aof_pending_bio_fsync:{int(self.fsync_running)}",
            ]
        return fields
