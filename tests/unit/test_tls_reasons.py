"""The one-line reasons the tools give for a TLS connection that fails.

A node that refuses a client's certificate on TLS 1.3 hangs up either during
the handshake (an EOF where its Finished was due) or right after it (the
first read gets nothing), depending on timing. Here the EOF case is made
every time: a real handshake against a listening socket that accepts and
hangs up. Both cases must read "Connection closed by server".
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import pytest
import redis

from disque.tls import CLOSED_BY_SERVER, handshake_failure
from disque_tui.main import short_reason


@pytest.fixture
def hangs_up() -> Iterator[int]:
    """A port whose listener hangs up on each connection once the client spoke."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # (close() does not wake a thread blocked in accept)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:  # the ClientHello read, then an EOF (closing with it unread: a reset)
                conn.settimeout(5)
                conn.recv(65536)
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def handshake_error(port: int) -> BaseException:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            context.wrap_socket(raw, server_hostname="127.0.0.1")
        except (ssl.SSLError, OSError) as exc:
            return exc
    raise AssertionError("the handshake succeeded against a socket that hangs up")


def test_an_eof_in_the_handshake_is_a_closed_connection(hangs_up: int) -> None:
    exc = handshake_error(hangs_up)
    assert isinstance(exc, ssl.SSLError), exc  # (an EOF, not a reset)
    assert handshake_failure(exc) == CLOSED_BY_SERVER
    wrapped = redis.exceptions.ConnectionError("Error 8 connecting to 127.0.0.1. EOF")
    wrapped.__cause__ = exc  # as redis-py raises it
    assert handshake_failure(wrapped) == CLOSED_BY_SERVER


def test_the_dashboard_words_both_cases_alike(hangs_up: int) -> None:
    in_handshake = redis.exceptions.ConnectionError("Error 8 connecting. EOF")
    in_handshake.__cause__ = handshake_error(hangs_up)
    at_first_read = redis.exceptions.ConnectionError("Connection closed by server.")
    assert short_reason(in_handshake) == short_reason(at_first_read)
    assert short_reason(in_handshake) == "Connection closed by server"
