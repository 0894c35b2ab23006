"""Options of the ``disque`` data source: parsing helpers shared by every part.

All options are strings, and their names are case-insensitive (as in Spark).
Common to every part: ``nodes`` (comma-separated seeds, default
127.0.0.1:7711), ``password``, ``queue``; TLS: ``tls`` (true/false),
``tlsCaCert``, ``tlsCert``, ``tlsKey`` (PEM files, at the same paths on the
driver and every executor), ``tlsInsecure`` (any of them implies ``tls``).

Each part's own options are listed in its module: :mod:`disque_spark.writer`,
:mod:`disque_spark.snapshot`, :mod:`disque_spark.stream`. A bad value raises
``DisqueError``.
"""

from __future__ import annotations

from typing import Any

from disque.tls import TLS, TLSError
from disque_spark.client import DisqueError


def _opt(options: Any, name: str, default: str | None = None) -> str | None:
    value = options.get(name)
    if value is None:  # options are case-insensitive in Spark; be so here too
        lowered = name.lower()
        value = next((v for k, v in options.items() if k.lower() == lowered), None)
    return default if value is None or value == "" else str(value)


def _opt_int(options: Any, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    raw = _opt(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DisqueError(f"disque: option '{name}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise DisqueError(f"disque: option '{name}' must be >= {minimum}, got {value}")
    return value


def _opt_bool(options: Any, name: str, default: bool = False) -> bool:
    raw = _opt(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off"):
        return False
    raise DisqueError(f"disque: option '{name}' must be true or false, got {raw!r}")


def _opt_list(options: Any, name: str) -> list[str]:
    raw = _opt(options, name)
    return [x.strip() for x in raw.split(",") if x.strip()] if raw else []


def _opt_tls(options: Any) -> TLS | None:
    """``tls tlsCaCert tlsCert tlsKey tlsInsecure`` as TLS settings, their files
    loaded here on the driver so a wrong path fails the query, not each task."""
    files = [_opt(options, name) for name in ("tlsCaCert", "tlsCert", "tlsKey")]
    insecure = _opt_bool(options, "tlsInsecure")
    implied = any(files) or insecure
    if not _opt_bool(options, "tls", default=implied):
        if implied:
            raise DisqueError(
                "disque: option 'tls' is false but tlsCaCert, tlsCert, tlsKey or tlsInsecure is set"
            )
        return None
    tls = TLS(*files, insecure=insecure)
    try:
        tls.check()
    except TLSError as exc:
        raise DisqueError(f"disque: bad TLS options: {exc}") from None
    return tls
