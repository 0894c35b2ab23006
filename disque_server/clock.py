"""Time helpers: milliseconds and seconds as Disque counts them."""

from __future__ import annotations

import random
from typing import Final, TypeVar

import librt.time

# librt (the mypy project's runtime library) reads the wall clock into a C double
# in the compiled node: no float object and no call through the time module.


def now_ms() -> int:
    return int(librt.time.time() * 1000)


def now_s() -> int:
    return int(librt.time.time())


def command_clock() -> float:
    """Seconds: what a command's run time is measured with (Disque's ustime(), the
    wall clock), read once per command."""
    return librt.time.time()


_random: Final = random.random
T = TypeVar("T")


def pick(items: list[T], k: int) -> list[T]:
    """k of the items (all when fewer) in random order: random.sample's result,
    drawn in compiled code (random.sample runs as interpreted Python). Shuffles
    ``items`` in part: pass a copy."""
    n = len(items)
    k = min(k, n)
    for i in range(k):
        j = i + int(_random() * (n - i))
        items[i], items[j] = items[j], items[i]
    return items[:k]
