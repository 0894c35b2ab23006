"""`disque --tls ... --cluster check | info | call | create | leave`: the TLS options
and the password apply to every node the verb reaches."""

from __future__ import annotations

import json

import pytest
from clihelpers import CliResult

from testkit.nodes import free_port, tls_config, wait_for

pytestmark = pytest.mark.timeout(60)


def tls_args(certs: dict[str, str]) -> list[str]:
    return ["--tls", "--cacert", certs["ca"]]


def one_error_line(result: CliResult, address: str) -> str:
    """The single [ERR] line of a verb that could not reach its seed (exit status 1)."""
    assert "Traceback" not in result.out + result.err, result.err
    assert result.returncode == 1, result.out + result.err
    lines = result.out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[ERR] {address}: "), result.out
    return lines[0].removeprefix(f"[ERR] {address}: ")


def test_check_info_call_on_a_tls_node(start_tls_node, certs, run_cli) -> None:
    node, tls_port = start_tls_node()
    address = f"127.0.0.1:{tls_port}"
    my_id = node.call("CLUSTER", "MYID").decode()
    node.call("ADDJOB", "q", "over tls", 0)

    check = run_cli(*tls_args(certs), "--cluster", "check", address)
    assert check.returncode == 0, check.out + check.err
    assert f"{my_id[:8]}  {address}" in check.out
    assert "[OK] All nodes agree about the cluster: 1 members." in check.out

    info = run_cli(*tls_args(certs), "--json", "--cluster", "info", address)
    assert info.returncode == 0, info.err
    assert [(row["address"], row["id"], row["jobs"]) for row in json.loads(info.out)] == [
        (address, my_id, 1)
    ]

    call = run_cli(*tls_args(certs), "--cluster", "call", address, "qlen", "q")
    assert call.returncode == 0, call.err
    assert call.out.splitlines()[1:] == [f"{address}: 1"]
    # -p instead of host:port; --insecure skips the verification.
    by_port = run_cli("-p", str(tls_port), "--insecure", "--cluster", "call", "ping")
    assert by_port.out.splitlines()[1:] == [f"{address}: PONG"], by_port.out + by_port.err


def test_tls_mistakes_are_one_line(start_tls_node, certs, run_cli) -> None:
    node, tls_port = start_tls_node()
    tls_address, plain_address = f"127.0.0.1:{tls_port}", f"127.0.0.1:{node.port}"
    untrusted = run_cli("--tls", "--cluster", "check", tls_address)
    assert one_error_line(untrusted, tls_address).startswith(
        "cannot connect: TLS handshake failed: certificate verify failed"
    )
    plain_port = run_cli(*tls_args(certs), "--cluster", "info", plain_address)
    assert one_error_line(plain_port, plain_address) == (
        "cannot connect: TLS handshake failed: wrong version number (is it the node's tls-port?)"
    )
    no_tls = run_cli("--cluster", "call", tls_address, "ping")
    assert one_error_line(no_tls, tls_address) == (
        "the node closed the connection (is it a TLS port? see --tls)"
    )
    missing = run_cli("--cacert", "/nonexistent/ca.crt", "--cluster", "check", tls_address)
    assert missing.returncode == 1 and missing.out == ""
    assert missing.err == (
        "Could not create an SSL context: CA certificate "
        "/nonexistent/ca.crt: No such file or directory\n"
    )


def test_tls_with_a_password_and_client_certificates(start_tls_node, certs, run_cli) -> None:
    _node, tls_port = start_tls_node(auth_clients="yes", config={"requirepass": "s3cret"})
    address = f"127.0.0.1:{tls_port}"
    client_cert = ["--cert", certs["cert"], "--key", certs["key"]]
    ok = run_cli(
        "-a",
        "s3cret",
        "--no-auth-warning",
        *tls_args(certs),
        *client_cert,
        "--cluster",
        "check",
        address,
    )
    assert ok.returncode == 0, ok.out + ok.err
    wrong = run_cli(
        "-a",
        "nope",
        "--no-auth-warning",
        *tls_args(certs),
        *client_cert,
        "--cluster",
        "info",
        address,
    )
    assert one_error_line(wrong, address).startswith("AUTH failed: ERR")
    no_cert = run_cli(
        "-a", "s3cret", "--no-auth-warning", *tls_args(certs), "--cluster", "check", address
    )
    assert one_error_line(no_cert, address) == (
        "the node closed the connection (does the node require a client certificate? "
        "see --cert and --key)"
    )


def test_a_tls_cluster_is_created_checked_and_left(start_node, certs, run_cli) -> None:
    """Every address given is a tls-port; the other nodes are found at the tls-ports
    HELLO lists over TLS, and CLUSTER MEET gets the nodes' client ports."""
    ports = [free_port() for _ in range(3)]
    nodes = [
        start_node(config={**tls_config(certs, port), "cluster-node-timeout": "1500"})
        for port in ports
    ]
    addresses = [f"127.0.0.1:{port}" for port in ports]
    create = run_cli(*tls_args(certs), "--cluster", "create", *addresses)
    assert create.returncode == 0, create.out + create.err
    assert "[OK] All 3 nodes know and reach each other." in create.out

    check = run_cli(*tls_args(certs), "--cluster", "check", addresses[1])
    assert check.returncode == 0, check.out
    assert "[OK] All 3 nodes are reachable." in check.out
    assert all(address in check.out for address in addresses)

    gone = nodes[2].call("CLUSTER", "MYID").decode()
    leave = run_cli(*tls_args(certs), "--cluster", "leave", addresses[2], "--yes", "--shutdown")
    assert leave.returncode == 0, leave.out + leave.err
    assert f"[OK] {addresses[2]} shut down." in leave.out
    wait_for(lambda: not nodes[2].is_running(), 10, message="the node to exit")
    for node in nodes[:2]:
        assert gone not in node.call("CLUSTER", "NODES").decode()
