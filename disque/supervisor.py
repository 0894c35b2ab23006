"""``disque-worker --processes N``: N worker processes under one supervisor, so
CPU-bound handlers use every core (one Python process runs one at a time).

The supervisor starts each child as ``disque-worker ... --processes 1`` in a
session of its own, restarts one that dies (at once the first time, then
backing off while it keeps dying within seconds of starting), and on SIGTERM
or SIGINT passes SIGTERM to every child: each stops fetching and gives its
running handlers the grace period, as a single worker does. A second signal is
passed on too (the children then NACK what still runs). A child that exits 2
(it cannot run: a bad module, queue or option) stops them all: restarting it
would not help. Children die with the supervisor (Linux: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

log = logging.getLogger("disque.supervisor")

SUPERVISED_ENV = "DISQUE_WORKER_SUPERVISED"
QUICK_DEATH = 5.0  # a child dead this soon after starting is restarted with a backoff
BACKOFF_CAP = 30.0
EXIT_CANNOT_RUN = 2


@dataclass
class Child:
    index: int
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float = field(default=0.0)

    def start(self) -> None:
        env = {**os.environ, SUPERVISED_ENV: str(self.index)}
        self.process = subprocess.Popen(self.argv, env=env, start_new_session=True)
        self.started = time.monotonic()
        log.info("worker process %d started (pid %d)", self.index, self.process.pid)

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)


class Supervisor:
    def __init__(self, child_argv: list[str], processes: int, grace: float) -> None:
        self.children = [Child(i, child_argv) for i in range(processes)]
        self.grace = grace
        self.signals: list[int] = []

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.on_signal)
        for child in self.children:
            child.start()
        code = self.watch()
        return code if code is not None else self.stop()

    def on_signal(self, signum: int, frame: object) -> None:
        self.signals.append(signum)
        for child in self.children:
            child.signal(signal.SIGTERM)

    def watch(self) -> int | None:
        """Restart dead children until a signal; an exit code when one cannot run."""
        while not self.signals:
            now = time.monotonic()
            for child in self.children:
                if child.process is None:
                    if now >= child.restart_at:
                        child.start()
                    continue
                code = child.process.poll()
                if code is None:
                    continue
                if code == EXIT_CANNOT_RUN:
                    log.error("worker process %d cannot run: stopping all", child.index)
                    self.on_signal(signal.SIGTERM, None)
                    self.stop()
                    return EXIT_CANNOT_RUN
                self.schedule_restart(child, code, now)
            time.sleep(0.1)
        return None

    def schedule_restart(self, child: Child, code: int, now: float) -> None:
        quick = now - child.started < QUICK_DEATH
        child.quick_deaths = child.quick_deaths + 1 if quick else 0
        wait = min(BACKOFF_CAP, 2.0 ** (child.quick_deaths - 1)) if child.quick_deaths else 0.0
        log.warning(
            "worker process %d exited (%s): restarted in %.0f s", child.index, exit_text(code), wait
        )
        child.process = None
        child.restart_at = now + wait

    def stop(self) -> int:
        """Wait for the children (they had SIGTERM) for the grace period and a margin,
        then kill what is left; 0 when all stopped on their own."""
        deadline = time.monotonic() + self.grace + 10.0
        code = 0
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker process %d did not stop: killed", child.index)
                child.process.kill()
                child.process.wait()
                code = 1
        return code


def exit_text(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"code {code}"


def die_with_supervisor() -> None:
    """In a child: be killed when the supervisor dies (Linux), not left orphaned."""
    if SUPERVISED_ENV not in os.environ or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() == 1:  # the supervisor died before prctl: too late to be told
        sys.exit(1)
