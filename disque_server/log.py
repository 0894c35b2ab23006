"""Redis-style logging: ``pid:M 22 Nov 2026 03:10:11.123 * message``."""

from __future__ import annotations

import os
import sys
import time
from typing import Final, TextIO

LEVELS: Final = {"debug": 0, "verbose": 1, "notice": 2, "warning": 3}
_MARKS: Final = ".-*#"


# syslog priorities of the levels, as Redis maps them.
_SYSLOG_PRIORITIES: Final = (7, 6, 5, 4)  # LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING


class Log:
    """``syslog``: (ident, facility name) to copy every line to syslog too
    (syslog-enabled), or None."""

    def __init__(
        self, level: str = "notice", path: str = "", syslog: tuple[str, str] | None = None
    ) -> None:
        self.level = LEVELS[level]
        self.path = path
        self.stream: TextIO = sys.stdout
        if path:
            self.stream = open(path, "a", buffering=1)
        self.syslog = None
        if syslog is not None:
            import syslog as syslog_module  # POSIX only: imported when enabled

            ident, facility = syslog
            syslog_module.openlog(
                ident,
                syslog_module.LOG_PID | syslog_module.LOG_NDELAY,
                getattr(syslog_module, f"LOG_{facility.upper()}"),
            )
            self.syslog = syslog_module

    def set_level(self, level: str) -> None:
        self.level = LEVELS[level]

    def write(self, level: int, msg: str, *args: object) -> None:
        if level < self.level:
            return
        if args:
            msg = msg % args
        now = time.time()
        stamp = time.strftime("%d %b %Y %H:%M:%S", time.localtime(now))
        line = f"{os.getpid()}:M {stamp}.{int(now * 1000) % 1000:03d} {_MARKS[level]} {msg}\n"
        try:
            self.stream.write(line)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a full disk or a closed stdout must not take the node down
        if self.syslog is not None:
            self.syslog.syslog(_SYSLOG_PRIORITIES[level], msg)

    def debug(self, msg: str, *args: object) -> None:
        self.write(0, msg, *args)

    def verbose(self, msg: str, *args: object) -> None:
        self.write(1, msg, *args)

    def notice(self, msg: str, *args: object) -> None:
        self.write(2, msg, *args)

    def warning(self, msg: str, *args: object) -> None:
        self.write(3, msg, *args)
