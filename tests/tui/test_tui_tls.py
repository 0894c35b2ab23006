"""The dashboard over TLS, driven with the Pilot: a node whose client certificate
check (tls-auth-clients yes) and password only a TLS client with the right
certificate and AUTH gets through; given only the node's tls-port."""

from __future__ import annotations

import pytest
from tui_live import SIZE, cell, live_app, row_keys, run, wait_until

from disque.tls import TLS
from disque_tui.queue_detail import QueueDetailScreen

pytestmark = pytest.mark.timeout(60)


def test_polls_and_drills_down_over_tls(start_tls_node, certs) -> None:
    node, tls_port = start_tls_node(auth_clients="yes", config={"requirepass": "pw"})
    with node.client(password="pw") as c:
        node_id = c.execute_command("CLUSTER", "MYID").decode()
        jid = c.execute_command("ADDJOB", "tls-q", "over tls", 0).decode()
    tls = TLS(certs["ca"], certs["cert"], certs["key"])

    async def scenario() -> None:
        app = live_app(tls_port, password="pw", tls=tls)
        async with app.run_test(size=SIZE) as pilot:
            nodes = app.nodes_view.table
            await wait_until(
                pilot,
                lambda: cell(nodes, node_id, "status") == "up",
                message="the node up over TLS",
            )
            # Reached where we named it (its tls-port), not at HELLO's plain port.
            assert cell(nodes, node_id, "address") == f"127.0.0.1:{tls_port}"
            await wait_until(pilot, lambda: cell(nodes, node_id, "jobs") == "1")

            await pilot.press("2")
            queues = app.queues_view.table
            await wait_until(pilot, lambda: "tls-q" in row_keys(queues), message="queue row")
            assert cell(queues, "tls-q", "total") == "1"
            queues.select_key("tls-q")
            await pilot.press("enter")  # QPEEK, on the same TLS connections
            screen = await wait_until(
                pilot,
                lambda: (
                    isinstance(app.screen, QueueDetailScreen) and app.screen.peeks and app.screen
                ),
            )
            (peek,) = screen.peeks
            assert peek.error is None
            assert [(j.id, j.body) for j in peek.oldest] == [(jid, b"over tls")]
            await pilot.press("q")
        assert app.return_code == 0

    run(scenario())


def test_a_node_refusing_the_handshake_is_shown_with_the_reason(start_tls_node, certs) -> None:
    """No CA given: the node's certificate cannot be verified; the dashboard says so."""
    _, tls_port = start_tls_node()

    async def scenario() -> None:
        app = live_app(tls_port, tls=TLS())
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                pilot,
                lambda: app.snapshot is not None and app.snapshot.error,
                message="a failed cycle",
            )
            assert app.snapshot.error.startswith("TLS handshake failed: certificate verify failed")
            await pilot.press("q")

    run(scenario())
