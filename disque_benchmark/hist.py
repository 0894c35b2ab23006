"""A log-linear latency histogram for disque-benchmark (HDR-histogram-like).

Values are whole microseconds. Below 256 us every value has its own bucket;
above, each power of two is split into 128 buckets, so a bucket is never
wider than 1/128 of its values (< 0.8% error). The buckets are a sparse
dict {index: count}: cheap to record into, to send between processes
(pickle) and to merge. The exact maximum is kept beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99_9", 99.9))
EXACT = 256  # values below this have a bucket each
SUB_BITS = 7  # 2**7 = 128 buckets per power of two above EXACT


def bucket_of(us: int) -> int:
    if us < EXACT:
        return us if us > 0 else 0
    shift = us.bit_length() - 8
    return (shift << SUB_BITS) + (us >> shift)


def bucket_range(index: int) -> tuple[int, int]:
    """The lowest and highest value (us) that fall in bucket `index`."""
    if index < EXACT:
        return index, index
    shift = (index >> SUB_BITS) - 1
    mantissa = index - (shift << SUB_BITS)
    return mantissa << shift, ((mantissa + 1) << shift) - 1


class Histogram:
    """Counts of microsecond values in log-linear buckets, plus the exact max."""

    __slots__ = ("counts", "total", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self.max = 0

    def record(self, us: int) -> None:
        if us < EXACT:
            index = us if us > 0 else 0
        else:
            shift = us.bit_length() - 8
            index = (shift << SUB_BITS) + (us >> shift)
        counts = self.counts
        counts[index] = counts.get(index, 0) + 1
        self.total += 1
        if us > self.max:
            self.max = us

    # ---- moving between processes -------------------------------------------------

    def state(self) -> tuple[dict[int, int], int, int]:
        return self.counts, self.total, self.max

    def take(self) -> tuple[dict[int, int], int, int]:
        """The state so far, and start again from empty (for interval deltas)."""
        state = self.state()
        self.counts, self.total, self.max = {}, 0, 0
        return state

    def merge_state(self, state: tuple[dict[int, int], int, int]) -> None:
        counts, total, top = state
        mine = self.counts
        for index, n in counts.items():
            mine[index] = mine.get(index, 0) + n
        self.total += total
        if top > self.max:
            self.max = top

    def merge(self, other: Histogram) -> None:
        self.merge_state(other.state())

    @classmethod
    def merged(cls, hists: Iterable[Histogram]) -> Histogram:
        out = cls()
        for h in hists:
            out.merge(h)
        return out

    # ---- reading ----------------------------------------------------------------

    def percentile(self, pct: float) -> int:
        """The value (us) at percentile `pct` (0-100): the highest value of the bucket
        holding that rank, capped at the exact max; 0 when empty."""
        if self.total == 0:
            return 0
        if pct >= 100.0:
            return self.max
        rank = max(1, math.ceil(pct * self.total / 100 - 1e-9))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(bucket_range(index)[1], self.max)
        return self.max

    def mean(self) -> float:
        if self.total == 0:
            return 0.0
        s = 0
        for index, n in self.counts.items():
            low, high = bucket_range(index)
            s += (low + high) * n
        return min(s / (2 * self.total), float(self.max))

    def summary_ms(self) -> dict[str, float | None]:
        """{"p50", "p90", "p99", "p99_9", "max"} in milliseconds; None when empty."""
        if self.total == 0:
            return {key: None for key, _ in PERCENTILES} | {"max": None}
        out: dict[str, float | None] = {
            key: round(self.percentile(p) / 1000, 3) for key, p in PERCENTILES
        }
        out["max"] = round(self.max / 1000, 3)
        return out
