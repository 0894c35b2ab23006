"""Split a command line into arguments the way redis-cli does (sdssplitargs,
in ``disque_common.splitargs``, shared with the node), and as text for the REPL.
"""

from __future__ import annotations

from disque_common.splitargs import SplitError, split_args

__all__ = ["SplitError", "split_args", "split_words"]


def split_words(line: str) -> list[str] | None:
    """Like split_args, as text, or None when the line does not split (open quote)."""
    try:
        return [arg.decode("utf-8", errors="surrogateescape") for arg in split_args(line)]
    except SplitError:
        return None
