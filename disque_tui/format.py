"""Small pure formatters shared by the panels: sizes, durations, rates,
text sparklines, body previews. No Textual, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

SPARK_BARS = "▁▂▃▄▅▆▇█"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "K", "M", "G"):
        if value < 1024 or unit == "G":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}G"


def duration(seconds: float | None) -> str:
    """Compact duration: 0s, 42s, 3m05s, 2h10m, 3d4h."""
    if seconds is None:
        return "-"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if value < 10:
        return f"{value:.1f}"
    return f"{value:.0f}"


def number(value: int | None) -> str:
    return "-" if value is None else str(value)


def spark(values: Sequence[float], width: int = 12) -> str:
    """A one-line sparkline of the last `width` values, scaled from their min to max
    (a flat series is drawn low when zero, mid-height otherwise)."""
    tail = list(values)[-width:]
    if not tail:
        return ""
    low, high = min(tail), max(tail)
    if high == low:
        return (SPARK_BARS[0] if high <= 0 else SPARK_BARS[3]) * len(tail)
    last = len(SPARK_BARS) - 1
    return "".join(SPARK_BARS[int((v - low) / (high - low) * last + 0.5)] for v in tail)


def bar(fraction: float, width: int = 20) -> str:
    """A text progress bar: ███████░░░░."""
    filled = int(round(max(0.0, min(1.0, fraction)) * width))
    return "█" * filled + "░" * (width - filled)


def preview(body: bytes | str | None, limit: int = 60) -> str:
    """A job body on one line: decoded when it is UTF-8 text, control and
    undecodable bytes escaped (\\n, \\x00), cut to `limit` characters."""
    if body is None:
        return "(nil)"
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            return _cut(repr(body)[2:-1], limit)
    return _cut("".join(ch if ch.isprintable() else _escape(ch) for ch in body), limit)


def _escape(ch: str) -> str:
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or repr(ch)[1:-1]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What the server column's kinds (disque.protocol.server_kind) are called in full.
SERVER_NAMES = {"C": "C Disque", "python": "disque-py"}
