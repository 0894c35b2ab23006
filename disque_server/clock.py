"""Time helpers: milliseconds and seconds as Disque counts them."""

from __future__ import annotations

import random
import time
from typing import Final


def now_ms() -> int:
    return int(time.time() * 1000)


def now_s() -> int:
    return int(time.time())


_random: Final = random.random


def time_error_ms(retry_s: int) -> int:
    """Random jitter added to re-queue times, so owners do not all wake at once."""
    return int(_random() * (500 if retry_s >= 5 else retry_s * 100))
