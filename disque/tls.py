"""TLS settings of a client connection, as redis-cli's --tls --cacert --cert --key --insecure.

One place for `disque`, `disque-tui` and the Spark data source to name the
options (`TLS_OPTIONS`), to turn the settings into redis-py arguments, to load the files before any connection
(so a missing or wrong file is one line naming it, not an errno out of the
middle of a handshake) and to word a failed handshake.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any, Final

import redis


@dataclass(frozen=True)
class TLSOption:
    """One of the TLS options every client of the project takes, as redis-cli spells it."""

    flag: str
    dest: str
    help: str
    takes_file: bool = False


TLS_OPTIONS: tuple[TLSOption, ...] = (
    TLSOption("--tls", "tls", "Establish a secure TLS connection (the node's tls-port)."),
    TLSOption("--cacert", "cacert", "CA certificate file to verify the node with.", True),
    TLSOption("--cert", "cert", "Client certificate to authenticate with.", True),
    TLSOption("--key", "key", "Private key file to authenticate with.", True),
    TLSOption(
        "--insecure",
        "insecure",
        "Allow insecure TLS connection by skipping certificate validation.",
    ),
)


class TLSError(ValueError):
    """Unusable TLS settings; str() names the file and the reason."""


@dataclass(frozen=True)
class TLS:
    """TLS towards the nodes: verify them against `cacert` (the system CAs when
    None) unless `insecure`; present `cert`/`key` when the node asks for a
    client certificate (tls-auth-clients)."""

    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False

    @classmethod
    def from_options(
        cls, tls: bool, cacert: str | None, cert: str | None, key: str | None, insecure: bool
    ) -> TLS | None:
        """None for a plain connection; any TLS option implies --tls (as in redis-cli)."""
        if not (tls or cacert or cert or key or insecure):
            return None
        return cls(cacert or None, cert or None, key or None, bool(insecure))

    def client_kwargs(self) -> dict[str, Any]:
        """Arguments of `redis.Redis` and `redis.asyncio.Redis`."""
        return {"ssl": True, **self._ssl_kwargs()}

    def pool_kwargs(self) -> dict[str, Any]:
        """Arguments of a (synchronous) `redis.ConnectionPool`."""
        return {"connection_class": redis.SSLConnection, **self._ssl_kwargs()}

    def _ssl_kwargs(self) -> dict[str, Any]:
        # Nodes are reached by the addresses HELLO lists, which their
        # certificates need not name: like redis-cli (hiredis), verify the
        # chain, not the host name.
        return {
            "ssl_ca_certs": self.cacert,
            "ssl_certfile": self.cert,
            "ssl_keyfile": self.key,
            "ssl_cert_reqs": "none" if self.insecure else "required",
            "ssl_check_hostname": False,
        }

    def context(self) -> ssl.SSLContext:
        """An SSL context as ``_ssl_kwargs`` asks redis-py for (the pipelined
        asyncio connection's: pipelining.py)."""
        context = ssl.create_default_context(cafile=self.cacert)
        context.check_hostname = False
        if self.insecure:
            context.verify_mode = ssl.CERT_NONE
        if self.cert:
            context.load_cert_chain(self.cert, self.key, password=_no_password)
        return context

    def check(self) -> None:
        """Load every file now, as each handshake will; raise TLSError naming the bad one."""
        if self.key and not self.cert:
            raise TLSError(f"private key {self.key} given without a client certificate")
        for what, path in (
            ("CA certificate", self.cacert),
            ("client certificate", self.cert),
            ("private key", self.key),
        ):
            if path:
                _check_readable(what, path)
        context = ssl.create_default_context()
        if self.cacert:
            try:
                context.load_verify_locations(cafile=self.cacert)
            except ssl.SSLError as exc:
                raise TLSError(f"CA certificate {self.cacert}: {ssl_reason(exc)}") from None
        if self.cert:
            self._check_chain(context)

    def _check_chain(self, context: ssl.SSLContext) -> None:
        # A callback instead of no password: OpenSSL would otherwise prompt on
        # the terminal for an encrypted key, and these clients take no passphrase.
        try:
            context.load_cert_chain(self.cert or "", self.key, password=_no_password)
        except _EncryptedKey:
            raise TLSError(
                f"private key {self.key or self.cert} is encrypted "
                "(a key without a passphrase is needed)"
            ) from None
        except ssl.SSLError as exc:
            reason = ssl_reason(exc)
            if reason == "PEM lib":
                reason = (
                    "not a PEM certificate with its key (give the key file too)"
                    if self.key is None
                    else "not a PEM certificate and key"
                )
            files = self.cert if self.key is None else f"{self.cert} with key {self.key}"
            raise TLSError(f"client certificate {files}: {reason}") from None


class _EncryptedKey(Exception):
    pass


def _no_password() -> bytes:
    raise _EncryptedKey


def _check_readable(what: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise TLSError(f"{what} {path}: {exc.strerror or exc}") from None


def ssl_reason(exc: ssl.SSLError) -> str:
    """ "[X509: KEY_VALUES_MISMATCH] key values mismatch (_ssl.c:3926)" as "key values mismatch"."""
    text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else str(exc)
    return re.sub(r"^\[[^\]]*\]\s*|\s*\(_ssl\.c:\d+\)$", "", text) or str(exc)


# redis-py's words for a node that hangs up before its first reply.
CLOSED_BY_SERVER: Final = "Connection closed by server."
# OpenSSL 3's reason for an EOF where a handshake message was due (when Python
# does not raise it as SSLEOFError).
_EOF_REASONS: Final = frozenset({"UNEXPECTED_EOF_WHILE_READING"})


def handshake_failure(exc: BaseException) -> str | None:
    """ "TLS handshake failed: <why>" when `exc` comes from a failed handshake, else None.

    redis-py wraps the `ssl.SSLError` in a ConnectionError whose text carries
    an errno and OpenSSL's source line; the reason is found down the chain.
    A node that hangs up during the handshake (an EOF) closed the connection:
    on TLS 1.3 a node refusing the client's certificate does so in the
    handshake or just after it, depending on timing, and both read the same:
    CLOSED_BY_SERVER, which the callers explain (closed_hint).
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLEOFError) or getattr(seen, "reason", None) in _EOF_REASONS:
            return CLOSED_BY_SERVER
        if isinstance(seen, ssl.SSLError):
            reason = ssl_reason(seen)
            if seen.reason == "WRONG_VERSION_NUMBER":
                reason += " (is it the node's tls-port?)"
            return f"TLS handshake failed: {reason}"
        seen = seen.__cause__ or seen.__context__
    return None


def closed_hint(tls: TLS | None) -> str:
    """Why a node may hang up before its first reply, as far as TLS goes: the text to
    append to "Connection closed by server", or ""."""
    if tls is None:  # a TLS port drops a client that does not start with a handshake
        return " (is it a TLS port? see --tls)"
    if tls.cert is None:  # tls-auth-clients: the node ends the session, not the handshake
        return " (does the node require a client certificate? see --cert and --key)"
    return ""
