"""The shop's own tests, in stub mode: tasks run in this process, no node."""

from __future__ import annotations

import os

os.environ["SHOP_STUB"] = "1"  # before tasks is imported

import pytest  # noqa: E402
from tasks import charge, tasks  # noqa: E402

from disque.tasks import TaskFailed  # noqa: E402


def test_a_charge_returns_its_receipt() -> None:
    handle = charge.send(42, eur=5)
    assert tasks.stub is not None and tasks.stub.run_pending() == 1
    assert handle.get() == {"customer": 42, "eur": 5, "receipt": "R-42-5"}


def test_a_bad_amount_fails_after_its_attempts() -> None:
    handle = charge.send(42, eur=0)
    assert tasks.stub is not None
    tasks.stub.run_pending(fail_fast=False)
    with pytest.raises(TaskFailed, match="cannot charge 0 EUR"):
        handle.get()


def test_a_task_is_a_function_too() -> None:
    assert charge(1, eur=2)["receipt"] == "R-1-2"
