"""watchdog-period: a stack trace in the log when the event loop stalls.

As Redis' software watchdog: while the period is set, the cron re-arms a
timer at every tick; if the loop stalls longer than the period, the timer
fires in faulthandler's own thread and writes every thread's stack to the
log, showing where the node is stuck. The node keeps running.
"""

from __future__ import annotations

import faulthandler
from typing import TextIO


class Watchdog:
    def __init__(self) -> None:
        self.armed = False

    def tick(self, period_ms: int, hz: int, stream: TextIO) -> None:
        """Re-arm (the cron calls it every tick); period 0 turns it off."""
        if not period_ms:
            if self.armed:
                faulthandler.cancel_dump_traceback_later()
                self.armed = False
            return
        # Never shorter than two cron ticks, as Redis: a tick is not a stall.
        seconds = max(period_ms, 2 * 1000 // hz) / 1000
        try:
            stream.write("")  # flushed and open: faulthandler writes to its fd
            faulthandler.dump_traceback_later(seconds, repeat=False, file=stream)
            self.armed = True
        except (ValueError, OSError, AttributeError):
            self.armed = False

    def stop(self) -> None:
        if self.armed:
            faulthandler.cancel_dump_traceback_later()
            self.armed = False
