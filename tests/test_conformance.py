"""Replay the recorded Disque 1.0-rc1 single-node session and compare every reply."""

from __future__ import annotations

import pytest
from conformance import SINGLE_NODE_GOLDEN, SINGLE_NODE_SCRIPT, parse_golden, replay
from nodes import Node


def test_recording_parses() -> None:
    entries = parse_golden(SINGLE_NODE_GOLDEN)
    script = [line for line in SINGLE_NODE_SCRIPT.read_text().splitlines()
              if line.strip() and not line.startswith(("#", "!"))]
    assert len(entries) == len(script) == 128


@pytest.mark.timeout(60)
def test_single_node_matches_recording(node: Node) -> None:
    result = replay(SINGLE_NODE_GOLDEN, SINGLE_NODE_SCRIPT, node.port)
    assert result.failed == 0, result.report()
    assert result.passed > 100
    assert node.is_running()
