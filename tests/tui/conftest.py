"""Fixtures for the dashboard tests (helpers live in tui_live.py and
tui_fixtures.py): times in UTC and no animations, so screens are stable."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def stable_screen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times on screen in UTC, whatever the machine's zone; animations off."""
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
