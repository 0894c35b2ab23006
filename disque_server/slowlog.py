"""SLOWLOG: the commands that ran longer than slowlog-log-slower-than, newest
first, at most slowlog-max-len of them. The server times the commands
(``Server.command_was_slow``); this holds what SLOWLOG GET shows."""

from __future__ import annotations

import time
from collections import deque
from typing import Final

# As Redis: an entry keeps at most 32 arguments, each cut at 128 bytes.
SLOWLOG_MAX_ARGS: Final = 32
SLOWLOG_MAX_ARGLEN: Final = 128

# (id, unix time, microseconds, arguments as kept)
Entry = tuple[int, int, int, list[bytes]]


class SlowLog:
    def __init__(self, max_len: int) -> None:
        self.entries: deque[Entry] = deque(maxlen=max_len)  # newest first
        self.next_id = 0  # never reset: SLOWLOG RESET empties, ids go on

    def add(self, argv: list[bytes], elapsed: float) -> None:
        """One slow command, its arguments cut as SLOWLOG_MAX_* say."""
        args = [
            a[:SLOWLOG_MAX_ARGLEN]
            + (
                b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_ARGLEN)
                if len(a) > SLOWLOG_MAX_ARGLEN
                else b""
            )
            for a in argv[:SLOWLOG_MAX_ARGS]
        ]
        if len(argv) > SLOWLOG_MAX_ARGS:
            args[-1] = b"... (%d more arguments)" % (len(argv) - SLOWLOG_MAX_ARGS + 1)
        self.entries.appendleft((self.next_id, int(time.time()), int(elapsed * 1e6), args))
        self.next_id += 1

    def resize(self, max_len: int) -> None:
        """CONFIG SET slowlog-max-len: the newest entries are kept."""
        self.entries = deque(self.entries, maxlen=max_len)
