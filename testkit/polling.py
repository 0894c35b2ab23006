"""The one poll-until loop of the tests: a predicate, a deadline, a clear failure.

``testkit.nodes.wait_for`` sleeps between checks; the dashboard's helpers
(``tests/tui/tui_live.py``) let the app run between them. Both step a ``Poll``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Poll:
    """Check `predicate` until it returns a truthy value; fail after `timeout` seconds
    with `message` and the last error the predicate raised (the node or the screen
    may not be ready yet: errors count as "not yet")."""

    def __init__(self, predicate: Callable[[], Any], timeout: float, message: str) -> None:
        self.predicate = predicate
        self.timeout = timeout
        self.message = message
        self.deadline = time.monotonic() + timeout
        self.last_exc: Exception | None = None

    def value(self) -> Any:
        """The predicate's truthy value, or None: not yet (AssertionError: too late)."""
        try:
            value = self.predicate()
            if value:
                return value
        except Exception as exc:
            self.last_exc = exc
        self.check_deadline()
        return None

    def check_deadline(self) -> None:
        if time.monotonic() >= self.deadline:
            raise AssertionError(
                f"timed out after {self.timeout}s waiting for {self.message}"
                + (f" (last error: {self.last_exc!r})" if self.last_exc else "")
            )
