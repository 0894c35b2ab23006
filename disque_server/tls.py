"""TLS contexts for the client port (``tls-port``) and the cluster bus (``tls-cluster``).

Beyond Disque. The node presents ``tls-cert-file``/``tls-key-file``; peers
and (with ``tls-auth-clients``) clients are verified against
``tls-ca-cert-file``. A plain connection to a TLS port fails its handshake
and is closed.
"""

from __future__ import annotations

import os
import ssl

from disque_server.config import Config, ConfigError


def _require(config: Config) -> None:
    if not config["tls-cert-file"] or not config["tls-key-file"]:
        raise ConfigError("TLS needs tls-cert-file and tls-key-file")
    for name in ("tls-cert-file", "tls-key-file", "tls-ca-cert-file"):
        path = config[name]
        if path and not os.access(path, os.R_OK):
            raise ConfigError(f"TLS: cannot read {name} '{path}'")


def server_context(config: Config, for_bus: bool = False) -> ssl.SSLContext:
    _require(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(config["tls-cert-file"], config["tls-key-file"])
    mode = "yes" if for_bus else config["tls-auth-clients"]
    if mode != "no":
        if not config["tls-ca-cert-file"]:
            raise ConfigError("verifying TLS peers needs tls-ca-cert-file")
        ctx.load_verify_locations(config["tls-ca-cert-file"])
        ctx.verify_mode = ssl.CERT_REQUIRED if mode == "yes" else ssl.CERT_OPTIONAL
    return ctx


def bus_client_context(config: Config) -> ssl.SSLContext:
    """For outbound bus links: present our certificate, verify the peer's."""
    _require(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False  # nodes are addressed by IP; the CA is the identity
    ctx.load_cert_chain(config["tls-cert-file"], config["tls-key-file"])
    if not config["tls-ca-cert-file"]:
        raise ConfigError("tls-cluster needs tls-ca-cert-file")
    ctx.load_verify_locations(config["tls-ca-cert-file"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
