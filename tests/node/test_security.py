"""Beyond Disque: an authenticated cluster bus, and TLS for clients and the bus."""

from __future__ import annotations

import socket
import ssl

import pytest
import redis

from testkit.nodes import ClusterOfNodes, tls_config, wait_for
from testkit.processes import StartError

PASSWORD = {"cluster-password": "s3cret-bus"}


def bus_message(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    out += [b"$%d\r\n%s\r\n" % (len(p), p) for p in parts]
    return b"".join(out)


def known_nodes(node) -> int:
    info = node.call("CLUSTER", "INFO").decode()
    return int(info.split("cluster_known_nodes:")[1].split("\r\n")[0])


def test_nodes_sharing_the_password_form_a_cluster(start_cluster):
    cluster = start_cluster(3, config=PASSWORD)
    jid = cluster[0].call("ADDJOB", "q", "x", "5000", "REPLICATE", "3")
    assert all(n.call("SHOW", jid) for n in cluster)


def test_node_with_wrong_or_no_password_cannot_join(start_cluster, start_node):
    cluster = start_cluster(2, config=PASSWORD)
    intruders = [
        start_node(config={"cluster-password": "wrong", "cluster-node-timeout": "1500"}),
        start_node(config={"cluster-node-timeout": "1500"}),
    ]
    for intruder in intruders:
        intruder.call("CLUSTER", "MEET", "127.0.0.1", str(cluster[0].port))
        cluster[0].call("CLUSTER", "MEET", "127.0.0.1", str(intruder.port))
    # Handshakes time out: nobody learns anybody.
    wait_for(
        lambda: "handshake" not in cluster[0].call("CLUSTER", "NODES").decode(),
        10,
        message="failed handshakes dropped",
    )
    assert known_nodes(cluster[0]) == 2
    assert all(known_nodes(i) == 1 for i in intruders)
    assert "did not authenticate" in cluster[0].log() or "wrong password" in cluster[0].log()


def test_unauthenticated_bus_messages_are_ignored(start_cluster):
    cluster = start_cluster(2, config=PASSWORD)
    a, b = cluster
    jid = a.call("ADDJOB", "q", "keep", "5000", "REPLICATE", "2")
    b_id = b.call("CLUSTER", "MYID")
    with socket.create_connection(("127.0.0.1", a.port + 10000), timeout=5) as s:
        # Pretend to be b, skip the challenge, ask a to delete the job.
        s.sendall(bus_message(b"DELJOB", b_id, str(b.port).encode(), b"-", jid))
        s.settimeout(5)
        data = b""
        while True:  # a sends its challenge, then closes the link
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"*2\r\n$9\r\nCHALLENGE")
    assert a.call("SHOW", jid) is not None
    assert a.call("QLEN", "q") == 1


def test_unauthenticated_bus_without_password_rejects_garbage(start_node):
    node = start_node()
    with socket.create_connection(("127.0.0.1", node.port + 10000), timeout=5) as s:
        s.sendall(b"*1\r\n$5\r\nHELLO\r\n")
        assert s.recv(100) == b""  # closed: not a bus message
    assert node.call("PING") is True


# ---- TLS -------------------------------------------------------------------------------


def free_tls_port() -> int:
    from testkit.nodes import free_port

    return free_port()


def test_tls_client_connects_and_plain_client_is_refused(start_node, certs):
    tls_port = free_tls_port()
    node = start_node(config=tls_config(certs, tls_port))
    with redis.Redis(
        host="127.0.0.1",
        port=tls_port,
        ssl=True,
        ssl_ca_certs=certs["ca"],
        protocol=2,
        socket_timeout=5,
    ) as c:
        jid = c.execute_command("ADDJOB", "q", "over tls", "0")
        assert c.execute_command("GETJOB", "FROM", "q")[0][1] == jid
    with socket.create_connection(("127.0.0.1", tls_port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        assert b"PONG" not in s.recv(100)  # no TLS handshake: no answer, closed
    assert node.call("PING") is True  # the plain port still works


def test_tls_client_with_untrusted_ca_fails(start_node, certs, tmp_path):
    tls_port = free_tls_port()
    start_node(config=tls_config(certs, tls_port))
    ctx = ssl.create_default_context()  # system CAs: ours is not among them
    with pytest.raises(ssl.SSLError):
        with socket.create_connection(("127.0.0.1", tls_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass


def test_hello_over_tls_lists_the_tls_ports(start_tls_node, certs):
    """TLS clients (disque-tui, Spark, --cluster) reach the other nodes HELLO lists."""
    (a, a_tls), (b, b_tls) = start_tls_node(), start_tls_node()
    ClusterOfNodes([a, b]).meet_chain()

    def hello_ports(**kwargs) -> dict[bytes, int]:
        with redis.Redis(host="127.0.0.1", protocol=2, socket_timeout=5, **kwargs) as c:
            return {entry[0]: int(entry[2]) for entry in c.execute_command("HELLO")[2:]}

    ids = {a.call("CLUSTER", "MYID"): a_tls, b.call("CLUSTER", "MYID"): b_tls}
    wait_for(
        lambda: hello_ports(port=a_tls, ssl=True, ssl_ca_certs=certs["ca"]) == ids,
        10,
        message="HELLO over TLS lists both TLS ports",
    )
    plain = {a.call("CLUSTER", "MYID"): a.port, b.call("CLUSTER", "MYID"): b.port}
    assert hello_ports(port=a.port) == plain


def test_cluster_over_a_tls_bus(start_cluster, certs):
    cfg = {
        "tls-cluster": "yes",
        "tls-cert-file": certs["cert"],
        "tls-key-file": certs["key"],
        "tls-ca-cert-file": certs["ca"],
        **PASSWORD,
    }
    cluster = start_cluster(3, config=cfg)
    jid = cluster[1].call("ADDJOB", "q", "x", "5000", "REPLICATE", "3")
    assert all(n.call("SHOW", jid) for n in cluster)
    # The bus really speaks TLS: a TLS handshake with our CA succeeds, plain text does not.
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.check_hostname = False
    ctx.load_cert_chain(certs["cert"], certs["key"])
    with socket.create_connection(("127.0.0.1", cluster[0].port + 10000), timeout=5) as raw:
        with ctx.wrap_socket(raw) as tls_sock:
            # (verified against our CA: the node's own certificate, for 127.0.0.1)
            assert tls_sock.version() in ("TLSv1.2", "TLSv1.3")
            assert (("commonName", "127.0.0.1"),) in tls_sock.getpeercert()["subject"]
    with socket.create_connection(("127.0.0.1", cluster[0].port + 10000), timeout=5) as plain:
        plain.sendall(b"*4\r\n$4\r\nPING\r\n$40\r\n" + b"a" * 40 + b"\r\n$4\r\n7711\r\n$1\r\n-\r\n")
        assert b"PONG" not in plain.recv(1000)


def test_missing_tls_files_give_a_clear_error(start_node, tmp_path):
    with pytest.raises(StartError, match="TLS|tls") as refused:
        start_node(
            config={
                "tls-port": "1",
                "tls-cert-file": str(tmp_path / "nope.crt"),
                "tls-key-file": str(tmp_path / "nope.key"),
            }
        )
    assert "Traceback" not in str(refused.value)


def test_requirepass_uses_the_password(start_node):
    node = start_node(config={"requirepass": "pw"})
    with node.client() as c, pytest.raises(redis.AuthenticationError):
        c.execute_command("AUTH", "nope")
    with node.client(password="pw") as c:
        assert c.execute_command("PING") is True


def test_disque_cli_connects_over_tls(start_node, certs):
    import subprocess
    import sys

    tls_port = free_tls_port()
    start_node(config=tls_config(certs, tls_port))
    cli = [sys.executable, "-m", "disque_cli", "-p", str(tls_port)]
    ok = subprocess.run(
        [*cli, "--tls", "--cacert", certs["ca"], "ping"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert ok.returncode == 0 and ok.stdout.strip() == "PONG", ok.stderr
    plain = subprocess.run(
        [*cli, "ping"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )
    assert "PONG" not in plain.stdout


def test_disque_cli_tls_mistakes_are_one_line(start_tls_node, certs):
    import subprocess
    import sys

    _, tls_port = start_tls_node()
    cli = [sys.executable, "-m", "disque_cli", "-p", str(tls_port)]
    cases = [
        (
            ["--cacert", "/nonexistent/ca.crt"],
            "Could not create an SSL context: CA certificate "
            "/nonexistent/ca.crt: No such file or directory",
        ),
        (
            ["--tls", "--key", certs["key"]],
            f"Could not create an SSL context: private key "
            f"{certs['key']} given without a client certificate",
        ),
        (
            ["--tls"],
            f"Could not connect to Disque at 127.0.0.1:{tls_port}: TLS handshake "
            "failed: certificate verify failed: ",
        ),
    ]
    for args, message in cases:
        result = subprocess.run(
            [*cli, *args, "ping"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 1 and result.stdout == "", args
        assert result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1, (
            result.stderr
        )
