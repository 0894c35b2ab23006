"""The link to one Disque node: connect, authenticate, send, read typed replies.

Built on redis-py (RESP2, no response callbacks, no retries: a CLI must never
send a command twice behind the user's back) with `TypedParser`, so a
reply keeps its type; RESP3 too, when the user switches to it with HELLO 3
(as with redis-cli 7). Connection problems become `Disconnected` with the
message redis-cli would print; they never escape as tracebacks.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from disque.tls import TLS, handshake_failure
from disque_cli import DEFAULT_HOST, DEFAULT_PORT
from disque_cli.replies import ErrorReply, Reply, TypedParser

Arg = str | bytes | int | float


class Disconnected(Exception):
    """The node cannot be reached or went away; str() is the line to print."""


class BadURI(ValueError):
    pass


@dataclass
class Endpoint:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    password: str | None = None
    tls: TLS | None = None
    socket: str | None = None  # a Unix socket path (-s): host and port are ignored

    @property
    def label(self) -> str:
        """host:port as redis-cli shows it (IPv6 addresses in brackets), or the socket."""
        if self.socket:
            return self.socket
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def pool_kwargs(self) -> dict:
        """Where redis-py connects: the Unix socket, or host and port (TLS maybe)."""
        if self.socket:
            return {"connection_class": redis.UnixDomainSocketConnection, "path": self.socket}
        return {
            "host": self.host,
            "port": self.port,
            **(self.tls.pool_kwargs() if self.tls else {}),
        }


def parse_uri(uri: str) -> Endpoint:
    """disque://[:password@]host[:port] (redis:// is accepted too)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("disque", "redis", "disques", "rediss"):
        raise BadURI(f"Invalid URI scheme '{parts.scheme}' (expected disque://)")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise BadURI(f"Invalid port in URI: {uri}") from exc
    password = unquote(parts.password) if parts.password else None
    tls = TLS() if parts.scheme.endswith("s") else None
    return Endpoint(parts.hostname or DEFAULT_HOST, port, password, tls)


def _reason(exc: BaseException) -> str:
    """The OS reason of a socket failure, as redis-cli/hiredis prints it."""
    tls_failure = handshake_failure(exc)  # an SSLError's errno means nothing to the user
    if tls_failure is not None:
        return tls_failure
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, socket.gaierror):
            return seen.strerror or str(seen)
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno)
        if isinstance(seen, (socket.timeout, TimeoutError)):
            return os.strerror(errno.ETIMEDOUT)
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    return text.split(". ", 1)[-1].rstrip(".") if "connecting to" in text else text


class Session:
    """One connection to a node, reconnected on demand (one attempt per command)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        warn: Callable[[str], None] | None = None,
        connect_timeout: float | None = None,
        reply_timeout: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.reply_timeout = reply_timeout  # None: wait for replies (blocking GETJOB)
        self._warn = warn or (lambda line: print(line, file=sys.stderr))
        self._client: redis.Redis | None = None
        self.protocol = 2  # 3 after a HELLO 3: kept across reconnections

    # ---- connection state ------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connection._sock is not None

    def connect(self) -> None:
        """Connect (and AUTH) now; raise Disconnected with redis-cli's message."""
        self.open()
        if self.endpoint.password is not None:
            reply = self.call("AUTH", self.endpoint.password)
            if isinstance(reply, ErrorReply):
                self._warn(f"AUTH failed: {reply.text}")
        if self.protocol == 3:
            self.call("HELLO", "3")

    def open(self) -> None:
        """Connect, over TLS if the endpoint says so, without AUTH; raise Disconnected
        with redis-cli's message (a failed handshake included)."""
        self.close()
        pool = redis.ConnectionPool(
            protocol=2,
            parser_class=TypedParser,
            socket_timeout=self.reply_timeout,
            socket_connect_timeout=self.connect_timeout,
            retry=Retry(NoBackoff(), 0),
            driver_info=None,
            **({} if self.endpoint.socket else {"socket_keepalive": True}),
            **self.endpoint.pool_kwargs(),
        )
        try:
            client = redis.Redis(connection_pool=pool, single_connection_client=True)
        except (redis.RedisError, OSError) as exc:
            pool.disconnect()
            raise Disconnected(
                f"Could not connect to Disque at {self.endpoint.label}: {_reason(exc)}"
            ) from None
        client.response_callbacks.clear()  # raw replies: the renderer decides
        self._client = client

    def ensure_connected(self) -> None:
        if not self.connected:
            self.connect()

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
                self._client.connection_pool.disconnect()
            except Exception:  # closing a dead socket may fail: nothing to do
                pass
            self._client = None

    def switch(self, endpoint: Endpoint) -> None:
        """`connect host port` in the REPL: keep the password, change the node."""
        if endpoint.password is None:
            endpoint.password = self.endpoint.password
        self.close()
        self.endpoint = endpoint
        self.connect()

    # ---- commands --------------------------------------------------------
    def call(self, *args: Arg) -> Reply:
        """Send one command and read its reply (connecting first if needed)."""
        self.ensure_connected()
        assert self._client is not None
        try:
            reply = self._client.execute_command(*args)
        except (redis.RedisError, OSError) as exc:
            # Lost connection, or a peer that does not speak RESP: either way the
            # stream cannot be trusted any more.
            self.close()
            raise Disconnected(self._lost_message(exc)) from None
        except BaseException:
            # Ctrl-C in the middle of a reply: the stream is out of sync.
            self.close()
            raise
        if isinstance(reply, ErrorReply):
            return reply
        name = _text(args[0]).lower()
        if len(args) == 2 and name == "auth":
            self.endpoint.password = _text(args[1])  # reconnections authenticate again
        elif len(args) >= 2 and name == "hello" and _text(args[1]) in ("2", "3"):
            self.protocol = int(_text(args[1]))  # reconnections speak it again
        return reply

    def read_next(self) -> Reply:
        """Read one more reply on the connection (MONITOR streams)."""
        if self._client is None:
            raise Disconnected("Error: not connected")
        try:
            return self._client.connection.read_response()
        except (redis.RedisError, OSError) as exc:
            self.close()
            raise Disconnected(self._lost_message(exc)) from None
        except BaseException:
            self.close()
            raise

    def socket(self) -> socket.socket:
        self.ensure_connected()
        assert self._client is not None
        return self._client.connection._sock

    @staticmethod
    def _lost_message(exc: BaseException) -> str:
        text = str(exc)
        if "closed by server" in text or isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            return "Error: Server closed the connection"
        if isinstance(exc, redis.exceptions.InvalidResponse):
            return f"Error: {exc}"
        return f"Error: {_reason(exc)}"


def _text(arg: Arg) -> str:
    return arg.decode("utf-8", errors="surrogateescape") if isinstance(arg, bytes) else str(arg)
