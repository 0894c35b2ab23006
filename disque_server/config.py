"""Configuration: the directive table, config files, CONFIG GET/SET/REWRITE.

Every directive is one ``Param`` in ``PARAMS``. A param marked ``visible``
is listed by CONFIG GET (exactly the set Disque 1.0-rc1 lists); the others
(appendfilename, cluster-config-file, protected-mode, ...) are set in the
config file or on the command line only, as in Disque.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from disque_common import splitargs


class ConfigError(Exception):
    """A bad directive or value; ``str()`` is the message for the user."""


# ---------------------------------------------------------------------------
# Argument splitting of config lines, as Redis' sdssplitargs
# ---------------------------------------------------------------------------


def split_args(line: str) -> list[str]:
    """A config line's words, split as Redis does (sdssplitargs, the one splitter
    of the node and the CLI). Text, as config values are: a \\xHH escape that makes
    no UTF-8 is kept as a surrogate escape (encode with "surrogateescape").

    Raises ConfigError on unbalanced quotes.
    """
    try:
        words = splitargs.split_args(line)
    except splitargs.SplitError:
        raise ConfigError("Unbalanced quotes in configuration line") from None
    return [w.decode("utf-8", errors="surrogateescape") for w in words]


# ---------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------

_UNITS: Final = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1024,
    "m": 1000**2,
    "mb": 1024**2,
    "g": 1000**3,
    "gb": 1024**3,
}


def parse_memory(text: str) -> int:
    s = text.strip().lower()
    digits = s.rstrip("kmgb")
    unit = s[len(digits) :]
    if unit not in _UNITS or not digits.lstrip("-").isdigit():
        raise ValueError(text)
    value = int(digits) * _UNITS[unit]
    if value < 0:
        raise ValueError(text)
    return value


def parse_int(text: str) -> int:
    return int(text.strip())


_STRTOLL: Final = re.compile(r"[+-]?[0-9]+")
LLONG_MIN: Final = -(2**63)
LLONG_MAX: Final = 2**63 - 1


def parse_ll_strict(text: str) -> int:
    """A number as CONFIG SET reads one (Disque's getLongLongFromObject): digits after
    an optional sign, no space, no unit, within a long long."""
    if not _STRTOLL.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    if not LLONG_MIN <= value <= LLONG_MAX:
        raise ValueError(text)
    return value


def parse_ip(text: str) -> str:
    """An IPv4 or IPv6 address, or empty."""
    if text:
        ipaddress.ip_address(text)  # ValueError when it is not one
    return text


def parse_port(text: str) -> int:
    """A TCP port, or 0 for none."""
    port = int(text.strip())
    if not 0 <= port <= 65535:
        raise ValueError(text)
    return port


def parse_file_name(text: str) -> str:
    """A file's name in ``dir``, not a path (Disque's appendfilename: "can't be a
    path, just a filename")."""
    if text in ("", ".", "..") or "/" in text:
        raise ValueError(text)
    return text


def parse_bool(text: str) -> bool:
    s = text.lower()
    if s not in ("yes", "no"):
        raise ValueError(text)
    return s == "yes"


def parse_octal(text: str) -> str:
    """unixsocketperm: octal permission bits, kept as written in octal (CONFIG GET)."""
    value = int(text.strip(), 8)
    if not 0 <= value <= 0o777:
        raise ValueError(text)
    return f"{value:o}"


def parse_output_limit(text: str) -> str:
    """client-output-buffer-limit: groups of <class> <hard> <soft> <soft-seconds>;
    Disque has one class, normal. Kept in bytes, as CONFIG GET shows it."""
    words = text.split()
    if not words or len(words) % 4:
        raise ValueError("wrong number of arguments")
    limits = ""
    for i in range(0, len(words), 4):
        klass, hard, soft, seconds = words[i : i + 4]
        if klass.lower() != "normal":
            raise ValueError("Unrecognized client limit class")
        if parse_int(seconds) < 0:
            raise ValueError("Negative number of seconds in soft limit is invalid")
        limits = f"normal {parse_memory(hard)} {parse_memory(soft)} {int(seconds)}"
    return limits


def output_limits(value: str) -> tuple[int, int, int]:
    """(hard bytes, soft bytes, soft seconds) of a parsed client-output-buffer-limit."""
    _, hard, soft, seconds = value.split()
    return int(hard), int(soft), int(seconds)


SYSLOG_FACILITIES: Final = (
    "user",
    "local0",
    "local1",
    "local2",
    "local3",
    "local4",
    "local5",
    "local6",
    "local7",
)


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    parse: Callable[[str], Any] = str
    visible: bool = True  # listed by CONFIG GET
    settable: bool = True  # changeable by CONFIG SET
    minimum: int | None = None
    choices: tuple[str, ...] = ()
    multi: bool = False  # takes several words (bind, client-output-buffer-limit)
    # CONFIG SET's own rules where Disque's differ from the file's: a lower bound, a
    # number without unit (parse_ll_strict), and a range values are brought into (hz).
    set_minimum: int | None = None
    set_parse: Callable[[str], Any] | None = None
    clamp: tuple[int, int] | None = None

    def convert(self, words: list[str], for_set: bool = False) -> Any:
        if self.multi:
            return self.parse(" ".join(words))
        if len(words) != 1:
            raise ValueError("wrong number of arguments")
        raw = words[0]
        if self.choices:
            if raw.lower() not in self.choices:
                raise ValueError(raw)
            return raw.lower()
        parse, minimum = self.parse, self.minimum
        if for_set:
            parse = self.set_parse or (parse_ll_strict if parse is parse_int else parse)
            minimum = self.set_minimum if self.set_minimum is not None else minimum
        value = parse(raw)
        if minimum is not None and value < minimum:
            raise ValueError(raw)
        if self.clamp is not None:
            value = min(max(value, self.clamp[0]), self.clamp[1])
        return value


_P: Final = Param
PARAMS: Final[dict[str, Param]] = {
    p.name: p
    for p in [
        # Listed by CONFIG GET, in Disque 1.0-rc1's order.
        _P("requirepass", ""),
        _P("unixsocket", "", settable=False),
        _P("logfile", "", settable=False),
        _P("pidfile", "", settable=False),
        _P("maxmemory", 1024**3, parse_memory),  # 1 GB, as Disque 1.0-rc1
        _P("maxmemory-samples", 5, parse_int, minimum=1),
        _P("timeout", 0, parse_int, minimum=0),
        _P("auto-aof-rewrite-percentage", 100, parse_int, minimum=0),
        _P(
            "auto-aof-rewrite-min-size",
            64 * 1024 * 1024,
            parse_memory,
            set_parse=parse_ll_strict,
            set_minimum=0,
        ),
        _P("slowlog-log-slower-than", 10000, parse_int, set_minimum=0),
        _P("latency-monitor-threshold", 0, parse_int, minimum=0),
        _P("slowlog-max-len", 128, parse_int, minimum=0),
        _P("port", 7711, parse_port, settable=False, minimum=0),
        _P("tcp-backlog", 511, parse_int, settable=False, minimum=0),
        _P("databases", 16, parse_int, settable=False, minimum=1),
        _P("maxclients", 10000, parse_int, minimum=1),
        _P("watchdog-period", 0, parse_int, minimum=0),
        _P("hz", 10, parse_int, set_minimum=0, clamp=(1, 500)),  # Disque's CONFIG_MIN/MAX_HZ
        _P("cluster-node-timeout", 15000, parse_int, minimum=1),
        _P("tcp-keepalive", 0, parse_int, minimum=0),
        _P("no-appendfsync-on-rewrite", False, parse_bool),
        _P("daemonize", False, parse_bool, settable=False),
        _P("activerehashing", True, parse_bool),
        _P("aof-rewrite-incremental-fsync", True, parse_bool),
        _P("aof-load-truncated", True, parse_bool),
        _P("aof-enqueue-jobs-once", False, parse_bool),
        _P("maxmemory-policy", "acks", choices=("acks", "noeviction")),
        _P("loglevel", "notice", choices=("debug", "verbose", "notice", "warning")),
        _P("appendfsync", "everysec", choices=("always", "everysec", "no")),
        _P("syslog-facility", "local0", settable=False, choices=SYSLOG_FACILITIES),
        _P("appendonly", False, parse_bool),
        _P("dir", "", settable=True),
        _P("client-output-buffer-limit", "normal 0 0 0", parse_output_limit, multi=True),
        _P("unixsocketperm", "0", parse_octal, settable=False),
        _P("bind", "", settable=False, multi=True),
        # Startup-only directives, not listed by CONFIG GET (as in Disque).
        _P("appendfilename", "disque.aof", parse_file_name, visible=False, settable=False),
        _P("cluster-config-file", "nodes.conf", visible=False, settable=False),
        _P("protected-mode", True, parse_bool, visible=False, settable=False),
        _P("queue-max-idle-time", 120, parse_int, visible=False, settable=False, minimum=1),
        _P("syslog-enabled", False, parse_bool, visible=False, settable=False),
        _P("syslog-ident", "disque", visible=False, settable=False),
        # Beyond Disque: an authenticated cluster bus and TLS.
        _P("cluster-password", "", visible=False, settable=False),
        _P("tls-port", 0, parse_port, visible=False, settable=False, minimum=0),
        _P("tls-cert-file", "", visible=False, settable=False),
        _P("tls-key-file", "", visible=False, settable=False),
        _P("tls-ca-cert-file", "", visible=False, settable=False),
        _P(
            "tls-auth-clients",
            "no",
            visible=False,
            settable=False,
            choices=("yes", "no", "optional"),
        ),
        _P("tls-cluster", False, parse_bool, visible=False, settable=False),
        # Beyond Disque: containers and NAT, as Redis 7 (what this node tells its peers).
        _P("cluster-port", 0, parse_port, visible=False, settable=False, minimum=0),
        _P("cluster-announce-ip", "", parse_ip, visible=False, settable=False),
        _P("cluster-announce-port", 0, parse_port, visible=False, settable=False, minimum=0),
        _P("cluster-announce-bus-port", 0, parse_port, visible=False, settable=False, minimum=0),
        # Beyond Disque: a Prometheus endpoint (see disque_server/metrics.py).
        _P("metrics-port", 0, parse_port, visible=False, settable=False, minimum=0),
        _P("metrics-bind", "", visible=False, settable=False, multi=True),
        _P("metrics-max-queues", 1000, parse_int, visible=False, settable=False, minimum=0),
    ]
}


class Config:
    """Current values of all directives, plus where they came from."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {name: p.default for name, p in PARAMS.items()}
        self.values["dir"] = os.getcwd()
        self.explicit: set[str] = set()  # set by file or command line
        self.file: str | None = None  # absolute path of the config file, if any
        self.listeners: list[Callable[[str, Any], None]] = []

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    # ---- loading -----------------------------------------------------------
    def load_text(self, text: str, source: str) -> None:
        """Apply config text; errors name the source and the line."""
        for lineno, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                words = split_args(stripped)
                self.apply(words[0].lower(), words[1:])
            except (ConfigError, ValueError, IndexError) as exc:
                raise ConfigError(
                    "\n*** FATAL CONFIG FILE ERROR ***\n"
                    f"Reading the configuration file '{source}', at line {lineno}\n"
                    f">>> '{stripped}'\n"
                    f"{_explain(exc)}"
                ) from None

    def apply(self, name: str, words: list[str]) -> None:
        param = PARAMS.get(name)
        if param is None:
            raise ConfigError("Bad directive or wrong number of arguments")
        try:
            value = param.convert(words)
        except ValueError:
            raise ConfigError(f"Invalid argument for '{name}'") from None
        if name == "dir":
            value = os.path.abspath(value)
        self.values[name] = value
        self.explicit.add(name)

    # ---- CONFIG GET / SET ----------------------------------------------------
    def get(self, pattern: str) -> list[tuple[str, str]]:
        pat = pattern.lower()
        return [
            (name, format_value(self.values[name]))
            for name, p in PARAMS.items()
            if p.visible and fnmatch.fnmatchcase(name, pat)
        ]

    def set(self, name: str, raw: str) -> None:
        """CONFIG SET: raises ConfigError with the exact Disque error text."""
        name = name.lower()
        param = PARAMS.get(name)
        if param is None or not param.visible or not param.settable:
            raise ConfigError(f"Unsupported CONFIG parameter: {name}")
        try:
            value = param.convert(raw.split() if param.multi else [raw], for_set=True)
            if name == "dir":
                os.chdir(raw)
                value = os.getcwd()
        except (ValueError, OSError):
            raise ConfigError(f"Invalid argument '{raw}' for CONFIG SET '{name}'") from None
        old = self.values[name]
        self.values[name] = value
        self.explicit.add(name)
        for listener in self.listeners:
            try:
                listener(name, value)
            except ConfigError:
                self.values[name] = old
                raise

    # ---- CONFIG REWRITE -------------------------------------------------------
    def rewrite(self) -> None:
        """Rewrite the config file: keep comments and foreign lines, update ours."""
        if not self.file:
            raise ConfigError("The server is running without a config file")
        try:
            with open(self.file) as f:
                old_lines = f.read().splitlines()
        except FileNotFoundError:
            old_lines = []
        written: set[str] = set()
        out: list[str] = []
        for line in old_lines:
            stripped = line.strip()
            name = ""
            if stripped and not stripped.startswith("#"):
                try:
                    name = split_args(stripped)[0].lower()
                except (ConfigError, IndexError):
                    name = ""
            if name in PARAMS:
                if name not in written and self._should_write(name):
                    out.append(self._line(name))
                    written.add(name)
                continue  # duplicates and defaults-now lines are dropped
            out.append(line)
        extra = [n for n in PARAMS if n not in written and self._should_write(n)]
        if extra:
            out.append("# Generated by CONFIG REWRITE")
            out.extend(self._line(n) for n in extra)
        atomic_write(self.file, "\n".join(out) + "\n")

    def _should_write(self, name: str) -> bool:
        return name in self.explicit or self.values[name] != PARAMS[name].default

    def _line(self, name: str) -> str:
        value = format_value(self.values[name])
        if (
            value == ""
            or not PARAMS[name].multi
            and any(
                c.isspace() or c in "\"'" or not (c.isascii() and c.isprintable()) for c in value
            )
        ):
            value = quote_word(value)
        return f"{name} {value}"


_QUOTED_ESCAPES: Final = {
    ord("\\"): "\\\\",
    ord('"'): '\\"',
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord("\a"): "\\a",
    ord("\b"): "\\b",
}


def quote_word(value: str) -> str:
    """A double-quoted word that split_args reads back as ``value``, as Redis'
    sdscatrepr: bytes that are not printable ASCII become \\xHH."""
    out = []
    for b in value.encode("utf-8", errors="surrogateescape"):
        escaped = _QUOTED_ESCAPES.get(b)
        out.append(escaped if escaped else chr(b) if 32 <= b < 127 else f"\\x{b:02x}")
    return '"' + "".join(out) + '"'


def _explain(exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, IndexError) or not text:
        return "Bad directive or wrong number of arguments"
    return text


def atomic_write(path: str, text: str) -> None:
    """Write a file so that a crash leaves either the old or the new content."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
