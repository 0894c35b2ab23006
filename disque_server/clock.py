"""Time helpers: milliseconds and seconds as Disque counts them."""

from __future__ import annotations

import random
import time


def now_ms() -> int:
    return int(time.time() * 1000)


def now_s() -> int:
    return int(time.time())


def time_error_ms(retry_s: int) -> int:
    """Random jitter added to re-queue times, so owners do not all wake at once."""
    return int(random.random() * min(500, retry_s * 100))
